/*
 * declare.c - how a tool is declared to the LLM APIs and to MCP: its schema
 * in the form every client accepts, the name those APIs allow, and MCP's
 * metadata (title, annotations, output_schema), parsed from its definition.
 *
 * Schemas are normalised for listing, not refused (toolexecd.tools(5)): the
 * clients need "type": "object" at the top (the MCP SDKs reject a whole
 * tools/list over one tool without it; Anthropic's Tool type requires it)
 * and object property schemas. Arguments are always an object, so adding
 * "type": "object", reading ["object"] as "object", and writing the boolean
 * schemas true and false as {} and {"not": {}} change nothing a call may
 * pass. A schema whose top-level type has no "object" could never pass a
 * call: that is refused at load.
 *
 * "mcp": {"content": "blocks"} says the tool's ok value is MCP's content
 * ({"content": [blocks], "structuredContent": {...}}): the listing tells
 * toolexec mcp so in the tool's _meta, the front checks and passes the
 * blocks through, and an output_schema then describes structuredContent.
 * The daemon's contract does not change: the value stays data to it.
 * "mcp": {"task_support": ...} is MCP's taskSupport, for the front's
 * tasks extension, also in _meta.
 *
 * Names: OpenAI and Anthropic allow [a-zA-Z0-9_-]{1,64}; a definition's
 * name may also hold '.'. In those formats '.' becomes '_' ("fs.read" is
 * listed as "fs_read"), and a call naming "fs_read" finds "fs.read". Two
 * tools that would list under one name are refused at load, so the mapping
 * is one-to-one. MCP allows '.' and gets the name unchanged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "declare.h"
#include "tool.h"
#include "util.h"

/* A copy of schema (an object) as every client takes it; NULL with err set
 * (naming file, key and pointer) when no object could pass it. */
static json_t *listed_schema(const char *file, const char *key, const json_t *schema, char *err,
                             size_t errlen)
{
    json_t *s = json_deep_copy(schema);
    if (!s) {
        td_fail(err, errlen, "%s: %s: out of memory", file, key);
        return NULL;
    }
    json_t *type = json_object_get(s, "type");
    bool object = !type;
    if (json_is_string(type)) {
        object = strcmp(json_string_value(type), "object") == 0;
    } else if (json_is_array(type)) {
        size_t i;
        json_t *t;
        json_array_foreach(type, i, t) object |=
            json_is_string(t) && strcmp(json_string_value(t), "object") == 0;
    }
    if (!object) {
        json_decref(s);
        td_fail(err, errlen,
                "%s: %s/type: must allow \"object\" (a call's arguments are an object)", file, key);
        return NULL;
    }
    json_object_set_new(s, "type", json_string("object"));
    json_t *props = json_object_get(s, "properties");
    const char *name;
    json_t *p;
    json_object_foreach(props, name, p)
    {
        if (json_is_true(p))
            json_object_set_new(props, name, json_object());
        else if (json_is_false(p))
            json_object_set_new(props, name, json_pack("{s:{}}", "not"));
    }
    return s;
}

static const char *const hints[] = {"readOnlyHint", "destructiveHint", "idempotentHint",
                                    "openWorldHint"};

static int parse_annotations(const char *file, const json_t *v, struct td_tool *t, char *err,
                             size_t errlen)
{
    if (!json_is_object(v))
        return td_fail(err, errlen, "%s: annotations: expected an object", file);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        size_t i = 0;
        while (i < sizeof(hints) / sizeof(hints[0]) && strcmp(key, hints[i]) != 0)
            i++;
        if (i == sizeof(hints) / sizeof(hints[0]))
            return td_fail(err, errlen,
                           "%s: annotations.%s: unknown key (readOnlyHint, destructiveHint, "
                           "idempotentHint, openWorldHint)",
                           file, key);
        if (!json_is_boolean(val))
            return td_fail(err, errlen, "%s: annotations.%s: expected true or false", file, key);
    }
    t->annotations = json_incref((json_t *)v);
    return 0;
}

/* RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ) */
static bool scope_token(const char *s)
{
    if (!*s)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x21 || *p > 0x7e || *p == '"' || *p == '\\')
            return false;
    return true;
}

/* "scopes": which OAuth scopes let a token call the tool over the MCP HTTP
 * front (daemon/cli/mcp_auth.h); declared to MCP in the tool's _meta. */
static int parse_scopes(const char *file, const json_t *v, struct td_tool *t, char *err,
                        size_t errlen)
{
    size_t i;
    const json_t *s;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return td_fail(err, errlen, "%s: scopes: expected a non-empty array of scope names", file);
    json_array_foreach(v, i, s) if (!json_is_string(s) ||
                                    !scope_token(json_string_value(
                                        s))) return td_fail(err, errlen,
                                                            "%s: scopes[%zu]: expected an OAuth "
                                                            "scope (printable ASCII, no space, "
                                                            "'\"' or '\\')",
                                                            file, i);
    t->scopes = json_incref((json_t *)v);
    return 0;
}

/* "mcp": MCP-only declarations: "content", "value" (the default) or
 * "blocks"; "task_support", MCP's taskSupport ("forbidden", "optional",
 * the default, or "required"). */
static int parse_mcp(const char *file, const json_t *v, struct td_tool *t, char *err, size_t errlen)
{
    static const char *const support[] = {"forbidden", "optional", "required"};
    if (!json_is_object(v))
        return td_fail(err, errlen, "%s: mcp: expected an object ({\"content\": \"blocks\"})",
                       file);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        const char *s = json_string_value(val);
        if (strcmp(key, "task_support") == 0) {
            size_t i = 0;
            while (s && i < 3 && strcmp(s, support[i]) != 0)
                i++;
            if (!s || i == 3)
                return td_fail(err, errlen,
                               "%s: mcp.task_support: expected \"forbidden\", \"optional\" or "
                               "\"required\"",
                               file);
            t->mcp_tasks = support[i];
        } else if (strcmp(key, "content") != 0) {
            return td_fail(err, errlen, "%s: mcp.%s: unknown key (content, task_support)", file,
                           key);
        } else if (!s || (strcmp(s, "value") != 0 && strcmp(s, "blocks") != 0)) {
            return td_fail(err, errlen, "%s: mcp.content: expected \"value\" or \"blocks\"", file);
        } else {
            t->mcp_blocks = strcmp(s, "blocks") == 0;
        }
    }
    return 0;
}

int td_declare_parse(const char *file, const json_t *def, struct td_tool *t, char *err,
                     size_t errlen)
{
    if (!(t->api_name = strdup(t->name)))
        return -ENOMEM;
    for (char *p = t->api_name; *p; p++)
        if (*p == '.')
            *p = '_';
    if (!(t->listed_schema = listed_schema(file, "schema", t->schema, err, errlen)))
        return -EINVAL;

    json_t *v = json_object_get(def, "title");
    if (v && (!te_json_is_text(v) || json_string_length(v) == 0))
        return td_fail(err, errlen, "%s: title: expected a non-empty string", file);
    if (v && !(t->title = strdup(json_string_value(v))))
        return -ENOMEM;

    v = json_object_get(def, "annotations");
    if (v && parse_annotations(file, v, t, err, errlen) < 0)
        return -EINVAL;

    v = json_object_get(def, "scopes");
    if (v && parse_scopes(file, v, t, err, errlen) < 0)
        return -EINVAL;

    v = json_object_get(def, "mcp");
    if (v && parse_mcp(file, v, t, err, errlen) < 0)
        return -EINVAL;

    v = json_object_get(def, "strict");
    if (v && !json_is_boolean(v))
        return td_fail(err, errlen, "%s: strict: expected true or false", file);
    t->strict = json_is_true(v);

    v = json_object_get(def, "output_schema");
    if (v) {
        if (!json_is_object(v))
            return td_fail(err, errlen, "%s: output_schema: expected a JSON object", file);
        /* Validated in its listed form: structuredContent is an object. */
        if (!(t->output_schema = listed_schema(file, "output_schema", v, err, errlen)))
            return -EINVAL;
        char why[512];
        if (te_schema_compile(t->output_schema, &t->output_validator, why, sizeof(why)) < 0)
            return td_fail(err, errlen, "%s: output_schema%s%s", file, why[0] == '/' ? "" : ": ",
                           why);
    }
    return 0;
}

void td_declare_free(struct td_tool *t)
{
    json_decref(t->listed_schema);
    free(t->api_name);
    free(t->title);
    json_decref(t->annotations);
    json_decref(t->scopes);
    json_decref(t->output_schema);
    te_schema_free(t->output_validator);
}

int td_declare_check_names(const struct td_registry *r, char *err, size_t errlen)
{
    /* Sorted by name, not by API name: n is a few hundred at most. */
    for (size_t i = 0; i < r->n; i++)
        for (size_t j = 0; j < r->n; j++)
            if (i != j && strcmp(r->tools[i]->api_name, r->tools[j]->name) == 0 &&
                strcmp(r->tools[i]->name, r->tools[j]->name) != 0)
                return td_fail(err, errlen,
                               "%s: name: \"%s\" is declared to OpenAI and Anthropic as \"%s\", "
                               "the name of the tool in %s",
                               r->tools[i]->file, r->tools[i]->name, r->tools[i]->api_name,
                               r->tools[j]->file);
            else if (i < j && strcmp(r->tools[i]->api_name, r->tools[j]->api_name) == 0)
                return td_fail(err, errlen,
                               "%s: name: \"%s\" and \"%s\" (%s) are both declared to OpenAI and "
                               "Anthropic as \"%s\"",
                               r->tools[j]->file, r->tools[j]->name, r->tools[i]->name,
                               r->tools[i]->file, r->tools[j]->api_name);
    return 0;
}

json_t *td_declare_tool(const struct td_tool *t, const char *format)
{
    bool mcp = strcmp(format, "mcp") == 0;
    json_t *d =
        te_tool_declaration(format, mcp ? t->name : t->api_name, t->description, t->listed_schema);
    if (!d)
        return NULL;
    if (strcmp(format, "openai_responses") == 0)
        json_object_set_new(d, "strict", json_boolean(t->strict));
    else if (strcmp(format, "openai") == 0 && t->strict)
        json_object_set_new(json_object_get(d, "function"), "strict", json_true());
    if (mcp) {
        if (t->title)
            json_object_set_new(d, "title", json_string(t->title));
        if (t->annotations)
            json_object_set(d, "annotations", t->annotations);
        if (t->output_schema)
            json_object_set(d, "outputSchema", t->output_schema);
        json_t *meta = json_object();
        if (t->scopes) /* the key mcp_auth.h's MCP_AUTH_META_SCOPES reads */
            json_object_set(meta, "toolexecd/scopes", t->scopes);
        if (t->mcp_blocks) /* the keys toolexec mcp's mcp_toolinfo.c reads */
            json_object_set_new(meta, "toolexecd/content", json_string("blocks"));
        if (t->mcp_tasks)
            json_object_set_new(meta, "toolexecd/taskSupport", json_string(t->mcp_tasks));
        if (json_object_size(meta))
            json_object_set(d, "_meta", meta);
        json_decref(meta);
    }
    return d;
}

json_t *td_declare_check_output(const struct td_tool *t, const char *call_id, json_t *result)
{
    json_t *ok = json_object_get(result, "ok");
    if (!t || !t->output_validator || !ok)
        return result;
    /* a blocks tool's output_schema is structuredContent's, as MCP has it */
    json_t *checked = t->mcp_blocks ? json_object_get(ok, "structuredContent") : ok;
    char *errors = NULL;
    int n = checked ? te_schema_validate(t->output_validator, checked, &errors) : -1;
    if (!checked)
        errors = strdup("no structuredContent (its \"mcp\" content is blocks: output_schema "
                        "describes their structuredContent)");
    if (n == 0) {
        free(errors);
        return result;
    }
    char detail[1024];
    snprintf(detail, sizeof(detail), "the result does not match the tool's output_schema: %s",
             errors ? errors : "out of memory");
    free(errors);
    json_t *err =
        te_tool_error_new(TE_INVALID_RETURN, t->name, call_id, detail,
                          json_pack("{s:s,s:O}", "error", "output_schema", "value", ok), NULL);
    json_decref(result);
    return err;
}
