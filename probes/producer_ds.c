/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Data-source instances: Setup/Start/Stop, Flush and ClearIncrementalState
 * as the command stream hands them down, each driven through its kind's ops
 * (probes/ds/ds.h).  Each instance gets its own trace writer (one sequence),
 * as in Perfetto's traced_probes, and writes through a pbw_sink over it
 * (smb_writer_sink()).
 * Below the connection code: calls only producer_commit.c and producer_rpc.c.
 */
#include <string.h>

#include "probes/producer_internal.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "util/util.h"

static struct producer_ds *find_ds(struct producer *p, uint64_t id)
{
	for (struct producer_ds *ds = p->instances; ds; ds = ds->next)
		if (ds->id == id)
			return ds;
	return NULL;
}

/* The kind named @name among the producer's, and its index. */
static const struct ds_ops *find_kind(const struct producer *p, const char *name, size_t *ret_index)
{
	for (size_t i = 0; p->kinds[i]; i++)
		if (strcmp(p->kinds[i]->name, name) == 0) {
			*ret_index = i;
			return p->kinds[i];
		}
	return NULL;
}

/* Writer ids go round-robin from 1 and skip the ones in use, as in traced_probes. */
static int allocate_writer_id(struct producer *p, uint16_t *ret)
{
	for (unsigned tries = 0; tries < SMB_MAX_WRITER_ID; tries++) {
		uint16_t id = (uint16_t)(p->last_writer_id % SMB_MAX_WRITER_ID + 1);
		bool used = false;

		p->last_writer_id = id;
		for (struct producer_ds *ds = p->instances; ds; ds = ds->next)
			if (ds->writer && smb_writer_id(ds->writer) == id)
				used = true;
		if (!used) {
			*ret = id;
			return 0;
		}
	}
	return -EMFILE;
}

static void notify(struct producer *p, enum producer_method method, uint64_t id)
{
	Perfetto__Protos__NotifyDataSourceStartedRequest started =
		PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STARTED_REQUEST__INIT;
	Perfetto__Protos__NotifyDataSourceStoppedRequest stopped =
		PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;

	if (method == PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STARTED) {
		started.has_data_source_id = true;
		started.data_source_id = id;
		(void)producer_invoke(p, method, &started.base, NULL);
	} else {
		stopped.has_data_source_id = true;
		stopped.data_source_id = id;
		(void)producer_invoke(p, method, &stopped.base, NULL);
	}
}

static void trace_writer_rpc(struct producer *p, enum producer_method method, uint16_t writer_id,
			     uint32_t target_buffer)
{
	Perfetto__Protos__RegisterTraceWriterRequest reg =
		PERFETTO__PROTOS__REGISTER_TRACE_WRITER_REQUEST__INIT;
	Perfetto__Protos__UnregisterTraceWriterRequest unreg =
		PERFETTO__PROTOS__UNREGISTER_TRACE_WRITER_REQUEST__INIT;

	if (method == PRODUCER_METHOD_REGISTER_TRACE_WRITER) {
		reg.has_trace_writer_id = reg.has_target_buffer = true;
		reg.trace_writer_id = writer_id;
		reg.target_buffer = target_buffer;
		(void)producer_invoke(p, method, &reg.base, NULL);
	} else {
		unreg.has_trace_writer_id = true;
		unreg.trace_writer_id = writer_id;
		(void)producer_invoke(p, method, &unreg.base, NULL);
	}
}

/*
 * ds_host.notice: to the other started instances of the same tracing
 * session (ftrace's pids to process_stats), then commit what the pass and
 * the notice wrote.
 */
static void on_notice(void *host, const struct ds_notice *n)
{
	struct producer_ds *from = host;
	struct producer *p = from->producer;

	for (struct producer_ds *o = p->instances; o; o = o->next) {
		if (o == from || !o->inst || !o->started || o->failed ||
		    o->tracing_session_id != from->tracing_session_id || !o->ops->on_notice)
			continue;
		o->ops->on_notice(o->inst, n);
	}
	(void)producer_commit(p, 0);
}

static void on_commit_soon(void *host)
{
	struct producer_ds *ds = host;

	producer_commit_soon(ds->producer);
}

#define LATE_START_NOTICE_NS (100 * 1000000ull)

const char *producer_starting(const struct producer *p)
{
	for (const struct producer_ds *ds = p ? p->instances : NULL; ds; ds = ds->next)
		if (ds->starting || (!ds->failed && !ds->started))
			return ds->ops->name;
	return NULL;
}

/* Started (or failed to): count it, tell the hooks, commit what the start wrote. */
static void start_done(struct producer *p, struct producer_ds *ds, int r)
{
	if (r < 0)
		log_error_errno(r, "Failed to start data source instance %llu: %m", (unsigned long long)ds->id);
	ds->started = true;
	/* a start may already have filled chunks (the full /proc scan) */
	producer_commit_soon(p);
	if (r >= 0 && ds->inst && p->hooks.ds_started)
		p->hooks.ds_started(p, ds->ops->name, p->userdata);
}

/*
 * ds_host.started: a start that went on off the loop is over.  Said in the
 * log with its delay and reason, since the trace then begins that much
 * after the service asked; then acked, as traced_probes acks every start.
 */
static void on_started(void *host, int error, const char *why)
{
	struct producer_ds *ds = host;
	struct producer *p = ds->producer;
	uint64_t ns = now_ns(CLOCK_MONOTONIC) - ds->start_asked_ns;

	if (!ds->starting)
		return;
	ds->starting = false;
	/* a few ms are the common case (a small resize): only a real delay is news */
	log_full_errno(ns >= LATE_START_NOTICE_NS ? LOG_LEVEL_NOTICE : LOG_LEVEL_DEBUG, 0,
		       "%s for session %llu started %.1f s after StartDataSource: %s", ds->ops->name,
		       (unsigned long long)ds->tracing_session_id, (double)ns / 1e9, why ? why : "held");
	start_done(p, ds, error);
	notify(p, PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STARTED, ds->id);
}

void producer_ds_report_sum(struct ds_report *r)
{
	for (unsigned i = 0; i < r->n_cpus; i++) {
		r->events += r->cpu[i].events;
		r->lost_events += r->cpu[i].lost_events;
		r->pages_with_loss += r->cpu[i].pages_with_loss;
		r->overrun += r->cpu[i].overrun;
		r->skipped_events += r->cpu[i].skipped_events;
	}
}

static void fill_report(struct producer_ds *ds, struct ds_report *r)
{
	*r = (struct ds_report){
		.name = ds->ops->name,
		.failed = ds->failed,
		.instance_id = ds->id,
		.tracing_session_id = ds->tracing_session_id,
	};
	if (ds->inst && ds->ops->report && ds->ops->report(ds->inst, r) < 0) {
		/* whatever the data source got to fill is not to be trusted */
		ds_report_done(r);
		r->events = r->lost_events = r->pages_with_loss = r->overrun = 0;
	}
	producer_ds_report_sum(r);
	if (ds->writer) {
		struct smb_writer_stats ws;

		smb_writer_get_stats(ds->writer, &ws);
		r->packets_dropped = ws.packets_dropped;
		r->bytes = ws.bytes_written;
	}
}

size_t producer_report_live(struct producer *p,
			    void (*cb)(const struct ds_report *r, void *userdata), void *userdata)
{
	size_t n = 0;

	for (struct producer_ds *ds = p->instances; ds; ds = ds->next) {
		struct ds_report r;

		if (!ds->started || ds->failed)
			continue;
		fill_report(ds, &r);
		cb(&r, userdata);
		ds_report_done(&r);
		n++;
	}
	return n;
}

static void destroy(struct producer *p, struct producer_ds *ds, bool notify_stopped)
{
	struct producer_ds **pp;
	uint16_t writer_id = ds->writer ? smb_writer_id(ds->writer) : 0;

	if (p->hooks.ds_stopped && (ds->started || ds->failed)) {
		struct ds_report r;

		fill_report(ds, &r);
		p->hooks.ds_stopped(p, &r, p->userdata);
		ds_report_done(&r);
	}
	/* the data source undoes its setup; its last packets go out with the writer */
	if (ds->inst)
		ds->ops->free(ds->inst);
	ds->inst = NULL;
	ds->writer = smb_writer_free(ds->writer);
	for (pp = &p->instances; *pp; pp = &(*pp)->next)
		if (*pp == ds) {
			*pp = ds->next;
			break;
		}
	if (notify_stopped) {
		(void)producer_commit(p, 0);
		notify(p, PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STOPPED, ds->id);
		if (writer_id)
			trace_writer_rpc(p, PRODUCER_METHOD_UNREGISTER_TRACE_WRITER, writer_id, 0);
	}
	free(ds);
}

void producer_ds_destroy_all(struct producer *p)
{
	while (p->instances)
		destroy(p, p->instances, /* notify= */ false);
}

void producer_ds_stop(struct producer *p, uint64_t id)
{
	struct producer_ds *ds = find_ds(p, id);

	if (ds)
		destroy(p, ds, /* notify= */ true);
	else
		log_warning("StopDataSource for unknown instance %llu, ignoring", (unsigned long long)id);
}

/* one log line per warning, so none is cut and the journal keeps them apart */
static void log_warnings(const char *name, uint64_t session, const char *warnings)
{
	const char *line = warnings;

	while (line && *line) {
		const char *end = strchrnul(line, '\n');

		if (end > line)
			log_warning("%s session %llu: %.*s", name, (unsigned long long)session,
				    (int)(end - line), line);
		line = *end ? end + 1 : end;
	}
}

int producer_ds_setup(struct producer *p,
		      const Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource *cmd,
		      const char *refusal)
{
	const Perfetto__Protos__DataSourceConfig *cfg = cmd->config;
	_cleanup_free_ char *why = NULL, *warnings = NULL;
	const struct ds_ops *ops;
	struct producer_ds *ds;
	struct ds_env env;
	uint16_t writer_id;
	size_t kind;
	int r;

	if (!cfg || !cfg->name)
		return log_warning_errno(-EINVAL, "SetupDataSource without a config, ignoring");
	if (find_ds(p, cmd->new_instance_id))
		return log_warning_errno(-EEXIST, "SetupDataSource for instance %llu twice, ignoring",
					 (unsigned long long)cmd->new_instance_id);
	ops = find_kind(p, cfg->name, &kind);
	if (!ops)
		return log_warning_errno(-ENOENT, "SetupDataSource for unknown data source '%s', ignoring",
					 cfg->name);
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->producer = p;
	ds->ops = ops;
	ds->id = cmd->new_instance_id;
	ds->tracing_session_id = cfg->tracing_session_id;
	ds->next = p->instances;
	p->instances = ds;

	/* the name and every other string the data source reads may be cut short */
	if (refusal) {
		log_error("Refused data source '%s' of session %llu: %s",
			  cfg->name, (unsigned long long)ds->tracing_session_id, refusal);
		ds->failed = true;
		return 0;
	}
	if (!p->smb) {
		log_error("SetupDataSource for '%s' before SetupTracing: no buffer to write to", cfg->name);
		ds->failed = true;
		return 0;
	}
	r = allocate_writer_id(p, &writer_id);
	if (r >= 0)
		r = smb_writer_new(p->smb, writer_id, cfg->target_buffer, &ds->writer);
	if (r < 0) {
		log_error_errno(r, "Failed to create a trace writer for '%s': %m", cfg->name);
		ds->failed = true;
		return 0;
	}
	trace_writer_rpc(p, PRODUCER_METHOD_REGISTER_TRACE_WRITER, writer_id, cfg->target_buffer);

	env = (struct ds_env){
		.event = p->event,
		.shared = p->shared ? p->shared[kind] : NULL,
		.instance_id = ds->id,
		.tracing_session_id = ds->tracing_session_id,
		.sink = smb_writer_sink(ds->writer),
		.host = { .notice = on_notice, .commit_soon = on_commit_soon, .started = on_started, .host = ds },
	};
	r = ops->setup(&env, cfg, &ds->inst, &why, &warnings);
	if (r < 0) {
		log_error_errno(r, "Failed to set up %s for session %llu: %s%s%m", cfg->name,
				(unsigned long long)ds->tracing_session_id, why ? why : "",
				why ? ": " : "");
		ds->inst = NULL;
		ds->failed = true;
		return 0;
	}
	log_warnings(cfg->name, ds->tracing_session_id, warnings);
	log_debug("Set up %s instance %llu (session %llu, writer %u, buffer %u)", cfg->name,
		  (unsigned long long)ds->id, (unsigned long long)ds->tracing_session_id, writer_id,
		  cfg->target_buffer);
	return 0;
}

void producer_ds_start(struct producer *p, uint64_t id, const char *refusal)
{
	struct producer_ds *ds = find_ds(p, id);
	int r = 0;

	if (!ds) {
		log_warning("StartDataSource for unknown instance %llu, ignoring", (unsigned long long)id);
		return;
	}
	if (ds->starting)
		return; /* acked when it reports */
	if (refusal && !ds->failed && !ds->started) {
		log_error("Refused to start data source instance %llu: %s",
			  (unsigned long long)id, refusal);
		ds->failed = true;
	}
	if (!ds->failed && !ds->started) {
		ds->start_asked_ns = now_ns(CLOCK_MONOTONIC);
		if (ds->inst)
			r = ds->ops->start(ds->inst);
		if (r == DS_START_LATER) {
			ds->starting = true;
			log_debug("%s instance %llu: start held (setup still running off the loop)",
				  ds->ops->name, (unsigned long long)id);
			return;
		}
		start_done(p, ds, r);
	}
	/* as traced_probes: notify even when the start failed internally */
	notify(p, PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STARTED, id);
}

/* FlushFlags: the reason is the low 4 bits; 2 is "the session is stopping". */
#define FLUSH_REASON_MASK 0xfu
#define FLUSH_REASON_TRACE_STOP 2u

void producer_ds_flush(struct producer *p, const Perfetto__Protos__GetAsyncCommandResponse__Flush *f)
{
	bool last = f->has_flags && (f->flags & FLUSH_REASON_MASK) == FLUSH_REASON_TRACE_STOP;
	bool final = p->final_flush && last;

	for (size_t i = 0; i < f->n_data_source_ids; i++) {
		struct producer_ds *ds = find_ds(p, f->data_source_ids[i]);

		if (!ds || !ds->started || ds->failed)
			continue;
		if (ds->inst && final && ds->ops->flush_final)
			(void)ds->ops->flush_final(ds->inst);
		else if (ds->inst && last && ds->ops->flush_last)
			(void)ds->ops->flush_last(ds->inst);
		else if (ds->inst)
			(void)ds->ops->flush(ds->inst);
		if (ds->writer)
			smb_writer_flush(ds->writer);
	}
	/* one CommitData: every chunk released above, then the ack */
	(void)producer_commit(p, f->request_id ? f->request_id : 0);
}

void producer_ds_clear_incremental(
	struct producer *p, const Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState *c)
{
	for (size_t i = 0; i < c->n_data_source_ids; i++) {
		struct producer_ds *ds = find_ds(p, c->data_source_ids[i]);

		if (ds && ds->inst && ds->started && ds->ops->clear_incremental)
			(void)ds->ops->clear_incremental(ds->inst);
	}
	producer_commit_soon(p);
}
