/*
 * proxy_dns.c - the egress proxy's name resolution (proxy_dns.h).
 *
 * getaddrinfo() blocks, for as long as the resolver takes: a name whose
 * server never answers holds its thread for the resolver's timeouts and
 * retries (resolv.conf allows 30 s x 5). On libuv's thread pool
 * (uv_getaddrinfo) such names, which any call allowed to them can ask for,
 * held the pool's threads (libuv gives lookups half of them): every other
 * call's names waited behind them, the rest of the pool's work (call
 * directories' removal, spill writes) had half of it, and the daemon's
 * shutdown waited for them to end. So the proxy resolves on threads of its
 * own, at most TD_RESOLVE_THREADS, made when a lookup finds none idle and
 * kept waiting for the next; one call's lookups hold at most
 * TD_RESOLVE_PER_CALL of them (a cancelled one until its thread is done
 * with it), so a call's hanging names hold back its own lookups, not
 * another's. A lookup past them waits in the queue (and the proxy's
 * connect timeout answers its client). Results come back to the
 * loop through one async handle, closed whenever nothing is outstanding so
 * that it never keeps the loop alive; a cancelled lookup is dropped where
 * it is, its thread left to finish it.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <uv.h>

#include "config.h"
#include "proxy_dns.h"

struct td_resolve {
    TAILQ_ENTRY(td_resolve) link;
    td_resolved_cb cb; /* NULL: cancelled (the loop's alone) */
    void *arg;
    uint64_t owner;
    bool queued; /* not yet taken by a thread (under mu) */
    int rc;
    struct addrinfo *res;
    char host[];
};
TAILQ_HEAD(rlist, td_resolve);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static struct rlist pending = TAILQ_HEAD_INITIALIZER(pending);
static struct rlist running = TAILQ_HEAD_INITIALIZER(running);
static struct rlist done = TAILQ_HEAD_INITIALIZER(done);
static unsigned threads, idle, npending; /* under mu */
/* the loop's: lookups started and not yet delivered or dropped */
static unsigned outstanding;
/* set by the loop under mu; a closed one is freed by its close callback */
static uv_async_t *async;

/* under mu: the first lookup queued whose call holds fewer than
 * TD_RESOLVE_PER_CALL threads, or NULL */
static struct td_resolve *next_lookup(void)
{
    struct td_resolve *p, *q;
    TAILQ_FOREACH(p, &pending, link) {
        unsigned busy = 0;
        TAILQ_FOREACH(q, &running, link)
            busy += q->owner == p->owner;
        if (busy < TD_RESOLVE_PER_CALL)
            return p;
    }
    return NULL;
}

static void *resolver(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&mu);
    for (;;) {
        struct td_resolve *r;
        while (!(r = next_lookup())) {
            idle++;
            pthread_cond_wait(&more, &mu);
            idle--;
        }
        TAILQ_REMOVE(&pending, r, link);
        npending--;
        r->queued = false;
        TAILQ_INSERT_TAIL(&running, r, link);
        pthread_mutex_unlock(&mu);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        r->rc = getaddrinfo(r->host, NULL, &hints, &r->res);
        pthread_mutex_lock(&mu);
        TAILQ_REMOVE(&running, r, link);
        TAILQ_INSERT_TAIL(&done, r, link);
        /* under mu: the loop closes the handle only once it took every
         * lookup from done, so none is sent to after its close */
        uv_async_send(async);
        pthread_cond_broadcast(&more); /* its call's next may go now */
    }
    return NULL;
}

static void free_resolve(struct td_resolve *r)
{
    if (r->res)
        freeaddrinfo(r->res);
    free(r);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void dropped(void)
{
    if (--outstanding > 0 || !async)
        return;
    pthread_mutex_lock(&mu);
    uv_async_t *a = async;
    async = NULL;
    pthread_mutex_unlock(&mu);
    uv_close((uv_handle_t *)a, free_handle);
}

static void on_async(uv_async_t *h)
{
    (void)h;
    struct rlist got = TAILQ_HEAD_INITIALIZER(got);
    pthread_mutex_lock(&mu);
    TAILQ_CONCAT(&got, &done, link);
    pthread_mutex_unlock(&mu);
    struct td_resolve *r;
    while ((r = TAILQ_FIRST(&got))) {
        TAILQ_REMOVE(&got, r, link);
        if (r->cb)
            r->cb(r->arg, r->rc, r->res);
        free_resolve(r);
        dropped();
    }
}

/* under mu; false when no thread could be made and none is there */
static bool enough_threads(void)
{
    if (npending <= idle || threads >= TD_RESOLVE_THREADS)
        return true;
    pthread_attr_t attr;
    pthread_t tid;
    sigset_t all, old;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 512 * 1024); /* the resolver's buffers */
    sigfillset(&all);
    /* signals are the loop's (uv_signal): none is delivered to these */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&tid, &attr, resolver, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        threads++;
    return rc == 0 || threads > 0;
}

struct td_resolve *td_resolve_start(const char *host, uint64_t owner, td_resolved_cb cb, void *arg)
{
    size_t n = strlen(host) + 1;
    struct td_resolve *r = calloc(1, sizeof(*r) + n);
    if (!r)
        return NULL;
    memcpy(r->host, host, n);
    r->cb = cb;
    r->arg = arg;
    r->owner = owner;
    if (!async) {
        uv_async_t *a = malloc(sizeof(*a));
        if (!a || uv_async_init(td_loop, a, on_async) < 0) {
            free(a);
            free(r);
            return NULL;
        }
        uv_unref((uv_handle_t *)a); /* a hung lookup keeps no loop up */
        pthread_mutex_lock(&mu);
        async = a;
        pthread_mutex_unlock(&mu);
    }
    outstanding++;
    pthread_mutex_lock(&mu);
    r->queued = true;
    TAILQ_INSERT_TAIL(&pending, r, link);
    npending++;
    if (!enough_threads()) {
        TAILQ_REMOVE(&pending, r, link);
        npending--;
        pthread_mutex_unlock(&mu);
        free(r);
        dropped();
        return NULL;
    }
    pthread_cond_broadcast(&more);
    pthread_mutex_unlock(&mu);
    return r;
}

void td_resolve_cancel(struct td_resolve *r)
{
    if (!r)
        return;
    r->cb = NULL;
    pthread_mutex_lock(&mu);
    bool queued = r->queued;
    if (queued) {
        TAILQ_REMOVE(&pending, r, link);
        npending--;
    }
    pthread_mutex_unlock(&mu);
    if (queued) { /* no thread has it: gone now */
        free_resolve(r);
        dropped();
    }
}
