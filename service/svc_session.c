/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tracing sessions, following traced's TracingServiceImpl: EnableTracing +
 * StartTracing, data source instances and their states, flushes with acks
 * and timeouts, FlushAndDisableTracing, DisableTracing with stop acks, and
 * the trace file, which is written as data arrives (like traced's
 * write_into_file mode) and finished with the tracing_disabled marker and
 * the trace stats.
 *
 * Callbacks into the embedding program (done, flush callbacks) run from
 * their own loop turn, as traced posts them, so that a callback may free
 * the session.
 */
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "service/svc_internal.h"
#include "util/util.h"

#define MAX_CONCURRENT_SESSIONS 15u
#define GUARDRAIL_MAX_BUFFER_KB (128u * 1024)
#define GUARDRAIL_MAX_DURATION_MS (24u * 3600 * 1000)
#define DEFAULT_WRITE_PERIOD_MS 5000u
#define MIN_WRITE_PERIOD_MS 100u

static void disable_tracing(struct svc_session *ss, bool immediately);
static void finalize(struct svc_session *ss);

/* ---- small helpers -------------------------------------------------------- */

static int arm_timer(struct svc_session *ss, struct event_source **src, uint64_t ms,
		     event_time_handler_t cb, void *userdata)
{
	*src = event_source_disable_unref(*src);
	return event_add_time_relative(ss->svc->event, src, CLOCK_MONOTONIC, ms * 1000, 1000, cb,
				       userdata);
}

static int rearm(struct event_source *es, uint64_t ms)
{
	int r = event_source_set_time_relative(es, ms * 1000);

	if (r < 0)
		return r;
	return event_source_set_enabled(es, EVENT_ONESHOT);
}

/* traced aligns periodic tasks to multiples of the period on the wall clock. */
static int arm_periodic(struct svc_session *ss, struct event_source **src, uint32_t period_ms,
			event_time_handler_t cb)
{
	*src = event_source_disable_unref(*src);
	return event_add_periodic(ss->svc->event, src, period_ms, /* first_now= */ false, cb, ss);
}

static void *copy_message(const ProtobufCMessage *m)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len = protobuf_c_message_get_packed_size(m);

	buf = malloc(len ? len : 1);
	if (!buf)
		return NULL;
	protobuf_c_message_pack(m, buf);
	return protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
}

static void write_event(struct svc_session *ss, uint32_t field, bool snapshot_clocks)
{
	/* Clocks first, so the snapshot covers the event's timestamp. */
	if (snapshot_clocks)
		(void)svc_packets_clock_snapshot(ss);
	(void)svc_packets_event(ss, field, svc_now_boot_ns());
	svc_output_flush(ss);
}

static int send_simple(struct svc_producer *p, Perfetto__Protos__GetAsyncCommandResponse *cmd)
{
	int r = svc_producer_send_command(p, cmd, false);

	if (r < 0)
		log_debug_errno(r, "service: queueing a command for producer %u failed: %m", p->id);
	return r;
}

/* ---- the end of writing --------------------------------------------------- */

/* ss->end_handler: svc_output.c arms it when the file stops taking writes
 * (a write error, or max_file_size_bytes). */
static int on_end_defer(struct event_source *es, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)es;
	disable_tracing(ss, ss->end_immediately);
	return 0;
}

/* ---- data source instances ------------------------------------------------- */

static bool name_matches(const char *name, char **names, size_t n, char **regexes, size_t n_re)
{
	if (n == 0 && n_re == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (names[i] && streq(names[i], name))
			return true;
	for (size_t i = 0; i < n_re; i++) {
		_cleanup_free_ char *anchored = NULL;
		regex_t re;
		bool m;

		/* std::regex_match(extended) matches the whole name. */
		if (!regexes[i] || asprintf(&anchored, "^(%s)$", regexes[i]) < 0)
			continue;
		if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) != 0)
			continue;
		m = regexec(&re, name, 0, NULL, 0) == 0;
		regfree(&re);
		if (m)
			return true;
	}
	return false;
}

static int resolve_target_buffer(const Perfetto__Protos__TraceConfig *cfg,
				 const Perfetto__Protos__DataSourceConfig *dc, uint32_t *ret)
{
	uint32_t target = dc->target_buffer;

	if (dc->target_buffer_name && *dc->target_buffer_name) {
		size_t i;

		for (i = 0; i < cfg->n_buffers; i++)
			if (cfg->buffers[i]->name && streq(cfg->buffers[i]->name, dc->target_buffer_name))
				break;
		if (i == cfg->n_buffers)
			return -ENOENT;
		/* Both set: they must agree (0 counts as unset). */
		if (target > 0 && target != i)
			return -EINVAL;
		target = (uint32_t)i;
	}
	if (target >= cfg->n_buffers)
		return -ERANGE;
	*ret = target;
	return 0;
}

static uint64_t session_buffer_bytes(const struct svc_session *ss)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < ss->n_buffers; i++)
		sum += ss->buffers[i].size;
	return sum;
}

static struct svc_ds_inst *inst_free(struct svc_ds_inst *i)
{
	if (!i)
		return NULL;
	if (i->config)
		perfetto__protos__data_source_config__free_unpacked(i->config, NULL);
	free(i->name);
	free(i);
	return NULL;
}

static void inst_insert(struct svc_session *ss, struct svc_ds_inst *inst)
{
	/* traced keeps instances in a multimap keyed by producer id. */
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->producer && i->producer->id > inst->producer->id) {
			SVC_LIST_INSERT_BEFORE(insts, ss, i, inst);
			return;
		}
	SVC_LIST_APPEND(insts, ss, inst);
}

static struct svc_ds_inst *setup_ds(struct svc_session *ss, const Perfetto__Protos__TraceConfig__DataSource *cds,
				    struct svc_ds_reg *reg)
{
	Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
	Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource sd =
		PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_DATA_SOURCE__INIT;
	struct svc *s = ss->svc;
	struct svc_producer *p = reg->producer;
	const Perfetto__Protos__TraceConfig *cfg = ss->config;
	Perfetto__Protos__DataSourceConfig *dc;
	struct svc_ds_inst *inst;
	uint32_t rel;
	int r;

	if (!p->initialized || p->disconnected)
		return NULL;
	/* Machine filter: every producer here is on the host machine. */
	if (cds->n_machine_name_filter && !name_matches("host", cds->machine_name_filter,
							cds->n_machine_name_filter, NULL, 0))
		return NULL;
	if (!name_matches(p->name, cds->producer_name_filter, cds->n_producer_name_filter,
			  cds->producer_name_regex_filter, cds->n_producer_name_regex_filter))
		return NULL;
	if (resolve_target_buffer(cfg, cds->config, &rel) < 0)
		return NULL;

	inst = calloc(1, sizeof(*inst));
	if (!inst)
		return NULL;
	inst->session = ss;
	inst->producer = p;
	inst->id = ++s->last_ds_instance_id;
	inst->name = strdup(reg->name);
	inst->config = copy_message(&cds->config->base);
	inst->will_notify_on_start = reg->will_notify_on_start;
	inst->will_notify_on_stop = reg->will_notify_on_stop;
	inst->handles_incremental_state_clear = reg->handles_incremental_state_clear;
	inst->no_flush = reg->no_flush;
	inst->state = SVC_DS_CONFIGURED;
	if (!inst->name || !inst->config)
		return inst_free(inst);

	/* The fields traced fills in (it always sets them, so they are on the
	 * wire even when zero). */
	dc = inst->config;
	dc->has_trace_duration_ms = true;
	dc->trace_duration_ms = cfg->duration_ms;
	if (cfg->prefer_suspend_clock_for_duration) {
		dc->has_prefer_suspend_clock_for_duration = true;
		dc->prefer_suspend_clock_for_duration = true;
	}
	dc->has_stop_timeout_ms = true;
	dc->stop_timeout_ms = ss->stop_timeout_ms;
	dc->has_enable_extra_guardrails = true;
	dc->enable_extra_guardrails = cfg->enable_extra_guardrails;
	dc->has_session_initiator = true;
	dc->session_initiator = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__SESSION_INITIATOR__SESSION_INITIATOR_UNSPECIFIED;
	dc->has_tracing_session_id = true;
	dc->tracing_session_id = ss->id;
	dc->has_target_buffer = true;
	dc->target_buffer = ss->buffers[rel].id;

	inst_insert(ss, inst);
	ss->stats.data_sources++;

	/* The SMB comes with the first data source of this producer, and its
	 * SetupTracing goes out before this SetupDataSource. */
	r = svc_producer_ensure_smb(p, cfg, session_buffer_bytes(ss));
	if (r >= 0)
		r = svc_producer_allow_buffer(p, ss->buffers[rel].id);
	if (r < 0) {
		log_debug_errno(r, "service: setting up the SMB of producer %u failed: %m", p->id);
		SVC_LIST_REMOVE(insts, ss, inst);
		return inst_free(inst);
	}
	sd.has_new_instance_id = true;
	sd.new_instance_id = inst->id;
	sd.config = inst->config;
	cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE;
	cmd.setup_data_source = &sd;
	(void)send_simple(p, &cmd);
	return inst;
}

static void maybe_all_started(struct svc_session *ss)
{
	if (ss->all_started_notified || ss->state != SVC_SESSION_STARTED)
		return;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state != SVC_DS_STARTED)
			return;
	ss->all_started_notified = true;
	write_event(ss, SVC_EVENT_ALL_DATA_SOURCES_STARTED, /* snapshot_clocks= */ true);
	if (ss->hooks.all_started)
		ss->hooks.all_started(ss, ss->userdata);
}

static void start_ds(struct svc_session *ss, struct svc_ds_inst *inst)
{
	Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
	Perfetto__Protos__GetAsyncCommandResponse__StartDataSource sd =
		PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT;

	inst->state = inst->will_notify_on_start ? SVC_DS_STARTING : SVC_DS_STARTED;
	sd.has_new_instance_id = true;
	sd.new_instance_id = inst->id;
	sd.config = inst->config;
	cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
	cmd.start_data_source = &sd;
	(void)send_simple(inst->producer, &cmd);
	if (inst->state == SVC_DS_STARTED)
		maybe_all_started(ss);
}

static void stop_ds(struct svc_ds_inst *inst, bool immediately)
{
	Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
	Perfetto__Protos__GetAsyncCommandResponse__StopDataSource sd =
		PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__STOP_DATA_SOURCE__INIT;

	inst->state = inst->will_notify_on_stop && !immediately ? SVC_DS_STOPPING : SVC_DS_STOPPED;
	sd.has_instance_id = true;
	sd.instance_id = inst->id;
	cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE;
	cmd.stop_data_source = &sd;
	if (inst->producer)
		(void)send_simple(inst->producer, &cmd);
}

static bool all_stopped(const struct svc_session *ss)
{
	for (const struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state != SVC_DS_STOPPED)
			return false;
	return true;
}

void svc_session_on_register(struct svc *s, struct svc_ds_reg *reg)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		if (ss->state != SVC_SESSION_STARTED)
			continue;
		for (size_t i = 0; i < ss->config->n_data_sources; i++) {
			const Perfetto__Protos__TraceConfig__DataSource *cds = ss->config->data_sources[i];
			struct svc_ds_inst *inst;

			if (!cds->config || !cds->config->name || !streq(cds->config->name, reg->name))
				continue;
			inst = setup_ds(ss, cds, reg);
			if (inst)
				start_ds(ss, inst);
		}
	}
}

static void inst_stopped(struct svc_session *ss, struct svc_ds_inst *inst)
{
	inst->state = SVC_DS_STOPPED;
	if (ss->state == SVC_SESSION_DISABLING && all_stopped(ss))
		finalize(ss);
}

void svc_session_on_unregister(struct svc *s, struct svc_ds_reg *reg)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		struct svc_ds_inst *i, *next;
		bool removed = false;

		for (i = ss->insts_head; i; i = next) {
			next = i->insts_next;
			if (i->producer != reg->producer || !streq(i->name, reg->name))
				continue;
			if (i->state != SVC_DS_STOPPED) {
				if (i->state != SVC_DS_STOPPING)
					stop_ds(i, /* immediately= */ false);
				if (i->state == SVC_DS_STOPPING)
					inst_stopped(ss, i);
			}
			/* next may have been... no: finalize never frees instances. */
			SVC_LIST_REMOVE(insts, ss, i);
			inst_free(i);
			removed = true;
		}
		if (removed)
			maybe_all_started(ss);
	}
}

static struct svc_ds_inst *find_inst(struct svc_session *ss, const struct svc_producer *p, uint64_t id)
{
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->producer == p && i->id == id)
			return i;
	return NULL;
}

void svc_session_on_ds_started(struct svc *s, struct svc_producer *p, uint64_t inst_id)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		struct svc_ds_inst *i = find_inst(ss, p, inst_id);

		if (!i || ss->state != SVC_SESSION_STARTED)
			continue;
		if (i->state != SVC_DS_STARTING) {
			log_debug("service: data source %" PRIu64 " started in state %d", inst_id, i->state);
			continue;
		}
		i->state = SVC_DS_STARTED;
		maybe_all_started(ss);
	}
}

void svc_session_on_ds_stopped(struct svc *s, struct svc_producer *p, uint64_t inst_id)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		struct svc_ds_inst *i = find_inst(ss, p, inst_id);

		if (!i)
			continue;
		if (i->state != SVC_DS_STOPPING) {
			log_debug("service: data source %" PRIu64 " stopped in state %d", inst_id, i->state);
			continue;
		}
		inst_stopped(ss, i);
	}
}

/* ---- flushes ---------------------------------------------------------- */

static struct svc_flush *flush_free(struct svc_flush *f)
{
	if (!f)
		return NULL;
	event_source_disable_unref(f->timer);
	free(f->producers);
	free(f);
	return NULL;
}

static void final_flush_done(struct svc_session *ss, bool ok);

static int on_flush_defer(struct event_source *es, void *userdata)
{
	struct svc_session *ss = userdata;
	struct svc_flush *f;

	(void)es;
	for (f = ss->flushes_head; f && !f->completed; f = f->flushes_next)
		;
	if (!f)
		return 0;
	SVC_LIST_REMOVE(flushes, ss, f);
	/* One per turn: the callback may free the session. */
	for (struct svc_flush *g = ss->flushes_head; g; g = g->flushes_next)
		if (g->completed) {
			(void)svc_session_arm_defer(ss, &ss->flush_defer, on_flush_defer);
			break;
		}

	/* traced's CompleteFlush. */
	write_event(ss, SVC_EVENT_ALL_DATA_SOURCES_FLUSHED, /* snapshot_clocks= */ true);
	if (f->success)
		ss->stats.flushes_acked++;
	else
		ss->stats.flushes_timed_out++;
	svc_output_flush(ss);
	if (f->final) {
		bool ok = f->success;

		flush_free(f);
		final_flush_done(ss, ok);
	} else {
		void (*cb)(struct svc_session *, bool, void *) = f->cb;
		void *ud = f->userdata;
		bool ok = f->success;

		flush_free(f);
		if (cb)
			cb(ss, ok, ud);
	}
	return 0;
}

static void flush_complete_later(struct svc_flush *f, bool success)
{
	f->completed = true;
	f->success = success;
	f->timer = event_source_disable_unref(f->timer);
	(void)svc_session_arm_defer(f->session, &f->session->flush_defer, on_flush_defer);
}

static bool inst_of_pending_producer(const struct svc_ds_inst *i, const void *arg)
{
	const struct svc_flush *f = arg;

	for (size_t k = 0; k < f->n_producers; k++)
		if (i->producer->id == f->producers[k])
			return true;
	return false;
}

static int on_flush_timeout(struct event_source *es, uint64_t usec, void *userdata)
{
	struct svc_flush *f = userdata;
	struct svc_session *ss = f->session;
	uint64_t reason = f->flags & 0xf;

	(void)es;
	(void)usec;
	/* Nobody to wait for counts as success. */
	if (f->n_producers &&
	    (reason == SVC_FLUSH_REASON_TRACE_STOP || reason == 3 /* trace clone */))
		(void)svc_packets_slow_data_sources(ss, SVC_EVENT_LAST_FLUSH_SLOW_DATA_SOURCES,
						    inst_of_pending_producer, f);
	flush_complete_later(f, f->n_producers == 0);
	return 0;
}

static int flush_start(struct svc_session *ss, uint64_t flags, bool final,
		       void (*cb)(struct svc_session *, bool, void *), void *userdata)
{
	Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
	Perfetto__Protos__GetAsyncCommandResponse__Flush fl = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__FLUSH__INIT;
	struct svc *s = ss->svc;
	struct svc_flush *f;
	size_t n_pending = 0, n_inst = 0;
	_cleanup_free_ uint64_t *ids = NULL;
	int r;

	(void)svc_packets_event(ss, SVC_EVENT_FLUSH_STARTED, svc_now_boot_ns());
	for (f = ss->flushes_head; f; f = f->flushes_next)
		n_pending++;
	if (n_pending > SVC_MAX_PENDING_FLUSHES)
		return -EBUSY;
	if (ss->state != SVC_SESSION_STARTED)
		return -ESHUTDOWN;

	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		n_inst++;
	f = calloc(1, sizeof(*f));
	ids = calloc(n_inst + 1, sizeof(*ids));
	if (f)
		f->producers = calloc(n_inst + 1, sizeof(*f->producers));
	if (!f || !ids || !f->producers) {
		flush_free(f);
		return -ENOMEM;
	}
	f->session = ss;
	f->id = ++s->last_flush_id;
	f->flags = flags;
	f->final = final;
	f->cb = cb;
	f->userdata = userdata;
	ss->stats.flushes_requested++;

	/* One Flush per producer with its instances (ordered by producer). */
	for (struct svc_ds_inst *i = ss->insts_head; i;) {
		struct svc_producer *p = i->producer;
		size_t n = 0;

		for (; i && i->producer == p; i = i->insts_next)
			if (!i->no_flush)
				ids[n++] = i->id;
		if (n == 0)
			continue;
		fl = (Perfetto__Protos__GetAsyncCommandResponse__Flush)
			PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__FLUSH__INIT;
		fl.n_data_source_ids = n;
		fl.data_source_ids = ids;
		fl.has_request_id = true;
		fl.request_id = f->id;
		fl.has_flags = true;
		fl.flags = flags;
		cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH;
		cmd.flush = &fl;
		(void)send_simple(p, &cmd);
		f->producers[f->n_producers++] = p->id;
	}
	SVC_LIST_APPEND(flushes, ss, f);
	r = arm_timer(ss, &f->timer, f->n_producers ? ss->flush_timeout_ms : 0, on_flush_timeout, f);
	if (r < 0) {
		SVC_LIST_REMOVE(flushes, ss, f);
		flush_free(f);
		return r;
	}
	return 0;
}

void svc_session_on_flush_ack(struct svc *s, struct svc_producer *p, uint64_t flush_id)
{
	/* An ack of N acks every pending flush <= N of this producer. */
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next)
		for (struct svc_flush *f = ss->flushes_head; f; f = f->flushes_next) {
			if (f->completed || f->id > flush_id)
				continue;
			for (size_t k = 0; k < f->n_producers; k++)
				if (f->producers[k] == p->id) {
					f->producers[k] = f->producers[--f->n_producers];
					break;
				}
			if (f->n_producers == 0)
				flush_complete_later(f, true);
		}
}

int svc_session_flush(struct svc_session *ss, void (*cb)(struct svc_session *ss, bool ok, void *userdata),
		      void *userdata)
{
	if (!ss || !ss->svc || ss->done)
		return -ESHUTDOWN;
	return flush_start(ss, SVC_FLUSH_REASON_EXPLICIT | SVC_FLUSH_INITIATOR_TRACED, false, cb, userdata);
}

/* ---- stopping --------------------------------------------------------- */

static int on_done_defer(struct event_source *es, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)es;
	ss->done_notified = true;
	if (ss->hooks.done)
		ss->hooks.done(ss, ss->error, ss->userdata);
	return 0;
}

static void release_buffers(struct svc_session *ss)
{
	struct svc *s = ss->svc;

	if (ss->released || !s)
		return;
	ss->released = true;
	for (size_t i = 0; i < ss->n_buffers; i++) {
		for (struct svc_producer *p = s->producers_head; p; p = p->producers_next)
			svc_producer_disallow_buffer(p, ss->buffers[i].id);
		ss->buffers[i].id = 0;
	}
	s->n_buffers -= ss->n_buffers;
}

static void stop_timers(struct svc_session *ss)
{
	ss->duration_timer = event_source_disable_unref(ss->duration_timer);
	ss->stop_timer = event_source_disable_unref(ss->stop_timer);
	ss->flush_period_timer = event_source_disable_unref(ss->flush_period_timer);
	ss->clear_timer = event_source_disable_unref(ss->clear_timer);
	ss->snapshot_timer = event_source_disable_unref(ss->snapshot_timer);
	ss->all_started_timer = event_source_disable_unref(ss->all_started_timer);
}

/* traced's DisableTracingNotifyConsumerAndFlushFile, plus the final read. */
static void finalize(struct svc_session *ss)
{
	struct svc *s = ss->svc;

	if (ss->state == SVC_SESSION_DISABLED)
		return;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		i->state = SVC_DS_STOPPED;
	stop_timers(ss);

	/* Everything committed so far goes in the file.  The reader gives up
	 * on gaps only if no other running session reads that producer. */
	if (s)
		for (struct svc_producer *p = s->producers_head; p; p = p->producers_next) {
			bool shared = false;

			if (!svc_producer_in_session(p, ss))
				continue;
			for (struct svc_session *x = s->sessions_head; x; x = x->sessions_next)
				if (x != ss && x->state != SVC_SESSION_DISABLED && svc_producer_in_session(p, x))
					shared = true;
			svc_producer_read(p, /* final= */ !shared);
		}
	ss->state = SVC_SESSION_DISABLED;

	write_event(ss, SVC_EVENT_TRACING_DISABLED, /* snapshot_clocks= */ true);
	(void)svc_packets_event(ss, SVC_EVENT_READ_TRACING_BUFFERS_COMPLETED, svc_now_boot_ns());
	(void)svc_packets_trace_stats(ss);
	svc_output_flush(ss);
	/* The file is complete: late flush completions write nothing. */
	ss->write_stopped = true;
	release_buffers(ss);
	ss->done = true;
	if (s)
		(void)svc_session_arm_defer(ss, &ss->done_defer, on_done_defer);
}

static int on_stop_timeout(struct event_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)es;
	(void)usec;
	if (ss->state != SVC_SESSION_DISABLING)
		return 0;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state == SVC_DS_STOPPING)
			ss->stats.data_sources_stop_timed_out++;
	finalize(ss);
	return 0;
}

/* traced's DisableTracing. */
static void disable_tracing(struct svc_session *ss, bool immediately)
{
	int r;

	switch (ss->state) {
	case SVC_SESSION_DISABLED:
		return;
	case SVC_SESSION_DISABLING:
		if (immediately)
			finalize(ss);
		return;
	case SVC_SESSION_STARTED:
		break;
	}
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state != SVC_DS_STOPPED && i->state != SVC_DS_STOPPING)
			stop_ds(i, immediately);
	ss->snapshot_timer = event_source_disable_unref(ss->snapshot_timer);
	if (all_stopped(ss)) {
		finalize(ss);
		return;
	}
	ss->state = SVC_SESSION_DISABLING;
	r = arm_timer(ss, &ss->stop_timer, ss->stop_timeout_ms, on_stop_timeout, ss);
	if (r < 0)
		finalize(ss);
}

static void final_flush_done(struct svc_session *ss, bool ok)
{
	ss->final_flush_outcome = ok ? 1 : 2;
	disable_tracing(ss, /* immediately= */ false);
}

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
	r = flush_start(ss, SVC_FLUSH_REASON_TRACE_STOP | SVC_FLUSH_INITIATOR_TRACED, true, NULL, NULL);
	if (r < 0)
		final_flush_done(ss, false);
	return 0;
}

/* ---- periodic tasks --------------------------------------------------- */

static int on_duration(struct event_source *es, uint64_t usec, void *userdata)
{
	(void)es;
	(void)usec;
	(void)svc_session_stop(userdata);
	return 0;
}

static int on_snapshot(struct event_source *es, uint64_t usec, void *userdata)
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

static int on_flush_period(struct event_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)usec;
	if (ss->state != SVC_SESSION_STARTED)
		return event_source_set_enabled(es, EVENT_OFF);
	(void)flush_start(ss, SVC_FLUSH_REASON_PERIODIC | SVC_FLUSH_INITIATOR_TRACED, false, NULL, NULL);
	return 0;
}

static int on_clear_period(struct event_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)usec;
	if (ss->state != SVC_SESSION_STARTED)
		return event_source_set_enabled(es, EVENT_OFF);
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
		(void)send_simple(p, &cmd);
	}
	return 0;
}

static bool inst_not_started(const struct svc_ds_inst *i, const void *arg)
{
	(void)arg;
	return i->state != SVC_DS_STARTED;
}

static int on_all_started_timeout(struct event_source *es, uint64_t usec, void *userdata)
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
		if (resolve_target_buffer(cfg, d->config, &rel) < 0)
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
	ss->config = copy_message(&cfg->base);
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
				(void)setup_ds(ss, cds, reg);
	}

	/* StartTracing. */
	r = arm_timer(ss, &ss->snapshot_timer, s->opts.snapshot_interval_ms, on_snapshot, ss);
	if (r < 0)
		return r;
	if (cfg->duration_ms) {
		r = arm_timer(ss, &ss->duration_timer, cfg->duration_ms, on_duration, ss);
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
	r = arm_timer(ss, &ss->all_started_timer, SVC_ALL_STARTED_TIMEOUT_MS, on_all_started_timeout, ss);
	if (r < 0)
		return r;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state == SVC_DS_CONFIGURED)
			start_ds(ss, i);
	ss->started = true;
	maybe_all_started(ss);
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
		disable_tracing(ss, /* immediately= */ true);
		finalize(ss);
	}
	release_buffers(ss);
	while (ss->insts_head) {
		struct svc_ds_inst *i = ss->insts_head;

		SVC_LIST_REMOVE(insts, ss, i);
		inst_free(i);
	}
	while (ss->flushes_head) {
		struct svc_flush *f = ss->flushes_head;

		SVC_LIST_REMOVE(flushes, ss, f);
		flush_free(f);
	}
	stop_timers(ss);
	ss->flush_defer = event_source_disable_unref(ss->flush_defer);
	ss->end_defer = event_source_disable_unref(ss->end_defer);
	ss->done_defer = event_source_disable_unref(ss->done_defer);
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
			disable_tracing(ss, /* immediately= */ true);
			finalize(ss);
		}
		ss->done_defer = event_source_disable_unref(ss->done_defer);
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
