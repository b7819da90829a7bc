/*
 * mcp_http_auth.c - the HTTP transport as an OAuth 2.1 resource server
 * (mcp_auth.h): the protected-resource metadata served, a request's
 * bearer token judged before anything of it reaches the core, a
 * tools/call's scopes checked, the answers 401, 403 and 400 written.
 *
 * The poll loop never waits for the issuer: it asks
 * mcp_auth_authenticate_nowait(), which judges every token it can on the
 * keys in hand (a cached token, a known "kid", or one whose refresh the
 * rate limit refuses). A token that needs the JWKS fetched goes to one
 * thread of its own, which may wait for the issuer (bounded by the
 * fetch's timeout), while its connection stays suspended; the thread's
 * answer comes back through an eventfd that the poll loop watches, and
 * the request goes on from where it stopped. One thread, one job at a
 * time: the fetches are rate-limited anyway, and the jobs behind one that
 * fetched find the new keys in hand.
 *
 * The token is the Authorization header's alone: it is never copied into
 * what the core gets (a message, its headers' other values), so no tool,
 * daemon or log sees it. A token in the URL's query (access_token=, RFC
 * 6750 section 2.3, which MCP forbids) is refused with 400.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cli.h"
#include "mcp_auth.h"
#include "mcp_http_int.h"

struct mcp_http_auth_job {
    char *authorization;
    struct mcp_http_x *x; /* NULL once its exchange is gone */
    struct mcp_auth_result r;
    struct mcp_http_auth_job *next;
};

struct mcp_http_authq {
    struct mcp_auth *a;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mcp_http_auth_job *todo, *done;
    bool stop;
    int efd;
};

static void *worker(void *arg)
{
    struct mcp_http_authq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->todo && !q->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        if (q->stop)
            break;
        struct mcp_http_auth_job *j = q->todo;
        q->todo = j->next;
        pthread_mutex_unlock(&q->mu);
        mcp_auth_authenticate(q->a, j->authorization, &j->r); /* may wait for the issuer */
        pthread_mutex_lock(&q->mu);
        j->next = q->done;
        q->done = j;
        uint64_t one = 1;
        (void)!write(q->efd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void job_free(struct mcp_http_auth_job *j)
{
    free(j->authorization);
    mcp_auth_result_free(&j->r);
    free(j);
}

int mcp_http_auth_start(struct mcp_http *h, char *err, size_t errlen)
{
    if (!h->o.auth)
        return 0;
    struct mcp_http_authq *q = calloc(1, sizeof(*q));
    if (!q) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    q->a = h->o.auth;
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    int rc = q->efd < 0 ? errno : pthread_create(&q->thread, NULL, worker, q);
    if (rc) {
        snprintf(err, errlen, "the token checks' thread: %s", strerror(rc));
        if (q->efd >= 0)
            close(q->efd);
        free(q);
        return -1;
    }
    h->authq = q;
    h->x_detach = mcp_http_auth_detach;
    return 0;
}

void mcp_http_auth_stop(struct mcp_http *h)
{
    struct mcp_http_authq *q = h->authq;
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL); /* at most one fetch's timeout */
    for (struct mcp_http_auth_job *lists[2] = {q->todo, q->done}, **l = lists; l < lists + 2; l++)
        while (*l) {
            struct mcp_http_auth_job *j = *l;
            *l = j->next;
            if (j->x)
                j->x->job = NULL;
            job_free(j);
        }
    close(q->efd);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    h->authq = NULL;
}

int mcp_http_auth_fd(const struct mcp_http *h)
{
    return h->authq ? h->authq->efd : -1;
}

/* The thread's answers, to their exchanges: each resumes where it stopped
 * (the access handler sees X_AUTH with x->auth filled in). */
void mcp_http_auth_collect(struct mcp_http *h)
{
    struct mcp_http_authq *q = h->authq;
    uint64_t n;
    (void)!read(q->efd, &n, sizeof(n));
    pthread_mutex_lock(&q->mu);
    struct mcp_http_auth_job *done = q->done;
    q->done = NULL;
    for (struct mcp_http_auth_job *j = done; j; j = j->next)
        if (j->x)
            j->x->job = NULL;
    pthread_mutex_unlock(&q->mu);
    while (done) {
        struct mcp_http_auth_job *j = done;
        done = j->next;
        struct mcp_http_x *x = j->x;
        if (x && x->auth) {
            *x->auth = j->r;
            memset(&j->r, 0, sizeof(j->r));
            mcp_http_x_wake(x);
        }
        job_free(j);
    }
}

void mcp_http_auth_detach(struct mcp_http_x *x)
{
    if (x->job) {
        pthread_mutex_lock(&x->h->authq->mu);
        if (x->job)
            x->job->x = NULL;
        pthread_mutex_unlock(&x->h->authq->mu);
    }
    if (x->auth) {
        mcp_auth_result_free(x->auth);
        free(x->auth);
    }
}

bool mcp_http_auth_begin(struct mcp_http_x *x)
{
    struct mcp_http *h = x->h;
    const char *authz =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    x->auth = calloc(1, sizeof(*x->auth));
    if (!x->auth)
        return true; /* answered 500 by the caller: no result */
    if (mcp_auth_authenticate_nowait(h->o.auth, authz, x->auth))
        return true;
    struct mcp_http_auth_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->authorization = strdup(authz))) {
        free(j);
        free(x->auth);
        x->auth = NULL;
        return true;
    }
    struct mcp_http_authq *q = h->authq;
    j->x = x;
    x->job = j;
    x->state = X_AUTH;
    pthread_mutex_lock(&q->mu);
    struct mcp_http_auth_job **t = &q->todo;
    while (*t)
        t = &(*t)->next;
    *t = j; /* first come, first judged */
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    mcp_http_x_wait(x);
    return false;
}

/* 401 or 403: the JSON-RPC error (its description, never the token) and
 * WWW-Authenticate. */
static enum MHD_Result deny(struct MHD_Connection *conn, const struct mcp_auth_result *r)
{
    struct MHD_Response *resp;
    json_t *body =
        mcp_http_rpc_error(NULL, -32600,
                           r->http_status == 403 ? "Forbidden: insufficient_scope"
                                                 : "Unauthorized: a valid bearer token is needed",
                           json_pack("{s:s}", "reason", r->error_description));
    char *text = body ? te_json_dumps(body, 0, NULL) : NULL;
    json_decref(body);
    resp = text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (r->www_authenticate)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, r->www_authenticate);
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)r->http_status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* One line per request judged: who (never the token), what, the verdict. */
static void log_line(const char *verb, const char *what, const struct mcp_auth_result *r)
{
    if (r->http_status)
        cli_err("mcp: %s %s: %d (%s)", verb, what, r->http_status, r->error_description);
    else
        cli_err("mcp: %s %s: subject %s", verb, what, r->principal.subject);
}

bool mcp_http_auth_verdict(struct mcp_http_x *x, const char *verb, enum MHD_Result *rc)
{
    if (!x->auth) {
        *rc = mcp_http_reply(x->conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                             mcp_http_rpc_error(NULL, -32603, "out of memory", NULL), NULL);
        return false;
    }
    if (!x->auth->http_status)
        return true;
    log_line(verb, "/mcp", x->auth);
    *rc = deny(x->conn, x->auth);
    return false;
}

bool mcp_http_auth_scopes(struct mcp_http_x *x, const json_t *msg, enum MHD_Result *rc)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    const char *tool = NULL;
    if (method && strcmp(method, "tools/call") == 0) {
        tool = json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
        bool known = true;
        const json_t *scopes = tool ? x->h->core->tool_scopes(x->h->ctx, tool, &known) : NULL;
        if (!known && !x->auth->principal.all_scopes) {
            /* fail closed: a tool the front has not seen listed yet (a
             * reload under way) may need a scope the token lacks */
            x->auth->http_status = 403;
            snprintf(x->auth->error_description, sizeof(x->auth->error_description),
                     "no tool '%.100s' is listed (yet): its scopes are not known", tool);
        } else
            mcp_auth_authorize(x->h->o.auth, scopes, x->auth);
    }
    char what[160];
    snprintf(what, sizeof(what), "%s%s%.100s", method ? method : "(a response)", tool ? " " : "",
             tool ? tool : "");
    log_line("POST", what, x->auth);
    if (!x->auth->http_status)
        return true;
    *rc = deny(x->conn, x->auth);
    return false;
}

/* Before anything else of a request: the metadata document; a token in
 * the query refused. MHD_YES: go on (nothing queued). */
enum MHD_Result mcp_http_auth_early(struct mcp_http *h, struct MHD_Connection *conn,
                                    const char *url, const char *method, bool *answered)
{
    *answered = true;
    const char *prm = mcp_auth_prm_path(h->o.auth);
    if (strcmp(url, prm) == 0) {
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
            return mcp_http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, NULL);
        const char *doc = mcp_auth_prm_json(h->o.auth);
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(doc), (void *)doc, MHD_RESPMEM_PERSISTENT);
        if (!r)
            return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "access_token")) {
        cli_err("mcp: %s %s: 400 (a token in the query string is refused)", method, url);
        return mcp_http_reply(
            conn, MHD_HTTP_BAD_REQUEST,
            mcp_http_rpc_error(NULL, -32600,
                               "Bad Request: a bearer token goes in the Authorization header, "
                               "never in the URL (access_token= is refused)",
                               NULL),
            NULL);
    }
    if (strcmp(url, "/mcp") == 0) {
        /* A token refused on the headers alone (none, malformed, expired, a
         * bad signature on keys in hand) is answered before the body is
         * read: a client without a valid token holds none of the front's
         * memory. One that needs the issuer's keys waits for its body. */
        struct mcp_auth_result r = {0};
        const char *authz =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (mcp_auth_authenticate_nowait(h->o.auth, authz, &r) && r.http_status) {
            log_line(method, url, &r);
            enum MHD_Result rc = deny(conn, &r);
            mcp_auth_result_free(&r);
            return rc;
        }
        mcp_auth_result_free(&r);
    }
    *answered = false;
    return MHD_YES;
}
