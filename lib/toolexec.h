/*
 * toolexec.h - libtoolexec, the public API shared by toolexecd, its clients
 * and the tools it runs.
 *
 * The parts, each in its own source file(s):
 *   frame.c    length-prefixed frame codec (no I/O, incremental, size-capped)
 *   lines.c    JSON-lines decoder (no I/O, incremental, line length capped)
 *   message.c  protocol messages: worker responses, tool errors, content
 *              encoding, run-request validation (no I/O)
 *   shapes.c   the LLM APIs' message shapes (tool calls, results, declarations)
 *   client.c   a small blocking client for the daemon's Unix socket
 *   worker_sdk.c the worker SDK: write a tool in C
 *   warm.c     the template side of warm start (both SDKs); a call's PID 1
 *              in warmp1.c, its view in warmview.c, its process in warmcall.c
 *   landlock.c the Landlock layer of a call's file-system view
 *   sha256hex.c SHA-256 as hex for the daemon's audit chain and the client's
 *              audit verify (internal: sha256hex.h, not installed)
 *   schema_*.c JSON Schema draft-07 validation (internals: schema_int.h)
 *
 * Conventions: every name starts with te_; functions that can fail return a
 * negative errno value (or NULL) and, where a human needs to know why, fill a
 * caller-supplied message buffer.
 */
#ifndef TOOLEXEC_H
#define TOOLEXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Frame codec: a 4-byte big-endian length N, then N bytes of UTF-8 JSON.    */

#define TE_FRAME_HEADER_LEN 4
/* Default cap on a frame body. Large enough for any sane tool result, small
 * enough that a hostile worker cannot make the daemon allocate gigabytes. */
#define TE_FRAME_MAX_DEFAULT (16u * 1024u * 1024u)
/* The largest cap a decoder takes (a larger one is lowered to it): a body
 * and its NUL fit a 32-bit size_t with room to spare, and no daemon should
 * hold a gigabyte from one worker. */
#define TE_FRAME_MAX_LIMIT (1024u * 1024u * 1024u)

typedef struct te_frame_decoder {
    uint32_t max; /* largest body accepted */
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    size_t hdr_have; /* header bytes received */
    uint32_t len;    /* body length, once the header is complete */
    char *body;      /* len + 1 bytes (NUL-terminated for convenience) */
    size_t have;     /* body bytes received */
    bool done;       /* a whole frame is waiting in body */
} te_frame_decoder;

enum {
    TE_FRAME_NEED = 0, /* all input consumed, frame not complete yet */
    TE_FRAME_DONE = 1, /* a frame is complete; see te_frame_take() */
};

/* max: the largest body accepted, at most TE_FRAME_MAX_LIMIT. */
void te_frame_decoder_init(te_frame_decoder *d, uint32_t max);
void te_frame_decoder_free(te_frame_decoder *d);
/* Feed up to len bytes. Stops at the end of the first complete frame;
 * *consumed tells how much of buf was used. Returns TE_FRAME_NEED,
 * TE_FRAME_DONE, -EMSGSIZE as soon as a header announces a body over the cap
 * (d->len then holds the announced length), or -ENOMEM. */
int te_frame_feed(te_frame_decoder *d, const void *buf, size_t len, size_t *consumed);
/* Take ownership of the completed body (NUL-terminated, *len bytes) and reset
 * the decoder for the next frame. NULL when no frame is complete. */
char *te_frame_take(te_frame_decoder *d, size_t *len);
/* Bytes of an unfinished frame held (header + body), for "truncated" reports. */
size_t te_frame_pending(const te_frame_decoder *d);
/* Write the 4-byte header for a body of len bytes. */
void te_frame_header(uint32_t len, uint8_t out[TE_FRAME_HEADER_LEN]);
/* fdframe.c: one frame (header, body) on the Unix socket sock, with nfds
 * (at most TE_FRAME_FDS_MAX) descriptors on its first byte; flags for
 * sendmsg (MSG_NOSIGNAL always): on a blocking socket until all is sent,
 * with MSG_DONTWAIT -EAGAIN once the socket is full. 0 or -errno. */
#define TE_FRAME_FDS_MAX 4
int te_frame_send(int sock, const char *body, size_t len, const int *fds, int nfds, int flags);

/* ------------------------------------------------------------------------ */
/* JSON-lines decoder (lines.c): one message per line, each capped in length. */

/* A line buffer bigger than this is freed once its line is taken, so that
 * one huge line does not keep its memory for the rest of a stream. */
#define TE_LINES_KEEP_DEFAULT 65536

typedef struct te_lines {
    size_t max;      /* longest line accepted, newline excluded */
    size_t keep;     /* see TE_LINES_KEEP_DEFAULT (set after init to change) */
    size_t *account; /* when set, kept equal to a sum of cap over decoders:
                      * a budget several decoders share */
    bool ask;        /* grow only when the caller says (TE_LINES_GROW) */
    char *buf;       /* the line so far */
    size_t len, cap; /* its bytes, the buffer's size */
    size_t want;     /* TE_LINES_GROW: the size the buffer must grow to */
    bool skipping;   /* dropping the rest of a refused line */
    bool done;       /* a whole line is waiting; see te_lines_line() */
} te_lines;

enum {
    TE_LINES_NEED = 0, /* all input consumed, no line complete */
    TE_LINES_LINE = 1, /* a line is complete (its newline consumed) */
    TE_LINES_GROW = 2, /* ask mode: call te_lines_grow() or te_lines_drop(),
                        * then feed the unconsumed rest again */
};

void te_lines_init(te_lines *d, size_t max);
/* Free the buffer; the decoder can be used again from a line's start. */
void te_lines_free(te_lines *d);
/* Feed up to len bytes. Stops at the end of the first complete line;
 * *consumed tells how much of buf was used. Returns TE_LINES_NEED,
 * TE_LINES_LINE, TE_LINES_GROW, -EMSGSIZE as soon as the line being read
 * passes max bytes (its buffer is freed and the rest of it, up to its
 * newline, is skipped), or -ENOMEM (the line is dropped the same way). */
int te_lines_feed(te_lines *d, const void *buf, size_t len, size_t *consumed);
/* The complete line (len bytes, not NUL-terminated, no newline), borrowed
 * until te_lines_next(); NULL when no line is complete. */
char *te_lines_line(te_lines *d, size_t *len);
/* Done with the line: make room for the next one. */
void te_lines_next(te_lines *d);
/* At the end of the input: the last line when it had no newline (not when
 * empty or refused), as te_lines_line() gives it; NULL otherwise. */
char *te_lines_finish(te_lines *d, size_t *len);
/* Grow the buffer to want bytes: 0 or -ENOMEM (then drop the line). */
int te_lines_grow(te_lines *d);
/* Drop the line being read: its buffer is freed and its rest skipped. */
void te_lines_drop(te_lines *d);
/* The other way: v as one line of compact JSON and its newline, *len bytes
 * (not NUL-terminated) to free(); NULL when out of memory. */
char *te_lines_dump(const json_t *v, size_t *len);

/* ------------------------------------------------------------------------ */
/* JSON text with numbers kept as written (json.c). jansson prints reals with
 * 17 digits and refuses integers beyond 64 bits; these keep both faithful.  */

/* json_loadb() that also takes numbers jansson cannot hold (integers beyond
 * 64 bits, reals beyond a double): they become raw numbers (below). Its error
 * text is valid UTF-8 (jansson's may end in half a sequence). */
json_t *te_json_loadb(const char *text, size_t len, size_t flags, json_error_t *err);
/* Where a parse error is, for people: "line L column C", C being where the
 * token jansson quotes ("near '...'") starts, not its last character, which
 * jansson gives; just "line L" at the end of the text. */
void te_json_error_where(const json_error_t *e, char *buf, size_t len);
json_t *te_json_loads(const char *text, size_t flags, json_error_t *err);
/* Compact JSON as json_dumps(v, JSON_COMPACT | flags) writes it, but reals in
 * their shortest round-tripping form and raw numbers as written. Only
 * JSON_ENCODE_ANY of the flags is looked at. *len (if set) gets the length. */
char *te_json_dumps(const json_t *v, size_t flags, size_t *len);
/* A raw number: a number kept as its text (a string value that no parser or
 * json_string() can make). te_json_rawnum_text() is NULL for anything else. */
json_t *te_json_rawnum(const char *text, size_t len);
bool te_json_is_rawnum(const json_t *v);
const char *te_json_rawnum_text(const json_t *v);
/* A string as sent: json_is_string() and not a raw number (which is held as
 * one). What a request or a response must hold where it wants a string. */
bool te_json_is_text(const json_t *v);
/* Its text when te_json_is_text(v), else NULL. */
const char *te_json_text_value(const json_t *v);
/* d in its shortest round-tripping form, as te_json_dumps() writes it. */
size_t te_json_real_text(double d, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Protocol messages.                                                        */

/* The closed set of executor-originated tool error reasons. */
typedef enum te_reason {
    TE_HANDLER_RAISED,
    TE_HANDLER_EXIT,
    TE_TIMEOUT,
    TE_INVALID_RETURN,
    TE_NOT_FOUND,
    TE_ENCODING_FAILED,
    TE_REASON_COUNT
} te_reason;

const char *te_reason_name(te_reason r);
/* -EINVAL for a name outside the set. */
int te_reason_parse(const char *name);

/* Halt reasons a worker may not use (ask_user, max_turns, halt_when,
 * tool_error, cancelled, completed). */
bool te_halt_reason_reserved(const char *reason);

/* The kinds of a validated worker response / call result. */
typedef enum te_result_kind {
    TE_RESULT_OK,        /* {"ok": v} */
    TE_RESULT_ERROR,     /* {"error": r}        handler-reported, passed through */
    TE_RESULT_ASK_USER,  /* {"ask_user": q, "opts": {...}} */
    TE_RESULT_HALT,      /* {"halt": reason, "result": v} */
    TE_RESULT_RAISED,    /* {"raised": {...}}   worker reports it raised */
    TE_RESULT_TOOL_ERROR /* {"tool_error": {...}} executor-originated */
} te_result_kind;

/* Validate a worker's response frame body. On success returns the kind and
 * stores in *out a normalised result object (ask_user always carries "opts",
 * halt always carries "result"). On failure returns -EINVAL and writes why
 * into err (e.g. "unknown key \"x\""). A halt with a reserved reason is valid
 * here; the caller decides what it means. */
int te_response_parse(const char *buf, size_t len, json_t **out, char *err, size_t errlen);
/* The same, for an already parsed value (steals nothing). */
int te_response_check(json_t *resp, json_t **out, char *err, size_t errlen);
/* Kind of a normalised result object, or -EINVAL. */
int te_result_kind_of(const json_t *result);

/* Build {"tool_error": {reason, message, tool_name, tool_call_id, cause,
 * metadata}}. message is "tool error (NAME): REASON" followed by ": detail"
 * when detail is not NULL. cause and metadata are stolen (NULL: null / {}). */
json_t *te_tool_error_new(te_reason reason, const char *tool_name, const char *call_id,
                          const char *detail, json_t *cause, json_t *metadata);

/* Encode a result as the text content that goes back to the model:
 *   ok v / halt result v : v when it is a string, else compact JSON of v
 *   error r              : {"error": TEXT}, TEXT = r if a string, else JSON of r
 *   tool_error           : {"error": MESSAGE}
 *   ask_user             : "<awaiting user response>"
 * Returns a malloc'ed NUL-terminated string (length in *len), NULL with
 * -ENOMEM / -EINVAL / -E2BIG (longer than limit) in *rc. */
char *te_content_encode(const json_t *result, size_t limit, size_t *len, int *rc);
/* Encode one JSON value as content (the ok rule). Same contract. */
char *te_content_of_value(const json_t *v, size_t limit, size_t *len, int *rc);

/* A validated "run" request. Pointers borrow from the request object. */
typedef enum te_error_policy {
    TE_POLICY_CONTINUE, /* an error is just the call's content */
    TE_POLICY_HALT,     /* an error halts the batch */
    TE_POLICY_MAP,      /* per reason (or "handler_error"), with a "default" */
    TE_POLICY_ASK,      /* the batch's client decides each error */
} te_error_policy;

/* What to do about one error: "continue", "halt" or {"continue_with": v}. */
enum { TE_DECIDE_CONTINUE, TE_DECIDE_HALT, TE_DECIDE_CONTINUE_WITH };
/* The decision's kind, or -EINVAL for any other shape. */
int te_decision_check(const json_t *decision);

#define TE_TOOL_TIMEOUT_DEFAULT_MS 30000

/* The shape of batch_completed.messages. */
typedef enum te_result_format {
    TE_FORMAT_OPENAI,           /* {"role": "tool", "tool_call_id", "content"} */
    TE_FORMAT_OPENAI_RESPONSES, /* {"type": "function_call_output", "call_id", "output"} */
    TE_FORMAT_ANTHROPIC,        /* {"type": "tool_result", "tool_use_id", "content", "is_error"} */
} te_result_format;

/* The LLM APIs' shapes (shapes.c). A result format's name ("openai",
 * "openai_responses", "anthropic"), NULL outside the set; and back, -EINVAL
 * for an unknown name. */
const char *te_format_name(te_result_format f);
int te_format_parse(const char *name);
/* The API a tool call item comes from, by its "type" ("function",
 * "function_call", "tool_use"); -EINVAL for none of them. */
int te_call_shape(const json_t *call);
/* Its id, name and arguments, where that API puts them (borrowed; NULL when
 * absent); and the id's key, for messages. */
void te_call_fields(const json_t *call, te_result_format shape, json_t **id, json_t **name,
                    json_t **args);
const char *te_call_id_key(te_result_format shape);
/* One call's result as the API takes it back (batch_completed.messages). */
json_t *te_result_message(te_result_format f, const char *call_id, json_t *content, bool is_error);
/* A tool as the API (or "mcp") declares it in a request; NULL for an unknown
 * format. te_tool_format_valid() tells the known ones. */
json_t *te_tool_declaration(const char *format, const char *name, const char *description,
                            json_t *schema);
bool te_tool_format_valid(const char *format);

/* Set on a normalised call whose arguments came as JSON text that did not
 * parse to an object: the handler-style error text for it. */
#define TE_ARGUMENTS_ERROR "arguments_error"
/* Set (true) on an OpenAI custom tool call: it names no tool of ours and
 * completes with the TE_ARGUMENTS_ERROR error, running nothing. */
#define TE_CUSTOM_CALL "custom_call"

typedef struct te_run_request {
    const char *batch; /* NULL when the client gave none */
    json_t *calls;     /* array; each item has string id, name and an
                        * object "arguments" after normalisation */
    size_t ncalls;
    te_error_policy policy;
    json_t *policy_map; /* TE_POLICY_MAP: reason -> decision */
    uint64_t tool_timeout_ms;
    uint64_t max_concurrency; /* 0: not given, caller applies its default */
    json_t *context, *session_id, *request_id, *engine; /* json null if absent */
    te_result_format format;
    uint64_t max_content_bytes; /* 0: not given */
    /* "unknown_tool": "error": each call of an unknown tool gets
     * a tool error of its own and the rest run; false ("refuse", the
     * default): one unknown tool refuses the batch */
    bool unknown_tool_error;
    /* "policy": the batch's narrowing of each tool's confinement,
     * an object or NULL; a call's own is its "policy" key (kept through the
     * LLM shapes' normalisation). The daemon checks the keys. */
    json_t *narrow;
    /* the client set tool_timeout (else tool_timeout_ms holds the default,
     * which must not cut a tool's own longer timeout_ms) */
    bool tool_timeout_given;
    /* "subject": who a trusted front (the MCP HTTP front) runs the batch
     * for, te_subject_valid(); NULL when none. The daemon honours it only
     * from a front it trusts (--subject-from) and refuses it from any other
     * client. */
    const char *subject;
} te_run_request;

/* A run request's "subject": 1 to TE_SUBJECT_MAX bytes of printable ASCII
 * without spaces (0x21 to 0x7e), what an OAuth "sub" claim (at most 255
 * ASCII characters) is; the bound keeps a subject one log field and one
 * bucket key of a bounded size. */
#define TE_SUBJECT_MAX 255
bool te_subject_valid(const char *s, size_t len);

/* Validate a {"op": "run", ...} request. Normalises the calls in place: the
 * shapes LLM APIs emit (OpenAI Chat Completions tool_calls items, OpenAI
 * Responses function_call items, Anthropic tool_use blocks) become
 * {"id", "name", "arguments", "shape"}; absent or null arguments become {}. On failure returns
 * -EINVAL with a message naming the offending field. */
int te_run_request_parse(json_t *req, te_run_request *out, char *err, size_t errlen);

/* Make a NUL-terminated string valid UTF-8 in place: a multi-byte sequence
 * cut off at the end is dropped, any other invalid byte becomes '?'. */
void te_utf8_repair(char *s);
/* Length (1 to 4) of the valid UTF-8 sequence that starts at p, within n
 * bytes; 0 when the bytes there are not one. */
size_t te_utf8_seq(const void *p, size_t n);

/* Tool names: [A-Za-z0-9_.-]{1,64}. */
#define TE_TOOL_NAME_MAX 64
bool te_tool_name_valid(const char *name);

/* ------------------------------------------------------------------------ */
/* Client API (blocking, for tools, tests and the toolexec CLI; or not, for  */
/* a poll loop: te_client_connect_nb).                                        */

typedef struct te_client te_client;

/* The daemon's default socket: $XDG_RUNTIME_DIR/toolexecd.sock for a
 * non-root user, /run/toolexecd/toolexecd.sock for root. -ENOENT when a
 * non-root user has no XDG_RUNTIME_DIR. */
int te_default_socket_path(char *buf, size_t len);
int te_client_connect(const char *path, te_client **out);
/* Send one request (one JSON line). */
int te_client_send(te_client *c, const json_t *req);
/* Close the sending direction (the daemon still finishes owed work). */
int te_client_shutdown(te_client *c);
/* Receive one event. 0 and *event set; -ENODATA at end of stream;
 * -EBADMSG on a line that is not a JSON object; -EMSGSIZE on a line over
 * 64 MiB (skipped: the next call goes on after it). */
int te_client_recv(te_client *c, json_t **event);
void te_client_close(te_client *c);
/* The socket, for poll(): readable means te_client_recv() has data, though a
 * partial line can still make it wait for the rest. */
int te_client_fd(const te_client *c);
/* Whether a whole event is already buffered (te_client_recv() will not
 * block). */
bool te_client_pending(const te_client *c);
/* Non-blocking: connect() fails at once (-EAGAIN: the daemon's listen
 * backlog is full) rather than wait; te_client_recv() gives -EAGAIN when no
 * whole line is there yet (what was read is kept for the next call);
 * te_client_send() queues what the socket does not take, up to queue_max
 * bytes: past it, -ENOBUFS and nothing of that request is queued (a request
 * alone longer than that is taken when the queue is empty). Poll for POLLOUT while
 * te_client_want_write() and call te_client_flush() then. */
int te_client_connect_nb(const char *path, size_t queue_max, te_client **out);
bool te_client_want_write(const te_client *c);
/* Send what is queued, as far as the socket takes it: 0 or -errno. */
int te_client_flush(te_client *c);

/* ------------------------------------------------------------------------ */
/* Worker SDK: a tool is a handler that receives the call and returns one of
 * the five handler results (or reports that it raised).                    */

typedef struct te_call {
    const char *tool;  /* the tool's name */
    json_t *arguments; /* always an object */
    json_t *opts;      /* the call context for "context": true tools, else NULL */
} te_call;

/* Result constructors; each steals its json_t arguments. */
json_t *te_ok(json_t *value);
json_t *te_error(json_t *reason);
json_t *te_ask_user(const char *question, json_t *opts /* may be NULL */);
json_t *te_halt(const char *reason, json_t *result);
json_t *te_raised(const char *type, const char *message, const char *stacktrace);

/* A handler returns a new reference to a result built with the constructors
 * above; returning NULL reports a raised "HandlerReturnedNull". */
typedef json_t *(*te_handler)(const te_call *call, void *userdata);

/* Read the request frame from fd (normally 0). */
int te_worker_read_request(int fd, json_t **request);
/* Write one response frame to fd (normally 1). */
int te_worker_write_response(int fd, const json_t *response);
/* Progress, before the response: a frame {"progress": {"progress": n,
 * "total": m, "message": "..."}}; total < 0 and message NULL leave them out.
 * The daemon forwards it as a tool_execution_progress event. */
int te_worker_progress(int fd, double progress, double total, const char *message);
/* The object of a progress frame body ({"progress": {...}} with a number
 * "progress", and optionally a number "total" and a string "message", and
 * nothing else), a new reference; NULL when the body is not one. */
json_t *te_progress_frame(const char *body, size_t len);
/* An MCP server's worker (toolexec-mcp-bridge), before its response: the
 * server said its tools changed (notifications/tools/list_changed); a frame
 * {"tools_changed": true}. The daemon lists the server's tools again. */
int te_worker_tools_changed(int fd);
/* Whether a frame body is exactly {"tools_changed": true}. */
bool te_tools_changed_frame(const char *body, size_t len);
/* The whole worker: read the request from stdin, run the handler, write the
 * response to stdout. Returns the process exit status to use (0 on success). */
int te_worker_main(te_handler handler, void *userdata);

/* Warm start (warm.c; proto/PROTOCOL.md, "Warm start"): the template side,
 * used by te_worker_main() and, through ctypes, by the Python SDK. A tool
 * written with either SDK needs none of it. The layout is fixed (ctypes). */
typedef struct {
    unsigned int id;               /* the daemon's number for the call */
    int in, out, err, report;      /* the call's descriptors, received */
    int newnet;                    /* a network namespace of its own */
    char dir[256];                 /* its directory, in the template's */
    char call_id[128], batch[128]; /* TOOLEXEC_CALL_ID, TOOLEXEC_BATCH */
    int proxy_port;                /* > 0 (with newnet): the egress proxy's listener */
} te_fork_request;
/* Is this first frame the daemon's {"template": {...}}? */
bool te_template_requested(const json_t *first);
/* Says ready (first time), reaps and reports finished calls, waits for the
 * next fork request: 1 with *r filled, 0 when the daemon closed the channel
 * (calls in flight have ended), or -errno. */
int te_template_next(te_fork_request *r);
/* In the template: the call's PID 1's pid (> 0) or -errno (the daemon was
 * told and runs the call cold). In the call's process, set up like a cold
 * worker's (its own PID, user and mount namespace, fds 0-2 the call's, its
 * directory the cwd, filtered): 0. */
int te_template_fork(const te_fork_request *r);
/* next + fork until done: 1 in a call's process (read the request on fd 0
 * then), 0 in the template when it is to exit with *exit_code. */
int te_template_run(int *exit_code);

/* Landlock (landlock.c), for the daemon's spawn child and a warm call's
 * process alike: only system calls (no malloc), so a child that shares its
 * parent's memory may call it. The ABI this kernel offers (0: none). */
int te_landlock_abi(void);
/* Restrict the caller, and what it will exec, to writing beneath its
 * working directory and paths (NULL-terminated; one that is not there is
 * skipped). Needs no_new_privs. abi: te_landlock_abi()'s, > 0. 0 or
 * -errno (errno set too). */
int te_landlock_writes(int abi, const char *const *paths);
/* Loopback up in the caller's fresh network namespace (loopback.c), for a
 * call without the host's network. Only system calls, as above. 0, or -1
 * with errno set. */
int te_loopback_up(void);
/* The egress proxy's listener (loopback.c), in the caller's fresh network
 * namespace: loopback up, a TCP socket listening on 127.0.0.1:port. Only
 * system calls, as above. The descriptor (close-on-exec), or -1 with errno. */
int te_loopback_listener(int port);

/* ------------------------------------------------------------------------ */
/* JSON Schema (draft-07) validation of tool arguments (schema_*.c).       */
/*
 * Covers the validation vocabulary of draft-07: type, enum, const, numeric
 * bounds and multipleOf, string lengths (in code points) and pattern,
 * items/additionalItems/contains and item counts, uniqueItems, properties,
 * patternProperties, additionalProperties, propertyNames, required,
 * dependencies, property counts, allOf/anyOf/oneOf/not, if/then/else,
 * boolean schemas, definitions and $ref within the document (JSON pointers,
 * "$id"-identified subschemas). "format" and the content keywords are
 * annotations only. Regular expressions are PCRE2 in UTF/UCP mode with the
 * options that bring it closest to ECMA-262 ("$" only at the very end,
 * ECMA's u-escapes, "[^]"), unanchored as the specification says. A $ref to
 * the draft-07 meta-schema itself checks that the value is a valid schema.
 *
 * A compiled schema is immutable: one te_schema may be used by several
 * threads at once.
 */

/* Instance nesting followed before a violation "nesting too deep" is
 * reported instead of descending further; bounds the C stack used. */
#define TE_SCHEMA_MAX_DEPTH 512

typedef struct te_schema te_schema;

/* Compile and check a schema: an object or a boolean. An invalid schema (not
 * an object or boolean, a keyword of the wrong type, a bad regular
 * expression, a $ref that does not resolve within the document) fails with
 * -EINVAL and a message naming the JSON pointer into the schema, e.g.
 * "/properties/count/type: expected a string or an array of strings".
 * -ENOMEM on allocation failure. The schema is copied; the caller keeps it. */
int te_schema_compile(const json_t *schema, te_schema **out, char *err, size_t errlen);
void te_schema_free(te_schema *s);

/* Validate an instance. 0 when valid; otherwise the number of violations
 * (> 0), and when errors is not NULL *errors is a malloc'ed string (the
 * caller frees it) listing them, each with the JSON pointer into the
 * instance ("/" for the root), joined by "; ", e.g.
 *   /count: expected integer, got string; /mode: must be one of ["a","b"]
 * Every violation is counted; the list stops after a few dozen with
 * "... and N more". -ENOMEM on allocation failure. */
int te_schema_validate(const te_schema *s, const json_t *instance, char **errors);

/* Opt-in coercion, to run before te_schema_validate(): where the schema says
 * a value's type is integer, number or boolean (and not string), a string
 * value that parses completely as one ("42" -> 42, "4.5" -> 4.5, "true",
 * "false"; JSON number syntax) is replaced in place; "42abc" stays a string.
 * Follows properties, patternProperties, additionalProperties, items,
 * additionalItems, allOf and $ref. The root value itself is never replaced.
 * Returns the number of values converted, or -ENOMEM. */
int te_schema_coerce(const te_schema *s, json_t *instance);

#ifdef __cplusplus
}
#endif
#endif
