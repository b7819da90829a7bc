/*
 * testworker - one worker program with many behaviours, well-behaved and
 * hostile, for the integration tests and the conformance vectors.
 *
 * The behaviour (mode) is argv[1]; when the tool definition gives no argv[1]
 * it is the string "mode" of the call's arguments. Further parameters come
 * from the call's arguments (some also from argv[2]). Every mode first sleeps
 * arguments.delay_ms milliseconds when that is given (a workload, so that
 * tests can shape completion order without sleeping themselves).
 *
 * Framed modes run inside the SDK's te_worker_main(); hostile modes write raw
 * bytes to fd 1 and leave with _exit(). "request" and "plain-*" modes do
 * their own I/O.
 *
 * Modes (arguments in parentheses):
 *   echo                 ok: the arguments object
 *   ok-string            ok: arguments.s (default "hello world"), a string
 *   ok-value             ok: arguments.value (any JSON, default null)
 *   error                error: arguments.reason (any JSON, default "boom")
 *   raise                raised: {type, message, stacktrace} (type, message)
 *   null                 the handler returns NULL (SDK reports a raise)
 *   exit [N]             writes a line to stderr, exits N (argv[2] or code, 3)
 *   segv                 writes a line to stderr, dies by SIGSEGV
 *   abort                writes a line to stderr, dies by SIGABRT
 *   garbage              writes bytes that are not a frame, exits 0
 *   huge-prefix          writes a prefix claiming 0xFFFFFFFF bytes, sleeps
 *   truncated            prefix 100, then 10 body bytes, exits (code, 0)
 *   badjson              a frame whose body is not JSON (size: body length)
 *   badshape [V]         a frame with a JSON value of a wrong shape (variant)
 *   sleep                writes a line to stderr, sleeps forever
 *   grandchild           forks a grandchild that runs "testworker linger
 *                        TOKEN" (token; with setsid true it calls setsid()
 *                        first) and sleeps 60 s; once it runs, then (then):
 *                        "ok" -> ok {"grandchild": pid, "token": token},
 *                        "exit" -> exit 3, "sleep" -> sleep forever
 *   halt [R]             halt: argv[2] or reason (default "plan_submitted"),
 *                        result (default {"plan": "p"})
 *   ask                  ask_user: question (default "which city?"), opts
 *   request              ok: the whole request frame as received
 *   context              ok: the SDK's call->opts (null when there are none)
 *   env                  ok: {"env": {..environ..}, "cwd": path,
 *                        "cwd_entries": [...], "cwd_writable": bool}
 *   isolation            ok: process attributes set up by the daemon
 *   fds                  ok: the list of open descriptors
 *   concurrency          appends "start PID" to arguments.log, works for ms
 *                        (default 40) milliseconds, appends "end PID"
 *   wait-file            waits (up to 30 s) until arguments.path exists,
 *                        then acts as arguments.then_mode (default echo)
 *   touch                creates arguments.path; ok "touched"
 *   big-output           ok: a string of arguments.n 'x' characters
 *   write-after-frame    writes {"ok":"first"}, more frames and garbage, then
 *                        exits 0 or, with then "sleep", sleeps forever
 *   stderr-flood         writes kb KiB (default 64) to stderr, then the line
 *                        "FINAL-MARKER", exits 3
 *   plain-stdin          plain protocol: prints {"stdin": "<raw stdin>"}
 *   setsid-grandchild    double fork: a child forks the grandchild and exits;
 *                        the grandchild calls setsid() and runs "testworker
 *                        linger TOKEN" (token), which first burns burn_ms of
 *                        CPU when given; once it runs, then (then) as
 *                        for grandchild: "ok" -> ok {"token": token},
 *                        "exit" -> exit 3, "sleep" -> sleep forever
 *   connect              connects over TCP to host (default 127.0.0.1):port;
 *                        ok {"connected": bool, "errno": NAME or null}
 *   open-files           opens /dev/null until that fails; ok {"opened": N,
 *                        "errno": NAME, "nofile": soft RLIMIT_NOFILE}
 *   write-file           writes mb MiB (default 2) to ./big.out in 64 KiB
 *                        pieces (with ignore_sigxfsz true SIGXFSZ is ignored);
 *                        ok {"written": N} or error {"errno": NAME,
 *                        "written": N}
 *   spin                 burns CPU in a loop forever
 *   identity             ok {"uid", "euid", "gid", "egid", "groups": [...]}
 *   stderr-flood-ok      writes mb MiB (default 1) to stderr in 64 KiB
 *                        pieces, then "FINAL-MARKER"; ok {"bytes": N}
 *   no-read              never reads its request; ok "unread"
 *   close-stdin          closes stdin at once, unread; ok "closed"
 *   deep [N]             a response frame nested N (default 100000) arrays
 *                        deep inside {"ok": ...}
 *   fork-many            forks up to n (default 64) children that wait for
 *                        it to exit; ok {"forked": N, "errno": NAME or null}
 *   big-exit             grows its stdout pipe to pipe bytes (default 1 MiB,
 *                        the unprivileged ceiling), then answers ok: a string
 *                        of n (default 1000000) 'x': the whole frame is in
 *                        the pipe when it exits, unread; with log, first
 *                        appends "start PID" to that file
 *   make-tree            builds in its directory: deep levels of "d/"
 *                        (default 0), "w/" with wide files (default 0), "a/"
 *                        with fillers files and one named bait (when given),
 *                        "l/" holding a file with mode 0 on "l" (locked
 *                        true), secret.txt holding secret (when given);
 *                        then writes its cwd to report (a path; via a
 *                        rename), waits (up to 30 s) for the path go when
 *                        given, and then: "ok" -> ok {"cwd": cwd}, "sleep"
 *                        -> sleeps forever
 *   swap-race            reads a call directory T from the file target
 *                        (waiting up to 30 s for it), creates the file ready,
 *                        and once a file of T/a disappears (its removal has
 *                        begun) renames T/a to T/a.real and puts a symlink
 *                        to link in its place; ok {"swapped": bool} once T
 *                        is gone or after seconds (default 10)
 *   probe-dir            tries to list work and to list, read (secret.txt)
 *                        and write (planted.txt) other; ok {"cwd",
 *                        "list_work", "list_other", "read_other",
 *                        "write_other"}, each null or an errno name
 *   warm-state           ok {"counter": a global, incremented, "threads",
 *                        "entries" (of the cwd), "random"}; with leave true
 *                        also leaves a thread running and a file in the cwd
 *   linger TOKEN FD      (internal) the grandchild of "grandchild"
 *   victim [TOKEN]       writes $VICTIM_SECRET to ./secret.txt, writes its
 *                        working directory to arguments.ready, waits (up to 30 s) for
 *                        arguments.release; ok {"answer": arguments.answer,
 *                        "secret_file": what ./secret.txt then holds}
 *   sysprobe             tries denied system calls (test_confine_sys.py):
 *                        arguments.try names, loop.count, fork; ok {name:
 *                        "ok" or errno name, ...}
 *   sysprobe-meet        sysprobe's tries between two rendezvous of two
 *                        calls through files (test_warm_denials.py)
 *   deny-at-start        (argv[1]) a template making denied calls (syslog)
 *                        at start and from a child while it lives
 *   nsjoin               (argv[1]) a template trying setns() into its calls'
 *                        PID 1's user namespace and unshare() before each
 *                        fork; ok {"template": its results (warm), "call":
 *                        the call's own against its parent}
 *   hostile              tries what arguments name against other calls, the
 *                        daemon and the terminal; each attempt is "ok:DATA"
 *                        or its errno name: environ, mem, kill, oom (PID
 *                        lists: read /proc/PID/environ, open /proc/PID/mem
 *                        read-write, SIGKILL, write 1000 to oom_score_adj),
 *                        read (files), list (directories), connect (Unix
 *                        sockets), tty (true: open /dev/tty, TIOCSTI);
 *                        also "procs": the PIDs its /proc shows
 *   fs-probe             read, list, write, stat: lists of paths, each tried
 *                        ("ok:..." or its errno name); also "cwd"
 *   proxy-tunnel         through the egress proxy (127.0.0.1:3128): CONNECT
 *                        arguments.target, then GET arguments.path in the
 *                        tunnel; ok {"status", "inner": first lines of the
 *                        proxy's and the server's answers, "body", "net":
 *                        its /proc/self/ns/net} or
 *                        {"errno": NAME, "step"}
 *
 * Tests find a call's processes from outside by a token in their command
 * line (argv of the tool definition, or the grandchild's "linger TOKEN"),
 * not by pids a worker reports: those may belong to another PID namespace.
 *
 * This file has main(), the dispatch (run_mode) and the modes of the protocol
 * itself; the other modes live in tw_*.c, one kind to a file, with the
 * helpers in tw_common.c (testworker.h lists what each gives).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testworker.h"

int g_argc;
char **g_argv;

static json_t *badshape(const char *variant)
{
    const char *text;
    if (strcmp(variant, "extra-key") == 0)
        text = "{\"ok\": 1, \"extra\": 2}";
    else if (strcmp(variant, "unknown-key") == 0)
        text = "{\"bogus\": 1}";
    else if (strcmp(variant, "empty") == 0)
        text = "{}";
    else if (strcmp(variant, "not-object") == 0)
        text = "[1, 2, 3]";
    else if (strcmp(variant, "string") == 0)
        text = "\"just a string\"";
    else if (strcmp(variant, "two-kinds") == 0)
        text = "{\"ok\": 1, \"error\": 2}";
    else if (strcmp(variant, "ask-nonstring") == 0)
        text = "{\"ask_user\": 42}";
    else if (strcmp(variant, "ask-badopts") == 0)
        text = "{\"ask_user\": \"q\", \"opts\": \"not an object\"}";
    else if (strcmp(variant, "halt-nonstring") == 0)
        text = "{\"halt\": 7, \"result\": 1}";
    else if (strcmp(variant, "opts-on-ok") == 0)
        text = "{\"ok\": 1, \"opts\": {}}";
    else
        text = "{\"unknown variant\": true}";
    write_frame_raw(text, strlen(text));
    _exit(0);
}

static json_t *run_mode(const char *mode, const te_call *call);
static json_t *warm_state_mode(const json_t *args);

/* "steps" progress frames through the SDK (te_worker_progress),
 * then, given "path", waits for that file (a running call that reports
 * nothing more: the MCP heartbeat's case); "bad": one malformed progress
 * frame instead. */
static json_t *progress_mode(const json_t *args)
{
    if (json_is_true(json_object_get(args, "bad"))) {
        const char *bad = "{\"progress\":{\"progress\":\"half\"}}";
        write_frame_raw(bad, strlen(bad));
        sleep_forever();
    }
    json_int_t steps = json_integer_value(json_object_get(args, "steps"));
    for (json_int_t i = 1; i <= steps; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "step %lld", (long long)i);
        if (te_worker_progress(1, (double)i, (double)steps, msg) < 0)
            _exit(122);
    }
    const char *path = arg_str(args, "path", NULL);
    for (int i = 0; path && i < 6000 && access(path, F_OK) != 0; i++)
        sleep_ms(10);
    return te_ok(json_pack("{s:I}", "steps", steps));
}

static json_t *run_mode(const char *mode, const te_call *call)
{
    json_t *args = call->arguments;

    if (strcmp(mode, "echo") == 0)
        return te_ok(json_incref(args));
    if (strcmp(mode, "ok-string") == 0)
        return te_ok(json_string(arg_str(args, "s", "hello world")));
    if (strcmp(mode, "ok-value") == 0) {
        json_t *v = json_object_get(args, "value");
        return te_ok(v ? json_incref(v) : json_null());
    }
    if (strcmp(mode, "error") == 0) {
        json_t *r = json_object_get(args, "reason");
        return te_error(r ? json_incref(r) : json_string("boom"));
    }
    if (strcmp(mode, "raise") == 0) {
        say("testworker: raising\n");
        return te_raised(arg_str(args, "type", "ValueError"), arg_str(args, "message", "bad value"),
                         "Traceback: testworker.c raise");
    }
    if (strcmp(mode, "null") == 0)
        return NULL;
    if (strcmp(mode, "exit") == 0) {
        int code = g_argc > 2 ? atoi(g_argv[2]) : (int)arg_int(args, "code", 3);
        char line[64];
        snprintf(line, sizeof line, "testworker: exiting with %d\n", code);
        say(line);
        _exit(code);
    }
    if (strcmp(mode, "segv") == 0) {
        say("testworker: segfaulting\n");
        /* Undo any handler a sanitizer runtime may have installed. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGSEGV, &sa, NULL);
        raise(SIGSEGV);
        _exit(124);
    }
    if (strcmp(mode, "abort") == 0) {
        say("testworker: aborting\n");
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGABRT, &sa, NULL);
        abort();
    }
    if (strcmp(mode, "garbage") == 0) {
        static const char junk[] = "garbage! this is not a length-prefixed frame\n";
        write_all(1, junk, sizeof junk - 1);
        _exit(0);
    }
    if (strcmp(mode, "huge-prefix") == 0) {
        static const uint8_t ff[4] = {0xff, 0xff, 0xff, 0xff};
        write_all(1, ff, sizeof ff);
        write_all(1, "{\"ok\":", 6);
        sleep_forever();
    }
    if (strcmp(mode, "truncated") == 0) {
        uint8_t hdr[TE_FRAME_HEADER_LEN];
        te_frame_header(100, hdr);
        write_all(1, hdr, sizeof hdr);
        write_all(1, "{\"ok\": 123", 10);
        _exit((int)arg_int(args, "code", 0));
    }
    if (strcmp(mode, "badjson") == 0) {
        long long n = arg_int(args, "size", 0);
        if (n <= 0) {
            static const char bad[] = "{not json";
            write_frame_raw(bad, sizeof bad - 1);
        } else {
            char *buf = malloc((size_t)n);
            if (!buf)
                _exit(125);
            memset(buf, 'z', (size_t)n);
            memcpy(buf, "{not json", 9);
            write_frame_raw(buf, (size_t)n);
            free(buf);
        }
        _exit(0);
    }
    if (strcmp(mode, "badshape") == 0)
        return badshape(param(args, "variant", "unknown-key"));
    if (strcmp(mode, "sleep") == 0) {
        say("testworker: sleeping\n");
        sleep_forever();
    }
    if (strcmp(mode, "grandchild") == 0)
        return grandchild(call);
    if (strcmp(mode, "halt") == 0) {
        json_t *r = json_object_get(args, "result");
        return te_halt(param(args, "reason", "plan_submitted"),
                       r ? json_incref(r) : json_pack("{s:s}", "plan", "p"));
    }
    if (strcmp(mode, "ask") == 0) {
        json_t *o = json_object_get(args, "opts");
        return te_ask_user(arg_str(args, "question", "which city?"), o ? json_incref(o) : NULL);
    }
    if (strcmp(mode, "context") == 0)
        return te_ok(call->opts ? json_incref(call->opts) : json_null());
    if (strcmp(mode, "env") == 0)
        return te_ok(env_report());
    if (strcmp(mode, "isolation") == 0)
        return te_ok(isolation_report());
    if (strcmp(mode, "fds") == 0)
        return te_ok(list_fds());
    if (strcmp(mode, "concurrency") == 0) {
        const char *log = arg_str(args, "log", NULL);
        if (!log)
            return te_error(json_string("concurrency: no log path"));
        append_line(log, "start");
        sleep_ms((long)arg_int(args, "ms", 40));
        append_line(log, "end");
        return te_ok(json_integer((json_int_t)getpid()));
    }
    if (strcmp(mode, "progress") == 0)
        return progress_mode(args);
    if (strcmp(mode, "wait-file") == 0) {
        const char *path = arg_str(args, "path", NULL);
        if (!path)
            return te_error(json_string("wait-file: no path"));
        for (int i = 0; i < 3000 && access(path, F_OK) != 0; i++)
            sleep_ms(10);
        if (access(path, F_OK) != 0)
            return te_error(json_string("wait-file: gave up waiting"));
        return run_mode(arg_str(args, "then_mode", "echo"), call);
    }
    if (strcmp(mode, "touch") == 0) {
        const char *path = arg_str(args, "path", NULL);
        if (!path)
            return te_error(json_string("touch: no path"));
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return te_error(json_string("touch: open failed"));
        close(fd);
        return te_ok(json_string("touched"));
    }
    if (strcmp(mode, "big-output") == 0) {
        long long n = arg_int(args, "n", 1024);
        char *buf = malloc((size_t)n + 1);
        if (!buf)
            _exit(125);
        memset(buf, 'x', (size_t)n);
        buf[n] = '\0';
        json_t *s = json_stringn(buf, (size_t)n);
        free(buf);
        return te_ok(s);
    }
    if (strcmp(mode, "write-after-frame") == 0) {
        json_t *first = json_pack("{s:s}", "ok", "first");
        json_t *second = json_pack("{s:s}", "ok", "second");
        write_frame_json(first);
        write_frame_json(second);
        json_decref(first);
        json_decref(second);
        write_all(1, "trailing garbage\n", 17);
        say("testworker: wrote after the frame\n");
        if (strcmp(arg_str(args, "then", "exit"), "sleep") == 0)
            sleep_forever();
        _exit(0);
    }
    if (strcmp(mode, "stderr-flood") == 0) {
        long long kb = arg_int(args, "kb", 64);
        char line[128];
        for (long long i = 0; i < kb * 16; i++) {
            /* 64-byte lines, 16 per KiB */
            int n = snprintf(line, sizeof line, "flood line %08lld ", i % 100000000);
            memset(line + n, '.', (size_t)(63 - n));
            line[63] = '\n';
            write_all(2, line, 64);
        }
        say("FINAL-MARKER\n");
        _exit(3);
    }
    if (strcmp(mode, "setsid-grandchild") == 0)
        return setsid_grandchild(call);
    if (strcmp(mode, "fill-pipe") == 0)
        return fill_pipe(args);
    if (strcmp(mode, "connect") == 0)
        return connect_mode(args);
    if (strcmp(mode, "loopback") == 0)
        return loopback_mode(args);
    if (strcmp(mode, "open-files") == 0)
        return open_files_mode();
    if (strcmp(mode, "write-file") == 0)
        return write_file_mode(args);
    if (strcmp(mode, "spin") == 0)
        spin_forever();
    if (strcmp(mode, "identity") == 0)
        return te_ok(identity_report());
    if (strcmp(mode, "stderr-flood-ok") == 0)
        return stderr_flood_ok(args);
    if (strcmp(mode, "fork-many") == 0)
        return fork_many(args);
    if (strcmp(mode, "victim") == 0)
        return victim_mode(args);
    if (strcmp(mode, "hostile") == 0)
        return hostile_mode(args);
    if (strcmp(mode, "big-exit") == 0)
        return big_exit(args);
    if (strcmp(mode, "make-tree") == 0)
        return make_tree(args);
    if (strcmp(mode, "swap-race") == 0)
        return swap_race(args);
    if (strcmp(mode, "probe-dir") == 0)
        return probe_dir(args);
    if (strcmp(mode, "sysprobe") == 0)
        return sysprobe_mode(args);
    if (strcmp(mode, "fs-probe") == 0)
        return fs_probe(args);
    if (strcmp(mode, "warm-state") == 0)
        return warm_state_mode(args);
    if (strcmp(mode, "sysprobe-meet") == 0)
        return sysprobe_meet(args);
    if (strcmp(mode, "proxy-tunnel") == 0)
        return proxy_tunnel_mode(args);
    return te_raised("UnknownMode", mode, NULL);
}

/* "warm-state" (warm start, test_warm.py): what one call could leave for the
 * next if calls shared a process: a global counter, a file in the working
 * directory, a thread still running; with leave true it leaves all three.
 * ok {"counter", "threads", "entries": [cwd entries], "random": N} */
static int warm_counter;

static void *warm_idle_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static json_t *warm_state_mode(const json_t *args)
{
    int counter = ++warm_counter;
    int threads = -1;
    char line[128];
    FILE *f = fopen("/proc/self/status", "re");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %d", &threads) == 1)
            break;
    if (f)
        fclose(f);
    json_t *entries = json_array();
    DIR *d = opendir(".");
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            json_array_append_new(entries, json_string(de->d_name));
    if (d)
        closedir(d);
    if (json_is_true(json_object_get(args, "leave"))) {
        pthread_t t;
        pthread_create(&t, NULL, warm_idle_thread, NULL);
        int fd = open("left-behind.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
    return te_ok(json_pack("{s:i,s:i,s:o,s:I}", "counter", counter, "threads", threads, "entries",
                           entries, "random", (json_int_t)random()));
}

static json_t *handler(const te_call *call, void *userdata)
{
    (void)userdata;
    long long delay = arg_int(call->arguments, "delay_ms", 0);
    if (delay > 0)
        sleep_ms((long)delay);
    const char *mode = g_argc > 1 ? g_argv[1] : arg_str(call->arguments, "mode", "echo");
    return run_mode(mode, call);
}

/* "request": answer with the request frame exactly as it arrived. */
static int request_mode(void)
{
    json_t *req = NULL;
    if (te_worker_read_request(0, &req) < 0)
        return 2;
    json_t *resp = json_pack("{s:O}", "ok", req);
    int rc = te_worker_write_response(1, resp);
    json_decref(resp);
    json_decref(req);
    return rc < 0 ? 2 : 0;
}

/* "plain-stdin": plain protocol; print what arrived on stdin. */
static int plain_stdin_mode(void)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            return 2;
        if (len == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return 2;
            }
            buf = nb;
        }
        ssize_t n = read(0, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    json_t *out = json_pack("{s:s%}", "stdin", buf, len);
    free(buf);
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    if (!s)
        return 2;
    write_all(1, s, strlen(s));
    write_all(1, "\n", 1);
    free(s);
    return 0;
}

/* {"ok": [[[...]]]} nested depth deep, written as one raw frame. */
static int deep_mode(long depth)
{
    size_t len = 6 + 2 * (size_t)depth + 1;
    char *body = malloc(len);
    if (!body)
        return 125;
    memcpy(body, "{\"ok\":", 6);
    memset(body + 6, '[', (size_t)depth);
    memset(body + 6 + depth, ']', (size_t)depth);
    body[len - 1] = '}';
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    te_frame_header((uint32_t)len, hdr);
    int ok = write(1, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr);
    for (size_t off = 0; ok && off < len;) {
        ssize_t n = write(1, body + off, len - off);
        ok = n > 0;
        off += ok ? (size_t)n : 0;
    }
    free(body);
    return ok ? 0 : 1;
}

/* Built with the sanitizers (CI's second pass), this test tool runs under the
 * daemon's default system-call filter, which refuses ptrace(): the exit-time
 * check of LeakSanitizer needs it, and failing there would change a plain
 * tool's exit status. The sanitizers are there for the daemon; its test tool
 * keeps AddressSanitizer without the leak check. (Workers get a clean
 * environment, so ASAN_OPTIONS never reaches them.) */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

int main(int argc, char **argv)
{
    g_argc = argc;
    g_argv = argv;
    if (argc > 1 && strcmp(argv[1], "request") == 0)
        return request_mode();
    if (argc > 1 && strcmp(argv[1], "plain-stdin") == 0)
        return plain_stdin_mode();
    if (argc > 1 && strcmp(argv[1], "linger") == 0)
        return linger_mode(argc, argv);
    if (argc > 1 && strcmp(argv[1], "no-read") == 0) {
        json_t *r = te_ok(json_string("unread"));
        int rc = te_worker_write_response(1, r);
        json_decref(r);
        return rc ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "close-stdin") == 0) {
        close(0);
        json_t *r = te_ok(json_string("closed"));
        int rc = te_worker_write_response(1, r);
        json_decref(r);
        return rc ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "deep") == 0)
        return deep_mode(argc > 2 ? atol(argv[2]) : 100000);
    if (argc > 1 && strcmp(argv[1], "nsjoin") == 0)
        return nsjoin_main();
    if (argc > 1 && strcmp(argv[1], "deny-at-start") == 0) {
        deny_at_start();
        g_argc = 1; /* the mode comes from the arguments */
    }
    return te_worker_main(handler, NULL);
}
