#!/bin/sh
# Run by "meson install" (contrib/systemd/meson.build): create the toolexec
# system user from the installed sysusers.d file ($1), so that the workers
# of a root daemon run as toolexec rather than nobody. Skipped for a DESTDIR
# install (packages run systemd-sysusers from their own scripts), when not
# root, and without systemd-sysusers.
conf=$1
if [ -n "${DESTDIR:-}" ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-sysusers: not root: not creating the toolexec user (run: systemd-sysusers $conf)" >&2
    exit 0
fi
if command -v systemd-sysusers >/dev/null; then
    exec systemd-sysusers "$conf"
fi
echo "install-sysusers: systemd-sysusers not found: workers run as nobody until a toolexec user exists" >&2
exit 0
