#!/usr/bin/env python3
"""warm_fetch.py - a Python SDK tool for test_warm_egress.py: fetches
arguments.url with urllib, which takes its proxy from the environment as
any HTTP client would. ok {"status", "body"} or {"error", "code"}, and the
proxy variables it saw."""
import os
import urllib.error
import urllib.request

from toolexec.worker import serve

VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "NO_PROXY")


def handler(arguments):
    out = {"env": {k: os.environ.get(k) for k in VARS}, "pid": os.getpid()}
    try:
        r = urllib.request.urlopen(arguments["url"], timeout=20)
        out.update(status=r.status, body=r.read().decode())
    except urllib.error.HTTPError as e:
        out.update(status=e.code, body=e.read().decode())
    except OSError as e:
        out.update(error=type(e).__name__)
    return out


if __name__ == "__main__":
    serve(handler)
