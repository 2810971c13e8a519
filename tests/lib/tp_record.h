/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Test helpers for the FtraceConfig options beyond events: run a recording
 * from a config text (in this process, or in a child that can be killed),
 * and scan the trace at the wire level for what those options produce:
 * FtraceEvent kinds by field number, KprobeEvents, interned kernel symbols,
 * syscall ids, failed_ftrace_events.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TP_SCAN_MAX_FIELD 1024u
#define TP_SCAN_MAX_NAMES 256u

struct tp_ftrace_scan {
	uint64_t packets_by_field[256];         /* TracePacket fields < 256 */
	uint64_t events_by_field[TP_SCAN_MAX_FIELD]; /* FtraceEvent payload fields */
	uint64_t compact_bundles;
	uint64_t bundles;
	uint64_t symbols;                       /* kernel_symbols entries */
	uint64_t sequence_cleared;              /* packets with SEQ_INCREMENTAL_STATE_CLEARED */
	char *symbol_names[TP_SCAN_MAX_NAMES];  /* distinct, first ones */
	size_t n_symbol_names;
	uint64_t kprobe_begin, kprobe_end, kprobe_instant;
	char *kprobe_names[TP_SCAN_MAX_NAMES];
	size_t n_kprobe_names;
	uint64_t syscall_ids[1024];             /* sys_enter + sys_exit by id */
	uint64_t syscalls_other;                /* ids >= 1024 */
	char *failed[TP_SCAN_MAX_NAMES];        /* FtraceStats.failed_ftrace_events */
	size_t n_failed;
	char *unknown[TP_SCAN_MAX_NAMES];
	size_t n_unknown;
	uint64_t kernel_symbols_parsed;         /* largest seen in FtraceStats */
	bool has_kprobe_stats;
	bool preserve_ftrace_buffer;            /* some FtraceStats said so */
	uint64_t stats_packets;
	/* With tp_scan_trace_events(): every FtraceEvent's CPU and timestamp, in
	 * trace order (compact_sched entries are not in it). */
	struct tp_scan_event {
		uint32_t cpu;
		uint64_t ts;
	} *events;
	size_t n_events, cap_events;
	bool want_events;
};

/* Scan the trace file @path.  Returns: 0, -errno, -EBADMSG. */
int tp_scan_trace(const char *path, struct tp_ftrace_scan *ret);
/* The same, also filling ret->events. */
int tp_scan_trace_events(const char *path, struct tp_ftrace_scan *ret);
void tp_scan_free(struct tp_ftrace_scan *s);
bool tp_scan_has_symbol(const struct tp_ftrace_scan *s, const char *name);
bool tp_scan_failed_has(const struct tp_ftrace_scan *s, const char *prefix);

/* Write @text to @path (0 or -errno). */
int tp_write_file(const char *path, const char *text);

/*
 * Record @cfg_path into @out in this process (quiet).  Returns what
 * recorder_run() returned.
 */
int tp_record(const char *cfg_path, const char *out);

/*
 * The same in a child with $TRACED_PROBES_STATE_DIR = @state_dir, so that a
 * test can SIGKILL it mid-recording.  Returns the child's pid.
 */
pid_t tp_record_spawn(const char *cfg_path, const char *out, const char *state_dir);

/*
 * tracefs files the options beyond events change, with their contents, for
 * @dir (and kprobe_events of the top level): for byte-for-byte comparison.
 */
char *tp_feature_snapshot(const char *dir);
