/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon beside a tracing service in another process, on a socket path
 * from PERFETTO_PRODUCER_SOCK_NAME: a recording; the service killed
 * mid-trace and started again (the daemon restores tracefs, reconnects and
 * the second recording is complete); SIGTERM; and two concurrent sessions
 * with different events, each checked from its own trace file.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "probes/ds/ds.h"
#include "protos/pbtxt.h"
#include "probes/producer.h"
#include "service/service.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

static char tmpdir[] = "/tmp/tp-daemon-XXXXXX";
static char bin_daemon[4096], bin_service[4096];
static struct tp_fixture fx;
static char sock[512], state_dir[512];
/*
 * The daemon and the service of the running test: every wait ends as soon
 * as one of them exits, with its status, instead of at a deadline that a
 * loaded machine can miss (tp_assert_wait()).
 */
static struct tp_watch watch;

static void setup(void)
{
	memset(&watch, 0, sizeof(watch));
	ck_assert_int_eq(tp_fixture_setup(&fx, "tp-daemon"), 0);
	snprintf(sock, sizeof(sock), "%s/producer.sock", tmpdir);
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
}

static void teardown(void)
{
	tp_fixture_teardown(&fx);
}

static bool tracefs_restored(void)
{
	return tp_fixture_restored(&fx);
}

static bool restored(void *unused)
{
	return tracefs_restored();
}

static bool tracing_in_instance(void *unused)
{
	return tp_event_enabled(fx.path, "sched_switch");
}

/* until the daemon has taken @n more events out of the instance than now */
static void wait_read_events(uint64_t n, const char *what)
{
	struct tp_read_events_goal g = { .dir = fx.path, .n = tp_read_events(fx.path) + n };

	tp_assert_wait(&watch, tp_read_events_reached, &g, what);
}

/*
 * Every session of these tests is stopped by the test (SIGTERM, SIGKILL),
 * once what it waits for has happened; duration_ms is only a bound past
 * every wait, so that a slow start on a busy machine never ends a session
 * before the test is done with it.
 */
#define SESSION_BOUND_MS (3u * TP_WAIT_HANG_MS)

/*
 * trace_all_machines: over TCP the daemon says it is a machine of its own
 * (SetPeerIdentity), and since v54 such a producer gets data sources only
 * when the config asks; set everywhere, it changes nothing on UNIX sockets.
 */
static void write_config(const char *path, const char *events, unsigned duration_ms)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "buffers { size_kb: 16384 fill_policy: DISCARD }\n"
		   "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		   "  ftrace_config { %s instance_name: \"%s\" } } }\n"
		   "duration_ms: %u\n"
		   "trace_all_machines: true\n",
		events, fx.instance, duration_ms);
	fclose(f);
}

static pid_t spawn_service(const char *cfg, const char *out)
{
	pid_t pid = tp_spawn_service(bin_service, sock, cfg, out, false);

	ck_assert_int_gt(pid, 0);
	tp_watch_add(&watch, "the service", pid);
	return pid;
}

static pid_t spawn_daemon(void)
{
	pid_t pid = tp_spawn_daemon(bin_daemon, sock, state_dir, -1, NULL);

	ck_assert_int_gt(pid, 0);
	tp_watch_add(&watch, "the daemon", pid);
	return pid;
}

static void check_trace(const char *out, uint64_t min_events)
{
	struct tp_trace_summary s;

	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	ck_assert(s.has_trace_config);
	ck_assert_msg(s.events >= min_events, "%s: %llu events", out, (unsigned long long)s.events);
	ck_assert_uint_ge(s.stats_pairs, 1);
	for (unsigned c = 0; c < s.n_cpus; c++)
		ck_assert(!s.cpu[c].ts_decreased);
	tp_trace_free(&s);
}

/*
 * Every event the daemon read from its instance is in the trace, CPU by
 * CPU: read_events END - START in the FtraceStats pair, less what the
 * daemon says it read and did not write.  A CommitData over the IPC limit
 * would break the connection and show as a shortfall.  The one shortfall
 * allowed is a counted one: over TCP the shared memory is the daemon's own,
 * and when the service falls behind (a busy machine) its writers drop
 * packets and flag the next one (previous_packet_dropped).
 */
static void check_exact(const char *out)
{
	unsigned n_cpus = (unsigned)sysconf(_SC_NPROCESSORS_CONF), short_cpus = 0;
	struct tp_trace_summary s;

	ck_assert_uint_le(n_cpus, TP_MAX_CPUS);
	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	ck_assert_uint_ge(s.stats_pairs, 1);
	for (unsigned c = 0; c < n_cpus; c++) {
		const struct tp_cpu_summary *cs = &s.cpu[c];
		uint64_t read = cs->end_read - cs->start_read, skipped = cs->end_skipped - cs->start_skipped;

		fprintf(stderr, "cpu %u: %llu events in the trace, read_events END-START %llu, skipped %llu\n", c,
			(unsigned long long)cs->events, (unsigned long long)read, (unsigned long long)skipped);
		ck_assert_msg(cs->events + skipped <= read, "cpu %u: %llu events in the trace (+%llu skipped), "
			      "more than the kernel handed out (%llu)", c, (unsigned long long)cs->events,
			      (unsigned long long)skipped, (unsigned long long)read);
		short_cpus += cs->events + skipped < read;
		ck_assert_uint_eq(cs->lost_bundles, 0);
	}
	fprintf(stderr, "%u CPUs short, %llu packets flagged after a drop\n", short_cpus,
		(unsigned long long)s.packets_with_loss_flag);
	ck_assert_msg(short_cpus == 0 || s.packets_with_loss_flag > 0,
		      "%u CPUs lost events and no packet says so", short_cpus);
	tp_trace_free(&s);
}

/* Collects the service manager notifications the daemon sends. */
static int notify_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	(void)unlink(path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/*
 * Waits for a datagram containing @what, appending all it saw to @log; the
 * test fails at once if a watched process exits first (after reading what
 * it sent before it went), or after TP_WAIT_HANG_MS without it.
 */
static void notify_wait(int fd, const char *what, char *log, size_t log_len)
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)TP_WAIT_HANG_MS * 1000000u;
	char why[256] = "";

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		bool gone = tp_watch_exited(&watch, why, sizeof(why));
		char buf[256];
		ssize_t n;

		if (poll(&p, 1, gone ? 0 : 50) <= 0) {
			if (gone)
				ck_abort_msg("no %s: %s; seen: %s", what, why, log);
			if (now_ns(CLOCK_MONOTONIC) >= deadline)
				ck_abort_msg("no %s within %u s; seen: %s", what, TP_WAIT_HANG_MS / 1000, log);
			continue;
		}
		n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		if (strlen(log) + (size_t)n + 2 < log_len) {
			strcat(log, buf);
			strcat(log, "|");
		}
		if (strstr(buf, what))
			return;
	}
}

static bool event_on(void *event)
{
	return tp_event_enabled(fx.path, event);
}

/*
 * Records until the daemon has taken @n more events out of the instance
 * than when it started recording there, then stops the service (SIGTERM:
 * flush and stop, as when duration_ms expires) and waits for its clean
 * exit.  However long the daemon takes to connect and start, the trace
 * covers at least @n events.
 */
static void record_events_then_stop(pid_t svc, const char *event, uint64_t n)
{
	char what[128];

	tp_assert_wait(&watch, tp_is_recording, fx.path, "the daemon never started recording");
	snprintf(what, sizeof(what), "%s never enabled", event);
	tp_assert_wait(&watch, event_on, (void *)event, what);
	snprintf(what, sizeof(what), "the daemon read fewer than %llu events", (unsigned long long)n);
	wait_read_events(n, what);
	ck_assert_int_eq(kill(svc, SIGTERM), 0);
	ck_assert_int_eq(tp_assert_exit(&watch, svc, "the service did not exit on SIGTERM"), 0);
}

START_TEST(test_daemon_service_restart)
{
	char cfg_first[600], cfg_second[600], out1[600], out2[600], path[600], log[4096] = "";
	pid_t svc, daemon;
	struct tp_workload w;
	int fd;

	snprintf(cfg_first, sizeof(cfg_first), "%s/first.pbtxt", tmpdir);
	snprintf(cfg_second, sizeof(cfg_second), "%s/second.pbtxt", tmpdir);
	snprintf(out1, sizeof(out1), "%s/killed.pftrace", tmpdir);
	snprintf(out2, sizeof(out2), "%s/second.pftrace", tmpdir);
	snprintf(path, sizeof(path), "%s/restart-notify.sock", tmpdir);
	write_config(cfg_first, "ftrace_events: \"sched/sched_switch\"", SESSION_BOUND_MS);
	/* sched_waking only in the second: its being enabled shows the second session runs */
	write_config(cfg_second, "ftrace_events: \"sched/sched_switch\" "
				 "ftrace_events: \"sched/sched_waking\"", SESSION_BOUND_MS);

	ck_assert_int_eq(tp_workload_start("tp-daemon-load", 2, TP_WORKLOAD_UNTIL_STOPPED, &w), 0);
	/* the daemon first, with no service: it waits and retries */
	fd = notify_listen(path);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
	daemon = spawn_daemon();
	ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
	notify_wait(fd, "STATUS=Waiting for the tracing service", log, sizeof(log));
	svc = spawn_service(cfg_first, out1);
	notify_wait(fd, "READY=1", log, sizeof(log));
	tp_assert_wait(&watch, tracing_in_instance, NULL, "the daemon never started tracing");
	/* mid-trace: the daemon is draining the instance */
	wait_read_events(1, "the daemon never read an event");

	/* the service dies mid-trace: sessions stop, tracefs goes back */
	tp_watch_drop(&watch, svc);
	ck_assert_int_eq(kill(svc, SIGKILL), 0);
	ck_assert_int_eq(tp_wait_exit(svc), 128 + SIGKILL);
	tp_assert_wait(&watch, restored, NULL, "tracefs not restored after the service died");
	ck_assert_int_eq(kill(daemon, 0), 0);

	/* a new service on the same path: the daemon reconnects, registers, records a whole trace */
	svc = spawn_service(cfg_second, out2);
	notify_wait(fd, "READY=1", log, sizeof(log));
	record_events_then_stop(svc, "sched_waking", 1000);
	check_trace(out2, 1000);
	tp_assert_wait(&watch, restored, NULL, "tracefs not restored after the session");

	/* SIGTERM: clean exit */
	ck_assert_int_eq(kill(daemon, SIGTERM), 0);
	ck_assert_int_eq(tp_assert_exit(&watch, daemon, "the daemon did not exit on SIGTERM"), 0);
	ck_assert(tracefs_restored());
	(void)tp_workload_stop(&w);
	close(fd);
}
END_TEST

/* Status while waiting, watchdog pings, ready once connected, stopping. */
START_TEST(test_daemon_notifies)
{
	char path[600], cfg[600], out[600], log[4096] = "";
	pid_t svc, daemon;
	int fd;

	snprintf(path, sizeof(path), "%s/notify.sock", tmpdir);
	snprintf(cfg, sizeof(cfg), "%s/notify.pbtxt", tmpdir);
	snprintf(out, sizeof(out), "%s/notify.pftrace", tmpdir);
	write_config(cfg, "ftrace_events: \"sched/sched_switch\"", SESSION_BOUND_MS);
	fd = notify_listen(path);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
	ck_assert_int_eq(setenv("WATCHDOG_USEC", "200000", 1), 0);
	daemon = spawn_daemon();
	ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
	ck_assert_int_eq(unsetenv("WATCHDOG_USEC"), 0);

	/* no service yet: waiting, alive, not ready */
	notify_wait(fd, "STATUS=Waiting for the tracing service", log, sizeof(log));
	notify_wait(fd, "WATCHDOG=1", log, sizeof(log));
	ck_assert_msg(!strstr(log, "READY=1"), "ready before connecting: %s", log);
	svc = spawn_service(cfg, out);
	notify_wait(fd, "READY=1", log, sizeof(log));
	ck_assert_msg(strstr(log, "STATUS=Connected"), "%s", log);
	ck_assert_int_eq(kill(daemon, SIGTERM), 0);
	/* its exit is expected now; what it sent before is still read */
	tp_watch_drop(&watch, daemon);
	notify_wait(fd, "STOPPING=1", log, sizeof(log));
	ck_assert_int_eq(tp_assert_exit(&watch, daemon, "the daemon did not exit on SIGTERM"), 0);
	ck_assert_int_eq(kill(svc, SIGTERM), 0);
	(void)tp_assert_exit(&watch, svc, "the service did not exit on SIGTERM");
	close(fd);
	ck_assert(tracefs_restored());
}
END_TEST

START_TEST(test_daemon_sigterm_mid_session)
{
	char cfg[600], out[600];
	pid_t svc, daemon;

	snprintf(cfg, sizeof(cfg), "%s/sigterm.pbtxt", tmpdir);
	snprintf(out, sizeof(out), "%s/sigterm.pftrace", tmpdir);
	write_config(cfg, "ftrace_events: \"sched/sched_switch\"", SESSION_BOUND_MS);
	svc = spawn_service(cfg, out);
	daemon = spawn_daemon();
	tp_assert_wait(&watch, tracing_in_instance, NULL, "the daemon never started tracing");
	/* the daemon stops: its sessions end, tracefs is restored, the exit is clean */
	ck_assert_int_eq(kill(daemon, SIGTERM), 0);
	ck_assert_int_eq(tp_assert_exit(&watch, daemon, "the daemon did not exit on SIGTERM"), 0);
	ck_assert(tracefs_restored());
	/* no undo state is left behind for a later start to replay */
	{
		char cmd[700];
		snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s' 2>/dev/null)\"", state_dir);
		ck_assert_int_eq(system(cmd), 0);
	}
	ck_assert_int_eq(kill(svc, SIGTERM), 0);
	(void)tp_assert_exit(&watch, svc, "the service did not exit on SIGTERM");
}
END_TEST

START_TEST(test_daemon_over_tcp)
{
	char cfg[600], out[600], tcp[64];
	char saved_sock[512];
	pid_t svc, daemon;
	struct tp_workload w;

	/* no fd passing on TCP: the shared memory is emulated inside CommitData */
	snprintf(tcp, sizeof(tcp), "127.0.0.1:%d", 20000 + (int)(getpid() % 20000));
	snprintf(saved_sock, sizeof(saved_sock), "%s", sock);
	snprintf(sock, sizeof(sock), "%s", tcp);
	snprintf(cfg, sizeof(cfg), "%s/tcp.pbtxt", tmpdir);
	snprintf(out, sizeof(out), "%s/tcp.pftrace", tmpdir);
	write_config(cfg, "ftrace_events: \"sched/sched_switch\" "
			  "ftrace_events: \"sched/sched_waking\"", SESSION_BOUND_MS);
	ck_assert_int_eq(tp_workload_start("tp-tcp", 2, TP_WORKLOAD_UNTIL_STOPPED, &w), 0);
	svc = spawn_service(cfg, out);
	daemon = spawn_daemon();
	/* under load: 100,000 events at the workload's full rate go through CommitData */
	record_events_then_stop(svc, "sched_waking", 100000);
	check_trace(out, 100000);
	check_exact(out);
	ck_assert_int_eq(kill(daemon, SIGTERM), 0);
	ck_assert_int_eq(tp_assert_exit(&watch, daemon, "the daemon did not exit on SIGTERM"), 0);
	ck_assert(tracefs_restored());
	(void)tp_workload_stop(&w);
	snprintf(sock, sizeof(sock), "%s", saved_sock);
}
END_TEST

/* ---- two sessions at once, service and producer in this process -------- */

/*
 * The test drives the two sessions by what tracefs shows, not by their
 * durations or by time: an emulated guest takes seconds to set one up, and a
 * busy machine may give the drain little CPU, so A is stopped once the
 * instance's readers have taken TWO_OVERLAP_EVENTS events out of it while
 * both sessions were on (the ping-pong workload makes switches and wakings
 * in about equal numbers, so each trace gets thousands), and B once
 * TWO_AFTER_EVENTS more were read after A ended.
 */
#define TWO_OVERLAP_EVENTS 20000u
#define TWO_AFTER_EVENTS 2000u
#define TWO_TICK_USEC (100 * 1000ull)

struct two {
	struct loop *e;
	struct svc_session *a, *b;
	int done;
	bool both_on, a_over;
	uint64_t read_at_both, read_at_a_done;  /* tp_read_events() when each was seen */
	char events_after_first[4096];
};

static bool instance_has_event(const char *name)
{
	_cleanup_free_ char *events = NULL;
	char path[300];

	snprintf(path, sizeof(path), "%s/set_event", fx.path);
	return read_full_file_at(AT_FDCWD, path, 1 << 16, &events, NULL) == 0 && strstr(events, name);
}

static int two_tick(struct loop_source *src, uint64_t usec, void *userdata)
{
	struct two *t = userdata;
	uint64_t read = tp_read_events(fx.path);

	if (t->done == 0 && !t->both_on && instance_has_event("sched_switch") &&
	    instance_has_event("sched_waking")) {
		t->both_on = true;
		t->read_at_both = read;
	}
	if (t->done == 0 && t->both_on && read - t->read_at_both >= TWO_OVERLAP_EVENTS)
		(void)svc_session_stop(t->a);
	if (t->done == 1 && !t->a_over) {
		t->a_over = true;
		t->read_at_a_done = read;
	}
	if (t->done == 1 && read - t->read_at_a_done >= TWO_AFTER_EVENTS)
		(void)svc_session_stop(t->b);
	if (t->done < 2) {
		ck_assert_int_ge(loop_source_set_time(src, usec + TWO_TICK_USEC), 0);
		ck_assert_int_ge(loop_source_set_enabled(src, LOOP_ONESHOT), 0);
	}
	return 0;
}

static void on_session_done(struct svc_session *ss, int error, void *userdata)
{
	struct two *t = userdata;
	char path[300];
	_cleanup_free_ char *events = NULL;

	ck_assert_int_eq(error, 0);
	if (t->done++ == 0) {
		/* A is over (B ends only after it): only B's events stay on */
		ck_assert_ptr_eq(ss, t->a);
		snprintf(path, sizeof(path), "%s/set_event", fx.path);
		if (read_full_file_at(AT_FDCWD, path, 1 << 16, &events, NULL) == 0)
			snprintf(t->events_after_first, sizeof(t->events_after_first), "%s", events);
	} else {
		(void)loop_exit(t->e, 0);
	}
}

static Perfetto__Protos__TraceConfig *config(const char *event, unsigned ms)
{
	char text[1024], err[256];
	ProtobufCMessage *m = NULL;

	snprintf(text, sizeof(text),
		 "buffers { size_kb: 16384 fill_policy: DISCARD }\n"
		 "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		 "  ftrace_config { ftrace_events: \"%s\" instance_name: \"%s\" } } }\n"
		 "duration_ms: %u\n",
		 event, fx.instance, ms);
	ck_assert_int_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text),
				     &m, err, sizeof(err)), 0);
	return (Perfetto__Protos__TraceConfig *)m;
}

START_TEST(test_two_sessions)
{
	const struct svc_session_hooks hooks = { .done = on_session_done };
	struct two t = {};
	struct svc *svc = NULL;
	void **shared = NULL;
	struct producer *p = NULL;
	struct svc_session *a = NULL, *b = NULL;
	struct loop_source *tick = NULL;
	/* Durations only as a bound: two_tick() stops both. */
	Perfetto__Protos__TraceConfig *cfg_a = config("sched/sched_switch", SESSION_BOUND_MS);
	Perfetto__Protos__TraceConfig *cfg_b = config("sched/sched_waking", SESSION_BOUND_MS);
	struct tp_trace_summary sa, sb;
	struct tp_workload w;
	char out_a[600], out_b[600];
	int sv[2], fd_a, fd_b;

	snprintf(out_a, sizeof(out_a), "%s/a.pftrace", tmpdir);
	snprintf(out_b, sizeof(out_b), "%s/b.pftrace", tmpdir);
	fd_a = open(out_a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	fd_b = open(out_b, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert(fd_a >= 0 && fd_b >= 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_ge(loop_new(&t.e), 0);
	ck_assert_int_ge(svc_new(t.e, NULL, &svc), 0);
	ck_assert_int_ge(svc_adopt_connection(svc, sv[1]), 0);
	setenv("TRACED_PROBES_STATE_DIR", state_dir, 1);
	ck_assert_int_ge(ds_shared_new_all(t.e, &shared), 0);
	ck_assert_int_ge(producer_new(t.e, ds_registry, shared, NULL, NULL, &p), 0);
	ck_assert_int_ge(producer_adopt_fd(p, sv[0]), 0);
	ck_assert_int_ge(svc_session_start(svc, cfg_a, fd_a, &hooks, &t, &a), 0);
	ck_assert_int_ge(svc_session_start(svc, cfg_b, fd_b, &hooks, &t, &b), 0);
	t.a = a;
	t.b = b;
	ck_assert_int_eq(tp_workload_start("tp-two", 2, TP_WORKLOAD_UNTIL_STOPPED, &w), 0);
	ck_assert_int_ge(loop_add_time_relative(t.e, &tick, CLOCK_MONOTONIC, TWO_TICK_USEC, 0, two_tick, &t), 0);
	ck_assert_int_ge(loop_run(t.e), 0);
	ck_assert_int_eq(t.done, 2);
	tick = loop_source_unref(tick);

	/* stopping the first left the second's event on, and only that */
	ck_assert_ptr_null(strstr(t.events_after_first, "sched_switch"));
	ck_assert_ptr_nonnull(strstr(t.events_after_first, "sched_waking"));

	a = svc_session_free(a);
	b = svc_session_free(b);
	p = producer_free(p);
	shared = ds_shared_free_all(shared);
	svc = svc_free(svc);
	t.e = loop_unref(t.e);
	close(fd_a);
	close(fd_b);
	(void)tp_workload_stop(&w);
	ck_assert(tracefs_restored());

	/* each trace has what its session asked for, and nothing else */
	ck_assert_int_eq(tp_trace_load(out_a, &sa), 0);
	ck_assert_int_eq(tp_trace_load(out_b, &sb), 0);
	for (unsigned c = 0; c < TP_MAX_CPUS; c++) {
		ck_assert_uint_eq(sa.cpu[c].wakings, 0);
		ck_assert_uint_eq(sb.cpu[c].switches, 0);
	}
	ck_assert_uint_gt(sa.events, 1000);
	ck_assert_uint_gt(sb.events, 1000);
	tp_trace_free(&sa);
	tp_trace_free(&sb);
	protobuf_c_message_free_unpacked(&cfg_a->base, NULL);
	protobuf_c_message_free_unpacked(&cfg_b->base, NULL);
}
END_TEST

int main(void)
{
	const char *build = getenv("TP_BUILD_ROOT");
	Suite *s;
	TCase *tc;

	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	if (!build || !mkdtemp(tmpdir))
		return 1;
	snprintf(bin_daemon, sizeof(bin_daemon), "%s/probes/traced-probes", build);
	snprintf(bin_service, sizeof(bin_service), "%s/tests/tp-test-service", build);
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("daemon");
	tc = tcase_create("daemon");
	tcase_add_checked_fixture(tc, setup, teardown);
	/* a bound above every wait of a test, which are TP_WAIT_HANG_MS each */
	tcase_set_timeout(tc, 4 * TP_WAIT_HANG_MS / 1000);
	tcase_add_test(tc, test_daemon_service_restart);
	tcase_add_test(tc, test_daemon_sigterm_mid_session);
	tcase_add_test(tc, test_daemon_notifies);
	tcase_add_test(tc, test_two_sessions);
	tcase_add_test(tc, test_daemon_over_tcp);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
