/*
 * bigres.h - a big result held once.
 *
 * A result {"ok": S} whose string S is at least TD_BIG_MIN bytes is not
 * parsed into a jansson string: its text stays in the buffer it arrived in
 * (the frame's body, or a plain tool's stdout, escaped as it arrived:
 * plainesc.h), rewritten in place to the JSON escaping the daemon writes
 * (te_json_dumps), and the result holds a
 * marker string in S's place. The events that carry S (the result, the
 * content when it is not cut, the messages) are written around it: their
 * line up to the marker, S's bytes from that one buffer, the rest
 * (td_big_split). Whatever reads S otherwise gets it from here: the content
 * (td_content_make), the tail subscribers (td_big_materialize).
 *
 * Measured on a 2-CPU machine (bench/bigresult.py, 64 MiB): the result had
 * been held about four times (frame, jansson's token buffer, the string,
 * the event line): the daemon's peak grew by 3.0-3.2x the payload.
 *
 * Owners: the worker creates a big result with one reference and hands it
 * to its call (td_call_facts.big); each queued write that carries it holds
 * one more. A marker whose big result is gone reads as an empty string.
 */
#ifndef TD_BIGRES_H
#define TD_BIGRES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* Smaller results take the ordinary path: a copy of 1 MiB costs less than
 * this module's bookkeeping is worth. */
#define TD_BIG_MIN (1u << 20)

struct td_big;

/* A response frame body (len bytes, NUL after them) that is {"ok": S}, S a
 * string of at least TD_BIG_MIN bytes that jansson would accept: returns
 * {"ok": marker} and *big, which owns body from then on. NULL otherwise
 * (body is then untouched; parse it as usual). */
json_t *td_big_frame(char *body, size_t len, struct td_big **big);
/* A plain tool's stdout (*buf, len bytes, cap allocated) of at least
 * TD_BIG_MIN bytes that cannot be JSON and is UTF-8: its text without one
 * trailing newline as {"ok": marker}; *buf is taken (set to NULL). NULL
 * otherwise, *buf untouched. */
json_t *td_big_plain(char **buf, size_t len, struct td_big **big);

struct td_plain;
/* A plain tool's stdout (plainesc.h) as its result: {"ok": v}, v the JSON
 * it printed, else its text (one trailing newline dropped), else (not
 * UTF-8) base64; with big, a big text as above (its buffer taken, already
 * escaped when it was escaped as it came). NULL: out of memory (or an
 * escaped stdout without big: feed it with esc_from 0 then). */
json_t *td_plain_result(struct td_plain *p, struct td_big **big);

void td_big_unref(struct td_big *b);
/* The big result a marker stands for; NULL for any other value. */
struct td_big *td_big_of(const json_t *v);

/* The call's content (proto/PROTOCOL.md section 4), cut to limit with
 * *truncated set as td_cut() would; spill: *full gets the whole content
 * (malloc'd, *full_len bytes) when it is cut. A big result's whole content
 * is its marker again. NULL: out of memory. */
json_t *td_content_make(const json_t *result, size_t limit, bool spill, json_t **truncated,
                        char **full, size_t *full_len);
/* td_content_make of the content td_content_check_keep encoded: text
 * (taken; NULL: encoded here), len bytes. */
json_t *td_content_make_encoded(const json_t *result, char *text, size_t len, size_t limit,
                                bool spill, json_t **truncated, char **full, size_t *full_len);
/* 0 when the content of result is at most limit bytes, else -E2BIG (or
 * another negative errno): without building it when the result is big. */
int td_content_check(const json_t *result, size_t limit);
/* The same, keeping what it encoded for td_content_make_encoded (*kept,
 * malloc'd, *kept_len bytes; NULL for a big result or a failure), so a
 * call's content is encoded once. */
int td_content_check_keep(const json_t *result, size_t limit, char **kept, size_t *kept_len);

/* A line to write as parts: *bufs (n of them, pointing into line) with the
 * big results its markers name in place; NULL when it names none (write
 * the line as it is). Free the returned holder (it holds those big
 * results) with td_big_line_free (NULL-safe) once the write is done, the
 * line apart; *bytes is the line's length as written. */
void *td_big_split(char *line, size_t len, uv_buf_t **bufs, unsigned *n, size_t *bytes);
void td_big_line_free(void *hold);
/* ev with each marker replaced by its string (a copy; ev itself when it has
 * none). Takes ev's reference. For the tail's subscribers. */
json_t *td_big_materialize(json_t *ev);

#endif
