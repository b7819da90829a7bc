#!/bin/sh
# tests/run.sh - install what is missing (Debian), build, and run the whole
# test suite. This is the README's test command; .ci/run runs it too.
#   BUILD_DIR   build directory (default: build)
#   MESON_ARGS  extra arguments for "meson setup" (e.g. -Db_sanitize=...)
#   TEST_ARGS   extra arguments for "meson test" (e.g. --no-suite fuzz)
set -eu
cd "$(dirname "$0")/.."
. ./contrib/deps.sh
te_install_deps
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$BUILD_DIR" ${MESON_ARGS:-}
fi
ninja -C "$BUILD_DIR"
# shellcheck disable=SC2086
meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 2 ${TEST_ARGS:-}
