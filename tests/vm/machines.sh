#!/usr/bin/env bash
# Three machines in one trace, as root:
#
#   tests/vm/machines.sh BUILD_DIR [KERNEL]
#
#   - this machine: the daemon on the test service's UNIX socket;
#   - a network namespace joined by a veth pair with addresses of its own
#     (10.213.N.0/30): the daemon over TCP, as a remote machine;
#   - a QEMU guest (tests/vm/run.sh, KERNEL default 6.12) whose only links to
#     this machine are virtio-serial ports, each a UNIX socket here, bridged
#     by socat to the service's loopback TCP port: the daemon in the guest
#     connects to a local TCP port bridged to its serial port, with its clock
#     sync on a second one (--relay-socket).
#
# The test service serves RelayPort (--relay); the config gives each machine
# its own linux.ftrace (machine_name_filter).  Once all three record, the
# host and the guest exchange markers over a third serial port
# (tp-serial-mark): the host writes "tp-host-send" = N (an atrace counter) into its trace and a
# byte to the guest, the guest writes "tp-guest-mark" = N and echoes the
# byte, the host writes "tp-host-recv" = N; rounds go on until a few took
# under 1 ms.  tp-machines-check then requires three machines, each with
# its events, the remote ones with their SystemInfo and clock sync, the
# namespace's offset within 1 ms of 0 (it reads the host's clocks), every
# guest mark, converted to the host's clock as trace_processor does, within
# its round trip, give or take half the clock sync's longest trip (at least
# 1 ms), and one round that shows the conversion right within 1 ms (the
# mark, converted, inside a round trip and under 1 ms from either end).  Waits are on conditions, bounded by
# TP_MACHINES_WAIT_S (default 300).  Exit status 0 when it all holds.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
GUEST_NAME=tp-guest
NETNS_NAME=tp-netns

# ---- in the guest -------------------------------------------------------------
if [ "${1:-}" = --guest ]; then
	build=$2
	ports=/dev/virtio-ports
	for p in tp.producer tp.relay tp.marker; do
		[ -e "$ports/$p" ] || { echo "machines: no $ports/$p in the guest"; exit 1; }
	done
	# the guest's own loopback, each port one stream
	socat TCP-LISTEN:47300,bind=127.0.0.1,reuseaddr GOPEN:$ports/tp.producer &
	socat TCP-LISTEN:47301,bind=127.0.0.1,reuseaddr GOPEN:$ports/tp.relay &
	# both bridges listening before the daemon dials them: it dials each once
	listening=false
	for _ in $(seq 3000); do
		if ss -ltn 2>/dev/null | grep -q 127.0.0.1:47300 && ss -ltn 2>/dev/null | grep -q 127.0.0.1:47301; then
			listening=true
			break
		fi
		sleep 0.1
	done
	$listening || { echo "machines: the guest's socat bridges never listened"; exit 1; }
	"$build/probes/traced-probes" -s 127.0.0.1:47300 --relay-socket 127.0.0.1:47301 \
		--machine-name $GUEST_NAME -l info &
	daemon=$!
	# markers: each byte from the host, a mark, and the byte back, until the host says quit
	"$build/tests/tp-serial-mark" guest $ports/tp.marker /sys/kernel/tracing/trace_marker ||
		echo "machines: the guest's marker end failed"
	kill -TERM $daemon
	wait $daemon
	echo "machines: guest done (daemon status $?)"
	exit 0
fi

# ---- on the host ----------------------------------------------------------------
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [KERNEL]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
kernel=${2:-6.12}
wait_s=${TP_MACHINES_WAIT_S:-300}
command -v socat >/dev/null || { echo "machines: needs socat" >&2; exit 2; }

tmp=$(mktemp -d /tmp/tp-machines-XXXXXX)
n=$(($$ % 250))
ns=tp-machines-$$
vh=tpmh$(($$ % 100000)) vn=tpmn$(($$ % 100000))
port=$((30000 + $$ % 10000))
inst_host=tp-machines-host-$$ inst_ns=tp-machines-ns-$$
pids=()
fail() {
	local f
	echo "machines: FAILED: $*"
	for f in service.log host.log netns.log guest.log; do
		[ -s "$tmp/$f" ] && { echo "--- $f (end)"; tail -n 15 "$tmp/$f"; }
	done
	exit 1
}
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	ip netns del "$ns" 2>/dev/null
	ip link del "$vh" 2>/dev/null
	rmdir "/sys/kernel/tracing/instances/$inst_host" "/sys/kernel/tracing/instances/$inst_ns" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# wait_for WHAT COMMAND...: until COMMAND succeeds, or fail after wait_s
wait_for() {
	local what=$1 deadline=$((SECONDS + wait_s))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || fail "waited ${wait_s}s for $what"
		sleep 0.2
	done
}

ip netns add "$ns" && ip link add "$vh" type veth peer name "$vn" && ip link set "$vn" netns "$ns" &&
ip addr add 10.213.$n.1/30 dev "$vh" && ip link set "$vh" up &&
ip -n "$ns" addr add 10.213.$n.2/30 dev "$vn" && ip -n "$ns" link set "$vn" up &&
ip -n "$ns" link set lo up || fail "could not make the network namespace"
mkdir "/sys/kernel/tracing/instances/$inst_host" "/sys/kernel/tracing/instances/$inst_ns" ||
	fail "could not make the tracefs instances"

cat >"$tmp/machines.cfg" <<EOF
buffers { size_kb: 32768 fill_policy: DISCARD }
data_sources { config { name: "linux.ftrace" target_buffer: 0
  ftrace_config { ftrace_events: "sched/sched_switch" ftrace_events: "ftrace/print" instance_name: "$inst_host" } }
  machine_name_filter: "host" }
data_sources { config { name: "linux.ftrace" target_buffer: 0
  ftrace_config { ftrace_events: "sched/sched_switch" ftrace_events: "ftrace/print" instance_name: "$inst_ns" } }
  machine_name_filter: "$NETNS_NAME" }
data_sources { config { name: "linux.ftrace" target_buffer: 0
  ftrace_config { ftrace_events: "sched/sched_switch" ftrace_events: "ftrace/print" } }
  machine_name_filter: "$GUEST_NAME" }
duration_ms: $((4 * wait_s * 1000))
EOF

"$build/tests/tp-test-service" --relay -s "$tmp/p.sock,127.0.0.1:$port,10.213.$n.1:$port" \
	-c "$tmp/machines.cfg" --txt -o "$tmp/machines.pftrace" -w $((wait_s * 1000)) >"$tmp/service.out" 2>"$tmp/service.log" &
svc=$!
pids+=($svc)
wait_for "the service" grep -q ready "$tmp/service.out"

# the guest first: it boots slowest
"$here/run.sh" --kernel "$kernel" --timeout $((wait_s * 3)) --results "$tmp/results" \
	--serial tp.producer:"$tmp/vp.sock" --serial tp.relay:"$tmp/vr.sock" --serial tp.marker:"$tmp/vm.sock" \
	-- "$here/machines.sh" --guest "$build" >"$tmp/guest.log" 2>&1 &
guest=$!
pids+=($guest)
wait_for "QEMU's serial sockets" test -S "$tmp/vp.sock" -a -S "$tmp/vr.sock" -a -S "$tmp/vm.sock"
socat UNIX-CONNECT:"$tmp/vp.sock" TCP:127.0.0.1:$port &
pids+=($!)
socat UNIX-CONNECT:"$tmp/vr.sock" TCP:127.0.0.1:$port &
pids+=($!)

TRACED_PROBES_STATE_DIR=$tmp/state-ns ip netns exec "$ns" "$build/probes/traced-probes" \
	-s 10.213.$n.1:$port --machine-name $NETNS_NAME -l info 2>"$tmp/netns.log" &
pids+=($!)
TRACED_PROBES_STATE_DIR=$tmp/state-host "$build/probes/traced-probes" -s "$tmp/p.sock" -l info 2>"$tmp/host.log" &
pids+=($!)

registered() { grep -q "data sources registered" "$1"; }
wait_for "the host's daemon" registered "$tmp/host.log"
wait_for "the namespace's daemon" registered "$tmp/netns.log"
wait_for "the guest's daemon" registered "$tmp/guest.log"
wait_for "the guest's clock sync" grep -q "Clocks synchronised" "$tmp/guest.log"
events() { awk '/read events/ { s += $3 } END { print s + 0 }' /sys/kernel/tracing/instances/"$1"/per_cpu/cpu*/stats; }
recording() { [ "$(events "$inst_host")" -gt 100 ] && [ "$(events "$inst_ns")" -gt 100 ] &&
	      grep -q "linux.ftrace started" "$tmp/guest.log"; }
wait_for "the three machines recording" recording

# markers: a byte each way over the guest's serial port, until a few rounds were fast
"$build/tests/tp-serial-mark" host "$tmp/vm.sock" "/sys/kernel/tracing/instances/$inst_host/trace_marker" ||
	fail "the marker rounds with the guest failed"

kill -TERM $svc
wait $svc || fail "the service's session failed: $(tail -3 "$tmp/service.log")"
"$build/tests/tp-serial-mark" quit "$tmp/vm.sock" || fail "could not tell the guest to stop"
wait $guest
echo "machines: $(grep -a 'machines: guest' "$tmp/guest.log")"
"$build/tests/tp-machines-check" "$tmp/machines.pftrace" 3 $GUEST_NAME $NETNS_NAME
rc=$?
[ -z "${TP_MACHINES_KEEP:-}" ] || cp "$tmp/machines.pftrace" "$TP_MACHINES_KEEP"
[ $rc = 0 ] && echo "machines: three machines, the guest's clock converted within 1 ms" || echo "machines: FAILED"
exit $rc
