/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The end of a session, as traced's DisableTracing: StopDataSource to every
 * instance, the wait for their acks (or the stop timeout), then finishing
 * the file (the final read, tracing_disabled, the stats) and the done hook
 * on a loop turn of its own.  Calls nothing else of the sessions.
 */
#include "service/svc_internal.h"
#include "util/util.h"

void svc_session_disable_ds(struct svc_ds_inst *inst, bool immediately)
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
		(void)svc_producer_send(inst->producer, &cmd);
}

static bool all_stopped(const struct svc_session *ss)
{
	for (const struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state != SVC_DS_STOPPED)
			return false;
	return true;
}

void svc_session_disable_ds_done(struct svc_session *ss, struct svc_ds_inst *inst)
{
	inst->state = SVC_DS_STOPPED;
	if (ss->state == SVC_SESSION_DISABLING && all_stopped(ss))
		svc_session_disable_finish(ss);
}

static int on_done_defer(struct loop_source *es, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)es;
	ss->done_notified = true;
	if (ss->hooks.done)
		ss->hooks.done(ss, ss->error, ss->userdata);
	return 0;
}

void svc_session_disable_buffers(struct svc_session *ss)
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

void svc_session_disable_timers(struct svc_session *ss)
{
	ss->duration_timer = loop_source_disable_unref(ss->duration_timer);
	ss->stop_timer = loop_source_disable_unref(ss->stop_timer);
	ss->flush_period_timer = loop_source_disable_unref(ss->flush_period_timer);
	ss->clear_timer = loop_source_disable_unref(ss->clear_timer);
	ss->snapshot_timer = loop_source_disable_unref(ss->snapshot_timer);
	ss->all_started_timer = loop_source_disable_unref(ss->all_started_timer);
}

/* traced's DisableTracingNotifyConsumerAndFlushFile, plus the final read. */
void svc_session_disable_finish(struct svc_session *ss)
{
	struct svc *s = ss->svc;

	if (ss->state == SVC_SESSION_DISABLED)
		return;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		i->state = SVC_DS_STOPPED;
	svc_session_disable_timers(ss);

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

	svc_packets_event_now(ss, SVC_EVENT_TRACING_DISABLED, /* snapshot_clocks= */ true);
	(void)svc_packets_event(ss, SVC_EVENT_READ_TRACING_BUFFERS_COMPLETED, svc_now_boot_ns());
	(void)svc_packets_remote_machines(ss);
	(void)svc_packets_trace_stats(ss);
	svc_output_flush(ss);
	/* The file is complete: late flush completions write nothing. */
	ss->write_stopped = true;
	svc_session_disable_buffers(ss);
	ss->done = true;
	if (s)
		(void)svc_session_arm_defer(ss, &ss->done_defer, on_done_defer);
}

static int on_stop_timeout(struct loop_source *es, uint64_t usec, void *userdata)
{
	struct svc_session *ss = userdata;

	(void)es;
	(void)usec;
	if (ss->state != SVC_SESSION_DISABLING)
		return 0;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state == SVC_DS_STOPPING)
			ss->stats.data_sources_stop_timed_out++;
	svc_session_disable_finish(ss);
	return 0;
}

/* traced's DisableTracing. */
void svc_session_disable(struct svc_session *ss, bool immediately)
{
	int r;

	switch (ss->state) {
	case SVC_SESSION_DISABLED:
		return;
	case SVC_SESSION_DISABLING:
		if (immediately)
			svc_session_disable_finish(ss);
		return;
	case SVC_SESSION_STARTED:
		break;
	}
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state != SVC_DS_STOPPED && i->state != SVC_DS_STOPPING)
			svc_session_disable_ds(i, immediately);
	ss->snapshot_timer = loop_source_disable_unref(ss->snapshot_timer);
	if (all_stopped(ss)) {
		svc_session_disable_finish(ss);
		return;
	}
	ss->state = SVC_SESSION_DISABLING;
	r = svc_session_arm_timer(ss, &ss->stop_timer, ss->stop_timeout_ms, on_stop_timeout, ss);
	if (r < 0)
		svc_session_disable_finish(ss);
}

void svc_session_disable_after_flush(struct svc_session *ss, bool ok)
{
	ss->final_flush_outcome = ok ? 1 : 2;
	svc_session_disable(ss, /* immediately= */ false);
}
