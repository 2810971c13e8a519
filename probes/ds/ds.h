/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * ds - the one contract between the producer and every data source.
 *
 * A data source lives in its own folder under probes/ and exports one
 * `const struct ds_ops`; probes/meson.build lists their names, one word each,
 * and probes/ds/ds_registry.c expands that list into the registry.
 * The producer (and through it the daemon and `record`) knows nothing else
 * of a data source: it registers every name in the registry with the
 * service, creates instances through the ops, hands each instance a packet
 * sink bound to the instance's own trace writer, and passes notices from
 * one instance to the others of the same tracing session.
 *
 * Threading: every op runs on the producer's event loop.  Ops return 0 or
 * -errno and never log above debug, except where it says so; what a person
 * must read comes back as text for the producer to log.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protos/pbw.h"

struct loop;
struct Perfetto__Protos__DataSourceConfig;
struct Perfetto__Protos__DataSourceDescriptor;

/* Something one instance tells the other instances of its tracing session. */
enum ds_notice_kind {
	/* a read pass saw these pids/tids (new ones, and ones that renamed) */
	DS_NOTICE_PIDS,
	_DS_NOTICE_KIND_MAX,
	_DS_NOTICE_KIND_INVALID = -22,
};

struct ds_notice {
	enum ds_notice_kind kind;
	const int32_t *pids;
	size_t n_pids;
	const int32_t *renamed;
	size_t n_renamed;
};

/* What the producer does for an instance. */
struct ds_host {
	/* Route @n to the other started instances of the same tracing session. */
	void (*notice)(void *host, const struct ds_notice *n);
	/* Packets were written outside a Flush: commit them soon. */
	void (*commit_soon)(void *host);
	/*
	 * A start that returned DS_START_LATER is over (@error: 0 or the
	 * start's -errno; @why: what held it, for the log).  Called from the
	 * loop, at most once, never after the instance was freed.
	 */
	void (*started)(void *host, int error, const char *why);
	void *host;
};

/*
 * ds_ops.start: the start goes on off the loop thread (a ring-buffer
 * resize of seconds); ds_host.started reports its end, and only then is
 * StartDataSource acknowledged (the service waits for it: every data
 * source is registered with will_notify_on_start).
 */
#define DS_START_LATER 1

/* Everything an instance is given at setup; copied by the instance. */
struct ds_env {
	struct loop *event;
	void *shared;                 /* the kind's process-wide state (ops->shared_new), or NULL */
	uint64_t instance_id;         /* DataSourceInstanceID */
	uint64_t tracing_session_id;  /* TracingSessionID */
	struct pbw_sink sink;         /* where its TracePackets go: one writer, one sequence */
	struct ds_host host;
};

struct ds_cpu_report {
	uint64_t events, lost_events, pages_with_loss, overrun;
	/* read from the kernel and not written (not asked for, or filtered out) */
	uint64_t skipped_events;
	/* the kernel's read_events END - START: events + skipped_events */
	uint64_t read_events;
};

/*
 * What an instance did, for the end-of-run summary and the daemon's log.
 * A data source with a per-CPU view fills cpu[] and leaves the four totals
 * at 0: the producer adds cpu[] into them, over every CPU.
 */
struct ds_report {
	const char *name;             /* the ops' name */
	bool failed;                  /* setup failed: nothing was recorded */
	uint64_t instance_id;
	uint64_t tracing_session_id;
	uint64_t events;              /* events (or records) written */
	uint64_t lost_events;         /* counted from page headers */
	uint64_t pages_with_loss;
	uint64_t overrun;             /* kernel END - START overrun */
	uint64_t skipped_events;      /* read, not written: not this session's, or filtered */
	uint64_t packets_dropped;     /* filled by the producer: no SMB chunk was free */
	uint64_t bytes;               /* filled by the producer */
	/*
	 * Timestamps of the first and the last event written, in ns of the
	 * data source's own clock (0 when it wrote none, or keeps no such
	 * record): their difference is the span of data the trace holds.
	 */
	uint64_t first_ts, last_ts;
	unsigned n_cpus;              /* 0 for a data source with no per-CPU view; else every
				       * CPU the kernel reports (no upper bound) */
	struct ds_cpu_report *cpu;    /* [n_cpus], malloc'd, freed by ds_report_done() */
};

struct ds_ops {
	const char *name;             /* as registered with the service: "linux.ftrace" */

	/*
	 * Optional: fill the kind's own fields of the descriptor registered
	 * with the service (name, the notify flags and
	 * handles_incremental_state_clear are the producer's).  Whatever it
	 * points to must live as long as the process (static storage).
	 */
	void (*describe)(struct Perfetto__Protos__DataSourceDescriptor *d);

	/*
	 * Optional: the kind's process-wide state (the ftrace host owns the
	 * tracefs directories that every session shares), created once by
	 * whoever runs producers (daemon, record) and handed to every instance.
	 */
	int (*shared_new)(struct loop *e, void **ret);
	void *(*shared_free)(void *shared);
	/*
	 * Optional: undo what a dead process of ours left behind (kernel state);
	 * the daemon calls it once at start and for --cleanup-after-crash.
	 * *@ret_report may get a malloc'd text, one line per thing it left
	 * alone and why (a live owner, a malformed state file).  Returns: the
	 * number of things repaired, or -errno.
	 */
	int (*recover)(char **ret_report);

	/*
	 * Optional: refuse a config this kind could never record from, before
	 * anything starts (`record` asks before it starts its service): the
	 * limits of the kind's own fields, with no system access.  Returns: 0,
	 * or -errno with the reason in @err (the limit named, without the data
	 * source's name, which the caller puts in front).
	 */
	int (*check_config)(const struct Perfetto__Protos__DataSourceConfig *cfg, char *err,
			    size_t err_len);
	/*
	 * SetupDataSource.  @cfg is not kept after return.  On failure
	 * *ret_error may hold a malloc'd reason for the log.  On success
	 * *ret_warnings may hold malloc'd non-fatal problems, one per line.
	 */
	int (*setup)(const struct ds_env *env, const struct Perfetto__Protos__DataSourceConfig *cfg,
		     void **ret, char **ret_error, char **ret_warnings);
	/* StartDataSource.  Returns: 0, DS_START_LATER, or -errno. */
	int (*start)(void *ds);
	/* Flush: write what is pending and call the sink's flush(). */
	int (*flush)(void *ds);
	/*
	 * Optional: the last Flush of a session that is stopping (a Flush whose
	 * reason is "trace stop"), when the producer was asked to treat it as
	 * final (producer_set_final_flush(); `record` does, the daemon does
	 * not).  Stop producing first, then flush as flush() does, so that
	 * the end-of-trace counts describe exactly what was written.  Without
	 * it, flush() is called.
	 */
	int (*flush_final)(void *ds);
	/*
	 * Optional: that same last Flush when it is not final (the daemon:
	 * tracing stays on, the buffer may be shared).  Flush as flush() does,
	 * then write nothing more before StopDataSource, so that the counts
	 * this flush wrote are the trace's last word.  Without it, flush() is
	 * called.
	 */
	int (*flush_last)(void *ds);
	/* Optional: ClearIncrementalState (its presence is registered as
	 * handles_incremental_state_clear). */
	int (*clear_incremental)(void *ds);
	/* Optional: a notice from another instance of the session. */
	void (*on_notice)(void *ds, const struct ds_notice *n);
	/* Optional: fill @r's counts (name, ids and writer figures are the producer's). */
	int (*report)(void *ds, struct ds_report *r);
	/* StopDataSource: undo everything, free.  Accepts NULL. */
	void (*free)(void *ds);
};

/* Every data source this build serves, NULL-terminated. */
extern const struct ds_ops *const ds_registry[];

/**
 * ds_find - the registered data source named @name.
 * Returns: its ops, or NULL.
 */
const struct ds_ops *ds_find(const char *name);

/**
 * ds_shared_new_all - every registered kind's shared state, in an array
 * indexed like ds_registry (NULL where a kind has none), for producer_new().
 * Returns: 0, or the first kind's -errno (nothing is left allocated).
 */
int ds_shared_new_all(struct loop *e, void ***ret);

/**
 * ds_shared_free_all - free what ds_shared_new_all() made, once every
 * producer using it is gone.  Accepts NULL.  Returns: NULL.
 */
void **ds_shared_free_all(void **shared);

/**
 * ds_report_done - free what @r owns (the per-CPU array); @r can be reused.
 */
void ds_report_done(struct ds_report *r);
