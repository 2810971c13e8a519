/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What the drain benchmarks share: a context-switch workload that counts
 * its own throughput, tracefs instance helpers, CPU clocks and the one
 * result table that bench/run.sh prints.  The floor walker is in
 * bench_walk.h (inline, like the walker it is compared with).
 *
 * Benchmarks are not tests: they print figures and assert nothing.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>

#define BENCH_TRACEFS "/sys/kernel/tracing"
/* What the test harness uses for "skipped"; a benchmark that cannot run
 * without root says why and exits with it. */
#define BENCH_EXIT_SKIP 77

/* ---- workload ----------------------------------------------------------- */

struct bench_workload;

/**
 * bench_workload_start - start @pairs pairs of threads that bounce one
 * byte over two pipes as fast as they can (every round trip is two
 * wakeups and two to four context switches).
 * Returns: 0, -EINVAL for 0 pairs, -errno from pipe2/pthread_create.
 */
int bench_workload_start(unsigned pairs, struct bench_workload **ret);

/**
 * bench_workload_stop - stop and join every thread, then free.  Stores the
 * round trips completed and the wall time they took.  Accepts NULL.
 */
void bench_workload_stop(struct bench_workload *w, uint64_t *ret_trips, uint64_t *ret_ns);

/* ---- tracefs ------------------------------------------------------------- */

/**
 * bench_tracefs_ready - root and a mounted tracefs with per-CPU raw pipes.
 * Returns: 0, -EPERM when not root, -ENOENT when tracefs is missing.
 */
int bench_tracefs_ready(void);

/**
 * bench_instance_create - mkdir instances/@name; its directory goes to
 * @ret_dir.  Returns: 0 or -errno (-EEXIST if it is already there).
 */
int bench_instance_create(const char *name, char *ret_dir, size_t len);

/**
 * bench_instance_remove - disable the instance's events, turn it off and
 * rmdir it, retrying briefly while a reader still holds it.
 * Returns: 0 or -errno.
 */
int bench_instance_remove(const char *name);

/**
 * bench_file_write - write @value to @dir/@file (truncating, or appending
 * with @append).  Returns: 0 or -errno.
 */
int bench_file_write(const char *dir, const char *file, const char *value, bool append);

/**
 * bench_file_read - read @dir/@file into @buf (NUL-terminated, cut at
 * @len - 1 bytes, trailing newline removed).  Returns: 0 or -errno.
 */
int bench_file_read(const char *dir, const char *file, char *buf, size_t len);

/**
 * bench_file_read_alloc - the whole of @dir/@file in a new buffer.
 * Returns: 0 or -errno.
 */
int bench_file_read_alloc(const char *dir, const char *file, char **ret, size_t *ret_len);

/**
 * bench_cpu_stat - one "key: value" counter from per_cpu/cpu@cpu/stats of
 * the instance at @dir ("overrun", "read events", "entries"...).
 * Returns: 0 or -errno (-ENOENT for an unknown key).
 */
int bench_cpu_stat(const char *dir, unsigned cpu, const char *key, uint64_t *ret);

/**
 * bench_commit_size - the size of the page header's commit field (4 or 8)
 * from the text of events/header_page; 8 when it cannot be told.
 */
unsigned bench_commit_size(const char *header_page);

/**
 * bench_ncpus - CPUs that have a per_cpu directory under @dir (the highest
 * index present plus one).
 */
unsigned bench_ncpus(const char *dir);

/* ---- clocks -------------------------------------------------------------- */

uint64_t bench_process_cpu_ns(void);
uint64_t bench_mono_ns(void);
void bench_sleep_ns(uint64_t ns);

/**
 * bench_schedstat_ns - the on-CPU ns in the schedstat file at @path
 * (/proc/PID/schedstat, /proc/PID/task/TID/schedstat); 0 if unknown.
 */
uint64_t bench_schedstat_ns(const char *path);

/* qsort() order of uint64_t values. */
static inline int bench_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* ---- child processes ------------------------------------------------------ */

struct bench_child {
	pid_t pid;
	int in_fd;              /* its stdin, when asked for; closing it is EOF */
	int out_fd;             /* its stdout and stderr */
	uint64_t start_ns;      /* CLOCK_MONOTONIC just before fork() */
};

/**
 * bench_spawn - fork and exec @argv (PATH searched) in a process group of
 * its own, stdout and stderr into a pipe, stdin a pipe if @want_stdin else
 * /dev/null.  Returns: 0 or -errno.
 */
int bench_spawn(char *const argv[], bool want_stdin, struct bench_child *ret);

/**
 * bench_child_exited - whether the child has exited (it is not reaped).
 */
bool bench_child_exited(const struct bench_child *c);

/**
 * bench_child_signal - send @sig to the child's process group (which
 * bench_spawn made for it alone), as a terminal's Ctrl-C would.
 */
void bench_child_signal(const struct bench_child *c, int sig);

/**
 * bench_child_finish - read its output to EOF (into @ret_out, which the
 * caller frees; may be NULL), reap it and return its status and the
 * rusage of it and every descendant it waited for.  With @ret_main_ns, also
 * the CPU time of its main thread alone (from /proc/PID/schedstat of the
 * exited, not yet reaped child; 0 if unknown).  Closes the pipes.
 * Returns: 0 or -errno.
 */
int bench_child_finish(struct bench_child *c, char **ret_out, int *ret_status, struct rusage *ret_ru,
		       uint64_t *ret_main_ns);

/**
 * bench_workload_run - the workload in a forked child for @duration_ns;
 * stores its round trips per second.  Returns: 0 or -errno.
 */
int bench_workload_run(unsigned pairs, uint64_t duration_ns, double *ret_rate);

/* ---- the table ----------------------------------------------------------- */

/* Doubles < 0 and ints < 0 print as "-". */
struct bench_row {
	const char *what;
	double ns_per_event;
	double events_per_s;
	double bytes_per_event;
	const char *bytes_suffix;   /* e.g. " raw" for ring-buffer bytes */
	int64_t overruns;
	int64_t peak_rss_kb;
	double slowdown_pct;
	bool slowdown_valid;
};

#define BENCH_ROW_EMPTY(w)                                                              \
	((struct bench_row){ .what = (w), .ns_per_event = -1, .events_per_s = -1,        \
			     .bytes_per_event = -1, .overruns = -1, .peak_rss_kb = -1 })

void bench_table_header(FILE *f);
void bench_row_print(FILE *f, const struct bench_row *r);

/**
 * bench_note - one line under the table ("- " prefixed, so that run.sh can
 * collect the notes of every benchmark after the rows).
 */
void bench_note(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
