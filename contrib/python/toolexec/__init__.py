"""toolexec - Python SDK for toolexecd (standard library only, Python 3.9+).

Two independent modules; importing this package imports neither, so a
worker pays only for what it uses:

  toolexec.worker   write a tool: a handler that runs in a worker process
                    and speaks the framed worker protocol on stdin/stdout;
  toolexec.client   talk to the daemon over its Unix socket: run batches and
                    iterate their events, list tools, tail, stats, cancel.

See README.md next to this package and proto/PROTOCOL.md for the protocols.
"""

__version__ = "0.1.0"
