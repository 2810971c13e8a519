/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

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

#include "event/event.h"
#include "probes/ftrace/ftrace_parse.h"

struct ftrace_tracefs;
struct ftrace_drain;
struct ftrace_drain_reader;

/* Per pass and CPU, at most this many pages (Perfetto: 256). */
#define FTRACE_PASS_MAX_PAGES 256u
/* Pages per batch, one bundle each (as Perfetto); read and parsed one at a time. */
#define FTRACE_BATCH_PAGES 32u

/*
 * What a pass asks of each started reader, in this order: pass_begin once;
 * then per CPU and batch of up to FTRACE_BATCH_PAGES pages, batch_begin,
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
};

/* Filled by the data source; the list link and started flag are the drain's. */
struct ftrace_drain_reader {
	const struct ftrace_drain_reader_ops *ops;
	uint32_t period_ms;             /* drain_period_ms, read while started */
	uint32_t buffer_percent;        /* drain_buffer_percent, 0: no wake-ups */
	bool started;
	struct ftrace_drain_reader *next;
};

/**
 * ftrace_drain_new - take over @tfs (freed with the drain), load its page
 * layout and size; the per-CPU readers are opened later.
 * @e: event loop for the buffer_percent wake-ups (a reference is taken).
 * @ret_error: on failure, a malloc'd reason (may be NULL).
 * Returns: 0 or -errno; @tfs is freed on failure too.
 */
int ftrace_drain_new(struct event *e, struct ftrace_tracefs *tfs, struct ftrace_drain **ret,
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
 * reader.  A CPU gives up to FTRACE_PASS_MAX_PAGES pages, or with @flush up
 * to the whole buffer.
 * Returns: 0 or the first -errno of a read; *ret_more (if given) set when a
 * CPU hit the bound and may hold more.
 */
int ftrace_drain_pass(struct ftrace_drain *d, bool flush, bool *ret_more);

/* The shortest period_ms of the started readers, 0 if none is started. */
uint32_t ftrace_drain_period_ms(const struct ftrace_drain *d);

/* (Re)arm or stop the buffer_percent wake-ups after a start or a stop. */
void ftrace_drain_arm_wake(struct ftrace_drain *d);
