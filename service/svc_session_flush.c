/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Flushes of a session, as traced's Flush: one Flush command per producer,
 * the acks (an ack of N acks every flush <= N), the timeout, and the
 * completion on a loop turn of its own (the callback may free the session).
 * The final flush of a stop hands over to svc_session_disable.c.
 */
#include "service/svc_internal.h"
#include "util/util.h"

struct svc_flush *svc_session_flush_free(struct svc_flush *f)
{
	if (!f)
		return NULL;
	loop_source_disable_unref(f->timer);
	free(f->producers);
	free(f);
	return NULL;
}

static int on_flush_defer(struct loop_source *es, void *userdata)
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
	svc_packets_event_now(ss, SVC_EVENT_ALL_DATA_SOURCES_FLUSHED, /* snapshot_clocks= */ true);
	if (f->success)
		ss->stats.flushes_acked++;
	else
		ss->stats.flushes_timed_out++;
	svc_output_flush(ss);
	if (f->final) {
		bool ok = f->success;

		svc_session_flush_free(f);
		svc_session_disable_after_flush(ss, ok);
	} else {
		void (*cb)(struct svc_session *, bool, void *) = f->cb;
		void *ud = f->userdata;
		bool ok = f->success;

		svc_session_flush_free(f);
		if (cb)
			cb(ss, ok, ud);
	}
	return 0;
}

static void flush_complete_later(struct svc_flush *f, bool success)
{
	f->completed = true;
	f->success = success;
	f->timer = loop_source_disable_unref(f->timer);
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

static int on_flush_timeout(struct loop_source *es, uint64_t usec, void *userdata)
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

int svc_session_flush_start(struct svc_session *ss, uint64_t flags, bool final,
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
		svc_session_flush_free(f);
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
		(void)svc_producer_send(p, &cmd);
		f->producers[f->n_producers++] = p->id;
	}
	SVC_LIST_APPEND(flushes, ss, f);
	r = svc_session_arm_timer(ss, &f->timer, f->n_producers ? ss->flush_timeout_ms : 0, on_flush_timeout, f);
	if (r < 0) {
		SVC_LIST_REMOVE(flushes, ss, f);
		svc_session_flush_free(f);
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
	return svc_session_flush_start(ss, SVC_FLUSH_REASON_EXPLICIT | SVC_FLUSH_INITIATOR_TRACED, false, cb, userdata);
}
