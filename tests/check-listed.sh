#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# check-listed.sh DIR NAME... - fail unless the test_*.c files in DIR are
# exactly the suites NAME... that DIR's meson.build builds (tests/unit,
# tests/kernel; tests itself with no NAME: no suite left outside them).
# The configure step checks the same; this catches a file added since.
set -eu
dir=$1
shift
status=0
for name in "$@"; do
	if [ ! -f "$dir/$name.c" ]; then
		echo "listed in $dir/meson.build, but $dir/$name.c is missing" >&2
		status=1
	fi
done
for f in "$dir"/test_*.c; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .c)
	found=0
	for listed in "$@"; do
		[ "$listed" = "$name" ] && found=1
	done
	if [ "$found" = 0 ]; then
		echo "$f is not listed in $dir/meson.build (suites go in tests/unit or tests/kernel)" >&2
		status=1
	fi
done
[ "$status" = 0 ] && echo "$# suites listed, one per $dir/test_*.c"
exit "$status"
