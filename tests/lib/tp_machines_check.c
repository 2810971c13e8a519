/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tp-machines-check - what a multi-machine trace holds, and whether it is
 * right (tests/vm/machines.sh):
 *
 *   tp-machines-check TRACE MACHINES [MARK_MACHINE_NAME [SAME_KERNEL_MACHINE_NAME]]
 *
 * Every machine (machine_id; 0 is the host) must have FtraceEventBundles,
 * and there must be MACHINES of them; every remote one its SystemInfo and a
 * RemoteClockSync.  With MARK_MACHINE_NAME, the markers of a round trip
 * over a serial link: the host writes "tp-host-send" = N (an atrace counter
 * line) into its trace, a byte to the guest, which writes "tp-guest-mark" =
 * N into its own and sends the byte back, and the host writes
 * "tp-host-recv" = N (tp-serial-mark).
 * Each guest marker, converted to the host's clock with the offset
 * trace_processor v58.2 computes from that machine's RemoteClockSync (the
 * mean of the two estimates of every adjacent pair of snapshots less than
 * 30 s apart), must land between its send and receive markers, give or
 * take the error that method allows: half the longest round trip of those
 * pairs (an offset from a round trip is off by at most half of it, when
 * the two ways take all and nothing of it), and never less than 1 ms.
 * And the conversion must be shown right within 1 ms: the guest's mark
 * happened between the host's two (causality, whatever each way took), so
 * a converted mark that lands between them is off by at most the larger of
 * its distances to the two, and one round where that is under 1 ms is the
 * proof.  A machine that shares the host's kernel
 * (SAME_KERNEL_MACHINE_NAME: a network namespace) reads the same clocks:
 * its offset must come out within 1 ms of 0.
 *
 * Prints a line per machine and per marker round; exit status 0 when all
 * holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protos/perfetto/trace/trace.pb-c.h"
#include "util/util.h"

#define MAX_MACHINES 16
#define MAX_MARKS 256
#define MIN_TOLERANCE_NS 1000000ll
#define PROOF_NS 1000000ll
#define BOOTTIME 6u

struct machine {
	uint32_t id;
	char name[64];
	uint64_t bundles, events;
	bool system_info;
	const Perfetto__Protos__RemoteClockSync *sync;
	int64_t send[MAX_MARKS], recv[MAX_MARKS], mark[MAX_MARKS];
};

static struct machine machines[MAX_MACHINES];
static size_t n_machines;

static struct machine *machine(uint32_t id)
{
	for (size_t i = 0; i < n_machines; i++)
		if (machines[i].id == id)
			return &machines[i];
	if (n_machines == MAX_MACHINES)
		return NULL;
	machines[n_machines].id = id;
	for (size_t k = 0; k < MAX_MARKS; k++)
		machines[n_machines].send[k] = machines[n_machines].recv[k] = machines[n_machines].mark[k] = -1;
	return &machines[n_machines++];
}

static int64_t clock_of(const Perfetto__Protos__ClockSnapshot *s, uint32_t id)
{
	for (size_t i = 0; s && i < s->n_clocks; i++)
		if (s->clocks[i]->clock_id == id)
			return (int64_t)s->clocks[i]->timestamp;
	return 0;
}

/* The longest round trip of the pairs offset_of() uses. */
static int64_t longest_trip(const Perfetto__Protos__RemoteClockSync *r)
{
	int64_t worst = 0;

	for (size_t k = 1; r && k < r->n_synced_clocks; k++) {
		int64_t a = clock_of(r->synced_clocks[k - 1]->client_clocks, BOOTTIME);
		int64_t b = clock_of(r->synced_clocks[k]->client_clocks, BOOTTIME);

		if (b - a < 30ll * 1000000000ll && b - a > worst)
			worst = b - a;
	}
	return worst;
}

/* client = host + offset, as trace_processor computes it (BOOTTIME). */
static int offset_of(const Perfetto__Protos__RemoteClockSync *r, int64_t *ret)
{
	int64_t sum = 0, n = 0;

	for (size_t i = 1; r && i < r->n_synced_clocks; i++) {
		int64_t t1c = clock_of(r->synced_clocks[i - 1]->client_clocks, BOOTTIME);
		int64_t t1h = clock_of(r->synced_clocks[i - 1]->host_clocks, BOOTTIME);
		int64_t t2c = clock_of(r->synced_clocks[i]->client_clocks, BOOTTIME);
		int64_t t2h = clock_of(r->synced_clocks[i]->host_clocks, BOOTTIME);

		if (t2c - t1c >= 30ll * 1000000000ll)
			continue;
		if (!t1c || !t1h || !t2c || !t2h)
			continue;
		sum += (t1c + t2c) / 2 - t1h;
		sum += t2c - (t1h + t2h) / 2;
		n += 2;
	}
	if (n == 0)
		return -ENODATA;
	*ret = sum / n;
	return 0;
}

static void take_marker(struct machine *m, const char *buf, int64_t ts)
{
	unsigned k;

	if (sscanf(buf, "C|%*d|tp-host-send|%u", &k) == 1 && k < MAX_MARKS)
		m->send[k] = ts;
	else if (sscanf(buf, "C|%*d|tp-host-recv|%u", &k) == 1 && k < MAX_MARKS)
		m->recv[k] = ts;
	else if (sscanf(buf, "C|%*d|tp-guest-mark|%u", &k) == 1 && k < MAX_MARKS)
		m->mark[k] = ts;
}

int main(int argc, char **argv)
{
	_cleanup_free_ char *data = NULL;
	Perfetto__Protos__Trace *t;
	struct machine *host = NULL, *marked = NULL;
	unsigned want;
	size_t len;
	int bad = 0, rounds = 0;

	if (argc < 3 || safe_atou32(argv[2], &want) < 0) {
		fprintf(stderr, "usage: tp-machines-check TRACE MACHINES [MARK_MACHINE_NAME [SAME_KERNEL_MACHINE_NAME]]\n");
		return 2;
	}
	if (read_full_file_at(AT_FDCWD, argv[1], 1u << 30, &data, &len) < 0) {
		fprintf(stderr, "cannot read %s\n", argv[1]);
		return 1;
	}
	t = perfetto__protos__trace__unpack(NULL, len, (const uint8_t *)data);
	if (!t) {
		fprintf(stderr, "%s is not a trace\n", argv[1]);
		return 1;
	}
	for (size_t i = 0; i < t->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = t->packet[i];
		struct machine *m = machine(p->has_machine_id ? p->machine_id : 0);

		if (!m)
			continue;
		switch (p->data_case) {
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
			m->bundles++;
			for (size_t e = 0; e < p->ftrace_events->n_event; e++) {
				const Perfetto__Protos__FtraceEvent *ev = p->ftrace_events->event[e];

				m->events++;
				if (ev->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT && ev->print->buf)
					take_marker(m, ev->print->buf, (int64_t)ev->timestamp);
			}
			break;
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO:
			m->system_info = true;
			if (p->system_info->machine_name)
				snprintf(m->name, sizeof(m->name), "%s", p->system_info->machine_name);
			break;
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_REMOTE_CLOCK_SYNC:
			m->sync = p->remote_clock_sync;
			break;
		default:
			break;
		}
	}
	for (size_t i = 0; i < n_machines; i++) {
		struct machine *m = &machines[i];
		int64_t off = 0;
		bool synced = offset_of(m->sync, &off) == 0;

		if (m->id == 0)
			host = m;
		if (argc > 3 && !strcmp(m->name, argv[3]))
			marked = m;
		printf("machine %u (%s): %llu bundles, %llu events, system info %s, clock sync %s",
		       m->id, m->id ? (m->name[0] ? m->name : "?") : "host", (unsigned long long)m->bundles,
		       (unsigned long long)m->events, m->system_info ? "yes" : "no",
		       synced ? "yes" : "no");
		if (synced)
			printf(" (offset %.3f ms, %zu snapshots, round trips up to %.3f ms)", (double)off / 1e6,
			       m->sync->n_synced_clocks, (double)longest_trip(m->sync) / 1e6);
		printf("\n");
		if (m->bundles == 0 || (m->id && (!m->system_info || !synced))) {
			printf("  FAILED: every machine records, every remote one has its system info and clock sync\n");
			bad = 1;
		}
	}
	if (argc > 4) {
		bool found = false;

		for (size_t i = 0; i < n_machines; i++) {
			int64_t off;

			if (strcmp(machines[i].name, argv[4]) || offset_of(machines[i].sync, &off) < 0)
				continue;
			found = true;
			if (off < -MIN_TOLERANCE_NS || off > MIN_TOLERANCE_NS) {
				printf("FAILED: %s shares the host's clocks, but its offset is %.3f ms\n", argv[4],
				       (double)off / 1e6);
				bad = 1;
			}
		}
		if (!found) {
			printf("FAILED: no clock sync for %s\n", argv[4]);
			bad = 1;
		}
	}
	if (n_machines != want) {
		printf("FAILED: %zu machines, not %u\n", n_machines, want);
		bad = 1;
	}
	if (argc > 3) {
		int64_t off, slack, best = -1;
		unsigned best_k = 0;

		if (!host || !marked || offset_of(marked->sync, &off) < 0) {
			printf("FAILED: no host, no machine named %s, or no clock sync for it\n", argv[3]);
			bad = 1;
			goto out;
		}
		slack = longest_trip(marked->sync) / 2;
		if (slack < MIN_TOLERANCE_NS)
			slack = MIN_TOLERANCE_NS;
		printf("markers of %s: each within its round trip, %.3f ms of slack (half the clock sync's "
		       "longest trip, at least 1 ms)\n",
		       argv[3], (double)slack / 1e6);
		for (unsigned k = 0; k < MAX_MARKS; k++) {
			int64_t conv, bound;

			if (host->send[k] < 0 || host->recv[k] < 0 || marked->mark[k] < 0)
				continue;
			rounds++;
			conv = marked->mark[k] - off;
			printf("mark %u: host sent %.3f ms before the guest's mark, received it back %.3f ms "
			       "after\n",
			       k, (double)(conv - host->send[k]) / 1e6, (double)(host->recv[k] - conv) / 1e6);
			if (conv < host->send[k] - slack || conv > host->recv[k] + slack) {
				printf("  FAILED: the guest's mark is outside its round trip, beyond the slack\n");
				bad = 1;
			}
			if (conv < host->send[k] || conv > host->recv[k])
				continue;
			bound = conv - host->send[k] > host->recv[k] - conv ? conv - host->send[k]
									 : host->recv[k] - conv;
			if (best < 0 || bound < best) {
				best = bound;
				best_k = k;
			}
		}
		if (rounds == 0) {
			printf("FAILED: no complete marker round\n");
			bad = 1;
		} else if (best < 0) {
			printf("FAILED: no converted mark of the guest lands inside its round trip\n");
			bad = 1;
		} else if (best > PROOF_NS) {
			printf("FAILED: no round shows the conversion within %.1f ms (the best: %.3f ms)\n",
			       PROOF_NS / 1e6, (double)best / 1e6);
			bad = 1;
		} else
			printf("conversion within %.3f ms: the guest's mark %u lands inside its round trip, "
			       "at most that far from either end\n",
			       (double)best / 1e6, best_k);
	}
out:
	perfetto__protos__trace__free_unpacked(t, NULL);
	return bad;
}
