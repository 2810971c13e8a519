/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <string.h>

#include "tests/lib/tp_trace.h"
#include "util/util.h"

#define TRACE_MAX_BYTES (1024u << 20)

static void note_ts(struct tp_cpu_summary *c, uint64_t *last, uint64_t ts)
{
	if (ts < *last)
		c->ts_decreased = true;
	*last = ts;
}

static void summarise_bundle(struct tp_trace_summary *s, const Perfetto__Protos__FtraceEventBundle *b)
{
	struct tp_cpu_summary *c;

	if (!b->has_cpu || b->cpu >= TP_MAX_CPUS)
		return;
	c = &s->cpu[b->cpu];
	if (b->cpu + 1 > s->n_cpus)
		s->n_cpus = b->cpu + 1;
	c->bundles++;
	if (b->has_lost_events && b->lost_events)
		c->lost_bundles++;
	for (size_t k = 0; k < b->n_event; k++) {
		const Perfetto__Protos__FtraceEvent *e = b->event[k];

		note_ts(c, &c->last_typed_ts, e->timestamp);
		if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH)
			c->switches++;
		else if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING)
			c->wakings++;
		else
			c->other_events++;
		s->events++;
		c->events++;
	}
	if (b->compact_sched) {
		const Perfetto__Protos__FtraceEventBundle__CompactSched *cs = b->compact_sched;
		uint64_t ts = 0;

		s->compact_bytes += protobuf_c_message_get_packed_size(&cs->base);
		c->switches += cs->n_switch_timestamp;
		c->wakings += cs->n_waking_timestamp;
		s->events += cs->n_switch_timestamp + cs->n_waking_timestamp;
		c->events += cs->n_switch_timestamp + cs->n_waking_timestamp;
		/* deltas restart at every bundle: the first entry is absolute */
		for (size_t k = 0; k < cs->n_switch_timestamp; k++) {
			ts += cs->switch_timestamp[k];
			note_ts(c, &c->last_switch_ts, ts);
		}
		ts = 0;
		for (size_t k = 0; k < cs->n_waking_timestamp; k++) {
			ts += cs->waking_timestamp[k];
			note_ts(c, &c->last_waking_ts, ts);
		}
	}
}

static void summarise_stats(struct tp_trace_summary *s, const Perfetto__Protos__FtraceStats *st)
{
	bool start = st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE;

	if (!start) {
		s->stats_pairs++;
		/* the stats were read right after the pass that read these events */
		for (unsigned k = 0; k < TP_MAX_CPUS; k++)
			s->cpu[k].events_at_end = s->cpu[k].events;
	}
	for (size_t i = 0; i < st->n_cpu_stats; i++) {
		const Perfetto__Protos__FtraceCpuStats *cs = st->cpu_stats[i];
		struct tp_cpu_summary *c;

		if (cs->cpu >= TP_MAX_CPUS)
			continue;
		c = &s->cpu[cs->cpu];
		if (start) {
			/* every START repeats the snapshot taken when tracing started */
			c->start_read = cs->read_events;
			c->start_overrun = cs->overrun;
			c->start_entries = cs->entries;
			c->start_skipped = cs->bytes_read;
		} else {
			c->end_read = cs->read_events;
			c->end_overrun = cs->overrun;
			c->end_entries = cs->entries;
			c->end_dropped = cs->dropped_events;
			c->end_skipped = cs->bytes_read;
		}
	}
}

int tp_trace_load(const char *path, struct tp_trace_summary *s)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r;

	memset(s, 0, sizeof(*s));
	r = read_full_file_at(AT_FDCWD, path, TRACE_MAX_BYTES, &data, &len);
	if (r < 0)
		return r;
	s->file_bytes = len;
	s->trace = perfetto__protos__trace__unpack(NULL, len, (const uint8_t *)data);
	if (!s->trace)
		return -EBADMSG;
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];

		/* as traced does, the first packet of a sequence is flagged: nothing came before */
		if (p->has_previous_packet_dropped && p->previous_packet_dropped &&
		    !(p->has_first_packet_on_sequence && p->first_packet_on_sequence))
			s->packets_with_loss_flag++;
		switch (p->data_case) {
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
			summarise_bundle(s, p->ftrace_events);
			break;
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS:
			summarise_stats(s, p->ftrace_stats);
			break;
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE:
			s->process_tree_packets++;
			s->processes += p->process_tree->n_processes;
			s->threads += p->process_tree->n_threads;
			break;
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG:
			s->has_trace_config = true;
			break;
		case PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT:
			s->has_clock_snapshot = true;
			break;
		default:
			break;
		}
	}
	return 0;
}

void tp_trace_free(struct tp_trace_summary *s)
{
	if (s->trace)
		perfetto__protos__trace__free_unpacked(s->trace, NULL);
	s->trace = NULL;
}

bool tp_trace_has_next_pid(const struct tp_trace_summary *s, int32_t pid)
{
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];
		const Perfetto__Protos__FtraceEventBundle *b;

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			continue;
		b = p->ftrace_events;
		if (b->compact_sched)
			for (size_t k = 0; k < b->compact_sched->n_switch_next_pid; k++)
				if (b->compact_sched->switch_next_pid[k] == pid)
					return true;
		for (size_t k = 0; k < b->n_event; k++)
			if (b->event[k]->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH &&
			    b->event[k]->sched_switch->next_pid == pid)
				return true;
	}
	return false;
}

int32_t tp_trace_thread_tgid(const struct tp_trace_summary *s, int32_t tid)
{
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
			continue;
		for (size_t k = 0; k < p->process_tree->n_threads; k++)
			if (p->process_tree->threads[k]->tid == tid)
				return p->process_tree->threads[k]->tgid;
		for (size_t k = 0; k < p->process_tree->n_processes; k++)
			if (p->process_tree->processes[k]->pid == tid)
				return tid;
	}
	return -1;
}

uint64_t tp_trace_service_event_ts(const struct tp_trace_summary *s, int event_case)
{
	uint64_t ts = 0;

	for (size_t i = 0; s->trace && i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *pk = s->trace->packet[i];

		/* service_event is a member of the packet's data oneof: only valid as its case */
		if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT && pk->has_timestamp &&
		    (int)pk->service_event->event_type_case == event_case)
			ts = pk->timestamp;
	}
	return ts;
}
