/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GetAsyncCommand stream: SetupTracing, Setup/Start/Stop of data-source
 * instances, Flush and ClearIncrementalState.  Each instance gets its own
 * trace writer (one sequence), as in Perfetto's traced_probes.
 */
#include <string.h>

#include "probes/ftrace/ftrace.h"
#include "probes/ftrace/ftrace_parse.h"
#include "probes/procfs/procfs.h"
#include "probes/producer-internal.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "util/util.h"

static struct producer_ds *find_ds(struct producer *p, uint64_t id)
{
	for (struct producer_ds *ds = p->instances; ds; ds = ds->next)
		if (ds->id == id)
			return ds;
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

/* After every ftrace pass: /proc lookups for the session's new pids, then commit. */
static void on_ftrace_pass(struct ftrace_ds *fds, const struct ftrace_pidset *pids, void *userdata)
{
	struct producer_ds *ds = userdata;
	struct producer *p = ds->producer;
	const int32_t *pid_list = NULL, *renamed = NULL;
	size_t n = ftrace_pidset_pids(pids, &pid_list);
	size_t n_renamed = ftrace_pidset_renamed(pids, &renamed);

	for (struct producer_ds *o = p->instances; o; o = o->next) {
		if (o->kind != PRODUCER_DS_KIND_PROCFS || !o->procfs || !o->started ||
		    o->tracing_session_id != ds->tracing_session_id)
			continue;
		if (n || n_renamed)
			(void)procfs_ds_on_ftrace_pids(o->procfs, pid_list, n, renamed, n_renamed);
	}
	(void)producer_commit(p, 0);
}

static void fill_report(struct producer_ds *ds, struct producer_ds_report *r)
{
	memset(r, 0, sizeof(*r));
	r->failed = ds->failed;
	r->instance_id = ds->id;
	r->tracing_session_id = ds->tracing_session_id;
	if (ds->writer) {
		struct smb_writer_stats ws;

		smb_writer_get_stats(ds->writer, &ws);
		r->packets_dropped = ws.packets_dropped;
		r->bytes = ws.bytes_written;
	}
	if (ds->kind == PRODUCER_DS_KIND_FTRACE) {
		_cleanup_free_ struct ftrace_ds_summary *s = NULL;

		r->name = PRODUCER_DS_FTRACE;
		if (ds->ftrace && ftrace_ds_get_summary(ds->ftrace, &s) >= 0) {
			r->n_cpus = MIN(s->n_cpus, (unsigned)ARRAY_SIZE(r->cpu));
			for (unsigned i = 0; i < r->n_cpus; i++) {
				r->cpu[i].events = s->cpu[i].events;
				r->cpu[i].lost_events = s->cpu[i].lost_events;
				r->cpu[i].pages_with_loss = s->cpu[i].pages_with_loss;
				r->cpu[i].overrun = s->cpu[i].overrun;
				r->events += s->cpu[i].events;
				r->lost_events += s->cpu[i].lost_events;
				r->pages_with_loss += s->cpu[i].pages_with_loss;
				r->overrun += s->cpu[i].overrun;
			}
		}
	} else {
		r->name = PRODUCER_DS_PROCESS_STATS;
		if (ds->procfs) {
			struct procfs_ds_stats st;

			procfs_ds_get_stats(ds->procfs, &st);
			r->events = st.processes + st.threads;
		}
	}
}

void producer_ds_destroy(struct producer *p, struct producer_ds *ds, bool notify_stopped)
{
	struct producer_ds **pp;
	uint16_t writer_id = ds->writer ? smb_writer_id(ds->writer) : 0;

	if (p->hooks.ds_stopped && (ds->started || ds->failed)) {
		struct producer_ds_report *r = calloc(1, sizeof(*r));

		if (r) {
			fill_report(ds, r);
			p->hooks.ds_stopped(p, r, p->userdata);
			free(r);
		}
	}
	/* the data source restores tracefs; its last packets go out with the writer */
	ds->ftrace = ftrace_ds_free(ds->ftrace);
	ds->procfs = procfs_ds_free(ds->procfs);
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

/* one log line per warning, so none is cut and the journal keeps them apart */
static void log_warnings(uint64_t session, const char *warnings)
{
	const char *line = warnings;

	while (line && *line) {
		const char *end = strchrnul(line, '\n');

		if (end > line)
			log_warning("ftrace session %llu: %.*s", (unsigned long long)session,
				    (int)(end - line), line);
		line = *end ? end + 1 : end;
	}
}

static int setup_ds(struct producer *p, const Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource *cmd)
{
	const Perfetto__Protos__DataSourceConfig *cfg = cmd->config;
	static const Perfetto__Protos__FtraceConfig empty_ftrace = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct producer_ds *ds;
	uint16_t writer_id;
	int r;

	if (!cfg || !cfg->name)
		return log_warning_errno(-EINVAL, "SetupDataSource without a config, ignoring");
	if (find_ds(p, cmd->new_instance_id))
		return log_warning_errno(-EEXIST, "SetupDataSource for instance %llu twice, ignoring",
					 (unsigned long long)cmd->new_instance_id);
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->producer = p;
	ds->id = cmd->new_instance_id;
	ds->tracing_session_id = cfg->tracing_session_id;
	if (strcmp(cfg->name, PRODUCER_DS_FTRACE) == 0) {
		ds->kind = PRODUCER_DS_KIND_FTRACE;
	} else if (strcmp(cfg->name, PRODUCER_DS_PROCESS_STATS) == 0) {
		ds->kind = PRODUCER_DS_KIND_PROCFS;
	} else {
		free(ds);
		return log_warning_errno(-ENOENT, "SetupDataSource for unknown data source '%s', ignoring",
					 cfg->name);
	}
	ds->next = p->instances;
	p->instances = ds;

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

	if (ds->kind == PRODUCER_DS_KIND_FTRACE) {
		const struct ftrace_ds_hooks hooks = { .pass_done = on_ftrace_pass };
		_cleanup_free_ char *why = NULL;

		r = ftrace_ds_setup(p->ftrace, ds->id, ds->tracing_session_id,
				    cfg->ftrace_config ? cfg->ftrace_config : &empty_ftrace, ds->writer,
				    &hooks, ds, &ds->ftrace, &why);
		if (r < 0) {
			log_error_errno(r, "Failed to set up ftrace for session %llu: %s%s%m",
					(unsigned long long)ds->tracing_session_id, why ? why : "",
					why ? ": " : "");
			ds->failed = true;
			return 0;
		}
		log_warnings(ds->tracing_session_id, ftrace_ds_get_warnings(ds->ftrace));
	} else {
		r = procfs_ds_setup(p->event, ds->id, ds->tracing_session_id,
				    cfg->process_stats_config, ds->writer, &ds->procfs);
		if (r < 0) {
			log_error_errno(r, "Failed to set up process stats: %m");
			ds->failed = true;
			return 0;
		}
	}
	log_debug("Set up %s instance %llu (session %llu, writer %u, buffer %u)", cfg->name,
		  (unsigned long long)ds->id, (unsigned long long)ds->tracing_session_id, writer_id,
		  cfg->target_buffer);
	return 0;
}

static void start_ds(struct producer *p, uint64_t id)
{
	struct producer_ds *ds = find_ds(p, id);
	int r = 0;

	if (!ds) {
		log_warning("StartDataSource for unknown instance %llu, ignoring", (unsigned long long)id);
		return;
	}
	if (!ds->failed && !ds->started) {
		if (ds->ftrace)
			r = ftrace_ds_start(ds->ftrace);
		else if (ds->procfs)
			r = procfs_ds_start(ds->procfs);
		if (r < 0)
			log_error_errno(r, "Failed to start data source instance %llu: %m",
					(unsigned long long)id);
		ds->started = true;
		/* the full /proc scan may already have filled chunks */
		producer_commit_soon(p);
	}
	/* as traced_probes: notify even when the start failed internally */
	notify(p, PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STARTED, id);
}

static void flush(struct producer *p, const Perfetto__Protos__GetAsyncCommandResponse__Flush *f)
{
	for (size_t i = 0; i < f->n_data_source_ids; i++) {
		struct producer_ds *ds = find_ds(p, f->data_source_ids[i]);

		if (!ds || !ds->started || ds->failed)
			continue;
		if (ds->ftrace)
			(void)ftrace_ds_flush(ds->ftrace);
		else if (ds->procfs)
			(void)procfs_ds_flush(ds->procfs);
		if (ds->writer)
			smb_writer_flush(ds->writer);
	}
	/* one CommitData: every chunk released above, then the ack */
	(void)producer_commit(p, f->request_id ? f->request_id : 0);
}

static void clear_incremental_state(struct producer *p,
				    const Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState *c)
{
	for (size_t i = 0; i < c->n_data_source_ids; i++) {
		struct producer_ds *ds = find_ds(p, c->data_source_ids[i]);

		if (ds && ds->procfs && ds->started)
			(void)procfs_ds_clear_incremental_state(ds->procfs);
	}
	producer_commit_soon(p);
}

void producer_on_async_command(struct ipc_client *c, int error, const uint8_t *reply, size_t len,
			       bool has_more, int fd, void *userdata)
{
	struct producer *p = userdata;
	Perfetto__Protos__GetAsyncCommandResponse *cmd;

	if (error < 0 || !has_more) {
		/* the stream never ends while the service is alive */
		if (error < 0)
			log_debug_errno(error, "Command stream failed: %m");
		producer_fail(p, error < 0 ? error : -ECONNRESET);
		return;
	}
	cmd = perfetto__protos__get_async_command_response__unpack(NULL, len, reply);
	if (!cmd) {
		log_warning("Undecodable command from the tracing service, ignoring");
		return;
	}
	switch (cmd->cmd_case) {
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING: {
		_cleanup_close_ int smb_fd = ipc_client_take_fd(c);

		if (producer_setup_smb(p, cmd->setup_tracing->shared_buffer_page_size_kb, smb_fd) < 0)
			log_error("Without a shared memory buffer no data can be recorded");
		break;
	}
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE:
		(void)setup_ds(p, cmd->setup_data_source);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
		start_ds(p, cmd->start_data_source->new_instance_id);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE: {
		struct producer_ds *ds = find_ds(p, cmd->stop_data_source->instance_id);

		if (ds)
			producer_ds_destroy(p, ds, /* notify= */ true);
		else
			log_warning("StopDataSource for unknown instance %llu, ignoring",
				    (unsigned long long)cmd->stop_data_source->instance_id);
		break;
	}
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
		flush(p, cmd->flush);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE:
		clear_incremental_state(p, cmd->clear_incremental_state);
		break;
	default:
		log_debug("Ignoring unknown command %d from the tracing service", cmd->cmd_case);
		break;
	}
	perfetto__protos__get_async_command_response__free_unpacked(cmd, NULL);
}
