/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exact accounting on a shared ring buffer, on the real kernel: every event
 * a reader takes out of the buffer is either in the data source's trace or
 * counted as skipped (not asked for: trace_marker lines, which the kernel
 * records whatever is enabled, and another session's events), so that on
 * every CPU
 *
 *   events in the trace + skipped = read_events END - START
 *
 * where skipped travels in FtraceCpuStats.bytes_read (END - START; see
 * probes/ftrace/tracefs/ftrace_stats.c).  What the kernel overwrote or
 * refused it never handed out: it is in overrun and dropped_events, not in
 * read_events.
 *
 * And the session's last flush is its last read: events the kernel writes
 * after it (tracing stays on in the daemon) never reach that trace, which
 * would then hold more than its END - START read_events.
 *
 * Each test runs in an instance of its own (tp_fixture), restored and
 * removed even when an assertion fails.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loop/loop.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_record.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

#define MARKERS 100u
#define MAX_SEQS 8u

static struct tp_fixture fx;
static char tmpdir[] = "/tmp/tp-accounting-XXXXXX";
static char state_dir[128];
static unsigned n_cpus;
/* Held here so that teardown frees them when an assertion stops a test half-way:
 * open trace_pipe_raw files would keep the instance from being removed. */
static struct ftrace_host *g_host;
static struct loop *g_loop;

static void setup(void)
{
	ck_assert_int_eq(tp_fixture_setup(&fx, "tp-acct"), 0);
	(void)snprintf(state_dir, sizeof(state_dir), "%s/state-XXXXXX", tmpdir);
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
	setenv(FTRACE_STATE_DIR_ENV, state_dir, 1);
}

static void teardown(void)
{
	/* A test that failed half-way: its data sources and readers first (the host frees
	 * them, tracefs put back), then any undo list still left behind. */
	g_host = ftrace_host_free(g_host);
	g_loop = loop_unref(g_loop);
	(void)ftrace_host_recover(state_dir);
	tp_fixture_teardown(&fx);
}

/* ---- trace_marker lines, from a thread ----------------------------------- */

struct marker_writer {
	pthread_t thread;
	char path[512];
	unsigned want;
	bool wait_recording;    /* first wait until the instance records sched_switch */
	unsigned written;       /* lines the kernel took (a write fails once tracing is off) */
};

static void *marker_main(void *arg)
{
	struct marker_writer *m = arg;
	char dir[512];
	int fd;

	(void)snprintf(dir, sizeof(dir), "%s", fx.path);
	if (m->wait_recording && !tp_wait_until(tp_is_recording, dir, TP_WAIT_HANG_MS))
		return NULL;
	fd = open(m->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (unsigned i = 0; i < m->want; i++) {
		char line[64];
		int n = snprintf(line, sizeof(line), "tp-accounting marker %u\n", i);

		if (write(fd, line, (size_t)n) != n)
			break;
		m->written++;
	}
	close(fd);
	return NULL;
}

static void markers_start(struct marker_writer *m, unsigned want, bool wait_recording)
{
	memset(m, 0, sizeof(*m));
	(void)snprintf(m->path, sizeof(m->path), "%s/trace_marker", fx.path);
	m->want = want;
	m->wait_recording = wait_recording;
	ck_assert_int_eq(pthread_create(&m->thread, NULL, marker_main, m), 0);
}

static unsigned markers_join(struct marker_writer *m)
{
	ck_assert_int_eq(pthread_join(m->thread, NULL), 0);
	return m->written;
}

/* ---- the identity, per CPU ------------------------------------------------ */

struct cpu_count {
	uint64_t events, events_at_end;
	uint64_t start_read, end_read, start_skipped, end_skipped;
	bool start_seen, end_seen;
};

/* One data source's view: its packets are one sequence. */
struct seq_count {
	uint32_t seq;
	struct cpu_count cpu[TP_MAX_CPUS];
	uint64_t pairs;
};

static void count_bundle(struct seq_count *s, const Perfetto__Protos__FtraceEventBundle *b)
{
	struct cpu_count *c;

	if (!b->has_cpu || b->cpu >= TP_MAX_CPUS)
		return;
	c = &s->cpu[b->cpu];
	c->events += b->n_event;
	if (b->compact_sched)
		c->events += b->compact_sched->n_switch_timestamp + b->compact_sched->n_waking_timestamp;
}

static void count_stats(struct seq_count *s, const Perfetto__Protos__FtraceStats *st)
{
	bool start = st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE;

	if (!start) {
		s->pairs++;
		for (unsigned k = 0; k < TP_MAX_CPUS; k++)
			s->cpu[k].events_at_end = s->cpu[k].events;
	}
	for (size_t i = 0; i < st->n_cpu_stats; i++) {
		const Perfetto__Protos__FtraceCpuStats *cs = st->cpu_stats[i];
		struct cpu_count *c;

		if (cs->cpu >= TP_MAX_CPUS)
			continue;
		c = &s->cpu[cs->cpu];
		if (start) {
			c->start_read = cs->read_events;
			c->start_skipped = cs->bytes_read;
			c->start_seen = true;
		} else {
			c->end_read = cs->read_events;
			c->end_skipped = cs->bytes_read;
			c->end_seen = true;
		}
	}
}

/* Splits @t's ftrace packets by sequence (one per data source). Returns: the sequences. */
static size_t count_by_sequence(const Perfetto__Protos__Trace *t, struct seq_count *seqs, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = t->packet[i];
		struct seq_count *s = NULL;
		uint32_t id = p->trusted_packet_sequence_id;

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS &&
		    p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS)
			continue;
		for (size_t k = 0; k < n && !s; k++)
			if (seqs[k].seq == id)
				s = &seqs[k];
		if (!s) {
			ck_assert_uint_lt(n, max);
			s = &seqs[n++];
			memset(s, 0, sizeof(*s));
			s->seq = id;
		}
		if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			count_bundle(s, p->ftrace_events);
		else
			count_stats(s, p->ftrace_stats);
	}
	return n;
}

/*
 * events + skipped == read_events END - START on every CPU, and nothing in
 * the trace after its last END_OF_TRACE stats.  Returns: skipped, all CPUs.
 */
static uint64_t assert_accounted(const char *who, const struct seq_count *s)
{
	uint64_t skipped_all = 0;

	ck_assert_msg(s->pairs >= 1, "%s: no END_OF_TRACE stats", who);
	for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
		const struct cpu_count *c = &s->cpu[cpu];
		uint64_t read = c->end_read - c->start_read;
		uint64_t skipped = c->end_skipped - c->start_skipped;

		ck_assert_msg(c->start_seen && c->end_seen, "%s: cpu %u has no stats", who, cpu);
		fprintf(stderr, "%s cpu %u: %llu events in the trace + %llu skipped = %llu; "
			"read_events END - START %llu\n", who, cpu, (unsigned long long)c->events,
			(unsigned long long)skipped, (unsigned long long)(c->events + skipped),
			(unsigned long long)read);
		ck_assert_msg(c->end_read >= c->start_read && c->end_skipped >= c->start_skipped,
			      "%s: cpu %u: counters went backwards", who, cpu);
		ck_assert_msg(c->events_at_end == c->events,
			      "%s: cpu %u: %llu events after the last END_OF_TRACE stats", who, cpu,
			      (unsigned long long)(c->events - c->events_at_end));
		ck_assert_msg(c->events + skipped == read,
			      "%s: cpu %u: %llu events + %llu skipped != %llu read", who, cpu,
			      (unsigned long long)c->events, (unsigned long long)skipped,
			      (unsigned long long)read);
		skipped_all += skipped;
	}
	return skipped_all;
}

static void write_text(const char *path, const char *text)
{
	ck_assert_int_eq(tp_write_file(path, text), 0);
}

/*
 * `record` with two linux.ftrace data sources on one instance (what two
 * sessions on one directory are in the daemon: two readers of one drain),
 * one asking for sched_switch, the other for sched_waking, while a thread
 * writes trace_marker lines and a workload switches: each data source skips
 * the other's events and every marker, and accounts for all of them.
 */
START_TEST(test_record_markers_and_second_session)
{
	char cfg[512], out[512], text[2048];
	struct tp_deferred_workload d;
	struct marker_writer m;
	struct tp_trace_summary s;
	struct seq_count seqs[MAX_SEQS];
	uint64_t skipped_a, skipped_b;
	unsigned markers;
	size_t n;

	(void)snprintf(cfg, sizeof(cfg), "%s/two.pbtxt", tmpdir);
	(void)snprintf(out, sizeof(out), "%s/two.pftrace", tmpdir);
	(void)snprintf(text, sizeof(text),
		       "buffers { size_kb: 32768 }\n"
		       "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
		       "  ftrace_events: \"sched/sched_switch\" instance_name: \"%s\" } } }\n"
		       "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
		       "  ftrace_events: \"sched/sched_waking\" instance_name: \"%s\" } } }\n"
		       "duration_ms: 2000\n", fx.instance, fx.instance);
	write_text(cfg, text);

	ck_assert_int_eq(tp_workload_start_deferred(&d, fx.path, "tp-acct-wl", 1), 0);
	markers_start(&m, MARKERS, /* wait_recording= */ true);
	ck_assert_int_eq(tp_record(cfg, out), 0);
	markers = markers_join(&m);
	ck_assert_int_eq(tp_workload_finish_deferred(&d), 0);
	tp_fixture_assert_restored(&fx);

	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	n = count_by_sequence(s.trace, seqs, MAX_SEQS);
	ck_assert_uint_eq(n, 2);
	fprintf(stderr, "%u trace_marker lines written while recording\n", markers);
	ck_assert_msg(markers > 0, "no trace_marker line was written while recording");
	skipped_a = assert_accounted("record ds 1", &seqs[0]);
	skipped_b = assert_accounted("record ds 2", &seqs[1]);
	/* each skips the other's events; and every marker is in one window at least */
	ck_assert_uint_gt(skipped_a, 0);
	ck_assert_uint_gt(skipped_b, 0);
	ck_assert_uint_ge(skipped_a + skipped_b, markers);
	tp_trace_free(&s);
}
END_TEST

/* ---- the last flush is the last read -------------------------------------- */

static Perfetto__Protos__FtraceConfig one_event(char **event)
{
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;

	cfg.ftrace_events = event;
	cfg.n_ftrace_events = 1;
	cfg.instance_name = fx.instance;
	cfg.has_buffer_size_kb = true;
	cfg.buffer_size_kb = 4096;
	return cfg;
}

/* The first @len bytes of @k's trace, counted. */
static void load_sink(struct fx_sink *k, size_t len, const char *name, struct seq_count *ret)
{
	char path[512];
	struct tp_trace_summary s;
	int fd;

	(void)snprintf(path, sizeof(path), "%s/%s.pftrace", tmpdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, k->buf, len), 0);
	close(fd);
	ck_assert_int_eq(tp_trace_load(path, &s), 0);
	ck_assert_uint_eq(count_by_sequence(s.trace, ret, 1), 1);
	tp_trace_free(&s);
}

/*
 * The daemon's order, step by step: A and B share the instance; markers
 * and a workload; A's last flush (tracing stays on: B still records); more
 * markers and switches; then a read for B (what the drain timer or a
 * buffer_percent wake-up does before A's StopDataSource arrives, at once
 * when the daemon was stopped across the end of the session).  A's trace
 * must end at its END stats: before the fix that read put events into A's
 * trace after them, and a CPU held more events than A's read_events
 * difference (2,133 on CPU 0 after a 5 s SIGSTOP under stress-ng).
 */
START_TEST(test_last_flush_is_last_read)
{
	char *ev_a[] = { "sched/sched_switch" }, *ev_b[] = { "sched/sched_waking" };
	Perfetto__Protos__FtraceConfig ca = one_event(ev_a), cb = one_event(ev_b);
	struct ftrace_ds *a = NULL, *b = NULL;
	struct fx_sink ka, kb;
	struct seq_count sa, sb;
	struct marker_writer m;
	struct tp_workload wl;
	unsigned before, after;
	size_t a_len;
	uint64_t skipped_a, skipped_b;
	char *err = NULL;

	fx_sink_init(&ka, 256u << 20);
	fx_sink_init(&kb, 256u << 20);
	ck_assert_int_ge(loop_new(&g_loop), 0);
	ck_assert_int_eq(ftrace_host_new(g_loop, &g_host), 0);
	ck_assert_msg(ftrace_ds_setup(g_host, 1, 1, &ca, &ka.sink, NULL, NULL, &a, &err) == 0, "%s", err ? err : "");
	ck_assert_msg(ftrace_ds_setup(g_host, 2, 2, &cb, &kb.sink, NULL, NULL, &b, &err) == 0, "%s", err ? err : "");
	ck_assert_int_eq(ftrace_ds_start(a), 0);
	ck_assert_int_eq(ftrace_ds_start(b), 0);

	/* both started: every marker from here is in both windows */
	markers_start(&m, MARKERS, /* wait_recording= */ false);
	before = markers_join(&m);
	ck_assert_uint_eq(before, MARKERS);
	ck_assert_int_eq(tp_workload_start("tp-acct-last", 1, 50, &wl), 0);
	ck_assert_int_eq(tp_workload_wait(&wl), 0);

	ck_assert_int_eq(ftrace_ds_flush_last(a), 0);

	/* after A's last flush: tracing is on for B, and the kernel keeps writing */
	markers_start(&m, MARKERS, /* wait_recording= */ false);
	after = markers_join(&m);
	ck_assert_uint_eq(after, MARKERS);
	ck_assert_int_eq(tp_workload_start("tp-acct-last", 1, 50, &wl), 0);
	ck_assert_int_eq(tp_workload_wait(&wl), 0);
	/* a read for B, which A must not take part in */
	ck_assert_int_eq(ftrace_ds_flush(b), 0);
	a_len = fx_sink_len(&ka);
	/* and a later flush of A writes nothing: no new END sample of reads it did not see */
	ck_assert_int_eq(ftrace_ds_flush(a), 0);
	ck_assert_uint_eq(fx_sink_len(&ka), a_len);
	ck_assert_int_eq(ftrace_ds_flush_final(b), 0);

	ftrace_ds_free(a);
	ftrace_ds_free(b);
	g_host = ftrace_host_free(g_host);
	g_loop = loop_unref(g_loop);
	load_sink(&ka, a_len, "last-a", &sa);
	load_sink(&kb, fx_sink_len(&kb), "last-b", &sb);
	fx_sink_done(&ka);
	fx_sink_done(&kb);

	skipped_a = assert_accounted("A", &sa);
	skipped_b = assert_accounted("B", &sb);
	ck_assert_uint_eq(sa.pairs, 1);
	/* A skipped the first markers (and B's wakings), B both batches */
	ck_assert_uint_ge(skipped_a, before);
	ck_assert_uint_ge(skipped_b, before + after);
	tp_fixture_assert_restored(&fx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ftrace_accounting");
	TCase *tc = tcase_create("ftrace_accounting");

	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	if (!mkdtemp(tmpdir))
		return 1;
	n_cpus = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_record_markers_and_second_session);
	tcase_add_test(tc, test_last_flush_is_last_read);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
