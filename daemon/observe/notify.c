/*
 * notify.c - telling systemd (Type=notify) where we are: READY=1 once the
 * sockets listen and the tools are loaded, STATUS= with a short live summary
 * (refreshed every second while it changes), RELOADING=1 / READY=1 around a
 * reload, STOPPING=1 on shutdown. Without libsystemd, or outside systemd
 * (no NOTIFY_SOCKET), all of it is a no-op.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TD_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "config.h"
#include "notify.h"

/* How often the STATUS= summary is refreshed. */
#define STATUS_INTERVAL_MS 1000

static uv_timer_t status_timer;
static bool timer_on;
static char last_status[256];
static td_notify_status_fn status_fn;

static void notify(const char *msg)
{
#ifdef TD_HAVE_SYSTEMD
    sd_notify(0, msg);
#else
    (void)msg;
#endif
}

static void send_status(void)
{
    char status[256] = "STATUS=";
    if (!status_fn)
        return;
    status_fn(status + 7, sizeof(status) - 7);
    if (strcmp(status, last_status) == 0)
        return;
    snprintf(last_status, sizeof(last_status), "%s", status);
    notify(status);
}

static void on_status_timer(uv_timer_t *t)
{
    send_status();
}

void td_notify_ready(td_notify_status_fn status)
{
    status_fn = status;
    notify("READY=1");
    send_status();
#ifdef TD_HAVE_SYSTEMD
    if (!timer_on && sd_booted() >= 0 && getenv("NOTIFY_SOCKET")) {
        uv_timer_init(td_loop, &status_timer);
        /* the refresh alone must not keep the daemon alive */
        uv_unref((uv_handle_t *)&status_timer);
        uv_timer_start(&status_timer, on_status_timer, STATUS_INTERVAL_MS, STATUS_INTERVAL_MS);
        timer_on = true;
    }
#endif
}

void td_notify_reloading(void)
{
    struct timespec ts;
    char msg[96];
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* MONOTONIC_USEC lets Type=notify-reload managers match the reload */
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    notify(msg);
}

void td_notify_stopping(void)
{
    notify("STOPPING=1");
}

void td_notify_close(void)
{
    if (timer_on) {
        uv_close((uv_handle_t *)&status_timer, NULL);
        timer_on = false;
    }
}

bool td_notify_built(void)
{
#ifdef TD_HAVE_SYSTEMD
    return true;
#else
    return false;
#endif
}
