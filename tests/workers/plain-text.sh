#!/bin/sh
# plain protocol: stdout that is not JSON becomes a string (one trailing
# newline removed).
cat >/dev/null
printf 'hello plain\nsecond line\n'
