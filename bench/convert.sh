#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# bench/convert.sh [BUILD_DIR] [FILE.dat] - traced-probes convert against
# trace-cmd report on the same trace.dat: CPU time (user+sys) and peak RSS,
# one table row each.  Without FILE.dat it records one first (root, tracefs
# and trace-cmd needed; about 100 MB: sched, irq, timer and raw_syscalls
# events under a fork load for 12 s, in an instance of its own, under
# /tmp/tracefs.lock), plus a zstd-compressed v7 copy of it.
set -eu

build=${1:-build}
bin=$build/probes/traced-probes
tmp=$(mktemp -d /tmp/tp-bench-convert.XXXXXX)
trap 'rm -rf "$tmp"; rmdir /sys/kernel/tracing/instances/tp-bench-convert 2>/dev/null || true' \
	EXIT INT TERM

if [ $# -ge 2 ]; then
	files=$2
else
	cat > "$tmp/load" <<'W'
#!/bin/sh
end=$(( $(date +%s) + 12 ))
while [ "$(date +%s)" -lt "$end" ]; do
	for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true & done; wait
done
W
	chmod +x "$tmp/load"
	# -d and --no-filter: the function-tracer files may not be writable here.
	flock /tmp/tracefs.lock trace-cmd record -q -d --no-filter -B tp-bench-convert -b 40000 \
		--file-version 6 -e raw_syscalls -e sched -e irq -e timer -o "$tmp/big.dat" \
		-- "$tmp/load" >/dev/null 2>&1 || true
	rmdir /sys/kernel/tracing/instances/tp-bench-convert 2>/dev/null || true
	trace-cmd convert -i "$tmp/big.dat" --file-version 7 --compression zstd \
		-o "$tmp/big-zstd.dat" >/dev/null 2>&1
	files="$tmp/big.dat $tmp/big-zstd.dat"
fi

# One row: label, then the command; CPU = user + sys of the command.
row() {
	label=$1
	shift
	/usr/bin/time -f '%U %S %M' -o "$tmp/t" "$@" >/dev/null 2>&1
	awk -v l="$label" '{ printf "| %-44s | %7.2f | %8.1f |\n", l, $1 + $2, $3 / 1024 }' "$tmp/t"
}

echo "| command | CPU s | peak RSS MiB |"
echo "|---|---:|---:|"
for f in $files; do
	size=$(du -m "$f" | cut -f1)
	name="$(basename "$f") (${size} MB)"
	row "traced-probes convert $name" "$bin" convert -q "$f" -o "$tmp/out.pftrace"
	row "traced-probes convert --no-compact-sched" "$bin" convert -q --no-compact-sched "$f" \
		-o "$tmp/out.pftrace"
	row "trace-cmd report > /dev/null" trace-cmd report -i "$f"
done
