/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_fixture - record a small set of real ring-buffer pages, with the
 * tracefs texts needed to parse them again, as a test fixture.
 *
 *   bench_fixture OUTDIR [-p PAGES_PER_CPU] [-b BUFFER_KB]
 *
 * OUTDIR gets the layout of a tracefs directory, as far as the parser
 * reads one (events/header_page and events/GROUP/NAME/format), plus
 * cpuN.pages: the pages read()s of per_cpu/cpuN/trace_pipe_raw returned,
 * in order, each padded to the page size.  The events are a typed/generic
 * mix (FIXTURE_EVENTS) driven by a workload of threads with many distinct
 * names that fork, exec and rename themselves, so that bundles see comm
 * tables past 64 entries.  The readers start only after the workload has
 * overflowed the (small) buffer once, so the first page of each CPU
 * carries the kernel's missed-events flag.  None of the events carries a
 * kernel pointer.  Needs root; works in an instance of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/util.h"

extern char **environ;

static const char *const fixture_events[][2] = {
	{ "sched", "sched_switch" },
	{ "sched", "sched_waking" },
	{ "sched", "sched_wakeup_new" },
	{ "sched", "sched_process_fork" },
	{ "sched", "sched_process_exec" },
	{ "sched", "sched_process_exit" },
	{ "sched", "sched_process_free" },
	{ "sched", "sched_migrate_task" },
	{ "sched", "sched_stat_runtime" },          /* generic: __data_loc, u64 */
	{ "sched", "sched_wake_idle_without_ipi" }, /* generic: int */
	{ "task", "task_newtask" },
	{ "task", "task_rename" },
	{ "irq", "softirq_entry" },
};

#define WORKERS 96u

static unsigned arg_pages = 16;
static unsigned arg_buffer_kb = 64;

struct workload;

struct worker {
	struct workload *w;
	unsigned idx;
	pthread_t thread;
	bool started;
};

struct workload {
	atomic_bool stop;
	struct worker workers[WORKERS];
};

/* A named worker: renames itself, forks and execs, sleeps a little. */
static void *worker_main(void *arg)
{
	struct worker *k = arg;
	unsigned round = 0;

	while (!atomic_load(&k->w->stop)) {
		char *argv[] = { (char *)"true", NULL };
		char name[16];
		pid_t pid;

		(void)snprintf(name, sizeof(name), "fx-%03u-%u", k->idx, round++ % 4u);
		(void)prctl(PR_SET_NAME, name, 0, 0, 0);
		if (posix_spawnp(&pid, "true", NULL, NULL, argv, environ) == 0)
			(void)waitpid(pid, NULL, 0);
		bench_sleep_ns(200 * 1000);
	}
	return NULL;
}

static int copy_text(const char *src_dir, const char *rel, const char *out_dir)
{
	_cleanup_free_ char *text = NULL;
	char path[2 * PATH_MAX];
	_cleanup_close_ int fd = -EBADF;
	size_t n;
	int r;

	r = bench_file_read_alloc(src_dir, rel, &text, &n);
	if (r < 0)
		return r;
	(void)snprintf(path, sizeof(path), "%s/%s", out_dir, rel);
	/* mkdir -p of the parents */
	for (char *s = strchr(path + strlen(out_dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return negative_errno();
		*s = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return negative_errno();
	return write_all(fd, text, n);
}

static int parse_args(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "p:b:h")) >= 0) {
		switch (c) {
		case 'p':
			if (safe_atou32(optarg, &arg_pages) < 0 || arg_pages == 0 || arg_pages > 1024)
				return -EINVAL;
			break;
		case 'b':
			if (safe_atou32(optarg, &arg_buffer_kb) < 0 || arg_buffer_kb < 8)
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	}
	return optind + 1 == argc ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct workload *w = NULL;
	char name[64], dir[PATH_MAX], kb[32];
	const char *out;
	unsigned n_cpus, done_cpus = 0;
	size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
	unsigned *kept = NULL;
	int *in_fds = NULL, *out_fds = NULL;
	uint8_t *page = NULL;
	int r;

	if (parse_args(argc, argv) < 0) {
		fprintf(stderr, "Usage: %s OUTDIR [-p PAGES_PER_CPU] [-b BUFFER_KB]\n", argv[0]);
		return 2;
	}
	out = argv[optind];
	r = bench_tracefs_ready();
	if (r < 0) {
		fprintf(stderr, "bench_fixture: needs root and tracefs (%s)\n", strerror(-r));
		return BENCH_EXIT_SKIP;
	}
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return log_error_errno(negative_errno(), "mkdir %s: %m", out), 1;

	(void)snprintf(name, sizeof(name), "tp-fixture-%d", (int)getpid());
	r = bench_instance_create(name, dir, sizeof(dir));
	if (r < 0)
		return log_error_errno(r, "Cannot create instance %s: %m", name), 1;
	n_cpus = bench_ncpus(dir);
	w = calloc(1, sizeof(*w));
	kept = calloc(n_cpus, sizeof(*kept));
	in_fds = calloc(n_cpus, sizeof(*in_fds));
	out_fds = calloc(n_cpus, sizeof(*out_fds));
	page = malloc(page_size);
	if (!w || !kept || !in_fds || !out_fds || !page) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned cpu = 0; cpu < n_cpus; cpu++)
		in_fds[cpu] = out_fds[cpu] = -EBADF;

	r = copy_text(dir, "events/header_page", out);
	for (size_t i = 0; i < ARRAY_SIZE(fixture_events) && r >= 0; i++) {
		char rel[PATH_MAX];

		(void)snprintf(rel, sizeof(rel), "events/%s/%s/format", fixture_events[i][0],
			       fixture_events[i][1]);
		r = copy_text(dir, rel, out);
	}
	if (r < 0) {
		log_error_errno(r, "Cannot copy the formats: %m");
		goto out;
	}
	(void)snprintf(kb, sizeof(kb), "%u", arg_buffer_kb);
	r = bench_file_write(dir, "buffer_size_kb", kb, false);
	if (r >= 0)
		r = bench_file_write(dir, "trace_clock", "boot", false);
	for (size_t i = 0; i < ARRAY_SIZE(fixture_events) && r >= 0; i++) {
		char rel[PATH_MAX];

		(void)snprintf(rel, sizeof(rel), "events/%s/%s/enable", fixture_events[i][0],
			       fixture_events[i][1]);
		r = bench_file_write(dir, rel, "1", false);
	}
	for (unsigned cpu = 0; cpu < n_cpus && r >= 0; cpu++) {
		char path[PATH_MAX + 64];

		(void)snprintf(path, sizeof(path), "%s/per_cpu/cpu%u/trace_pipe_raw", dir, cpu);
		in_fds[cpu] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		(void)snprintf(path, sizeof(path), "%s/cpu%u.pages", out, cpu);
		out_fds[cpu] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (in_fds[cpu] < 0 || out_fds[cpu] < 0)
			r = negative_errno();
	}
	if (r >= 0)
		r = bench_file_write(dir, "tracing_on", "1", false);
	if (r < 0) {
		log_error_errno(r, "Cannot set up %s: %m", dir);
		goto out;
	}

	for (unsigned i = 0; i < WORKERS; i++) {
		struct worker *k = &w->workers[i];

		k->w = w;
		k->idx = i;
		k->started = pthread_create(&k->thread, NULL, worker_main, k) == 0;
	}
	/* Let the buffer wrap once before the first read. */
	bench_sleep_ns(300 * 1000 * 1000);
	while (done_cpus < n_cpus) {
		for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
			ssize_t k;

			if (kept[cpu] >= arg_pages)
				continue;
			while (kept[cpu] < arg_pages && (k = read(in_fds[cpu], page, page_size)) > 0) {
				if ((size_t)k < page_size)
					memset(page + k, 0, page_size - (size_t)k);
				r = write_all(out_fds[cpu], page, page_size);
				if (r < 0)
					goto stop;
				if (++kept[cpu] == arg_pages)
					done_cpus++;
			}
		}
		bench_sleep_ns(10 * 1000 * 1000);
	}
stop:
	atomic_store(&w->stop, true);
	for (unsigned i = 0; i < WORKERS; i++)
		if (w->workers[i].started)
			(void)pthread_join(w->workers[i].thread, NULL);
	(void)bench_file_write(dir, "tracing_on", "0", false);
	if (r >= 0)
		for (unsigned cpu = 0; cpu < n_cpus; cpu++)
			printf("cpu%u: %u pages\n", cpu, kept[cpu]);
out:
	for (unsigned cpu = 0; in_fds && cpu < n_cpus; cpu++) {
		if (in_fds[cpu] >= 0)
			(void)close(in_fds[cpu]);
		if (out_fds[cpu] >= 0)
			(void)close(out_fds[cpu]);
	}
	if (bench_instance_remove(name) < 0)
		log_warning("Could not remove %s", dir);
	free(w);
	free(kept);
	free(in_fds);
	free(out_fds);
	free(page);
	return r < 0 ? 1 : 0;
}
