#!/usr/bin/env bash
# tests/fuzz/run.sh - build the libFuzzer targets with clang and run them.
#
#   tests/fuzz/run.sh [OUTDIR]            fuzz each target for $FUZZ_SECONDS
#   tests/fuzz/run.sh --smoke [OUTDIR]    run each target once over its seed
#                                         corpus, no fuzzing (the meson test)
#   tests/fuzz/run.sh --repro [OUTDIR]    run each target over the saved
#                                         crashes in tests/fuzz/crashes/<target>/
#
#   OUTDIR        binaries, working corpora, logs, artifacts
#                 (default: $BUILD_DIR, else /tmp/te-fuzz)
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_TARGETS  targets to run (default: every one
#                 as tests/fuzz/targets lists)
#   CLANG         compiler (default clang)
#   FUZZ_CFLAGS   extra compiler flags (e.g. -DTE_FUZZ_NO_UTF8_CHECK)
#
# The repository's seed corpus is never written: each target fuzzes a fresh
# copy of tests/fuzz/corpus/<target>/ under OUTDIR. Exits non-zero when a
# target crashes, leaks, trips a sanitizer or an invariant, times out or runs
# out of memory; the input is saved as OUTDIR/artifacts/<target>-crash-...
# --smoke exits 77 (meson's "skipped") when clang cannot build fuzzers.
set -uo pipefail

mode=fuzz
case "${1:-}" in
--smoke) mode=smoke; shift ;;
--repro) mode=repro; shift ;;
-h|--help) sed -n '2,22p' "$0"; exit 0 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-${BUILD_DIR:-/tmp/te-fuzz}}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-$(grep -v '^#' "$here/targets")}
cc=${CLANG:-clang}

skip_or_fail() { # message
    echo "fuzz: $1" >&2
    [ "$mode" = smoke ] && exit 77
    exit 1
}

command -v "$cc" >/dev/null 2>&1 || skip_or_fail "$cc not found"
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists jansson nettle; then
    skip_or_fail "jansson or nettle (pkg-config) not found"
fi
probe="$out/.probe.$$" # one per run: CI fuzzes two targets at once into one OUTDIR
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$probe.c"
"$cc" -fsanitize=fuzzer,address,undefined -o "$probe" "$probe.c" >"$probe.log" 2>&1 ||
    skip_or_fail "$cc cannot link -fsanitize=fuzzer (install libclang-rt-14-dev): $(tail -1 "$probe.log")"
rm -f "$probe" "$probe.c" "$probe.log"

# shellcheck disable=SC2207
jansson=($(pkg-config --cflags --libs jansson))
# shellcheck disable=SC2054 # the commas belong to -fsanitize=
cflags=(-g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -fno-omit-frame-pointer -I"$root/lib" -I"$here")
# shellcheck disable=SC2206
extra=(${FUZZ_CFLAGS:-})

# fuzz_audit: the audit chain's line check is the client's, its SHA-256
# lib/'s (nettle)
# shellcheck disable=SC2207
audit=("$root/daemon/cli/auditverify.c" "$root/lib/sha256hex.c" -I"$root/daemon/cli"
       $(pkg-config --cflags --libs nettle))
d="$root/daemon"
daemon_inc=(-I"$root/daemon" -I"$root/daemon/base" -I"$root/daemon/confine" -I"$root/daemon/defs")

# Build all targets in parallel.
pids=()
for t in $targets; do
    own=() # a target's sources beyond lib/'s
    case "$t" in
    fuzz_spawnmsg) own=(-I"$root/daemon/run" -I"$root/daemon/confine" "$root/daemon/run/spawnmsg.c") ;;
    fuzz_audit) own=("${audit[@]}") ;;
    fuzz_mcp) own=(-I"$root/daemon/cli" -I"$root/daemon/base" -I"$root/daemon/unit" -DTE_CLI_VERSION=\"fuzz\"
                   "$root"/daemon/cli/mcp_{content,core,events,modern,mrtr,requests,state,tasks,toolinfo,write}.c
                   "$root/lib/sha256hex.c" "$root/lib/randhex.c" "$root/lib/why.c" -lnettle) ;;
    fuzz_auth) # the MCP HTTP front's token checks: cjose, nettle
        pkg-config --exists cjose nettle || skip_or_fail "cjose or nettle (pkg-config) not found"
        # shellcheck disable=SC2207
        own=(-I"$root/daemon/cli" "$root/daemon/cli/mcp_auth.c" "$root/daemon/cli/mcp_auth_jwt.c"
             "$root/daemon/cli/mcp_auth_cache.c" $(pkg-config --libs cjose nettle)) ;;
    fuzz_narrow)
        own=("${daemon_inc[@]}" "$d"/defs/narrow.c "$d"/confine/{fsview_narrow,fsview,egress,credentials}.c
             "$d"/base/{config,util}.c "$root/lib/landlock.c") ;;
    fuzz_learn) own=("${daemon_inc[@]}" "$d/confine/learn.c") ;;
    fuzz_proxy_head) # the egress proxy's socket-free head parsing; Debian's libhttp-parser
        own=(-I"$d/confine" "$d/confine/proxy_head.c" "$d/confine/credentials.c" -lhttp_parser) ;;
    fuzz_credentials) own=(-I"$d/confine" "$d/confine/credentials.c") ;;
    fuzz_mcp_sse) own=(-I"$d/mcpbridge" "$d/mcpbridge/bridge_sse.c") ;;
    esac
    "$cc" "${cflags[@]}" "${extra[@]}" -o "$out/$t" "$here/$t.c" "${own[@]}" "$root/lib/frame.c" \
        "$root/lib/lines.c" "$root/lib/shapes.c" "$root/lib/message.c" "$root/lib/utf8.c" "$root/lib/json.c" \
        "${jansson[@]}" >"$out/$t.build.log" 2>&1 &
    pids+=($!)
done
build_rc=0
i=0
for t in $targets; do
    if ! wait "${pids[$i]}"; then
        echo "$t: BUILD FAILED" >&2
        cat "$out/$t.build.log" >&2
        build_rc=1
    fi
    i=$((i + 1))
done
[ "$build_rc" -eq 0 ] || exit 1

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
case "$ASAN_OPTIONS" in *detect_leaks=0*) ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1" ;; esac

sanitizer_report() { # log -> 0 when it holds a sanitizer / libFuzzer error report
    grep -aEq 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|invariant failed|SUMMARY: ' "$1"
}

stat_of() { # log key
    sed -n "s/^stat::$2: *//p" "$1" | tail -1 | tr -d '[:space:]'
}

failed=0
for t in $targets; do
    bin="$out/$t"
    log="$out/$t.log"
    dict="$here/$t.dict"
    dictarg=()
    [ -f "$dict" ] && dictarg=(-dict="$dict")
    case "$mode" in
    smoke | repro)
        if [ "$mode" = smoke ]; then dir="$here/corpus/$t"; else dir="$here/crashes/$t"; fi
        files=()
        [ -d "$dir" ] && while IFS= read -r -d '' f; do files+=("$f"); done \
            < <(find "$dir" -type f ! -name '.*' ! -name '*.md' -print0 | sort -z)
        if [ "${#files[@]}" -eq 0 ]; then
            if [ "$mode" = smoke ]; then
                echo "$t: FAILED (no seeds in $dir)"
                failed=1
            else
                echo "$t: no saved inputs in $dir"
            fi
            continue
        fi
        if [ "$mode" = repro ]; then # each input on its own, so every one is reported
            for f in "${files[@]}"; do
                "$bin" -timeout=10 -rss_limit_mb=2048 "$f" >"$log" 2>&1
                rc=$?
                if [ "$rc" -eq 0 ] && ! sanitizer_report "$log"; then
                    echo "$t: OK $f"
                else
                    echo "$t: FAILED $f (exit $rc)"
                    grep -a -E -A1 'ERROR:|runtime error:|invariant failed' "$log" | head -6 | cut -c1-200
                    failed=1
                fi
            done
            continue
        fi
        "$bin" -timeout=10 -rss_limit_mb=2048 "${files[@]}" >"$log" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ] && ! sanitizer_report "$log"; then
            echo "$t: OK (${#files[@]} inputs)"
        else
            echo "$t: FAILED (exit $rc; log $log)"
            grep -a -E 'Running:|ERROR:|runtime error:|invariant failed|SUMMARY:' "$log" | head -20
            failed=1
        fi
        ;;
    fuzz)
        work="$out/corpus/$t"
        rm -rf "$work"
        mkdir -p "$work" "$out/artifacts"
        cp -R "$here/corpus/$t/." "$work/"
        "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$out/artifacts/$t-" "${dictarg[@]}" "$work" >"$log" 2>&1
        rc=$?
        execs=$(stat_of "$log" number_of_executed_units)
        speed=$(stat_of "$log" average_exec_per_sec)
        rss=$(stat_of "$log" peak_rss_mb)
        last=$(grep -a -E '^#[0-9]+' "$log" | tail -1)
        cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
        ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
        corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
        summary="${execs:-?} execs, ${speed:-?} exec/s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, rss ${rss:-?} MB"
        if [ "$rc" -eq 0 ] && ! sanitizer_report "$log"; then
            echo "$t: OK ($seconds s: $summary)"
        else
            art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
            echo "$t: FAILED (exit $rc; $summary; input ${art:-none}; log $log)"
            grep -a -E -A1 'ERROR:|runtime error:|invariant failed|SUMMARY:' "$log" | head -20 | cut -c1-200
            failed=1
        fi
        ;;
    esac
done
exit "$failed"
