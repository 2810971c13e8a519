#!/bin/sh
# How the golden trace.dat files here were made (trace-cmd 3.1.6, as root):
#   tests/data/convert/record.sh tests/data/convert
# The kernel's symbol table is swapped for a few lines in a private mount
# namespace so that the files stay small; each file is stored xz-compressed
# and unpacked at build time.
set -eu
mkdir -p "${1:-.}"
out=$(realpath "${1:-.}")
tmp=$(mktemp -d)
grep -E ' [tT] (schedule|__schedule|tick_sched_timer|hrtimer_wakeup|it_real_fn|process_one_work|vmstat_update|ksys_read|do_nanosleep)$' \
	/proc/kallsyms > "$tmp/kallsyms" || true
cat > "$tmp/work" <<'W'
#!/bin/sh
for i in 1 2 3 4 5 6 7 8; do cat /proc/self/stat >/dev/null; done
sleep 0.02
W
cat > "$tmp/storm" <<'W'
#!/bin/sh
i=0
while [ $i -lt 300 ]; do /bin/true; i=$((i + 1)); done
W
chmod +x "$tmp/work" "$tmp/storm"
tc() {
	# -d: ftrace_enabled may not be writable; --no-filter: set_ftrace_pid may not open.
	flock /tmp/tracefs.lock unshare -m sh -c "mount --bind $tmp/kallsyms /proc/kallsyms &&
		trace-cmd record -q -d --no-filter -B tpconv-golden $* >/dev/null 2>&1;
		rmdir /sys/kernel/tracing/instances/tpconv-golden 2>/dev/null; true"
}
tc --file-version 6 -e sched -o "$out/sched-v6.dat" -- "$tmp/work"
tc -e irq -e timer -o "$out/irq-v7-zstd.dat" -- "$tmp/work"
tc --compression none -e raw_syscalls -e syscalls:sys_enter_openat -e syscalls:sys_exit_openat \
	-o "$out/syscalls-v7.dat" -- "$tmp/work"
# 64 KiB per CPU, read every half second, and a fork storm: the kernel
# overwrites pages before they are read.
tc --file-version 6 -b 64 -s 500000 -e sched -e irq -o "$out/lost-b64-v6.dat" -- "$tmp/storm"
# 4 KiB per CPU and a context-switch storm: the kernel drops events before
# trace-cmd reads them; report shows "CPU:n [N EVENTS DROPPED]" (the file
# kept is one where one loss has a stored count and one has none).
tc -b 4 -e sched:sched_switch -e sched:sched_waking -o "$out/lost-b4-v7.dat" -- \
	perf bench sched messaging -g 1 -l 50
rm -rf "$tmp"
for f in "$out"/*.dat; do xz -9 -f "$f"; done
