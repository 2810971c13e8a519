/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RelayPort, as traced serves it with --enable-relay-endpoint: a remote
 * machine's relay client (traced_relay, or traced-probes connected
 * directly) sends its SystemInfo (InitRelay) and rounds of clock snapshots
 * (SyncClock PING, then UPDATE); on each the service snapshots its own
 * clocks, and keeps the last SVC_RELAY_SYNCS pairs.  Every trace then gets,
 * once per remote machine, its SystemInfo and a RemoteClockSync with those
 * pairs, both stamped with the machine's id (svc_packets.c), from which
 * trace_processor converts the machine's timestamps to the host's.
 *
 * The machine is the connection's (SetPeerIdentity); the caller is
 * untrusted: undecodable arguments are refused, clocks past
 * SVC_RELAY_MAX_CLOCKS dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc.h"
#include "protos/perfetto/ipc/relay_port.pb-c.h"
#include "service/svc_internal.h"
#include "util/util.h"

/* RelayPort in v58.2 declaration order: method ids are index + 1. */
const char *const svc_relay_methods[] = { "InitRelay", "SyncClock" };
const size_t svc_relay_n_methods = ARRAY_SIZE(svc_relay_methods);

/* The longest SystemInfo kept (a remote machine's utsname and a few numbers). */
#define SVC_RELAY_SYSTEM_INFO_MAX 4096u

struct svc_relay *svc_relay_free(struct svc_relay *r)
{
	if (r) {
		free(r->system_info);
		free(r);
	}
	return NULL;
}

void svc_producer_take_identity(struct svc_producer *p)
{
	const char *name = ipc_conn_get_machine_name(p->conn);
	struct ipc_peer peer;

	p->machine_id = ipc_conn_get_machine_id(p->conn);
	if (name && !p->machine_name)
		p->machine_name = strdup(name);
	/* SetPeerIdentity came after the connect: its pid and uid count now */
	if (ipc_conn_get_peer(p->conn, &peer) >= 0) {
		p->uid = peer.uid;
		p->pid = peer.pid;
		p->have_pid = peer.pid > 0;
	}
}

void svc_clocks_now(struct svc_clocks *c)
{
	c->n = (uint32_t)builtin_clocks_read(c->id, c->ts);
}

static int relay_of(struct svc_producer *p, struct svc_relay **ret)
{
	if (!p->relay) {
		p->relay = calloc(1, sizeof(*p->relay));
		if (!p->relay)
			return -ENOMEM;
		svc_producer_take_identity(p);
	}
	*ret = p->relay;
	return 0;
}

static int init_relay(struct svc_producer *p, const uint8_t *args, size_t len, struct ipc_reply *reply)
{
	Perfetto__Protos__InitRelayRequest *req =
		perfetto__protos__init_relay_request__unpack(NULL, len, args);
	struct svc_relay *r;
	size_t n;
	int k;

	if (!req)
		return -EBADMSG;
	k = relay_of(p, &r);
	if (k >= 0 && req->system_info) {
		n = perfetto__protos__system_info__get_packed_size(req->system_info);
		if (n <= SVC_RELAY_SYSTEM_INFO_MAX) {
			uint8_t *b = malloc(n ? n : 1);

			if (b) {
				perfetto__protos__system_info__pack(req->system_info, b);
				free(r->system_info);
				r->system_info = b;
				r->system_info_len = n;
			}
		}
	}
	perfetto__protos__init_relay_request__free_unpacked(req, NULL);
	if (k < 0)
		return k;
	(void)ipc_reply_send(reply, NULL, 0, /* has_more= */ false, -EBADF);
	return 0;
}

static int sync_clock(struct svc_producer *p, const uint8_t *args, size_t len, struct ipc_reply *reply)
{
	struct svc_clocks host;
	Perfetto__Protos__SyncClockRequest *req;
	struct svc_relay *r;
	unsigned slot;
	int k;

	/* first, as close to the client's snapshot as we can */
	svc_clocks_now(&host);
	req = perfetto__protos__sync_clock_request__unpack(NULL, len, args);
	if (!req)
		return -EBADMSG;
	k = relay_of(p, &r);
	if (k < 0) {
		perfetto__protos__sync_clock_request__free_unpacked(req, NULL);
		return k;
	}
	if (r->n_sync == SVC_RELAY_SYNCS) {
		memmove(&r->sync[0], &r->sync[1], sizeof(r->sync[0]) * (SVC_RELAY_SYNCS - 1));
		r->n_sync--;
	}
	slot = r->n_sync++;
	r->sync[slot].host = host;
	r->sync[slot].client.n = 0;
	for (size_t i = 0; i < req->n_clocks && r->sync[slot].client.n < SVC_RELAY_MAX_CLOCKS; i++) {
		struct svc_clocks *c = &r->sync[slot].client;

		c->id[c->n] = req->clocks[i]->clock_id;
		c->ts[c->n++] = req->clocks[i]->timestamp;
	}
	perfetto__protos__sync_clock_request__free_unpacked(req, NULL);
	(void)ipc_reply_send(reply, NULL, 0, /* has_more= */ false, -EBADF);
	return 0;
}

int svc_relay_call(struct svc_producer *p, uint32_t method_id, const uint8_t *args, size_t len,
		   struct ipc_reply *reply)
{
	switch (method_id) {
	case 1:
		return init_relay(p, args, len, reply);
	case 2:
		return sync_clock(p, args, len, reply);
	default:
		return -EINVAL;
	}
}
