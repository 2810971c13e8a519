/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The page walker against libtraceevent's kbuffer (the oracle) on pages the
 * kernel really wrote: same records, timestamps, event ids, pids and lengths
 * on every page, and the same missed-event counts on pages from a tiny,
 * overrun buffer.  Then the whole parser on the same pages: no parse
 * errors, and every record of an enabled event accounted for.
 *
 * Needs root and tracefs (skips with 77 otherwise).  Works in a tracefs
 * instance of its own, removed at the end even when a check fails.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tracefs.h>
#include <kbuffer.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"

#define INSTANCE "tp_parse_live"
#define MAX_PAGES 16384

static struct tracefs_instance *inst;
static char *inst_dir;
static size_t page_size;
static int n_cpus;
static pid_t owner;

/* Only the process that made the instance removes it: Check's forked test
 * children inherit the atexit hook. */
static void instance_remove(void)
{
	if (getpid() != owner)
		return;
	if (inst) {
		(void)tracefs_trace_off(inst);
		(void)tracefs_instance_destroy(inst);
		tracefs_instance_free(inst);
		inst = NULL;
	}
	if (inst_dir) {
		tracefs_put_tracing_file(inst_dir);
		inst_dir = NULL;
	}
}

static void on_signal(int sig)
{
	instance_remove();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Unchecked fixture: runs in the runner process, so it runs even when a
 * test in a forked child fails. */
static void setup(void)
{
	/* A crashed earlier run may have left ours behind. */
	if (tracefs_instance_exists(INSTANCE)) {
		struct tracefs_instance *old = tracefs_instance_alloc(NULL, INSTANCE);

		if (old) {
			(void)tracefs_instance_destroy(old);
			tracefs_instance_free(old);
		}
	}
	owner = getpid();
	inst = tracefs_instance_create(INSTANCE);
	ck_assert_ptr_nonnull(inst);
	inst_dir = tracefs_instance_get_dir(inst);
	ck_assert_ptr_nonnull(inst_dir);
	atexit(instance_remove);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	page_size = (size_t)getpagesize();
	n_cpus = (int)sysconf(_SC_NPROCESSORS_CONF);
}

static void teardown(void)
{
	instance_remove();
}

static void inst_write(const char *file, const char *val)
{
	ck_assert_int_ge(tracefs_instance_file_write(inst, file, val), 0);
}

/* Ping-pong over two pipes: every round trip is two wakeups and switches. */
static void load(int rounds)
{
	int a[2], b[2];
	pid_t pid;
	char c = 0;

	ck_assert_int_eq(pipe2(a, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(b, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (int i = 0; i < rounds; i++)
			if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	for (int i = 0; i < rounds; i++) {
		ck_assert_int_eq(write(a[1], &c, 1), 1);
		ck_assert_int_eq(read(b[0], &c, 1), 1);
	}
	{
		int status;

		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

struct cpu_pages {
	uint8_t *buf;
	size_t n;
};

/* Drain per_cpu/cpuN/trace_pipe_raw page by page until it is empty. */
static void read_cpu(int cpu, struct cpu_pages *out, size_t max_pages)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/trace_pipe_raw", inst_dir, cpu);
	out->n = 0;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		ck_assert_int_eq(errno, ENOENT); /* CPU not present */
		return;
	}
	if (!out->buf) {
		out->buf = malloc(max_pages * page_size);
		ck_assert_ptr_nonnull(out->buf);
	}
	while (out->n < max_pages) {
		ssize_t r = read(fd, out->buf + out->n * page_size, page_size);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ck_assert(r == 0 || errno == EAGAIN);
			break;
		}
		/* One whole page per read, always. */
		ck_assert_int_eq((size_t)r, page_size);
		out->n++;
	}
	close(fd);
}

struct compare_totals {
	uint64_t pages, records, missed_pages, missed_stored;
	uint64_t by_id_switch, by_id_waking, by_id_runtime;
};

/* Every record of every page: kbuffer and our walker must agree. */
static void compare_page(struct kbuffer *kb, uint8_t *page, struct compare_totals *tot)
{
	struct ftrace_page_header hdr;
	struct ftrace_page_iter it;
	struct ftrace_record rec;
	unsigned long long kts;
	void *kdata;
	int kmissed, r;

	ck_assert_int_eq(ftrace_page_parse_header(page, page_size, 8, &hdr), 0);
	ck_assert_int_ge(kbuffer_load_subbuffer(kb, page), 0);
	kmissed = kbuffer_missed_events(kb);
	if (hdr.missed_events) {
		tot->missed_pages++;
		if (hdr.missed_stored) {
			tot->missed_stored++;
			ck_assert_int_eq(kmissed, (int)hdr.missed_count);
		} else {
			ck_assert_int_eq(kmissed, -1);
		}
	} else {
		ck_assert_int_eq(kmissed, 0);
	}

	ftrace_page_iter_init(&it, page + hdr.header_size, hdr.data_size, hdr.timestamp);
	kdata = kbuffer_read_event(kb, &kts);
	while ((r = ftrace_page_next(&it, &rec)) > 0) {
		int32_t kpid, pid;
		uint16_t kid;

		ck_assert_ptr_nonnull(kdata);
		ck_assert_ptr_eq(kdata, rec.data);
		ck_assert_uint_eq(kts, rec.ts);
		ck_assert_int_eq(kbuffer_event_size(kb), (int)rec.len);
		memcpy(&kid, kdata, 2);
		memcpy(&kpid, (uint8_t *)kdata + 4, 4);
		memcpy(&pid, rec.data + 4, 4);
		ck_assert_uint_eq(kid, rec.event_id);
		ck_assert_int_eq(kpid, pid);
		tot->records++;
		kdata = kbuffer_next_event(kb, &kts);
	}
	/* The kernel's own pages never trip the walker's checks. */
	ck_assert_int_eq(r, 0);
	ck_assert_ptr_null(kdata);
	tot->pages++;
}

static void count_ids(const uint8_t *page, int sw, int wk, int rt, struct compare_totals *tot)
{
	struct ftrace_page_header hdr;
	struct ftrace_page_iter it;
	struct ftrace_record rec;

	ck_assert_int_eq(ftrace_page_parse_header(page, page_size, 8, &hdr), 0);
	ftrace_page_iter_init(&it, page + hdr.header_size, hdr.data_size, hdr.timestamp);
	while (ftrace_page_next(&it, &rec) > 0) {
		tot->by_id_switch += rec.event_id == sw;
		tot->by_id_waking += rec.event_id == wk;
		tot->by_id_runtime += rec.event_id == rt;
	}
}

struct parse_totals {
	uint64_t packets, lost_bundles, compact_switch, compact_waking, generic, errors;
};

/* The full parser over one CPU's pages, decoded. */
static void parse_cpu(struct ftrace_parser *p, int cpu, const struct cpu_pages *cp,
		      struct ftrace_cpu_state *st, struct ftrace_pidset *pids,
		      struct ftrace_pass_stats *stats, struct parse_totals *tot)
{
	struct fx_sink s;
	Perfetto__Protos__Trace *trace;
	int n;

	if (cp->n == 0)
		return;
	fx_sink_init(&s, cp->n * page_size * 2 + 4096);
	n = ftrace_parser_parse_pages(p, (uint32_t)cpu, cp->buf, cp->n, page_size, &s.sink, st,
				      pids, stats);
	ck_assert_int_ge(n, 1);
	ck_assert(!pbw_overflowed(&s.w));
	trace = perfetto__protos__trace__unpack(NULL, fx_sink_len(&s), s.buf);
	ck_assert_ptr_nonnull(trace);
	ck_assert_uint_eq(trace->n_packet, (size_t)n);
	for (size_t i = 0; i < trace->n_packet; i++) {
		Perfetto__Protos__FtraceEventBundle *b = trace->packet[i]->ftrace_events;

		ck_assert_ptr_nonnull(b);
		ck_assert_uint_eq(b->cpu, (uint32_t)cpu);
		tot->lost_bundles += b->has_lost_events && b->lost_events;
		tot->errors += b->n_error;
		tot->generic += b->n_event;
		if (b->compact_sched) {
			tot->compact_switch += b->compact_sched->n_switch_timestamp;
			tot->compact_waking += b->compact_sched->n_waking_timestamp;
			ck_assert_uint_le(b->compact_sched->n_intern_table, 255);
		}
	}
	tot->packets += (uint64_t)n;
	perfetto__protos__trace__free_unpacked(trace, NULL);
	fx_sink_done(&s);
}

static struct ftrace_format_table *table_for_instance(int *sw, int *wk, int *rt)
{
	struct ftrace_format_table *t = NULL;

	ck_assert_int_eq(ftrace_format_table_new(inst_dir, &t), 0);
	ck_assert_uint_eq(ftrace_format_table_commit_size(t), sizeof(long));
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "sched_switch", sw), 0);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "sched_waking", wk), 0);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "sched_stat_runtime", rt), 0);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "no_such_event", NULL), -ENOENT);
	return t;
}

/*
 * @rounds of load per pass, at least @passes passes, and more (up to
 * MAX_PASSES) until the buffer has shown @min_switch sched_switch and
 * @min_waking sched_waking records: how many switches a round trip makes
 * depends on where the scheduler puts the two ends, and on a busy machine
 * a waker often finds its partner still running.  Buffer of @kb KiB per CPU.
 * Returns the totals for the caller's extra checks.
 */
#define MAX_PASSES 40
static void run(const char *kb, int rounds, int passes, uint64_t min_switch, uint64_t min_waking,
		struct compare_totals *ct, struct parse_totals *pt,
		struct ftrace_pass_stats *stats)
{
	struct ftrace_format_table *t;
	struct ftrace_parser *p = NULL;
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state *st;
	struct cpu_pages *cp;
	struct kbuffer *kbuf;
	int sw, wk, rt;

	memset(ct, 0, sizeof(*ct));
	memset(pt, 0, sizeof(*pt));
	memset(stats, 0, sizeof(*stats));
	inst_write("tracing_on", "0");
	inst_write("buffer_size_kb", kb);
	inst_write("trace", "");
	ck_assert_int_eq(tracefs_event_enable(inst, "sched", "sched_switch"), 0);
	ck_assert_int_eq(tracefs_event_enable(inst, "sched", "sched_waking"), 0);
	ck_assert_int_eq(tracefs_event_enable(inst, "sched", "sched_stat_runtime"), 0);

	t = table_for_instance(&sw, &wk, &rt);
	ck_assert_int_eq(ftrace_parser_new(t, NULL, &p), 0);
	ck_assert_int_eq(ftrace_parser_enable(p, sw), 0);
	ck_assert_int_eq(ftrace_parser_enable(p, wk), 0);
	ck_assert_int_eq(ftrace_parser_enable(p, rt), 0);
	ck_assert(ftrace_parser_compact_sched_active(p));
	ck_assert_int_eq(ftrace_pidset_new(1 << 16, &pids), 0);
	st = calloc((size_t)n_cpus, sizeof(*st));
	cp = calloc((size_t)n_cpus, sizeof(*cp));
	kbuf = kbuffer_alloc(KBUFFER_LSIZE_SAME_AS_HOST, KBUFFER_ENDIAN_SAME_AS_HOST);
	ck_assert(st && cp && kbuf);

	for (int pass = 0; pass < passes || ((ct->by_id_switch < min_switch ||
					       ct->by_id_waking < min_waking) &&
					      pass < MAX_PASSES);
	     pass++) {
		inst_write("tracing_on", "1");
		load(rounds);
		/* Freeze the buffer so that the read sees a fixed set of pages. */
		inst_write("tracing_on", "0");
		for (int cpu = 0; cpu < n_cpus; cpu++) {
			read_cpu(cpu, &cp[cpu], MAX_PAGES);
			for (size_t i = 0; i < cp[cpu].n; i++) {
				compare_page(kbuf, cp[cpu].buf + i * page_size, ct);
				count_ids(cp[cpu].buf + i * page_size, sw, wk, rt, ct);
			}
			parse_cpu(p, cpu, &cp[cpu], &st[cpu], pids, stats, pt);
		}
		ftrace_pidset_clear(pids);
	}

	for (int cpu = 0; cpu < n_cpus; cpu++)
		free(cp[cpu].buf);
	free(cp);
	free(st);
	kbuffer_free(kbuf);
	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
	inst_write("events/enable", "0");
}

START_TEST(test_walker_matches_kbuffer)
{
	struct compare_totals ct;
	struct parse_totals pt;
	struct ftrace_pass_stats stats;

	/* Passes of 5000 round trips until >= 20000 switches and 5000
	 * wakings came out; a pass is well inside 8 MiB per CPU. */
	run("8192", 5000, 2, 20000, 5000, &ct, &pt, &stats);
	ck_assert_uint_gt(ct.pages, 10);
	ck_assert_uint_ge(ct.by_id_switch, 20000);
	ck_assert_uint_ge(ct.by_id_waking, 5000);
	ck_assert_uint_gt(ct.by_id_runtime, 0);
	ck_assert_uint_eq(ct.missed_pages, 0);
	/* Everything enabled came out, compacted or generic, and the real
	 * kernel never produces a parse error. */
	ck_assert_uint_eq(pt.errors, 0);
	ck_assert_uint_eq(stats.parse_errors_mask, 0);
	ck_assert_uint_eq(pt.compact_switch, ct.by_id_switch);
	ck_assert_uint_eq(pt.compact_waking, ct.by_id_waking);
	ck_assert_uint_eq(pt.generic, ct.by_id_runtime);
	ck_assert_uint_eq(stats.records, ct.records);
	ck_assert_uint_eq(stats.events, ct.by_id_switch + ct.by_id_waking + ct.by_id_runtime);
	ck_assert_uint_eq(stats.pages, ct.pages);
	ck_assert_uint_eq(pt.lost_bundles, ct.missed_pages);
}
END_TEST

START_TEST(test_tiny_buffer_missed_events)
{
	struct compare_totals ct;
	struct parse_totals pt;
	struct ftrace_pass_stats stats;

	/* A page or two per CPU against tens of thousands of events: the
	 * writer laps the reader and the pages say so. */
	run("4", 20000, 4, 0, 0, &ct, &pt, &stats);
	fprintf(stderr, "tiny buffer: %lu pages, %lu flagged, %lu with a stored count, %lu events lost\n",
		(unsigned long)ct.pages, (unsigned long)ct.missed_pages,
		(unsigned long)ct.missed_stored, (unsigned long)stats.lost_events);
	ck_assert_uint_gt(ct.pages, 0);
	ck_assert_uint_gt(ct.missed_pages, 0);
	ck_assert_uint_eq(stats.lost_pages, ct.missed_pages);
	ck_assert_uint_eq(pt.lost_bundles, ct.missed_pages);
	ck_assert_uint_eq(pt.errors, 0);
	ck_assert(stats.lost_events > 0 || stats.lost_unknown);
	ck_assert_uint_eq(pt.compact_switch, ct.by_id_switch);
}
END_TEST

static bool tracefs_ready(void)
{
	struct stat sb;

	if (stat("/sys/kernel/tracing/trace", &sb) == 0)
		return true;
	(void)mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
	return stat("/sys/kernel/tracing/trace", &sb) == 0;
}

int main(void)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	if (geteuid() != 0 || !tracefs_ready()) {
		fprintf(stderr, "skipped: needs root and tracefs\n");
		return 77;
	}
	s = suite_create("ftrace_parse_live");
	tc = tcase_create("kbuffer");
	tcase_set_timeout(tc, 240);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_walker_matches_kbuffer);
	tcase_add_test(tc, test_tiny_buffer_missed_events);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	instance_remove();
	return failed ? 1 : 0;
}
