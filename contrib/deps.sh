# contrib/deps.sh - sourced by the set-up scripts: installs the Debian
# packages toolexecd needs to build, test and demo, when any is missing.
TE_DEBIAN_PACKAGES="gcc libc6-dev meson ninja-build pkg-config libuv1-dev libjansson-dev libcmocka-dev python3 socat groff-base man-db libpcre2-dev libseccomp-dev json-schema-test-suite libsystemd-dev systemd util-linux"
# issue 14: pip install contrib/python, offline (contrib/python/tests/test_first_hour.py)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES python3-pip"
# metrics (libmicrohttpd), the audit trail's SHA-256 (nettle: arguments' digest, the
# --audit-file hash chain, and toolexec audit verify)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libmicrohttpd-dev nettle-dev"
# the egress proxy parses HTTP with http-parser (daemon/confine/proxy_request.c)
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libhttp-parser-dev"
# the egress proxy ends TLS for hosts with credential headers (daemon/confine/proxy_tls.c);
# openssl: test_credentials makes its test server's certificates
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES libgnutls28-dev openssl"

te_install_deps() {
    missing=""
    for p in $TE_DEBIAN_PACKAGES ${TE_EXTRA_PACKAGES:-}; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "installing:$missing" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
}
TE_DEBIAN_PACKAGES="$TE_DEBIAN_PACKAGES bubblewrap" # bench/confine.py (issue 11)
