/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure parts of the ftrace control side, run as any user: event and
 * instance name validation, config resolution against a fixed event list,
 * the per-CPU stats text, the undo state file, the trace_clock text, and
 * the write loop every tracefs write goes through (write_all(), on a
 * pipe).  What needs the kernel is in tests/kernel/test_ftrace_tracefs_live.c.
 */

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/ds/ftrace_ds.h"
/* the undo bookkeeping, to check what a parsed state file remembers */
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "util/util.h"

/* ---- names and config resolution ------------------------------------------ */

START_TEST(test_name_validation)
{
	char n127[128], n128[129];

	memset(n127, 'a', 127);
	n127[127] = 0;
	memset(n128, 'a', 128);
	n128[128] = 0;
	ck_assert(ftrace_name_valid("sched_switch"));
	ck_assert(ftrace_name_valid(n127));
	ck_assert(!ftrace_name_valid(n128));
	ck_assert(!ftrace_name_valid(""));
	ck_assert(!ftrace_name_valid(NULL));
	ck_assert(!ftrace_name_valid("../x"));
	ck_assert(!ftrace_name_valid("a/b"));
	ck_assert(!ftrace_name_valid("*"));
	ck_assert(!ftrace_name_valid("a b"));
	ck_assert(!ftrace_name_valid("a\nb"));
	ck_assert(!ftrace_name_valid("sched-switch"));

	ck_assert(ftrace_instance_name_valid("tp-test-1.2_x"));
	ck_assert(!ftrace_instance_name_valid("."));
	ck_assert(!ftrace_instance_name_valid(".."));
	ck_assert(!ftrace_instance_name_valid("../x"));
	ck_assert(!ftrace_instance_name_valid("a/b"));
	ck_assert(!ftrace_instance_name_valid(""));
	ck_assert(!ftrace_instance_name_valid("a\tb"));
}
END_TEST

static struct ftrace_event_list *fixture_events(void)
{
	static const char text[] = "sched:sched_switch\nsched:sched_waking\nsched:sched_wakeup\n"
				   "irq:irq_handler_entry\nirq:irq_handler_exit\nfoo:sched_waking\n"
				   "uniq:only_here\ndup1:twice\ndup2:twice\nbad line\n:x\ny:\nbad-g:x\n";
	struct ftrace_event_list *l = NULL;

	ck_assert_int_eq(ftrace_event_list_new(&l), 0);
	ck_assert_int_eq(ftrace_event_list_parse(l, text, sizeof(text) - 1), 0);
	ck_assert_int_ge(ftrace_event_list_add(l, "ftrace", "print", FTRACE_EVENT_ALWAYS_ON), 0);
	ftrace_event_list_sort(l);
	ck_assert_uint_eq(ftrace_event_list_size(l), 10);
	return l;
}

static bool has_event(const struct ftrace_config *c, const char *g, const char *n)
{
	for (size_t i = 0; i < c->n_events; i++)
		if (!strcmp(c->events[i]->group, g) && !strcmp(c->events[i]->name, n))
			return true;
	return false;
}

static bool has_unknown(const struct ftrace_config *c, const char *s)
{
	for (size_t i = 0; i < c->n_unknown; i++)
		if (!strcmp(c->unknown[i], s))
			return true;
	return false;
}

/* ---- the plan: one resolve through the data source's callbacks ----------- */

struct plan_fixture {
	bool throttled;                 /* the kernel has synthetic/rss_stat_throttled */
	const char *instance_name;
	bool exclusive;
	bool asked_sched_switch;
	unsigned read_functions;
};

static int fixture_read_events(void *userdata, const char *instance_name, bool exclusive, const char *const *reqs,
			       size_t n_reqs, struct ftrace_event_list **ret, char **ret_error)
{
	static const char text[] = "sched:sched_switch\nkmem:rss_stat\nkmem:mm_page_alloc\n";
	struct plan_fixture *f = userdata;
	struct ftrace_event_list *l = NULL;

	f->instance_name = instance_name;
	f->exclusive = exclusive;
	for (size_t i = 0; i < n_reqs; i++)
		if (strcmp(reqs[i], "sched/sched_switch") == 0)
			f->asked_sched_switch = true;
	ck_assert_int_eq(ftrace_event_list_new(&l), 0);
	ck_assert_int_eq(ftrace_event_list_parse(l, text, sizeof(text) - 1), 0);
	if (f->throttled)
		ck_assert_int_ge(ftrace_event_list_add(l, "synthetic", "rss_stat_throttled", 0), 0);
	ftrace_event_list_sort(l);
	*ret = l;
	return 0;
}

static int fixture_read_functions(void *userdata, char **ret_text)
{
	struct plan_fixture *f = userdata;

	f->read_functions++;
	*ret_text = strdup("do_sys_open\nvfs_read\n");
	return *ret_text ? 0 : -ENOMEM;
}

START_TEST(test_plan_resolve)
{
	char *events[] = { "sched/sched_switch" };
	char *cats[] = { "memory" };
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	Perfetto__Protos__FtraceConfig__KprobeEvent k1 = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__INIT;
	Perfetto__Protos__FtraceConfig__KprobeEvent k2 = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__INIT;
	Perfetto__Protos__FtraceConfig__KprobeEvent *kp[] = { &k1, &k2 };
	Perfetto__Protos__FtraceConfig__PrintFilter pf = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__INIT;
	Perfetto__Protos__FtraceConfig__PrintFilter__Rule rule = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__INIT;
	Perfetto__Protos__FtraceConfig__PrintFilter__Rule *rules[] = { &rule };
	struct plan_fixture f = { 0 };
	struct ftrace_plan_env env = {
		.read_events = fixture_read_events,
		.read_functions = fixture_read_functions,
		.userdata = &f,
		.ram_bytes = 4ull << 30,
	};
	struct ftrace_plan *p = NULL;
	char *err = NULL;

	cfg.ftrace_events = events;
	cfg.n_ftrace_events = 1;
	cfg.atrace_categories = cats;
	cfg.n_atrace_categories = 1;
	cfg.has_throttle_rss_stat = true;
	cfg.throttle_rss_stat = true;
	k1.probe = "do_sys_open";
	k1.has_type = true;
	k1.type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_BOTH;
	k2.probe = "not_a_function";
	k2.has_type = true;
	k2.type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_KPROBE;
	cfg.kprobe_events = kp;
	cfg.n_kprobe_events = 2;
	rule.match_case = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__MATCH_PREFIX;
	rule.prefix = "keep";
	rule.has_allow = true;
	rule.allow = true;
	pf.rules = rules;
	pf.n_rules = 1;
	cfg.print_filter = &pf;

	/* A kernel without the synthetic event: kmem/rss_stat itself. */
	ck_assert_int_eq(ftrace_plan_resolve(&cfg, &env, &p, &err), 0);
	ck_assert_ptr_null(f.instance_name);
	ck_assert(!f.exclusive);
	ck_assert(f.asked_sched_switch);
	ck_assert_uint_eq(f.read_functions, 1);
	ck_assert(has_event(p->config, "sched", "sched_switch"));
	ck_assert(has_event(p->config, "kmem", "rss_stat"));
	ck_assert(!has_event(p->config, "synthetic", "rss_stat_throttled"));
	ck_assert_uint_eq(p->n_print_rules, 1);
	ck_assert_int_eq(p->print_rules[0].match, FTRACE_PRINT_MATCH_PREFIX);
	ck_assert_str_eq(p->print_rules[0].prefix, "keep");
	ck_assert(p->print_rules[0].allow);
	ck_assert_uint_eq(p->kprobes->n_probes, 2);   /* the kprobe and the kretprobe of do_sys_open */
	ck_assert_uint_eq(p->n_failed, 1);
	ck_assert_str_eq(p->failed[0], "perfetto_kprobes/not_a_function (refused: not a kernel function, or not "
			 "a valid name)");
	ck_assert_ptr_nonnull(strstr(p->warnings, "not_a_function"));
	ftrace_plan_free(p);
	p = NULL;

	/* One with it: the throttled event replaces kmem/rss_stat. */
	f.throttled = true;
	ck_assert_int_eq(ftrace_plan_resolve(&cfg, &env, &p, &err), 0);
	ck_assert(!has_event(p->config, "kmem", "rss_stat"));
	ck_assert(has_event(p->config, "synthetic", "rss_stat_throttled"));
	ftrace_plan_free(p);
	p = NULL;

	/* The exclusive options reach the callback before anything is resolved. */
	cfg.tracing_cpumask = "1";
	ck_assert_int_eq(ftrace_plan_resolve(&cfg, &env, &p, &err), 0);
	ck_assert(f.exclusive);
	ftrace_plan_free(p);
	free(err);
}
END_TEST

START_TEST(test_config_resolution)
{
	char over[300];
	char *events[] = { "sched/sched_switch", "irq/*", "sched_waking", "only_here", "twice", "../x",
			   "a/b/c", "sched/nope", "nogroup/*", "sched/sched_switch", "*", "sched/*x", over,
			   "print", "bad\x01name" };
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_event_list *l = fixture_events();
	struct ftrace_config *c = NULL;
	char *err = NULL;

	memset(over, 'a', sizeof(over) - 1);
	over[sizeof(over) - 1] = 0;
	cfg.ftrace_events = events;
	cfg.n_ftrace_events = ARRAY_SIZE(events);
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), 0);

	ck_assert(has_event(c, "sched", "sched_switch"));
	ck_assert(has_event(c, "irq", "irq_handler_entry"));
	ck_assert(has_event(c, "irq", "irq_handler_exit"));
	ck_assert(has_event(c, "sched", "sched_waking")); /* known group wins over foo/ */
	ck_assert(!has_event(c, "foo", "sched_waking"));
	ck_assert(has_event(c, "uniq", "only_here"));
	ck_assert(has_event(c, "ftrace", "print"));
	ck_assert_uint_eq(c->n_events, 6); /* deduplicated */
	ck_assert(has_unknown(c, "twice")); /* ambiguous outside known groups */
	ck_assert(has_unknown(c, "../x"));
	ck_assert(has_unknown(c, "a/b/c"));
	ck_assert(has_unknown(c, "sched/nope"));
	ck_assert(has_unknown(c, "nogroup/*"));
	ck_assert(has_unknown(c, "*"));
	ck_assert(has_unknown(c, "sched/*x"));
	ck_assert(has_unknown(c, "bad?name")); /* reported printable */
	for (size_t i = 0; i < c->n_unknown; i++)
		ck_assert_uint_le(strlen(c->unknown[i]), FTRACE_MAX_REPORTED_NAME);
	ck_assert(c->has_sched_switch);
	ck_assert(c->compact_sched);
	ck_assert(c->denser_generic_events);
	ck_assert_uint_eq(c->buffer_size_kb, 2048);
	ck_assert_uint_eq(c->drain_period_ms, 100);
	ck_assert_ptr_null(c->instance_name);
	ftrace_config_free(c);
	c = NULL;

	/* Defaults and bounds. */
	Perfetto__Protos__FtraceConfig__CompactSchedConfig cs = PERFETTO__PROTOS__FTRACE_CONFIG__COMPACT_SCHED_CONFIG__INIT;
	cs.has_enabled = true;
	cs.enabled = false;
	cfg.compact_sched = &cs;
	cfg.has_buffer_size_kb = true;
	cfg.buffer_size_kb = 100;
	cfg.has_drain_period_ms = true;
	cfg.drain_period_ms = 60001;
	cfg.has_denser_generic_event_encoding = true;
	cfg.denser_generic_event_encoding = false;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 16ull << 30, &c, &err), 0);
	ck_assert(!c->compact_sched);
	ck_assert(!c->denser_generic_events);
	ck_assert_uint_eq(c->buffer_size_kb, 100); /* explicit wins */
	ck_assert_uint_eq(c->drain_period_ms, 100);
	ftrace_config_free(c);
	c = NULL;
	cfg.has_buffer_size_lower_bound = true;
	cfg.buffer_size_lower_bound = true;
	cfg.drain_period_ms = 2000;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 16ull << 30, &c, &err), 0);
	ck_assert_uint_eq(c->buffer_size_kb, 8192); /* a lower bound under the default */
	ck_assert_uint_eq(c->drain_period_ms, 2000);
	ftrace_config_free(c);
	c = NULL;
	cfg.buffer_size_kb = 0xffffffffu;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 16ull << 30, &c, &err), 0);
	ck_assert_uint_eq(c->buffer_size_kb, FTRACE_BUFFER_KB_MAX);
	/* the cap is said, not applied silently */
	ck_assert_ptr_nonnull(c->warnings);
	ck_assert_ptr_nonnull(strstr(c->warnings, "over the cap of 1048576 KiB"));
	ftrace_config_free(c);
	c = NULL;
	/* a small machine: all CPUs' buffers together stay within a quarter of its memory */
	cfg.buffer_size_kb = 1024 * 1024;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 1ull << 30, &c, &err), 0);
	ck_assert_uint_eq(c->buffer_size_kb,
			  (1ull << 30) / 4 / 1024 / (uint64_t)sysconf(_SC_NPROCESSORS_CONF));
	ck_assert_ptr_nonnull(c->warnings);
	ck_assert_ptr_nonnull(strstr(c->warnings, "more than this machine can hold"));
	ftrace_config_free(c);
	c = NULL;

	/* Rejected: bad instance name, too many events. */
	cfg.instance_name = "../etc";
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 0, &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(err);
	free(err);
	err = NULL;
	cfg.instance_name = NULL;
	char **many = calloc(FTRACE_MAX_CONFIG_EVENTS + 1, sizeof(char *));
	for (size_t i = 0; i <= FTRACE_MAX_CONFIG_EVENTS; i++)
		many[i] = "sched/sched_switch";
	cfg.ftrace_events = many;
	cfg.n_ftrace_events = FTRACE_MAX_CONFIG_EVENTS + 1;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 0, &c, &err), -EINVAL);
	free(err);
	free(many);
	ftrace_event_list_free(l);
}
END_TEST

/* ---- per-CPU stats text ----------------------------------------------------- */

/* The options beyond ftrace_events: implied events, the syscall filter, exclusive options. */
START_TEST(test_config_options_beyond_events)
{
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	Perfetto__Protos__FtraceConfig__TracefsOption opt = PERFETTO__PROTOS__FTRACE_CONFIG__TRACEFS_OPTION__INIT;
	Perfetto__Protos__FtraceConfig__TracefsOption *opts[] = { &opt };
	char *cats[] = { "sched", "view" }, *sys[] = { "sys_read", "sys_bogus" }, *bogus[] = { "sys_bogus" };
	uint32_t tids[] = { 5, 7 }, bad_tids[] = { 5, 0 };
	struct ftrace_event_list *l = fixture_events();
	struct ftrace_config *c = NULL;
	char *err = NULL;
	int nr_read;

	ck_assert_int_ge(ftrace_event_list_add(l, "raw_syscalls", "sys_enter", 0), 0);
	ck_assert_int_ge(ftrace_event_list_add(l, "raw_syscalls", "sys_exit", 0), 0);
	ftrace_event_list_sort(l);

	/* atrace: the category's kernel events that exist, and print; no unknowns for the rest */
	cfg.n_atrace_categories = ARRAY_SIZE(cats);
	cfg.atrace_categories = cats;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), 0);
	ck_assert(has_event(c, "sched", "sched_switch"));
	ck_assert(has_event(c, "sched", "sched_waking"));
	ck_assert(has_event(c, "ftrace", "print"));
	ck_assert(!has_event(c, "irq", "irq_handler_entry"));
	ck_assert_uint_eq(c->n_unknown, 0);
	ck_assert(c->atrace_userspace);
	ck_assert_ptr_nonnull(strstr(c->warnings, "atrace category 'view'"));
	ck_assert_ptr_null(strstr(c->warnings, "not supported"));
	c = ftrace_config_free(c);
	/* ... but not in an instance, as traced_probes */
	cfg.instance_name = "inst";
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "instance_name"));
	cfg.instance_name = NULL;
	cfg.n_atrace_categories = 0;

	/* syscall_events: a filter from this machine's table */
	nr_read = ftrace_syscall_by_name(ftrace_syscall_arch_current(), "sys_read");
	cfg.n_syscall_events = ARRAY_SIZE(sys);
	cfg.syscall_events = sys;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), 0);
	if (nr_read >= 0) {
		char want[32];

		snprintf(want, sizeof(want), "id == %d", nr_read);
		ck_assert(has_event(c, "raw_syscalls", "sys_enter"));
		ck_assert(has_event(c, "raw_syscalls", "sys_exit"));
		ck_assert(c->has_raw_syscalls);
		ck_assert_str_eq(c->syscall_filter, want);
		ck_assert_ptr_nonnull(strstr(c->warnings, "'sys_bogus' is not a syscall"));
	}
	c = ftrace_config_free(c);
	/* none known: raw_syscalls is left out rather than recorded whole */
	cfg.n_syscall_events = 1;
	cfg.syscall_events = bogus;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), 0);
	ck_assert(!has_event(c, "raw_syscalls", "sys_enter"));
	ck_assert(!c->has_raw_syscalls);
	ck_assert_ptr_null(c->syscall_filter);
	c = ftrace_config_free(c);
	cfg.n_syscall_events = 0;

	/* function graph: its events are required */
	cfg.has_enable_function_graph = cfg.enable_function_graph = true;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), 0);
	ck_assert(c->function_graph);
	ck_assert(has_unknown(c, "ftrace/funcgraph_entry"));
	c = ftrace_config_free(c);
	cfg.has_enable_function_graph = cfg.enable_function_graph = false;

	/* exclusive options: checked here, with a reason */
	cfg.n_tids_to_trace = 2;
	cfg.tids_to_trace = bad_tids;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), -EINVAL);
	cfg.tids_to_trace = tids;
	cfg.tracing_cpumask = "../tracing_on";
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a hex CPU mask"));
	cfg.tracing_cpumask = "3";
	opt.name = "a/b";
	opt.has_state = true;
	opt.state = PERFETTO__PROTOS__FTRACE_CONFIG__TRACEFS_OPTION__STATE__STATE_ENABLED;
	cfg.n_tracefs_options = 1;
	cfg.tracefs_options = opts;
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), -EINVAL);
	opt.name = "event-fork";
	ck_assert_int_eq(ftrace_config_resolve(&cfg, l, 4ull << 30, &c, &err), 0);
	ck_assert(c->exclusive);
	ck_assert_str_eq(c->event_pids, "5 7");
	ck_assert_str_eq(c->cpumask, "3");
	ck_assert_uint_eq(c->n_options, 1);
	ck_assert_str_eq(c->options[0].name, "event-fork");
	ck_assert(c->options[0].on);
	c = ftrace_config_free(c);
	free(err);
	ftrace_event_list_free(l);
}
END_TEST

START_TEST(test_stats_parse)
{
	static const char full[] = "entries: 12\noverrun: 3\ncommit overrun: 0\nbytes: 4096\n"
				   "oldest event ts:   461.123456\nnow ts:   467.345981\n"
				   "dropped events: 7\nread events: 99\n";
	static const char old_kernel[] = "entries: 1\noverrun: 2\nbytes: 3\nsomething new: 5\n";
	struct ftrace_cpu_stats s = { .cpu = 3 };

	ck_assert_int_eq(ftrace_stats_parse(full, sizeof(full) - 1, &s), 0);
	ck_assert_uint_eq(s.cpu, 3);
	ck_assert_uint_eq(s.entries, 12);
	ck_assert_uint_eq(s.overrun, 3);
	ck_assert_uint_eq(s.commit_overrun, 0);
	ck_assert_uint_eq(s.bytes, 4096);
	ck_assert_uint_eq(s.dropped_events, 7);
	ck_assert_uint_eq(s.read_events, 99);
	ck_assert_double_eq_tol(s.oldest_event_ts, 461.123456, 1e-9);
	ck_assert_double_eq_tol(s.now_ts, 467.345981, 1e-9);
	ck_assert_uint_eq(s.present, 0xff);

	s = (struct ftrace_cpu_stats){ 0 };
	ck_assert_int_eq(ftrace_stats_parse(old_kernel, sizeof(old_kernel) - 1, &s), 0);
	ck_assert_uint_eq(s.present, FTRACE_STAT_ENTRIES | FTRACE_STAT_OVERRUN | FTRACE_STAT_BYTES);
	ck_assert_uint_eq(s.bytes, 3);
	ck_assert_int_eq(ftrace_stats_parse("garbage", 7, &s), -EBADMSG);
	ck_assert_int_eq(ftrace_stats_parse("entries: x\n", 11, &s), -EBADMSG);
}
END_TEST

/* ---- the undo state file ------------------------------------------------------ */

/*
 * The undo state file a restart reads back, parsed without tracefs: every
 * kind of record it may hold is taken, and a file that names anything else
 * is refused whole, with nothing returned.
 */
START_TEST(test_undo_state_parse)
{
	char ok[] = "traced-probes-ftrace-undo 2\npid 4242\ndir /sys/kernel/tracing/instances/x\ntruncate 1\n"
		    "w tracing_on 1\nw buffer_size_kb 1408\nw per_cpu/cpu1/buffer_size_kb 7\n"
		    "w current_tracer nop\nw options/funcgraph-proc 0\nw tracing_cpumask ff,ffffffff\n"
		    "w events/sched/sched_switch/enable 0\nw events/sched/sched_waking/filter prev_pid%20%3D%3D%201\n"
		    "w set_ftrace_filter %\nw set_graph_function do_sys_open%0Avfs_read\nw set_event_pid 1%2042\n"
		    "w kprobe:perfetto_kprobes/do_sys_open -\n";
	static const char *const refused[] = {
		"traced-probes-ftrace-undo 9\ndir /sys/kernel/tracing\n",
		"traced-probes-ftrace-undo 3\nboot 0123\ndir /a\n",
		"traced-probes-ftrace-undo 3\nboot 0123456789abcdef0123456789abcdef0123\ndir /a\n",
		"traced-probes-ftrace-undo 3\nboot 01234567-89AB-cdef-0123-456789abcdef\ndir /a\n",
		"traced-probes-ftrace-undo 3\nboot 01234567-89ab-cdef-0123-456789abcdef\n"
		"boot 01234567-89ab-cdef-0123-456789abcdef\ndir /a\n",
		"traced-probes-ftrace-undo 2\npid 1\n",
		"traced-probes-ftrace-undo 2\ndir sys/kernel/tracing\n",
		"traced-probes-ftrace-undo 2\ndir /sys/kernel/tracing/../tracing/x\n",
		"traced-probes-ftrace-undo 2\ndir /a\ndir /b\n",
		"traced-probes-ftrace-undo 2\ndir /a\nw ../trace 0\n",
		"traced-probes-ftrace-undo 2\ndir /a\nw trace 0\n",
		"traced-probes-ftrace-undo 2\ndir /a\nw events/../../x/enable 1\n",
		"traced-probes-ftrace-undo 2\ndir /a\nw current_tracer function\n",
		"traced-probes-ftrace-undo 2\ndir /a\nw set_event_pid 1%00\n",
		"traced-probes-ftrace-undo 2\ndir /a\nw tracing_on\n",
		"traced-probes-ftrace-undo 2\ndir /a\nx\n",
		"traced-probes-ftrace-undo 2\npid x\ndir /a\n",
	};
	struct ftrace_tracefs *t = NULL;
	int pid = 0;

	ck_assert_int_eq(ftrace_tracefs_undo_parse(ok, &pid, &t), 0);
	ck_assert_int_eq(pid, 4242);
	ck_assert_uint_eq(ftrace_tracefs_undo_count(t), 12);
	ck_assert(ftrace_tracefs_remembered(t, "kprobe:perfetto_kprobes/do_sys_open"));
	ck_assert(ftrace_tracefs_remembered(t, "set_graph_function"));
	t = ftrace_tracefs_free(t);
	{
		char v3[] = "traced-probes-ftrace-undo 3\npid 7\nboot 01234567-89ab-cdef-0123-456789abcdef\n"
			    "dir /sys/kernel/tracing\ntruncate 0\nw tracing_on 1\n";

		ck_assert_int_eq(ftrace_tracefs_undo_parse(v3, &pid, &t), 0);
		ck_assert_int_eq(pid, 7);
		ck_assert_uint_eq(ftrace_tracefs_undo_count(t), 1);
		t = ftrace_tracefs_free(t);
	}
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		char *text = strdup(refused[i]);

		pid = -1;
		ck_assert_msg(ftrace_tracefs_undo_parse(text, &pid, &t) == -EBADMSG, "%s", refused[i]);
		ck_assert_ptr_null(t);
		ck_assert_int_eq(pid, -1);
		free(text);
	}
}
END_TEST

/* ---- sub-buffer sizes ------------------------------------------------------- */

START_TEST(test_subbuf_choice)
{
	/* 0: the kernel's, whatever the buffer. */
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(0, 8192), 0);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(0, 0), 0);
	/* Powers of two from a page to 512 KiB, rounded down. */
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 0), 64);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(100, 0), 64);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(3, 0), 4);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(4, 0), 4);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(512, 0), 512);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(4096, 0), 512);
	/* At least 32 of them in the buffer: the record and daemon defaults keep 64 KiB... */
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 8192), 64);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 2048), 64);
	/* ...smaller buffers get smaller sub-buffers, down to the page. */
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 2047), 32);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 1024), 32);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 512), 16);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 128), 4);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(64, 32), 4);
	ck_assert_uint_eq(ftrace_tracefs_subbuf_kb(512, 1u << 20), 512);
}
END_TEST

START_TEST(test_subbuf_setting)
{
	ck_assert_int_eq(unsetenv(FTRACE_SUBBUF_ENV), 0);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), FTRACE_SUBBUF_DEFAULT_KB);
	ck_assert_int_eq(setenv(FTRACE_SUBBUF_ENV, "16", 1), 0);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), 16);
	ck_assert_int_eq(setenv(FTRACE_SUBBUF_ENV, "0", 1), 0);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), 0);
	/* Not a number of KiB: the default. */
	ck_assert_int_eq(setenv(FTRACE_SUBBUF_ENV, "64k", 1), 0);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), FTRACE_SUBBUF_DEFAULT_KB);
	/* What the process sets (record --subbuf-size) wins over the environment. */
	ck_assert_int_eq(setenv(FTRACE_SUBBUF_ENV, "16", 1), 0);
	ftrace_host_set_subbuf_kb(0);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), 0);
	ftrace_host_set_subbuf_kb(128);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), 128);
	ftrace_host_set_subbuf_kb(FTRACE_SUBBUF_UNSET);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), 16);
	ck_assert_int_eq(unsetenv(FTRACE_SUBBUF_ENV), 0);
	ck_assert_uint_eq(ftrace_host_subbuf_kb(), FTRACE_SUBBUF_DEFAULT_KB);
}
END_TEST

/* A state file with a sub-buffer size replays it before buffer_size_kb (newest first). */
START_TEST(test_undo_subbuf_entry)
{
	char text[] = "traced-probes-ftrace-undo 2\npid 4242\ndir /sys/kernel/tracing/instances/x\n"
		      "truncate 1\nw tracing_on 1\nw buffer_size_kb 1410\nw buffer_subbuf_size_kb 4\n";
	char bad[] = "traced-probes-ftrace-undo 2\ndir /a\nw buffer_subbuf_size_kb 4%2064\n";
	struct ftrace_tracefs *t = NULL;
	int pid = 0;

	ck_assert_int_eq(ftrace_tracefs_undo_parse(text, &pid, &t), 0);
	ck_assert_uint_eq(ftrace_tracefs_undo_count(t), 3);
	ck_assert(ftrace_tracefs_remembered(t, "buffer_subbuf_size_kb"));
	ck_assert_uint_eq(t->n_undo, 3);
	ck_assert_str_eq(t->undo[1].file, "buffer_size_kb");
	ck_assert_str_eq(t->undo[2].file, "buffer_subbuf_size_kb");
	ck_assert_str_eq(t->undo[2].value, "4");
	t = ftrace_tracefs_free(t);
	/* The value is one token, as for every plain file. */
	ck_assert_int_eq(ftrace_tracefs_undo_parse(bad, &pid, &t), -EBADMSG);
	ck_assert_ptr_null(t);
}
END_TEST

/* ---- trace_clock text ------------------------------------------------------ */

START_TEST(test_clock_text)
{
	static const char text[] = "local global counter uptime perf mono mono_raw [boot] x86-tsc\n";
	char buf[16];

	ck_assert_int_eq(ftrace_clock_selected(text, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "boot");
	ck_assert_int_eq(ftrace_clock_selected("[local] global\n", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "local");
	ck_assert_int_eq(ftrace_clock_selected("local global\n", buf, sizeof(buf)), -EBADMSG);
	ck_assert_int_eq(ftrace_clock_selected("[] global\n", buf, sizeof(buf)), -EBADMSG);
	ck_assert_int_eq(ftrace_clock_selected("[a_much_too_long_name] x\n", buf, sizeof(buf)), -EBADMSG);

	ck_assert(ftrace_clock_listed(text, "mono_raw"));
	ck_assert(ftrace_clock_listed(text, "boot"));
	ck_assert(ftrace_clock_listed(text, "local"));
	ck_assert(ftrace_clock_listed(text, "x86-tsc"));
	/* Whole words only: "mono" is not "mono_raw", "raw" is in no list. */
	ck_assert(!ftrace_clock_listed("[local] mono_raw\n", "mono"));
	ck_assert(!ftrace_clock_listed(text, "raw"));

	ck_assert_int_eq(ftrace_clock_from_name("boot"), FTRACE_CLOCK_UNSPECIFIED);
	ck_assert_int_eq(ftrace_clock_from_name("global"), FTRACE_CLOCK_GLOBAL);
	ck_assert_int_eq(ftrace_clock_from_name("local"), FTRACE_CLOCK_LOCAL);
	ck_assert_int_eq(ftrace_clock_from_name("mono_raw"), FTRACE_CLOCK_MONO_RAW);
	ck_assert_int_eq(ftrace_clock_from_name("x86-tsc"), FTRACE_CLOCK_UNKNOWN);
}
END_TEST

/* ---- write_all(), the write loop of every tracefs write ------------------ */

/* Written by the SIGALRM handler: one count per alarm. */
static int g_alarm_efd = -1;

static void on_alarm(int sig)
{
	uint64_t one = 1;

	(void)sig;
	(void)!write(g_alarm_efd, &one, sizeof(one));
}

struct drain {
	int fd;
	size_t got;
	bool ok;
	_Atomic bool writer_done;       /* then read on without waiting */
};

static void *drain_thread(void *arg)
{
	struct drain *d = arg;
	char buf[4096];
	ssize_t n;

	d->ok = true;
	for (;;) {
		uint64_t ticks;

		/*
		 * A slow reader, one read per alarm: the writer fills the pipe
		 * and is blocked in write() when the next alarm interrupts it.
		 */
		if (!d->writer_done && read(g_alarm_efd, &ticks, sizeof(ticks)) < 0 && errno != EINTR)
			break;
		n = read(d->fd, buf, sizeof(buf));
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != (char)('a' + (d->got + (size_t)i) % 26))
				d->ok = false;
		d->got += (size_t)n;
	}
	return NULL;
}

START_TEST(test_write_all_short_writes)
{
	/* SIGALRM without SA_RESTART cuts a blocked pipe write short (or EINTR). */
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_interval = { 0, 500 }, .it_value = { 0, 500 } };
	sigset_t set;
	const size_t len = 4u << 20;
	char *data = malloc(len);
	struct drain d = { 0 };
	pthread_t th;
	int p[2];

	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)('a' + i % 26);
	g_alarm_efd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ge(g_alarm_efd, 0);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	(void)fcntl(p[1], F_SETPIPE_SZ, 4096);
	d.fd = p[0];

	/* Only this thread takes the signal. */
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	ck_assert_int_eq(pthread_create(&th, NULL, drain_thread, &d), 0);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);

	ck_assert_int_eq(write_all(p[1], data, len), 0);

	it = (struct itimerval){ 0 };
	setitimer(ITIMER_REAL, &it, NULL);
	close(p[1]);
	d.writer_done = true;
	(void)eventfd_write(g_alarm_efd, 1);
	pthread_join(th, NULL);
	close(p[0]);
	close(g_alarm_efd);
	ck_assert_uint_eq(d.got, len);
	ck_assert(d.ok);
	free(data);

	/* No progress at all is an error, not an endless loop. */
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, "x", 1), -ENOSPC);
	close(fd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_config");
	TCase *tc = tcase_create("pure");

	tcase_add_test(tc, test_name_validation);
	tcase_add_test(tc, test_config_resolution);
	tcase_add_test(tc, test_plan_resolve);
	tcase_add_test(tc, test_config_options_beyond_events);
	tcase_add_test(tc, test_stats_parse);
	tcase_add_test(tc, test_undo_state_parse);
	tcase_add_test(tc, test_undo_subbuf_entry);
	tcase_add_test(tc, test_subbuf_choice);
	tcase_add_test(tc, test_subbuf_setting);
	tcase_add_test(tc, test_clock_text);
	tcase_add_test(tc, test_write_all_short_writes);
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
	return failed ? 1 : 0;
}
