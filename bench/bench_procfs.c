/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_procfs - what linux.process_stats costs on this machine: the full
 * /proc scan at start (with and without thread names), the on-demand lookup
 * of every task as if ftrace had just seen them all, and one ProcessStats
 * poll tick.  Optionally adds N sleeping threads first (default 10000) to
 * show how the scan scales.
 *
 *   bench_procfs [-t threads] [-r runs]
 *
 * Times are CLOCK_MONOTONIC wall time of the call; "allocs" counts malloc/
 * calloc/realloc calls made during it (this binary interposes them).  The
 * first ("cold") run of each scenario grows the reusable buffers; the warm
 * runs are what every later scan costs.  Not a test: nothing is asserted.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probes/ds/ds.h"
#include "probes/procfs/procfs.h"
#include "probes/procfs/procfs_internal.h"
#include "protos/perfetto/config/process_stats/process_stats_config.pb-c.h"
#include "protos/pbw.h"
#include "util/util.h"

/* ---- allocation counting ------------------------------------------------- */

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static atomic_ulong n_allocs;

/* Interposed for the whole process, so every allocation is seen. */
_public_ void *malloc(size_t n);
_public_ void *calloc(size_t n, size_t m);
_public_ void *realloc(void *p, size_t n);
_public_ void free(void *p);

void *malloc(size_t n)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_realloc(p, n);
}

void free(void *p)
{
	__libc_free(p);
}

/* ---- sleeping threads ---------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool quit;

static void *sleeper(void *arg)
{
	pthread_mutex_lock(&lock);
	while (!quit)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* ---- sink into one big buffer -------------------------------------------- */

struct sink_buf {
	uint8_t *buf;
	size_t cap;
	struct pbw w;
	uint64_t packets;
};

static struct pbw *sb_begin(void *userdata)
{
	struct sink_buf *s = userdata;

	/* each packet overwrites the last: only sizes matter here */
	pbw_init(&s->w, s->buf, s->cap, NULL, NULL);
	return &s->w;
}

static int sb_end(void *userdata)
{
	struct sink_buf *s = userdata;

	s->packets++;
	return pbw_overflowed(&s->w) ? -ENOSPC : 0;
}

/* ---- scenarios ----------------------------------------------------------- */

struct result {
	const char *name;
	uint64_t cold_ns, warm_ns_median, cold_allocs, warm_allocs_max;
	uint64_t tasks, processes, bytes;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

enum scenario { FULL_SCAN, FULL_SCAN_NAMES, ON_DEMAND, POLL };

static int32_t *all_tids(size_t *ret_n)
{
	struct procfs_root r;
	int32_t *tids = NULL, pid, tid;
	size_t n = 0, cap = 0;

	if (procfs_root_init(&r, "/proc") < 0)
		return NULL;
	(void)procfs_dir_open_top(&r);
	while ((pid = procfs_dir_next(&r.top)) > 0) {
		if (procfs_dir_open_task(&r, pid) < 0)
			continue;
		while ((tid = procfs_dir_next(&r.task)) > 0) {
			if (n == cap) {
				cap = cap ? cap * 2 : 4096;
				tids = realloc(tids, cap * sizeof(*tids));
				if (!tids)
					abort();
			}
			tids[n++] = tid;
		}
	}
	procfs_root_done(&r);
	*ret_n = n;
	return tids;
}

static void run(enum scenario sc, unsigned runs, struct sink_buf *sb, struct result *res)
{
	Perfetto__Protos__ProcessStatsConfig cfg = PERFETTO__PROTOS__PROCESS_STATS_CONFIG__INIT;
	struct pbw_sink sink = { .begin_packet = sb_begin, .end_packet = sb_end, .userdata = sb };
	_cleanup_free_ int32_t *tids = NULL;
	_cleanup_free_ uint64_t *ns = calloc(runs, sizeof(uint64_t));
	struct procfs_ds_stats st;
	struct procfs_ds *ds = NULL;
	size_t n_tids = 0;

	if (sc == FULL_SCAN || sc == FULL_SCAN_NAMES) {
		cfg.has_scan_all_processes_on_start = true;
		cfg.scan_all_processes_on_start = true;
	}
	if (sc == FULL_SCAN_NAMES || sc == ON_DEMAND) {
		cfg.has_record_thread_names = true;
		cfg.record_thread_names = true;
	}
	if (sc == ON_DEMAND)
		tids = all_tids(&n_tids);

	for (unsigned i = 0; i <= runs; i++) {
		unsigned long a0 = atomic_load(&n_allocs);
		uint64_t t0 = now_ns(CLOCK_MONOTONIC), dt;
		unsigned long da;

		if (i == 0) {
			/* cold: set up and start, which is where a full scan runs */
			if (procfs_ds_setup(NULL, 1, 1, &cfg, &sink, &ds) < 0)
				abort();
			procfs_ds_set_rescan_on_clear(ds, true);
			if (procfs_ds_start(ds) < 0)
				abort();
		} else if (sc == FULL_SCAN || sc == FULL_SCAN_NAMES) {
			(void)procfs_ds_clear_incremental_state(ds);
		}
		if (sc == ON_DEMAND) {
			if (i > 0)
				(void)procfs_ds_clear_incremental_state(ds);
			(void)procfs_ds_on_ftrace_pids(ds, tids, n_tids, NULL, 0);
		} else if (sc == POLL) {
			(void)procfs_ds_clear_incremental_state(ds);
			(void)procfs_stats_poll(ds);
		}
		dt = now_ns(CLOCK_MONOTONIC) - t0;
		da = atomic_load(&n_allocs) - a0;
		if (i == 0) {
			res->cold_ns = dt;
			res->cold_allocs = da;
		} else {
			ns[i - 1] = dt;
			res->warm_allocs_max = MAX(res->warm_allocs_max, da);
		}
	}
	qsort(ns, runs, sizeof(*ns), cmp_u64);
	res->warm_ns_median = ns[runs / 2];
	procfs_ds_get_stats(ds, &st);
	res->tasks = (st.threads + (sc == POLL ? st.stats_processes : 0)) / (runs + 1);
	res->processes = st.processes / (runs + 1);
	res->bytes = pbw_position(&sb->w);
	if (sc == POLL)
		res->tasks = res->processes;
	procfs_ds_free(ds);
}

static void print_row(const struct result *r)
{
	double per = r->tasks ? (double)r->warm_ns_median / 1000.0 / (double)r->tasks : 0;

	printf("%-24s %7llu %6llu %9.2f %9.2f %8.2f %6llu %6llu %9llu\n", r->name,
	       (unsigned long long)r->tasks, (unsigned long long)r->processes,
	       (double)r->cold_ns / 1e6, (double)r->warm_ns_median / 1e6, per,
	       (unsigned long long)r->cold_allocs, (unsigned long long)r->warm_allocs_max,
	       (unsigned long long)r->bytes);
}

int main(int argc, char **argv)
{
	static const char *const names[] = {
		[FULL_SCAN] = "full scan",
		[FULL_SCAN_NAMES] = "full scan + names",
		[ON_DEMAND] = "on-demand, every tid",
		[POLL] = "poll tick (stats)",
	};
	unsigned threads = 10000, runs = 5, created = 0;
	struct sink_buf sb = { .cap = 64u << 20 };
	pthread_t *tids;
	pthread_attr_t attr;
	int c;

	while ((c = getopt(argc, argv, "t:r:")) != -1) {
		uint32_t v;

		if (safe_atou32(optarg, &v) < 0) {
			fprintf(stderr, "bad number '%s'\n", optarg);
			return 2;
		}
		if (c == 't')
			threads = v;
		else if (c == 'r' && v > 0)
			runs = v;
		else
			return 2;
	}

	sb.buf = malloc(sb.cap);
	tids = calloc(threads ? threads : 1, sizeof(*tids));
	if (!sb.buf || !tids)
		return 1;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, MAX((size_t)PTHREAD_STACK_MIN, (size_t)16384));
	for (; created < threads; created++)
		if (pthread_create(&tids[created], &attr, sleeper, NULL) != 0) {
			fprintf(stderr, "stopped at %u threads: %m\n", created);
			break;
		}

	printf("procfs bench: +%u sleeping threads in this process, %u warm runs each, CLK_TCK %ld\n\n",
	       created, runs, sysconf(_SC_CLK_TCK));
	printf("%-24s %7s %6s %9s %9s %8s %6s %6s %9s\n", "scenario", "threads", "procs", "cold ms",
	       "warm ms", "us/task", "allocs", "/warm", "bytes");
	for (int s = FULL_SCAN; s <= POLL; s++) {
		struct result r = { .name = names[s] };

		run((enum scenario)s, runs, &sb, &r);
		print_row(&r);
	}
	printf("\nthreads: Thread entries per run (procs for the poll: processes with counters);\n"
	       "us/task: warm median / entries; allocs: cold run, /warm: worst warm run.\n");

	pthread_mutex_lock(&lock);
	quit = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < created; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	free(sb.buf);
	return 0;
}
