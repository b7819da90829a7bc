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
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/io_uring.h>
#include <linux/sched.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include <toolexec.h>

extern char **environ;

static int g_argc;
static char **g_argv;

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            _exit(120);
        }
        p += n;
        len -= (size_t)n;
    }
}

static void say(const char *text)
{
    write_all(2, text, strlen(text));
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void __attribute__((noreturn)) sleep_forever(void)
{
    for (;;)
        pause();
}

static const char *arg_str(const json_t *args, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(args, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static long long arg_int(const json_t *args, const char *key, long long dflt)
{
    const json_t *v = json_object_get(args, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

/* argv[2] when given, else the string argument key, else dflt. */
static const char *param(const json_t *args, const char *key, const char *dflt)
{
    if (g_argc > 2)
        return g_argv[2];
    return arg_str(args, key, dflt);
}

static void write_frame_raw(const char *body, size_t len)
{
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    te_frame_header((uint32_t)len, hdr);
    write_all(1, hdr, sizeof hdr);
    write_all(1, body, len);
}

static void write_frame_json(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        _exit(121);
    write_frame_raw(s, strlen(s));
    free(s);
}

static void append_line(const char *path, const char *what)
{
    char line[64];
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        _exit(122);
    int n = snprintf(line, sizeof line, "%s %ld\n", what, (long)getpid());
    write_all(fd, line, (size_t)n);
    close(fd);
}

static json_t *list_fds(void)
{
    json_t *fds = json_array();
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return fds;
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd == self)
            continue;
        json_array_append_new(fds, json_integer(fd));
    }
    closedir(d);
    /* readdir order is already ascending for /proc/self/fd */
    return fds;
}

/* "SigBlk:\t0000000000000000" -> "0000000000000000" */
static json_t *status_field(const char *name)
{
    char line[256];
    size_t nlen = strlen(name);
    json_t *out = json_null();
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return out;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
            char *v = line + nlen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = '\0';
            out = json_string(v);
            break;
        }
    }
    fclose(f);
    return out;
}

static json_t *env_report(void)
{
    json_t *env = json_object();
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char *key = strndup(*e, (size_t)(eq - *e));
        json_object_set_new(env, key, json_string(eq + 1));
        free(key);
    }
    char cwd[4096];
    json_t *entries = json_array();
    DIR *d = opendir(".");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                json_array_append_new(entries, json_string(e->d_name));
        }
        closedir(d);
    }
    int fd = open("scratch", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool writable = fd >= 0;
    if (fd >= 0)
        close(fd);
    struct stat st;
    json_t *mode = json_null();
    if (stat(".", &st) == 0)
        mode = json_integer(st.st_mode & 07777);
    return json_pack("{s:o, s:s?, s:o, s:b, s:o}", "env", env, "cwd",
                     getcwd(cwd, sizeof cwd) ? cwd : NULL, "cwd_entries", entries, "cwd_writable",
                     writable, "cwd_mode", mode);
}

static json_t *isolation_report(void)
{
    int pdeath = -1;
    prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    struct rlimit rl;
    long long core = -2;
    if (getrlimit(RLIMIT_CORE, &rl) == 0)
        core = rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur;
    char ns[128];
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    return json_pack("{s:I, s:I, s:I, s:I, s:i, s:i, s:I, s:o, s:o, s:o, s:s, s:I}", "pid",
                     (json_int_t)getpid(), "ppid", (json_int_t)getppid(), "pgid",
                     (json_int_t)getpgid(0), "sid", (json_int_t)getsid(0), "pdeathsig", pdeath,
                     "no_new_privs", nnp, "core_limit", (json_int_t)core, "sigblk",
                     status_field("SigBlk"), "sigign", status_field("SigIgn"), "fds", list_fds(),
                     "pidns", ns, "uid", (json_int_t)getuid());
}

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

/* "fill-pipe": stdout's pipe grown to hold the whole response, which the
 * worker writes and then exits without anyone reading it (a result that
 * is all in the pipe when the daemon reaps the worker). */
static json_t *fill_pipe(const json_t *args)
{
    long long n = arg_int(args, "n", 1 << 20);
    fcntl(1, F_SETPIPE_SZ, (int)(n + 4096));
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        _exit(125);
    memset(buf, 'y', (size_t)n);
    json_t *s = json_stringn(buf, (size_t)n);
    free(buf);
    return te_ok(s);
}

static json_t *run_mode(const char *mode, const te_call *call);
static json_t *warm_state_mode(const json_t *args);
static json_t *sysprobe_meet(const json_t *args);
static void deny_at_start(void);
static json_t *proxy_tunnel_mode(const json_t *args);

static json_t *grandchild(const te_call *call)
{
    const json_t *args = call->arguments;
    const char *token = arg_str(args, "token", "no-token");
    int ready[2];
    if (pipe(ready) < 0)
        return te_raised("OSError", "pipe failed", NULL);
    pid_t pid = fork();
    if (pid < 0)
        return te_raised("OSError", "fork failed", NULL);
    if (pid == 0) {
        /* The grandchild re-executes this program as "linger TOKEN FD" so
         * that a test can find it from outside by the token in its command
         * line, whatever PID namespace it lives in. */
        close(ready[0]);
        if (json_is_true(json_object_get(args, "setsid")))
            setsid();
        char fd[16];
        snprintf(fd, sizeof fd, "%d", ready[1]);
        char *const argv[] = {(char *)"testworker", (char *)"linger", (char *)token, fd, NULL};
        execv("/proc/self/exe", argv);
        execv(g_argv[0], argv);
        _exit(126);
    }
    close(ready[1]);
    char byte;
    ssize_t n;
    while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR)
        ;
    close(ready[0]);
    if (n != 1)
        return te_error(json_string("grandchild: did not start"));
    const char *then = arg_str(args, "then", "ok");
    if (strcmp(then, "exit") == 0) {
        say("testworker: grandchild forked, exiting with 3\n");
        _exit(3);
    }
    if (strcmp(then, "sleep") == 0) {
        say("testworker: grandchild forked, sleeping\n");
        sleep_forever();
    }
    return te_ok(json_pack("{s:I, s:s}", "grandchild", (json_int_t)pid, "token", token));
}

/* "linger TOKEN FD [BURN_MS]": a grandchild. Lets go of the worker's pipes,
 * burns BURN_MS of CPU when given (test_init_report: whose use the call's
 * init must count), tells its parent it runs, then sleeps 60 s; only a kill
 * by the daemon ends it early. */
static int linger_mode(int argc, char **argv)
{
    if (argc > 4) {
        long long burn = atoll(argv[4]);
        struct rusage ru;
        do
            getrusage(RUSAGE_SELF, &ru);
        while ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000LL +
                   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000 <
               burn);
    }
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2)
            close(null);
    }
    if (argc > 3) {
        int fd = atoi(argv[3]);
        write_all(fd, "!", 1);
        close(fd);
    }
    for (int i = 0; i < 600; i++)
        sleep_ms(100);
    return 0;
}

/* "setsid-grandchild": the classic daemon double fork. The worker's child
 * forks the grandchild and exits at once, so the grandchild is an orphan;
 * the grandchild calls setsid(), leaving the worker's process group and
 * session, and lingers. */
static json_t *setsid_grandchild(const te_call *call)
{
    const json_t *args = call->arguments;
    const char *token = arg_str(args, "token", "no-token");
    int ready[2];
    if (pipe(ready) < 0)
        return te_raised("OSError", "pipe failed", NULL);
    pid_t child = fork();
    if (child < 0)
        return te_raised("OSError", "fork failed", NULL);
    if (child == 0) {
        close(ready[0]);
        pid_t gc = fork();
        if (gc < 0)
            _exit(1);
        if (gc > 0)
            _exit(0); /* the middle process leaves at once */
        if (setsid() < 0)
            _exit(2);
        char fd[16], burn[24];
        snprintf(fd, sizeof fd, "%d", ready[1]);
        snprintf(burn, sizeof burn, "%lld", arg_int(args, "burn_ms", 0));
        char *const argv[] = {(char *)"testworker",
                              (char *)"linger",
                              (char *)token,
                              fd,
                              arg_int(args, "burn_ms", 0) ? burn : NULL,
                              NULL};
        execv("/proc/self/exe", argv);
        execv(g_argv[0], argv);
        _exit(126);
    }
    close(ready[1]);
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    char byte;
    ssize_t n;
    while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR)
        ;
    close(ready[0]);
    if (n != 1)
        return te_error(json_string("setsid-grandchild: did not start"));
    const char *then = arg_str(args, "then", "ok");
    if (strcmp(then, "exit") == 0) {
        say("testworker: setsid grandchild forked, exiting with 3\n");
        _exit(3);
    }
    if (strcmp(then, "sleep") == 0) {
        say("testworker: setsid grandchild forked, sleeping\n");
        sleep_forever();
    }
    return te_ok(json_pack("{s:s}", "token", token));
}

static json_t *errno_json(int e)
{
    const char *name = strerrorname_np(e);
    return name ? json_string(name) : json_integer(e);
}

static json_t *connect_mode(const json_t *args)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)arg_int(args, "port", 9));
    if (inet_pton(AF_INET, arg_str(args, "host", "127.0.0.1"), &sa.sin_addr) != 1)
        return te_error(json_string("connect: bad host"));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return te_ok(json_pack("{s:b, s:o, s:s}", "connected", 0, "errno", errno_json(errno),
                               "step", "socket"));
    int rc;
    while ((rc = connect(fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR)
        ;
    int e = errno;
    close(fd);
    if (rc == 0)
        return te_ok(json_pack("{s:b, s:n}", "connected", 1, "errno"));
    return te_ok(
        json_pack("{s:b, s:o, s:s}", "connected", 0, "errno", errno_json(e), "step", "connect"));
}

static json_t *open_files_mode(void)
{
    static int fds[65536];
    long long opened = 0;
    int e = 0;
    while (opened < (long long)(sizeof fds / sizeof fds[0])) { /* else: no limit */
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            e = errno;
            break;
        }
        fds[opened++] = fd;
    }
    for (long long i = 0; i < opened; i++)
        close(fds[i]);
    struct rlimit rl;
    long long nofile = -2;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        nofile = rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur;
    return te_ok(json_pack("{s:I, s:o, s:I}", "opened", (json_int_t)opened, "errno",
                           e ? errno_json(e) : json_null(), "nofile", (json_int_t)nofile));
}

static json_t *write_file_mode(const json_t *args)
{
    if (json_is_true(json_object_get(args, "ignore_sigxfsz")))
        signal(SIGXFSZ, SIG_IGN);
    long long total = arg_int(args, "mb", 2) << 20, written = 0;
    static char chunk[65536];
    memset(chunk, 'f', sizeof chunk);
    int fd = open("big.out", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return te_error(json_pack("{s:o, s:I}", "errno", errno_json(errno), "written", 0));
    while (written < total) {
        size_t want = sizeof chunk;
        if ((long long)want > total - written)
            want = (size_t)(total - written);
        ssize_t n = write(fd, chunk, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return te_error(
                json_pack("{s:o, s:I}", "errno", errno_json(e), "written", (json_int_t)written));
        }
        written += n;
    }
    close(fd);
    return te_ok(json_pack("{s:I}", "written", (json_int_t)written));
}

static void __attribute__((noreturn)) spin_forever(void)
{
    volatile unsigned long long x = 0;
    for (;;)
        x++;
}

static json_t *identity_report(void)
{
    gid_t groups[256];
    int n = getgroups(256, groups);
    json_t *list = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(list, json_integer((json_int_t)groups[i]));
    return json_pack("{s:I, s:I, s:I, s:I, s:o}", "uid", (json_int_t)getuid(), "euid",
                     (json_int_t)geteuid(), "gid", (json_int_t)getgid(), "egid",
                     (json_int_t)getegid(), "groups", list);
}

/* "fork-many": children that live until we exit (their read of the pipe
 * returns 0 then), so they all count against a process limit at once. */
static json_t *fork_many(const json_t *args)
{
    long long n = arg_int(args, "n", 64), forked = 0;
    int hold[2];
    if (pipe(hold) < 0)
        return te_raised("OSError", "pipe failed", NULL);
    int e = 0;
    for (; forked < n; forked++) {
        pid_t pid = fork();
        if (pid < 0) {
            e = errno;
            break;
        }
        if (pid == 0) {
            char c;
            close(hold[1]);
            while (read(hold[0], &c, 1) < 0 && errno == EINTR)
                ;
            _exit(0);
        }
    }
    return te_ok(json_pack("{s:I, s:o}", "forked", (json_int_t)forked, "errno",
                           e ? errno_json(e) : json_null()));
}

static json_t *stderr_flood_ok(const json_t *args)
{
    long long total = arg_int(args, "mb", 1) << 20, sent = 0;
    static char chunk[65536];
    for (size_t i = 0; i < sizeof chunk; i += 64) {
        memset(chunk + i, '.', 63);
        chunk[i + 63] = '\n';
    }
    while (sent < total) {
        size_t want = sizeof chunk;
        if ((long long)want > total - sent)
            want = (size_t)(total - sent);
        write_all(2, chunk, want);
        sent += (long long)want;
    }
    say("FINAL-MARKER\n");
    return te_ok(json_pack("{s:I}", "bytes", (json_int_t)sent));
}

/* ---- victim and hostile (test_hard_identity.py) ---- */

static json_t *victim_mode(const json_t *args)
{
    const char *secret = getenv("VICTIM_SECRET");
    const char *ready = arg_str(args, "ready", NULL), *release = arg_str(args, "release", NULL);
    if (!secret || !ready || !release)
        return te_error(json_string("victim: needs $VICTIM_SECRET, ready and release"));
    append_line("secret.txt", secret);
    /* written aside and renamed: the test reads it as soon as it exists */
    char cwd[4096], tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", ready);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (!getcwd(cwd, sizeof(cwd)) || fd < 0)
        return te_error(json_string("victim: cannot say where it runs"));
    write_all(fd, cwd, strlen(cwd));
    close(fd);
    if (rename(tmp, ready) < 0)
        return te_error(json_string("victim: rename failed"));
    for (int i = 0; i < 3000 && access(release, F_OK) < 0; i++)
        sleep_ms(10);
    char buf[256] = "";
    fd = open("secret.txt", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    const char *answer = arg_str(args, "answer", "");
    return te_ok(json_pack("{s:s, s:s}", "answer", answer, "secret_file", buf));
}

static json_t *attempt_ok(const char *data, size_t n)
{
    char buf[300];
    snprintf(buf, sizeof(buf), "ok:%.*s", (int)(n > 256 ? 256 : n), data);
    for (char *p = buf; *p; p++)
        if (*p == '\0' || (unsigned char)*p < 32)
            *p = ' ';
    return json_string(buf);
}

static json_t *attempt_read(const char *path)
{
    char buf[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno_json(errno);
    ssize_t n = read(fd, buf, sizeof(buf));
    int e = errno;
    close(fd);
    return n < 0 ? errno_json(e) : attempt_ok(buf, (size_t)n);
}

static json_t *attempt_list(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return errno_json(errno);
    char buf[256] = "";
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            size_t len = strlen(buf), dn = strlen(de->d_name);
            if (len + dn + 2 > sizeof(buf))
                break;
            memcpy(buf + len, de->d_name, dn);
            memcpy(buf + len + dn, " ", 2);
        }
    closedir(d);
    return attempt_ok(buf, strlen(buf));
}

static json_t *attempt_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno_json(errno);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(fd);
    return rc == 0 ? json_string("ok:connected") : errno_json(e);
}

static json_t *attempt_pid(const char *what, long long pid)
{
    char path[64];
    if (strcmp(what, "kill") == 0)
        return kill((pid_t)pid, SIGKILL) == 0 ? json_string("ok:killed") : errno_json(errno);
    if (strcmp(what, "environ") == 0) {
        snprintf(path, sizeof(path), "/proc/%lld/environ", pid);
        return attempt_read(path);
    }
    snprintf(path, sizeof(path), "/proc/%lld/%s", pid,
             strcmp(what, "mem") == 0 ? "mem" : "oom_score_adj");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno_json(errno);
    json_t *r = json_string("ok:opened");
    if (strcmp(what, "oom") == 0 && write(fd, "1000", 4) != 4) {
        json_decref(r);
        r = errno_json(errno);
    }
    close(fd);
    return r;
}

static json_t *hostile_mode(const json_t *args)
{
    json_t *out = json_object();
    const char *pid_keys[] = {"environ", "mem", "kill", "oom"};
    for (size_t k = 0; k < 4; k++) {
        json_t *list = json_object_get(args, pid_keys[k]), *v, *res = json_array();
        size_t i;
        json_array_foreach(list, i, v)
        {
            json_array_append_new(res, attempt_pid(pid_keys[k], json_integer_value(v)));
        }
        json_object_set_new(out, pid_keys[k], res);
    }
    const char *path_keys[] = {"read", "list", "connect"};
    json_t *(*fns[])(const char *) = {attempt_read, attempt_list, attempt_connect};
    for (size_t k = 0; k < 3; k++) {
        json_t *list = json_object_get(args, path_keys[k]), *v, *res = json_array();
        size_t i;
        json_array_foreach(list, i, v)
        {
            json_array_append_new(res, fns[k](json_string_value(v)));
        }
        json_object_set_new(out, path_keys[k], res);
    }
    if (json_is_true(json_object_get(args, "tty"))) {
        int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
        json_object_set_new(out, "tty", fd < 0 ? errno_json(errno) : json_string("ok:opened"));
        if (fd >= 0) {
            char c = '#';
            json_object_set_new(out, "tiocsti",
                                ioctl(fd, TIOCSTI, &c) == 0 ? json_string("ok:injected")
                                                            : errno_json(errno));
            close(fd);
        }
    }
    if (json_is_true(json_object_get(args, "socketpair"))) {
        int sv[2], rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
        json_object_set_new(out, "socketpair", rc == 0 ? json_string("ok") : errno_json(errno));
        if (rc == 0)
            close(sv[0]), close(sv[1]);
    }
    json_t *procs = json_array();
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
            json_array_append_new(procs, json_integer(atoll(de->d_name)));
    if (d)
        closedir(d);
    json_object_set_new(out, "procs", procs);
    return te_ok(out);
}

/* big-exit: a result that needs no reader to be written, so that the
 * daemon meets it only at the exit (issue 9, item 8). */
static json_t *big_exit(const json_t *args)
{
    long long pipe_bytes = arg_int(args, "pipe", 1 << 20), n = arg_int(args, "n", 1000000);
    const char *log = arg_str(args, "log", NULL);
    if (log)
        append_line(log, "start");
    if (fcntl(1, F_SETPIPE_SZ, (int)pipe_bytes) < 0)
        return te_error(
            json_pack("{s:s,s:o}", "set_pipe_size", "failed", "errno", errno_json(errno)));
    char *buf = malloc((size_t)n);
    if (!buf)
        _exit(125);
    memset(buf, 'x', (size_t)n);
    json_t *s = json_stringn(buf, (size_t)n);
    free(buf);
    return te_ok(s);
}

/* ---- call directories (test_hard_calldir) ------------------------------- */

static void write_file_at(int dfd, const char *name, const char *text)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        write_all(fd, text, strlen(text));
        close(fd);
    }
}

/* path appears atomically, holding text */
static int publish(const char *path, const char *text)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    write_file_at(AT_FDCWD, tmp, text);
    return rename(tmp, path);
}

static int wait_path(const char *path)
{
    for (int i = 0; i < 30000; i++) {
        if (access(path, F_OK) == 0)
            return 0;
        sleep_ms(1);
    }
    return -1;
}

static json_t *make_tree(const json_t *args)
{
    char name[64];
    long long deep = arg_int(args, "deep", 0), wide = arg_int(args, "wide", 0);
    if (deep > 0) {
        int fd = open(".", O_RDONLY | O_DIRECTORY);
        for (long long i = 0; i < deep && fd >= 0; i++) {
            mkdirat(fd, "d", 0755);
            int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
            close(fd);
            fd = next;
        }
        if (fd < 0)
            return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
        write_file_at(fd, "bottom", "deep");
        close(fd);
    }
    if (wide > 0) {
        mkdir("w", 0755);
        int fd = open("w", O_RDONLY | O_DIRECTORY);
        for (long long i = 0; i < wide && fd >= 0; i++) {
            snprintf(name, sizeof(name), "f%lld", i);
            int f = openat(fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (f < 0)
                return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
            close(f);
        }
        if (fd >= 0)
            close(fd);
    }
    const char *bait = arg_str(args, "bait", NULL);
    if (bait) {
        mkdir("a", 0755);
        int fd = open("a", O_RDONLY | O_DIRECTORY);
        for (long long i = 0; fd >= 0 && i < arg_int(args, "fillers", 1000); i++) {
            snprintf(name, sizeof(name), "x%05lld", i);
            write_file_at(fd, name, "filler");
        }
        if (fd >= 0) {
            write_file_at(fd, bait, "bait");
            close(fd);
        }
    }
    const char *secret = arg_str(args, "secret", NULL);
    if (secret)
        write_file_at(AT_FDCWD, "secret.txt", secret);
    json_t *locked = json_object_get(args, "locked");
    if (json_is_true(locked)) {
        mkdir("l", 0755);
        write_file_at(AT_FDCWD, "l/inside", "locked in");
        chmod("l", 0);
    }
    char cwd[4096];
    if (!getcwd(cwd, sizeof(cwd)))
        return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
    const char *report = arg_str(args, "report", NULL);
    if (report && publish(report, cwd) < 0)
        return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
    const char *go = arg_str(args, "go", NULL);
    if (go && wait_path(go) < 0)
        return te_error(json_string("no go"));
    if (strcmp(arg_str(args, "then", "ok"), "sleep") == 0)
        for (;;)
            pause();
    return te_ok(json_pack("{s:s}", "cwd", cwd));
}

static json_t *swap_race(const json_t *args)
{
    const char *target = arg_str(args, "target", ""), *link = arg_str(args, "link", "/");
    char dir[4096] = "", a[4200], real[4200], probe[4300];
    if (wait_path(target) < 0)
        return te_error(json_string("no target"));
    FILE *f = fopen(target, "r");
    if (!f || !fgets(dir, sizeof(dir), f))
        return te_error(json_string("unreadable target"));
    fclose(f);
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(real, sizeof(real), "%s/a.real", dir);
    /* watch 64 fillers: the first to go says the walk is inside a/ */
    int afd = open(a, O_RDONLY | O_DIRECTORY);
    if (afd < 0)
        return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
    if (publish(arg_str(args, "ready", "/dev/null/x"), "ready") < 0)
        return te_error(json_string("cannot publish ready"));
    time_t end = time(NULL) + arg_int(args, "seconds", 10);
    bool swapped = false;
    while (time(NULL) < end && !swapped) {
        for (int i = 0; i < 64 && !swapped; i++) {
            snprintf(probe, sizeof(probe), "x%05d", i);
            if (faccessat(afd, probe, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
                swapped = rename(a, real) == 0 && symlink(link, a) == 0;
                break;
            }
        }
        if (access(dir, F_OK) < 0)
            break;
    }
    close(afd);
    while (time(NULL) < end && access(dir, F_OK) == 0)
        sleep_ms(1);
    return te_ok(json_pack("{s:b}", "swapped", swapped));
}

static json_t *errno_or_null(int ok)
{
    return ok ? json_null() : errno_json(errno);
}

static json_t *probe_dir(const json_t *args)
{
    const char *work = arg_str(args, "work", "/nonexistent"), *other = arg_str(args, "other", "");
    char path[4200], cwd[4096];
    DIR *d = opendir(work);
    json_t *list_work = errno_or_null(d != NULL);
    if (d)
        closedir(d);
    d = opendir(other);
    json_t *list_other = errno_or_null(d != NULL);
    if (d)
        closedir(d);
    snprintf(path, sizeof(path), "%s/secret.txt", other);
    int fd = open(path, O_RDONLY);
    json_t *read_other = errno_or_null(fd >= 0);
    if (fd >= 0)
        close(fd);
    snprintf(path, sizeof(path), "%s/planted.txt", other);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    json_t *write_other = errno_or_null(fd >= 0);
    if (fd >= 0)
        close(fd);
    return te_ok(json_pack("{s:s, s:o, s:o, s:o, s:o}", "cwd", getcwd(cwd, sizeof(cwd)) ? cwd : "",
                           "list_work", list_work, "list_other", list_other, "read_other",
                           read_other, "write_other", write_other));
}

/* ---- sysprobe (test_confine_sys.py) ---- */

/* One attempt at a call the default system-call filter denies; "ok" or the
 * errno's name. Each is the real call, made with syscall() so that no
 * library wrapper stands in between. */
static json_t *sys_attempt(const char *what)
{
    long rc = -1;
    errno = 0;
    if (strcmp(what, "ptrace") == 0) {
        /* a sibling: a process of our own call, which ptrace_scope would
         * allow us to trace */
        pid_t pid = fork();
        if (pid == 0) {
            for (;;)
                pause();
        }
        if (pid < 0)
            return errno_json(errno);
        rc = syscall(SYS_ptrace, PTRACE_ATTACH, pid, 0, 0);
        int e = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        errno = e;
    } else if (strcmp(what, "io_uring_setup") == 0) {
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        rc = syscall(SYS_io_uring_setup, 1, &p);
    } else if (strcmp(what, "unshare_user") == 0) {
        rc = syscall(SYS_unshare, CLONE_NEWUSER);
    } else if (strcmp(what, "clone_newuser") == 0 || strcmp(what, "clone_plain") == 0) {
        long flags = SIGCHLD | (what[6] == 'n' ? CLONE_NEWUSER : 0);
        rc = syscall(SYS_clone, flags, 0, 0, 0, 0);
        if (rc == 0)
            syscall(SYS_exit_group, 0);
        if (rc > 0)
            waitpid((pid_t)rc, NULL, 0);
    } else if (strcmp(what, "clone3") == 0) {
        struct clone_args ca;
        memset(&ca, 0, sizeof(ca));
        ca.flags = CLONE_NEWUSER;
        ca.exit_signal = SIGCHLD;
        rc = syscall(SYS_clone3, &ca, sizeof(ca));
        if (rc == 0)
            syscall(SYS_exit_group, 0);
        if (rc > 0)
            waitpid((pid_t)rc, NULL, 0);
    } else if (strcmp(what, "mount") == 0) {
        rc = syscall(SYS_mount, "none", ".", "tmpfs", 0, NULL);
    } else if (strcmp(what, "bpf") == 0) {
        char attr[128];
        memset(attr, 0, sizeof(attr));
        rc = syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof(attr));
    } else if (strcmp(what, "netlink") == 0) {
        rc = socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */);
    } else if (strcmp(what, "packet") == 0) {
        rc = socket(AF_PACKET, SOCK_RAW, 0);
    } else if (strcmp(what, "inet") == 0) {
        rc = socket(AF_INET, SOCK_STREAM, 0);
    } else if (strcmp(what, "keyctl") == 0) {
        rc = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
    } else if (strcmp(what, "sched_yield") == 0) {
        rc = syscall(SYS_sched_yield);
#if defined(__x86_64__)
    } else if (strcmp(what, "i386") == 0) {
        /* i386's getpid (20) through the 32-bit entry: the filter knows
         * this ABI's numbers only, and kills */
        long r = 20;
        __asm__ volatile("int $0x80" : "+a"(r) : : "memory");
        rc = r;
    } else if (strcmp(what, "x32") == 0) {
        rc = syscall(39 /* getpid */ | 0x40000000 /* __X32_SYSCALL_BIT */);
#endif
    } else {
        return json_string("unknown");
    }
    int e = errno;
    if (rc >= 0 && strcmp(what, "ptrace") != 0 && strncmp(what, "clone", 5) != 0 &&
        strcmp(what, "sched_yield") != 0 && strcmp(what, "unshare_user") != 0 &&
        strcmp(what, "keyctl") != 0)
        close((int)rc);
    return rc < 0 ? errno_json(e) : json_string("ok");
}

/* arguments.try: names for sys_attempt; arguments.loop: {"count": N} makes
 * N denied calls (io_uring_setup) in a row; arguments.threads and python:
 * a thread and a child made the way the C library makes them (clone3 or
 * its fallback). ok {"NAME": "ok" | errno, ..., "looped": {"EPERM": n}} */
static json_t *sysprobe_mode(const json_t *args)
{
    json_t *out = json_object();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(args, "try"), i, v)
    {
        json_object_set_new(out, json_string_value(v), sys_attempt(json_string_value(v)));
    }
    long long n = arg_int(json_object_get(args, "loop"), "count", 0);
    if (n > 0) {
        json_t *tally = json_object();
        for (long long k = 0; k < n; k++) {
            struct io_uring_params p;
            memset(&p, 0, sizeof(p));
            long rc = syscall(SYS_io_uring_setup, 1, &p);
            const char *name = rc < 0 ? strerrorname_np(errno) : "ok";
            if (rc >= 0)
                close((int)rc);
            json_t *c = json_object_get(tally, name ? name : "?");
            json_object_set_new(tally, name ? name : "?",
                                json_integer(c ? json_integer_value(c) + 1 : 1));
        }
        json_object_set_new(out, "looped", tally);
    }
    if (json_is_true(json_object_get(args, "fork"))) {
        /* fork() is clone3() first in glibc >= 2.34, then clone() */
        pid_t pid = fork();
        if (pid == 0)
            _exit(7);
        int st = 0;
        json_object_set_new(out, "fork",
                            pid < 0 ? errno_json(errno)
                            : waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7
                                ? json_string("ok")
                                : json_string("lost"));
    }
    return te_ok(out);
}

/* ---- warm denials (test_warm_denials.py, issue 12) -------------------------- */

/* Wait (up to 30 s) for path to exist; false when it never did. */
static bool meet_wait(const char *path)
{
    for (int i = 0; i < 3000; i++) {
        if (access(path, F_OK) == 0)
            return true;
        usleep(10000);
    }
    return false;
}

static void meet_touch(const char *dir, const char *name, const char *what)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.%s", dir, name, what);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0)
        close(fd);
}

/* "sysprobe-meet": two calls alive at once, each trying its own denied
 * calls: arguments dir, me, peer, try. Says me.ready in dir, waits for
 * peer.ready, tries, says me.done and waits for peer.done: both calls'
 * processes live while either's denials are noted. ok {NAME: result,
 * "met": bool} */
static json_t *sysprobe_meet(const json_t *args)
{
    const char *dir = arg_str(args, "dir", "/tmp");
    const char *me = arg_str(args, "me", "a"), *peer = arg_str(args, "peer", "b");
    char path[4096];
    json_t *out = json_object();
    meet_touch(dir, me, "ready");
    snprintf(path, sizeof(path), "%s/%s.ready", dir, peer);
    bool met = meet_wait(path);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(args, "try"), i, v)
    {
        json_object_set_new(out, json_string_value(v), sys_attempt(json_string_value(v)));
    }
    meet_touch(dir, me, "done");
    snprintf(path, sizeof(path), "%s/%s.done", dir, peer);
    met = meet_wait(path) && met;
    json_object_set_new(out, "met", json_boolean(met));
    return te_ok(out);
}

/* argv[1] "deny-at-start" (a warm template's own denials): syslog() once
 * before serving, and a child of the template making it every 20 ms for as
 * long as the template lives, so that calls run while the template's
 * denials come in. */
static void deny_at_start(void)
{
    syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, 0, 0);
    pid_t pid = fork();
    if (pid != 0)
        return;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    syscall(SYS_close_range, 0, ~0U, 0); /* not the template's control socket */
    for (;;) {
        syscall(SYS_syslog, 10, 0, 0);
        usleep(20000);
    }
}

/* ---- file-system views (test_confine_fs, issue 11) ------------------------- */

static json_t *attempt_write(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno_json(errno);
    ssize_t n = write(fd, "written\n", 8);
    int e = errno;
    close(fd);
    return n != 8 ? errno_json(e) : json_string("ok:written");
}

static json_t *attempt_stat(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno_json(errno);
    char buf[64];
    snprintf(buf, sizeof(buf), "ok:%o %lld", (unsigned)(st.st_mode & 07777), (long long)st.st_size);
    return json_string(buf);
}

/* fs-probe: for each of read, list, write (create and write a file), stat
 * ("ok:MODE SIZE"): the paths arguments name, each attempt "ok:..." or an
 * errno name; also "cwd". */
static json_t *fs_probe(const json_t *args)
{
    json_t *out = json_object();
    const char *keys[] = {"read", "list", "write", "stat"};
    json_t *(*fns[])(const char *) = {attempt_read, attempt_list, attempt_write, attempt_stat};
    for (size_t k = 0; k < 4; k++) {
        json_t *list = json_object_get(args, keys[k]), *v, *res = json_array();
        size_t i;
        json_array_foreach(list, i, v)
        {
            json_array_append_new(res, fns[k](json_string_value(v)));
        }
        json_object_set_new(out, keys[k], res);
    }
    char cwd[4096];
    json_object_set_new(out, "cwd", json_string(getcwd(cwd, sizeof(cwd)) ? cwd : ""));
    return te_ok(out);
}

/* issue 13: "steps" progress frames through the SDK (te_worker_progress),
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
    if (argc > 1 && strcmp(argv[1], "deny-at-start") == 0) {
        deny_at_start();
        g_argc = 1; /* the mode comes from the arguments */
    }
    return te_worker_main(handler, NULL);
}

/* "proxy-tunnel" (test_warm_egress.py): a call through its egress proxy, as
 * an HTTP client that honours HTTPS_PROXY would do it. */
static size_t proxy_read(int fd, char *buf, size_t cap, bool head)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t k = read(fd, buf + n, head ? 1 : cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
        buf[n] = 0;
        if (head && n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    buf[n] = 0;
    return n;
}

static json_t *first_line(const char *s)
{
    const char *e = strstr(s, "\r\n");
    return json_stringn(s, e ? (size_t)(e - s) : strlen(s));
}

static json_t *proxy_tunnel_mode(const json_t *args)
{
    const char *target = arg_str(args, "target", "127.0.0.1:9");
    const char *path = arg_str(args, "path", "/hello");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(3128)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return te_ok(json_pack("{s:o,s:s}", "errno", errno_json(errno), "step", "socket"));
    struct timeval tv = {20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return te_ok(json_pack("{s:o,s:s}", "errno", errno_json(e), "step", "connect"));
    }
    static char buf[65536];
    int n = snprintf(buf, sizeof(buf), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
    if (write(fd, buf, (size_t)n) != n) {
        int e = errno;
        close(fd);
        return te_ok(json_pack("{s:o,s:s}", "errno", errno_json(e), "step", "write"));
    }
    proxy_read(fd, buf, sizeof(buf), true);
    char net[64];
    ssize_t nl = readlink("/proc/self/ns/net", net, sizeof(net) - 1);
    net[nl > 0 ? nl : 0] = 0;
    json_t *out = json_pack("{s:o,s:s}", "status", first_line(buf), "net", net);
    if (strstr(buf, " 200 ")) {
        n = snprintf(buf, sizeof(buf), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     path);
        if (write(fd, buf, (size_t)n) == n) {
            proxy_read(fd, buf, sizeof(buf), false);
            const char *body = strstr(buf, "\r\n\r\n");
            json_object_set_new(out, "inner", first_line(buf));
            json_object_set_new(out, "body", json_string(body ? body + 4 : ""));
        }
    }
    close(fd);
    return te_ok(out);
}
