/*
 * batch_messages.c - a batch's messages (batch_int.h): each call's content
 * in the shape of the client's LLM API (shapes.c), for batch_completed.
 *
 * A message that goes back to a model (the request names result_format,
 * or the call came in an LLM API's shape) says after the content what the
 * call's confinement refused it and which key decides that (why.h): the
 * tool saw only an error number, and the model would otherwise guess. A
 * native call under the default format keeps its content as it is: it may
 * be read as JSON (toolexec mcp reads it so, and adds the same reasons to
 * its own results).
 */
#include <stdbool.h>
#include <stdlib.h>

#include <jansson.h>

#include "batch_int.h"
#include "bigres.h"
#include "toolexec.h"
#include "why.h"

/* The call's content with the reasons for its denials after it; NULL when
 * it gets none (nothing was refused, no model reads it, no memory). */
static json_t *with_reasons(const struct td_batch *b, const struct call *c)
{
    const json_t *call = json_array_get(b->r.calls, c->index);
    json_t *denied = json_object_get(c->denied, "denied");
    bool model =
        json_is_string(json_object_get(b->req, "result_format")) || json_object_get(call, "shape");
    if (!model || !json_array_size(denied))
        return NULL;
    json_t *why = te_why_denied(denied, b->r.narrow, json_object_get(call, "policy"));
    /* a big result's content is its marker: its text, this once */
    json_t *whole = why ? td_big_materialize(json_pack("{s:O}", "c", c->content)) : NULL;
    json_t *text = json_object_get(whole, "c"), *out = NULL;
    size_t len;
    char *s = json_is_string(text)
                  ? te_why_text(json_string_value(text), json_string_length(text), why, &len)
                  : NULL;
    if (s)
        out = json_stringn(s, len);
    free(s);
    json_decref(whole);
    json_decref(why);
    return out;
}

json_t *td_batch_messages(const struct td_batch *b)
{
    json_t *messages = json_array();
    for (size_t i = 0; messages && i < b->ncalls; i++) {
        const struct call *c = &b->calls[i];
        json_t *shown = with_reasons(b, c);
        json_array_append_new(messages, te_result_message(b->r.format, c->id,
                                                          shown ? shown : c->content, c->is_error));
        json_decref(shown);
    }
    return messages;
}
