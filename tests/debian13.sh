#!/usr/bin/env bash
# Debian 13 (trixie): build the tree there, run the pure suites and build and
# install the .deb, in a trixie root filesystem made by mmdebstrap from
# Debian's archive with everything packaging/build-deps and test-deps list.
# That both proves the lists install on a fresh Debian 13 and builds with
# its compiler (gcc 14) and libraries (libtracefs 1.8, protobuf-c 1.5).
#
# The root filesystem is made once and kept as a tarball in $TP_DEB13_CACHE
# (/var/cache/traced-probes-debian13), keyed on a hash of the deps lists and
# of the way it is made, so a changed list makes a new one; one older than
# $TP_DEB13_MAX_AGE_DAYS (30) is made again so that point releases come in.
# Each run unpacks it afresh into a scratch directory and removes it after.
#
# Inside, in a mount namespace of its own: /proc, a /dev of its own and a
# read-only /sys with empty directories over kernel/tracing and kernel/debug
# (sys_stats' suite reads cpufreq there), so nothing reaches the host's
# tracefs or devices; the build and the suites run as nobody (they need no
# privilege), so nothing can mount tracefs either.  Only the .deb's install runs as root.  Needs root and mmdebstrap.
#
#   tests/debian13.sh              build, pure suites, .deb
#   TP_DEB13_SHELL=1 tests/debian13.sh   then a shell in the chroot
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
suite=trixie
cache=${TP_DEB13_CACHE:-/var/cache/traced-probes-debian13}
max_age=${TP_DEB13_MAX_AGE_DAYS:-30}

if [ "$(id -u)" != 0 ]; then
	echo "debian13: needs root (mmdebstrap's root mode, chroot, mount namespace)" >&2
	exit 2
fi
if ! command -v mmdebstrap >/dev/null; then
	echo "debian13: no mmdebstrap (apt-get install mmdebstrap)" >&2
	exit 2
fi

# The lists without comments or blank lines, as .ci/run reads them.
pkgs=$(cat packaging/build-deps packaging/test-deps | sed 's/#.*//' | tr -s ' \t\n' '\n' | sed '/^$/d' | sort -u)
# Anything that changes what mmdebstrap is asked for belongs in the key.
mm_args=(--variant=apt --mode=root --format=tar --components=main
	--aptopt='APT::Install-Recommends "false"'
	--include="$(echo $pkgs | tr ' ' ',')")
key=$(printf '%s\n' "$suite" "${mm_args[@]}" | sha256sum | cut -c1-16)
tarball=$cache/$suite-$key.tar

secs() { echo $(($(date +%s) - $1)); }

mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9
if [ -f "$tarball" ] && [ -n "$(find "$tarball" -mtime +"$max_age")" ]; then
	echo "debian13: $tarball is older than $max_age days, making it again"
	rm -f "$tarball"
fi
if [ ! -f "$tarball" ]; then
	t=$(date +%s)
	echo "debian13: making the $suite root filesystem ($tarball)"
	log=$cache/mmdebstrap.log
	if ! mmdebstrap "${mm_args[@]}" "$suite" "$tarball.new" >"$log" 2>&1; then
		tail -n 40 "$log"
		rm -f "$tarball.new"
		exit 1
	fi
	mv "$tarball.new" "$tarball"
	# Other keys' tarballs are stale lists.
	find "$cache" -maxdepth 1 -name "$suite-*.tar" ! -path "$tarball" -delete
	echo "debian13: root filesystem made in $(secs "$t") s"
fi

root=$(mktemp -d /var/tmp/tp-debian13.XXXXXX)
cleanup() {
	# The mounts died with the namespace; only files are left.
	rm -rf --one-file-system "$root"
}
trap cleanup EXIT
t=$(date +%s)
tar -C "$root" -xf "$tarball"
# Unpacked: another run may now replace the tarball.
flock -u 9

# The tree as git knows it, with changes not yet committed and new files
# not ignored: what would be committed, not what a build left around.
mkdir -p "$root/src/traced-probes"
git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
	xargs -0 cp --parents -t "$root/src/traced-probes"
# The reference traces beside the tree (shared/data), when there are any:
# without them test_protos skips its sample tests.
if [ -d "$top/../shared/data" ]; then
	mkdir -p "$root/src/shared"
	cp -r "$top/../shared/data" "$root/src/shared/data"
fi
chown -R 65534:65534 "$root/src"
echo "debian13: unpacked and copied in $(secs "$t") s"

cat >"$root/src/inner.sh" <<'EOF'
set -euo pipefail
export HOME=/src/home LC_ALL=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /src/home /src/deb && chown 65534:65534 /src/home /src/deb
cd /src/traced-probes
user() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
secs() { echo $(($(date +%s) - $1)); }
# build-deb.sh exports the tree with git ls-files.
user git init -q . && user git add -A
. /etc/os-release
echo "== $PRETTY_NAME, $(gcc --version | head -n 1)"
t=$(date +%s)
user meson setup build -Dwerror=true >/src/setup.log 2>&1 || { cat /src/setup.log; exit 1; }
user ninja -C build -j2 >/src/build.log 2>&1 || { cat /src/build.log; exit 1; }
if grep -n ': warning: ' /src/build.log; then
	echo "debian13: the build has warnings"; exit 1
fi
echo "-- build: $(secs "$t") s, no warnings"
t=$(date +%s)
rc=0 test_rc=0
user meson test -C build --suite pure --print-errorlogs --num-processes 2 >/src/test.log 2>&1 || test_rc=$?
echo "-- pure suites: $(secs "$t") s"
t=$(date +%s)
# The package's build has flags of its own (hardening=+all), so its
# warnings are looked for too.
if DEB_BUILD_OPTIONS=parallel=2 user packaging/build-deb.sh /src/deb >/src/deb.log 2>&1 &&
	dpkg -i /src/deb/traced-probes_*.deb >>/src/deb.log 2>&1 &&
	/usr/bin/traced-probes --version >>/src/deb.log 2>&1 &&
	dpkg -r traced-probes >>/src/deb.log 2>&1; then
	if grep -n ': warning: ' /src/deb/build.log | grep -v -E '^[0-9]+:dpkg-[a-z]+: warning: '; then
		echo "debian13: the .deb's build has warnings"; rc=1
	fi
	echo "-- .deb built, installed, run and removed: $(secs "$t") s"
else
	cat /src/deb.log
	echo "debian13: the .deb failed"
	rc=1
fi
if [ -n "${TP_DEB13_SHELL:-}" ]; then bash -i || true; fi
# Failures listed in tests/debian13-known-failures do not fail the run.
known=tests/debian13-known-failures
failed=$(sed -n '/^Summary of Failures:/,/^Ok:/p' /src/test.log |
	awk '/ (FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS) / { for (i = 1; i < NF; i++) if ($i == "/") { print $(i + 1); break } }' | sort -u)
unknown=0
for t in $failed; do
	if why=$(grep -E "^$t( |\$)" "$known"); then
		echo "-- $t failed (known: $known): ${why#"$t"}"
	else
		unknown=$((unknown + 1))
	fi
done
for t in $(sed -e '/^#/d' -e 's/ .*//' "$known"); do
	case " $(echo $failed) " in
	*" $t "*) ;;
	*) echo "-- $t passes: remove it from $known" ;;
	esac
done
if [ "$test_rc" != 0 ] && [ -n "$failed" ] && [ "$unknown" = 0 ]; then
	test_rc=0
fi
[ "$test_rc" = 0 ] || rc=1
# The suites' output last, so that it ends with meson's summary.
cat /src/test.log
exit $rc
EOF
rc=0
# /proc of the new PID namespace, a /dev of its own (the few nodes a build
# and the suites use, so that nothing in there can remove or replace one of
# the host's), a read-only /sys of its own with nothing mounted in it and
# empty read-only directories over tracing and debug (see the top).
unshare --mount --pid --fork --propagation private -- bash -c '
	set -e
	mount -t proc proc "$1/proc"
	mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$1/sys"
	for d in kernel/tracing kernel/debug; do
		[ ! -d "$1/sys/$d" ] || mount -t tmpfs -o ro,size=4k,mode=555 tmpfs "$1/sys/$d"
	done
	mount -t tmpfs -o mode=755,nosuid tmpfs "$1/dev"
	for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
		IFS=: read -r name major minor <<<"$n"
		mknod -m 666 "$1/dev/$name" c "$major" "$minor"
	done
	mkdir "$1/dev/shm" "$1/dev/pts"
	mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$1/dev/shm"
	mount -t devpts -o newinstance,ptmxmode=0666 devpts "$1/dev/pts"
	ln -s pts/ptmx "$1/dev/ptmx"
	ln -s /proc/self/fd "$1/dev/fd"
	ln -s /proc/self/fd/0 "$1/dev/stdin"
	ln -s /proc/self/fd/1 "$1/dev/stdout"
	ln -s /proc/self/fd/2 "$1/dev/stderr"
	exec chroot "$1" /bin/bash /src/inner.sh' - "$root" || rc=$?
# Nothing after the suites' summary: the steps above said what failed.
exit $rc
