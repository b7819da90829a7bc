#!/bin/sh
# man/check.sh PAGE... - render each page with every groff warning enabled;
# any warning fails.
status=0
for page in "$@"; do
    out=$(groff -man -ww -z "$page" 2>&1)
    if [ -n "$out" ]; then
        echo "$page:"; echo "$out"; status=1
    fi
done
exit $status
