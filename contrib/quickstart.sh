#!/bin/sh
# contrib/quickstart.sh - install what is missing (Debian), build, and run
# toolexecd in the foreground on its default socket with the bundled example
# tools. Stop it with ^C.
set -eu
cd "$(dirname "$0")/.."
. ./contrib/deps.sh
te_install_deps
[ -f build/build.ninja ] || meson setup build
ninja -C build
if [ "$(id -u)" -eq 0 ]; then
    sock=/run/toolexecd/toolexecd.sock
else
    sock=${XDG_RUNTIME_DIR:?XDG_RUNTIME_DIR is not set; run build/daemon/toolexecd --socket PATH}/toolexecd.sock
fi
cat <<MSG

toolexecd is starting on $sock. In another terminal, try:

  echo '{"op":"run","calls":[{"id":"c0","name":"echo","arguments":{"x":1}},{"id":"c1","name":"calc","arguments":{"expression":"6*7"}}]}' | socat -t 30 - UNIX-CONNECT:$sock

MSG
# The daemon refuses definitions others may change (a umask of 002 makes
# them group-writable), and env values may be secrets: 0600.
chmod go-w build/contrib/tools.d
chmod 0600 build/contrib/tools.d/*.json
exec build/daemon/toolexecd --tools build/contrib/tools.d
