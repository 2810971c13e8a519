/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_live - the tracers side by side on a live workload.
 *
 *   bench_live [-t SECONDS] [-w PAIRS] [-r ROUNDS] [--recorder PATH] [--service PATH] [--subbuf KIB]
 *              [--perfetto DIR] [--only floor|floor-4k|compact|compact-4k|compact-mmap|plain|daemon|
 *                      daemon-4k|traced|trace-cmd|sweep|subbuf] [--no-trace-cmd] [--rows]
 *
 * The pipe ping-pong workload runs for SECONDS (default 5) alone, then under
 * each tracer in turn; each tracer is started first, the workload runs once
 * the tracer is live, and the tracer is stopped with SIGINT right after:
 *   - the floor: this binary re-executed as a minimal reader that read()s
 *     every CPU's trace_pipe_raw of an instance every 100 ms and walks the
 *     records (bench_walk.h), nothing else;
 *   - traced-probes record -i <instance>, compact_sched on, then off
 *     (--no-process-names, default 8 MiB buffers and 100 ms drains); the
 *     compact run again with TRACED_PROBES_FTRACE_MMAP=1 (the mapped ring
 *     buffers instead of read(), on kernels that map them);
 *   - traced-probes as the daemon (default settings: compact_sched, 100 ms
 *     drains, the default buffer size) plus linux.process_stats (a /proc
 *     scan at start, new pids looked up after each pass), connected to
 *     tests/tp-test-service in another process as a stand-in for traced,
 *     so that its RSS is its own: one SMB mapping, no service thread;
 *   - with --perfetto DIR (a build of Perfetto's traced, perfetto and
 *     traced_probes): Perfetto's own traced on private sockets, with the
 *     perfetto command line as the consumer and the daemon's config, and
 *     as its producer traced_probes (4 KiB pages, all it reads), then
 *     traced-probes at 4 KiB and at --subbuf KIB: the peer and us through
 *     the same service;
 *   - trace-cmd record -e sched:sched_switch -e sched:sched_waking on the
 *     top-level buffer (its default), when installed and able to run; and
 *     again with --subbuf-size KIB when its version has the option (3.3+).
 * CPU is wait4()'s rusage of the tracer (children included); for
 * traced-probes record, whose service thread stands in for traced, the
 * producer's main thread alone (schedstat of the exited child) and the
 * whole process in a note.  RSS notes split anon (ours) from file-backed,
 * and give the mapped ring buffers (the kernel's pages, Rss of the
 * trace_pipe_raw mappings in smaps) apart.  Peak RSS is ru_maxrss, events what the tracer
 * says it recorded, slowdown how much longer a round trip of the workload
 * takes than alone (mean of a run before and after).  Also the time from
 * exec to the events being enabled and to the first drain.  A note gives
 * the steady state too: the tracer's main-thread CPU during the workload
 * window over the events the kernel counts as read in it (setup and
 * teardown left out).  With -r ROUNDS the tracers take turns ROUNDS times
 * and each row is that tracer's cheapest run.  --only sweep instead records with ever smaller
 * per-CPU buffers (2 MiB down to 32 KiB) to find where the first overrun
 * appears at the workload's rate, without and with drain_buffer_percent,
 * with traced-probes' sub-buffers and with 4 KiB ones in turn at each size.
 *
 * Ring-buffer sub-buffers (Linux 6.8+): the floor, record (compact) and the
 * daemon run at 4 KiB and at --subbuf KIB (default 64, traced-probes'
 * default; passed through $TRACED_PROBES_FTRACE_SUBBUF_KB, and set on the
 * instance before the tracer starts, as its buffer size is); --only subbuf
 * runs the three at every size from 4 to 256 KiB instead.
 * Needs root; leaves tracefs as it found it.  Not a test: asserts nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_walk.h"
#include "util/util.h"
#include "util/util_varint.h"

#define DRAIN_PERIOD_NS (100u * 1000u * 1000u)
#define FLOOR_BUFFER_KB "8192"  /* traced-probes record's default -b 8m */

static volatile sig_atomic_t arg_stop;
static double arg_seconds = 5.0;
static unsigned arg_rounds = 1;
static unsigned arg_pairs = 2;
static const char *arg_recorder;
static const char *arg_service;
static const char *arg_only;
/* The sub-buffer KiB traced-probes runs are told to use (their default: 64). */
static unsigned arg_subbuf_kb = 64;
static bool arg_trace_cmd = true;
static bool arg_rows;

struct live_result {
	bool ok;
	uint64_t cpu_ns;        /* the whole process tree */
	uint64_t main_ns;       /* its main thread only (0: unknown) */
	long maxrss_kb;
	uint64_t events;
	uint64_t overruns;
	uint64_t out_bytes;     /* trace file, or raw pages for the floor */
	uint64_t window_ns;     /* the workload's run under it */
	double rate;            /* workload round trips/s under it */
	double enabled_ms, drain_ms;   /* exec -> events on, -> first read; < 0 unknown */
	long rss_kb, rss_anon_kb, rss_file_kb, rss_shmem_kb;   /* just before the stop */
	long hwm_kb;            /* VmHWM just before the stop */
	long map_kb;            /* of rss_kb: the mapped ring buffers (kernel pages) */
	uint64_t steady_ns;     /* main-thread CPU during the workload window */
	uint64_t steady_events; /* events read (kernel count) during the window */
	uint64_t commits;       /* CommitData requests the service got (daemon) */
	uint64_t session_ns;    /* every thread's CPU from the session's start to its end (via traced) */
	unsigned flushes;       /* periodic flushes seen in the trace (daemons) */
	uint64_t flush_med_ns, flush_max_ns;   /* flush_started -> all_data_sources_flushed */
	unsigned subbuf_kb;     /* the instance's sub-buffers while it recorded (0: unknown) */
};

static uint64_t rusage_ns(const struct rusage *ru)
{
	return (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000000u +
	       (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1000u;
}

static unsigned commit_size_of(const char *dir)
{
	_cleanup_free_ char *s = NULL;
	size_t n;

	if (bench_file_read_alloc(dir, "events/header_page", &s, &n) < 0)
		return 8;
	return bench_commit_size(s);
}

/* ---- the floor reader (this binary, re-executed) ------------------------ */

static void floor_drain(const int *fds, unsigned n, uint8_t *page, size_t page_size, unsigned commit_size,
			struct bench_walk *w)
{
	for (unsigned cpu = 0; cpu < n; cpu++)
		while (fds[cpu] >= 0 && read(fds[cpu], page, page_size) > 0)
			bench_walk_page(page, page_size, commit_size, w);
}

/* The instance's sub-buffer size in bytes: one read() returns one. */
static size_t subbuf_bytes_of(const char *dir)
{
	char v[32];
	uint32_t kb;

	if (bench_file_read(dir, "buffer_subbuf_size_kb", v, sizeof(v)) < 0 || safe_atou32(v, &kb) < 0 ||
	    kb == 0 || kb > 1024)
		return 4096;
	return (size_t)kb * 1024;
}

static int floor_reader_main(const char *dir)
{
	static uint8_t page[1u << 20];
	size_t page_size = subbuf_bytes_of(dir);
	unsigned n = bench_ncpus(dir), commit_size = commit_size_of(dir);
	struct bench_walk w = {};
	uint64_t next;
	int fds[1024];

	if (n == 0 || n > ARRAY_SIZE(fds))
		return 1;
	for (unsigned cpu = 0; cpu < n; cpu++) {
		char path[PATH_MAX];

		(void)snprintf(path, sizeof(path), "%s/per_cpu/cpu%u/trace_pipe_raw", dir, cpu);
		fds[cpu] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	}
	printf("ready\n");
	fflush(stdout);
	next = bench_mono_ns();
	for (;;) {
		struct pollfd pfd = { .fd = 0, .events = POLLIN };
		uint64_t now = bench_mono_ns();
		char c;

		next += DRAIN_PERIOD_NS;
		if (next > now && poll(&pfd, 1, (int)((next - now) / 1000000u)) > 0 &&
		    read(0, &c, 1) <= 0)
			break;  /* EOF on stdin: stop */
		floor_drain(fds, n, page, page_size, commit_size, &w);
	}
	floor_drain(fds, n, page, page_size, commit_size, &w);
	printf("%llu %llu %llu %zu\n", (unsigned long long)w.records, (unsigned long long)w.pages,
	       (unsigned long long)w.sink, page_size);
	return 0;
}

/* ---- helpers -------------------------------------------------------------- */

/* The first two lines of a tool's message, joined, for a one-line note. */
static const char *one_line(const char *s)
{
	static char buf[256];
	size_t n = 0;
	int lines = 0;

	for (; *s && n + 4 < sizeof(buf); s++) {
		if (*s == '\n') {
			if (++lines == 2)
				break;
			buf[n++] = ' ';
			continue;
		}
		if (*s != '\t' && !(*s == ' ' && n > 0 && buf[n - 1] == ' '))
			buf[n++] = *s;
		else if (n > 0 && buf[n - 1] != ' ')
			buf[n++] = ' ';
	}
	buf[n] = 0;
	return buf;
}

/* ---- flush latency, from the service's events in a trace -------------------- */

/* Skip one field of wire type @wt; false on a malformed one. */
static bool pb_skip(const uint8_t **p, const uint8_t *end, unsigned wt)
{
	uint64_t v;

	switch (wt) {
	case 0:
		return varint_get(p, end, &v);
	case 1:
		*p += 8;
		return *p <= end;
	case 2:
		if (!varint_get(p, end, &v) || v > (uint64_t)(end - *p))
			return false;
		*p += v;
		return true;
	case 5:
		*p += 4;
		return *p <= end;
	default:
		return false;
	}
}

/* The bytes of a length-delimited field whose key was just read; false on a cut one. */
static bool pb_submessage(const uint8_t **p, const uint8_t *end, const uint8_t **ret, const uint8_t **ret_end)
{
	uint64_t len;

	if (!varint_get(p, end, &len) || len > (uint64_t)(end - *p))
		return false;
	*ret = *p;
	*ret_end = *p + len;
	*p = *ret_end;
	return true;
}

/*
 * The flushes in @path: each TracingServiceEvent flush_started (9) paired
 * with the next all_data_sources_flushed (3), by TracePacket.timestamp (8);
 * TracePacket.service_event is field 69.  Read with a field walk of our
 * own, not decoded: the bench links no protos, and the bundles are skipped
 * unread.  The stop's final flush counts too.
 */
static void flush_latencies(const char *path, struct live_result *res)
{
	_cleanup_free_ uint64_t *lat = NULL;
	const uint8_t *p, *end;
	uint64_t started = 0;
	size_t n = 0, cap = 0, len;
	struct stat st;
	void *map;
	int fd;

	/*
	 * Mapped, not read into the heap: a 10 s trace of the workload is
	 * 50-80 MiB, and a heap that grew to hold it would stay resident in
	 * this process, and so in every tracer forked from it until its exec
	 * (their ru_maxrss, the peak RSS column).
	 */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || st.st_size <= 0) {
		(void)close(fd);
		return;
	}
	len = (size_t)st.st_size;
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	(void)close(fd);
	if (map == MAP_FAILED)
		return;
	p = map;
	end = p + len;
	while (p < end) {
		const uint8_t *pk, *pk_end;
		uint64_t key, ts = 0;
		int what = 0;           /* 9: flush started, 3: all flushed */

		if (!varint_get(&p, end, &key))
			break;
		if (key != ((1u << 3) | 2u)) {
			if (!pb_skip(&p, end, key & 7))
				break;
			continue;
		}
		if (!pb_submessage(&p, end, &pk, &pk_end))
			break;
		while (pk < pk_end) {
			uint64_t k;

			if (!varint_get(&pk, pk_end, &k))
				break;
			if (k == ((8u << 3) | 0u)) {
				if (!varint_get(&pk, pk_end, &ts))
					break;
			} else if (k == ((69u << 3) | 2u)) {
				const uint8_t *se, *se_end;

				if (!pb_submessage(&pk, pk_end, &se, &se_end))
					break;
				while (se < se_end) {
					uint64_t f, b;

					if (!varint_get(&se, se_end, &f))
						break;
					if ((f == ((9u << 3) | 0u) || f == ((3u << 3) | 0u)) && varint_get(&se, se_end, &b)) {
						if (b)
							what = (int)(f >> 3);
					} else if (!pb_skip(&se, se_end, f & 7)) {
						break;
					}
				}
			} else if (!pb_skip(&pk, pk_end, k & 7)) {
				break;
			}
		}
		if (what == 9) {
			started = ts;
		} else if (what == 3 && started && ts >= started) {
			if (array_grow((void **)&lat, &cap, n + 1, sizeof(*lat), 64) < 0)
				break;
			lat[n++] = ts - started;
			started = 0;
		}
	}
	(void)munmap(map, len);
	if (n == 0)
		return;
	qsort(lat, n, sizeof(*lat), bench_cmp_u64);
	res->flushes = (unsigned)n;
	res->flush_med_ns = lat[n / 2];
	res->flush_max_ns = lat[n - 1];
}

/* Poll a tracefs file until it reads @want; ms since the child's exec, or -1. */
static double wait_file(const struct bench_child *ch, const char *dir, const char *file,
			const char *want, double timeout_s)
{
	uint64_t deadline = bench_mono_ns() + (uint64_t)(timeout_s * 1e9);

	while (!arg_stop && bench_mono_ns() < deadline && !bench_child_exited(ch)) {
		char v[64];

		if (bench_file_read(dir, file, v, sizeof(v)) >= 0 && strcmp(v, want) == 0)
			return (double)(bench_mono_ns() - ch->start_ns) / 1e6;
		bench_sleep_ns(200 * 1000);
	}
	return -1;
}

/* Until any CPU's "read events" moves: the tracer's first drain. */
static double wait_first_read(const struct bench_child *ch, const char *dir, unsigned n_cpus,
			      double timeout_s)
{
	uint64_t deadline = bench_mono_ns() + (uint64_t)(timeout_s * 1e9);

	while (!arg_stop && bench_mono_ns() < deadline && !bench_child_exited(ch)) {
		for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
			uint64_t v;

			if (bench_cpu_stat(dir, cpu, "read events", &v) >= 0 && v > 0)
				return (double)(bench_mono_ns() - ch->start_ns) / 1e6;
		}
		bench_sleep_ns(200 * 1000);
	}
	return -1;
}

static uint64_t sum_stat(const char *dir, unsigned n_cpus, const char *key)
{
	uint64_t sum = 0;

	for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
		uint64_t v;

		if (bench_cpu_stat(dir, cpu, key, &v) >= 0)
			sum += v;
	}
	return sum;
}

static int enable_sched(const char *dir, const char *v)
{
	int r = bench_file_write(dir, "events/sched/sched_switch/enable", v, false);

	if (r >= 0)
		r = bench_file_write(dir, "events/sched/sched_waking/enable", v, false);
	return r;
}

/* Run the workload under a live tracer, then stop the tracer with SIGINT. */
/* VmRSS and its parts, from /proc/PID/status, while the tracer still runs. */
static void read_rss(pid_t pid, struct live_result *res)
{
	static const char *const keys[] = { "VmRSS:", "RssAnon:", "RssFile:", "RssShmem:", "VmHWM:" };
	long *vals[] = { &res->rss_kb, &res->rss_anon_kb, &res->rss_file_kb, &res->rss_shmem_kb,
			 &res->hwm_kb };
	char path[64], line[256];
	FILE *f;

	(void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
			if (strncmp(line, keys[i], strlen(keys[i])) == 0)
				(void)sscanf(line + strlen(keys[i]), "%ld", vals[i]);
	fclose(f);

	/*
	 * The mapped ring buffers are the kernel's pages, counted in RssFile:
	 * the Rss of the trace_pipe_raw mappings in smaps, to report apart.
	 */
	(void)snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	{
		bool in_map = false;
		long kb;

		res->map_kb = 0;
		/* A mapping's header line names the file; its Rss line follows. */
		while (fgets(line, sizeof(line), f)) {
			if (strstr(line, "trace_pipe_raw")) {
				in_map = true;
			} else if (in_map && sscanf(line, "Rss: %ld kB", &kb) == 1) {
				res->map_kb += kb;
				in_map = false;
			}
		}
	}
	fclose(f);
}

/* On-CPU ns of a running process's main thread (0 if unknown). */
static uint64_t thread_ns(pid_t pid)
{
	char path[64];

	(void)snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)pid);
	return bench_schedstat_ns(path);
}

/*
 * On-CPU ns of every thread of a running process (0 if unknown): what a
 * daemon that is already running spends on one session, its start-up left
 * out.
 */
static uint64_t process_ns(pid_t pid)
{
	char path[64];
	struct dirent *de;
	uint64_t sum = 0;
	DIR *d;

	(void)snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char p2[320];

		if (de->d_name[0] == '.')
			continue;
		(void)snprintf(p2, sizeof(p2), "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
		sum += bench_schedstat_ns(p2);
	}
	closedir(d);
	return sum;
}

/* Where the steady state is measured: @dir's read events and @pid's main thread. */
struct steady {
	const char *dir;        /* NULL: not measured */
	unsigned n_cpus;
	uint64_t ns0, events0;
};

static uint64_t sum_stat(const char *dir, unsigned n_cpus, const char *key);

static void steady_begin(struct steady *s, pid_t pid)
{
	if (!s->dir)
		return;
	s->ns0 = thread_ns(pid);
	s->events0 = sum_stat(s->dir, s->n_cpus, "read events");
}

/*
 * The tracer reads every drain period: wait for one more read after the
 * workload so that its events are in the count, then take the deltas.
 */
static void steady_end(struct steady *s, pid_t pid, struct live_result *res)
{
	uint64_t ns, ev;

	if (!s->dir || s->ns0 == 0)
		return;
	bench_sleep_ns(DRAIN_PERIOD_NS + DRAIN_PERIOD_NS / 2);
	ev = sum_stat(s->dir, s->n_cpus, "read events");
	ns = thread_ns(pid);
	res->steady_ns = ns > s->ns0 ? ns - s->ns0 : 0;
	res->steady_events = ev > s->events0 ? ev - s->events0 : 0;
}

/*
 * Run the workload under a live tracer (unless @run is false: the tracer
 * did not come up), then stop the tracer: EOF on its stdin for the floor
 * reader, SIGINT for the others.  @st (may be NULL) measures the steady
 * state.
 */
static int workload_then_stop(struct bench_child *ch, bool run, struct live_result *res,
			      char **ret_out, int *ret_status, struct steady *st)
{
	struct rusage ru = {};
	uint64_t start = bench_mono_ns();
	int r = 0;

	if (st)
		steady_begin(st, ch->pid);
	if (run && !arg_stop)
		r = bench_workload_run(arg_pairs, (uint64_t)(arg_seconds * 1e9), &res->rate);
	if (st && run && r >= 0)
		steady_end(st, ch->pid, res);
	read_rss(ch->pid, res);
	if (ch->in_fd >= 0) {
		(void)close(ch->in_fd);     /* the floor reader stops on EOF */
		ch->in_fd = -EBADF;
	} else {
		bench_child_signal(ch, SIGINT);
	}
	res->window_ns = bench_mono_ns() - start;
	if (bench_child_finish(ch, ret_out, ret_status, &ru, &res->main_ns) >= 0) {
		res->cpu_ns = rusage_ns(&ru);
		res->maxrss_kb = ru.ru_maxrss;
	}
	return r;
}

/* ---- scenarios ------------------------------------------------------------ */

/*
 * The sub-buffer size traced-probes takes for @want_kb on a buffer of
 * @buffer_kb per CPU (ftrace_tracefs_subbuf_kb(): a power of two from 4
 * KiB, at most a 32nd of the buffer); 0: the kernel's, left as it is (4).
 */
static unsigned subbuf_for(unsigned want_kb, unsigned buffer_kb)
{
	unsigned kb = 4;

	while (want_kb && kb * 2 <= want_kb && kb * 2 <= 512 && kb * 2 <= buffer_kb / 32)
		kb *= 2;
	return kb;
}

/* What the traced-probes runs are told to use: $TRACED_PROBES_FTRACE_SUBBUF_KB. */
static void set_subbuf_env(unsigned kb)
{
	char v[16];

	(void)snprintf(v, sizeof(v), "%u", kb);
	(void)setenv("TRACED_PROBES_FTRACE_SUBBUF_KB", v, 1);
	arg_subbuf_kb = kb;
}

/*
 * The instance gets the buffer size the tracer will ask for (@kb, 0: the
 * default 8 MiB) before the tracer starts, as the floor's does: the
 * kernel allocating and freeing the ring buffer is not a cost per event,
 * and the floor is not charged for it either.
 */
static void presize(const char *dir, unsigned kb)
{
	char v[16];

	/* The sub-buffers first: the kernel sizes the buffer in them. */
	(void)snprintf(v, sizeof(v), "%u", subbuf_for(arg_subbuf_kb, kb ? kb : 8192u));
	(void)bench_file_write(dir, "buffer_subbuf_size_kb", v, false);
	(void)snprintf(v, sizeof(v), "%u", kb ? kb : 8192u);
	(void)bench_file_write(dir, "buffer_size_kb", v, false);
}

static int run_floor(const char *self, unsigned subbuf_kb, struct live_result *res)
{
	char name[64], dir[PATH_MAX];
	_cleanup_free_ char *out = NULL;
	struct bench_child ch = { .in_fd = -EBADF, .out_fd = -EBADF };
	unsigned long long records = 0, pages = 0, sink;
	size_t page_size = 4096;
	unsigned n_cpus;
	char line[16];
	int r, status = 0;

	*res = (struct live_result){ .enabled_ms = -1, .drain_ms = -1 };
	(void)snprintf(name, sizeof(name), "tp-bench-live-%d", (int)getpid());
	r = bench_instance_create(name, dir, sizeof(dir));
	if (r < 0)
		return log_error_errno(r, "Cannot create instance %s: %m", name);
	n_cpus = bench_ncpus(dir);
	if (subbuf_kb != 4) {
		char v[16];

		(void)snprintf(v, sizeof(v), "%u", subbuf_kb);
		/* Kernels before 6.8 have 4 KiB only: no such run. */
		r = bench_file_write(dir, "buffer_subbuf_size_kb", v, false);
		if (r < 0) {
			(void)bench_instance_remove(name);
			return r;
		}
	}
	r = bench_file_write(dir, "buffer_size_kb", FLOOR_BUFFER_KB, false);
	/* The clock traced-probes (and Perfetto) pick: the kernel's cost per
	 * event depends on it. */
	if (r >= 0)
		(void)bench_file_write(dir, "trace_clock", "boot", false);
	if (r >= 0)
		r = enable_sched(dir, "1");
	if (r >= 0) {
		char *argv[] = { (char *)self, (char *)"--floor-reader", dir, NULL };

		r = bench_spawn(argv, /* want_stdin= */ true, &ch);
	}
	/* "ready": its pipes are open and the pass timer runs. */
	if (r >= 0 && (read(ch.out_fd, line, 6) != 6 || memcmp(line, "ready\n", 6) != 0))
		r = -EIO;
	if (ch.pid > 0) {
		struct steady st = { .dir = dir, .n_cpus = n_cpus };

		(void)workload_then_stop(&ch, /* run= */ r >= 0, res, &out, &status, &st);
	}
	if (r >= 0 && out && sscanf(out, "%llu %llu %llu %zu", &records, &pages, &sink, &page_size) >= 2) {
		res->ok = true;
		res->events = records;
		res->out_bytes = pages * page_size;
		res->overruns = sum_stat(dir, n_cpus, "overrun");
	}
	(void)enable_sched(dir, "0");
	if (bench_instance_remove(name) < 0)
		log_warning("Could not remove %s", dir);
	return r;
}

/* "  ftrace: N events, ..." and the per-CPU "cpu events skipped read lost pages" rows. */
static void parse_recorder_summary(const char *out, struct live_result *res)
{
	const char *p = strstr(out, "ftrace: ");
	bool in_table = false;

	if (!p || sscanf(p, "ftrace: %" SCNu64 " events", &res->events) != 1)
		return;
	for (const char *line = p; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		unsigned cpu;
		unsigned long long ev, skipped, rd, lost;

		if (strstr(line, "lost(kernel)")) {
			in_table = true;
			continue;
		}
		/* cpu, events, skipped, read(kernel), lost(kernel), pages-with-loss */
		if (in_table && sscanf(line, " %u %llu %llu %llu %llu", &cpu, &ev, &skipped, &rd, &lost) == 5)
			res->overruns += lost;
		else if (in_table)
			in_table = false;
	}
	res->ok = true;
}

/* A recording through a TraceConfig instead of the command line flags. */
struct sweep_cfg {
	unsigned buffer_kb;
	unsigned drain_buffer_percent;  /* 0: no wake-ups */
};

static int run_recorder_with(bool compact, const struct sweep_cfg *sc, struct live_result *res,
			     FILE *notes);

static int run_recorder(bool compact, struct live_result *res, FILE *notes)
{
	return run_recorder_with(compact, NULL, res, notes);
}

/* The live configs' common start: sched_switch and sched_waking in the instance named by a %s. */
#define SCHED_CONFIG_HEAD                                                               \
	"buffers { size_kb: 65536 fill_policy: DISCARD }\n"                             \
	"data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"             \
	"  ftrace_config { ftrace_events: \"sched/sched_switch\"\n"                      \
	"    ftrace_events: \"sched/sched_waking\" instance_name: \"%s\""

static int write_sweep_cfg(const char *path, const char *instance, const struct sweep_cfg *sc)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return negative_errno();
	fprintf(f, SCHED_CONFIG_HEAD "\n"
		   "    compact_sched { enabled: true } drain_period_ms: 100 buffer_size_kb: %u\n",
		instance, sc->buffer_kb);
	if (sc->drain_buffer_percent)
		fprintf(f, "    drain_buffer_percent: %u\n", sc->drain_buffer_percent);
	fprintf(f, "} } }\nduration_ms: 600000\n");
	return fclose(f) == 0 ? 0 : negative_errno();
}

static int run_recorder_with(bool compact, const struct sweep_cfg *sc, struct live_result *res,
			     FILE *notes)
{
	char name[64], dir[PATH_MAX], path[PATH_MAX], cfg[PATH_MAX];
	_cleanup_free_ char *out = NULL;
	struct bench_child ch = { .in_fd = -EBADF, .out_fd = -EBADF };
	struct stat st;
	unsigned n_cpus;
	int r, status = 0;

	*res = (struct live_result){ .enabled_ms = -1, .drain_ms = -1 };
	(void)snprintf(name, sizeof(name), "tp-bench-live-%d", (int)getpid());
	(void)snprintf(path, sizeof(path), "/tmp/tp-bench-%d.pftrace", (int)getpid());
	r = bench_instance_create(name, dir, sizeof(dir));
	if (r < 0)
		return log_error_errno(r, "Cannot create instance %s: %m", name);
	n_cpus = bench_ncpus(dir);
	presize(dir, sc ? sc->buffer_kb : 0);
	(void)snprintf(cfg, sizeof(cfg), "/tmp/tp-bench-%d.pbtxt", (int)getpid());
	if (sc) {
		char *argv[] = { (char *)arg_recorder, (char *)"record", (char *)"-o", path,
				 (char *)"-c", cfg, NULL };

		r = write_sweep_cfg(cfg, name, sc);
		if (r >= 0)
			r = bench_spawn(argv, /* want_stdin= */ false, &ch);
	} else {
		char *argv[] = { (char *)arg_recorder, (char *)"record", (char *)"-o", path,
				 (char *)"-t", (char *)"600s", (char *)"--no-process-names",
				 (char *)"-i", name,
				 (char *)(compact ? "--compact-sched" : "--no-compact-sched"), NULL };

		r = bench_spawn(argv, /* want_stdin= */ false, &ch);
	}
	if (r >= 0) {
		struct steady sst = { .dir = dir, .n_cpus = n_cpus };

		res->enabled_ms = wait_file(&ch, dir, "events/sched/sched_switch/enable", "1", 10);
		if (res->enabled_ms >= 0)
			res->drain_ms = wait_first_read(&ch, dir, n_cpus, 1);
		/* what the recorder chose for this buffer, once it has read (it may cap what it was asked) */
		if (res->drain_ms >= 0)
			res->subbuf_kb = (unsigned)(subbuf_bytes_of(dir) / 1024);
		(void)workload_then_stop(&ch, res->enabled_ms >= 0, res, &out, &status, &sst);
		if (out)
			parse_recorder_summary(out, res);
		if (!res->ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			bench_note(notes, "traced-probes record (%s) failed (status 0x%x): %s",
				   compact ? "compact" : "plain", status, one_line(out ? out : ""));
			res->ok = false;
		}
		if (stat(path, &st) == 0)
			res->out_bytes = (uint64_t)st.st_size;
		(void)unlink(path);
	}
	if (sc)
		(void)unlink(cfg);
	if (bench_instance_remove(name) < 0)
		log_warning("Could not remove %s", dir);
	return r;
}

/* ---- where the first overrun appears -------------------------------------- */

/* One sub-buffer setting's sweep: its note line, and how far it got. */
struct sweep_line {
	char text[1024];
	int k;
	bool loss_seen, done;
	unsigned smallest_clean;
};

static void sweep_take(struct sweep_line *l, unsigned kb, const struct live_result *res, bool last)
{
	double rate = res->window_ns ? (double)(res->events + res->overruns) * 1e9 / (double)res->window_ns : 0;

	if (l->k > 0 && (size_t)l->k < sizeof(l->text))
		l->k += snprintf(l->text + l->k, sizeof(l->text) - (size_t)l->k,
				 " %u KiB/CPU (sub-buffers %u KiB) %.2f M ev/s lost %" PRIu64 " (%.2f %%);", kb,
				 res->subbuf_kb, rate / 1e6, res->overruns,
				 res->events + res->overruns ?
					 100.0 * (double)res->overruns / (double)(res->events + res->overruns) : 0.0);
	if (res->overruns == 0 && !l->loss_seen)
		l->smallest_clean = kb;
	else
		l->loss_seen = true;
	/* past 5 % lost: smaller buffers only lose more */
	if (res->overruns > 0 && !last && res->overruns * 20 > res->events)
		l->done = true;
}

static void sweep_note(FILE *out, struct sweep_line *l, bool wake)
{
	if (l->k > 0 && (size_t)l->k < sizeof(l->text) && l->text[l->k - 1] == ';')
		l->text[l->k - 1] = 0;
	bench_note(out, "%s", l->text);
	if (l->smallest_clean)
		bench_note(out, "smallest per-CPU buffer with no overrun at this machine's top rate%s: %u KiB",
			   wake ? " (with wake-ups)" : "", l->smallest_clean);
}

/*
 * The workload runs at the highest rate this machine reaches; what moves
 * the first overrun is how much the kernel may buffer between two drains.
 * Halve the per-CPU buffer until events are lost, with 100 ms drain
 * periods, without and with drain_buffer_percent wake-ups, once with
 * traced-probes' sub-buffers (@chosen KiB asked; it takes smaller ones for
 * a small buffer) and once with 4 KiB ones at each size in turn, so that
 * both see the machine in the same state (its rate drifts from one minute
 * to the next, and with it where the first loss falls).
 */
static void run_sweep(FILE *out, unsigned chosen)
{
	static const unsigned sizes_kb[] = { 2048, 1024, 512, 256, 128, 64, 32 };
	const unsigned subbufs[2] = { chosen, 4 };

	for (int wake = 0; wake <= 1; wake++) {
		struct sweep_line lines[2] = {};

		for (int j = 0; j < 2; j++)
			lines[j].k = snprintf(lines[j].text, sizeof(lines[j].text),
					      "overrun sweep%s, drain every 100 ms%s:",
					      j == 0 ? "" : " with 4 KiB sub-buffers",
					      wake ? " + drain_buffer_percent 50" : "");
		for (size_t i = 0; i < ARRAY_SIZE(sizes_kb) && !arg_stop; i++) {
			bool any = false;

			for (int j = 0; j < 2 && !arg_stop; j++) {
				const struct sweep_cfg sc = { sizes_kb[i], wake ? 50 : 0 };
				struct live_result res;

				if (lines[j].done)
					continue;
				set_subbuf_env(subbufs[j]);
				(void)run_recorder_with(true, &sc, &res, out);
				if (!res.ok) {
					lines[j].done = true;
					continue;
				}
				sweep_take(&lines[j], sizes_kb[i], &res, i + 1 == ARRAY_SIZE(sizes_kb));
				any = true;
			}
			if (!any)
				break;
		}
		for (int j = 0; j < 2; j++)
			sweep_note(out, &lines[j], wake);
	}
	set_subbuf_env(chosen);
}

/* ---- the daemon beside a service in another process ----------------------- */

/* Lines of the child's output until one is @want, within @timeout_s. */
static int wait_line(struct bench_child *ch, const char *want, double timeout_s)
{
	uint64_t deadline = bench_mono_ns() + (uint64_t)(timeout_s * 1e9);
	char buf[4096];
	size_t len = 0;

	while (!arg_stop && bench_mono_ns() < deadline) {
		struct pollfd pfd = { .fd = ch->out_fd, .events = POLLIN };
		ssize_t k;
		char *nl;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		k = read(ch->out_fd, buf + len, sizeof(buf) - 1 - len);
		if (k <= 0)
			return -EIO;
		len += (size_t)k;
		buf[len] = 0;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			if (strcmp(buf, want) == 0)
				return 0;
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
		if (len == sizeof(buf) - 1)
			len = 0;
	}
	return -ETIMEDOUT;
}

/*
 * A daemon recording @dir: wait until its events are on (while @watch,
 * the process that starts the session, runs), run the workload, and take
 * the steady state, RSS, events and overruns before the stop puts the
 * instance back (and resets its counters).
 */
static int measure_daemon(const struct bench_child *watch, const struct bench_child *d, const char *dir,
			  unsigned n_cpus, struct live_result *res)
{
	struct steady st = { .dir = dir, .n_cpus = n_cpus };
	int r = 0;

	res->enabled_ms = wait_file(watch, dir, "events/sched/sched_switch/enable", "1", 10);
	if (res->enabled_ms >= 0)
		res->drain_ms = wait_first_read(watch, dir, n_cpus, 1);
	if (res->enabled_ms < 0)
		r = -ETIMEDOUT;
	if (r >= 0 && arg_stop)
		r = -EINTR;     /* no workload ran: not a run to keep */
	steady_begin(&st, d->pid);
	if (r >= 0) {
		uint64_t start = bench_mono_ns();

		r = bench_workload_run(arg_pairs, (uint64_t)(arg_seconds * 1e9), &res->rate);
		if (r >= 0)
			steady_end(&st, d->pid, res);
		read_rss(d->pid, res);
		res->window_ns = bench_mono_ns() - start;
	}
	res->events = sum_stat(dir, n_cpus, "read events");
	res->overruns = sum_stat(dir, n_cpus, "overrun");
	return r;
}

/* SIGTERM, then its CPU (wait4's rusage) and peak RSS; cpu_ns stays 0 if it cannot be reaped. */
static void stop_daemon(struct bench_child *d, char **ret_out, struct live_result *res)
{
	struct rusage ru = {};

	if (d->pid <= 0)
		return;
	bench_child_signal(d, SIGTERM);
	if (bench_child_finish(d, ret_out, NULL, &ru, &res->main_ns) >= 0) {
		res->cpu_ns = rusage_ns(&ru);
		res->maxrss_kb = ru.ru_maxrss;
	}
}

/*
 * The daemons' config: default settings, only the events and the instance
 * named.  With process names, as a sched trace is usually taken: the /proc
 * scan and the lookups of new pids after each pass are part of the cost.
 * A flush every second, as a long trace is usually taken: the latency of
 * each (the service's flush_started to all_data_sources_flushed) is the
 * cost of a sub-buffer the writer is still on, copied out event by event.
 */
#define DAEMON_FLUSH_PERIOD_MS 1000u

static int write_daemon_cfg(const char *path, const char *instance)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return negative_errno();
	fprintf(f, SCHED_CONFIG_HEAD " } } }\n"
		   "data_sources { config { name: \"linux.process_stats\" target_buffer: 0\n"
		   "  process_stats_config { scan_all_processes_on_start: true } } }\n"
		   "flush_period_ms: %u\n"
		   "duration_ms: 600000\n", instance, DAEMON_FLUSH_PERIOD_MS);
	return fclose(f) == 0 ? 0 : negative_errno();
}

/*
 * The instance @name for a daemon run, presized like the floor's, and the
 * config naming it in @cfg.  @dir stays empty when the instance could not
 * be made (nothing to remove then).
 */
static int daemon_instance(const char *name, const char *cfg, char *dir, size_t len, unsigned *ret_n_cpus)
{
	int r;

	r = bench_instance_create(name, dir, len);
	if (r < 0) {
		dir[0] = 0;
		return log_error_errno(r, "Cannot create instance %s: %m", name);
	}
	*ret_n_cpus = bench_ncpus(dir);
	presize(dir, 0);
	return write_daemon_cfg(cfg, name);
}

/*
 * traced-probes as a daemon with default settings, its service in another
 * process: the RSS and CPU are the daemon's own.  Events are what the
 * kernel counts as read from the instance.
 */
static int run_daemon(const char *service, struct live_result *res, FILE *notes)
{
	char name[64], dir[PATH_MAX], sock[PATH_MAX], cfg[PATH_MAX], out_path[PATH_MAX];
	_cleanup_free_ char *svc_out = NULL, *d_out = NULL;
	struct bench_child svc = { .in_fd = -EBADF, .out_fd = -EBADF };
	struct bench_child d = { .in_fd = -EBADF, .out_fd = -EBADF };
	struct stat stb;
	unsigned n_cpus;
	int r, status = 0;

	*res = (struct live_result){ .enabled_ms = -1, .drain_ms = -1 };
	(void)snprintf(name, sizeof(name), "tp-bench-live-%d", (int)getpid());
	(void)snprintf(sock, sizeof(sock), "/tmp/tp-bench-%d.sock", (int)getpid());
	(void)snprintf(cfg, sizeof(cfg), "/tmp/tp-bench-%d.pbtxt", (int)getpid());
	(void)snprintf(out_path, sizeof(out_path), "/tmp/tp-bench-%d-daemon.pftrace", (int)getpid());
	r = daemon_instance(name, cfg, dir, sizeof(dir), &n_cpus);
	if (r < 0 && !dir[0])
		return r;
	if (r < 0)
		goto out;
	{
		char *argv[] = { (char *)service, (char *)"-s", sock, (char *)"-c", cfg, (char *)"--txt",
				 (char *)"-o", out_path, NULL };

		r = bench_spawn(argv, /* want_stdin= */ false, &svc);
	}
	if (r >= 0)
		r = wait_line(&svc, "ready", 10);
	if (r >= 0) {
		char *argv[] = { (char *)arg_recorder, NULL };

		(void)setenv("PERFETTO_PRODUCER_SOCK_NAME", sock, 1);
		r = bench_spawn(argv, /* want_stdin= */ false, &d);
		(void)unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
	}
	if (r >= 0)
		r = measure_daemon(&d, &d, dir, n_cpus, res);
	/* The service stops the session (the daemon flushes, restores tracefs)
	 * and writes the trace; then the daemon goes. */
	if (svc.pid > 0) {
		bench_child_signal(&svc, SIGINT);
		(void)bench_child_finish(&svc, &svc_out, &status, NULL, NULL);
	}
	stop_daemon(&d, &d_out, res);
	if (stat(out_path, &stb) == 0)
		res->out_bytes = (uint64_t)stb.st_size;
	flush_latencies(out_path, res);
	if (svc_out) {
		const char *p = strstr(svc_out, " bytes, ");

		if (p)
			(void)sscanf(p, " bytes, %" SCNu64 " commits", &res->commits);
	}
	res->ok = r >= 0 && res->events > 0 && res->cpu_ns > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (!res->ok) {
		bench_note(notes, "traced-probes daemon failed (%s; service status 0x%x): service: %s",
			   r < 0 ? strerror(-r) : "no trace", status, one_line(svc_out ? svc_out : ""));
		bench_note(notes, "traced-probes daemon output: %s", one_line(d_out ? d_out : ""));
	}
out:
	(void)unlink(cfg);
	(void)unlink(out_path);
	if (bench_instance_remove(name) < 0)
		log_warning("Could not remove %s", dir);
	return r;
}

/* ---- trace-cmd ------------------------------------------------------------- */

/* What trace-cmd record may leave changed on the top level, to put back. */
static const char *const top_files[] = {
	BENCH_TRACEFS "/tracing_on",
	/* before buffer_size_kb: the kernel keeps a buffer's bytes across a sub-buffer change */
	BENCH_TRACEFS "/buffer_subbuf_size_kb",
	BENCH_TRACEFS "/buffer_size_kb",
	BENCH_TRACEFS "/current_tracer",
	BENCH_TRACEFS "/options/function-trace",
	BENCH_TRACEFS "/set_event",
	BENCH_TRACEFS "/set_event_pid",
	BENCH_TRACEFS "/tracing_cpumask",
	"/proc/sys/kernel/kptr_restrict",
};

struct top_state {
	char *v[ARRAY_SIZE(top_files)];
};

static void top_state_done(struct top_state *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(top_files); i++)
		free(s->v[i]);
}

static void top_state_save(struct top_state *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(top_files); i++) {
		size_t n;

		if (bench_file_read_alloc("/", top_files[i] + 1, &s->v[i], &n) < 0)
			s->v[i] = NULL;
	}
}

/* Write back every file that differs; returns how many had to be. */
static unsigned top_state_restore(const struct top_state *s, FILE *notes)
{
	unsigned fixed = 0;

	for (size_t i = 0; i < ARRAY_SIZE(top_files); i++) {
		_cleanup_free_ char *now = NULL;
		size_t n;

		if (!s->v[i] || bench_file_read_alloc("/", top_files[i] + 1, &now, &n) < 0)
			continue;
		if (strcmp(now, s->v[i]) == 0)
			continue;
		if (strcmp(top_files[i], BENCH_TRACEFS "/set_event") == 0) {
			/* One event per line: clear, then append each back. */
			_cleanup_free_ char *copy = strdup(s->v[i]);
			char *save = NULL;

			(void)bench_file_write("/", top_files[i] + 1, "", false);
			for (char *tok = copy ? strtok_r(copy, "\n", &save) : NULL; tok;
			     tok = strtok_r(NULL, "\n", &save))
				(void)bench_file_write("/", top_files[i] + 1, tok, true);
		} else if (strcmp(top_files[i], BENCH_TRACEFS "/buffer_size_kb") == 0 &&
			   strchr(s->v[i], '(')) {
			continue;   /* "7 (expanded: 1408)": never resized, leave it */
		} else {
			(void)bench_file_write("/", top_files[i] + 1, s->v[i], false);
		}
		bench_note(notes, "trace-cmd left %s changed; restored", top_files[i]);
		fixed++;
	}
	return fixed;
}

static bool have_program(const char *name)
{
	const char *path = getenv("PATH");
	_cleanup_free_ char *copy = strdup(path ? path : "/usr/bin:/bin");
	char *save = NULL;

	for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
		char p[PATH_MAX];

		(void)snprintf(p, sizeof(p), "%s/%s", d, name);
		if (access(p, X_OK) == 0)
			return true;
	}
	return false;
}

/* Writing ftrace_enabled back unchanged tells whether trace-cmd may (else -d). */
static bool ftrace_enabled_writable(void)
{
	char v[16];

	if (bench_file_read("/proc/sys/kernel", "ftrace_enabled", v, sizeof(v)) < 0)
		return true;    /* no such file: trace-cmd will not try */
	return bench_file_write("/proc/sys/kernel", "ftrace_enabled", v, false) >= 0;
}

static int run_popen_count(const char *cmd, const char *needle, uint64_t *ret_count,
			   uint64_t *ret_sum_after)
{
	char line[4096];
	FILE *f = popen(cmd, "re");

	if (!f)
		return negative_errno();
	*ret_count = 0;
	if (ret_sum_after)
		*ret_sum_after = 0;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, needle);

		if (!p)
			continue;
		(*ret_count)++;
		if (ret_sum_after) {
			unsigned long long v;

			if (sscanf(p + strlen(needle), "%llu", &v) == 1)
				*ret_sum_after += v;
		}
	}
	return pclose(f) == 0 ? 0 : -EIO;
}

/* trace-cmd 3.3 and later take --subbuf-size KIB (3.1, Debian 12's, does not). */
static bool trace_cmd_has_subbuf(void)
{
	static int has = -1;
	uint64_t n = 0;

	if (has < 0) {
		(void)run_popen_count("trace-cmd record -h 2>&1", "--subbuf-size", &n, NULL);
		has = n > 0;
	}
	return has;
}

/* @subbuf_kb: trace-cmd's --subbuf-size, 0: its default (the kernel's sub-buffers, as found). */
static int run_trace_cmd(unsigned subbuf_kb, struct live_result *res, FILE *notes)
{
	char path[PATH_MAX], cmd[PATH_MAX + 64], flags_note[256] = "", kb[16];
	_cleanup_free_ char *out = NULL;
	struct bench_child ch = { .in_fd = -EBADF, .out_fd = -EBADF };
	struct top_state saved = {};
	char *argv[16];
	unsigned n_cpus = bench_ncpus(BENCH_TRACEFS);
	int argc = 0, r, status = 0, fd;
	struct stat st;
	uint64_t n, n2;

	*res = (struct live_result){ .enabled_ms = -1, .drain_ms = -1 };
	(void)snprintf(path, sizeof(path), "/tmp/tp-bench-%d.dat", (int)getpid());
	argv[argc++] = (char *)"trace-cmd";
	argv[argc++] = (char *)"record";
	if (!ftrace_enabled_writable()) {
		argv[argc++] = (char *)"-d";
		(void)strcat(flags_note, " -d (/proc/sys/kernel/ftrace_enabled is not writable here)");
	}
	/* Its pid filter goes through set_ftrace_pid; trace-cmd 3.1.6 crashes when
	 * that file cannot be opened, so do without the filter then. */
	fd = open(BENCH_TRACEFS "/set_ftrace_pid", O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		argv[argc++] = (char *)"--no-filter";
		(void)strcat(flags_note, " --no-filter (set_ftrace_pid cannot be opened: its own"
				       " threads are traced too)");
	}
	if (fd >= 0)
		(void)close(fd);
	argv[argc++] = (char *)"-e";
	argv[argc++] = (char *)"sched:sched_switch";
	argv[argc++] = (char *)"-e";
	argv[argc++] = (char *)"sched:sched_waking";
	argv[argc++] = (char *)"-o";
	argv[argc++] = path;
	if (subbuf_kb) {
		(void)snprintf(kb, sizeof(kb), "%u", subbuf_kb);
		argv[argc++] = (char *)"--subbuf-size";
		argv[argc++] = kb;
	}
	argv[argc] = NULL;
	if (flags_note[0])
		bench_note(notes, "trace-cmd needed%s", flags_note);

	top_state_save(&saved);
	r = bench_spawn(argv, /* want_stdin= */ false, &ch);
	if (r >= 0) {
		res->enabled_ms = wait_file(&ch, BENCH_TRACEFS, "events/sched/sched_switch/enable", "1",
					    10);
		if (res->enabled_ms >= 0)
			res->drain_ms = wait_first_read(&ch, BENCH_TRACEFS, n_cpus, 1);
		(void)workload_then_stop(&ch, res->enabled_ms >= 0, res, &out, &status, NULL);
	}
	(void)top_state_restore(&saved, notes);
	top_state_done(&saved);
	if (r < 0)
		return r;

	if (stat(path, &st) < 0 || st.st_size == 0) {
		const char *e = out && *out ? out : "no output";

		bench_note(notes, "trace-cmd record: cannot run on this kernel (status 0x%x, no"
			   " trace written): %s", status, one_line(e));
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_note(notes, "trace-cmd record exited with status 0x%x after writing its trace:"
			   " %s", status, one_line(out && strstr(out, "trace-cmd:") ?
						   strstr(out, "trace-cmd:") : ""));
	res->out_bytes = (uint64_t)st.st_size;
	(void)snprintf(cmd, sizeof(cmd), "trace-cmd report -q '%s' 2>/dev/null", path);
	r = run_popen_count(cmd, ": sched_", &res->events, NULL);
	(void)snprintf(cmd, sizeof(cmd), "trace-cmd report --stat '%s' 2>/dev/null", path);
	if (run_popen_count(cmd, "overrun:", &n, &n2) >= 0 || n > 0)
		res->overruns = n2;
	res->ok = res->events > 0;
	if (!res->ok)
		bench_note(notes, "trace-cmd report found no events in %s", path);
out:
	(void)unlink(path);
	for (unsigned cpu = 0; cpu < MAX(n_cpus, 1u); cpu++) {
		char p[PATH_MAX + 16];

		(void)snprintf(p, sizeof(p), "%s.cpu%u", path, cpu);
		(void)unlink(p);
	}
	return 0;
}

/* ---- main ----------------------------------------------------------------- */

/* ---- through Perfetto's own traced ---------------------------------------- */

/*
 * With --perfetto DIR (a Perfetto build's traced, perfetto and
 * traced_probes): the peer and our daemon each record the same config
 * through that traced, one at a time, with the perfetto command line as
 * the consumer.  Everything runs on private sockets; CPU and RSS are the
 * tracer's alone (wait4() of the tracer process), events what the kernel
 * counts as read from the instance, as in run_daemon().
 */
static const char *arg_perfetto;

/* perfetto --query until the tracer has registered linux.ftrace. */
static int wait_registered(const char *perfetto, const char *tracer_name, const struct bench_child *tracer,
			   double timeout_s)
{
	uint64_t deadline = bench_mono_ns() + (uint64_t)(timeout_s * 1e9);
	char cmd[PATH_MAX + 64];

	(void)snprintf(cmd, sizeof(cmd), "%s --query 2>/dev/null", perfetto);
	while (!arg_stop && bench_mono_ns() < deadline && !bench_child_exited(tracer)) {
		uint64_t n = 0;

		(void)run_popen_count(cmd, "linux.ftrace ", &n, NULL);
		if (n > 0)
			return 0;
		bench_sleep_ns(20 * 1000 * 1000);
	}
	log_debug("%s did not register linux.ftrace", tracer_name);
	return -ETIMEDOUT;
}

static bool wait_path(const char *path, double timeout_s)
{
	uint64_t deadline = bench_mono_ns() + (uint64_t)(timeout_s * 1e9);

	while (!arg_stop && bench_mono_ns() < deadline) {
		if (access(path, F_OK) == 0)
			return true;
		bench_sleep_ns(5 * 1000 * 1000);
	}
	return false;
}

/* @peer: Perfetto's traced_probes, else traced-probes (arg_recorder). */
static int run_via_traced(bool peer, struct live_result *res, FILE *notes)
{
	char name[64], dir[PATH_MAX], psock[PATH_MAX], csock[PATH_MAX], cfg[PATH_MAX], out_path[PATH_MAX];
	char traced[PATH_MAX], perfetto[PATH_MAX], probes[PATH_MAX];
	const char *who = peer ? "traced_probes" : "traced-probes daemon";
	_cleanup_free_ char *t_out = NULL, *c_out = NULL, *d_out = NULL;
	struct bench_child svc = { .in_fd = -EBADF, .out_fd = -EBADF };
	struct bench_child d = { .in_fd = -EBADF, .out_fd = -EBADF };
	struct bench_child cons = { .in_fd = -EBADF, .out_fd = -EBADF };
	struct stat stb;
	unsigned n_cpus;
	int r, c_status = 0;
	uint64_t session0 = 0;

	*res = (struct live_result){ .enabled_ms = -1, .drain_ms = -1 };
	(void)snprintf(traced, sizeof(traced), "%s/traced", arg_perfetto);
	(void)snprintf(perfetto, sizeof(perfetto), "%s/perfetto", arg_perfetto);
	(void)snprintf(probes, sizeof(probes), "%s/traced_probes", arg_perfetto);
	(void)snprintf(name, sizeof(name), "tp-bench-traced-%d", (int)getpid());
	(void)snprintf(psock, sizeof(psock), "/tmp/tp-bench-%d-producer.sock", (int)getpid());
	(void)snprintf(csock, sizeof(csock), "/tmp/tp-bench-%d-consumer.sock", (int)getpid());
	(void)snprintf(cfg, sizeof(cfg), "/tmp/tp-bench-%d-traced.pbtxt", (int)getpid());
	(void)snprintf(out_path, sizeof(out_path), "/tmp/tp-bench-%d-traced.pftrace", (int)getpid());
	(void)unlink(psock);
	(void)unlink(csock);
	r = daemon_instance(name, cfg, dir, sizeof(dir), &n_cpus);
	if (r < 0 && !dir[0])
		return r;
	if (r < 0)
		goto out;
	(void)setenv("PERFETTO_PRODUCER_SOCK_NAME", psock, 1);
	(void)setenv("PERFETTO_CONSUMER_SOCK_NAME", csock, 1);
	{
		char *argv[] = { traced, NULL };

		r = bench_spawn(argv, /* want_stdin= */ false, &svc);
	}
	if (r >= 0 && !wait_path(csock, 10))
		r = -ETIMEDOUT;
	if (r >= 0) {
		char *argv[] = { peer ? probes : (char *)arg_recorder, NULL };

		r = bench_spawn(argv, /* want_stdin= */ false, &d);
	}
	if (r >= 0)
		r = wait_registered(perfetto, who, &d, 10);
	if (r >= 0) {
		char *argv[] = { perfetto, (char *)"--txt", (char *)"-c", cfg, (char *)"-o", out_path, NULL };

		session0 = process_ns(d.pid);
		r = bench_spawn(argv, /* want_stdin= */ false, &cons);
	}
	if (r >= 0)
		r = measure_daemon(&cons, &d, dir, n_cpus, res);
	/* The consumer ends the session and writes the trace; then the tracer, then traced. */
	if (cons.pid > 0) {
		bench_child_signal(&cons, SIGINT);
		(void)bench_child_finish(&cons, &c_out, &c_status, NULL, NULL);
		if (d.pid > 0) {
			uint64_t end = process_ns(d.pid);

			/* a thread that exited took its time with it: no figure rather than a wrong one */
			res->session_ns = session0 && end > session0 ? end - session0 : 0;
		}
	}
	stop_daemon(&d, &d_out, res);
	if (svc.pid > 0) {
		bench_child_signal(&svc, SIGTERM);
		(void)bench_child_finish(&svc, &t_out, NULL, NULL, NULL);
	}
	if (stat(out_path, &stb) == 0)
		res->out_bytes = (uint64_t)stb.st_size;
	flush_latencies(out_path, res);
	res->ok = r >= 0 && res->events > 0 && res->cpu_ns > 0 && res->out_bytes > 0 && WIFEXITED(c_status) &&
		  WEXITSTATUS(c_status) == 0;
	if (!res->ok) {
		bench_note(notes, "%s through traced failed (%s; perfetto status 0x%x): perfetto: %s", who,
			   r < 0 ? strerror(-r) : "no trace", c_status, one_line(c_out ? c_out : ""));
		bench_note(notes, "%s output: %s", who, one_line(d_out ? d_out : ""));
		bench_note(notes, "traced output: %s", one_line(t_out ? t_out : ""));
	}
out:
	(void)unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
	(void)unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
	(void)unlink(cfg);
	(void)unlink(out_path);
	(void)unlink(psock);
	(void)unlink(csock);
	if (bench_instance_remove(name) < 0)
		log_warning("Could not remove %s", dir);
	return r;
}

static void on_signal(int sig)
{
	arg_stop = 1;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "time", required_argument, NULL, 't' },
		{ "pairs", required_argument, NULL, 'w' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "recorder", required_argument, NULL, 'P' },
		{ "service", required_argument, NULL, 'S' },
		{ "only", required_argument, NULL, 'O' },
		{ "subbuf", required_argument, NULL, 'B' },
		{ "perfetto", required_argument, NULL, 'T' },
		{ "no-trace-cmd", no_argument, NULL, 'N' },
		{ "rows", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int c;

	while ((c = getopt_long(argc, argv, "t:w:r:h", opts, NULL)) >= 0) {
		switch (c) {
		case 't':
			arg_seconds = strtod(optarg, NULL);
			if (!(arg_seconds >= 0.5 && arg_seconds <= 120))
				return log_error_errno(-EINVAL, "Bad duration: %s", optarg);
			break;
		case 'r':
			if (safe_atou32(optarg, &arg_rounds) < 0 || arg_rounds == 0 || arg_rounds > 20)
				return log_error_errno(-EINVAL, "Bad round count: %s", optarg);
			break;
		case 'w':
			if (safe_atou32(optarg, &arg_pairs) < 0 || arg_pairs == 0 || arg_pairs > 64)
				return log_error_errno(-EINVAL, "Bad pair count: %s", optarg);
			break;
		case 'P':
			arg_recorder = optarg;
			break;
		case 'S':
			arg_service = optarg;
			break;
		case 'O':
			arg_only = optarg;
			break;
		case 'B':
			if (safe_atou32(optarg, &arg_subbuf_kb) < 0 || arg_subbuf_kb < 4 || arg_subbuf_kb > 512 ||
			    (arg_subbuf_kb & (arg_subbuf_kb - 1)))
				return log_error_errno(-EINVAL, "Bad sub-buffer size (KiB, 4..512, a power of two): %s",
						       optarg);
			break;
		case 'T':
			arg_perfetto = optarg;
			break;
		case 'N':
			arg_trace_cmd = false;
			break;
		case 'R':
			arg_rows = true;
			break;
		case 'h':
			printf("Usage: %s [-t SECONDS] [-w PAIRS] [-r ROUNDS] [--recorder PATH] [--service PATH]\n"
			       "       [--subbuf KIB] [--perfetto DIR] [--only floor|floor-4k|compact|compact-4k|\n"
			       "       compact-mmap|plain|daemon|daemon-4k|traced|trace-cmd|sweep|subbuf] [--no-trace-cmd]\n"
			       "       [--rows]\n", argv[0]);
			return 0;
		default:
			return -EINVAL;
		}
	}
	return 1;
}

static double events_per_trip(const struct live_result *res)
{
	return res->ok && res->rate > 0 ? (double)res->events / (res->rate * arg_seconds) : 0;
}

static double ns_per_event(const struct live_result *res, bool main_thread)
{
	uint64_t ns = main_thread && res->main_ns ? res->main_ns : res->cpu_ns;

	return res->ok && res->events ? (double)ns / (double)res->events : -1;
}

/* @cand replaces @best when @best failed or @cand cost less per event. */
static void keep_best(struct live_result *best, const struct live_result *cand, bool main_thread)
{
	if (!best->ok || (cand->ok && ns_per_event(cand, main_thread) < ns_per_event(best, main_thread)))
		*best = *cand;
}

static double steady_per_event(const struct live_result *res)
{
	return res->ok && res->steady_events ? (double)res->steady_ns / (double)res->steady_events : -1;
}

static double session_per_event(const struct live_result *res)
{
	return res->ok && res->session_ns && res->events ? (double)res->session_ns / (double)res->events : -1;
}

/* "; LABEL: traced_probes P, the daemon O ns/event (O/P x)" after @k bytes of @line, when both are known. */
static int append_vs_peer(char *line, size_t size, int k, const char *label, double peer, double ours)
{
	if (k < 0 || (size_t)k >= size || peer <= 0 || ours <= 0)
		return k;
	return k + snprintf(line + k, size - (size_t)k, "; %s: traced_probes %.1f, the daemon %.1f ns/event (%.2fx)",
			    label, peer, ours, ours / peer);
}

/*
 * @main_thread: charge only the tracer's main thread (for traced-probes
 * record, the producer; its service thread stands in for traced).
 */
static void print_live_row(const char *label, const struct live_result *res, double base_rate,
			   bool main_thread, double floor_ns)
{
	char what[160];
	struct bench_row row = BENCH_ROW_EMPTY(what);
	bool is_floor = floor_ns < 0;

	if (!res->ok || res->events == 0)
		return;
	row.ns_per_event = ns_per_event(res, main_thread);
	if (!is_floor && floor_ns > 0)
		(void)snprintf(what, sizeof(what), "%s (%.2fx floor)", label, row.ns_per_event / floor_ns);
	else
		(void)snprintf(what, sizeof(what), "%s", label);
	row.events_per_s = (double)res->events * 1e9 / (double)MAX(res->window_ns, 1u);
	if (res->out_bytes) {
		row.bytes_per_event = (double)res->out_bytes / (double)res->events;
		row.bytes_suffix = is_floor ? " raw" : NULL;
	}
	row.overruns = (int64_t)res->overruns;
	row.peak_rss_kb = res->maxrss_kb;
	if (base_rate > 0 && res->rate > 0) {
		row.slowdown_pct = (base_rate / res->rate - 1.0) * 100.0;
		row.slowdown_valid = true;
	}
	bench_row_print(stdout, &row);
}

/* @rel under the build directory this binary lives in. */
static char *build_path(const char *rel)
{
	char self[PATH_MAX], *dir, *ret = NULL;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return NULL;
	self[n] = 0;
	dir = dirname(self);                 /* <build>/bench */
	if (asprintf(&ret, "%s/../%s", dir, rel) < 0)
		return NULL;
	return ret;
}

static bool want(const char *what)
{
	return !arg_only || strcmp(arg_only, what) == 0;
}

/*
 * --only subbuf: the floor, traced-probes record (compact) and the daemon
 * at each sub-buffer size, taking turns, each keeping its cheapest run:
 * whole-run and steady-state CPU per event.  The tracers' 8 MiB buffers
 * take sub-buffers up to 256 KiB (a 32nd of the buffer).
 */
static void run_subbuf_sweep(const char *self, FILE *out)
{
	static const unsigned sizes_kb[] = { 4, 8, 16, 32, 64, 128, 256 };
	struct live_result fl[ARRAY_SIZE(sizes_kb)] = {}, rec[ARRAY_SIZE(sizes_kb)] = {},
			   dm[ARRAY_SIZE(sizes_kb)] = {};
	bool daemon = arg_service && access(arg_service, X_OK) == 0;

	for (unsigned round = 0; round < arg_rounds && !arg_stop; round++)
		for (size_t i = 0; i < ARRAY_SIZE(sizes_kb) && !arg_stop; i++) {
			struct live_result tmp;

			if (run_floor(self, sizes_kb[i], &tmp) < 0) {
				if (round == 0)
					bench_note(out, "sub-buffers of %u KiB: the kernel refused them", sizes_kb[i]);
				continue;
			}
			keep_best(&fl[i], &tmp, false);
			set_subbuf_env(sizes_kb[i]);
			(void)run_recorder(true, &tmp, out);
			keep_best(&rec[i], &tmp, true);
			if (daemon) {
				(void)run_daemon(arg_service, &tmp, out);
				keep_best(&dm[i], &tmp, false);
			}
		}
	for (size_t i = 0; i < ARRAY_SIZE(sizes_kb); i++) {
		const struct live_result *rs[] = { &fl[i], &rec[i], &dm[i] };
		const char *names[] = { "floor", "record compact (producer thread)", "daemon" };
		char line[600];
		int k = snprintf(line, sizeof(line), "sub-buffers %u KiB:", sizes_kb[i]);

		for (size_t j = 0; j < ARRAY_SIZE(rs) && k > 0 && (size_t)k < sizeof(line); j++) {
			if (!rs[j]->ok)
				continue;
			k += snprintf(line + k, sizeof(line) - (size_t)k, " %s %.1f ns/event (steady %.1f), %" PRIu64
				      " overruns;", names[j], ns_per_event(rs[j], j == 1),
				      rs[j]->steady_events ? (double)rs[j]->steady_ns / (double)rs[j]->steady_events
							   : -1.0, rs[j]->overruns);
		}
		if (k > 0 && (size_t)k < sizeof(line) && line[k - 1] == ';')
			line[k - 1] = 0;
		if (fl[i].ok)
			bench_note(out, "%s", line);
	}
}

int main(int argc, char **argv)
{
	struct live_result floor_res = {}, floor_sb = {}, comp = {}, comp4 = {}, comp_map = {}, plain = {}, tc = {},
			   dmn = {}, dmn4 = {}, peer = {}, vt = {}, vt4 = {}, tc_sb = {};
	unsigned chosen;
	_cleanup_free_ char *recorder = NULL, *service = NULL, *notes_buf = NULL;
	char self[PATH_MAX];
	double base1 = 0, base2 = 0, base, floor_ns;
	size_t notes_len = 0;
	FILE *notes;
	ssize_t n;
	int r;

	if (argc == 3 && strcmp(argv[1], "--floor-reader") == 0)
		return floor_reader_main(argv[2]);
	r = parse_args(argc, argv);
	if (r <= 0)
		return r < 0 ? 2 : 0;
	chosen = arg_subbuf_kb;
	r = bench_tracefs_ready();
	if (r < 0) {
		fprintf(stderr, "bench_live: needs root and tracefs at %s (%s); skipped\n",
			BENCH_TRACEFS, strerror(-r));
		return BENCH_EXIT_SKIP;
	}
	if (!arg_recorder) {
		recorder = build_path("probes/traced-probes");
		arg_recorder = recorder;
	}
	if (!arg_service) {
		service = build_path("tests/tp-test-service");
		arg_service = service;
	}
	if (arg_perfetto) {
		static const char *const need[] = { "traced", "perfetto", "traced_probes" };

		for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
			char p[PATH_MAX];

			(void)snprintf(p, sizeof(p), "%s/%s", arg_perfetto, need[i]);
			if (access(p, X_OK) < 0) {
				log_error("--perfetto %s: no %s there", arg_perfetto, need[i]);
				return 1;
			}
		}
	}
	if (!arg_recorder || access(arg_recorder, X_OK) < 0) {
		log_error("traced-probes not found (%s); pass --recorder PATH",
			  arg_recorder ? arg_recorder : "?");
		return 1;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	(void)signal(SIGINT, on_signal);
	(void)signal(SIGTERM, on_signal);
	(void)signal(SIGHUP, on_signal);
	(void)signal(SIGPIPE, SIG_IGN);
	/* Notes are printed after the rows. */
	notes = open_memstream(&notes_buf, &notes_len);
	if (!notes)
		return log_error_errno(-ENOMEM, "Out of memory"), 1;

	/* Not part of the default run: it records a dozen times. */
	if (arg_only && strcmp(arg_only, "subbuf") == 0) {
		run_subbuf_sweep(self, notes);
		fclose(notes);
		if (notes_buf)
			fputs(notes_buf, stdout);
		return arg_stop ? 1 : 0;
	}
	if (arg_only && strcmp(arg_only, "sweep") == 0) {
		run_sweep(notes, chosen);
		fclose(notes);
		if (notes_buf)
			fputs(notes_buf, stdout);
		return arg_stop ? 1 : 0;
	}
	r = bench_workload_run(arg_pairs, (uint64_t)(arg_seconds * 1e9), &base1);
	if (r < 0)
		return log_error_errno(r, "The workload failed: %m"), 1;
	/* Rounds interleave the tracers, so that a noisy minute on the machine
	 * does not land on one of them only; each keeps its cheapest run. */
	for (unsigned round = 0; round < arg_rounds && !arg_stop; round++) {
		struct live_result tmp;

		if (!arg_stop && (want("floor") || want("floor-4k"))) {
			(void)run_floor(self, 4, &tmp);
			keep_best(&floor_res, &tmp, false);
		}
		if (!arg_stop && want("floor") && chosen != 4) {
			(void)run_floor(self, chosen, &tmp);
			keep_best(&floor_sb, &tmp, false);
		}
		set_subbuf_env(chosen);
		if (!arg_stop && want("compact")) {
			(void)run_recorder(true, &tmp, notes);
			keep_best(&comp, &tmp, true);
		}
		if (!arg_stop && (want("compact") || want("compact-4k")) && chosen != 4) {
			set_subbuf_env(4);
			(void)run_recorder(true, &tmp, notes);
			set_subbuf_env(chosen);
			keep_best(&comp4, &tmp, true);
		}
		if (!arg_stop && want("compact-mmap")) {
			/* The same producer reading through the ring buffers' mapping. */
			(void)setenv("TRACED_PROBES_FTRACE_MMAP", "1", 1);
			(void)run_recorder(true, &tmp, notes);
			(void)unsetenv("TRACED_PROBES_FTRACE_MMAP");
			keep_best(&comp_map, &tmp, true);
		}
		if (!arg_stop && want("plain")) {
			(void)run_recorder(false, &tmp, notes);
			keep_best(&plain, &tmp, true);
		}
		if (!arg_stop && (want("daemon") || want("daemon-4k"))) {
			if (arg_service && access(arg_service, X_OK) == 0) {
				if (want("daemon")) {
					(void)run_daemon(arg_service, &tmp, notes);
					keep_best(&dmn, &tmp, false);
				}
				if (!arg_stop && chosen != 4) {
					set_subbuf_env(4);
					(void)run_daemon(arg_service, &tmp, notes);
					set_subbuf_env(chosen);
					keep_best(&dmn4, &tmp, false);
				}
			} else if (round == 0) {
				bench_note(notes, "traced-probes daemon: no service at %s (--service PATH)",
					   arg_service ? arg_service : "?");
			}
		}
		if (!arg_perfetto && arg_only && strcmp(arg_only, "traced") == 0 && round == 0)
			bench_note(notes, "traced: no Perfetto build given (--perfetto DIR): nothing to run");
		if (!arg_stop && arg_perfetto && want("traced")) {
			/* traced_probes reads 4 KiB pages only: its instance keeps them. */
			set_subbuf_env(4);
			(void)run_via_traced(true, &tmp, notes);
			keep_best(&peer, &tmp, false);
			if (!arg_stop) {
				(void)run_via_traced(false, &tmp, notes);
				keep_best(&vt4, &tmp, false);
			}
			set_subbuf_env(chosen);
			if (!arg_stop && chosen != 4) {
				(void)run_via_traced(false, &tmp, notes);
				keep_best(&vt, &tmp, false);
			}
		}
		if (arg_trace_cmd && !arg_stop && want("trace-cmd")) {
			if (have_program("trace-cmd")) {
				/* Its notes (flags it needed, what it left behind) once. */
				FILE *quiet = round > 0 ? fopen("/dev/null", "we") : NULL;

				(void)run_trace_cmd(0, &tmp, quiet ? quiet : notes);
				keep_best(&tc, &tmp, false);
				if (!arg_stop && chosen != 4 && trace_cmd_has_subbuf()) {
					(void)run_trace_cmd(chosen, &tmp, quiet ? quiet : notes);
					keep_best(&tc_sb, &tmp, false);
				} else if (round == 0 && !arg_stop && chosen != 4) {
					bench_note(notes, "trace-cmd: this version has no --subbuf-size (3.3 and later"
						   " have it): recorded with the kernel's sub-buffers only");
				}
				if (quiet)
					fclose(quiet);
			} else if (round == 0) {
				bench_note(notes, "trace-cmd: not installed");
			}
		}
	}
	if (!arg_stop)
		(void)bench_workload_run(arg_pairs, (uint64_t)(arg_seconds * 1e9), &base2);
	base = base2 > 0 ? (base1 + base2) / 2 : base1;

	if (!arg_rows)
		bench_table_header(stdout);
	/* 0, not < 0, when there is no floor: the other rows are not floors. */
	floor_ns = floor_res.ok ? ns_per_event(&floor_res, false) : 0;
	{
		char l1[96], l2[96], l3[96], l4[96], l5[96];

		(void)snprintf(l1, sizeof(l1), "floor (read+walk every 100 ms), %u KiB sub-buffers, live", chosen);
		(void)snprintf(l2, sizeof(l2), "traced-probes producer, compact, %u KiB sub-buffers, live", chosen);
		(void)snprintf(l3, sizeof(l3), "traced-probes producer, compact, mmap, %u KiB, live", chosen);
		(void)snprintf(l4, sizeof(l4), "traced-probes producer, plain, %u KiB, live", chosen);
		(void)snprintf(l5, sizeof(l5), "traced-probes daemon, compact, %u KiB sub-buffers, live", chosen);
		print_live_row("floor (read+walk every 100 ms), 4 KiB pages, live", &floor_res, base, false, -1);
		print_live_row(l1, &floor_sb, base, false, floor_ns);
		print_live_row("traced-probes producer, compact, 4 KiB pages, live", &comp4, base, true, floor_ns);
		print_live_row(l2, &comp, base, true, floor_ns);
		print_live_row(l3, &comp_map, base, true, floor_ns);
		print_live_row(l4, &plain, base, true, floor_ns);
		print_live_row("traced-probes daemon, compact, 4 KiB pages, live", &dmn4, base, false, floor_ns);
		print_live_row(l5, &dmn, base, false, floor_ns);
		(void)snprintf(l5, sizeof(l5), "traced-probes daemon via traced, %u KiB sub-buffers, live", chosen);
		print_live_row("Perfetto traced_probes via traced, 4 KiB pages, live", &peer, base, false, floor_ns);
		print_live_row("traced-probes daemon via traced, 4 KiB pages, live", &vt4, base, false, floor_ns);
		print_live_row(l5, &vt, base, false, floor_ns);
	}
	print_live_row("trace-cmd record, live", &tc, base, false, floor_ns);
	{
		char l[96];

		(void)snprintf(l, sizeof(l), "trace-cmd record --subbuf-size %u, live", chosen);
		print_live_row(l, &tc_sb, base, false, floor_ns);
	}
	fclose(notes);
	if (notes_buf)
		fputs(notes_buf, stdout);
	bench_note(stdout, "live: %u ping-pong pairs for %.1f s per run; alone %.0f and %.0f round"
		   " trips/s (first/last run); under floor %.0f, compact %.0f, plain %.0f, trace-cmd"
		   " %.0f; events per round trip %.2f, %.2f, %.2f, %.2f", arg_pairs, arg_seconds,
		   base1, base2, floor_res.rate, comp.rate, plain.rate, tc.rate,
		   events_per_trip(&floor_res), events_per_trip(&comp), events_per_trip(&plain),
		   events_per_trip(&tc));
	bench_note(stdout, "live CPU: the tracer's whole run (setup, drains, encoding) over the events"
		   " it recorded; wait4() rusage for the floor and trace-cmd (its recorder processes"
		   " included), the main thread's schedstat for traced-probes record (the producer;"
		   " peak RSS is the whole process); slowdown: how much longer the workload takes per"
		   " round trip than alone; buffers: floor and traced-probes 8 MiB/CPU, sized before each starts, trace-cmd the"
		   " top-level size as found; clocks: floor and traced-probes boot, trace-cmd local;"
		   " trace-cmd's .dat is zstd-compressed");
	if (comp.ok && comp.rss_kb)
		bench_note(stdout, "traced-probes record (compact) RSS just before the stop: %.1f MiB ="
			   " anon %.1f + file %.1f + shmem %.1f (the SMB; the service thread and its"
			   " buffers live in the same process)", comp.rss_kb / 1024.0,
			   comp.rss_anon_kb / 1024.0, comp.rss_file_kb / 1024.0,
			   comp.rss_shmem_kb / 1024.0);
	if (comp_map.ok && comp_map.rss_kb)
		bench_note(stdout, "traced-probes record (compact, mmap) RSS just before the stop: %.1f MiB"
			   " = anon %.1f (ours) + file %.1f (of which the mapped ring buffers, the kernel's"
			   " pages: %.1f) + shmem %.1f", comp_map.rss_kb / 1024.0,
			   comp_map.rss_anon_kb / 1024.0, comp_map.rss_file_kb / 1024.0,
			   comp_map.map_kb / 1024.0, comp_map.rss_shmem_kb / 1024.0);
	if (dmn.ok)
		bench_note(stdout, "traced-probes daemon (default settings plus linux.process_stats, service in another process):"
			   " peak RSS (VmHWM) %.2f MiB; just before the stop %.2f MiB = anon %.2f (ours) + file"
			   " %.2f (of which the mapped ring buffers, the kernel's pages: %.2f) + shmem %.2f"
			   " (the SMB); CPU is the whole daemon process; %.1f SMB commits per second",
			   dmn.hwm_kb / 1024.0, dmn.rss_kb / 1024.0, dmn.rss_anon_kb / 1024.0,
			   dmn.rss_file_kb / 1024.0, dmn.map_kb / 1024.0, dmn.rss_shmem_kb / 1024.0,
			   dmn.window_ns ? (double)dmn.commits * 1e9 / (double)dmn.window_ns : 0.0);
	{
		const struct live_result *rs[] = { &floor_res, &floor_sb, &comp4, &comp, &comp_map, &plain, &dmn4,
						   &dmn, &peer, &vt4, &vt };
		const char *names[] = { "floor 4k", "floor sub-buffers", "record compact 4k", "record compact",
					"record compact mmap", "record plain", "daemon 4k", "daemon",
					"traced_probes via traced", "daemon 4k via traced", "daemon via traced" };
		double fl = steady_per_event(&floor_res) > 0 ? steady_per_event(&floor_res) : 0;
		char line[1600];
		int k = snprintf(line, sizeof(line), "steady state (main thread's CPU during the workload"
				 " over the events read in it; setup and teardown left out; x: of the 4 KiB floor):");

		for (size_t i = 0; i < ARRAY_SIZE(rs) && k > 0 && (size_t)k < sizeof(line); i++) {
			double v;

			v = steady_per_event(rs[i]);
			if (v < 0)
				continue;
			k += snprintf(line + k, sizeof(line) - (size_t)k, " %s %.1f ns/event", names[i], v);
			if (i > 0 && fl > 0 && (size_t)k < sizeof(line))
				k += snprintf(line + k, sizeof(line) - (size_t)k, " (%.2fx)", v / fl);
			if ((size_t)k < sizeof(line))
				k += snprintf(line + k, sizeof(line) - (size_t)k, ",");
		}
		if (k > 0 && (size_t)k < sizeof(line) && line[k - 1] == ',')
			line[k - 1] = 0;
		bench_note(stdout, "%s", line);
	}
	{
		const struct live_result *rs[] = { &dmn4, &dmn, &peer, &vt4, &vt };
		const char *names[] = { "daemon 4k", "daemon", "traced_probes via traced", "daemon 4k via traced",
					"daemon via traced" };
		char line[1200];
		int k = snprintf(line, sizeof(line), "flushes (one a second while the session runs, and the"
				 " stop's; the service's flush_started to all_data_sources_flushed, median / max):");
		bool any = false;

		for (size_t i = 0; i < ARRAY_SIZE(rs) && k > 0 && (size_t)k < sizeof(line); i++) {
			if (!rs[i]->ok || !rs[i]->flushes)
				continue;
			k += snprintf(line + k, sizeof(line) - (size_t)k, " %s %.1f / %.1f ms (%u),", names[i],
				      (double)rs[i]->flush_med_ns / 1e6, (double)rs[i]->flush_max_ns / 1e6,
				      rs[i]->flushes);
			any = true;
		}
		if (k > 0 && (size_t)k < sizeof(line) && line[k - 1] == ',')
			line[k - 1] = 0;
		if (any)
			bench_note(stdout, "%s", line);
	}
	if (peer.ok && (vt.ok || vt4.ok)) {
		const struct live_result *ours = vt.ok ? &vt : &vt4;
		char line[1000];
		int k = snprintf(line, sizeof(line), "through the same traced (Perfetto's, consumer its perfetto"
				 " command line): peak RSS traced_probes %.2f MiB, the daemon %.2f MiB",
				 peer.maxrss_kb / 1024.0, ours->maxrss_kb / 1024.0);
		char label[96];

		(void)snprintf(label, sizeof(label), "whole tracer process, the daemon at %u KiB", vt.ok ? chosen : 4u);
		k = append_vs_peer(line, sizeof(line), k, label, ns_per_event(&peer, false), ns_per_event(ours, false));
		if (vt.ok && vt4.ok)
			k = append_vs_peer(line, sizeof(line), k, "at 4 KiB", ns_per_event(&peer, false),
					   ns_per_event(&vt4, false));
		k = append_vs_peer(line, sizeof(line), k, "steady state", steady_per_event(&peer),
				   steady_per_event(ours));
		k = append_vs_peer(line, sizeof(line), k, "one session of a daemon already running (every thread,"
				   " start to end, process start-up left out)", session_per_event(&peer),
				   session_per_event(ours));
		if (k > 0)
			bench_note(stdout, "%s", line);
	}
	if (comp.ok || plain.ok)
		bench_note(stdout, "traced-probes record whole process (producer + in-process service"
			   " + trace file): compact %.1f ns/event, plain %.1f ns/event",
			   ns_per_event(&comp, false), ns_per_event(&plain, false));
	if (comp.ok)
		bench_note(stdout, "time to start traced-probes record: exec to events enabled %.1f ms,"
			   " to first drain %.1f ms (drains are aligned to 100 ms of wall time)",
			   comp.enabled_ms, comp.drain_ms);
	if (tc.ok && tc.drain_ms >= 0)
		bench_note(stdout, "time to start trace-cmd record: exec to events enabled %.1f ms,"
			   " to first read %.1f ms", tc.enabled_ms, tc.drain_ms);
	else if (tc.ok)
		bench_note(stdout, "time to start trace-cmd record: exec to events enabled %.1f ms;"
			   " no read seen in the per-CPU stats within 1 s (it splices whole pages)",
			   tc.enabled_ms);
	return arg_stop ? 1 : 0;
}
