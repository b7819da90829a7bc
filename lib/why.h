/*
 * why.h - the sentence a model reads for each thing a call's confinement
 * refused it (an entry of tool_execution_completed's "denied"): what was
 * refused, and which key of the tool's definition, or of the run request's
 * "policy" where one narrowed the call, decides that; never a way around
 * either. The one place these sentences are made: toolexecd puts them in
 * the messages of an LLM-shaped batch, toolexec mcp in its tool results.
 * Internal to libtoolexec (not in the installed toolexec.h), like
 * randhex.h. No I/O.
 */
#ifndef TE_WHY_H
#define TE_WHY_H

#include <stddef.h>

#include <jansson.h>

/* The reasons a model reads after a call's content: at most this many
 * lines (a line for the rest says how many), each at most this many bytes
 * (a longer sentence, a long path's, is cut and ends in "..."). */
#define TE_WHY_LINES_MAX 8
#define TE_WHY_LINE_MAX 600

/* The sentence for one entry of "denied". batch_policy, call_policy: the
 * run request's "policy" and the call's own (NULL: none), which narrow the
 * tool's confinement; a sentence about a key one of them narrows names it.
 * malloc'd; NULL: out of memory. */
char *te_why(const json_t *denial, const json_t *batch_policy, const json_t *call_policy);

/* A copy of denied (an array) whose entries (objects) each carry "why",
 * te_why()'s sentence, as their last key; NULL when denied is empty, not an
 * array, or memory ran out. */
json_t *te_why_denied(const json_t *denied, const json_t *batch_policy, const json_t *call_policy);

/* text (len bytes, which may hold NUL bytes) followed by the reasons:
 * "\n\n[toolexec] Refused during the call:" (no blank line when text is
 * empty) and "\n- " and the "why" of each entry of denied (as
 * te_why_denied() made it), within TE_WHY_LINES_MAX and TE_WHY_LINE_MAX.
 * A NUL after *out_len bytes; NULL: out of memory. */
char *te_why_text(const char *text, size_t len, const json_t *denied, size_t *out_len);

#endif
