#!/bin/sh
# plain protocol: exits 0 after printing bytes that are not UTF-8
printf '\377\376ab\000c'
