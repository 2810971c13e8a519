/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `traced-probes record` on the real kernel, for what its command line
 * promises: exact end-of-trace accounting (tracing is off before the last
 * read), -t counted from the moment tracing is on (the span of data, first
 * to last event, is at least -t), linux.sys_stats and linux.system_info
 * from flags and from Perfetto's own configs, a clear failure when nothing
 * asked for exists, and a status line on a terminal only.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/recorder.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

static struct tp_fixture fx;
static char tmpdir[] = "/tmp/tp-record-exact-XXXXXX";

static void setup(void)
{
	ck_assert_int_eq(tp_fixture_setup(&fx, "tp-rexact"), 0);
}

static void teardown(void)
{
	tp_fixture_teardown(&fx);
}

static void base_options(struct recorder_options *o, const char *out)
{
	recorder_options_init(o);
	o->output = out;
	o->instance = fx.instance;
	o->quiet = true;
	/* the kernel-symbol map is not what these tests are about */
	o->symbolize_ksyms = false;
}

/* first and last ftrace event timestamps in the trace (ns), as a reader sees them */
static void event_span(const struct tp_trace_summary *s, uint64_t *ret_first, uint64_t *ret_last)
{
	uint64_t first = UINT64_MAX, last = 0;

	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__FtraceEventBundle *b = s->trace->packet[i]->ftrace_events;

		if (s->trace->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			continue;
		for (size_t k = 0; k < b->n_event; k++) {
			first = MIN(first, b->event[k]->timestamp);
			last = MAX(last, b->event[k]->timestamp);
		}
		if (b->compact_sched) {
			uint64_t ts = 0;

			/* deltas restart at every bundle: the first entry is absolute */
			for (size_t k = 0; k < b->compact_sched->n_switch_timestamp; k++) {
				ts += b->compact_sched->switch_timestamp[k];
				first = MIN(first, ts);
				last = MAX(last, ts);
			}
			ts = 0;
			for (size_t k = 0; k < b->compact_sched->n_waking_timestamp; k++) {
				ts += b->compact_sched->waking_timestamp[k];
				first = MIN(first, ts);
				last = MAX(last, ts);
			}
		}
	}
	*ret_first = first == UINT64_MAX ? 0 : first;
	*ret_last = last;
}

static size_t count_packets(const struct tp_trace_summary *s, int data_case)
{
	size_t n = 0;

	for (size_t i = 0; i < s->trace->n_packet; i++)
		n += (int)s->trace->packet[i]->data_case == data_case;
	return n;
}

/*
 * Every event the kernel handed out between the START and END stats is in
 * the trace and nothing is left in the buffer: read_events END - START
 * equals the events, entries END is 0, on every CPU.  And -t 3s gives at
 * least 2.9 s between the first and the last event, however long setup took.
 */
/*
 * The instance's sub-buffer size, sampled while a recording runs: what
 * the recording used (the largest seen; the fixture's is 4 KiB).
 */
struct subbuf_sampler {
	pthread_t thread;
	atomic_bool stop;
	int max_kb;             /* -1: no buffer_subbuf_size_kb (before Linux 6.8) */
};

static void *subbuf_sample(void *arg)
{
	struct subbuf_sampler *sm = arg;
	char path[600];

	snprintf(path, sizeof(path), "%s/buffer_subbuf_size_kb", fx.path);
	while (!atomic_load(&sm->stop)) {
		_cleanup_free_ char *v = NULL;

		if (read_full_file_at(AT_FDCWD, path, 64, &v, NULL) < 0)
			return NULL;
		sm->max_kb = MAX(sm->max_kb, atoi(v));
		(void)nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	}
	return NULL;
}

/*
 * Every event written is in the trace, CPU by CPU, with @subbuf_kb
 * sub-buffers (0: record's default), and -t means -t.
 */
static void record_exact(uint32_t subbuf_kb)
{
	char out[512];
	struct recorder_options o;
	struct tp_deferred_workload d;
	struct tp_trace_summary s;
	struct subbuf_sampler sm = { .max_kb = -1 };
	unsigned n_cpus = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t first, last, all, total_read = 0;

	snprintf(out, sizeof(out), "%s/exact.pftrace", tmpdir);
	ck_assert_int_eq(tp_workload_start_deferred(&d, fx.path, "tp-exact", 2), 0);
	base_options(&o, out);
	o.duration_ms = 3000;
	if (subbuf_kb) {
		o.subbuf_given = true;
		o.subbuf_kb = subbuf_kb;
	}
	ck_assert_int_eq(pthread_create(&sm.thread, NULL, subbuf_sample, &sm), 0);
	ck_assert_int_eq(recorder_run(&o), 0);
	atomic_store(&sm.stop, true);
	ck_assert_int_eq(pthread_join(sm.thread, NULL), 0);
	ftrace_host_set_subbuf_kb(FTRACE_SUBBUF_UNSET);
	ck_assert_int_eq(tp_workload_finish_deferred(&d), 0);
	tp_fixture_assert_restored(&fx);
	fprintf(stderr, "sub-buffers during the recording: %d KiB\n", sm.max_kb);
	if (sm.max_kb >= 0)
		ck_assert_int_eq(sm.max_kb, subbuf_kb ? (int)subbuf_kb : (int)FTRACE_SUBBUF_DEFAULT_KB);

	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	ck_assert_uint_ge(s.stats_pairs, 1);
	ck_assert_uint_gt(s.events, 10000);
	for (unsigned c = 0; c < n_cpus; c++) {
		const struct tp_cpu_summary *cs = &s.cpu[c];
		uint64_t read = cs->end_read - cs->start_read;

		fprintf(stderr, "cpu %u: %llu events in the trace, read_events END-START %llu, "
			"entries at END %llu, overrun %llu\n", c, (unsigned long long)cs->events,
			(unsigned long long)read, (unsigned long long)cs->end_entries,
			(unsigned long long)(cs->end_overrun - cs->start_overrun));
		ck_assert_msg(cs->events == read, "cpu %u: %llu events in the trace, kernel read %llu", c,
			      (unsigned long long)cs->events, (unsigned long long)read);
		/* nothing written after the last read, nothing after the END stats */
		ck_assert_uint_eq(cs->end_entries, 0);
		ck_assert_uint_eq(cs->events_at_end, cs->events);
		total_read += read;
	}
	ck_assert_uint_eq(s.events, total_read);

	event_span(&s, &first, &last);
	fprintf(stderr, "data span %.3f s for -t 3s\n", (double)(last - first) / 1e9);
	ck_assert_msg(last - first >= 2900000000ull, "only %.3f s of data",
		      (double)(last - first) / 1e9);
	/*
	 * and not much more: -t still means -t, counted from the moment the
	 * last data source started (a start that a busy machine delays moves
	 * the end with it, so that every data source gets the whole -t)
	 */
	all = tp_trace_service_event_ts(&s, PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_ALL_DATA_SOURCES_STARTED);
	ck_assert_uint_gt(all, 0);
	fprintf(stderr, "all data sources started %.3f s after the first event\n",
		all > first ? (double)(all - first) / 1e9 : 0.0);
	ck_assert_msg(last < all + 5000000000ull, "%.3f s of data after the last start",
		      (double)(last - all) / 1e9);
	/* linux.system_info comes by default, as with perfetto -t */
	ck_assert_uint_eq(count_packets(&s, PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO), 1);
	tp_trace_free(&s);
}

START_TEST(test_record_exact_and_span)
{
	record_exact(0);
}
END_TEST

/* The largest sub-buffers record's 8 MiB buffer takes, and the 4 KiB pages of old. */
START_TEST(test_record_exact_subbuf_sizes)
{
	record_exact(256);
	record_exact(4);
}
END_TEST

/* --sys-stats: meminfo, vmstat and /proc/stat every 250 ms beside the sched trace */
START_TEST(test_record_sys_stats_preset)
{
	char out[512];
	struct recorder_options o;
	struct tp_trace_summary s;
	size_t polls = 0, meminfo = 0, vmstat = 0, cpu_stat = 0;

	snprintf(out, sizeof(out), "%s/sys.pftrace", tmpdir);
	base_options(&o, out);
	o.duration_ms = 1500;
	o.sys_stats = RECORDER_SYS_DEFAULT;
	ck_assert_int_eq(recorder_run(&o), 0);
	tp_fixture_assert_restored(&fx);
	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	for (size_t i = 0; i < s.trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s.trace->packet[i];

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS)
			continue;
		polls++;
		meminfo += p->sys_stats->n_meminfo > 0;
		vmstat += p->sys_stats->n_vmstat > 0;
		cpu_stat += p->sys_stats->n_cpu_stat > 0;
	}
	/* 1.5 s at 250 ms: six polls, give or take the edges */
	ck_assert_msg(polls >= 4, "%zu sys_stats packets", polls);
	ck_assert_uint_ge(meminfo, 4);
	ck_assert_uint_ge(vmstat, 4);
	ck_assert_uint_ge(cpu_stat, 4);
	ck_assert_uint_eq(count_packets(&s, PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO), 1);
	tp_trace_free(&s);
}
END_TEST

/*
 * A bare 100 ms timer beside a recording: how many of its ticks the
 * machine granted while sys_stats polled is the yardstick for the poller,
 * so that a starved emulated guest (its vCPUs stalled for seconds by a
 * busy host) lowers the bound instead of failing the test.  Ticks are
 * stamped with CLOCK_BOOTTIME, the clock of sys_stats packets and of the
 * ftrace events (trace_clock boot).
 */
#define TICK_MS 100u
#define TICKS_MAX 4096u

struct ticker {
	pthread_t th;
	atomic_bool stop;
	atomic_uint ticks;
	uint64_t at[TICKS_MAX];
};

static uint64_t boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *ticker_run(void *arg)
{
	struct ticker *t = arg;

	while (!atomic_load(&t->stop)) {
		struct timespec d = { 0, TICK_MS * 1000000L };
		unsigned n;

		if (clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL) != 0)
			continue;
		n = atomic_load(&t->ticks);
		if (n < TICKS_MAX) {
			t->at[n] = boottime_ns();
			atomic_store(&t->ticks, n + 1);
		}
	}
	return NULL;
}

/* Perfetto's configs with linux.sys_stats / linux.system_info, through -c */
static void record_config_file(const char *name, size_t *ret_sys_stats, size_t *ret_cpu_info, size_t *ret_ticks)
{
	const char *root = getenv("TP_SOURCE_ROOT");
	char path[4200], out[512];
	struct recorder_options o;
	struct tp_trace_summary s;
	static struct ticker tick;
	uint64_t first_poll = 0, last_event = 0;

	snprintf(path, sizeof(path), "%s/tests/data/configs/%s", root ? root : ".", name);
	snprintf(out, sizeof(out), "%s/%s.pftrace", tmpdir, name);
	recorder_options_init(&o);
	o.output = out;
	o.config_path = path;
	o.quiet = true;
	atomic_store(&tick.stop, false);
	atomic_store(&tick.ticks, 0);
	ck_assert_int_eq(pthread_create(&tick.th, NULL, ticker_run, &tick), 0);
	ck_assert_msg(recorder_run(&o) == 0, "%s", name);
	atomic_store(&tick.stop, true);
	ck_assert_int_eq(pthread_join(tick.th, NULL), 0);
	tp_fixture_assert_restored(&fx);
	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	*ret_sys_stats = count_packets(&s, PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS);
	*ret_cpu_info = count_packets(&s, PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO);
	/* the polling window: from the first poll to the last sched_switch (tracing's end) */
	for (size_t i = 0; i < s.trace->n_packet; i++)
		if (s.trace->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS) {
			first_poll = s.trace->packet[i]->timestamp;
			break;
		}
	for (unsigned c = 0; c < s.n_cpus; c++)
		last_event = MAX(last_event, s.cpu[c].last_switch_ts);
	*ret_ticks = 0;
	for (unsigned i = 0; i < atomic_load(&tick.ticks); i++)
		*ret_ticks += tick.at[i] >= first_poll && tick.at[i] <= last_event;
	fprintf(stderr, "%s: %zu sys_stats packets, %zu cpu_info, %zu ticks of a bare %u ms timer while polling\n",
		name, *ret_sys_stats, *ret_cpu_info, *ret_ticks, TICK_MS);
	tp_trace_free(&s);
}

START_TEST(test_record_perfetto_sys_stats_configs)
{
	size_t sys, cpu, ticks;
	bool cpufreq = access("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", R_OK) == 0;

	/*
	 * test/configs/sys_stats.cfg: 100 ms polls for 2 s, so some 20 polls;
	 * at least 10, or half the ticks a bare 100 ms timer got over the
	 * same window when the machine granted fewer than 20.
	 */
	record_config_file("sys_stats.cfg", &sys, &cpu, &ticks);
	ck_assert_msg(sys >= 2 && sys >= MIN((size_t)10, ticks / 2), "%zu sys_stats packets, a bare timer got %zu ticks",
		      sys, ticks);
	/* the docs' memory-counters example: 1 s polls for 1.5 s */
	record_config_file("memory-counters.cfg", &sys, &cpu, &ticks);
	ck_assert_uint_ge(sys, 1);
	/* the docs' cpu-freq example: the CPU table, and frequencies where there are any */
	record_config_file("cpu-freq.cfg", &sys, &cpu, &ticks);
	ck_assert_uint_eq(cpu, 1);
	if (cpufreq)
		ck_assert_uint_ge(sys, 1);
}
END_TEST

/* record -e sched/nope: no trace, exit 1, and the reason names the event */
START_TEST(test_record_nothing_exists)
{
	char out[512], err_path[512];
	_cleanup_free_ char *msg = NULL;
	int saved, fd, rc;

	snprintf(out, sizeof(out), "%s/nope.pftrace", tmpdir);
	snprintf(err_path, sizeof(err_path), "%s/nope.stderr", tmpdir);
	fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	rc = recorder_main(8, (char *[]){ "record", "-o", out, "-i", fx.instance, "-t", "1s", "sched/nope",
					  NULL });
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fd);
	ck_assert_int_eq(rc, 1);
	ck_assert_int_eq(access(out, F_OK), -1);
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, err_path, 1 << 16, &msg, NULL), 0);
	ck_assert_msg(strstr(msg, "sched/nope") != NULL, "%s", msg);
	ck_assert_msg(strstr(msg, "0 events") == NULL, "%s", msg);
	tp_fixture_assert_restored(&fx);
}
END_TEST

/*
 * Run a 2.5 s recording with stderr on @fd; return what it wrote (read
 * back through @read_fd).
 */
static char *record_with_stderr(int fd, int read_fd)
{
	char out[512], buf[65536];
	struct recorder_options o;
	size_t len = 0;
	ssize_t n;
	int saved;

	snprintf(out, sizeof(out), "%s/status.pftrace", tmpdir);
	base_options(&o, out);
	o.quiet = false;
	o.duration_ms = 2500;
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	ck_assert_int_eq(recorder_run(&o), 0);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	while (len < sizeof(buf) - 1 && (n = read(read_fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return strdup(buf);
}

START_TEST(test_record_status_line_on_terminal_only)
{
	_cleanup_free_ char *tty = NULL, *file = NULL;
	char path[512];
	const char *last_line, *erase;
	int master, slave, fd;

	/* a terminal: a pty whose output we read back */
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ge(master, 0);
	ck_assert_int_eq(grantpt(master), 0);
	ck_assert_int_eq(unlockpt(master), 0);
	slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ge(slave, 0);
	ck_assert_int_ge(fcntl(master, F_SETFL, O_NONBLOCK), 0);
	tty = record_with_stderr(slave, master);
	close(slave);
	close(master);
	/* redrawn in place, about once a second: two or three in 2.5 s */
	ck_assert_msg(strstr(tty, "\r\033[K  ") != NULL, "%s", tty);
	ck_assert_msg(strstr(tty, " events ") && strstr(tty, "MB written") &&
		      strstr(tty, "lost in the kernel"), "%s", tty);
	/* and erased before the summary */
	last_line = NULL;
	for (const char *p = tty; (p = strstr(p, "MB written")); p++)
		last_line = p;
	erase = strstr(last_line, "\r\033[K");
	ck_assert_msg(erase != NULL, "%s", tty);
	ck_assert_ptr_nonnull(strstr(erase, "Recorded "));
	ck_assert_ptr_null(strstr(erase + 4, "MB written"));
	ck_assert_msg(strstr(tty, "of data") != NULL, "%s", tty);

	/* not a terminal: no status line, no control characters */
	snprintf(path, sizeof(path), "%s/status.stderr", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	{
		int rfd = open(path, O_RDONLY | O_CLOEXEC);

		ck_assert_int_ge(rfd, 0);
		file = record_with_stderr(fd, rfd);
		close(rfd);
	}
	close(fd);
	ck_assert_msg(strchr(file, '\033') == NULL && strchr(file, '\r') == NULL, "%s", file);
	ck_assert_msg(strstr(file, "Recorded ") != NULL, "%s", file);
	tp_fixture_assert_restored(&fx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("record_exact");
	TCase *tc = tcase_create("record_exact");

	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	if (!mkdtemp(tmpdir))
		return 1;
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_record_exact_and_span);
	tcase_add_test(tc, test_record_exact_subbuf_sizes);
	tcase_add_test(tc, test_record_sys_stats_preset);
	tcase_add_test(tc, test_record_perfetto_sys_stats_configs);
	tcase_add_test(tc, test_record_nothing_exists);
	tcase_add_test(tc, test_record_status_line_on_terminal_only);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
