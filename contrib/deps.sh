# contrib/deps.sh - sourced by the set-up scripts: installs the Debian
# packages toolexecd needs to build, test and demo, when any is missing.
TE_DEBIAN_PACKAGES="gcc libc6-dev meson ninja-build pkg-config libuv1-dev libjansson-dev libcmocka-dev python3 socat groff-base man-db libpcre2-dev libseccomp-dev json-schema-test-suite libsystemd-dev systemd util-linux"
# pip install contrib/python, offline (contrib/python/tests/test_first_hour.py)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES python3-pip"
# python3 -m venv, the README's SDK path on Debian 12 (PEP 668)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES python3-venv"
# metrics (libmicrohttpd), the audit trail's SHA-256 (nettle: arguments' digest, the
# --audit-file hash chain, and toolexec audit verify)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libmicrohttpd-dev nettle-dev"
# the egress proxy parses HTTP with http-parser (daemon/confine/proxy_request.c)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libhttp-parser-dev"
# the egress proxy ends TLS for hosts with credential headers (daemon/confine/proxy_tls.c);
# openssl: test_credentials makes its test server's certificates
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libgnutls28-dev openssl"
# toolexec mcp over HTTP checks OAuth access tokens (JWTs) with cjose (daemon/cli/mcp_auth_jwt.c)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libcjose-dev"
# toolexec-mcp-bridge speaks Streamable HTTP to an MCP server at a URL with libcurl
# (daemon/mcpbridge/bridge_http.c)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libcurl4-gnutls-dev"
# test_spawner_secrets asks the daemon's gnutls for the egress proxy's keys (gdb)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES gdb"
# test_enforced holds a warm template's sends back (strace's delay injection)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES strace"
# test_mcp_http_auth.py signs the JWTs of its own issuer
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES python3-cryptography"
# the stand-in for a PyPI MCP server (tests/mcp_servers/pymod, test_mcp_server_warm,
# bench/mcpwarm.py) imports what the mcp package pulls in, as far as Debian has it
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES python3-pydantic python3-anyio python3-httpx python3-starlette python3-jsonschema python3-tzlocal"
# the stand-in for PyPI's mcp-server-git (tests/mcp_servers/git_standin.py) runs git
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES git"
# a root daemon's calls' file-system refusals: a BPF program (daemon/confine/fswatch.bpf.c)
# compiled by clang, loaded with libbpf
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libbpf-dev clang"

te_install_deps() {
    missing=""
    for p in $TE_DEBIAN_PACKAGES ${TE_EXTRA_PACKAGES:-}; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "installing:$missing" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # Another apt (unattended-upgrades, a second set-up script) may hold the
    # dpkg lock: wait for it, bounded (TE_APT_LOCK_WAIT seconds), rather than
    # fail. DPkg::Lock::Timeout covers the dpkg lock; update's lists lock is
    # not waited on by apt itself, so it is retried while that is the error.
    te_wait=${TE_APT_LOCK_WAIT:-300}
    apt="$sudo apt-get -o DPkg::Lock::Timeout=$te_wait"
    end=$(($(date +%s) + te_wait))
    while ! out=$($apt update -q 2>&1); do
        if ! printf '%s\n' "$out" | grep -q "Could not get lock" || [ "$(date +%s)" -ge "$end" ]; then
            printf '%s\n' "$out" >&2
            return 1
        fi
        echo "apt-get update: another apt holds the lock; waiting" >&2
        sleep 5
    done
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $apt install -y -q --no-install-recommends $missing
}
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES bubblewrap" # bench/confine.py
