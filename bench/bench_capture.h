/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * bench_capture - real ring-buffer pages recorded once, replayed many
 * times.  A capture is the pages as read() returned them from every CPU's
 * trace_pipe_raw, grouped in runs (one CPU, one drain pass), plus the
 * tracefs texts needed to parse them again without the instance
 * (events/header_page and the two sched formats), so that a saved capture
 * replays anywhere, without root.
 */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bench_run {
	uint32_t cpu;
	uint32_t pass;          /* drain pass it was read in */
	uint64_t first;         /* index of its first page */
	uint64_t n;             /* pages */
};

struct bench_capture {
	uint32_t page_size;
	uint32_t n_cpus;
	uint8_t *pages;
	uint64_t n_pages, cap_pages;
	struct bench_run *runs;
	uint64_t n_runs, cap_runs;
	char *header_page;      /* events/header_page */
	char *fmt_switch;       /* events/sched/sched_switch/format */
	char *fmt_waking;       /* events/sched/sched_waking/format */
	uint64_t overruns;      /* what the kernel overwrote while we read */
	uint64_t trips;         /* workload round trips during the capture */
	uint64_t duration_ns;
	bool truncated;         /* stopped early: the page cap was reached */
};

struct bench_capture_opts {
	const char *instance_dir;
	unsigned pairs;         /* workload thread pairs */
	uint64_t duration_ns;
	uint64_t max_pages;
	uint32_t buffer_kb;     /* per-CPU ring buffer of the instance */
	uint32_t period_ms;     /* between drain passes, as the daemon's */
	volatile sig_atomic_t *stop;
};

/**
 * bench_capture_record - enable sched_switch and sched_waking in the
 * (existing, otherwise idle) instance, run the workload and read every
 * CPU's pages for the duration, then disable the events again.  Needs
 * root.  Returns: 0 or -errno.
 */
int bench_capture_record(const struct bench_capture_opts *o, struct bench_capture **ret);

/**
 * bench_capture_save, bench_capture_load - a capture in a file (host byte
 * order; for replays on the same machine).  Returns: 0 or -errno
 * (-EBADMSG for a file that is not a capture).
 */
int bench_capture_save(const struct bench_capture *c, const char *path);
int bench_capture_load(const char *path, struct bench_capture **ret);

struct bench_capture *bench_capture_free(struct bench_capture *c);
