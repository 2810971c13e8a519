/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * convert - trace-cmd's trace.dat (file versions 6 and 7, compressed or not)
 * into a Perfetto trace, through the same page parser the live path uses.
 *
 * libtracecmd opens the container (headers, options, instances, compressed
 * sections); the kernel pages it hands out are fed whole to
 * ftrace_parser_parse_pages(), so the output is what a live recording of
 * the same pages would hold: typed events, dense generic events,
 * compact_sched, lost_events where a page header says so, FtraceErrors for
 * pages that do not parse.
 */

#include <stdbool.h>
#include <stdint.h>

#define CONVERT_MAX_CPUS 4096

struct convert_opts {
	bool compact_sched;          /* default true */
	/* Called now and then during the conversion (may be NULL). */
	void (*progress)(void *ctx, uint64_t done, uint64_t total, uint64_t events);
	void *progress_ctx;
	/*
	 * convert_file_isolated(): the child is killed, and the file called
	 * damaged, once it has read no record for this long (a reader loop
	 * that never ends on a malformed page).  0: 10 s.
	 */
	unsigned stall_ms;
};

#define CONVERT_OPTS_DEFAULT ((struct convert_opts){ .compact_sched = true })

struct convert_cpu_summary {
	uint64_t pages;
	uint64_t events;
	uint64_t lost_pages;     /* pages flagged with missed events */
	uint64_t lost_events;    /* the counts the kernel stored */
	bool lost_unknown;       /* a flagged page had no count */
	uint64_t parse_errors;   /* FtraceErrors written */
	uint64_t skipped_pages;  /* pages libtracecmd stepped over without a record */
	uint64_t refused_pages;  /* pages whose header did not parse: no event read */
	uint64_t cut_pages;      /* pages cut short at a record that did not parse */
};

/* A page that did not parse, for the summary to say which. */
struct convert_bad_page {
	unsigned buffer;          /* 0: top level, then the instances with data */
	unsigned cpu;
	uint64_t index;           /* the page's place in the CPU's data, from 0 */
	int64_t offset;           /* where it starts in the file; -1: not known (compressed) */
	bool refused;             /* the header: the whole page; else cut short */
};

/* How many of them the summary names; the counts above have them all. */
#define CONVERT_BAD_PAGES_LISTED 16u

struct convert_summary {
	unsigned file_version;
	unsigned n_cpus;          /* of the largest buffer */
	unsigned n_buffers;       /* top level + instances with data */
	unsigned page_size;
	char trace_clock[32];
	uint64_t bytes_in;        /* page bytes read */
	uint64_t bytes_out;       /* bytes written */
	uint64_t packets;
	uint64_t events;
	uint64_t parse_errors;
	uint64_t threads;         /* names written to the ProcessTree */
	uint64_t symbols;         /* kernel symbols interned */
	uint32_t parse_errors_mask;
	bool ts_shifted;          /* the file's time offsets were applied to pages */
	uint64_t bad_pages;       /* refused + cut, all CPUs and buffers */
	unsigned n_bad_listed;
	struct convert_bad_page bad[CONVERT_BAD_PAGES_LISTED]; /* the first ones, in file order */
	char reason[160];         /* why the file was refused, when it was */
	struct convert_cpu_summary cpu[]; /* n_cpus entries, summed over buffers */
};

/**
 * convert_file - convert the trace.dat at @in_path, writing the Perfetto
 * trace to @out_fd (not closed).  Whenever the file could be opened,
 * *@ret_summary is a new summary the caller frees, failures included
 * (reason[] then says why a file was refused).
 * Returns: 0; -EBADMSG when the file converted but some pages did not parse
 * (their FtraceErrors are in the output); -EPROTONOSUPPORT for files it
 * refuses (big-endian, timestamps it cannot carry over); -ENODATA when
 * libtracecmd cannot read the file; other -errno.
 */
int convert_file(const char *in_path, int out_fd, const struct convert_opts *o,
		 struct convert_summary **ret_summary);

/**
 * convert_file_isolated - convert_file() in a child process, so that a
 * damaged file that crashes libtracecmd (whose reader trusts the file's
 * layout) ends the conversion with -EBADMSG and a reason, not the caller.
 * The summary is passed back through shared memory.  A child that reads
 * no record for opts->stall_ms (a reader looping on a damaged page) is
 * killed, with -EBADMSG and a reason too.
 */
int convert_file_isolated(const char *in_path, int out_fd, const struct convert_opts *o,
			  struct convert_summary **ret_summary);

/**
 * convert_main - `traced-probes convert IN.dat -o OUT.pftrace`.
 * @argv[0] is "convert".  Returns: the process exit status.
 */
int convert_main(int argc, char **argv);
