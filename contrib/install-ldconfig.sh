#!/bin/sh
# Run by "meson install" (lib/meson.build): refresh the dynamic loader's
# cache so that programs linked against libtoolexec (the installed toolexecd
# and toolexec carry a RUNPATH where needed; programs users build do not)
# find it in LIBDIR ($1). Skipped for a DESTDIR install (packages run
# ldconfig from their own triggers) and when not root.
libdir=$1
if [ -n "${DESTDIR:-}" ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-ldconfig: not root: not running ldconfig for $libdir" >&2
    exit 0
fi
for l in /sbin/ldconfig /usr/sbin/ldconfig; do
    if [ -x "$l" ]; then
        exec "$l"
    fi
done
echo "install-ldconfig: ldconfig not found: programs may need LD_LIBRARY_PATH=$libdir" >&2
exit 0
