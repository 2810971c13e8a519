/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * procfs - the linux.process_stats data source, as Perfetto v58.2's
 * traced_probes implements it:
 *
 *  - at start (scan_all_processes_on_start), one ProcessTree packet with a
 *    Process entry per /proc/<pid>, a Thread entry for its main thread
 *    (v58+, unless skip_main_thread_message) and one per other task;
 *  - after every ftrace read pass of the same tracing session (unless the
 *    DISABLE_ON_DEMAND quirk is set), one ProcessTree packet for the pids
 *    ftrace saw that are not known yet;
 *  - every proc_stats_poll_ms, one ProcessStats packet with the memory
 *    counters that changed, then a ProcessTree for processes not known yet;
 *  - on ClearIncrementalState, everything known is forgotten so that it is
 *    written again on next sight, and the next packet carries
 *    incremental_state_cleared.
 *
 * Packets are encoded by hand through a struct pbw cursor: TracePacket
 * { timestamp(8) = CLOCK_BOOTTIME at scan start, [incremental_state_cleared
 * (41)], process_tree(2) | process_stats(9) { ..., collection_end_timestamp } }.
 *
 * Everything runs on the caller's event loop thread; nothing here is
 * thread-safe.  Functions return >= 0 on success and -errno on failure and
 * never log above debug.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/loop.h"

struct ds_ops;
struct pbw_sink;
struct Perfetto__Protos__ProcessStatsConfig;

struct procfs_ds;

/* Counters for the recorder's summary; they only grow. */
struct procfs_ds_stats {
	uint64_t packets;            /* packets handed to the writer */
	uint64_t packets_dropped;    /* ... that the writer had to drop */
	uint64_t processes;          /* ProcessTree.Process entries written */
	uint64_t threads;            /* ProcessTree.Thread entries written */
	uint64_t stats_processes;    /* ProcessStats.Process entries written */
	uint64_t full_scans;
	uint64_t poll_ticks;
	uint64_t on_demand_passes;   /* ftrace passes that had unknown pids */
	uint64_t pids_looked_up;     /* unknown pids from ftrace looked up in /proc */
	/*
	 * Pids from ftrace that had already exited when we looked: no /proc
	 * entry is left to read their tgid, name or command line from, so they
	 * are not in any ProcessTree.  Counted once per lookup.  (A bare
	 * Thread{tid} would be worse than nothing: trace_processor reads a
	 * missing tgid as 0 and files the thread under pid 0.)
	 */
	uint64_t pids_exited;
	uint64_t vanished;           /* tasks that exited while a scan read them */
	uint64_t read_errors;        /* other /proc failures (EACCES, bad content) */
	uint64_t cmdlines_truncated; /* longer than 128 KiB: cut */
	uint64_t last_full_scan_ns;  /* CLOCK_MONOTONIC duration of the last full scan */
};

/**
 * procfs_ds_setup - create a linux.process_stats data source instance that
 * writes through @sink (copied; what it points to must outlive the data
 * source, which flushes it).  Nothing is read from /proc until
 * procfs_ds_start().
 * @e: the loop that runs the poll timer; may be NULL when @cfg has no
 *     proc_stats_poll_ms.  A reference is taken.
 * @instance_id: DataSourceInstanceID given by the service.
 * @tracing_session_id: DataSourceConfig.tracing_session_id, used to pair
 *     this instance with the ftrace instances of the same session.
 * @cfg: may be NULL (all defaults).  proc_stats_poll_ms below 100 becomes
 *     100; the cache is cleared every max(ttl / poll, 1) ticks.
 * Returns: 0, -EINVAL, -ENOMEM.
 */
int procfs_ds_setup(struct loop *e, uint64_t instance_id, uint64_t tracing_session_id,
		    const struct Perfetto__Protos__ProcessStatsConfig *cfg, const struct pbw_sink *sink,
		    struct procfs_ds **ret);

/**
 * procfs_ds_set_proc_root - read from @path (a fixture tree laid out like
 * /proc: "<pid>/{status,stat,cmdline,...}", "<pid>/task/<tid>/status")
 * instead of /proc.  Only before procfs_ds_start().
 * Returns: 0, -EBUSY once started, -errno from opening @path.
 */
int procfs_ds_set_proc_root(struct procfs_ds *ds, const char *path);

/**
 * procfs_ds_set_rescan_on_clear - also rewrite the whole process tree right
 * away on ClearIncrementalState (only if scan_all_processes_on_start is
 * set).  Perfetto does not: it only writes things again when ftrace or the
 * poller sees them, which keeps ring buffers small.  Off by default.
 */
void procfs_ds_set_rescan_on_clear(struct procfs_ds *ds, bool enable);

/**
 * procfs_ds_start - full scan if scan_all_processes_on_start; arms the poll
 * timer (first tick right away on the loop) if proc_stats_poll_ms.  A scan
 * that cannot open /proc fails the call but leaves the instance started.
 * Returns: 0, -EALREADY, -errno.
 */
int procfs_ds_start(struct procfs_ds *ds);

/**
 * procfs_ds_on_ftrace_pids - after an ftrace read pass of the same tracing
 * session: forget the @renamed pids (task_rename), then write a Process
 * (and main Thread) for each unknown tgid and a Thread for each unknown
 * non-main tid among @pids, in one packet.  Order and duplicates in @pids
 * do not matter; pid 0 is skipped.  No-op before start and with the
 * DISABLE_ON_DEMAND quirk.
 * Returns: number of pids looked up, or -ENOMEM.
 */
int procfs_ds_on_ftrace_pids(struct procfs_ds *ds, const int32_t *pids, size_t n,
			     const int32_t *renamed, size_t n_renamed);

/**
 * procfs_ds_on_demand_enabled - false with the DISABLE_ON_DEMAND quirk, so
 * the caller need not collect pids for this instance.
 */
bool procfs_ds_on_demand_enabled(const struct procfs_ds *ds);

/**
 * procfs_ds_clear_incremental_state - forget known pids and the counter
 * cache; the next packet carries incremental_state_cleared = true.
 * Returns: 0, or the rescan's error (see procfs_ds_set_rescan_on_clear()).
 */
int procfs_ds_clear_incremental_state(struct procfs_ds *ds);

/**
 * procfs_ds_flush - flush the sink, as Perfetto does (no new scan).
 * Returns: 0.
 */
int procfs_ds_flush(struct procfs_ds *ds);

/**
 * procfs_ds_free - stop the timer and free.  Does not flush the sink.  Accepts NULL; returns NULL.
 */
struct procfs_ds *procfs_ds_free(struct procfs_ds *ds);

uint64_t procfs_ds_tracing_session_id(const struct procfs_ds *ds);
uint64_t procfs_ds_instance_id(const struct procfs_ds *ds);

/**
 * procfs_ds_get_stats - copy the counters into @ret.
 */
void procfs_ds_get_stats(const struct procfs_ds *ds, struct procfs_ds_stats *ret);

/*
 * linux.process_stats as a data source of the registry (probes/ds/ds.h):
 * DS_NOTICE_PIDS from the session's ftrace instances feeds
 * procfs_ds_on_ftrace_pids().
 */
extern const struct ds_ops procfs_ds_ops;
