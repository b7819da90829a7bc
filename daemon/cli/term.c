/*
 * term.c - text for people: terminal width, cleaning untrusted text before
 * it reaches a terminal, display widths, aligned tables, durations.
 *
 * Everything shown here (tool output, call ids, error messages) comes from
 * tools or from whoever wrote the batch, so it is cleaned first: an escape
 * sequence in a tool's result must never reach the user's terminal, and a
 * newline must not break a table row.
 */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <wchar.h>

#include "cli.h"

static bool utf8_locale;

void cli_term_init(void)
{
    /* LC_CTYPE only: wcwidth() needs it; numbers stay in the C format. */
    setlocale(LC_CTYPE, "");
    utf8_locale = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
}

bool cli_term_utf8(void)
{
    return utf8_locale;
}

size_t cli_term_width(int fd)
{
    if (!isatty(fd))
        return 0;
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    /* A terminal that does not know its size (a serial line, a fresh pty). */
    const char *cols = getenv("COLUMNS");
    long n = cols ? strtol(cols, NULL, 10) : 0;
    return n > 0 && n < 10000 ? (size_t)n : 80;
}

bool cli_term_color(int fd)
{
    const char *no = getenv("NO_COLOR"); /* https://no-color.org */
    const char *term = getenv("TERM");
    return isatty(fd) && !(no && *no) && !(term && strcmp(term, "dumb") == 0);
}

/* Decode one UTF-8 sequence at s. Returns its length and stores the code
 * point, or returns 0 for an invalid sequence (overlong, surrogate, cut). */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t n;
    uint32_t min;
    if ((s[0] & 0xe0) == 0xc0) {
        n = 2, min = 0x80, *cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        n = 3, min = 0x800, *cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        n = 4, min = 0x10000, *cp = s[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the NUL */
        *cp = (*cp << 6) | (s[i] & 0x3f);
    }
    if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
        return 0;
    return n;
}

static bool is_control(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0);
}

/* Columns a code point takes, or -1 when it cannot be shown as it is. */
static int cp_width(uint32_t cp)
{
    if (cp < 0x80)
        return 1;
    if (!utf8_locale)
        return -1;
    return wcwidth((wchar_t)cp);
}

char *cli_text_clean(const char *s)
{
    size_t len = strlen(s);
    char *out = malloc(len + 1); /* cleaning never lengthens the text */
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    bool space = false;
    while (*p) {
        uint32_t cp;
        size_t n = utf8_decode(p, &cp);
        if (n && (cp == ' ' || is_control(cp))) {
            space = o > 0; /* leading white space is dropped */
            p += n;
            continue;
        }
        if (space)
            out[o++] = ' ';
        space = false;
        if (n == 0 || cp_width(cp) < 0) {
            out[o++] = '?';
            p += n ? n : 1;
            continue;
        }
        memcpy(out + o, p, n);
        o += n;
        p += n;
    }
    out[o] = '\0';
    return out;
}

size_t cli_text_width(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t w = 0;
    while (*p) {
        uint32_t cp;
        size_t n = utf8_decode(p, &cp);
        int cw = n ? cp_width(cp) : 1;
        w += cw > 0 ? (size_t)cw : 0;
        p += n ? n : 1;
    }
    return w;
}

/* Bytes of s that fit in width columns. */
static size_t prefix_fitting(const char *s, size_t width)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t w = 0;
    while (*p) {
        uint32_t cp;
        size_t n = utf8_decode(p, &cp);
        int cw = n ? cp_width(cp) : 1;
        size_t add = cw > 0 ? (size_t)cw : 0;
        if (w + add > width)
            break;
        w += add;
        p += n ? n : 1;
    }
    return (size_t)(p - (const unsigned char *)s);
}

char *cli_text_fit(const char *s, size_t width)
{
    if (cli_text_width(s) <= width)
        return strdup(s);
    const char *ell = utf8_locale ? "\u2026" : "...";
    size_t ellw = utf8_locale ? 1 : 3;
    if (width <= ellw) /* no room for the ellipsis: a plain cut */
        return strndup(s, prefix_fitting(s, width));
    size_t n = prefix_fitting(s, width - ellw);
    char *out = malloc(n + strlen(ell) + 1);
    if (!out)
        return NULL;
    memcpy(out, s, n);
    strcpy(out + n, ell);
    return out;
}

void cli_format_ms(char *buf, size_t len, double ms)
{
    if (ms < 0)
        ms = 0;
    if (ms < 10)
        snprintf(buf, len, "%.1fms", ms);
    else if (ms < 1000)
        snprintf(buf, len, "%.0fms", ms);
    else if (ms < 10000)
        snprintf(buf, len, "%.2fs", ms / 1000);
    else if (ms < 60000)
        snprintf(buf, len, "%.1fs", ms / 1000);
    else if (ms < 3600000)
        snprintf(buf, len, "%dm%02ds", (int)(ms / 60000), (int)(ms / 1000) % 60);
    else if (ms < 86400000)
        snprintf(buf, len, "%dh%02dm", (int)(ms / 3600000), (int)(ms / 60000) % 60);
    else
        snprintf(buf, len, "%dd%02dh", (int)(ms / 86400000), (int)(ms / 3600000) % 24);
}

/* ------------------------------------------------------------------------ */
/* Tables */

struct cli_table {
    size_t ncols, nrows, cap_rows;
    char **headers;      /* ncols */
    size_t *max;         /* per column, 0: no limit */
    bool *right;         /* per column */
    char **cells;        /* nrows * ncols, cleaned */
    const char **colors; /* nrows * ncols, SGR parameters or NULL */
};

cli_table *cli_table_new(size_t ncols, const char *const *headers)
{
    cli_table *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->ncols = ncols;
    t->headers = calloc(ncols, sizeof(*t->headers));
    t->max = calloc(ncols, sizeof(*t->max));
    t->right = calloc(ncols, sizeof(*t->right));
    if (!t->headers || !t->max || !t->right) {
        cli_table_free(t);
        return NULL;
    }
    for (size_t i = 0; i < ncols; i++) {
        t->headers[i] = strdup(headers[i]);
        if (!t->headers[i]) {
            cli_table_free(t);
            return NULL;
        }
    }
    return t;
}

void cli_table_right(cli_table *t, size_t col)
{
    t->right[col] = true;
}

void cli_table_cap(cli_table *t, size_t col, size_t max)
{
    t->max[col] = max;
}

int cli_table_add(cli_table *t, const char *const *cells, const char *const *color)
{
    if (t->nrows == t->cap_rows) {
        size_t ncap = t->cap_rows ? t->cap_rows * 2 : 16;
        char **nc = realloc(t->cells, ncap * t->ncols * sizeof(*nc));
        if (!nc)
            return -ENOMEM;
        t->cells = nc;
        const char **ncol = realloc(t->colors, ncap * t->ncols * sizeof(*ncol));
        if (!ncol)
            return -ENOMEM;
        t->colors = ncol;
        t->cap_rows = ncap;
    }
    size_t base = t->nrows * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        t->cells[base + i] = cli_text_clean(cells[i] ? cells[i] : "");
        t->colors[base + i] = color ? color[i] : NULL;
        if (!t->cells[base + i]) {
            while (i--)
                free(t->cells[base + i]);
            return -ENOMEM;
        }
    }
    t->nrows++;
    return 0;
}

static size_t column_width(const cli_table *t, size_t col)
{
    size_t w = cli_text_width(t->headers[col]);
    for (size_t r = 0; r < t->nrows; r++) {
        size_t cw = cli_text_width(t->cells[r * t->ncols + col]);
        if (cw > w)
            w = cw;
    }
    return t->max[col] && w > t->max[col] ? t->max[col] : w;
}

static void print_cell(FILE *f, const char *text, size_t width, bool right, bool last,
                       const char *sgr)
{
    char *fit = cli_text_fit(text, width);
    const char *s = fit ? fit : "";
    size_t pad = width - cli_text_width(s);
    if (right)
        fprintf(f, "%*s", (int)pad, "");
    if (sgr)
        fprintf(f, "\033[%sm%s\033[0m", sgr, s);
    else
        fputs(s, f);
    if (!right && !last) /* no trailing blanks at the end of a line */
        fprintf(f, "%*s", (int)pad, "");
    free(fit);
}

static void print_row(const cli_table *t, FILE *f, char *const *cells, const char *const *colors,
                      const size_t *widths)
{
    for (size_t c = 0; c < t->ncols; c++) {
        if (c)
            fputs("  ", f);
        print_cell(f, cells[c], widths[c], t->right[c], c + 1 == t->ncols,
                   colors ? colors[c] : NULL);
    }
    fputc('\n', f);
}

void cli_table_print(const cli_table *t, FILE *f, size_t width, bool color)
{
    size_t *widths = calloc(t->ncols, sizeof(*widths));
    if (!widths)
        return;
    size_t used = 0;
    for (size_t c = 0; c < t->ncols; c++) {
        widths[c] = column_width(t, c);
        if (c + 1 < t->ncols)
            used += widths[c] + 2;
    }
    /* The last column takes what is left of the line, but always shows a
     * little: a line that wraps is better than an empty column. */
    size_t last = t->ncols - 1;
    if (width && used + widths[last] > width - 1)
        widths[last] = width - 1 > used + 8 ? width - 1 - used : 8;
    const char *bold[t->ncols];
    for (size_t c = 0; c < t->ncols; c++)
        bold[c] = color ? "1" : NULL;
    print_row(t, f, t->headers, bold, widths);
    for (size_t r = 0; r < t->nrows; r++)
        print_row(t, f, t->cells + r * t->ncols, color ? t->colors + r * t->ncols : NULL, widths);
    free(widths);
}

void cli_table_free(cli_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; t->headers && i < t->ncols; i++)
        free(t->headers[i]);
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->headers);
    free(t->max);
    free(t->right);
    free(t->cells);
    free(t->colors);
    free(t);
}

/* A progress line (run.c's) is on stderr's last line: what any other
 * output to the terminal must clear first. */
volatile sig_atomic_t cli_progress_on_screen;

void cli_clear_progress(void)
{
    if (cli_progress_on_screen) {
        fputs("\r\033[K", stderr);
        cli_progress_on_screen = 0;
    }
}
