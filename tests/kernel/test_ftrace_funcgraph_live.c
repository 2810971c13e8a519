/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The function graph on the real kernel: enable_function_graph with
 * function_graph_roots and function_graph_max_depth gives funcgraph_entry
 * and funcgraph_exit events whose func is an interned kernel symbol named
 * in the same sequence (symbolize_ksyms); current_tracer, set_ftrace_filter,
 * set_graph_function and max_graph_depth are put back exactly, including
 * filters someone had set before, after a normal end and after SIGKILL
 * followed by crash recovery.
 *
 * Skipped (77) on kernels without the function_graph tracer.  In an
 * instance when the kernel allows the tracer there (newer kernels), else
 * at the top level.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/tp_feature_fixture.h"

static const char *fn;
static bool use_instance;

static const char *dir(void)
{
	return use_instance ? fx.path : TP_TRACEFS;
}

static char *graph_config(unsigned duration_ms)
{
	_cleanup_free_ char *inst = use_instance ? strdup_printf("instance_name: \"%s\"", fx.instance) : strdup("");
	char *t;

	ck_assert_ptr_nonnull(inst);
	t = strdup_printf("buffers { size_kb: 16384 fill_policy: DISCARD }\n"
			  "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
			  "  %s buffer_size_kb: 2048\n"
			  "  ftrace_events: \"sched/sched_switch\"\n"
			  "  symbolize_ksyms: true\n"
			  "  enable_function_graph: true\n"
			  "  function_graph_roots: \"%s\"\n"
			  "  function_graph_max_depth: 3\n"
			  "} } }\nduration_ms: %u\n",
			  inst, fn, duration_ms);
	ck_assert_ptr_nonnull(t);
	return t;
}

static char *read_dir_file(const char *file)
{
	char path[700];
	char *s = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir(), file);
	if (read_full_file_at(AT_FDCWD, path, 1 << 20, &s, NULL) < 0)
		return NULL;
	return s;
}

static void write_dir_file(const char *file, const char *value, bool trunc)
{
	char path[700];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir(), file);
	fd = open(path, O_WRONLY | O_CLOEXEC | (trunc ? O_TRUNC : 0));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, value, strlen(value)), 0);
	close(fd);
}

static void check_graph_trace(const char *out)
{
	struct tp_ftrace_scan s;

	ck_assert_int_eq(tp_scan_trace(out, &s), 0);
	ck_assert_msg(s.n_failed == 0, "failed: %s", s.failed[0]);
	ck_assert_uint_gt(s.events_by_field[437], 0);  /* funcgraph_entry */
	ck_assert_uint_gt(s.events_by_field[438], 0);  /* funcgraph_exit */
	if (s.kernel_symbols_parsed > 0) {
		/* the root shows by name, and the sequence was marked as new */
		ck_assert_msg(tp_scan_has_symbol(&s, fn), "%s not among %zu interned symbols", fn, s.n_symbol_names);
		ck_assert_uint_gt(s.sequence_cleared, 0);
	}
	tp_scan_free(&s);
}

START_TEST(test_funcgraph_recorded)
{
	_cleanup_free_ char *cfg = graph_config(1000);
	char out[700];

	snprintf(out, sizeof(out), "%s/graph.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	ck_assert_msg(features_restored(), "tracer or filters not restored");
	check_graph_trace(out);
}
END_TEST

/* Filters and depth someone set before come back as they were. */
START_TEST(test_funcgraph_prior_filters_restored)
{
	_cleanup_free_ char *cfg = graph_config(600), *before_filter = NULL, *before_graph = NULL,
			    *before_depth = NULL, *after_filter = NULL, *after_graph = NULL, *after_depth = NULL;
	char out[700];

	write_dir_file("set_ftrace_filter", fn, true);
	write_dir_file("set_graph_function", fn, true);
	write_dir_file("max_graph_depth", "5", false);
	before_filter = read_dir_file("set_ftrace_filter");
	before_graph = read_dir_file("set_graph_function");
	before_depth = read_dir_file("max_graph_depth");

	snprintf(out, sizeof(out), "%s/prior.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	after_filter = read_dir_file("set_ftrace_filter");
	after_graph = read_dir_file("set_graph_function");
	after_depth = read_dir_file("max_graph_depth");

	/* back to what the fixture found */
	write_dir_file("set_ftrace_filter", "", true);
	write_dir_file("set_graph_function", "", true);
	write_dir_file("max_graph_depth", "0", false);

	ck_assert_str_eq(after_filter, before_filter);
	ck_assert_str_eq(after_graph, before_graph);
	ck_assert_str_eq(after_depth, before_depth);
	ck_assert(features_restored());
	check_graph_trace(out);
}
END_TEST

static bool graph_on(void)
{
	_cleanup_free_ char *t = read_dir_file("current_tracer");

	return t && strncmp(t, "function_graph", 14) == 0;
}

START_TEST(test_funcgraph_sigkill_recovered)
{
	_cleanup_free_ char *text = graph_config(600000);
	char cfg[700], out[700];

	snprintf(cfg, sizeof(cfg), "%s/kill.cfg", tmpdir);
	snprintf(out, sizeof(out), "%s/kill.pftrace", tmpdir);
	ck_assert_int_eq(tp_write_file(cfg, text), 0);
	child = tp_record_spawn(cfg, out, state_dir);
	ck_assert_int_gt(child, 0);
	ck_assert_msg(tp_wait_for(graph_on, 20000), "function_graph never came on");
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(tp_wait_exit(child), 128 + SIGKILL);
	child = 0;
	ck_assert(graph_on());
	ck_assert_int_ge(ftrace_host_recover(state_dir), 1);
	ck_assert_msg(features_restored(), "crash recovery left the tracer or its filters changed");
}
END_TEST

static bool has_graph_tracer(const char *d)
{
	_cleanup_free_ char *t = NULL;
	char path[600];

	snprintf(path, sizeof(path), "%s/available_tracers", d);
	return read_full_file_at(AT_FDCWD, path, 1 << 16, &t, NULL) >= 0 && strstr(t, "function_graph");
}

int main(void)
{
	Suite *s;
	TCase *tc;

	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	if (!has_graph_tracer(TP_TRACEFS)) {
		fprintf(stderr, "this kernel has no function_graph tracer (CONFIG_FUNCTION_GRAPH_TRACER=n): skipped\n");
		return 77;
	}
	fn = open_function();
	if (!fn) {
		fprintf(stderr, "no do_sys_openat2/do_sys_open/do_filp_open in /proc/kallsyms: skipped\n");
		return 77;
	}
	/* Instances got function_graph later than the top level did. */
	{
		char path[128];

		snprintf(path, sizeof(path), TP_TRACEFS "/instances/tp-graph-probe-%d", (int)getpid());
		if (mkdir(path, 0755) == 0) {
			use_instance = has_graph_tracer(path);
			(void)rmdir(path);
		}
	}
	fprintf(stderr, "function graph in %s\n", use_instance ? "an instance" : "the top level");
	if (!mkdtemp(tmpdir))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("ftrace_funcgraph_live");
	tc = tcase_create("funcgraph");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_funcgraph_recorded);
	tcase_add_test(tc, test_funcgraph_prior_filters_restored);
	tcase_add_test(tc, test_funcgraph_sigkill_recovered);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
