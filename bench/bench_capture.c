/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_capture - record real ring-buffer pages into memory (and a file),
 * for bench_drain's replays.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_capture.h"
#include "bench/bench_walk.h"
#include "util/util.h"

#define CAPTURE_MAGIC "TPBENCH1"

static const char *const sched_enables[] = {
	"events/sched/sched_switch/enable",
	"events/sched/sched_waking/enable",
};

struct bench_capture *bench_capture_free(struct bench_capture *c)
{
	if (!c)
		return NULL;
	free(c->pages);
	free(c->runs);
	free(c->header_page);
	free(c->fmt_switch);
	free(c->fmt_waking);
	free(c);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct bench_capture *, bench_capture_free);

static int grow(void **p, uint64_t *cap, uint64_t need, size_t elem, uint64_t max)
{
	uint64_t n = *cap ? *cap : 1024;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	n = MIN(n, max);
	if (n < need)
		return -ENOSPC;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/*
 * One drain pass, read the way the daemon reads (probes/ftrace/ds/ftrace_cpu.c):
 * every CPU until read() says it is empty, or until a page other than the
 * first comes back under half full - the writer is right behind us, and
 * reading on would only collect a trickle of nearly empty pages.
 */
static int read_pass(struct bench_capture *c, const int *fds, uint32_t pass, uint64_t max_pages,
		     unsigned commit_size)
{
	uint32_t half = (c->page_size - 8 - commit_size) / 2;

	for (uint32_t cpu = 0; cpu < c->n_cpus; cpu++) {
		uint64_t first = c->n_pages;
		int r;

		if (fds[cpu] < 0)
			continue;
		for (;;) {
			uint8_t *page;
			ssize_t k;

			r = grow((void **)&c->pages, &c->cap_pages, c->n_pages + 1, c->page_size, max_pages);
			if (r == -ENOSPC) {
				c->truncated = true;
				break;
			}
			if (r < 0)
				return r;
			page = c->pages + c->n_pages * c->page_size;
			k = read(fds[cpu], page, c->page_size);
			if (k <= 0)
				break;
			/* A short read still holds whole records: pad it. */
			if ((size_t)k < c->page_size)
				memset(page + k, 0, c->page_size - (size_t)k);
			c->n_pages++;
			if (c->n_pages - first > 1 &&
			    (bench_rd32(page + 8) & ((1u << 27) - 1)) < half)
				break;
		}
		if (c->n_pages == first)
			continue;
		r = grow((void **)&c->runs, &c->cap_runs, c->n_runs + 1, sizeof(*c->runs), UINT64_MAX);
		if (r < 0)
			return r;
		c->runs[c->n_runs++] = (struct bench_run){ .cpu = cpu, .pass = pass, .first = first,
							   .n = c->n_pages - first };
	}
	return 0;
}

static uint64_t sum_overruns(const char *dir, unsigned n_cpus)
{
	uint64_t sum = 0;

	for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
		uint64_t v;

		if (bench_cpu_stat(dir, cpu, "overrun", &v) >= 0)
			sum += v;
	}
	return sum;
}

static void sleep_until(uint64_t deadline_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline_ns / 1000000000u),
			       .tv_nsec = (long)(deadline_ns % 1000000000u) };

	(void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static int read_texts(struct bench_capture *c, const char *dir)
{
	size_t n;
	int r;

	r = bench_file_read_alloc(dir, "events/header_page", &c->header_page, &n);
	if (r >= 0)
		r = bench_file_read_alloc(dir, "events/sched/sched_switch/format", &c->fmt_switch, &n);
	if (r >= 0)
		r = bench_file_read_alloc(dir, "events/sched/sched_waking/format", &c->fmt_waking, &n);
	return r;
}

int bench_capture_record(const struct bench_capture_opts *o, struct bench_capture **ret)
{
	_cleanup_(bench_capture_freep) struct bench_capture *c = NULL;
	struct bench_workload *w = NULL;
	char kb[32];
	int *fds = NULL;
	uint64_t start, next, overruns0;
	uint32_t pass = 0;
	unsigned commit_size;
	bool reniced;
	int nice0, r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* One read() returns one sub-buffer: the instance's size (Linux 6.8+), else the page. */
	{
		char v[32];
		uint32_t sb_kb;

		if (bench_file_read(o->instance_dir, "buffer_subbuf_size_kb", v, sizeof(v)) >= 0 &&
		    safe_atou32(v, &sb_kb) >= 0 && sb_kb > 0 && sb_kb <= 1024)
			c->page_size = sb_kb * 1024;
		else
			c->page_size = (uint32_t)sysconf(_SC_PAGESIZE);
	}
	c->n_cpus = bench_ncpus(o->instance_dir);
	if (c->n_cpus == 0)
		return -ENODEV;
	r = read_texts(c, o->instance_dir);
	if (r < 0)
		return r;
	commit_size = bench_commit_size(c->header_page);
	(void)snprintf(kb, sizeof(kb), "%u", o->buffer_kb);
	r = bench_file_write(o->instance_dir, "buffer_size_kb", kb, false);
	if (r < 0)
		return r;
	/* As the daemon records: timestamps in boot time. */
	(void)bench_file_write(o->instance_dir, "trace_clock", "boot", false);

	fds = calloc(c->n_cpus, sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	for (unsigned cpu = 0; cpu < c->n_cpus; cpu++) {
		char path[PATH_MAX];

		(void)snprintf(path, sizeof(path), "%s/per_cpu/cpu%u/trace_pipe_raw", o->instance_dir,
			       cpu);
		fds[cpu] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	}

	overruns0 = sum_overruns(o->instance_dir, c->n_cpus);
	for (size_t i = 0; i < ARRAY_SIZE(sched_enables) && r >= 0; i++)
		r = bench_file_write(o->instance_dir, sched_enables[i], "1", false);
	if (r >= 0)
		r = bench_file_write(o->instance_dir, "tracing_on", "1", false);
	if (r >= 0)
		r = bench_workload_start(o->pairs, &w);
	if (r < 0)
		goto out;

	/*
	 * Only this thread: the workload keeps every CPU busy, and a starved
	 * reader would fill the capture with overrun gaps instead of events.
	 */
	errno = 0;
	nice0 = getpriority(PRIO_PROCESS, (id_t)gettid());
	reniced = errno == 0 && setpriority(PRIO_PROCESS, (id_t)gettid(), -10) == 0;
	start = next = bench_mono_ns();
	while (!*o->stop && !c->truncated && bench_mono_ns() - start < o->duration_ns) {
		r = read_pass(c, fds, pass++, o->max_pages, commit_size);
		if (r < 0)
			break;
		next += (uint64_t)o->period_ms * 1000000u;
		sleep_until(next);
	}
	(void)bench_file_write(o->instance_dir, "tracing_on", "0", false);
	bench_workload_stop(TAKE_PTR(w), &c->trips, &c->duration_ns);
	if (reniced)
		(void)setpriority(PRIO_PROCESS, (id_t)gettid(), nice0);
	/* What was written before tracing stopped is part of the capture. */
	if (r >= 0)
		r = read_pass(c, fds, pass, o->max_pages, commit_size);
	c->overruns = sum_overruns(o->instance_dir, c->n_cpus) - overruns0;
out:
	bench_workload_stop(w, NULL, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(sched_enables); i++)
		(void)bench_file_write(o->instance_dir, sched_enables[i], "0", false);
	for (unsigned cpu = 0; cpu < c->n_cpus; cpu++)
		if (fds[cpu] >= 0)
			(void)close(fds[cpu]);
	free(fds);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(c);
	return 0;
}

/* ---- file ---------------------------------------------------------------- */

struct capture_file_header {
	char magic[8];
	uint32_t page_size;
	uint32_t n_cpus;
	uint64_t n_pages;
	uint64_t n_runs;
	uint64_t overruns;
	uint64_t trips;
	uint64_t duration_ns;
	uint32_t text_len[3];
	uint32_t truncated;
};

int bench_capture_save(const struct bench_capture *c, const char *path)
{
	const char *texts[3] = { c->header_page, c->fmt_switch, c->fmt_waking };
	struct capture_file_header h = {
		.page_size = c->page_size, .n_cpus = c->n_cpus, .n_pages = c->n_pages,
		.n_runs = c->n_runs, .overruns = c->overruns, .trips = c->trips,
		.duration_ns = c->duration_ns, .truncated = c->truncated,
	};
	_cleanup_close_ int fd = -EBADF;
	int r;

	memcpy(h.magic, CAPTURE_MAGIC, 8);
	for (int i = 0; i < 3; i++)
		h.text_len[i] = (uint32_t)strlen(texts[i]);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return negative_errno();
	r = write_all(fd, &h, sizeof(h));
	for (int i = 0; i < 3 && r >= 0; i++)
		r = write_all(fd, texts[i], h.text_len[i]);
	if (r >= 0)
		r = write_all(fd, c->runs, c->n_runs * sizeof(*c->runs));
	if (r >= 0)
		r = write_all(fd, c->pages, c->n_pages * c->page_size);
	return r;
}

static int read_exact(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t k = read(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			return -EBADMSG;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

int bench_capture_load(const char *path, struct bench_capture **ret)
{
	_cleanup_(bench_capture_freep) struct bench_capture *c = NULL;
	struct capture_file_header h;
	char **texts[3];
	_cleanup_close_ int fd = -EBADF;
	int r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	r = read_exact(fd, &h, sizeof(h));
	if (r < 0)
		return r;
	if (memcmp(h.magic, CAPTURE_MAGIC, 8) != 0 || h.page_size < 64 || h.page_size > (1u << 20) ||
	    h.n_pages > (1ull << 24) || h.n_runs > h.n_pages || h.n_cpus == 0)
		return -EBADMSG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->page_size = h.page_size;
	c->n_cpus = h.n_cpus;
	c->overruns = h.overruns;
	c->trips = h.trips;
	c->duration_ns = h.duration_ns;
	c->truncated = h.truncated;
	texts[0] = &c->header_page;
	texts[1] = &c->fmt_switch;
	texts[2] = &c->fmt_waking;
	for (int i = 0; i < 3; i++) {
		if (h.text_len[i] > (1u << 20))
			return -EBADMSG;
		*texts[i] = calloc(1, h.text_len[i] + 1);
		if (!*texts[i])
			return -ENOMEM;
		r = read_exact(fd, *texts[i], h.text_len[i]);
		if (r < 0)
			return r;
	}
	c->runs = calloc(MAX(h.n_runs, 1u), sizeof(*c->runs));
	c->pages = malloc(MAX(h.n_pages, 1u) * h.page_size);
	if (!c->runs || !c->pages)
		return -ENOMEM;
	c->n_runs = c->cap_runs = h.n_runs;
	c->n_pages = c->cap_pages = h.n_pages;
	r = read_exact(fd, c->runs, h.n_runs * sizeof(*c->runs));
	if (r >= 0)
		r = read_exact(fd, c->pages, h.n_pages * h.page_size);
	if (r < 0)
		return r;
	for (uint64_t i = 0; i < c->n_runs; i++)
		if (c->runs[i].cpu >= c->n_cpus || c->runs[i].first > c->n_pages ||
		    c->runs[i].n > c->n_pages - c->runs[i].first)
			return -EBADMSG;
	*ret = TAKE_PTR(c);
	return 0;
}
