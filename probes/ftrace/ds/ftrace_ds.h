/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * ftrace - the linux.ftrace data source: tracefs control, per-CPU ring-buffer
 * draining and the lifecycle of each data-source instance.
 *
 * One struct ftrace_host lives per process.  It owns one controller per
 * tracefs directory in use (the top level, or <root>/instances/<name>), the
 * per-CPU readers of that directory and the drain timer.  Every linux.ftrace
 * data source is a struct ftrace_ds attached to one controller; data sources
 * on the same directory share its ring buffer: the set of enabled events is
 * the union of theirs, each page read is parsed once per data source, and
 * tracing_on stays 1 while any of them is started.
 *
 * Everything we change in tracefs is recorded (and persisted under the state
 * directory before the change) so that the last data source to stop puts
 * tracing_on, the enabled events, buffer_size_kb, trace_clock,
 * buffer_percent, the raw_syscalls filters, current_tracer and the
 * function filters, max_graph_depth, set_event_pid, tracing_cpumask,
 * options and the kprobes it created back exactly as they were, and so
 * that a restart after a
 * crash can do the same with ftrace_host_recover().  The first setup on a
 * directory also replays a leftover list of a dead process for that
 * directory, and refuses (-EBUSY) a directory whose list belongs to a live
 * one.  Use one host per process.
 *
 * Known limits of "exactly": a buffer the kernel had not expanded yet
 * ("7 (expanded: 1408)") comes back expanded at the size it announced;
 * the buffer's contents are cleared (we cleared it at setup), unless
 * preserve_ftrace_buffer.
 *
 * Nothing here logs above debug: functions return -errno and, where a human
 * needs to know why, a message for the caller to log.
 */

#include <stdbool.h>
#include <stdint.h>
#include "loop/loop.h"

struct ds_ops;
struct pbw_sink;
struct ftrace_pidset;
struct Perfetto__Protos__FtraceConfig;

/* Default directory of the persisted undo lists; TRACED_PROBES_STATE_DIR overrides. */
#define FTRACE_STATE_DIR_DEFAULT "/run/traced-probes"
#define FTRACE_STATE_DIR_ENV "TRACED_PROBES_STATE_DIR"

struct ftrace_host;
struct ftrace_ds;

/**
 * ftrace_host_new - the process-wide ftrace state, driven by @e.
 * @e: event loop for the drain timer (a reference is taken).
 * @ret: the new host.
 *
 * Does not touch tracefs; controllers are created by the first data source
 * that needs them.  The state directory is taken from $TRACED_PROBES_STATE_DIR
 * (default FTRACE_STATE_DIR_DEFAULT) at this point.
 *
 * Returns: 0 or -ENOMEM.
 */
int ftrace_host_new(struct loop *e, struct ftrace_host **ret);

/**
 * ftrace_host_free - free every data source still attached (callers must drop
 * their pointers), restore tracefs, free the host.  Accepts NULL.
 * Returns: NULL.
 */
struct ftrace_host *ftrace_host_free(struct ftrace_host *h);

/**
 * ftrace_host_recover - replay undo lists left in @state_dir by a process
 * that died without restoring tracefs (SIGKILL, crash).  Lists owned by a
 * process that is still alive are left alone.  Each replayed list is
 * removed.  @state_dir NULL means $TRACED_PROBES_STATE_DIR or the default.
 *
 * Returns: the number of lists replayed, or -errno for the first list that
 * could not be replayed (the others are still tried; a list that fails is
 * kept for the next attempt).
 */
int ftrace_host_recover(const char *state_dir);

/**
 * ftrace_host_recover_report - ftrace_host_recover(), and in *@ret_report a
 * malloc'd text with one line per list left alone and why (see
 * ftrace_tracefs_undo_replay_dir()), untouched when every list was replayed.
 */
int ftrace_host_recover_report(const char *state_dir, char **ret_report);

/*
 * Ring-buffer sub-buffers (buffer_subbuf_size_kb, Linux 6.8+).  A session
 * that sets a tracefs directory up (the first on it, without
 * preserve_ftrace_buffer) gives it sub-buffers of this size, and the last
 * one to leave puts the kernel's back; FtraceConfig has no field for it.
 * One read() of trace_pipe_raw returns one whole sub-buffer, so larger ones
 * cut the per-read cost: the default is what measured best on the machines
 * the README names.  Bounded by the buffer (ftrace_tracefs_subbuf_kb()).
 */
#define FTRACE_SUBBUF_DEFAULT_KB 64u
/* The daemon's setting, in KiB (0: leave the kernel's), unless a caller set one. */
#define FTRACE_SUBBUF_ENV "TRACED_PROBES_FTRACE_SUBBUF_KB"

/* For ftrace_host_set_subbuf_kb(): back to the environment and the default. */
#define FTRACE_SUBBUF_UNSET UINT32_MAX

/**
 * ftrace_host_set_subbuf_kb - the sub-buffer size, in KiB, this process's
 * sessions ask for from now on (0: leave the kernel's; rounded down to a
 * power of two when used), over $TRACED_PROBES_FTRACE_SUBBUF_KB and the
 * default; FTRACE_SUBBUF_UNSET undoes it.
 */
void ftrace_host_set_subbuf_kb(uint32_t kb);

/**
 * ftrace_host_subbuf_kb - the size set with ftrace_host_set_subbuf_kb(),
 * else $TRACED_PROBES_FTRACE_SUBBUF_KB when it is a number of KiB, else
 * FTRACE_SUBBUF_DEFAULT_KB.
 */
uint32_t ftrace_host_subbuf_kb(void);

struct ftrace_ds_hooks {
	/*
	 * Called after each read pass (drain timer or flush) with the pids and
	 * tids this data source saw in that pass; the core runs the /proc
	 * lookups for them and commits.  The set is cleared after the call.
	 */
	void (*pass_done)(struct ftrace_ds *ds, const struct ftrace_pidset *pids, void *userdata);
	/*
	 * Optional: with it, the buffer resize of a directory's first setup
	 * runs on a thread of its own, and a start that comes before it is
	 * over returns FTRACE_DS_START_LATER; this is called from the loop
	 * when the data source has really started (@error: 0 or the start's
	 * -errno; @why: what held it).  Without it, a start waits for the
	 * resize, blocking.
	 */
	void (*started)(struct ftrace_ds *ds, int error, const char *why, void *userdata);
};

/* ftrace_ds_start(): started later, through ftrace_ds_hooks.started. */
#define FTRACE_DS_START_LATER 1

/**
 * ftrace_ds_setup - SetupDataSource for linux.ftrace: validate @cfg and do
 * all tracefs setup except tracing_on (buffer size, clock, truncation and
 * event enables for the first data source of a tracefs directory; event
 * enables for the later ones).
 * @h: host.
 * @instance_id: DataSourceInstanceID from the service (kept for the caller).
 * @tracing_session_id: TracingSessionID (kept for the caller).
 * @cfg: the FtraceConfig (not kept after return).
 * @sink: where this data source writes its packets (copied; what it points
 *   to must outlive @ret).
 * @hooks: optional callbacks (copied).
 * @userdata: passed to @hooks.
 * @ret: the new data source.
 * @ret_error: on failure, a malloc'd human-readable reason (may be NULL);
 *   the caller frees it.
 *
 * Events that do not exist on this kernel, have invalid names or fail to
 * enable do not fail the setup: they are reported in the FtraceStats
 * packets (unknown_ftrace_events / failed_ftrace_events) and in
 * ftrace_ds_get_warnings().  So are kprobes and the function graph on a
 * kernel without them, and function filters or kprobes it refuses.
 *
 * Returns: 0; -EINVAL for a rejected config (bad instance name, too many
 * events, atrace with an instance, a bad tid, cpumask or option name...);
 * -ENOENT for a missing instance or tracefs option; -EBUSY if
 * current_tracer is not nop, or for tids_to_trace/tracing_cpumask/
 * tracefs_options next to another session (either way round);
 * -EACCES/-EPERM without the privileges to use tracefs; -ENODEV without
 * tracefs; other -errno from tracefs or the state directory.
 */
int ftrace_ds_setup(struct ftrace_host *h, uint64_t instance_id, uint64_t tracing_session_id,
		    const struct Perfetto__Protos__FtraceConfig *cfg, const struct pbw_sink *sink,
		    const struct ftrace_ds_hooks *hooks, void *userdata, struct ftrace_ds **ret,
		    char **ret_error);

/**
 * ftrace_ds_start - StartDataSource: tracing_on=1 if this is the first
 * started data source on its tracefs directory, open the per-CPU readers,
 * take the START_OF_TRACE stats snapshot and arm the drain timer.
 * Returns: 0, FTRACE_DS_START_LATER (the directory's buffer is still being
 * resized: hooks.started follows), -EALREADY if already started (or about
 * to be), -errno from tracefs.
 */
int ftrace_ds_start(struct ftrace_ds *ds);

/**
 * ftrace_ds_flush - Flush: read every CPU now (until empty, bounded by the
 * buffer size), call pass_done, write the FtraceStats START_OF_TRACE and
 * END_OF_TRACE packets, then the sink's flush().  Reading feeds every started
 * data source of the same tracefs directory, as a timer pass does.
 * Returns: 0 or -errno (the stats packets are still written when a read
 * failed).
 */
int ftrace_ds_flush(struct ftrace_ds *ds);

/**
 * ftrace_ds_flush_final - the last Flush of a stopping session: give up
 * this data source's share of tracing_on (the last started data source of
 * its tracefs directory turns tracing off), then ftrace_ds_flush().  With
 * nothing written after the last read, the END_OF_TRACE stats count
 * exactly the events in the trace.  Only for a caller that knows no
 * further Flush needs data (`record`); the daemon uses ftrace_ds_flush().
 * Returns: as ftrace_ds_flush().
 */
int ftrace_ds_flush_final(struct ftrace_ds *ds);

/**
 * ftrace_ds_flush_last - the last Flush of a stopping session when tracing
 * stays on (the daemon): ftrace_ds_flush(), after which this data source
 * reads nothing more.  Passes for other data sources of the directory go on
 * without it, so the trace ends where its last END_OF_TRACE stats were
 * sampled: what the kernel writes after that stays in the buffer and counts
 * in END entries, never in the trace.  ftrace_ds_flush_final() ends the
 * same way.  Later flushes write no new stats pair.
 * Returns: as ftrace_ds_flush().
 */
int ftrace_ds_flush_last(struct ftrace_ds *ds);

/**
 * ftrace_ds_free - StopDataSource: detach, disable the events no other data
 * source of the directory needs, turn tracing off if it was the last started
 * one and, if it was the last one at all, restore every tracefs file we
 * changed.  Does not read the buffers again (as Perfetto).  Accepts NULL.
 * Returns: NULL.
 */
struct ftrace_ds *ftrace_ds_free(struct ftrace_ds *ds);

/**
 * ftrace_ds_instance_id - the DataSourceInstanceID given to ftrace_ds_setup().
 */
uint64_t ftrace_ds_instance_id(const struct ftrace_ds *ds);

/**
 * ftrace_ds_tracing_session_id - the TracingSessionID given to ftrace_ds_setup().
 */
uint64_t ftrace_ds_tracing_session_id(const struct ftrace_ds *ds);

/**
 * ftrace_ds_get_warnings - non-fatal setup problems (unknown or failed
 * events, config features we do not implement), one per line, for the
 * caller to log.  Owned by @ds; NULL when there were none.
 */
const char *ftrace_ds_get_warnings(const struct ftrace_ds *ds);

struct ftrace_cpu_summary {
	uint64_t events;          /* events this data source emitted (bundles + compact) */
	uint64_t pages;           /* ring-buffer pages read while it was started */
	uint64_t bytes;           /* bytes of those pages */
	uint64_t lost_events;     /* kernel overrun + dropped_events since start */
	uint64_t overrun;         /* kernel overrun since start */
	uint64_t pages_with_loss; /* pages whose header flagged lost events */
	uint64_t read_events;     /* kernel read_events since start */
	/* read from the buffer, not written: events this session did not enable
	 * (trace_marker lines, other sessions' and tracers' events) and print
	 * events its print_filter refused; events + skipped = read_events */
	uint64_t skipped_events;
};

struct ftrace_ds_summary {
	uint64_t passes;          /* read passes this data source took part in */
	/* trace-clock ns: the earliest page read, the last event written (0: none) */
	uint64_t first_ts, last_ts;
	uint64_t parse_errors;
	unsigned n_unknown_events;
	unsigned n_failed_events;
	unsigned n_cpus;
	struct ftrace_cpu_summary cpu[];
};

/**
 * ftrace_ds_get_summary - per-CPU counts for an end-of-run report: what was
 * emitted and, from the kernel's per-CPU stats read now, exactly how many
 * events the ring buffer lost since start.
 * @ret: malloc'd summary; free() it.
 * Returns: 0, -ESTALE if never started, -ENOMEM.
 */
int ftrace_ds_get_summary(struct ftrace_ds *ds, struct ftrace_ds_summary **ret);

/*
 * linux.ftrace as a data source of the registry (probes/ds/ds.h): an adapter
 * over the functions above.  Its shared state is the struct ftrace_host, its
 * recovery ftrace_host_recover(), and each pass_done becomes a
 * DS_NOTICE_PIDS notice to the other instances of the tracing session.
 */
extern const struct ds_ops ftrace_ds_ops;

/* ==== per-CPU raw page reader (ftrace_cpu.c, ftrace_cpu_map.c) ========== */

struct ftrace_tracefs;

struct ftrace_cpu;

enum ftrace_cpu_read_status {
	FTRACE_CPU_MORE,        /* stopped at max_pages: there may be more */
	FTRACE_CPU_EMPTY,       /* the kernel had nothing more (or caught up) */
};

/**
 * ftrace_cpu_open - non-blocking reader of per_cpu/cpu@cpu/trace_pipe_raw.
 * @page_size: ring-buffer page size (ftrace_tracefs_page_size()).
 * @commit_size: size of the page header's commit word (4 or 8).
 * Returns: 0, -ENOENT if the CPU has no per_cpu directory (not present),
 * -errno.
 */
int ftrace_cpu_open(struct ftrace_tracefs *t, unsigned cpu, size_t page_size, unsigned commit_size,
		    struct ftrace_cpu **ret);
struct ftrace_cpu *ftrace_cpu_free(struct ftrace_cpu *c);

/**
 * ftrace_cpu_fd - the trace_pipe_raw fd (still owned by @c), to poll for
 * the kernel's buffer_percent wake-up.
 */
int ftrace_cpu_fd(const struct ftrace_cpu *c);
unsigned ftrace_cpu_index(const struct ftrace_cpu *c);
/* Start of a read pass: the caught-up heuristic never stops on its first page. */
void ftrace_cpu_begin_pass(struct ftrace_cpu *c);
size_t ftrace_cpu_page_size(const struct ftrace_cpu *c);

/**
 * ftrace_cpu_read_page - the next whole page of this CPU, no allocation.
 * Read with read() into @buf (page_size bytes), or, when the buffer is
 * mapped, either in place in the mapping or copied into @buf as read()
 * would have returned it.
 * @ret_page: the page to parse (@buf or the mapping), valid until the next
 *   call on @c.
 * @ret_status: FTRACE_CPU_MORE, or FTRACE_CPU_EMPTY when nothing was read
 *   or the page read shows we caught up with the writer.
 * @ret_parse_status: set to a FtraceParseStatus (2 unexpected read error, 3
 *   partial page) when a read failed that way, untouched otherwise.
 * Returns: 1 with a page, 0 with none, or -errno for a read error.
 */
int ftrace_cpu_read_page(struct ftrace_cpu *c, void *buf, const uint8_t **ret_page,
			 enum ftrace_cpu_read_status *ret_status, int *ret_parse_status);

/* What a mapped reader saw: the meta page's counters as of the last swap,
 * and how the pages were handed over. */
struct ftrace_cpu_map_counters {
	uint64_t entries;       /* events in the buffer */
	uint64_t overrun;       /* events overwritten (lost) */
	uint64_t read;          /* events consumed */
	uint64_t lost_events;   /* lost at the last swap, not yet reported */
	uint64_t in_place;      /* pages parsed in the mapping */
	uint64_t copied;        /* pages copied (the writer's page, read() style) */
	uint64_t swaps;         /* reader sub-buffers swapped in */
	size_t mapped_bytes;    /* size of the mapping (kernel pages) */
};

/**
 * ftrace_cpu_mapped - whether @c reads through the ring buffer's mapping
 * (false: read()), and if so its counters in @ret (may be NULL).
 */
bool ftrace_cpu_mapped(const struct ftrace_cpu *c, struct ftrace_cpu_map_counters *ret);
