/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The packets the service writes on its own sequence (1), as traced does:
 * clock snapshots, the sync marker, the trace config, the trace uuid, the
 * trace provenance, the system info, lifecycle events and trace stats.  Each
 * carries trusted_uid (the service's uid) and trusted_packet_sequence_id 1.
 * These are rare control-plane packets, so they are built with protobuf-c.
 */
#include <time.h>
#include <unistd.h>

#include "protos/pbsys.h"
#include "protos/perfetto/trace/trace_packet.pb-c.h"
#include "service/svc_internal.h"
#include "util/util.h"
#include "util/util_varint.h"

/* TracePacket.trace_provenance: not in our proto subset, written raw. */
#define TRACE_PROVENANCE_FIELD 124u

static const uint8_t sync_marker[16] = {
	0x82, 0x47, 0x7a, 0x76, 0xb2, 0x8d, 0x42, 0xba,
	0x81, 0xdc, 0x33, 0x32, 0x6d, 0x57, 0xa0, 0x79,
};

static int emit(struct svc_session *ss, Perfetto__Protos__TracePacket *tp)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len;

	tp->optional_trusted_uid_case = PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_UID_TRUSTED_UID;
	tp->trusted_uid = (int32_t)getuid();
	tp->optional_trusted_packet_sequence_id_case =
		PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
	tp->trusted_packet_sequence_id = SVC_SERVICE_SEQUENCE_ID;

	len = perfetto__protos__trace_packet__get_packed_size(tp);
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	perfetto__protos__trace_packet__pack(tp, buf);
	return svc_output_write(ss, buf, len, NULL, 0);
}

int svc_packets_clock_snapshot(struct svc_session *ss)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__ClockSnapshot snap = PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
	Perfetto__Protos__ClockSnapshot__Clock c[SVC_RELAY_MAX_CLOCKS];
	Perfetto__Protos__ClockSnapshot__Clock *cp[SVC_RELAY_MAX_CLOCKS];
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *b = ss->config->builtin_data_sources;
	struct svc_clocks now;
	size_t n = 0;

	if (b && b->disable_clock_snapshotting)
		return 0;
	svc_clocks_now(&now);
	for (; n < now.n; n++) {
		perfetto__protos__clock_snapshot__clock__init(&c[n]);
		c[n].has_clock_id = true;
		c[n].clock_id = now.id[n];
		c[n].has_timestamp = true;
		c[n].timestamp = now.ts[n];
		cp[n] = &c[n];
	}
	snap.n_clocks = n;
	snap.clocks = cp;
	snap.has_primary_trace_clock = true;
	snap.primary_trace_clock = b && b->has_primary_trace_clock && b->primary_trace_clock
					   ? b->primary_trace_clock
					   : PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_BOOTTIME;
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
	tp.clock_snapshot = &snap;
	return emit(ss, &tp);
}

int svc_packets_sync_marker(struct svc_session *ss)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;

	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_SYNCHRONIZATION_MARKER;
	tp.synchronization_marker.data = (uint8_t *)sync_marker;
	tp.synchronization_marker.len = sizeof(sync_marker);
	return emit(ss, &tp);
}

int svc_packets_trace_config(struct svc_session *ss)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *b = ss->config->builtin_data_sources;

	if (b && b->disable_trace_config)
		return 0;
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG;
	tp.trace_config = ss->config;
	return emit(ss, &tp);
}

int svc_packets_uuid(struct svc_session *ss)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TraceUuid u = PERFETTO__PROTOS__TRACE_UUID__INIT;

	u.has_msb = u.has_lsb = true;
	u.msb = (int64_t)ss->uuid_msb;
	u.lsb = (int64_t)ss->uuid_lsb;
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_UUID;
	tp.trace_uuid = &u;
	return emit(ss, &tp);
}

/*
 * TraceProvenance{ repeated Buffer buffers = 2 { repeated Sequence
 * sequences = 1 { id = 1, producer_id = 2 } } }, written at the start like
 * traced's, when no writer has written yet: one empty Buffer per buffer.
 */
int svc_packets_provenance(struct svc_session *ss)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	ProtobufCMessageUnknownField uf;
	_cleanup_free_ uint8_t *body = NULL;
	size_t n;

	/* protobuf-c keeps the length prefix of an unknown field in its data. */
	body = malloc(ss->n_buffers * 2 + 10);
	if (!body)
		return -ENOMEM;
	n = (size_t)(varint_put(body, ss->n_buffers * 2) - body);
	for (size_t i = 0; i < ss->n_buffers; i++) {
		body[n++] = 0x12; /* Buffer at field 2, length-delimited, empty */
		body[n++] = 0;
	}
	uf.tag = TRACE_PROVENANCE_FIELD;
	uf.wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	uf.len = n;
	uf.data = body;
	tp.base.n_unknown_fields = 1;
	tp.base.unknown_fields = &uf;
	tp.has_timestamp = true;
	tp.timestamp = svc_now_boot_ns();
	return emit(ss, &tp);
}

int svc_packets_system_info(struct svc_session *ss)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *b = ss->config->builtin_data_sources;
	struct pbsys sys;

	if (b && b->disable_system_info)
		return 0;
	pbsys_fill(&sys);
	/* trace_processor reads the major version after "Perfetto v". */
	sys.si.tracing_service_version = (char *)"Perfetto v58.2-compatible (traced-probes " TP_VERSION ")";
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO;
	tp.system_info = &sys.si;
	return emit(ss, &tp);
}

static bool service_events_disabled(const struct svc_session *ss)
{
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *b = ss->config->builtin_data_sources;

	return b && b->disable_service_events;
}

int svc_packets_event(struct svc_session *ss, uint32_t field, uint64_t ts)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TracingServiceEvent ev = PERFETTO__PROTOS__TRACING_SERVICE_EVENT__INIT;

	if (service_events_disabled(ss))
		return 0;
	ev.event_type_case = (Perfetto__Protos__TracingServiceEvent__EventTypeCase)field;
	/* Every event written here is a bool set to true; they share storage. */
	ev.tracing_started = true;
	tp.has_timestamp = true;
	tp.timestamp = ts;
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT;
	tp.service_event = &ev;
	return emit(ss, &tp);
}

int svc_packets_slow_data_sources(struct svc_session *ss, uint32_t field,
				  bool (*pick)(const struct svc_ds_inst *i, const void *arg), const void *arg)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TracingServiceEvent ev = PERFETTO__PROTOS__TRACING_SERVICE_EVENT__INIT;
	Perfetto__Protos__TracingServiceEvent__DataSources dss =
		PERFETTO__PROTOS__TRACING_SERVICE_EVENT__DATA_SOURCES__INIT;
	Perfetto__Protos__TracingServiceEvent__DataSources__DataSource d[SVC_MAX_LISTED_SLOW_DS];
	Perfetto__Protos__TracingServiceEvent__DataSources__DataSource *dp[SVC_MAX_LISTED_SLOW_DS];
	size_t n = 0;

	for (struct svc_ds_inst *i = ss->insts_head; i && n < SVC_MAX_LISTED_SLOW_DS; i = i->insts_next) {
		if (!i->producer || !pick(i, arg))
			continue;
		perfetto__protos__tracing_service_event__data_sources__data_source__init(&d[n]);
		d[n].producer_name = i->producer->name ? i->producer->name : (char *)"";
		d[n].data_source_name = i->name;
		dp[n] = &d[n];
		n++;
	}
	dss.n_data_source = n;
	dss.data_source = dp;
	ev.event_type_case = (Perfetto__Protos__TracingServiceEvent__EventTypeCase)field;
	ev.slow_starting_data_sources = &dss;
	tp.has_timestamp = true;
	tp.timestamp = svc_now_boot_ns();
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT;
	tp.service_event = &ev;
	return emit(ss, &tp);
}

int svc_packets_trace_stats(struct svc_session *ss)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TraceStats st = PERFETTO__PROTOS__TRACE_STATS__INIT;
	_cleanup_free_ Perfetto__Protos__TraceStats__BufferStats *bs = NULL;
	_cleanup_free_ Perfetto__Protos__TraceStats__BufferStats **bsp = NULL;
	struct svc *s = ss->svc;
	size_t n_sessions = 0;

	bs = calloc(ss->n_buffers + 1, sizeof(*bs));
	bsp = calloc(ss->n_buffers + 1, sizeof(*bsp));
	if (!bs || !bsp)
		return -ENOMEM;
	for (size_t i = 0; i < ss->n_buffers; i++) {
		const struct svc_buffer *b = &ss->buffers[i];
		Perfetto__Protos__TraceStats__BufferStats *o = &bs[i];

		perfetto__protos__trace_stats__buffer_stats__init(o);
#define SET(f, v) (o->has_##f = true, o->f = (v))
		SET(buffer_size, b->size);
		SET(bytes_written, b->bytes_written);
		SET(chunks_written, b->chunks_written);
		SET(chunks_discarded, b->chunks_discarded);
		SET(abi_violations, b->abi_violations);
		SET(patches_succeeded, b->patches_succeeded);
		SET(patches_failed, b->patches_failed);
		SET(bytes_read, b->bytes_read);
		SET(chunks_read, b->chunks_written);
		SET(trace_writer_packet_loss, b->trace_writer_packet_loss);
#undef SET
		bsp[i] = o;
	}
	for (struct svc_session *x = s->sessions_head; x; x = x->sessions_next)
		n_sessions++;
	st.n_buffer_stats = ss->n_buffers;
	st.buffer_stats = bsp;
	st.has_producers_connected = true;
	st.producers_connected = (uint32_t)s->n_producers;
	st.has_producers_seen = true;
	st.producers_seen = s->last_producer_id;
	st.has_data_sources_registered = true;
	st.data_sources_registered = (uint32_t)s->n_regs;
	st.has_data_sources_seen = true;
	st.data_sources_seen = s->last_ds_instance_id;
	st.has_tracing_sessions = true;
	st.tracing_sessions = (uint32_t)n_sessions;
	st.has_total_buffers = true;
	st.total_buffers = (uint32_t)s->n_buffers;
	st.has_chunks_discarded = true;
	st.chunks_discarded = s->chunks_discarded;
	st.has_patches_discarded = true;
	st.patches_discarded = s->patches_discarded;
	st.has_invalid_packets = true;
	st.invalid_packets = ss->stats.invalid_packets;
	st.has_flushes_requested = true;
	st.flushes_requested = ss->stats.flushes_requested;
	st.has_flushes_succeeded = true;
	st.flushes_succeeded = ss->stats.flushes_acked;
	st.has_flushes_failed = true;
	st.flushes_failed = ss->stats.flushes_timed_out;
	st.has_final_flush_outcome = true;
	st.final_flush_outcome = (Perfetto__Protos__TraceStats__FinalFlushOutcome)ss->final_flush_outcome;
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS;
	tp.trace_stats = &st;
	return emit(ss, &tp);
}

void svc_packets_event_now(struct svc_session *ss, uint32_t field, bool snapshot_clocks)
{
	if (snapshot_clocks)
		(void)svc_packets_clock_snapshot(ss);
	(void)svc_packets_event(ss, field, svc_now_boot_ns());
	svc_output_flush(ss);
}

static void clocks_msg(const struct svc_clocks *c, Perfetto__Protos__ClockSnapshot *snap,
		       Perfetto__Protos__ClockSnapshot__Clock *cl, Perfetto__Protos__ClockSnapshot__Clock **ptrs)
{
	for (uint32_t i = 0; i < c->n; i++) {
		cl[i] = (Perfetto__Protos__ClockSnapshot__Clock)PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
		cl[i].has_clock_id = cl[i].has_timestamp = true;
		cl[i].clock_id = c->id[i];
		cl[i].timestamp = c->ts[i];
		ptrs[i] = &cl[i];
	}
	snap->n_clocks = c->n;
	snap->clocks = ptrs;
}

/* One remote machine's SystemInfo, then its RemoteClockSync, as traced writes them. */
static int remote_machine(struct svc_session *ss, uint32_t machine_id, const struct svc_relay *r)
{
	Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__RemoteClockSync rcs = PERFETTO__PROTOS__REMOTE_CLOCK_SYNC__INIT;
	Perfetto__Protos__RemoteClockSync__SyncedClocks sc[SVC_RELAY_SYNCS], *scp[SVC_RELAY_SYNCS];
	Perfetto__Protos__ClockSnapshot snaps[2 * SVC_RELAY_SYNCS];
	Perfetto__Protos__ClockSnapshot__Clock cl[2 * SVC_RELAY_SYNCS][SVC_RELAY_MAX_CLOCKS];
	Perfetto__Protos__ClockSnapshot__Clock *ptrs[2 * SVC_RELAY_SYNCS][SVC_RELAY_MAX_CLOCKS];
	int k = 0;

	if (r->system_info) {
		Perfetto__Protos__SystemInfo *si =
			perfetto__protos__system_info__unpack(NULL, r->system_info_len, r->system_info);

		if (si) {
			tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO;
			tp.system_info = si;
			tp.has_machine_id = true;
			tp.machine_id = machine_id;
			k = emit(ss, &tp);
			perfetto__protos__system_info__free_unpacked(si, NULL);
		}
	}
	if (r->n_sync == 0 || k < 0)
		return k;
	for (unsigned i = 0; i < r->n_sync; i++) {
		sc[i] = (Perfetto__Protos__RemoteClockSync__SyncedClocks)
			PERFETTO__PROTOS__REMOTE_CLOCK_SYNC__SYNCED_CLOCKS__INIT;
		snaps[2 * i] = (Perfetto__Protos__ClockSnapshot)PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
		snaps[2 * i + 1] = (Perfetto__Protos__ClockSnapshot)PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
		clocks_msg(&r->sync[i].client, &snaps[2 * i], cl[2 * i], ptrs[2 * i]);
		clocks_msg(&r->sync[i].host, &snaps[2 * i + 1], cl[2 * i + 1], ptrs[2 * i + 1]);
		sc[i].client_clocks = &snaps[2 * i];
		sc[i].host_clocks = &snaps[2 * i + 1];
		scp[i] = &sc[i];
	}
	rcs.n_synced_clocks = r->n_sync;
	rcs.synced_clocks = scp;
	tp = (Perfetto__Protos__TracePacket)PERFETTO__PROTOS__TRACE_PACKET__INIT;
	tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_REMOTE_CLOCK_SYNC;
	tp.remote_clock_sync = &rcs;
	tp.has_machine_id = true;
	tp.machine_id = machine_id;
	return emit(ss, &tp);
}

/* A relay connection of @p's machine comes earlier in the list: that one was written. */
static bool machine_written(const struct svc_producer *head, const struct svc_producer *p)
{
	for (const struct svc_producer *q = head; q != p; q = q->producers_next)
		if (q->relay && q->machine_id == p->machine_id)
			return true;
	return false;
}

int svc_packets_remote_machines(struct svc_session *ss)
{
	int r = 0;

	if (ss->remote_machines_written || !ss->svc)
		return 0;
	ss->remote_machines_written = true;
	for (struct svc_producer *p = ss->svc->producers_head; p && r >= 0; p = p->producers_next)
		if (p->relay && p->machine_id != 0 && !machine_written(ss->svc->producers_head, p))
			r = remote_machine(ss, p->machine_id, p->relay);
	return r;
}
