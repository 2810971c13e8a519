/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kprobe_events on the real kernel: a probe created through the top-level
 * kprobe_events, enabled in the session's instance, written as KprobeEvent
 * (begin and end for KPROBE_TYPE_BOTH), counted in FtraceStats.kprobe_stats,
 * and removed on every exit path: a normal end, and SIGKILL followed by
 * crash recovery.  A function the kernel does not have is reported in
 * failed_ftrace_events and the rest records.
 *
 * Skipped (77) on kernels built without kprobe events.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/tp_feature_fixture.h"

static const char *fn;

static char *kprobe_config(const char *func, const char *type, unsigned duration_ms)
{
	char *t = strdup_printf("buffers { size_kb: 8192 fill_policy: DISCARD }\n"
				"data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
				"  instance_name: \"%s\" buffer_size_kb: 1024\n"
				"  ftrace_events: \"sched/sched_switch\"\n"
				"  kprobe_events { probe: \"%s\" type: %s }\n"
				"} } }\nduration_ms: %u\n",
				fx.instance, func, type, duration_ms);

	ck_assert_ptr_nonnull(t);
	return t;
}

START_TEST(test_kprobe_both_recorded)
{
	_cleanup_free_ char *cfg = kprobe_config(fn, "KPROBE_TYPE_BOTH", 1000);
	char out[700];
	struct tp_ftrace_scan s;

	snprintf(out, sizeof(out), "%s/both.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	ck_assert_msg(features_restored(), "kprobe_events or the instance not restored");
	ck_assert_int_eq(tp_scan_trace(out, &s), 0);
	ck_assert_msg(s.n_failed == 0, "failed: %s", s.failed[0]);
	ck_assert_uint_gt(s.events_by_field[542], 0);
	ck_assert_uint_gt(s.kprobe_begin, 0);
	ck_assert_uint_gt(s.kprobe_end, 0);
	ck_assert_uint_eq(s.kprobe_instant, 0);
	ck_assert_uint_eq(s.n_kprobe_names, 1);
	ck_assert_str_eq(s.kprobe_names[0], fn);
	ck_assert(s.has_kprobe_stats);
	tp_scan_free(&s);
}
END_TEST

START_TEST(test_kretprobe_instant)
{
	_cleanup_free_ char *cfg = kprobe_config(fn, "KPROBE_TYPE_KRETPROBE", 800);
	char out[700];
	struct tp_ftrace_scan s;

	snprintf(out, sizeof(out), "%s/ret.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	ck_assert(features_restored());
	ck_assert_int_eq(tp_scan_trace(out, &s), 0);
	ck_assert_uint_gt(s.kprobe_instant, 0);
	ck_assert_uint_eq(s.kprobe_begin + s.kprobe_end, 0);
	tp_scan_free(&s);
}
END_TEST

START_TEST(test_kprobe_unknown_function)
{
	_cleanup_free_ char *cfg = kprobe_config("tp_no_such_function_here", "KPROBE_TYPE_KPROBE", 500);
	char out[700];
	struct tp_ftrace_scan s;

	snprintf(out, sizeof(out), "%s/unknown.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	ck_assert(features_restored());
	ck_assert_int_eq(tp_scan_trace(out, &s), 0);
	ck_assert(tp_scan_failed_has(&s, "perfetto_kprobes/tp_no_such_function_here"));
	/* the rest recorded */
	ck_assert_uint_gt(s.compact_bundles, 0);
	ck_assert_uint_eq(s.events_by_field[542], 0);
	tp_scan_free(&s);
}
END_TEST

static bool probe_installed(void)
{
	_cleanup_free_ char *k = NULL;
	char want[200];

	if (read_full_file_at(AT_FDCWD, TP_TRACEFS "/kprobe_events", 1 << 20, &k, NULL) < 0)
		return false;
	snprintf(want, sizeof(want), "perfetto_kprobes/%s", fn);
	return strstr(k, want) && tp_event_enabled(fx.path, "sched_switch");
}

START_TEST(test_kprobe_sigkill_recovered)
{
	_cleanup_free_ char *text = kprobe_config(fn, "KPROBE_TYPE_BOTH", 600000);
	char cfg[700], out[700];

	snprintf(cfg, sizeof(cfg), "%s/kill.cfg", tmpdir);
	snprintf(out, sizeof(out), "%s/kill.pftrace", tmpdir);
	ck_assert_int_eq(tp_write_file(cfg, text), 0);
	child = tp_record_spawn(cfg, out, state_dir);
	ck_assert_int_gt(child, 0);
	ck_assert_msg(tp_wait_for(probe_installed, 20000), "the kprobe never appeared");
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(tp_wait_exit(child), 128 + SIGKILL);
	child = 0;
	/* the probe outlived its owner */
	ck_assert(probe_installed());
	ck_assert_int_ge(ftrace_host_recover(state_dir), 1);
	ck_assert_msg(features_restored(), "crash recovery left kprobe_events changed");
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
	if (access(TP_TRACEFS "/kprobe_events", F_OK) != 0) {
		fprintf(stderr, "this kernel has no kprobe_events (CONFIG_KPROBE_EVENTS=n): skipped\n");
		return 77;
	}
	fn = open_function();
	if (!fn) {
		fprintf(stderr, "no do_sys_openat2/do_sys_open/do_filp_open in /proc/kallsyms: skipped\n");
		return 77;
	}
	if (!mkdtemp(tmpdir))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("ftrace_kprobe_live");
	tc = tcase_create("kprobe");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_kprobe_both_recorded);
	tcase_add_test(tc, test_kretprobe_instant);
	tcase_add_test(tc, test_kprobe_unknown_function);
	tcase_add_test(tc, test_kprobe_sigkill_recovered);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
