/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Real Perfetto configs (tests/data/configs: Perfetto's test/configs, the
 * examples of its documentation, what `perfetto -t sched freq idle` sends)
 * through our text-format parser, the FtraceConfig validator and the
 * planners of the options beyond ftrace_events.  Pure: the "kernel" is one
 * that has every event Perfetto compiles in (ftrace_events.inc).
 *
 * A config whose other data sources need a sub-config our protos do not
 * declare yet (sys_stats_config comes with linux.sys_stats) is reported
 * and skipped, and is checked as soon as the field exists.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "protos/pbtxt.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "util/util.h"

static const char *const configs[] = {
	"scheduling.cfg",      "ftrace.cfg",            "long_trace.cfg",       "ftrace_with_ksyms.cfg",
	"rss_stat.cfg",        "summary.cfg",           "thermal.cfg",          "docs_syscalls.cfg",
	"docs_syscall_events.cfg", "docs_funcgraph.cfg", "docs_cpu_scheduling.cfg", "docs_memory_counters.cfg",
	"cmdline_sched_freq_idle.cfg",
};

/* Sub-configs of data sources other than ours that may still be missing. */
static const char *const pending_fields[] = { "sys_stats_config", "inode_file_config" };

static struct ftrace_event_list *avail;

static void avail_setup(void)
{
	ck_assert_int_eq(ftrace_event_list_new(&avail), 0);
#define FTRACE_EVENT(g, n, id, spec) ck_assert_int_ge(ftrace_event_list_add(avail, g, n, 0), 0);
#include "probes/ftrace/parse/ftrace_events.inc"
#undef FTRACE_EVENT
	/* in events/ on every kernel, without a compiled-in message */
	ck_assert_int_ge(ftrace_event_list_add(avail, "ftrace", "print", FTRACE_EVENT_ALWAYS_ON), 0);
	ftrace_event_list_sort(avail);
}

static void avail_teardown(void)
{
	avail = ftrace_event_list_free(avail);
}

/* The config's text, or NULL (with a note) when it needs a pending field. */
static ProtobufCMessage *parse_config(const char *name)
{
	const char *root = getenv("TP_SOURCE_ROOT");
	_cleanup_free_ char *path = NULL, *text = NULL;
	ProtobufCMessage *m = NULL;
	char err[256] = "";
	size_t len;
	int r;

	ck_assert_int_ge(asprintf(&path, "%s/tests/data/configs/%s", root ? root : ".", name), 0);
	ck_assert_msg(read_full_file_at(AT_FDCWD, path, 1 << 20, &text, &len) == 0, "cannot read %s", path);
	for (size_t i = 0; i < ARRAY_SIZE(pending_fields); i++)
		if (strstr(text, pending_fields[i]) &&
		    !protobuf_c_message_descriptor_get_field_by_name(&perfetto__protos__data_source_config__descriptor,
								     pending_fields[i])) {
			fprintf(stderr, "%s: skipped, DataSourceConfig has no %s yet\n", name, pending_fields[i]);
			return NULL;
		}
	r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, len, &m, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: %s (%d)", name, err, r);
	return m;
}

struct checked {
	size_t n_ftrace;                /* linux.ftrace data sources */
	size_t n_events;                /* resolved, in all of them */
	size_t n_unknown;
	bool userspace_atrace;
	bool syscall_filter;
	bool funcgraph;
	bool ksyms;
};

static void check_ftrace(const Perfetto__Protos__FtraceConfig *fc, struct checked *out, const char *name)
{
	struct ftrace_config *c = NULL;
	struct ftrace_atrace_implied *a = NULL;
	char *err = NULL;
	int r;

	r = ftrace_config_resolve(fc, avail, 8ull << 30, &c, &err);
	ck_assert_msg(r == 0, "%s: %s", name, err ? err : "?");
	out->n_events += c->n_events;
	out->n_unknown += c->n_unknown;
	ftrace_config_free(c);

	ck_assert_int_eq(ftrace_atrace_implied(fc, 0, &a), 0);
	out->userspace_atrace |= a->atrace_userspace;
	/* every implied required event exists on a kernel with every event */
	for (size_t i = 0; i < a->n_events; i++)
		if (!(a->events[i].flags & FTRACE_ATRACE_OPTIONAL) && strcmp(a->events[i].group, "ftrace") != 0)
			ck_assert_msg(ftrace_event_list_find(avail, a->events[i].group, a->events[i].name), "%s: %s/%s",
				      name, a->events[i].group, a->events[i].name);
	ftrace_atrace_implied_free(a);

	if (fc->n_syscall_events) {
		struct ftrace_syscall_filter *f = NULL;

		ck_assert_int_eq(ftrace_syscall_filter_build(FTRACE_SYSCALL_ARCH_X86_64,
							     (const char *const *)fc->syscall_events,
							     fc->n_syscall_events, &f), 0);
		ck_assert_msg(f->filter && f->n_unknown_total == 0, "%s", name);
		out->syscall_filter = true;
		ftrace_syscall_filter_free(f);
	}
	if (fc->has_enable_function_graph && fc->enable_function_graph) {
		struct ftrace_funcs_filter *ff = NULL, *roots = NULL;

		ck_assert_int_eq(ftrace_funcs_filter_build(NULL, (const char *const *)fc->function_filters,
							   fc->n_function_filters, &ff), 0);
		ck_assert_int_eq(ftrace_funcs_filter_build(NULL, (const char *const *)fc->function_graph_roots,
							   fc->n_function_graph_roots, &roots), 0);
		ck_assert_uint_eq(ff->n_rejected_total + roots->n_rejected_total, 0);
		out->funcgraph = true;
		ftrace_funcs_filter_free(ff);
		ftrace_funcs_filter_free(roots);
	}
	if (fc->n_kprobe_events) {
		struct ftrace_kprobe_plan *p = NULL;

		ck_assert_int_eq(ftrace_kprobe_plan_build(fc, NULL, &p), 0);
		ck_assert_uint_eq(p->n_rejected_total, 0);
		ftrace_kprobe_plan_free(p);
	}
	out->ksyms |= fc->has_symbolize_ksyms && fc->symbolize_ksyms;
	free(err);
}

static bool check_config(const char *name, struct checked *out)
{
	ProtobufCMessage *m = parse_config(name);
	Perfetto__Protos__TraceConfig *tc = (Perfetto__Protos__TraceConfig *)m;

	memset(out, 0, sizeof(*out));
	if (!m)
		return false;
	ck_assert_msg(tc->has_duration_ms && tc->duration_ms > 0 && tc->duration_ms <= 2000,
		      "%s: keep test configs short", name);
	for (size_t i = 0; i < tc->n_data_sources; i++) {
		const Perfetto__Protos__DataSourceConfig *dc = tc->data_sources[i]->config;

		if (!dc || !dc->name || strcmp(dc->name, "linux.ftrace") != 0)
			continue;
		ck_assert_msg(dc->ftrace_config, "%s: linux.ftrace without ftrace_config", name);
		out->n_ftrace++;
		check_ftrace(dc->ftrace_config, out, name);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return true;
}

START_TEST(test_config_file)
{
	const char *name = configs[_i];
	struct checked c;

	if (!check_config(name, &c))
		return;
	ck_assert_msg(c.n_ftrace == 1, "%s: %zu linux.ftrace", name, c.n_ftrace);
	/* each one records something through linux.ftrace */
	ck_assert_msg(c.n_events > 0 || c.userspace_atrace || c.funcgraph, "%s: nothing to record", name);
}
END_TEST

/* What each config is there for. */
START_TEST(test_config_expectations)
{
	struct checked c;

	ck_assert(check_config("scheduling.cfg", &c));
	ck_assert_uint_eq(c.n_events, 11);
	ck_assert_uint_eq(c.n_unknown, 0);

	ck_assert(check_config("cmdline_sched_freq_idle.cfg", &c));
	ck_assert(c.userspace_atrace);
	ck_assert(c.ksyms);

	ck_assert(check_config("docs_syscall_events.cfg", &c));
	ck_assert(c.syscall_filter);
	ck_assert(c.userspace_atrace);

	ck_assert(check_config("docs_funcgraph.cfg", &c));
	ck_assert(c.funcgraph);
	ck_assert(c.ksyms);

	ck_assert(check_config("ftrace_with_ksyms.cfg", &c));
	ck_assert(c.ksyms);
	ck_assert_uint_eq(c.n_events, 6);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_configs");
	TCase *tc = tcase_create("pure");

	tcase_add_unchecked_fixture(tc, avail_setup, avail_teardown);
	tcase_add_loop_test(tc, test_config_file, 0, ARRAY_SIZE(configs));
	tcase_add_test(tc, test_config_expectations);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
