#!/usr/bin/env bash
# The whole test suite: a normal build and an ASan/UBSan build, each running
# every Check suite (unit + end-to-end on the real kernel), then every
# libFuzzer target for a bounded time, then the build, the pure suites and
# the .deb in a Debian 13 root filesystem (tests/debian13.sh; SKIP without
# mmdebstrap; made once, into a cache), then the kernel suites again in
# Debian 12's 6.1 and 6.12 kernels under QEMU (tests/vm/; SKIP without QEMU; the
# kernels are downloaded once, into a cache).  Needs root for the kernel
# tests (they are reported as SKIP otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-20}

if [ "$(id -u)" = 0 ] && [ ! -e /sys/kernel/tracing/trace ]; then
	mount -t tracefs nodev /sys/kernel/tracing || true
fi

run_build() {
	local dir=$1; shift
	if [ ! -d "$dir" ]; then
		meson setup "$dir" "$@"
	else
		meson setup --reconfigure "$dir" "$@" >/dev/null
	fi
	ninja -C "$dir"
	meson test -C "$dir" --print-errorlogs --num-processes 2
}

echo "== normal build"
run_build build-test
echo "== the daemon and record suites again, beside a CPU and memory hog"
if [ "$(id -u)" = 0 ]; then
	tests/loaded.sh build-test 1
else
	echo "SKIP: loaded suites: need root"
fi
echo "== sanitizer build (address,undefined)"
LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	run_build build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false

echo "== packaging: build the .deb, install it, verify the unit"
debdir=$(mktemp -d)
packaging/build-deb.sh "$debdir"
if [ "$(id -u)" = 0 ]; then
	dpkg -i "$debdir"/traced-probes_*.deb
	systemd-analyze verify /lib/systemd/system/traced-probes.service
	systemd-analyze security --offline=yes /lib/systemd/system/traced-probes.service | tail -n 1
	/usr/bin/traced-probes --version
	# convert runs a program of its own from the package's libexec dir.
	conv=$(mktemp -d)
	xz -dc tests/data/convert/sched-v6.dat.xz >"$conv/in.dat"
	/usr/bin/traced-probes convert -q "$conv/in.dat" -o "$conv/out.pftrace"
	test -s "$conv/out.pftrace"
	rm -rf "$conv"
	dpkg -r traced-probes
fi
rm -rf "$debdir"

if command -v clang >/dev/null && [ "$FUZZ_SECONDS" -gt 0 ]; then
	echo "== fuzz targets (${FUZZ_SECONDS}s each)"
	if [ ! -d build-fuzz ]; then
		CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false -Dbench=false
	fi
	ninja -C build-fuzz
	# Every target runs even after one fails, so that one run shows every
	# finding; a failure prints the sanitizer's report and the input (also
	# kept under build-fuzz/findings/ to add to the corpus once fixed).
	fuzz_failed=
	mkdir -p build-fuzz/findings
	for f in build-fuzz/tests/fuzz/fuzz_*; do
		[ -f "$f" ] && [ -x "$f" ] || continue
		name=$(basename "$f")
		corpus=tests/fuzz/corpus/${name#fuzz_}
		work=$(mktemp -d)
		[ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
		rm -f build-fuzz/findings/"$name"-*
		echo "-- $name"
		if "$f" -max_total_time="$FUZZ_SECONDS" -timeout=30 -rss_limit_mb=2048 \
			-artifact_prefix="$PWD/build-fuzz/findings/$name-" "$work" >"$work.log" 2>&1; then
			grep -m 1 '^Done ' "$work.log" || tail -n 1 "$work.log"
		else
			fuzz_failed="$fuzz_failed $name"
			sed -n '/^==[0-9]*==ERROR/,/^SUMMARY/p' "$work.log" | head -n 40
			tail -n 3 "$work.log"
			for a in build-fuzz/findings/"$name"-*; do
				[ -f "$a" ] && { echo "input $a:"; od -A d -c "$a" | head -n 20; }
			done
		fi
		rm -rf "$work" "$work.log"
	done
	if [ -n "$fuzz_failed" ]; then
		echo "FAIL: fuzz targets:$fuzz_failed"
		exit 1
	fi
fi
# Debian 13 (trixie): the build with its compiler and libraries, the pure
# suites and the .deb, in a root filesystem made by mmdebstrap and cached
# (tests/debian13.sh).  It never reaches this machine's tracefs.
echo "== Debian 13: build, pure suites, .deb"
if [ "${TP_DEB13:-1}" = 0 ]; then
	echo "SKIP: Debian 13: TP_DEB13=0"
elif ! command -v mmdebstrap >/dev/null; then
	echo "SKIP: Debian 13: no mmdebstrap (apt-get install mmdebstrap)"
elif [ "$(id -u)" != 0 ]; then
	echo "SKIP: Debian 13: needs root (mmdebstrap's root mode, a chroot in a mount namespace)"
else
	tests/debian13.sh
fi
# Debian 12's own kernels (6.1 generic, cloud, PREEMPT_RT; 6.12 LTS) under QEMU: the
# kernel suites of the normal build again, in each (tests/vm/).
echo "== kernel suites in Debian 12's 6.1 and 6.12 kernels under QEMU"
if [ "${TP_VM:-1}" = 0 ]; then
	echo "SKIP: VM matrix: TP_VM=0"
elif ! command -v qemu-system-x86_64 >/dev/null; then
	echo "SKIP: VM matrix: no qemu-system-x86_64 (apt-get install qemu-system-x86 busybox-static)"
elif [ "$(id -u)" != 0 ]; then
	echo "SKIP: VM matrix: needs root (a mount namespace for the read-only share, virtiofsd)"
elif ! command -v busybox >/dev/null || ldd "$(command -v busybox)" >/dev/null 2>&1; then
	echo "SKIP: VM matrix: no static busybox for the guest's initramfs (apt-get install busybox-static)"
elif ! apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null | grep -q .; then
	# tests/vm/ fetches the guests' kernels through this machine's apt:
	# Debian 13's knows 6.12, not Debian 12's 6.1.
	echo "SKIP: VM matrix: apt knows no Debian 12 kernel (linux-image-6.1.0-N-amd64; apt-get update, or this is not Debian 12)"
elif [ "$(stat -c %d build-test)" != "$(stat -c %d /)" ]; then
	echo "SKIP: VM matrix: $PWD is not on the root filesystem, the only one shared with the guests"
else
	tests/vm/matrix.sh build-test
fi
echo "== all suites passed"
