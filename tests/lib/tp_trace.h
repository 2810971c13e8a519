/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Test helpers: decode a trace file we wrote and summarise it per CPU, the
 * way a reader (trace_processor) would see it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protos/perfetto/trace/trace.pb-c.h"

#define TP_MAX_CPUS 256

struct tp_cpu_summary {
	uint64_t bundles;
	uint64_t switches;        /* compact + typed sched_switch */
	uint64_t wakings;         /* compact + typed sched_waking */
	uint64_t other_events;
	uint64_t events;          /* all of the above */
	uint64_t events_at_end;   /* events written before the last END_OF_TRACE stats */
	uint64_t lost_bundles;    /* bundles with lost_events */
	/* each list is in time order on its own, across bundles */
	uint64_t last_typed_ts, last_switch_ts, last_waking_ts;
	bool ts_decreased;        /* timestamps went backwards on this CPU */
	uint64_t start_read, end_read;       /* from the FtraceStats pair */
	uint64_t start_overrun, end_overrun;
	uint64_t start_entries, end_entries;
	uint64_t end_dropped;
	/* FtraceCpuStats.bytes_read END - START: events read and not written
	 * (not this session's, or filtered out), as the producer carries them */
	uint64_t start_skipped, end_skipped;
};

struct tp_trace_summary {
	Perfetto__Protos__Trace *trace;
	size_t file_bytes;
	unsigned n_cpus;          /* highest cpu seen + 1 */
	struct tp_cpu_summary cpu[TP_MAX_CPUS];
	uint64_t events;          /* every ftrace event, compact or not */
	uint64_t stats_pairs;
	uint64_t process_tree_packets;
	uint64_t processes, threads;
	uint64_t packets_with_loss_flag;   /* previous_packet_dropped */
	uint64_t compact_bytes;            /* bytes of compact_sched messages */
	bool has_trace_config, has_clock_snapshot;
};

/**
 * tp_trace_load - read and decode @path, then summarise it.
 * Returns: 0 or -errno / -EBADMSG.
 */
int tp_trace_load(const char *path, struct tp_trace_summary *ret);
void tp_trace_free(struct tp_trace_summary *s);

/**
 * tp_trace_has_next_pid - true if some sched_switch switched to @pid.
 */
bool tp_trace_has_next_pid(const struct tp_trace_summary *s, int32_t pid);

/**
 * tp_trace_thread_tgid - the tgid a ProcessTree gave @tid, or -1.
 */
int32_t tp_trace_thread_tgid(const struct tp_trace_summary *s, int32_t tid);

/*
 * The timestamp of the service's TracingServiceEvent @event_case (one of
 * PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_*: tracing_started,
 * all_data_sources_started...), the last one if several, 0 if none: what
 * trace_processor reads as tracing_started_ns and all_data_source_started_ns.
 */
uint64_t tp_trace_service_event_ts(const struct tp_trace_summary *s, int event_case);
