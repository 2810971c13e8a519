#!/usr/bin/env bash
# The suites that talk to a service (the daemon, record) on a busy machine:
#
#   tests/loaded.sh BUILD_DIR [ROUNDS] [SUITE...]
#
# Runs each SUITE (default: the daemon suite and the record suites) ROUNDS
# times (default 1) while stress-ng keeps every CPU busy and holds memory
# with a churning worker, as a compiler or a test farm would.  Perf
# engineers trace loaded machines: these suites must wait on conditions,
# never on durations, and pass here as they pass on an idle machine.
# Prints one line per run and a closing "N passed, N failed" line; fails if
# any run failed.  Needs root (the suites SKIP otherwise) and stress-ng.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [ROUNDS] [SUITE...]" >&2; exit 2; }
build=$1
rounds=${2:-1}
shift $(( $# >= 2 ? 2 : 1 ))
suites=("$@")
[ ${#suites[@]} -gt 0 ] ||
	suites=(test_daemon_live test_record_live test_record_exact_live test_record_configs_live)
command -v stress-ng >/dev/null || { echo "SKIP: loaded suites: no stress-ng"; exit 0; }

cpus=$(nproc)
# one CPU hog per CPU and a worker that keeps touching 512 MiB: the drain,
# the service and the test compete for every CPU, and page reclaim runs
stress-ng --cpu "$cpus" --vm 1 --vm-bytes 512M --vm-keep --quiet --timeout 0 &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null' EXIT

passed=0
failed=0
for ((i = 1; i <= rounds; i++)); do
	for s in "${suites[@]}"; do
		start=$SECONDS
		if meson test -C "$build" --no-rebuild --print-errorlogs "$s" >"$build/loaded-$s.log" 2>&1; then
			passed=$((passed + 1))
			echo "round $i: $s OK ($((SECONDS - start)) s)"
		else
			failed=$((failed + 1))
			echo "round $i: $s FAIL ($((SECONDS - start)) s)"
			grep -aE ':[FE]:|Assertion|not restored|never' "$build/loaded-$s.log" | head -n 20
		fi
	done
done
echo "loaded: $passed passed, $failed failed"
[ "$failed" = 0 ]
