/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tracing sessions, following traced's TracingServiceImpl: EnableTracing +
 * StartTracing, data source instances and their states, flushes with acks
 * and timeouts, FlushAndDisableTracing, DisableTracing with stop acks, and
 * the trace file, which is written as data arrives (like traced's
 * write_into_file mode) and finished with the tracing_disabled marker and
 * the trace stats.  This file starts, stops and frees sessions and runs
 * their periodic tasks; data source instances are in svc_session_ds.c,
 * flushes in svc_session_flush.c and the end of a session in
 * svc_session_disable.c.
 *
 * Callbacks into the embedding program (done, flush callbacks) run from
 * their own loop turn, as traced posts them, so that a callback may free
 * the session.
 */
#include <sys/random.h>
#include <time.h>

#include "service/svc_internal.h"
#include "util/util.h"

#define MAX_CONCURRENT_SESSIONS 15u
#define GUARDRAIL_MAX_BUFFER_KB (128u * 1024)
#define GUARDRAIL_MAX_DURATION_MS (24u * 3600 * 1000)
#define DEFAULT_WRITE_PERIOD_MS 5000u
#define MIN_WRITE_PERIOD_MS 100u

/* ---- timers --------------------------------------------------------------- */

static int rearm(struct loop_source *es, uint64_t ms)
{
	int r = loop_source_set_time_relative(es, ms * 1000);

	if (r < 0)
		return r;
	return loop_source_set_enabled(es, LOOP_ONESHOT);
}

/* traced aligns periodic tasks to multiples of the period on the wall clock. */
static int arm_periodic(struct svc_session *ss, struct loop_source **src, uint32_t period_ms,
			loop_time_handler_t cb)
{
	*src = loop_source_disable_unref(*src);
	return loop_add_periodic(ss->svc->event, src, period_ms, /* first_now= */ false, cb, ss);
}

/* ---- the end of writing --------------------------------------------------- */

/* ss->end_handler: svc_output.c arms it when the file stops taking writes
 * (a write error, or max_file_size_bytes). */
static int on_end_defer(struct loop_source *es, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)es;
	svc_session_disable(ss, ss->end_immediately);
	return 0;
}

/* ---- stopping --------------------------------------------------------- */

int svc_session_stop(struct svc_session *ss)
{
	int r;

	if (!ss || !ss->svc)
		return -EINVAL;
	if (ss->done || ss->state != SVC_SESSION_STARTED)
		return ss->done ? -EALREADY : 0;
	if (ss->stop_requested)
		return 0;
	ss->stop_requested = true;
	/* traced's FlushAndDisableTracing. */
	r = svc_session_flush_start(ss, SVC_FLUSH_REASON_TRACE_STOP | SVC_FLUSH_INITIATOR_TRACED, true, NULL, NULL);
	if (r < 0)
		svc_session_disable_after_flush(ss, false);
	return 0;
}

/* ---- periodic tasks --------------------------------------------------- */

static int on_duration(struct loop_source *es, uint64_t usec, void *userdata)
{
	(void)es;
	(void)usec;
	(void)svc_session_stop(userdata);
	return 0;
}

static int on_snapshot(struct loop_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)usec;
	if (ss->state != SVC_SESSION_STARTED)
		return 0;
	/* What traced's periodic snapshot task leads to when streaming into a
	 * file: a sync marker, a clock snapshot and the stats so far. */
	(void)svc_packets_sync_marker(ss);
	(void)svc_packets_clock_snapshot(ss);
	(void)svc_packets_trace_stats(ss);
	svc_output_flush(ss);
	return rearm(es, ss->svc->opts.snapshot_interval_ms);
}

static int on_flush_period(struct loop_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)usec;
	if (ss->state != SVC_SESSION_STARTED)
		return loop_source_set_enabled(es, LOOP_OFF);
	(void)svc_session_flush_start(ss, SVC_FLUSH_REASON_PERIODIC | SVC_FLUSH_INITIATOR_TRACED, false, NULL, NULL);
	return 0;
}

static int on_clear_period(struct loop_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)usec;
	if (ss->state != SVC_SESSION_STARTED)
		return loop_source_set_enabled(es, LOOP_OFF);
	for (struct svc_ds_inst *i = ss->insts_head; i;) {
		Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
		Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState cl =
			PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CLEAR_INCREMENTAL_STATE__INIT;
		struct svc_producer *p = i->producer;
		uint64_t ids[64];
		size_t n = 0;

		for (; i && i->producer == p; i = i->insts_next)
			if (i->handles_incremental_state_clear && n < ARRAY_SIZE(ids))
				ids[n++] = i->id;
		if (n == 0)
			continue;
		cl.n_data_source_ids = n;
		cl.data_source_ids = ids;
		cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE;
		cmd.clear_incremental_state = &cl;
		(void)svc_producer_send(p, &cmd);
	}
	return 0;
}

static bool inst_not_started(const struct svc_ds_inst *i, const void *arg)
{
	(void)arg;
	return i->state != SVC_DS_STARTED;
}

static int on_all_started_timeout(struct loop_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)es;
	(void)usec;
	if (!ss->all_started_notified && ss->state == SVC_SESSION_STARTED)
		(void)svc_packets_slow_data_sources(ss, SVC_EVENT_SLOW_STARTING_DATA_SOURCES, inst_not_started,
						    NULL);
	return 0;
}

/* ---- start / free ------------------------------------------------------- */

static int validate_config(const struct svc *s, const Perfetto__Protos__TraceConfig *cfg)
{
	uint32_t max_ms = cfg->enable_extra_guardrails ? GUARDRAIL_MAX_DURATION_MS : SVC_MAX_DURATION_MS;
	uint64_t sum_kb = 0;
	size_t n_sessions = 0;

	if (cfg->duration_ms > max_ms)
		return -EINVAL;
	if (cfg->n_buffers > SVC_MAX_BUFFERS_PER_SESSION)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_buffers; i++) {
		const Perfetto__Protos__TraceConfig__BufferConfig *b = cfg->buffers[i];

		if (b->size_kb == 0 || (uint64_t)b->size_kb * 1024 > UINT32_MAX)
			return -EINVAL;
		sum_kb += b->size_kb;
		for (size_t j = 0; b->name && *b->name && j < i; j++)
			if (cfg->buffers[j]->name && streq(cfg->buffers[j]->name, b->name))
				return -EINVAL;
	}
	if (cfg->enable_extra_guardrails && sum_kb > GUARDRAIL_MAX_BUFFER_KB)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_data_sources; i++) {
		const Perfetto__Protos__TraceConfig__DataSource *d = cfg->data_sources[i];
		uint32_t rel;

		if (!d->config)
			continue;
		if (svc_session_ds_target_buffer(cfg, d->config, &rel) < 0)
			return -EINVAL;
	}
	for (struct svc_session *x = s->sessions_head; x; x = x->sessions_next)
		if (!x->done)
			n_sessions++;
	if (n_sessions >= MAX_CONCURRENT_SESSIONS)
		return -EUSERS;
	return 0;
}

static void make_uuid(struct svc_session *ss)
{
	uint64_t v[2] = { 0, 0 };

	if (ss->config->trace_uuid_msb || ss->config->trace_uuid_lsb) {
		ss->uuid_msb = (uint64_t)ss->config->trace_uuid_msb;
		ss->uuid_lsb = (uint64_t)ss->config->trace_uuid_lsb;
		return;
	}
	if (getrandom(v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		v[0] = now_ns(CLOCK_BOOTTIME) ^ ((uint64_t)getpid() << 32);
		v[1] = now_ns(CLOCK_REALTIME) ^ (uint64_t)(uintptr_t)ss;
	}
	/* Version 4, variant 1. */
	ss->uuid_msb = (v[0] & ~0xf000ull) | 0x4000ull;
	ss->uuid_lsb = (v[1] & ~(3ull << 62)) | (2ull << 62);
}

static uint32_t flush_period(const Perfetto__Protos__TraceConfig *cfg)
{
	uint32_t write_period;

	if (!cfg->write_into_file)
		return cfg->flush_period_ms;
	/* traced with write_into_file: periodic flushes every 5 s unless
	 * write_flush_mode says otherwise. */
	write_period = cfg->file_write_period_ms ? cfg->file_write_period_ms : DEFAULT_WRITE_PERIOD_MS;
	write_period = MAX(write_period, MIN_WRITE_PERIOD_MS);
	switch (cfg->write_flush_mode) {
	case PERFETTO__PROTOS__TRACE_CONFIG__WRITE_FLUSH_MODE__WRITE_FLUSH_DISABLED:
		return cfg->flush_period_ms;
	case PERFETTO__PROTOS__TRACE_CONFIG__WRITE_FLUSH_MODE__WRITE_FLUSH_ENABLED:
		return write_period;
	default:
		return write_period <= DEFAULT_WRITE_PERIOD_MS ? DEFAULT_WRITE_PERIOD_MS : write_period;
	}
}

static int write_head(struct svc_session *ss)
{
	int r;

	/* traced's first read: the initial clock snapshot, the one its
	 * periodic snapshot task takes at once, the sync marker, the config,
	 * the uuid, the provenance, the system info, then the lifecycle
	 * events (tracing_started). */
	r = svc_packets_clock_snapshot(ss);
	if (r >= 0)
		r = svc_packets_clock_snapshot(ss);
	if (r >= 0)
		r = svc_packets_sync_marker(ss);
	if (r >= 0)
		r = svc_packets_trace_config(ss);
	if (r >= 0)
		r = svc_packets_uuid(ss);
	if (r >= 0)
		r = svc_packets_provenance(ss);
	if (r >= 0)
		r = svc_packets_system_info(ss);
	if (r >= 0)
		r = svc_packets_event(ss, SVC_EVENT_TRACING_STARTED, svc_now_boot_ns());
	if (r >= 0)
		r = svc_trace_flush(ss->trace);
	return r;
}

static bool buffer_id_in_use(const struct svc *s, uint16_t id)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next)
		for (size_t i = 0; i < ss->n_buffers; i++)
			if (ss->buffers[i].id == id)
				return true;
	return false;
}

static int buffer_id_alloc(struct svc *s, uint16_t *ret)
{
	/* traced's IdAllocator: round-robin from the last id, 0 is invalid. */
	for (uint32_t n = 0; n < SVC_MAX_BUFFER_ID; n++) {
		uint16_t id = (uint16_t)(s->last_buffer_id % SVC_MAX_BUFFER_ID + 1);

		s->last_buffer_id = id;
		if (!buffer_id_in_use(s, id)) {
			*ret = id;
			return 0;
		}
	}
	return -ENOSPC;
}

int svc_session_start(struct svc *s, const Perfetto__Protos__TraceConfig *cfg, int out_fd,
		      const struct svc_session_hooks *h, void *userdata, struct svc_session **ret)
{
	_cleanup_(svc_session_freep) struct svc_session *ss = NULL;
	int r;

	if (!s || !cfg || out_fd < 0 || !ret)
		return -EINVAL;
	r = validate_config(s, cfg);
	if (r < 0)
		return r;

	ss = calloc(1, sizeof(*ss));
	if (!ss)
		return -ENOMEM;
	ss->svc = s;
	ss->end_handler = on_end_defer;
	ss->state = SVC_SESSION_STARTED;
	ss->last_seq_id = SVC_SERVICE_SEQUENCE_ID;
	if (h)
		ss->hooks = *h;
	ss->userdata = userdata;
	ss->config = svc_copy_message(&cfg->base);
	if (!ss->config)
		return -ENOMEM;
	ss->flush_timeout_ms = cfg->flush_timeout_ms ? cfg->flush_timeout_ms : SVC_DEFAULT_FLUSH_TIMEOUT_MS;
	ss->stop_timeout_ms = cfg->data_source_stop_timeout_ms ? cfg->data_source_stop_timeout_ms
							       : SVC_DEFAULT_STOP_TIMEOUT_MS;
	ss->flush_period_ms = flush_period(cfg);
	ss->clear_period_ms = cfg->incremental_state_config ? cfg->incremental_state_config->clear_period_ms : 0;
	ss->max_file_size = cfg->max_file_size_bytes;
	make_uuid(ss);
	r = svc_trace_new(out_fd, ss->max_file_size, &ss->trace);
	if (r < 0)
		return r;

	ss->buffers = calloc(cfg->n_buffers + 1, sizeof(*ss->buffers));
	if (!ss->buffers)
		return -ENOMEM;
	/* Linked now so that buffer ids in use are seen by the allocator. */
	SVC_LIST_APPEND(sessions, s, ss);
	for (size_t i = 0; i < cfg->n_buffers; i++) {
		struct svc_buffer *b = &ss->buffers[i];

		r = buffer_id_alloc(s, &b->id);
		if (r < 0)
			return r;
		b->size = (uint64_t)cfg->buffers[i]->size_kb * 1024;
		b->discard = cfg->buffers[i]->fill_policy ==
			     PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD;
		ss->n_buffers++;
		s->n_buffers++;
	}
	ss->id = ++s->last_session_id;

	/* The head first: an unwritable output fails the start before any
	 * producer hears of the session. */
	r = write_head(ss);
	if (r < 0)
		return r;

	/* Set up matching data sources without starting them. */
	for (size_t i = 0; i < ss->config->n_data_sources; i++) {
		const Perfetto__Protos__TraceConfig__DataSource *cds = ss->config->data_sources[i];

		if (!cds->config || !cds->config->name)
			continue;
		for (struct svc_ds_reg *reg = s->regs_head; reg; reg = reg->regs_next)
			if (streq(reg->name, cds->config->name))
				(void)svc_session_ds_setup(ss, cds, reg);
	}

	/* StartTracing. */
	r = svc_session_arm_timer(ss, &ss->snapshot_timer, s->opts.snapshot_interval_ms, on_snapshot, ss);
	if (r < 0)
		return r;
	if (cfg->duration_ms) {
		r = svc_session_arm_timer(ss, &ss->duration_timer, cfg->duration_ms, on_duration, ss);
		if (r < 0)
			return r;
	}
	if (ss->flush_period_ms) {
		r = arm_periodic(ss, &ss->flush_period_timer, ss->flush_period_ms, on_flush_period);
		if (r < 0)
			return r;
	}
	if (ss->clear_period_ms) {
		r = arm_periodic(ss, &ss->clear_timer, ss->clear_period_ms, on_clear_period);
		if (r < 0)
			return r;
	}
	r = svc_session_arm_timer(ss, &ss->all_started_timer, SVC_ALL_STARTED_TIMEOUT_MS, on_all_started_timeout, ss);
	if (r < 0)
		return r;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state == SVC_DS_CONFIGURED)
			svc_session_ds_start(ss, i);
	ss->started = true;
	svc_session_ds_all_started(ss);
	*ret = TAKE_PTR(ss);
	return 0;
}

struct svc_session *svc_session_free(struct svc_session *ss)
{
	struct svc *s;

	if (!ss)
		return NULL;
	s = ss->svc;
	if (s && !ss->done && (ss->started || ss->insts_head)) {
		/* Abort: stop without waiting, keep what was received. */
		svc_session_disable(ss, /* immediately= */ true);
		svc_session_disable_finish(ss);
	}
	svc_session_disable_buffers(ss);
	while (ss->insts_head) {
		struct svc_ds_inst *i = ss->insts_head;

		SVC_LIST_REMOVE(insts, ss, i);
		svc_session_ds_free(i);
	}
	while (ss->flushes_head) {
		struct svc_flush *f = ss->flushes_head;

		SVC_LIST_REMOVE(flushes, ss, f);
		svc_session_flush_free(f);
	}
	svc_session_disable_timers(ss);
	ss->flush_defer = loop_source_disable_unref(ss->flush_defer);
	ss->end_defer = loop_source_disable_unref(ss->end_defer);
	ss->done_defer = loop_source_disable_unref(ss->done_defer);
	if (s && (ss->sessions_prev || s->sessions_head == ss))
		SVC_LIST_REMOVE(sessions, s, ss);
	if (ss->config)
		perfetto__protos__trace_config__free_unpacked(ss->config, NULL);
	svc_trace_free(ss->trace);
	free(ss->seqs);
	free(ss->buffers);
	free(ss);
	return NULL;
}

void svc_session_abort_all(struct svc *s)
{
	struct svc_session *ss, *next;

	/* The done hooks run from here, not from the loop: the service is
	 * going away.  A hook may free its session. */
	for (ss = s->sessions_head; ss; ss = next) {
		next = ss->sessions_next;
		if (ss->done_notified)
			continue;
		if (!ss->done) {
			if (!ss->error)
				ss->error = -ECANCELED;
			svc_session_disable(ss, /* immediately= */ true);
			svc_session_disable_finish(ss);
		}
		ss->done_defer = loop_source_disable_unref(ss->done_defer);
		ss->done_notified = true;
		if (ss->hooks.done)
			ss->hooks.done(ss, ss->error, ss->userdata);
	}
}

int svc_session_get_stats(const struct svc_session *ss, struct svc_session_stats *ret)
{
	if (!ss || !ret)
		return -EINVAL;
	*ret = ss->stats;
	return 0;
}

uint64_t svc_session_id(const struct svc_session *ss)
{
	return ss ? ss->id : 0;
}

bool svc_session_is_done(const struct svc_session *ss)
{
	return ss && ss->done;
}
