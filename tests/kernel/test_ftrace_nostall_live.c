/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One session's buffer resize stalls no other session: an ordinary sched
 * session records in one instance while a second session asks for a
 * 1 GiB-per-CPU buffer in another.  The resize runs off the loop, so the
 * loop (service and producer alike, in this process) keeps turning and the
 * first session's drain keeps reading while it lasts; the first session
 * loses nothing, the second starts once its buffer is ready, and both
 * instances are put back as found.
 */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "probes/ds/ds.h"
#include "probes/producer.h"
#include "protos/pbtxt.h"
#include "service/service.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

/* The loop's heartbeat while the big setup runs. */
#define TICK_USEC (10 * 1000ull)
#define BIG_KB 1048576u

static char tmpdir[] = "/tmp/tp-nostall-XXXXXX";
static char state_dir[512];
static struct tp_fixture small, big;

static void setup(void)
{
	ck_assert_int_eq(tp_fixture_setup(&small, "tp-nostall"), 0);
	ck_assert_int_eq(tp_fixture_setup(&big, "tp-nostall-big"), 0);
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
}

static void teardown(void)
{
	tp_fixture_teardown(&big);
	tp_fixture_teardown(&small);
}

struct run {
	struct loop *e;
	struct svc *svc;
	struct svc_session *v, *b;      /* the victim, the big one */
	const Perfetto__Protos__TraceConfig *cfg_v, *cfg_b;
	int fd_v, fd_b;
	/* -1: producer connecting, 0: victim starting, 1: big setting up, 2: both recording, 3: stopping */
	int phase;
	int done;
	int stats_fd[TP_MAX_CPUS];      /* the victim's per-CPU stats, opened before the resize */
	unsigned n_stats;
	uint64_t started_at, b_asked, b_started, last_tick, max_gap;
	uint64_t read_prev, advances;   /* victim read_events, and how often it rose during the resize */
	bool v_started;
};

/*
 * read_events of the victim through descriptors opened beforehand: an
 * open() of any tracefs file waits for the resize, a read() does not.
 */
static uint64_t victim_read_events(struct run *t)
{
	uint64_t total = 0;

	for (unsigned i = 0; i < t->n_stats; i++) {
		char buf[1024];
		ssize_t n = pread(t->stats_fd[i], buf, sizeof(buf) - 1, 0);
		const char *at;
		uint64_t v;

		if (n <= 0)
			continue;
		buf[n] = 0;
		at = strstr(buf, "read events:");
		if (at && sscanf(at, "read events: %" SCNu64, &v) == 1)
			total += v;
	}
	return total;
}

static void on_all_started(struct svc_session *ss, void *userdata)
{
	struct run *t = userdata;
	uint64_t now = now_ns(CLOCK_MONOTONIC) / 1000;

	if (ss == t->v) {
		t->v_started = true;
		return;
	}
	/* the stretch since the last tick counts too */
	t->max_gap = MAX(t->max_gap, now - t->last_tick);
	t->b_started = now;
	t->phase = 2;
}

static void on_done(struct svc_session *ss, int error, void *userdata)
{
	struct run *t = userdata;

	ck_assert_int_eq(error, 0);
	if (++t->done == 2)
		(void)loop_exit(t->e, 0);
}

static int tick(struct loop_source *src, uint64_t usec, void *userdata)
{
	const struct svc_session_hooks hooks = { .done = on_done, .all_started = on_all_started };
	struct run *t = userdata;
	uint64_t re;

	ck_assert_msg(usec - t->started_at < TP_WAIT_HANG_MS * 1000ull, "hung in phase %d", t->phase);
	if (t->phase == -1 && svc_data_source_registered(t->svc, "linux.ftrace")) {
		/* the producer is in: a session started before would have no data source yet */
		t->phase = 0;
		ck_assert_int_ge(svc_session_start(t->svc, t->cfg_v, t->fd_v, &hooks, t, &t->v), 0);
	} else if (t->phase == 0 && t->v_started && victim_read_events(t) > 0) {
		/* the victim drains: now the big one */
		t->read_prev = victim_read_events(t);
		t->b_asked = t->last_tick = usec;
		t->phase = 1;
		ck_assert_int_ge(svc_session_start(t->svc, t->cfg_b, t->fd_b, &hooks, t, &t->b), 0);
	} else if (t->phase == 1) {
		t->max_gap = MAX(t->max_gap, usec - t->last_tick);
		re = victim_read_events(t);
		if (re > t->read_prev)
			t->advances++;
		t->read_prev = re;
	} else if (t->phase == 2 && victim_read_events(t) > t->read_prev && tp_read_events(big.path) > 0) {
		/* both record: stop them (no file is opened before the resize is over) */
		t->phase = 3;
		(void)svc_session_stop(t->v);
		(void)svc_session_stop(t->b);
	}
	t->last_tick = usec;
	if (t->done < 2) {
		ck_assert_int_ge(loop_source_set_time(src, usec + TICK_USEC), 0);
		ck_assert_int_ge(loop_source_set_enabled(src, LOOP_ONESHOT), 0);
	}
	return 0;
}

/*
 * The gap a late start leaves, as trace_processor reads it: the service's
 * tracing_started and all_data_sources_started events (its metadata
 * tracing_started_ns and all_data_source_started_ns), in ns.
 */
static uint64_t start_gap_ns(const struct tp_trace_summary *s)
{
	uint64_t started = tp_trace_service_event_ts(s,
		PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_STARTED);
	uint64_t all = tp_trace_service_event_ts(s,
		PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_ALL_DATA_SOURCES_STARTED);

	ck_assert_uint_gt(started, 0);
	ck_assert_uint_ge(all, started);
	return all - started;
}

static Perfetto__Protos__TraceConfig *config(const char *instance, const char *extra)
{
	char text[1024], err[256];
	ProtobufCMessage *m = NULL;

	snprintf(text, sizeof(text),
		 "buffers { size_kb: 32768 fill_policy: DISCARD }\n"
		 "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		 "  ftrace_config { ftrace_events: \"sched/sched_switch\" instance_name: \"%s\" %s } } }\n"
		 "duration_ms: 100000\n",
		 instance, extra);
	ck_assert_int_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text),
				     &m, err, sizeof(err)), 0);
	return (Perfetto__Protos__TraceConfig *)m;
}

START_TEST(test_big_resize_stalls_nobody)
{
	char extra_b[64], out_v[600], out_b[600];
	Perfetto__Protos__TraceConfig *cfg_v = config(small.instance, "buffer_size_kb: 4096 drain_period_ms: 20");
	Perfetto__Protos__TraceConfig *cfg_b;
	struct svc_session_stats st_v, st_b;
	struct tp_trace_summary sv, sb;
	struct loop_source *ticker = NULL;
	struct producer *p = NULL;
	struct tp_workload w;
	void **shared = NULL;
	struct run t = { .phase = -1 };
	uint64_t lost = 0;
	int sv_pair[2], fd_v;

	snprintf(extra_b, sizeof(extra_b), "buffer_size_kb: %u", BIG_KB);
	cfg_b = config(big.instance, extra_b);
	snprintf(out_v, sizeof(out_v), "%s/victim.pftrace", tmpdir);
	snprintf(out_b, sizeof(out_b), "%s/big.pftrace", tmpdir);
	fd_v = open(out_v, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	t.fd_b = open(out_b, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert(fd_v >= 0 && t.fd_b >= 0);
	t.cfg_b = cfg_b;
	t.cfg_v = cfg_v;
	t.fd_v = fd_v;
	for (unsigned c = 0; c < TP_MAX_CPUS; c++) {
		char path[512];
		int fd;

		snprintf(path, sizeof(path), "%s/per_cpu/cpu%u/stats", small.path, c);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		t.stats_fd[t.n_stats++] = fd;
	}
	ck_assert_uint_gt(t.n_stats, 0);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv_pair), 0);
	ck_assert_int_ge(loop_new(&t.e), 0);
	ck_assert_int_ge(svc_new(t.e, NULL, &t.svc), 0);
	ck_assert_int_ge(svc_adopt_connection(t.svc, sv_pair[1]), 0);
	setenv("TRACED_PROBES_STATE_DIR", state_dir, 1);
	/*
	 * System-page sub-buffers: the kernel then allocates 1 GiB a page at a
	 * time, which takes long enough to show a stalled loop.  With 64 KiB
	 * ones (our default) it took 0.1 s here once the memory had such blocks
	 * free, too short to tell a stalled loop from a free one.
	 */
	setenv("TRACED_PROBES_FTRACE_SUBBUF_KB", "4", 1);
	ck_assert_int_ge(ds_shared_new_all(t.e, &shared), 0);
	ck_assert_int_ge(producer_new(t.e, ds_registry, shared, NULL, NULL, &p), 0);
	ck_assert_int_ge(producer_adopt_fd(p, sv_pair[0]), 0);
	ck_assert_int_eq(tp_workload_start("tp-nostall", 1, TP_WORKLOAD_UNTIL_STOPPED, &w), 0);
	t.started_at = now_ns(CLOCK_MONOTONIC) / 1000;
	ck_assert_int_ge(loop_add_time_relative(t.e, &ticker, CLOCK_MONOTONIC, TICK_USEC, 0, tick, &t), 0);
	ck_assert_int_ge(loop_run(t.e), 0);
	ck_assert_int_eq(t.done, 2);
	ticker = loop_source_unref(ticker);
	(void)tp_workload_stop(&w);

	/* the service never lost the producer: every flush answered */
	ck_assert_int_eq(svc_session_get_stats(t.v, &st_v), 0);
	ck_assert_int_eq(svc_session_get_stats(t.b, &st_b), 0);
	ck_assert_uint_eq(st_v.flushes_timed_out, 0);
	ck_assert_uint_eq(st_b.flushes_timed_out, 0);
	ck_assert_uint_gt(st_b.flushes_acked, 0);

	t.v = svc_session_free(t.v);
	t.b = svc_session_free(t.b);
	p = producer_free(p);
	shared = ds_shared_free_all(shared);
	t.svc = svc_free(t.svc);
	t.e = loop_unref(t.e);
	close(fd_v);
	close(t.fd_b);
	for (unsigned i = 0; i < t.n_stats; i++)
		close(t.stats_fd[i]);
	tp_fixture_assert_restored(&small);
	tp_fixture_assert_restored(&big);

	/* the victim lost nothing; the big one recorded once its buffer was ready */
	ck_assert_int_eq(tp_trace_load(out_v, &sv), 0);
	ck_assert_int_eq(tp_trace_load(out_b, &sb), 0);
	for (unsigned c = 0; c < TP_MAX_CPUS; c++)
		lost += sv.cpu[c].end_overrun - sv.cpu[c].start_overrun + sv.cpu[c].end_dropped;
	fprintf(stderr, "big setup: %.3f s; longest loop stall in it: %.3f s; victim drained %" PRIu64
		" times in it, recorded %" PRIu64 " events, lost %" PRIu64 "; big: %" PRIu64 " events\n",
		(double)(t.b_started - t.b_asked) / 1e6, (double)t.max_gap / 1e6, t.advances, sv.events, lost,
		sb.events);
	ck_assert_uint_gt(sv.events, 0);
	ck_assert_uint_gt(sb.events, 0);
	for (unsigned c = 0; c < TP_MAX_CPUS; c++) {
		ck_assert_uint_eq(sv.cpu[c].end_overrun - sv.cpu[c].start_overrun, 0);
		ck_assert_uint_eq(sv.cpu[c].end_dropped, 0);
		ck_assert_uint_eq(sv.cpu[c].lost_bundles, 0);
	}
	/*
	 * A resize this quick cannot tell a stalled loop from a free one; over
	 * ten ticks, a stalled loop shows as a gap as long as the setup.
	 */
	ck_assert_msg(t.b_started - t.b_asked >= 10 * TICK_USEC, "the %u KiB resize took only %.3f s", BIG_KB,
		      (double)(t.b_started - t.b_asked) / 1e6);
	ck_assert_msg(t.max_gap * 2 < t.b_started - t.b_asked, "the loop stood still %.3f s of the %.3f s setup",
		      (double)t.max_gap / 1e6, (double)(t.b_started - t.b_asked) / 1e6);
	ck_assert_uint_ge(t.advances, 3);
	/* the big session's trace says it started late, by most of its setup */
	ck_assert_uint_ge(start_gap_ns(&sb) * 2, (t.b_started - t.b_asked) * 1000ull);
	tp_trace_free(&sv);
	tp_trace_free(&sb);
	protobuf_c_message_free_unpacked(&cfg_v->base, NULL);
	protobuf_c_message_free_unpacked(&cfg_b->base, NULL);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	if (!mkdtemp(tmpdir))
		return 1;
	s = suite_create("ftrace_nostall");
	tc = tcase_create("nostall");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_big_resize_stalls_nobody);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
