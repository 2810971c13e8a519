#!/usr/bin/env bash
# Run one command as root inside a Debian kernel under QEMU:
#
#   tests/vm/run.sh --kernel generic|cloud|rt|6.12 [options] -- COMMAND [ARG...]
#
# The guest's root is this machine's root filesystem, shared read-only (9p,
# or virtiofs for kernels built without 9p such as Debian's cloud kernel),
# under a writable overlay on tmpfs, so the command sees the same binaries,
# build directories and paths as here and changes nothing on the host.
# tracefs, debugfs, /proc, /sys, /dev, /tmp and /run are the guest's own.
# A results directory is shared writable at /tp-results (also $TP_VM_RESULTS).
# The command runs in the current directory; its output is the guest's
# console, copied to stdout; the script exits with the command's status,
# 124 when the guest missed its deadline, 125 when it never reported one.
#
# Kernels are Debian 12's linux-image-6.1.0-N-{amd64,cloud-amd64,rt-amd64}
# (the newest N apt knows), and for `6.12` the newest of Debian 12's 6.12 LTS
# kernels from bookworm-security, linux-image-6.12.N+deb12-amd64, fetched
# with `apt-get download` and unpacked into a cache (never installed):
# $TP_VM_CACHE, else $XDG_CACHE_HOME/traced-probes-vm, else
# /var/cache/traced-probes-vm as root.  `--kernel PACKAGE` takes a full
# package name instead.  Compressed modules (6.12's are .ko.xz) are
# decompressed into the initramfs: busybox's insmod is not relied on to
# read them, nor the kernel to decompress them.
#
# QEMU runs TCG, one thread (`-accel tcg,thread=single -cpu max`):
# multi-threaded TCG has hung 6.1 guests in text patching, and a
# paravirtual /dev/kvm without vmx/svm runs stock kernels far slower.
#
# Options:
#   --kernel K       generic, cloud, rt, 6.12 or a linux-image package (required)
#   --fs 9p|virtiofs root share transport (default: 9p if the kernel has it)
#   --cpus N         vCPUs (default 2)
#   --mem SIZE       guest memory (default 2G)
#   --timeout S      deadline in seconds for the whole guest (default 900)
#   --append ARGS    more kernel command-line arguments (e.g. a persistent
#                    ring buffer's reserve_mem= and trace_instance=)
#   --serial NAME:PATH  a virtio-serial port NAME in the guest
#                    (/dev/virtio-ports/NAME), whose other end is a UNIX
#                    socket QEMU listens on at PATH on the host; repeatable.
#                    A link that belongs to the test alone (no network).
#   --max-boots N    let the guest reboot (`echo b > /proc/sysrq-trigger`):
#                    QEMU then boots the same kernel and command line again,
#                    with the guest's RAM as it was, and the command runs
#                    again; the guest stops after N boots (default 1: a
#                    reboot ends the run).  The command finds its phase in
#                    the results directory.
#   --results DIR    the shared results directory (default: a temporary one,
#                    removed at exit)
#   --fetch-only     fetch and unpack the kernel, print its directory, exit
#   -v               show the kernel's boot messages
set -euo pipefail
args=("$@")

die() { echo "vm: $*" >&2; exit 125; }

kernel=
fs=
cpus=2
mem=2G
timeout_s=900
append_extra=
max_boots=1
serials=()
results=
fetch_only=false
verbose=false
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--fs) fs=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--append) append_extra=$2; shift 2 ;;
	--max-boots) max_boots=$2; shift 2 ;;
	--serial) serials+=("$2"); shift 2 ;;
	--results) results=$2; shift 2 ;;
	--fetch-only) fetch_only=true; shift ;;
	-v) verbose=true; shift ;;
	--) shift; break ;;
	*) die "unknown option $1 (see the top of $0)" ;;
	esac
done
[ -n "$kernel" ] || die "--kernel is required"
$fetch_only || [ $# -gt 0 ] || die "no command given (after --)"

# As root, everything runs in a mount namespace of our own: the guest's root
# share is a read-only bind of / alone (no /proc, /sys, /dev or other mounts
# below it) made there, so that neither transport can write the host's
# files whatever the guest does, and it vanishes with the namespace.
if [ "$(id -u)" = 0 ] && [ -z "${TP_VM_NS:-}" ] && ! $fetch_only; then
	TP_VM_NS=1 exec unshare --mount --propagation private "$0" "${args[@]}"
fi

if [ -n "${TP_VM_CACHE:-}" ]; then
	cache=$TP_VM_CACHE
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
	cache=$XDG_CACHE_HOME/traced-probes-vm
elif [ "$(id -u)" = 0 ]; then
	cache=/var/cache/traced-probes-vm
else
	cache=$HOME/.cache/traced-probes-vm
fi
mkdir -p "$cache"

# ---- the kernel -------------------------------------------------------------

case $kernel in
generic) pattern='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
cloud) pattern='^linux-image-6\.1\.0-[0-9]+-cloud-amd64$' ;;
rt) pattern='^linux-image-6\.1\.0-[0-9]+-rt-amd64$' ;;
# The signed package: the same image as -unsigned, and the name a
# bookworm-security kernel is installed under.
6.12|k612) pattern='^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
linux-image-*)
	# an extended regex matching the name literally: `.` and `+` occur in
	# Debian's names (6.12.117+deb12)
	pattern=$(printf '%s' "$kernel" | sed 's/[][\\.^$*+?(){}|]/\\&/g')
	pattern="^$pattern\$" ;;
*) die "unknown kernel '$kernel' (generic, cloud, rt, 6.12 or a linux-image package)" ;;
esac

# The newest matching package apt knows, else the newest already cached.
pkg=$(apt-cache search --names-only "$pattern" 2>/dev/null | cut -d' ' -f1 | sort -V | tail -n 1)
if [ -z "$pkg" ]; then
	pkg=$(cd "$cache" && ls -d linux-image-* 2>/dev/null | grep -E "$pattern" | sort -V | tail -n 1 || true)
	[ -n "$pkg" ] || die "no package matches $pattern (apt-get update?) and none is cached in $cache"
fi
kdir=$cache/$pkg

fetch_kernel() {
	local tmp
	tmp=$(mktemp -d "$cache/.fetch-XXXXXX")
	# Kept: the image, its config and the modules the shares and the
	# overlay may need; the other modules (most of the package) go.
	if ! (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >&2 &&
	      dpkg-deb -x ./*.deb . && rm -f ./*.deb &&
	      find lib/modules/*/kernel -mindepth 1 -maxdepth 1 ! -name fs ! -name net ! -name drivers \
		   -exec rm -rf {} + &&
	      find lib/modules/*/kernel/net lib/modules/*/kernel/drivers -mindepth 1 -maxdepth 1 \
		   ! -name 9p ! -name virtio ! -name char -exec rm -rf {} + &&
	      find lib/modules/*/kernel/drivers/char -mindepth 1 ! -name 'virtio_console.ko*' \
		   ! -type d -exec rm -f {} + &&
	      rm -rf usr boot/System.map-*); then
		rm -rf "$tmp"
		die "could not fetch $pkg"
	fi
	mv "$tmp" "$kdir"
}

# One fetch at a time per cache; a finished one is reused.
exec 9>"$cache/.lock"
flock 9
# A cache made before the serial ports were kept lacks virtio_console: made again.
if [ -d "$kdir" ] && ! find "$kdir/lib/modules" -name 'virtio_console.ko*' | grep -q . &&
   ! grep -qs virtio_console "$kdir"/lib/modules/*/modules.builtin; then
	rm -rf "$kdir"
fi
[ -d "$kdir" ] || fetch_kernel
flock -u 9
exec 9>&-
if $fetch_only; then
	echo "$kdir"
	exit 0
fi

vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -n 1)
kver=${vmlinuz##*/vmlinuz-}
config=$kdir/boot/config-$kver
moddir=$kdir/lib/modules/$kver
if [ -z "$fs" ]; then
	if grep -q '^CONFIG_9P_FS=[ym]' "$config"; then fs=9p; else fs=virtiofs; fi
fi
case $fs in
9p|virtiofs) ;;
*) die "--fs: 9p or virtiofs" ;;
esac

# ---- cleanup: nothing outlives this script ----------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/tp-vm-XXXXXX")
pgroups=()
own_results=false
cleanup() {
	local g
	for g in "${pgroups[@]}"; do
		kill -KILL -- "-$g" 2>/dev/null || true
	done
	for g in "${pgroups[@]}"; do
		while kill -0 -- "-$g" 2>/dev/null; do sleep 0.1; done
	done
	if mountpoint -q "$work/root" 2>/dev/null; then umount "$work/root" || true; fi
	rm -rf "$work"
	if $own_results; then rm -rf "$results"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

if [ -z "$results" ]; then
	results=$work/results
	mkdir -p "$results"
else
	mkdir -p "$results"
	results=$(cd "$results" && pwd)
fi
rm -f "$results/.rc" "$results/.run" "$results/.boots"

# ---- the shared root: read-only on the host side too ------------------------

rootshare=/
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$work/root"
	mount --bind / "$work/root"
	mount -o remount,bind,ro "$work/root"
	rootshare=$work/root
elif [ "$fs" = virtiofs ]; then
	die "virtiofs needs root (virtiofsd)"
fi
src=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(stat -c %d "$src")" = "$(stat -c %d /)" ] ||
	die "$src is not on the root filesystem; only / is shared with the guest"

# ---- the initramfs ----------------------------------------------------------

busybox=$(command -v busybox || true)
[ -n "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 ||
	die "needs a static busybox (apt-get install busybox-static)"

# Modules in load order: each after what it depends on (from its modinfo).
# A compressed one (.ko.xz, .ko.zst, .ko.gz) is decompressed here, so the
# initramfs holds plain .ko files whatever the kernel's module format.
mods=()
mkdir -p "$work/mod"
add_module() {
	local name=$1 f dep
	for f in "${mods[@]}"; do [ "${f##*/}" = "$name.ko" ] && return 0; done
	grep -qE "/$name\.ko(\.(xz|zst|gz))?\$" "$moddir/modules.builtin" && return 0
	f=$(find "$moddir/kernel" \( -name "$name.ko" -o -name "$name.ko.xz" -o -name "$name.ko.zst" \
		-o -name "$name.ko.gz" \) | head -n 1)
	[ -n "$f" ] || die "$kver has no module $name"
	case $f in
	*.ko) ;;
	*.xz) xz -dc "$f" >"$work/mod/$name.ko" || die "cannot decompress $f"; f=$work/mod/$name.ko ;;
	*.zst) zstd -qdc "$f" >"$work/mod/$name.ko" || die "cannot decompress $f (zstd?)"; f=$work/mod/$name.ko ;;
	*.gz) gzip -dc "$f" >"$work/mod/$name.ko" || die "cannot decompress $f"; f=$work/mod/$name.ko ;;
	esac
	for dep in $(tr '\0' '\n' <"$f" | sed -n 's/^depends=//p' | tr ',' ' '); do
		add_module "${dep//-/_}"
	done
	mods+=("$f")
}
add_module virtio_pci
add_module overlay
[ ${#serials[@]} -eq 0 ] || add_module virtio_console
if [ "$fs" = 9p ]; then
	add_module 9pnet_virtio
	add_module 9p
else
	add_module virtiofs
fi

ird=$work/initramfs
mkdir -p "$ird"/{bin,dev,proc,sys,lower,rw,newroot,mod}
cp "$busybox" "$ird/bin/busybox"
for f in "${mods[@]}"; do
	cp "$f" "$ird/mod/"
	echo "${f##*/}" >>"$ird/mod/order"
done
cp "$(dirname "$0")/init" "$ird/init"
chmod 755 "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet) | gzip -1 >"$work/initrd"

# ---- the command ------------------------------------------------------------

{
	echo "cd $(printf '%q' "$PWD") || exit 125"
	printf '%q ' "$@"
	echo
} >"$results/.run"

# ---- QEMU -------------------------------------------------------------------

case $max_boots in
''|*[!0-9]*|0) die "--max-boots: a number from 1" ;;
esac
qemu=(qemu-system-x86_64 -nodefaults -no-user-config -display none
      -accel tcg,thread=single -cpu max -smp "$cpus" -m "$mem"
      -kernel "$vmlinuz" -initrd "$work/initrd"
      -chardev stdio,id=con,signal=off -serial chardev:con)
# A reboot ends the run unless the command may reboot; init counts boots.
[ "$max_boots" -gt 1 ] || qemu+=(-no-reboot)
append="console=ttyS0 panic=-1 tp.fs=$fs tp.maxboots=$max_boots"
[ -z "$append_extra" ] || append+=" $append_extra"
$verbose || append+=" quiet loglevel=1"

if [ "$fs" = 9p ]; then
	qemu+=(-fsdev "local,id=root,path=$rootshare,security_model=none,readonly=on,multidevs=remap"
	       -device virtio-9p-pci,fsdev=root,mount_tag=tproot
	       -fsdev "local,id=res,path=$results,security_model=none"
	       -device virtio-9p-pci,fsdev=res,mount_tag=tpresults)
else
	virtiofsd=/usr/lib/qemu/virtiofsd
	[ -x "$virtiofsd" ] || die "no $virtiofsd (apt-get install qemu-system-x86)"
	for share in root:"$rootshare" results:"$results"; do
		tag=${share%%:*}
		setsid "$virtiofsd" --socket-path="$work/$tag.sock" -o source="${share#*:}" \
			-o cache=auto -o log_level=err </dev/null >"$work/virtiofsd-$tag.log" 2>&1 &
		pgroups+=("$!")
	done
	for tag in root results; do
		for _ in $(seq 100); do [ -S "$work/$tag.sock" ] && break; sleep 0.05; done
		[ -S "$work/$tag.sock" ] || die "virtiofsd did not start: $(cat "$work/virtiofsd-$tag.log")"
		qemu+=(-chardev "socket,id=vfs-$tag,path=$work/$tag.sock"
		       -device "vhost-user-fs-pci,chardev=vfs-$tag,tag=tp$tag")
	done
	qemu+=(-object "memory-backend-memfd,id=mem,size=$mem,share=on" -numa node,memdev=mem)
fi
if [ ${#serials[@]} -gt 0 ]; then
	qemu+=(-device virtio-serial-pci,id=vser)
	i=0
	for sp in "${serials[@]}"; do
		name=${sp%%:*} path=${sp#*:}
		[ -n "$name" ] && [ "$path" != "$sp" ] || die "--serial NAME:PATH, not '$sp'"
		qemu+=(-chardev "socket,id=ser$i,path=$path,server=on,wait=off"
		       -device "virtserialport,bus=vser.0,chardev=ser$i,name=$name")
		i=$((i + 1))
	done
fi
qemu+=(-append "$append")

setsid "${qemu[@]}" </dev/null &
qpid=$!
pgroups+=("$qpid")

# The deadline: SIGTERM, then SIGKILL; the guest's status is then missing.
deadline=$((SECONDS + timeout_s))
timed_out=false
while kill -0 "$qpid" 2>/dev/null; do
	if [ $SECONDS -ge $deadline ]; then
		echo "vm: $pkg: deadline of ${timeout_s}s reached, killing the guest" >&2
		timed_out=true
		kill -TERM -- "-$qpid" 2>/dev/null || true
		sleep 2
		kill -KILL -- "-$qpid" 2>/dev/null || true
		break
	fi
	sleep 0.5
done
wait "$qpid" 2>/dev/null || true

if $timed_out; then
	exit 124
fi
if [ ! -s "$results/.rc" ]; then
	echo "vm: $pkg: the guest stopped without reporting a status" >&2
	exit 125
fi
rc=$(cat "$results/.rc")
rm -f "$results/.rc" "$results/.run" "$results/.boots"
exit "$rc"
