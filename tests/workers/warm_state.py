#!/usr/bin/env python3
"""warm_state.py - a Python SDK tool for test_warm.py: what one call could
leave for the next if calls shared a process. Its handler returns a global
counter (incremented), random.random(), the live threads, the entries of its
working directory, its TOOLEXEC_CALL_ID and the numpy-free random state;
with {"leave": true} it also leaves a thread running and a file behind; with
{"signal_init": true} it first sends its PID 1 (a warm call's P1, which
shares the template's memory) every signal Python handles or ignores. With
WARM_THREAD=1 in its environment it starts a thread at import (a template
must then refuse to fork)."""
import os
import random
import threading
import time

from toolexec.worker import serve

counter = 0
if os.environ.get("WARM_THREAD") == "1":
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()


def handler(arguments):
    global counter
    if arguments.get("signal_init"):
        import signal
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                    signal.SIGPIPE, signal.SIGCHLD, signal.SIGXFSZ):
            try:
                os.kill(1, sig)
            except PermissionError:  # a uid of the call's own (root daemon)
                pass
    counter += 1
    out = {"counter": counter, "random": random.random(), "threads": threading.active_count(),
           "entries": sorted(os.listdir(".")), "call_id": os.environ.get("TOOLEXEC_CALL_ID"),
           "pid": os.getpid()}
    if arguments.get("leave"):
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
        with open("left-behind.txt", "w") as f:
            f.write("x")
    return out


if __name__ == "__main__":
    serve(handler)
