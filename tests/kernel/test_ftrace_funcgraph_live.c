/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The function graph on the real kernel, in a private instance and at the
 * top level: enable_function_graph with function_graph_roots and
 * function_graph_max_depth gives funcgraph_entry and funcgraph_exit events
 * whose func is an interned kernel symbol named in the same sequence
 * (symbolize_ksyms); current_tracer, set_ftrace_filter, set_graph_function
 * and max_graph_depth are put back exactly, including filters someone had
 * set before, after a normal end and after SIGKILL followed by crash
 * recovery.
 *
 * What a directory lacks is refused with its reason in
 * failed_ftrace_events while the rest of the session records, and
 * changes nothing: 6.1's instances have no function_graph tracer, 6.12's
 * have it with set_ftrace_filter but without set_graph_function and
 * max_graph_depth, so there roots and a depth are refused and
 * function_filters alone record.  Each test works out from the directory
 * which outcome it must see.
 *
 * Skipped (77) on kernels without the function_graph tracer at the top
 * level.
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

/* @file exists in the directory under test. */
static bool dir_has(const char *file)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", dir(), file);
	return access(path, F_OK) == 0;
}

static bool has_graph_tracer(const char *d)
{
	_cleanup_free_ char *t = NULL;
	char path[600];

	snprintf(path, sizeof(path), "%s/available_tracers", d);
	return read_full_file_at(AT_FDCWD, path, 1 << 16, &t, NULL) >= 0 && strstr(t, "function_graph");
}

/* What the directory under test gives a graph config. */
static bool can_graph(void)
{
	return has_graph_tracer(dir());
}

static bool can_roots(void)
{
	return can_graph() && dir_has("set_graph_function") && dir_has("max_graph_depth");
}

/*
 * A graph of fn: as the only function traced (function_filters, which
 * instances have too), and with @roots as its root with a depth of 3 as
 * well.  The filter keeps the kernel from patching every function of the
 * kernel for a graph of roots alone: an emulated guest takes minutes over
 * that, and its watchdog reports soft lockups meanwhile.
 */
static char *graph_config(unsigned duration_ms, bool roots)
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
			  "  function_filters: \"%s\"\n"
			  "  %s%s%s\n"
			  "  %s\n"
			  "} } }\nduration_ms: %u\n",
			  inst, fn, roots ? "function_graph_roots: \"" : "", roots ? fn : "", roots ? "\"" : "",
			  roots ? "function_graph_max_depth: 3" : "", duration_ms);
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

/*
 * The graph refused with @reason (a word of it) in failed_ftrace_events,
 * no graph events, and sched_switch recorded all the same.
 */
static void check_graph_refused(const char *out, const char *reason)
{
	struct tp_ftrace_scan s;
	bool found = false;

	ck_assert_int_eq(tp_scan_trace(out, &s), 0);
	ck_assert_msg(tp_scan_failed_has(&s, "ftrace/funcgraph_entry"), "the graph was not refused (%zu failed)",
		      s.n_failed);
	for (size_t i = 0; i < s.n_failed; i++)
		if (strncmp(s.failed[i], "ftrace/funcgraph_entry", 22) == 0 && strstr(s.failed[i], reason))
			found = true;
	ck_assert_msg(found, "refused without '%s': %s", reason, s.failed[0]);
	ck_assert_uint_eq(s.events_by_field[437], 0);
	ck_assert_uint_eq(s.events_by_field[438], 0);
	/* sched_switch, compact (the default) or not */
	ck_assert_uint_gt(s.compact_bundles + s.events_by_field[4], 0);
	tp_scan_free(&s);
}

/* What the directory lacks for a graph with roots and a depth. */
static const char *roots_refusal(void)
{
	if (!can_graph())
		return "no function_graph tracer";
	return dir_has("set_graph_function") ? "no max_graph_depth" : "no set_graph_function";
}

/* Roots and a depth: recorded where the directory has their files. */
START_TEST(test_funcgraph_recorded)
{
	_cleanup_free_ char *cfg = graph_config(1000, true);
	char out[700];

	snprintf(out, sizeof(out), "%s/graph.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	ck_assert_msg(features_restored(), "tracer or filters not restored");
	if (can_roots())
		check_graph_trace(out);
	else
		check_graph_refused(out, roots_refusal());
}
END_TEST

/* function_filters alone: recorded wherever the tracer is. */
START_TEST(test_funcgraph_filters_only)
{
	_cleanup_free_ char *cfg = graph_config(1000, false);
	char out[700];

	snprintf(out, sizeof(out), "%s/filters.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	ck_assert_msg(features_restored(), "tracer or filters not restored");
	if (can_graph())
		check_graph_trace(out);
	else
		check_graph_refused(out, "no function_graph tracer");
}
END_TEST

/* @file, when the directory has it, or NULL. */
static char *read_if_there(const char *file)
{
	return dir_has(file) ? read_dir_file(file) : NULL;
}

static void write_if_there(const char *file, const char *value, bool trunc)
{
	if (dir_has(file))
		write_dir_file(file, value, trunc);
}

static bool same_text(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Filters and depth someone set before come back as they were. */
START_TEST(test_funcgraph_prior_filters_restored)
{
	_cleanup_free_ char *cfg = graph_config(600, true), *before_filter = NULL, *before_graph = NULL,
			    *before_depth = NULL, *after_filter = NULL, *after_graph = NULL, *after_depth = NULL;
	char out[700];

	write_if_there("set_ftrace_filter", fn, true);
	write_if_there("set_graph_function", fn, true);
	write_if_there("max_graph_depth", "5", false);
	before_filter = read_if_there("set_ftrace_filter");
	before_graph = read_if_there("set_graph_function");
	before_depth = read_if_there("max_graph_depth");

	snprintf(out, sizeof(out), "%s/prior.pftrace", tmpdir);
	ck_assert_int_eq(record_with_opens(cfg, out), 0);
	after_filter = read_if_there("set_ftrace_filter");
	after_graph = read_if_there("set_graph_function");
	after_depth = read_if_there("max_graph_depth");

	/* back to what the fixture found */
	write_if_there("set_ftrace_filter", "", true);
	write_if_there("set_graph_function", "", true);
	write_if_there("max_graph_depth", "0", false);

	ck_assert_msg(same_text(after_filter, before_filter), "set_ftrace_filter changed");
	ck_assert_msg(same_text(after_graph, before_graph), "set_graph_function changed");
	ck_assert_msg(same_text(after_depth, before_depth), "max_graph_depth changed");
	ck_assert(features_restored());
	if (can_roots())
		check_graph_trace(out);
	else
		check_graph_refused(out, roots_refusal());
}
END_TEST

static bool graph_on(void)
{
	_cleanup_free_ char *t = read_dir_file("current_tracer");

	return t && strncmp(t, "function_graph", 14) == 0;
}

/* A graph killed while on is put back by crash recovery. */
START_TEST(test_funcgraph_sigkill_recovered)
{
	_cleanup_free_ char *text = NULL;
	char cfg[700], out[700];

	if (!can_graph()) {
		fprintf(stderr, "%s has no function_graph tracer: nothing to recover\n", dir());
		return;
	}
	/* roots where the directory takes them, so their files are recovered too */
	text = graph_config(600000, can_roots());
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

static void setup_top(void)
{
	use_instance = false;
	setup();
}

static void setup_instance(void)
{
	use_instance = true;
	setup();
}

static void add_tests(TCase *tc)
{
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_funcgraph_recorded);
	tcase_add_test(tc, test_funcgraph_filters_only);
	tcase_add_test(tc, test_funcgraph_prior_filters_restored);
	tcase_add_test(tc, test_funcgraph_sigkill_recovered);
}

int main(void)
{
	Suite *s;
	TCase *top, *inst;

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
	if (!mkdtemp(tmpdir))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("ftrace_funcgraph_live");
	top = tcase_create("top_level");
	tcase_add_checked_fixture(top, setup_top, teardown);
	add_tests(top);
	suite_add_tcase(s, top);
	inst = tcase_create("instance");
	tcase_add_checked_fixture(inst, setup_instance, teardown);
	add_tests(inst);
	suite_add_tcase(s, inst);
	return tp_run_suite(s, tmpdir);
}
