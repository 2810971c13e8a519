#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# bench/run.sh [BUILD_DIR] - run the drain benchmarks and print one table.
#
# Builds nothing: BUILD_DIR (default "build") must already hold
# bench/bench_drain, bench/bench_live and probes/traced-probes
# (meson option bench=true, the default); bench/bench_smb adds the row of
# the SMB writer alone when it is there; the daemon row also needs
# tests/tp-test-service (meson option tests=true) and is left out without
# it.  Needs root and tracefs; takes about ten minutes (the live tracers record
# 10 s each, the length of a default recording, and take turns twice; each row
# keeps its cheapest run).  The floor, record and the daemon run with 4 KiB
# ring-buffer pages and with traced-probes' sub-buffer size (64 KiB, Linux 6.8+;
# BENCH_SUBBUF=KIB for another), and a sweep records at sub-buffers of 4 KiB to
# 256 KiB.  Extra knobs, through the environment:
#   BENCH_DRAIN_ARGS  passed to bench_drain (e.g. "-d 3 -r 20")
#   BENCH_LIVE_ARGS   passed to bench_live  (e.g. "-t 10 --no-trace-cmd",
#                     "--only daemon", "-r 1")
#   BENCH_NO_SWEEP    set: skip the buffer-size sweep (where the first
#                     overrun appears, with traced-probes' sub-buffers and
#                     with 4 KiB ones) and the sub-buffer sweep (about
#                     three minutes together)
#   BENCH_SUBBUF      the sub-buffer KiB of the traced-probes rows (default 64)
#   BENCH_PERFETTO    a folder with a build of Perfetto's traced, perfetto and
#                     traced_probes: adds traced_probes and the daemon
#                     recording through that same traced (about two minutes more)
set -eu

build=${1:-build}
drain=$build/bench/bench_drain
live=$build/bench/bench_live
smbw=$build/bench/bench_smb
recorder=$build/probes/traced-probes

for f in "$drain" "$live" "$recorder"; do
	if [ ! -x "$f" ]; then
		echo "run.sh: $f is missing; build first: meson setup $build && ninja -C $build" >&2
		exit 1
	fi
done

tmp=$(mktemp -d /tmp/tp-bench-run.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "# traced-probes drain benchmarks"
echo
echo "machine: $(nproc) CPUs ($cpu_model), kernel $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "commit: $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo

status=0
# shellcheck disable=SC2086
"$drain" --rows ${BENCH_DRAIN_ARGS:-} >"$tmp/drain" 2>"$tmp/drain.err" || status=$?
if [ "$status" -eq 77 ]; then
	cat "$tmp/drain.err" >&2
	echo "run.sh: skipped (needs root and tracefs)" >&2
	exit 77
fi
: >"$tmp/smb"
if [ -x "$smbw" ]; then
	"$smbw" --rows >"$tmp/smb" 2>>"$tmp/drain.err" || status=$?
fi
subbuf=${BENCH_SUBBUF:-64}
set --
if [ -n "${BENCH_PERFETTO:-}" ]; then
	set -- --perfetto "$BENCH_PERFETTO"
fi
# shellcheck disable=SC2086
"$live" --rows --rounds 2 -t 10 --subbuf "$subbuf" --recorder "$recorder" "$@" ${BENCH_LIVE_ARGS:-} >"$tmp/live" 2>"$tmp/live.err" || status=$?
: >"$tmp/subbuf"
if [ -z "${BENCH_NO_SWEEP:-}" ]; then
	"$live" -t 3 --only sweep --subbuf "$subbuf" --recorder "$recorder" >"$tmp/sweep" 2>>"$tmp/live.err" || status=$?
	"$live" -t 3 -r 2 --only subbuf --recorder "$recorder" >"$tmp/subbuf" 2>>"$tmp/live.err" || status=$?
fi

echo "| what | ns/event (CPU) | events/s | bytes/event | overruns | peak RSS | workload slowdown |"
echo "|---|---:|---:|---:|---:|---:|---:|"
grep -h '^|' "$tmp/drain" "$tmp/smb" "$tmp/live" || true
echo
grep -h '^- ' "$tmp/drain" "$tmp/smb" "$tmp/live" || true
[ -f "$tmp/sweep" ] && grep -h '^- ' "$tmp/sweep"
grep -h '^- ' "$tmp/subbuf" || true
# symbolize_ksyms: loading /proc/kallsyms (budget: 150 ms, 2 MiB)
if [ -x "$build/bench/bench_ksyms" ]; then
	echo
	"$build/bench/bench_ksyms" -r 5 2>>"$tmp/live.err" || true
fi
if [ -s "$tmp/drain.err" ] || [ -s "$tmp/live.err" ]; then
	echo
	echo "stderr:"
	cat "$tmp/drain.err" "$tmp/live.err"
fi
exit "$status"
