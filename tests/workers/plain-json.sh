#!/bin/sh
# plain protocol: echo the arguments line back; stdout parses as JSON.
exec cat
