/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Inside the ds room only: the shared drain, the mapped per-CPU reader,
 * the options beyond events, and what a data source asks
 * of the host.
 */

/* ==== the shared drain (ftrace_drain.c) ==== */
/*
 * ftrace_drain - one tracefs directory in use (the top level or an
 * instance): its controller, its event formats, its per-CPU readers and
 * the read pass that hands every page read to the data sources attached
 * to it (ftrace_drain.c).
 *
 * A data source takes part through a struct ftrace_drain_reader embedded
 * in it, with a small table of per-pass calls: the drain never sees what a
 * data source is made of, and the data source calls the drain, never the
 * other way round except through that table.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/loop.h"
#include "probes/ftrace/parse/ftrace_parse.h"

struct ftrace_tracefs;
struct ftrace_drain;
struct ftrace_drain_reader;

/*
 * Per pass and CPU, at most this many bytes of sub-buffers (Perfetto: 256
 * pages of 4 KiB), and at least one sub-buffer.
 */
#define FTRACE_PASS_MAX_BYTES (256u * 4096u)
/*
 * Bytes of sub-buffers per batch, one bundle each (as Perfetto: 32 pages
 * of 4 KiB), at least one sub-buffer; read and parsed one at a time.
 */
#define FTRACE_BATCH_BYTES (32u * 4096u)

/*
 * What a pass asks of each started reader, in this order: pass_begin once;
 * then per CPU and batch of up to FTRACE_BATCH_BYTES of pages, batch_begin,
 * batch_page per page as soon as it is read (the page is valid during the
 * call only), batch_end; read_error whenever a read fails; pass_end once.
 */
struct ftrace_drain_reader_ops {
	/* @clock: trace_clock now; when not boot, an (ftrace, boottime) pair taken together. */
	void (*pass_begin)(struct ftrace_drain_reader *r, enum ftrace_clock clock, int64_t ftrace_ts,
			   int64_t boot_ts);
	void (*batch_begin)(struct ftrace_drain_reader *r, unsigned cpu, size_t page_size);
	void (*batch_page)(struct ftrace_drain_reader *r, const uint8_t *page);
	void (*batch_end)(struct ftrace_drain_reader *r);
	/* @status: the FtraceParseStatus of a failed read. */
	void (*read_error)(struct ftrace_drain_reader *r, int status);
	void (*pass_end)(struct ftrace_drain_reader *r);
	/* Free the data source (which detaches the reader): ftrace_host_free(). */
	void (*release)(struct ftrace_drain_reader *r);
	/*
	 * The directory's buffer resize, which a waiting reader's start was
	 * held for, is over (@why: what it was and how long it took, or how
	 * it failed; the buffer then keeps the kernel's size).
	 */
	void (*ready)(struct ftrace_drain_reader *r, const char *why);
};

/* Filled by the data source; the list link and started flag are the drain's. */
struct ftrace_drain_reader {
	const struct ftrace_drain_reader_ops *ops;
	uint32_t period_ms;             /* drain_period_ms, read while started */
	uint32_t buffer_percent;        /* drain_buffer_percent, 0: no wake-ups */
	bool started;
	bool waiting;                   /* its start waits for the resize (ops->ready) */
	struct ftrace_drain_reader *next;
};

/**
 * ftrace_drain_new - take over @tfs (freed with the drain), load its page
 * layout and size; the per-CPU readers are opened later.
 * @e: event loop for the buffer_percent wake-ups (a reference is taken).
 * @ret_error: on failure, a malloc'd reason (may be NULL).
 * Returns: 0 or -errno; @tfs is freed on failure too.
 */
int ftrace_drain_new(struct loop *e, struct ftrace_tracefs *tfs, struct ftrace_drain **ret,
		     char **ret_error);
struct ftrace_drain *ftrace_drain_free(struct ftrace_drain *d);

struct ftrace_tracefs *ftrace_drain_tracefs(const struct ftrace_drain *d);
struct ftrace_format_table *ftrace_drain_format_table(const struct ftrace_drain *d);
/* _SC_NPROCESSORS_CONF, at most FTRACE_MAX_CPUS: the size of per-CPU arrays. */
unsigned ftrace_drain_n_cpus(const struct ftrace_drain *d);

/* Attach or detach @r (not started).  Detaching a started reader stops it;
 * detaching the last one closes (and unmaps) the per-CPU readers. */
void ftrace_drain_add_reader(struct ftrace_drain *d, struct ftrace_drain_reader *r);
void ftrace_drain_remove_reader(struct ftrace_drain *d, struct ftrace_drain_reader *r);
/* The first attached reader, NULL if none. */
struct ftrace_drain_reader *ftrace_drain_first_reader(const struct ftrace_drain *d);

/**
 * ftrace_drain_open_cpus - open the per-CPU readers once (absent CPUs are
 * skipped).  Returns: 0, -ENODEV if no CPU could be opened, -errno.
 */
int ftrace_drain_open_cpus(struct ftrace_drain *d);

/**
 * ftrace_drain_close_cpus - close the per-CPU readers (no reader is
 * started any more): the kernel refuses to change current_tracer while
 * trace_pipe_raw is open, so the restore of a function_graph session
 * needs them closed first.  ftrace_drain_open_cpus() opens them again.
 */
void ftrace_drain_close_cpus(struct ftrace_drain *d);

/**
 * ftrace_drain_pass - read every CPU of @d once and feed each started
 * reader.  A CPU gives up to FTRACE_PASS_MAX_BYTES of pages, or with @flush up
 * to the whole buffer.
 * Returns: 0 or the first -errno of a read; *ret_more (if given) set when a
 * CPU hit the bound and may hold more.
 */
int ftrace_drain_pass(struct ftrace_drain *d, bool flush, bool *ret_more);

/* The shortest period_ms of the started readers, 0 if none is started. */
uint32_t ftrace_drain_period_ms(const struct ftrace_drain *d);

/* (Re)arm or stop the buffer_percent wake-ups after a start or a stop. */
void ftrace_drain_arm_wake(struct ftrace_drain *d);

/*
 * The buffer resize of the directory, off the loop thread: the first
 * attach only plans it (ftrace_tracefs_params.defer_resize); a reader
 * whose start comes before the resize is over sets ->waiting and its
 * ops->ready runs when the resize thread is done, from the loop.
 */

/* Start the planned resize's thread and watch its eventfd.  Returns: 0 or -errno. */
int ftrace_drain_resize_start(struct ftrace_drain *d);
/* A resize is planned or running: a start now would record into a buffer about to be rebuilt. */
bool ftrace_drain_resizing(const struct ftrace_drain *d);
/* Block until the resize is over, then ready the waiting readers (a caller with no loop). */
void ftrace_drain_resize_wait(struct ftrace_drain *d);
/* Stop watching the eventfd: the last detach is about to join the thread and close it. */
void ftrace_drain_resize_forget(struct ftrace_drain *d);
/* Say once, as a notice, that the kernel kept its sub-buffer size rather than @kb. */
void ftrace_note_subbuf_refused(struct ftrace_tracefs *tfs, uint32_t kb);

/* ==== mmap readers (ftrace_cpu_map.c) ==== */
/*
 * The mapped per-CPU reader (ftrace_cpu_map.c), used by ftrace_cpu.c
 * only: the page reader of one CPU either maps its buffer or read()s it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/ftrace/tracefs/ftrace_tracefs.h"

struct ftrace_cpu_map;

/* True when TRACED_PROBES_FTRACE_MMAP=1 is in the environment, until a
 * kernel without mapped ring buffers was seen. */
bool ftrace_cpu_map_enabled(void);

/*
 * ftrace_cpu_map_open - map the ring buffer behind @fd (trace_pipe_raw of
 * one CPU, stays open and owned by the caller while the map lives).
 * Returns: 0, -EOPNOTSUPP when mapping is not asked for, -ENODEV on a kernel that
 * cannot map (remembered), -EBUSY and others when this buffer refuses.
 */
int ftrace_cpu_map_open(int fd, size_t page_size, unsigned commit_size, struct ftrace_cpu_map **ret);
struct ftrace_cpu_map *ftrace_cpu_map_free(struct ftrace_cpu_map *map);

/* ftrace_mapped_next() on the live mapping. */
int ftrace_cpu_map_next(struct ftrace_cpu_map *map, uint8_t *buf, const uint8_t **ret_page,
			bool *ret_caught_up);
void ftrace_cpu_map_counters(const struct ftrace_cpu_map *map, struct ftrace_cpu_map_counters *ret);

/* ==== the options beyond events (ftrace_extra.c) ==== */
/*
 * Internal to probes/ftrace: what one linux.ftrace data source sets up
 * beyond its events (ftrace_extra.c): kprobes, the raw_syscalls
 * filter, the function graph tracer, set_event_pid, tracing_cpumask and
 * tracefs options.  Used by ftrace_ds.c only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


struct ftrace_tracefs;
struct ftrace_config;
struct ftrace_format_table;
struct ksyms;
struct ftrace_plan;

/* ---- the options beyond events (ftrace_extra.c) ---------------------------- */

struct ftrace_extra;

/**
 * ftrace_extra_check - may a data source join @t now?  One that is
 * @exclusive (tids_to_trace, tracefs_options or tracing_cpumask) needs the
 * directory to itself, and none may join one that holds it so.
 * Returns: 0 or -EBUSY with a reason.
 */
int ftrace_extra_check(bool exclusive, struct ftrace_tracefs *t, char **ret_error);

/**
 * ftrace_extra_new - take over the kprobes and function filters @plan
 * decided, with what it refused (@plan keeps the rest).
 */
int ftrace_extra_new(struct ftrace_plan *plan, struct ftrace_extra **ret);
struct ftrace_extra *ftrace_extra_free(struct ftrace_extra *x);

/**
 * ftrace_extra_setup_kprobes - create the planned kprobes (after the data
 * source attached to @t), load their formats into @table and let @parser
 * encode them as KprobeEvent, then enable them.  A probe that cannot be
 * made is reported, not fatal.
 * Returns: 0, -ENOMEM, or -errno when the undo state cannot be saved.
 */
int ftrace_extra_setup_kprobes(struct ftrace_extra *x, struct ftrace_tracefs *t,
			       struct ftrace_format_table *table, struct ftrace_parser *parser);

/**
 * ftrace_extra_apply - after the events are on: the raw_syscalls filter,
 * function graph, set_event_pid, tracing_cpumask and tracefs_options of
 * @c.  What the kernel lacks (function_graph) is reported, not fatal;
 * exclusive options that cannot be applied fail the setup, as in
 * traced_probes.
 * Returns: 0, or -errno with a reason.
 */
int ftrace_extra_apply(struct ftrace_extra *x, const struct ftrace_config *c, struct ftrace_tracefs *t,
		       char **ret_error);

/* Drop the kprobe events' references (before the data source detaches). */
void ftrace_extra_release(struct ftrace_extra *x, struct ftrace_tracefs *t);

/* failed_ftrace_events entries and log lines of the setup (owned by @x). */
size_t ftrace_extra_failed(const struct ftrace_extra *x, char *const **ret);
const char *ftrace_extra_warnings(const struct ftrace_extra *x);

/**
 * ftrace_extra_kprobe_stats - hits and misses of this data source's kprobes
 * from kprobe_profile.  Returns: 0, -ENOENT when it has none.
 */
int ftrace_extra_kprobe_stats(const struct ftrace_extra *x, struct ftrace_tracefs *t, int64_t *ret_hits,
			      int64_t *ret_misses);


/*
 * What a data source asks of the host (ftrace_host.c): the drain of a
 * tracefs directory, shared by the data sources that use it, and the
 * drain timer.  The host never calls a data source except through the
 * reader table of the drain (above).
 */


struct ftrace_drain;

/**
 * ftrace_host_get_drain - the drain of the top level (@instance_name NULL)
 * or of instances/@instance_name, opened on first use.
 * @ret_error: on failure, a malloc'd reason (may be NULL).
 * Returns: 0 or -errno.
 */
int ftrace_host_get_drain(struct ftrace_host *h, const char *instance_name, struct ftrace_drain **ret,
			  char **ret_error);

/* Free @d if no reader is attached to it any more. */
void ftrace_host_put_drain(struct ftrace_host *h, struct ftrace_drain *d);

/* Arm, re-period or stop the drain timer after a start or a stop. */
int ftrace_host_update_timer(struct ftrace_host *h);

struct ksyms;

/**
 * ftrace_host_ksyms_get - the kernel symbol map, loaded from /proc/kallsyms
 * on first use and shared by every data source that symbolizes.
 * Returns: 0 with a reference taken; -EPERM when the kernel hides the
 * addresses (kernel.kptr_restrict, no CAP_SYSLOG), -errno (no reference).
 */
int ftrace_host_ksyms_get(struct ftrace_host *h, const struct ksyms **ret);

/*
 * Drop a reference.  The map is freed with the last one unless some data
 * source asked to keep it (@retain: ksyms_mem_policy KSYMS_RETAIN).
 */
void ftrace_host_ksyms_put(struct ftrace_host *h, bool retain);

/* True the first time it is called for @what (a FTRACE_HOST_ONCE_* bit). */
enum {
	FTRACE_HOST_ONCE_ATRACE = 1u << 0,
	FTRACE_HOST_ONCE_KPTR = 1u << 1,
	FTRACE_HOST_ONCE_SUBBUF = 1u << 2,
};
bool ftrace_host_once(struct ftrace_host *h, unsigned what);
