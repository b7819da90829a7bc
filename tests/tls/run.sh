#!/usr/bin/env bash
# tests/tls/run.sh BUILD_DIR - the TLS front of contrib/tls on loopback.
#
# Makes a CA, a server certificate, a client certificate and a client
# certificate from another CA (openssl); starts the built toolexecd on a
# temporary socket; runs stunnel4 with contrib/tls/stunnel.conf (paths
# pointed at the temporary directory) under systemd-socket-activate
# --inetd, which does what toolexecd-tls.socket (Accept=yes) does; then:
#   - a batch through socat (a local socket -> TLS with the client
#     certificate) and the built toolexec succeeds;
#   - without a client certificate, and with one from the other CA, the
#     connection is refused in the handshake and no request reaches the
#     daemon (its log names no batch).
# Exit 0 when all holds; the last line is a summary.
set -uo pipefail
build=${1:-build}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
py=/usr/bin/python3

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok      $*"; }
bad() { fail=$((fail + 1)); echo "FAIL    $*"; }
summary() {
    echo "tls test: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}
for t in openssl stunnel4 systemd-socket-activate socat; do
    command -v "$t" >/dev/null || { bad "$t is not installed"; summary; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolexecd-tls.XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- certificates ------------------------------------------------------------------
cd "$tmp" || exit 1
mkcert() { # NAME CA CN [SAN]
    openssl req -new -newkey rsa:2048 -nodes -keyout "$1.key" -subj "/CN=$3" -out "$1.csr" 2>/dev/null &&
        openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
            ${4:+-extfile <(printf 'subjectAltName=%s\n' "$4")} -out "$1.pem" 2>/dev/null
}
for ca in ca rogue-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -subj "/CN=$ca" -days 2 -out $ca.pem 2>/dev/null
done
if mkcert server ca localhost "DNS:localhost,IP:127.0.0.1" && mkcert client ca agent-1 &&
    mkcert rogue rogue-ca agent-rogue; then
    ok "certificates made (a CA, server, client; a client of another CA)"
else
    bad "openssl could not make the certificates"
    summary
fi
chmod 644 ./*.pem ./*.key

# ---- the daemon and the TLS front ------------------------------------------------------
mkdir -m 755 tools work
cat >tools/cat.json <<'JSON'
{"name": "cat", "description": "its input", "schema": {"type": "object"},
 "command": ["/bin/cat"], "protocol": "plain"}
JSON
chmod 644 tools/cat.json
"$build/daemon/toolexecd" --socket "$tmp/s.sock" --tools "$tmp/tools" --work-dir "$tmp/work" \
    2>"$tmp/daemon.log" &
pids+=($!)
sed -e "s|/etc/toolexecd/tls/|$tmp/|g" -e "s|/run/toolexecd/toolexecd.sock|$tmp/s.sock|" \
    -e "s|clients-ca.pem|ca.pem|" "$src/contrib/tls/stunnel.conf" >stunnel.conf
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
systemd-socket-activate --inetd -a -l "127.0.0.1:$port" stunnel4 "$tmp/stunnel.conf" 2>"$tmp/activate.log" &
pids+=($!)
socat "UNIX-LISTEN:$tmp/remote.sock,fork,mode=600" \
    "OPENSSL:127.0.0.1:$port,cert=$tmp/client.pem,key=$tmp/client.key,cafile=$tmp/ca.pem" \
    2>"$tmp/socat.log" &
pids+=($!)
ready() {
    "$py" - "$tmp/s.sock" "$port" "$tmp/remote.sock" <<'PY'
import socket, sys, time
end = time.monotonic() + 15
for target in (sys.argv[1], ("127.0.0.1", int(sys.argv[2])), sys.argv[3]):
    while True:
        s = socket.socket(socket.AF_UNIX if isinstance(target, str) else socket.AF_INET)
        try:
            s.connect(target)
            break
        except OSError:
            if time.monotonic() > end:
                sys.exit("not listening: %s" % (target,))
            time.sleep(0.05)
        finally:
            s.close()
PY
}
if ready; then ok "toolexecd, the TLS front and the client's local socket listen"; else bad "not ready"; cat "$tmp"/*.log; summary; fi

# ---- a batch through TLS with a valid client certificate ---------------------------------
out=$(printf '%s' '[{"id":"c1","name":"cat","arguments":{"over":"tls"}}]' |
    "$build/daemon/cli/toolexec" -s "$tmp/remote.sock" run -j -b tls-1 - 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q '"event":"batch_completed"' <<<"$out" &&
    grep -q 'over.*tls' <<<"$out"; then
    ok "a batch through TLS with a valid client certificate (toolexec via socat OPENSSL)"
else
    bad "the batch through TLS (exit $rc): $out"
    cat "$tmp"/*.log
fi
grep -q 'batch tls-1' "$tmp/daemon.log" && ok "the daemon ran it (its log names batch tls-1)" ||
    bad "the daemon's log does not name batch tls-1"

# ---- refused without a valid client certificate ------------------------------------------
for who in none rogue; do
    if "$py" - "$port" "$tmp" "$who" <<'PY'; then
import json, socket, ssl, sys
port, tmp, who = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=tmp + "/ca.pem")
if who == "rogue":
    ctx.load_cert_chain(tmp + "/rogue.pem", tmp + "/rogue.key")
req = json.dumps({"op": "run", "batch": "refused-" + who,
                  "calls": [{"id": "c1", "name": "cat", "arguments": {}}]}) + "\n"
got = b""
try:
    raw = socket.create_connection(("127.0.0.1", port), timeout=15)
except OSError as e:
    print("cannot connect at all:", e)
    sys.exit(2)
try:
    with raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(req.encode())
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
except (ssl.SSLError, ConnectionResetError, BrokenPipeError, socket.timeout) as e:
    print("refused:", type(e).__name__, str(e)[:80])
sys.exit(1 if got else 0)
PY
        ok "refused without a valid client certificate ($who): nothing answered"
    else
        bad "a client with certificate '$who' got an answer, or could not connect"
    fi
    grep -q "refused-$who" "$tmp/daemon.log" && bad "batch refused-$who reached the daemon" ||
        ok "no request of the '$who' client reached the daemon"
done
summary
