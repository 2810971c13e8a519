#!/usr/bin/env bash
# The kernel end-to-end suites (meson's "kernel" suite: tracefs, live
# drains, record, daemon, faults) of BUILD_DIR in each of Debian 12's 6.1
# kernels (generic, cloud, rt) and its 6.12 LTS kernel under QEMU,
# TP_VM_JOBS guests at a time:
#
#   tests/vm/matrix.sh BUILD_DIR [generic] [cloud] [rt] [6.12] [frozen] [machines]
#
# `frozen` is tests/vm/frozen.sh: 6.12 with a persistent ring buffer,
# rebooted twice, the previous boot's trace read back each time.
# `machines` is tests/vm/machines.sh: this machine, a network namespace and
# a 6.12 guest on serial ports, in one trace with their clocks converted.
# BUILD_DIR must be built already and lie on the root filesystem (the guest
# sees it through the read-only root share).  Each kernel's meson log goes
# to BUILD_DIR/vm-results/KERNEL/.  Prints the time and the result of every
# suite per kernel, with the assertion lines of each failure; fails if any
# suite failed in any kernel, except the failures listed in
# tests/vm/known-failures (printed as known), and if a guest did not finish.
# TP_VM_TIMEOUT: deadline per guest in seconds (default 1800).
# TP_VM_JOBS: guests run at once (default 2): a single-threaded TCG guest
# keeps one host CPU busy, so two of them use a 2-CPU machine fully and the
# matrix takes about two guests' time instead of four.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [generic] [cloud] [rt] [6.12] [frozen] [machines]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
shift
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(generic cloud rt 6.12 frozen machines)

jobs=${TP_VM_JOBS:-2}

# What a scripted row prints of its console as it finishes.
scripted_lines() {
	case $1 in
	frozen) echo '^frozen' ;;
	machines) echo '^(machine|mark|machines)' ;;
	esac
}

# One kernel: its console, meson log and a status file in its results folder.
run_kernel() {
	local k=$1 res=$build/vm-results/$1 start=$SECONDS rc
	# the scripted rows: a script of their own instead of the kernel suites
	if [ "$k" = frozen ] || [ "$k" = machines ]; then
		TP_VM_TIMEOUT=${TP_VM_TIMEOUT:-1800} "$here/$k.sh" "$build" >"$res/console.txt" 2>&1
		rc=$?
		echo "$rc $((SECONDS - start))" >"$res/status"
		grep -aE "$(scripted_lines "$k")" "$res/console.txt" | sed "s/^/$k: /"
		return
	fi
	# The guest writes its meson log to the results share, whatever the outcome.
	"$here/run.sh" --kernel "$k" --timeout "${TP_VM_TIMEOUT:-1800}" --results "$res" -- \
		sh -c 'uname -r; rm -f "$1"/meson-logs/testlog.txt
			CK_TIMEOUT_MULTIPLIER=3 meson test -C "$1" --no-rebuild --suite kernel --print-errorlogs \
				--timeout-multiplier 3
			rc=$?; cp "$1"/meson-logs/testlog.txt "$TP_VM_RESULTS"/ || rc=1; exit $rc' \
		sh "$build" >"$res/console.txt" 2>&1
	rc=$?
	echo "$rc $((SECONDS - start))" >"$res/status"
	# a result line per suite as each kernel finishes
	sed 's/\x1b\[K/\n/g' "$res/console.txt" | grep -aE '^ *[0-9]+/[0-9]+ |^vm: ' | sed "s/^/$k: /"
}

for k in "${kernels[@]}"; do
	res=$build/vm-results/$k
	rm -rf "$res"
	mkdir -p "$res"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	echo "-- $k: the kernel suites under QEMU"
	run_kernel "$k" &
done
wait

failed=0
summary=()
for k in "${kernels[@]}"; do
	res=$build/vm-results/$k
	read -r rc secs <"$res/status" 2>/dev/null || { rc=1; secs=?; }
	if [ "$k" = frozen ] || [ "$k" = machines ]; then
		line="$k: ${secs}s"
		if [ "$rc" = 0 ] && [ "$k" = frozen ]; then
			summary+=("$line, the previous boot's trace read back through record and the daemon")
			continue
		fi
		if [ "$rc" = 0 ]; then
			summary+=("$line, three machines in one trace, the guest's clock shown right within 1 ms")
		else
			failed=1
			summary+=("$line, FAILED (status $rc; see $res/console.txt)")
		fi
		while IFS= read -r l; do
			summary+=("      $l")
		done < <(grep -aE '^machine |^conversion within|^frozen|:[FE]:|FAILED' "$res/console.txt" | tail -n 8 | cut -c1-400)
		continue
	fi
	line="$k ($(head -n 1 "$res/console.txt")): ${secs}s"
	if [ "$rc" = 0 ]; then
		line+=", all passed"
	elif [ "$rc" = 124 ] || [ "$rc" = 125 ] || [ ! -f "$res/testlog.txt" ]; then
		failed=1
		line+=", FAILED (status $rc: the guest did not finish; see $res/)"
	else
		# some suite failed: only unlisted ones count, and a failure that
		# names no suite counts too
		n=0 unknown=0
		while IFS= read -r suite; do
			n=$((n + 1))
			if grep -qE "^$k +$suite( |\$)" "$here/known-failures"; then
				line+=", $suite failed (known: tests/vm/known-failures)"
			else
				unknown=$((unknown + 1))
				line+=", $suite FAILED"
			fi
		done < <(awk '/^test:/ { sub(/.* \/ /, ""); name = $0 }
			      /^result:/ && !/exit status (0|77)$/ { print name }' "$res/testlog.txt")
		[ "$n" -gt 0 ] && [ "$unknown" = 0 ] || failed=1
		line+=" (see $res/)"
	fi
	summary+=("$line")
	# One line per suite, e.g. "test_record_live: exit status 0, 44.78s".
	if [ -f "$res/testlog.txt" ]; then
		while IFS= read -r l; do
			summary+=("    $l")
		done < <(awk '/^test:/ { sub(/.* \/ /, ""); name = $0 }
			      /^duration:/ { d = $2 }
			      /^result:/ { sub(/^result: */, ""); print name ": " $0 ", " d }' \
				"$res/testlog.txt")
		# and why each failure failed: Check's assertion lines (the first
		# few per suite), so the log of a CI run alone tells what broke
		while IFS= read -r l; do
			summary+=("      $l")
		done < <(awk '/^test:/ { sub(/.* \/ /, ""); name = $0; n = 0 }
			      /:[FE]:/ && n < 5 { n++; print name ": " $0 }' "$res/testlog.txt" | cut -c1-400)
	fi
done
echo "== kernel suites under QEMU"
printf '%s\n' "${summary[@]}"
exit $failed
