/*
 * schema_text.c - JSON Schema validator: growable message strings (sbuf) and the JSON pointer /
 * quoting helpers. See schema_int.h for the whole.
 */
#include "schema_int.h"

static bool sb_reserve(sbuf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sb_puts(sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

void sb_putc(sbuf *b, char c)
{
    sb_putn(b, &c, 1);
}

void sb_vprintf(sbuf *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0 || !sb_reserve(b, (size_t)n))
        return;
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void sb_truncate(sbuf *b, size_t len)
{
    b->len = len;
    if (b->p)
        b->p[len] = '\0';
}

/* Append s, keeping at most about max bytes: head "..." tail, both cut on
 * UTF-8 character boundaries so the message stays valid UTF-8. */
void sb_put_clipped(sbuf *b, const char *s, size_t len, size_t max)
{
    if (len <= max) {
        sb_putn(b, s, len);
        return;
    }
    size_t head = max / 2, tail = len - max / 2;
    while (head > 0 && ((unsigned char)s[head] & 0xc0) == 0x80)
        head--;
    while (tail < len && ((unsigned char)s[tail] & 0xc0) == 0x80)
        tail++;
    sb_putn(b, s, head);
    sb_puts(b, "...");
    sb_putn(b, s + tail, len - tail);
}

/* Append a string as a JSON string literal (quoted, escaped, clipped). */
void sb_put_quoted(sbuf *b, const char *s, size_t len)
{
    sbuf q = {0};
    sb_putc(&q, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            sb_putc(&q, '\\');
            sb_putc(&q, (char)c);
        } else if (c < 0x20) {
            sb_printf(&q, "\\u%04x", c);
        } else {
            sb_putc(&q, (char)c);
        }
    }
    sb_putc(&q, '"');
    if (q.oom)
        b->oom = true;
    else
        sb_put_clipped(b, q.p, q.len, MAX_QUOTED);
    free(q.p);
}

/* Append a JSON value as compact JSON text (clipped). */
void sb_put_json(sbuf *b, const json_t *v)
{
    char *text = te_json_dumps(v, JSON_ENCODE_ANY, NULL);
    if (!text) {
        b->oom = true;
        return;
    }
    sb_put_clipped(b, text, strlen(text), MAX_QUOTED);
    free(text);
}

/* Append one JSON pointer reference token: "/" then the name with "~"
 * written "~0" and "/" written "~1" (RFC 6901). */
void sb_put_segment(sbuf *b, const char *name)
{
    sb_putc(b, '/');
    for (const char *p = name; *p; p++) {
        if (*p == '~')
            sb_puts(b, "~0");
        else if (*p == '/')
            sb_puts(b, "~1");
        else
            sb_putc(b, *p);
    }
}

void sb_put_index(sbuf *b, size_t i)
{
    sb_printf(b, "/%zu", i);
}
