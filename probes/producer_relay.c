/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The producer's second connection, for a daemon that reaches a remote
 * tracing service directly over TCP or vsock (no traced_relay on this
 * machine): it does what traced_relay's relay client does, so that the
 * central service sees this machine as one of its own.
 *
 *   SetPeerIdentity (the same machine_id_hint and name as the producer's
 *   connection, so both land on one machine id), then bind RelayPort;
 *   InitRelay with this machine's SystemInfo;
 *   SyncClock PING with a snapshot of every clock, and on its reply an
 *   UPDATE with another: the service snapshots its own clocks on each, and
 *   the pairs become the trace's RemoteClockSync for this machine, which
 *   trace_processor turns into the conversion to the host's clocks;
 *   RELAY_SYNC_BURST or more such rounds back to back (more while they
 *   are slow), again every RELAY_SYNC_PERIOD_MS, as traced_relay does
 *   with one.
 *
 * A service without a relay endpoint (traced without
 * --enable-relay-endpoint) refuses the bind: said once, and the machine
 * keeps its identity without clock sync.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop/loop.h"
#include "probes/producer_internal.h"
#include "protos/pbsys.h"
#include "protos/perfetto/ipc/relay_port.pb-c.h"
#include "util/util.h"

/* traced_relay's period between two rounds of clock synchronisation. */
#define RELAY_SYNC_PERIOD_MS 30000u
/*
 * Rounds sent back to back each time (traced_relay sends one).  The service
 * keeps the last five snapshots and trace_processor averages the offsets
 * of all of them, so one slow round (the first after a connect took 700 ms
 * over a serial link to a TCG guest, against a few ms after) skews the
 * conversion by half its round trip; three rounds push it out of the window.
 */
#define RELAY_SYNC_BURST 3u
/*
 * The service keeps the last RELAY_SYNC_KEPT calls and trace_processor
 * makes an offset of every two adjacent ones (each is a round trip: this
 * call sent, the service's snapshot, the next call sent on its reply).
 * More rounds while any of those trips was slow against the fastest seen
 * on this connection (more than twice it, plus RELAY_SYNC_SLACK_NS), up to
 * RELAY_SYNC_BURST_MAX rounds: an offset's error is bounded by half its
 * round trip, and a link's first round trips are often its slowest.
 */
#define RELAY_SYNC_KEPT 5u
#define RELAY_SYNC_BURST_MAX 12u
#define RELAY_SYNC_SLACK_NS 500000ull

struct producer_relay {
	struct loop *event;
	struct ipc_client *client;
	struct loop_source *timer;
	char *address;
	char *machine_name;
	uint32_t service_id;
	int m_init, m_sync;
	bool update_next;             /* the next SyncClock is the round's UPDATE */
	unsigned burst;               /* rounds of this burst completed */
	uint64_t rounds;              /* rounds completed */
	uint64_t last_send_ns;        /* CLOCK_BOOTTIME of the last call */
	uint64_t gap_ns[RELAY_SYNC_KEPT - 1]; /* between the last calls, oldest first */
	unsigned n_gaps;              /* in this burst, at most RELAY_SYNC_KEPT - 1 */
	uint64_t best_rtt_ns;         /* the fastest trip, 0 before the first */
};

static bool warned_no_endpoint;

struct producer_relay *producer_relay_free(struct producer_relay *r)
{
	if (!r)
		return NULL;
	r->timer = loop_source_disable_unref(r->timer);
	r->client = ipc_client_free(r->client);
	r->event = loop_unref(r->event);
	free(r->address);
	free(r->machine_name);
	free(r);
	return NULL;
}

/* Give up on the relay connection: the producer's own goes on without it. */
static void relay_close(struct producer_relay *r)
{
	r->timer = loop_source_disable_unref(r->timer);
	r->client = ipc_client_free(r->client);
}

static void send_sync(struct producer_relay *r);

/* Whether a trip the service's window holds now was slow. */
static bool window_slow(const struct producer_relay *r)
{
	for (unsigned i = 0; i < r->n_gaps; i++)
		if (r->gap_ns[i] > 2 * r->best_rtt_ns + RELAY_SYNC_SLACK_NS)
			return true;
	return r->n_gaps < RELAY_SYNC_KEPT - 1;
}

static void on_sync_reply(struct ipc_client *c, int error, const uint8_t *reply, size_t len, bool has_more,
			  int fd, void *userdata)
{
	struct producer_relay *r = userdata;

	if (error < 0) {
		log_debug_errno(error, "Clock sync with %s refused: %m", r->address);
		relay_close(r);
		return;
	}
	if (!r->update_next) {
		/* the PING came back: its UPDATE now, as close to it as we can */
		r->update_next = true;
		send_sync(r);
		return;
	}
	/* send_sync() stamped the UPDATE: that round's trip is known */
	r->update_next = false;
	r->rounds++;
	if (++r->burst < RELAY_SYNC_BURST_MAX && (r->burst < RELAY_SYNC_BURST || window_slow(r))) {
		send_sync(r);
		return;
	}
	r->n_gaps = 0;
	if (r->rounds == r->burst)
		log_info("Clocks synchronised with the tracing service at %s (%u rounds, the fastest %.3f ms; "
			 "again every %u s)",
			 r->address, r->burst, (double)r->best_rtt_ns / 1e6, RELAY_SYNC_PERIOD_MS / 1000);
	r->burst = 0;
	if (r->timer)
		(void)loop_source_set_time(r->timer, now_ns(CLOCK_MONOTONIC) / 1000 + RELAY_SYNC_PERIOD_MS * 1000ull);
	(void)loop_source_set_enabled(r->timer, LOOP_ONESHOT);
}

/* One snapshot of every clock, taken back to back, as traced_relay does. */
static void send_sync(struct producer_relay *r)
{
	Perfetto__Protos__SyncClockRequest req = PERFETTO__PROTOS__SYNC_CLOCK_REQUEST__INIT;
	Perfetto__Protos__SyncClockRequest__Clock cl[BUILTIN_CLOCKS_MAX];
	Perfetto__Protos__SyncClockRequest__Clock *ptrs[BUILTIN_CLOCKS_MAX];
	uint32_t ids[BUILTIN_CLOCKS_MAX];
	uint64_t ts[BUILTIN_CLOCKS_MAX];
	uint8_t buf[256];
	size_t n = builtin_clocks_read(ids, ts), len;
	int k;

	for (size_t i = 0; i < n; i++) {
		cl[i] = (Perfetto__Protos__SyncClockRequest__Clock)PERFETTO__PROTOS__SYNC_CLOCK_REQUEST__CLOCK__INIT;
		cl[i].has_clock_id = cl[i].has_timestamp = true;
		cl[i].clock_id = ids[i];
		cl[i].timestamp = ts[i];
		ptrs[i] = &cl[i];
	}
	{
		uint64_t boot = ts[0];    /* CLOCK_BOOTTIME, first of builtin_clocks_read() */

		/* a call on the reply to the previous one: that trip's time */
		if ((r->update_next || r->burst > 0) && boot > r->last_send_ns) {
			uint64_t rtt = boot - r->last_send_ns;

			if (r->n_gaps == RELAY_SYNC_KEPT - 1)
				memmove(&r->gap_ns[0], &r->gap_ns[1], sizeof(r->gap_ns[0]) * (RELAY_SYNC_KEPT - 2));
			else
				r->n_gaps++;
			r->gap_ns[r->n_gaps - 1] = rtt;
			if (!r->best_rtt_ns || rtt < r->best_rtt_ns)
				r->best_rtt_ns = rtt;
		}
		r->last_send_ns = boot;
	}
	req.has_phase = true;
	req.phase = r->update_next ? PERFETTO__PROTOS__SYNC_CLOCK_REQUEST__PHASE__UPDATE
				   : PERFETTO__PROTOS__SYNC_CLOCK_REQUEST__PHASE__PING;
	req.n_clocks = n;
	req.clocks = ptrs;
	len = perfetto__protos__sync_clock_request__get_packed_size(&req);
	if (len > sizeof(buf))
		return;
	perfetto__protos__sync_clock_request__pack(&req, buf);
	k = ipc_client_invoke(r->client, r->service_id, (uint32_t)r->m_sync, buf, len, -EBADF, on_sync_reply, r,
			      NULL);
	if (k < 0)
		relay_close(r);
}

static int on_timer(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct producer_relay *r = userdata;

	if (r->client) {
		r->update_next = false;
		send_sync(r);
	}
	return 0;
}

static void send_init(struct producer_relay *r)
{
	Perfetto__Protos__InitRelayRequest req = PERFETTO__PROTOS__INIT_RELAY_REQUEST__INIT;
	struct pbsys sys;
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len;

	pbsys_fill(&sys);
	sys.si.machine_name = r->machine_name;
	req.system_info = &sys.si;
	len = perfetto__protos__init_relay_request__get_packed_size(&req);
	buf = malloc(len ? len : 1);
	if (!buf)
		return;
	perfetto__protos__init_relay_request__pack(&req, buf);
	/* no reply awaited: traced answers at once and keeps the info for the trace */
	(void)ipc_client_invoke(r->client, r->service_id, (uint32_t)r->m_init, buf, len, -EBADF, NULL, NULL, NULL);
}

static void on_bind(struct ipc_client *c, int error, uint32_t service_id, void *userdata)
{
	struct producer_relay *r = userdata;

	if (error < 0 && error != -ENOENT) {
		/* the connection itself failed: the producer's fails too, and the daemon retries */
		log_debug_errno(error, "Relay connection to %s failed: %m", r->address);
		relay_close(r);
		return;
	}
	if (error < 0) {
		if (!warned_no_endpoint)
			log_notice("The tracing service at %s has no relay endpoint (traced "
				   "--enable-relay-endpoint): this machine's data keeps its own machine id, "
				   "but its clocks are not synchronised with the service's",
				   r->address);
		warned_no_endpoint = true;
		relay_close(r);
		return;
	}
	r->service_id = service_id;
	r->m_init = ipc_client_get_method_id(c, service_id, "InitRelay");
	r->m_sync = ipc_client_get_method_id(c, service_id, "SyncClock");
	if (r->m_init < 0 || r->m_sync < 0) {
		log_notice("The tracing service at %s has a RelayPort without InitRelay or SyncClock: "
			   "no clock sync", r->address);
		relay_close(r);
		return;
	}
	send_init(r);
	r->update_next = false;
	send_sync(r);
}

static void on_disconnect(struct ipc_client *c, int error, void *userdata)
{
	struct producer_relay *r = userdata;

	/* the producer's own connection notices too, and the daemon reconnects both */
	log_debug_errno(error, "Relay connection to %s closed: %m", r->address);
	relay_close(r);
}

int producer_relay_new(struct loop *e, const char *address, const struct ipc_identity *id,
		       struct producer_relay **ret)
{
	struct producer_relay *r;
	int k;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->event = loop_ref(e);
	r->address = strdup(address);
	r->machine_name = id->machine_name ? strdup(id->machine_name) : NULL;
	if (!r->address || (id->machine_name && !r->machine_name)) {
		producer_relay_free(r);
		return -ENOMEM;
	}
	k = ipc_client_new(address, &r->client);
	if (k >= 0) {
		ipc_client_set_disconnect_callback(r->client, on_disconnect, r);
		k = ipc_client_attach_event(r->client, e);
	}
	if (k >= 0)
		k = ipc_client_send_identity(r->client, id);
	if (k >= 0)
		k = ipc_client_bind_service(r->client, "RelayPort", on_bind, r, NULL);
	if (k >= 0)
		k = loop_add_time(e, &r->timer, CLOCK_MONOTONIC, UINT64_MAX, 0, on_timer, r);
	if (k >= 0) {
		(void)loop_source_set_enabled(r->timer, LOOP_OFF);
		(void)loop_source_set_description(r->timer, "relay-clock-sync");
	}
	if (k < 0) {
		producer_relay_free(r);
		return k;
	}
	*ret = r;
	return 0;
}

uint64_t producer_relay_rounds(const struct producer_relay *r)
{
	return r ? r->rounds : 0;
}
