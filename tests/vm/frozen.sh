#!/usr/bin/env bash
# linux.frozen_ftrace end to end: the previous boot's trace, read back after
# a reboot.  Run on the host:
#
#   tests/vm/frozen.sh BUILD_DIR
#
# boots Debian's 6.12 kernel under QEMU with a persistent ring buffer (the
# boot-mapped instance `boot_mapped`, see FROZEN_ARGS) and reboots it twice,
# or up to four times when the kernel drops a buffer (QEMU keeps the guest's
# RAM across a guest reset):
#
#   boot 1: trace sched_switch, workqueue_execute_start and trace_marker
#           lines into the instance, then reboot;
#   boot 2: test_frozen_ftrace_live reads them back through `record` and
#           compares with what `cat trace` of the instance shows; trace
#           again, reboot;
#   boot 3: the same through the daemon beside the test service.
#
# In the guest the script runs itself with --guest; its phase is a file in
# the results share.  Exit status: the guest's (0: both reads matched).
# TP_VM_TIMEOUT: deadline of the guest in seconds (default 1200).
set -uo pipefail
FROZEN_ARGS='reserve_mem=20M:2M:trace trace_instance=boot_mapped^traceoff@trace'
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != --guest ]; then
	[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
	build=$(cd "$1" && pwd) || exit 2
	exec "$here/run.sh" --kernel 6.12 --append "$FROZEN_ARGS" --max-boots 5 \
		--timeout "${TP_VM_TIMEOUT:-1200}" -- "$here/frozen.sh" --guest "$build"
fi

build=$2
res=${TP_VM_RESULTS:?not in a guest of tests/vm/run.sh}
inst=/sys/kernel/tracing/instances/boot_mapped
phase=$(cat "$res/frozen-phase" 2>/dev/null || echo 1)
echo "frozen: $(uname -r), phase $phase; last_boot_info: $(tr '\n' ' ' <"$inst/last_boot_info" 2>/dev/null)"

[ -d "$inst" ] || { echo "frozen: no $inst: the kernel did not map the boot instance"; exit 1; }

# Events into the instance, then tracing off (reading the instance while it
# still traces workqueue events, with the output on the 9p share, feeds
# itself), then the next phase and a reboot.
trace_then_reboot() {
	echo 1 >"$inst/events/sched/sched_switch/enable" &&
	echo 1 >"$inst/events/workqueue/workqueue_execute_start/enable" &&
	echo 1 >"$inst/tracing_on" || { echo "frozen: cannot trace into $inst"; exit 1; }
	for i in $(seq 1 20); do
		echo "frozen marker $i of boot $phase" >"$inst/trace_marker"
		# work for the workqueues and the scheduler: page cache writeback
		dd if=/dev/zero of=/tmp/frozen-work bs=64k count=4 conv=fsync status=none
	done
	rm -f /tmp/frozen-work
	echo 0 >"$inst/tracing_on"
	# this boot's symbols, which name its addresses when the next boot reads them
	cp /proc/kallsyms "$res/kallsyms-boot$phase"
	echo "frozen: boot $phase traced $(grep -vc '^#' "$inst/trace") events; rebooting"
	echo $((phase + 1)) >"$res/frozen-phase"
	sync
	echo b >/proc/sysrq-trigger
	sleep 600  # the reset comes first
}

read_back() {
	echo "frozen: what the kernel shows of the previous boot, e.g.:"
	grep -m 2 workqueue_execute_start "$inst/trace"
	grep -m 1 tracing_mark_write "$inst/trace"
	TP_BUILD_ROOT=$build TP_FROZEN_VIA=$1 CK_DEFAULT_TIMEOUT=600 \
		TP_FROZEN_OLD_KALLSYMS=$res/kallsyms-boot$((phase - 1)) \
		"$build/tests/kernel/test_frozen_ftrace_live"
	rc=$?
	# 77 would mean the instance held nothing: a failure here
	[ $rc = 0 ] || { echo "frozen: the read-back through $1 failed (status $rc)"; exit 1; }
}

# What this boot has to do: read back what the last boot traced, the
# read-backs in order (record, then the daemon), then trace for the next.
# A boot that finds nothing (the kernel did not keep the buffer: it
# validates it against the new boot's layout and, rarely, drops it) traces
# again and reboots, within the boots run.sh allows.
if [ "$phase" -gt 1 ] && ! grep -qv '^#' "$inst/trace"; then
	echo "frozen: the kernel kept nothing of boot $((phase - 1)) (last_boot_info above); tracing again"
	echo "$phase" >>"$res/frozen-dropped"
else
	case $(cat "$res/frozen-done" 2>/dev/null) in
	"") [ "$phase" = 1 ] || { read_back record; echo record >"$res/frozen-done"; } ;;
	record) read_back daemon; echo daemon >"$res/frozen-done" ;;
	esac
fi
if [ "$(cat "$res/frozen-done" 2>/dev/null)" = daemon ]; then
	echo "frozen: both read-backs matched"
	exit 0
fi
trace_then_reboot
