/*
 * wordcount - count the lines, words, characters and bytes of a text, like
 * wc(1) does for a file.
 *
 * Arguments: {"text": string}   (required; no other keys)
 * Result:    {"ok": {"lines": n, "words": n, "chars": n, "bytes": n}}
 *
 * Bad arguments are reported with te_error(), i.e. {"error": "..."}: the tool
 * ran fine and tells the model what it did wrong. The daemon passes such
 * errors through unchanged, unlike a crash, which becomes a tool_error.
 *
 * Definitions: a word is a maximal run of non-whitespace bytes (ASCII
 * whitespace, as in the C locale); chars counts Unicode code points (the text
 * is valid UTF-8, jansson guarantees it); lines counts newline characters,
 * plus one for a final line without a newline, so "a\nb" has 2 lines.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <toolexec.h>

static bool is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static json_t *bad_argument(const char *fmt, const char *key)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, key);
    return te_error(json_string(msg));
}

static json_t *wordcount(const te_call *call, void *userdata)
{
    (void)userdata;
    const char *key;
    json_t *value;

    /* Reject unknown keys: a misspelt argument should not be silently
     * ignored, the model would never learn about its mistake. */
    json_object_foreach(call->arguments, key, value)
    {
        if (strcmp(key, "text") != 0)
            return bad_argument("unknown argument \"%.64s\" (expected only \"text\")", key);
    }
    json_t *text = json_object_get(call->arguments, "text");
    if (!text)
        return bad_argument("missing argument \"%s\"", "text");
    if (!json_is_string(text))
        return bad_argument("argument \"%s\" must be a string", "text");

    /* json_string_length(), not strlen(): the text may contain U+0000. */
    const unsigned char *s = (const unsigned char *)json_string_value(text);
    size_t len = json_string_length(text);
    json_int_t lines = 0, words = 0, chars = 0;
    bool in_word = false;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        if ((c & 0xC0) != 0x80) /* not a UTF-8 continuation byte */
            chars++;
        if (c == '\n')
            lines++;
        if (is_space(c)) {
            in_word = false;
        } else if (!in_word) {
            in_word = true;
            words++;
        }
    }
    if (len > 0 && s[len - 1] != '\n')
        lines++;

    return te_ok(json_pack("{s:I, s:I, s:I, s:I}", "lines", lines, "words", words, "chars", chars,
                           "bytes", (json_int_t)len));
}

int main(void)
{
    return te_worker_main(wordcount, NULL);
}
