/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The FtraceConfig options that change directory-wide tracefs state, on the
 * real kernel and in a private instance: syscall_events (a kernel filter on
 * raw_syscalls), tids_to_trace (set_event_pid), tracing_cpumask and
 * tracefs_options.  Each is checked while a recording runs, and tracefs is
 * compared byte for byte afterwards: after a normal end, and after SIGKILL
 * followed by crash recovery.  Also: exclusive sessions refuse company, and
 * hostile values get a clear error, never a path or a stall.
 */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_record.h"
#include "util/util.h"

static char tmpdir[] = "/tmp/tp-ftopt-XXXXXX";
static char state_dir[600];
static struct tp_fixture fx;
static char *feat_before, *top_feat_before;
static pid_t child;     /* a recording a failed test may leave running */

static void setup(void)
{
	ck_assert_int_eq(tp_fixture_setup(&fx, "tp-ftopt"), 0);
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
	setenv(FTRACE_STATE_DIR_ENV, state_dir, 1);
	feat_before = tp_feature_snapshot(fx.path);
	top_feat_before = tp_feature_snapshot(TP_TRACEFS);
	ck_assert_ptr_nonnull(feat_before);
}

static void teardown(void)
{
	if (child > 0) {
		(void)kill(child, SIGKILL);
		(void)tp_wait_exit(child);
		child = 0;
	}
	(void)ftrace_host_recover(state_dir);
	tp_fixture_teardown(&fx);
	free(feat_before);
	free(top_feat_before);
}

static bool features_restored(void)
{
	_cleanup_free_ char *a = tp_feature_snapshot(fx.path), *b = tp_feature_snapshot(TP_TRACEFS);

	return a && b && strcmp(a, feat_before) == 0 && strcmp(b, top_feat_before) == 0 && tp_fixture_restored(&fx);
}

/* The first line of @file of the instance (all of it with @whole). */
static char *read_inst_text(const char *file, bool whole)
{
	char path[700];
	char *s = NULL;

	snprintf(path, sizeof(path), "%s/%s", fx.path, file);
	if (read_full_file_at(AT_FDCWD, path, 1 << 20, &s, NULL) < 0)
		return NULL;
	if (!whole)
		s[strcspn(s, "\n")] = 0;
	return s;
}

static char *read_inst(const char *file)
{
	return read_inst_text(file, false);
}

static int getppid_nr(void)
{
	int nr = ftrace_syscall_by_name(ftrace_syscall_arch_current(), "sys_getppid");

	ck_assert_int_ge(nr, 0);
	return nr;
}

/* An option every kernel has, off by default. */
#define OPTION "event-fork"

static void write_options_config(const char *path, unsigned duration_ms)
{
	_cleanup_free_ char *text = NULL;

	text = strdup_printf("buffers { size_kb: 4096 fill_policy: DISCARD }\n"
			     "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
			     "  instance_name: \"%s\" buffer_size_kb: 256\n"
			     "  ftrace_events: \"sched/sched_switch\"\n"
			     "  syscall_events: \"sys_getppid\"\n"
			     "  tids_to_trace: 1 tids_to_trace: %d\n"
			     "  tracing_cpumask: \"1\"\n"
			     "  tracefs_options { name: \"" OPTION "\" state: STATE_ENABLED }\n"
			     "} } }\nduration_ms: %u\n",
			     fx.instance, (int)getpid(), duration_ms);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(tp_write_file(path, text), 0);
}

/* Set up (sched_switch on, with tracing off) and then started. */
static bool instance_tracing(void)
{
	_cleanup_free_ char *on = NULL;

	if (!tp_event_enabled(fx.path, "sched_switch"))
		return false;
	on = read_inst("tracing_on");
	return on && strcmp(on, "1") == 0;
}

/* What the options wrote, while the recording runs. */
static void assert_options_applied(void)
{
	_cleanup_free_ char *mask = read_inst("tracing_cpumask"), *pids = read_inst_text("set_event_pid", true),
			    *opt = read_inst("options/" OPTION),
			    *filter = read_inst("events/raw_syscalls/sys_enter/filter"),
			    *filter_exit = read_inst("events/raw_syscalls/sys_exit/filter");
	char want[64], tid[32];

	ck_assert_ptr_nonnull(mask);
	ck_assert_str_eq(mask, "1");
	snprintf(tid, sizeof(tid), "%d", (int)getpid());
	ck_assert_ptr_nonnull(pids);
	/* one pid per line, in the kernel's order */
	ck_assert_msg(strstr(pids, tid) && (strncmp(pids, "1\n", 2) == 0 || strstr(pids, "\n1\n")),
		      "set_event_pid: %s", pids);
	ck_assert_str_eq(opt, "1");
	snprintf(want, sizeof(want), "id == %d", getppid_nr());
	ck_assert_str_eq(filter, want);
	ck_assert_str_eq(filter_exit, want);
}

START_TEST(test_options_applied_and_restored)
{
	char cfg[700], out[700];
	struct tp_ftrace_scan s;
	pid_t pid;

	snprintf(cfg, sizeof(cfg), "%s/opts.cfg", tmpdir);
	snprintf(out, sizeof(out), "%s/opts.pftrace", tmpdir);
	write_options_config(cfg, 2000);
	child = pid = tp_record_spawn(cfg, out, state_dir);
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(tp_wait_for(instance_tracing, 20000), "the recording never started");
	assert_options_applied();
	ck_assert_int_eq(tp_wait_exit(pid), 0);
	child = 0;
	ck_assert_msg(features_restored(), "tracefs not restored");
	ck_assert_int_eq(tp_scan_trace(out, &s), 0);
	ck_assert_uint_ge(s.stats_packets, 2);
	ck_assert_msg(s.n_failed == 0, "failed: %s", s.failed[0]);
	tp_scan_free(&s);
}
END_TEST

START_TEST(test_options_sigkill_recovered)
{
	char cfg[700], out[700];
	pid_t pid;

	snprintf(cfg, sizeof(cfg), "%s/kill.cfg", tmpdir);
	snprintf(out, sizeof(out), "%s/kill.pftrace", tmpdir);
	write_options_config(cfg, 600000);
	child = pid = tp_record_spawn(cfg, out, state_dir);
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(tp_wait_for(instance_tracing, 20000), "the recording never started");
	assert_options_applied();
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(tp_wait_exit(pid), 128 + SIGKILL);
	child = 0;
	/* nobody cleaned up: the changes are still there */
	ck_assert(!features_restored());
	ck_assert_int_ge(ftrace_host_recover(state_dir), 1);
	ck_assert_msg(features_restored(), "crash recovery did not restore tracefs");
}
END_TEST

static volatile bool stop_syscalls;

static void *syscall_loop(void *arg)
{
	(void)arg;
	while (!stop_syscalls) {
		(void)syscall(SYS_getppid);
		(void)syscall(SYS_getpid);
		(void)close(-1);
		usleep(200);
	}
	return NULL;
}

START_TEST(test_syscall_events_only_listed)
{
	char cfg[700], out[700];
	_cleanup_free_ char *text = NULL;
	struct tp_ftrace_scan s;
	pthread_t th;
	uint64_t others = 0;
	int nr = getppid_nr();

	snprintf(cfg, sizeof(cfg), "%s/sys.cfg", tmpdir);
	snprintf(out, sizeof(out), "%s/sys.pftrace", tmpdir);
	text = strdup_printf("buffers { size_kb: 8192 fill_policy: DISCARD }\n"
			     "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
			     "  instance_name: \"%s\" buffer_size_kb: 1024\n"
			     "  syscall_events: \"sys_getppid\" syscall_events: \"sys_no_such_call\"\n"
			     "} } }\nduration_ms: 800\n", fx.instance);
	ck_assert_int_eq(tp_write_file(cfg, text), 0);
	stop_syscalls = false;
	ck_assert_int_eq(pthread_create(&th, NULL, syscall_loop, NULL), 0);
	ck_assert_int_eq(tp_record(cfg, out), 0);
	stop_syscalls = true;
	pthread_join(th, NULL);
	ck_assert(features_restored());

	ck_assert_int_eq(tp_scan_trace(out, &s), 0);
	ck_assert_uint_gt(s.syscall_ids[nr], 0);
	for (unsigned i = 0; i < ARRAY_SIZE(s.syscall_ids); i++)
		if (i != (unsigned)nr)
			others += s.syscall_ids[i];
	ck_assert_msg(others == 0 && s.syscalls_other == 0, "%" PRIu64 " events of other syscalls", others);
	/* sys_enter and sys_exit both */
	ck_assert_uint_gt(s.events_by_field[329], 0);
	ck_assert_uint_gt(s.events_by_field[330], 0);
	tp_scan_free(&s);
}
END_TEST

/* ---- through the data-source API: refusals and hostile values ---------- */

static struct pbw *no_begin(void *u)
{
	(void)u;
	return NULL;
}

static int no_end(void *u)
{
	(void)u;
	return 0;
}

static const struct pbw_sink null_sink = { .begin_packet = no_begin, .end_packet = no_end };

struct host_ctx {
	struct loop *e;
	struct ftrace_host *h;
};

static void host_open(struct host_ctx *c)
{
	ck_assert_int_eq(loop_new(&c->e), 0);
	ck_assert_int_eq(ftrace_host_new(c->e, &c->h), 0);
}

static void host_close(struct host_ctx *c)
{
	c->h = ftrace_host_free(c->h);
	c->e = loop_unref(c->e);
}

static int setup_ds(struct host_ctx *c, Perfetto__Protos__FtraceConfig *cfg, struct ftrace_ds **ret, char **err)
{
	return ftrace_ds_setup(c->h, 1, 1, cfg, &null_sink, NULL, NULL, ret, err);
}

START_TEST(test_exclusive_refused)
{
	Perfetto__Protos__FtraceConfig plain = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	Perfetto__Protos__FtraceConfig excl = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	char *events[] = { "sched/sched_switch" };
	uint32_t tids[] = { 1 };
	struct ftrace_ds *a = NULL, *b = NULL;
	_cleanup_free_ char *err = NULL;
	struct host_ctx c;

	plain.instance_name = excl.instance_name = fx.instance;
	plain.n_ftrace_events = excl.n_ftrace_events = 1;
	plain.ftrace_events = excl.ftrace_events = events;
	excl.n_tids_to_trace = 1;
	excl.tids_to_trace = tids;
	host_open(&c);

	ck_assert_int_eq(setup_ds(&c, &plain, &a, &err), 0);
	ck_assert_int_eq(setup_ds(&c, &excl, &b, &err), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "to itself"));
	a = ftrace_ds_free(a);
	ck_assert(features_restored());

	ck_assert_int_eq(setup_ds(&c, &excl, &b, &err), 0);
	ck_assert_int_eq(setup_ds(&c, &plain, &a, &err), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "held by"));
	b = ftrace_ds_free(b);
	host_close(&c);
	ck_assert(features_restored());
}
END_TEST

START_TEST(test_hostile_values)
{
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	Perfetto__Protos__FtraceConfig__TracefsOption opt = PERFETTO__PROTOS__FTRACE_CONFIG__TRACEFS_OPTION__INIT;
	Perfetto__Protos__FtraceConfig__TracefsOption *opts[] = { &opt };
	enum { N = 10000 };
	static char names[N][16];
	static char *list[N];
	static Perfetto__Protos__FtraceConfig__KprobeEvent kp[N];
	static Perfetto__Protos__FtraceConfig__KprobeEvent *kps[N];
	struct ftrace_ds *ds = NULL;
	struct host_ctx c;
	const char *w;

	host_open(&c);
	cfg.instance_name = fx.instance;

	/* a cpumask that is a path: refused by what it is, nothing opened */
	{
		_cleanup_free_ char *err = NULL;

		cfg.tracing_cpumask = "../../tracing_on";
		ck_assert_int_eq(setup_ds(&c, &cfg, &ds, &err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "not a hex CPU mask"));
		cfg.tracing_cpumask = NULL;
	}
	/* an option name that is a path */
	{
		_cleanup_free_ char *err = NULL;

		opt.name = "../tracing_on";
		opt.has_state = true;
		opt.state = PERFETTO__PROTOS__FTRACE_CONFIG__TRACEFS_OPTION__STATE__STATE_DISABLED;
		cfg.n_tracefs_options = 1;
		cfg.tracefs_options = opts;
		ck_assert_int_eq(setup_ds(&c, &cfg, &ds, &err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "invalid option name"));
		/* a valid name the kernel does not have */
		free(err);
		err = NULL;
		opt.name = "no_such_option_here";
		ck_assert_int_eq(setup_ds(&c, &cfg, &ds, &err), -ENOENT);
		ck_assert_ptr_nonnull(strstr(err, "does not exist"));
		cfg.n_tracefs_options = 0;
	}
	ck_assert(features_restored());

	/*
	 * 10,000 function filters and kprobes: capped and reported.  The caps
	 * (1,024 filters per list, 256 kprobes) are what bound the work; how
	 * long it takes is bench/'s business, not a test's.
	 */
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "tp_nofn_%d", i);
		list[i] = names[i];
		kp[i] = (Perfetto__Protos__FtraceConfig__KprobeEvent)PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__INIT;
		kp[i].probe = names[i];
		kp[i].has_type = true;
		kp[i].type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_KPROBE;
		kps[i] = &kp[i];
	}
	cfg.has_enable_function_graph = true;
	cfg.enable_function_graph = true;
	cfg.n_function_filters = N;
	cfg.function_filters = list;
	cfg.n_function_graph_roots = N;
	cfg.function_graph_roots = list;
	cfg.n_kprobe_events = N;
	cfg.kprobe_events = kps;
	{
		_cleanup_free_ char *err = NULL;

		ck_assert_int_eq(setup_ds(&c, &cfg, &ds, &err), 0);
	}
	w = ftrace_ds_get_warnings(ds);
	ck_assert_ptr_nonnull(w);
	/* whatever the kernel has, the lists were cut and it says so */
	ck_assert_msg(strstr(w, "dropped") || strstr(w, "more entries refused"), "warnings: %s", w);
	ds = ftrace_ds_free(ds);
	host_close(&c);
	ck_assert(features_restored());
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
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("ftrace_options_live");
	tc = tcase_create("options");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_options_applied_and_restored);
	tcase_add_test(tc, test_options_sigkill_recovered);
	tcase_add_test(tc, test_syscall_events_only_listed);
	tcase_add_test(tc, test_exclusive_refused);
	tcase_add_test(tc, test_hostile_values);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
