/*
 * toolexecd.h - the daemon's internal interfaces. Data flows one way:
 *
 *   server (socket, JSON lines) -> batch (runner: queue, policy, events)
 *     -> worker (one call's process: pipes, frames, timer) -> sandbox (fork)
 *   reaper (SIGCHLD) -> worker -> batch -> server, upward by callbacks and
 *   ops tables only (daemon/README.md has the whole picture).
 *
 * Each module has a header of its own (batch.h, server.h, worker.h, ...):
 * include those you use, so that an include shows a dependency. This file
 * only gathers them, for code not yet converted.
 */
#ifndef TOOLEXECD_H
#define TOOLEXECD_H

#include "config.h"
#include "bus.h"
#include "log.h"
#include "util.h"
#include "calldir.h"
#include "spill.h"
#include "registry.h"
#include "reaper.h"
#include "sandbox.h"
#include "cgroup.h"
#include "containment.h"
#include "worker.h"
#include "batch.h"
#include "stats.h"
#include "tail.h"
#include "notify.h"
#include "listener.h"
#include "server.h"
#include "toolexec.h"
#include "scheduler.h"

#endif
