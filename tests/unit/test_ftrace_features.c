/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The FtraceConfig options beyond ftrace_events, pure: atrace categories and
 * the events other options imply, syscall tables and filters, function
 * filters against available_filter_functions, kprobe plans and lines,
 * tids/cpumask/option names.
 */
#include <check.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "util/util.h"

static const struct ftrace_atrace_event *find_event(const struct ftrace_atrace_implied *a, const char *group,
						    const char *name)
{
	for (size_t i = 0; i < a->n_events; i++)
		if (strcmp(a->events[i].group, group) == 0 && strcmp(a->events[i].name, name) == 0)
			return &a->events[i];
	return NULL;
}

static struct ftrace_atrace_implied *implied(Perfetto__Protos__FtraceConfig *cfg, unsigned flags)
{
	struct ftrace_atrace_implied *a = NULL;

	ck_assert_int_eq(ftrace_atrace_implied(cfg, flags, &a), 0);
	ck_assert_ptr_nonnull(a);
	/* always sorted and unique */
	for (size_t i = 1; i < a->n_events; i++) {
		int c = strcmp(a->events[i - 1].group, a->events[i].group);

		ck_assert(c < 0 || (c == 0 && strcmp(a->events[i - 1].name, a->events[i].name) < 0));
	}
	return a;
}

/* ---- atrace ------------------------------------------------------------- */

START_TEST(test_atrace_sched_freq_idle)
{
	/* What `perfetto -t 1s sched freq idle` recorded through traced_probes
	 * v58.2 on Linux (perfetto-v58.2-traced_probes-cmdline-sched-freq-idle
	 * .pftrace): every event type in it must be implied. */
	static const char *const recorded[][2] = {
		{ "sched", "sched_switch" }, { "sched", "sched_waking" },   { "power", "cpu_idle" },
		{ "task", "task_newtask" },  { "task", "task_rename" },     { "sched", "sched_process_exit" },
		{ "ftrace", "print" },
	};
	char *cats[] = { "sched", "freq", "idle" };
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_atrace_implied *a;
	const struct ftrace_atrace_event *e;

	cfg.atrace_categories = cats;
	cfg.n_atrace_categories = 3;
	a = implied(&cfg, 0);
	for (size_t i = 0; i < ARRAY_SIZE(recorded); i++)
		ck_assert_msg(find_event(a, recorded[i][0], recorded[i][1]), "%s/%s missing", recorded[i][0],
			      recorded[i][1]);
	ck_assert(a->atrace_userspace);
	ck_assert_uint_eq(a->n_unknown_categories, 0);
	/* print is required, category events are optional */
	e = find_event(a, "ftrace", "print");
	ck_assert_uint_eq(e->flags & FTRACE_ATRACE_OPTIONAL, 0);
	e = find_event(a, "sched", "sched_switch");
	ck_assert_uint_eq(e->flags & FTRACE_ATRACE_OPTIONAL, FTRACE_ATRACE_OPTIONAL);
	/* deliberately not in Perfetto's sched category */
	ck_assert_ptr_null(find_event(a, "sched", "sched_wakeup"));
	/* freq: the cpufreq and clock events */
	ck_assert_ptr_nonnull(find_event(a, "power", "cpu_frequency"));
	ck_assert_ptr_nonnull(find_event(a, "power", "suspend_resume"));
	ck_assert_ptr_nonnull(find_event(a, "cpuhp", "cpuhp_enter"));
	/* sched takes the compiled-in cgroup group */
	ck_assert_ptr_nonnull(find_event(a, "cgroup", "cgroup_attach_task"));
	ck_assert_ptr_null(find_event(a, "raw_syscalls", "sys_enter"));
	ck_assert(!a->replace_rss_stat);
	ftrace_atrace_implied_free(a);
}
END_TEST

START_TEST(test_atrace_categories)
{
	static const char *const known[] = {
		"binder_driver", "binder_lock", "camera", "disk", "freq", "gfx", "i2c", "idle",
		"ion", "irq", "irqoff", "load", "membus", "memory", "memreclaim", "mmc",
		"pagecache", "preemptoff", "regulators", "sched", "sync", "thermal", "workq",
	};
	char *cats[] = { "irq", "view", "workq", "dalvik", "view", "" };
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_atrace_implied *a;

	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		ck_assert_msg(ftrace_atrace_category_known(known[i]), "%s", known[i]);
	ck_assert(!ftrace_atrace_category_known("view"));
	ck_assert(!ftrace_atrace_category_known(NULL));
	ck_assert(!ftrace_atrace_category_known("*"));

	cfg.atrace_categories = cats;
	cfg.n_atrace_categories = ARRAY_SIZE(cats);
	a = implied(&cfg, 0);
	ck_assert_ptr_nonnull(find_event(a, "irq", "irq_handler_entry"));
	ck_assert_ptr_nonnull(find_event(a, "ipi", "ipi_raise"));
	ck_assert_ptr_nonnull(find_event(a, "workqueue", "workqueue_execute_start"));
	/* userspace-only categories are reported once each */
	ck_assert_uint_eq(a->n_unknown_categories, 3);
	ck_assert_str_eq(a->unknown_categories[0], "view");
	ck_assert_str_eq(a->unknown_categories[1], "dalvik");
	ck_assert_str_eq(a->unknown_categories[2], "");
	ftrace_atrace_implied_free(a);
}
END_TEST

START_TEST(test_atrace_userspace_only_and_apps)
{
	char *cats[] = { "sched" };
	char *apps[] = { "com.example" };
	char *sdk[] = { "sched" };
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_atrace_implied *a;

	/* userspace only: no kernel events from categories, print stays */
	cfg.atrace_categories = cats;
	cfg.n_atrace_categories = 1;
	cfg.has_atrace_userspace_only = true;
	cfg.atrace_userspace_only = true;
	a = implied(&cfg, 0);
	ck_assert_uint_eq(a->n_events, 1);
	ck_assert_str_eq(a->events[0].name, "print");
	ck_assert(a->atrace_userspace);
	ftrace_atrace_implied_free(a);

	/* apps alone: print, the userspace flag */
	cfg = (Perfetto__Protos__FtraceConfig)PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	cfg.atrace_apps = apps;
	cfg.n_atrace_apps = 1;
	a = implied(&cfg, 0);
	ck_assert_uint_eq(a->n_events, 1);
	ck_assert(a->atrace_userspace);
	ftrace_atrace_implied_free(a);

	/* prefer_sdk alone asks for nothing */
	cfg = (Perfetto__Protos__FtraceConfig)PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	cfg.atrace_categories_prefer_sdk = sdk;
	cfg.n_atrace_categories_prefer_sdk = 1;
	a = implied(&cfg, 0);
	ck_assert_uint_eq(a->n_events, 0);
	ck_assert(!a->atrace_userspace);
	ftrace_atrace_implied_free(a);
}
END_TEST

START_TEST(test_atrace_memory_and_rss_throttle)
{
	char *cats[] = { "memory" };
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_atrace_implied *a;

	cfg.atrace_categories = cats;
	cfg.n_atrace_categories = 1;
	a = implied(&cfg, 0);
	ck_assert_ptr_nonnull(find_event(a, "kmem", "rss_stat"));
	ck_assert_ptr_null(find_event(a, "synthetic", "rss_stat_throttled"));
	ck_assert_ptr_nonnull(find_event(a, "mm_event", "mm_event_record"));
	ftrace_atrace_implied_free(a);

	a = implied(&cfg, FTRACE_ATRACE_RSS_THROTTLED_OK);
	ck_assert_ptr_null(find_event(a, "kmem", "rss_stat"));
	ck_assert_ptr_nonnull(find_event(a, "synthetic", "rss_stat_throttled"));
	ck_assert(!a->replace_rss_stat);
	ftrace_atrace_implied_free(a);

	cfg.has_throttle_rss_stat = true;
	cfg.throttle_rss_stat = true;
	a = implied(&cfg, FTRACE_ATRACE_RSS_THROTTLED_OK);
	ck_assert(a->replace_rss_stat);
	ftrace_atrace_implied_free(a);
	a = implied(&cfg, 0);
	ck_assert(!a->replace_rss_stat);
	ftrace_atrace_implied_free(a);

	/* Not known yet: both rows planned, each with its condition. */
	a = implied(&cfg, FTRACE_ATRACE_RSS_THROTTLED_EITHER);
	ck_assert_uint_eq(find_event(a, "kmem", "rss_stat")->flags,
			  FTRACE_ATRACE_OPTIONAL | FTRACE_ATRACE_UNLESS_THROTTLED);
	ck_assert_uint_eq(find_event(a, "synthetic", "rss_stat_throttled")->flags,
			  FTRACE_ATRACE_OPTIONAL | FTRACE_ATRACE_IF_THROTTLED);
	ck_assert_uint_eq(find_event(a, "mm_event", "mm_event_record")->flags, FTRACE_ATRACE_OPTIONAL);
	ck_assert(a->replace_rss_stat);
	ftrace_atrace_implied_free(a);
}
END_TEST

START_TEST(test_implied_syscalls_and_funcgraph)
{
	char *sys[] = { "sys_read" };
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_atrace_implied *a;

	a = implied(&cfg, 0);
	ck_assert_uint_eq(a->n_events, 0);
	ck_assert(!a->atrace_userspace);
	ftrace_atrace_implied_free(a);

	cfg.syscall_events = sys;
	cfg.n_syscall_events = 1;
	cfg.has_enable_function_graph = true;
	cfg.enable_function_graph = true;
	a = implied(&cfg, 0);
	ck_assert_uint_eq(a->n_events, 4);
	ck_assert_str_eq(a->events[0].group, "ftrace");
	ck_assert_str_eq(a->events[0].name, "funcgraph_entry");
	ck_assert_str_eq(a->events[1].name, "funcgraph_exit");
	ck_assert_str_eq(a->events[2].name, "sys_enter");
	ck_assert_str_eq(a->events[3].name, "sys_exit");
	for (size_t i = 0; i < a->n_events; i++)
		ck_assert_uint_eq(a->events[i].flags, 0);
	ftrace_atrace_implied_free(a);
}
END_TEST

/* ---- syscalls ----------------------------------------------------------- */

START_TEST(test_syscall_tables)
{
	ck_assert_int_eq(ftrace_syscall_arch_from_machine("x86_64"), FTRACE_SYSCALL_ARCH_X86_64);
	ck_assert_int_eq(ftrace_syscall_arch_from_machine("aarch64"), FTRACE_SYSCALL_ARCH_ARM64);
	ck_assert_int_eq(ftrace_syscall_arch_from_machine("armv8l"), FTRACE_SYSCALL_ARCH_ARM32);
	ck_assert_int_eq(ftrace_syscall_arch_from_machine("i686"), FTRACE_SYSCALL_ARCH_X86);
	ck_assert_int_eq(ftrace_syscall_arch_from_machine("riscv64"), -EINVAL);
	ck_assert_int_eq(ftrace_syscall_arch_from_machine(NULL), -EINVAL);

	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, "sys_read"), 0);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, "sys_mmap"), 9);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, "sys_futex"), 202);
	/* the native number, not the x32 entry point (512) */
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, "sys_rt_sigaction"), 13);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_ARM64, "sys_mmap"), 222);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_ARM64, "sys_open"), -ENOENT);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_ARM32, "sys_mmap"), 90);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, "read"), -ENOENT);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, NULL), -ENOENT);
	ck_assert_int_eq(ftrace_syscall_by_name(_FTRACE_SYSCALL_ARCH_MAX, "sys_read"), -EINVAL);
	ck_assert_str_eq(ftrace_syscall_name(FTRACE_SYSCALL_ARCH_X86_64, 1), "sys_write");
	ck_assert_ptr_null(ftrace_syscall_name(FTRACE_SYSCALL_ARCH_X86_64, 9999));
	ck_assert_uint_gt(ftrace_syscall_count(FTRACE_SYSCALL_ARCH_X86_64), 360);
	ck_assert_uint_eq(ftrace_syscall_count(_FTRACE_SYSCALL_ARCH_INVALID), 0);
	ck_assert_str_eq(ftrace_syscall_arch_to_string(FTRACE_SYSCALL_ARCH_ARM64), "arm64");
}
END_TEST

/* The largest number @arch's table gives a name. */
static unsigned table_max(enum ftrace_syscall_arch arch)
{
	unsigned max = 0;

	for (unsigned nr = 0; nr < 1024; nr++)
		if (ftrace_syscall_name(arch, nr))
			max = nr;
	return max;
}

/*
 * Every __NR_x of a header of this machine (Debian's multiarch paths; the
 * architectures whose headers are installed) is sys_x with the same number.
 * A name the table lacks fails when its number is within the table's range
 * (a syscall the table missed, as x86_64's uretprobe 335 was); beyond it,
 * the headers are newer than the table, which is said and not failed: the
 * table is regenerated from such headers (ftrace_syscalls_gen.py), and the
 * stored 6.12 list below holds it to a known kernel.
 */
START_TEST(test_syscall_table_matches_headers)
{
	static const struct {
		enum ftrace_syscall_arch arch;
		const char *path;
	} headers[] = {
		{ FTRACE_SYSCALL_ARCH_X86_64, "/usr/include/x86_64-linux-gnu/asm/unistd_64.h" },
		{ FTRACE_SYSCALL_ARCH_ARM64, "/usr/include/aarch64-linux-gnu/asm/unistd_64.h" },
		{ FTRACE_SYSCALL_ARCH_ARM32, "/usr/include/arm-linux-gnueabihf/asm/unistd-eabi.h" },
		{ FTRACE_SYSCALL_ARCH_X86, "/usr/include/i386-linux-gnu/asm/unistd_32.h" },
	};

	for (size_t h = 0; h < ARRAY_SIZE(headers); h++) {
		FILE *f = fopen(headers[h].path, "re");
		unsigned max = table_max(headers[h].arch), n = 0, newer = 0;
		char line[256], name[128];

		if (!f)
			continue;       /* not installed here: nothing to compare */
		while (fgets(line, sizeof(line), f)) {
			char full[140];
			unsigned nr;
			int got;

			/* "#define __NR_read 0", arm's "#define __NR_read (__NR_SYSCALL_BASE + 3)" */
			if (sscanf(line, "#define __NR_%127s %u", name, &nr) != 2 &&
			    sscanf(line, "#define __NR_%127s (__NR_SYSCALL_BASE + %u)", name, &nr) != 2)
				continue;
			snprintf(full, sizeof(full), "sys_%s", name);
			got = ftrace_syscall_by_name(headers[h].arch, full);
			n++;
			if (got == -ENOENT && nr > max) {
				fprintf(stderr, "%s: %s %u is newer than the table (regenerate it from these headers)\n",
					headers[h].path, full, nr);
				newer++;
				continue;
			}
			ck_assert_msg(got == (int)nr, "%s: %s is %u, the table says %d", headers[h].path, full, nr, got);
		}
		fclose(f);
		ck_assert_uint_gt(n, 300);
		ck_assert_uint_lt(newer, n / 10);
	}
}
END_TEST

/*
 * Every syscall of Linux 6.12's UAPI headers, all four architectures
 * (tests/data/syscalls/linux-6.12.txt, from Debian's linux-libc-dev
 * 6.12.117-1 by ftrace_syscalls_gen.py --list), is in the table with its
 * number, whatever headers this machine has.
 */
START_TEST(test_syscall_table_has_linux_6_12)
{
	const char *root = getenv("TP_SOURCE_ROOT");
	char path[600], line[256], arch[32], name[128];
	unsigned n = 0, nr;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/data/syscalls/linux-6.12.txt", root ? root : ".");
	f = fopen(path, "re");
	ck_assert_msg(f, "%s: %m", path);
	while (fgets(line, sizeof(line), f)) {
		enum ftrace_syscall_arch a = _FTRACE_SYSCALL_ARCH_INVALID;

		ck_assert_int_eq(sscanf(line, "%31s %127s %u", arch, name, &nr), 3);
		for (int i = 0; i < _FTRACE_SYSCALL_ARCH_MAX; i++)
			if (strcmp(ftrace_syscall_arch_to_string(i), arch) == 0)
				a = i;
		ck_assert_msg(a != _FTRACE_SYSCALL_ARCH_INVALID, "unknown architecture %s", arch);
		ck_assert_msg(ftrace_syscall_by_name(a, name) == (int)nr, "%s %s is %u in 6.12, the table says %d",
			      arch, name, nr, ftrace_syscall_by_name(a, name));
		n++;
	}
	fclose(f);
	ck_assert_uint_gt(n, 1500);
	/* the ones 6.12 added since the table's first source */
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, "sys_uretprobe"), 335);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_X86_64, "sys_mseal"), 462);
	ck_assert_int_eq(ftrace_syscall_by_name(FTRACE_SYSCALL_ARCH_ARM64, "sys_statmount"), 457);
}
END_TEST

START_TEST(test_syscall_filter)
{
	const char *names[] = { "sys_write", "sys_read", "sys_nosuch", "sys_read", NULL, "sys_mmap" };
	struct ftrace_syscall_filter *f = NULL;

	ck_assert_int_eq(ftrace_syscall_filter_build(FTRACE_SYSCALL_ARCH_X86_64, names, ARRAY_SIZE(names), &f), 0);
	ck_assert_str_eq(f->filter, "id == 0 || id == 1 || id == 9");
	ck_assert_uint_eq(f->n_ids, 3);
	ck_assert_uint_eq(f->n_unknown, 1);
	ck_assert_uint_eq(f->n_unknown_total, 1);
	ck_assert_str_eq(f->unknown[0], "sys_nosuch");
	ftrace_syscall_filter_free(f);

	/* the same names on arm64 */
	ck_assert_int_eq(ftrace_syscall_filter_build(FTRACE_SYSCALL_ARCH_ARM64, names, ARRAY_SIZE(names), &f), 0);
	ck_assert_str_eq(f->filter, "id == 63 || id == 64 || id == 222");
	ftrace_syscall_filter_free(f);

	/* nothing known: no filter at all, the caller records nothing */
	ck_assert_int_eq(ftrace_syscall_filter_build(FTRACE_SYSCALL_ARCH_X86_64, names + 2, 1, &f), 0);
	ck_assert_ptr_null(f->filter);
	ck_assert_uint_eq(f->n_ids, 0);
	ftrace_syscall_filter_free(f);

	ck_assert_int_eq(ftrace_syscall_filter_build(_FTRACE_SYSCALL_ARCH_INVALID, names, 1, &f), -EINVAL);
}
END_TEST

/* Every syscall: the one-term-per-id form is too long for the kernel, so
 * runs become ranges; the text must fit and mean the same set. */
START_TEST(test_syscall_filter_all)
{
	enum ftrace_syscall_arch arch = (enum ftrace_syscall_arch)_i;
	size_t n_names = ftrace_syscall_count(arch), n, k = 0;
	const char **names = calloc(n_names * 2 + 100, sizeof(char *));
	char **unknown = calloc(100, sizeof(char *));
	struct ftrace_syscall_filter *f = NULL;

	ck_assert_ptr_nonnull(names);
	for (unsigned nr = 0; nr < 1000; nr++)
		if (ftrace_syscall_name(arch, nr))
			names[k++] = ftrace_syscall_name(arch, nr);
	/*
	 * A number has one name, rarely two: Perfetto's and the UAPI
	 * headers' names for arm64's 79 (sys_fstatat, sys_newfstatat).
	 */
	n = k;
	ck_assert_uint_le(n, n_names);
	ck_assert_uint_ge(n + 2, n_names);
	/* hostile extras: junk, and every name twice */
	for (size_t i = 0; i < 100; i++) {
		ck_assert_int_ge(asprintf(&unknown[i], "sys_x%zu\n;rm", i), 0);
		names[k++] = unknown[i];
	}
	for (size_t i = 0; i < n; i++)
		names[k++] = names[i];
	ck_assert_int_eq(ftrace_syscall_filter_build(arch, names, k, &f), 0);
	ck_assert_uint_eq(f->n_ids, n);
	ck_assert_uint_le(strlen(f->filter), FTRACE_SYSCALL_FILTER_MAX);
	ck_assert_ptr_nonnull(strstr(f->filter, "(id >= 0 && id <= "));
	ck_assert_uint_eq(f->n_unknown_total, 100);
	ck_assert_uint_eq(f->n_unknown, FTRACE_MAX_REPORTED);
	ck_assert_str_eq(f->unknown[0], "sys_x0?;rm");
	ftrace_syscall_filter_free(f);
	for (size_t i = 0; i < 100; i++)
		free(unknown[i]);
	free(unknown);
	free(names);
}
END_TEST

/* ---- function filters --------------------------------------------------- */

static struct ftrace_funcs *funcs_of(const char *text)
{
	struct ftrace_funcs *f = NULL;

	ck_assert_int_eq(ftrace_funcs_parse(text, strlen(text), &f), 0);
	return f;
}

START_TEST(test_funcs_parse)
{
	struct ftrace_funcs *f = funcs_of("schedule\n"
					  "do_sys_open\n"
					  "e1000_xmit [e1000]\n"
					  "schedule\n"
					  "foo.isra.0\n"
					  "\n"
					  "bad/name\n"
					  "__x64_sys_read");

	ck_assert_uint_eq(ftrace_funcs_count(f), 5);
	ck_assert(ftrace_funcs_contains(f, "schedule"));
	ck_assert(ftrace_funcs_contains(f, "e1000_xmit"));
	ck_assert(ftrace_funcs_contains(f, "foo.isra.0"));
	ck_assert(ftrace_funcs_contains(f, "__x64_sys_read"));
	ck_assert(!ftrace_funcs_contains(f, "bad/name"));
	ck_assert(!ftrace_funcs_contains(f, "sched"));
	ck_assert(!ftrace_funcs_contains(f, NULL));
	ck_assert(!ftrace_funcs_contains(NULL, "schedule"));
	ftrace_funcs_free(f);

	f = funcs_of("");
	ck_assert_uint_eq(ftrace_funcs_count(f), 0);
	ck_assert(!ftrace_funcs_contains(f, "x"));
	ftrace_funcs_free(f);
}
END_TEST

START_TEST(test_funcs_names)
{
	ck_assert(ftrace_funcs_name_valid("do_sys_open"));
	ck_assert(ftrace_funcs_name_valid("foo.cold"));
	ck_assert(!ftrace_funcs_name_valid(""));
	ck_assert(!ftrace_funcs_name_valid("a b"));
	ck_assert(!ftrace_funcs_name_valid("a:traceoff"));
	ck_assert(!ftrace_funcs_name_valid("../x"));
	ck_assert(!ftrace_funcs_name_valid("sched_*"));
	ck_assert(ftrace_funcs_glob_valid("sched_*"));
	ck_assert(ftrace_funcs_glob_valid("*_read?"));
	ck_assert(!ftrace_funcs_glob_valid("schedule"));
	ck_assert(!ftrace_funcs_glob_valid("!sched_*"));
	ck_assert(!ftrace_funcs_glob_valid("sched_*:traceoff"));
	ck_assert(!ftrace_funcs_glob_valid("[ab]*"));
	ck_assert(!ftrace_funcs_glob_valid("*\n*"));
	ck_assert(!ftrace_funcs_glob_valid(NULL));
}
END_TEST

START_TEST(test_funcs_filter)
{
	struct ftrace_funcs *avail = funcs_of("schedule\n__schedule\nhandle_mm_fault\n");
	const char *in[] = { "__schedule", "handle_mm_fault", "nosuch", "__schedule", "sched*",
			     "x:traceoff", "a\nb", NULL, "!schedule" };
	struct ftrace_funcs_filter *f = NULL;

	ck_assert_int_eq(ftrace_funcs_filter_build(avail, in, ARRAY_SIZE(in), &f), 0);
	ck_assert_str_eq(f->text, "__schedule\nhandle_mm_fault\nsched*");
	ck_assert_uint_eq(f->n_accepted, 3);
	ck_assert_uint_eq(f->n_rejected_total, 4);
	ck_assert_uint_eq(f->n_rejected, 4);
	ck_assert_str_eq(f->rejected[0], "nosuch");
	ck_assert_str_eq(f->rejected[2], "a?b");
	ck_assert_uint_eq(f->n_dropped, 0);
	ftrace_funcs_filter_free(f);

	/* without the list (unreadable file) only the characters count */
	ck_assert_int_eq(ftrace_funcs_filter_build(NULL, in, 3, &f), 0);
	ck_assert_str_eq(f->text, "__schedule\nhandle_mm_fault\nnosuch");
	ftrace_funcs_filter_free(f);

	/* nothing accepted: no text */
	ck_assert_int_eq(ftrace_funcs_filter_build(avail, in + 2, 1, &f), 0);
	ck_assert_ptr_null(f->text);
	ck_assert_uint_eq(f->n_accepted, 0);
	ftrace_funcs_filter_free(f);
	ftrace_funcs_free(avail);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A 10,000-entry list against a 60,000-function kernel: capped, counted,
 * in one cheap pass. */
START_TEST(test_funcs_filter_huge)
{
	const size_t n_avail = 60000, n_req = 10000;
	char *text = malloc(n_avail * 16), *p = text;
	char **req = calloc(n_req + 100, sizeof(char *));
	struct ftrace_funcs *avail;
	struct ftrace_funcs_filter *f = NULL;
	double t0, dt;

	for (size_t i = 0; i < n_avail; i++)
		p += sprintf(p, "fn_%zu\n", i);
	avail = funcs_of(text);
	ck_assert_uint_eq(ftrace_funcs_count(avail), n_avail);
	for (size_t i = 0; i < n_req; i++)
		ck_assert_int_ge(asprintf(&req[i], "fn_%zu", i * 5), 0);
	for (size_t i = 0; i < 100; i++)
		ck_assert_int_ge(asprintf(&req[n_req + i], "glob_%zu_*", i), 0);

	t0 = now_s();
	ck_assert_int_eq(ftrace_funcs_filter_build(avail, (const char *const *)req, n_req + 100, &f), 0);
	dt = now_s() - t0;
	ck_assert_uint_eq(f->n_accepted, FTRACE_MAX_FUNCTION_FILTERS);
	ck_assert_uint_eq(f->n_dropped, n_req + 100 - FTRACE_MAX_FUNCTION_FILTERS);
	ck_assert_uint_eq(f->n_rejected_total, 0);
	ck_assert_msg(dt < 1.0, "took %.3f s", dt);
	ftrace_funcs_filter_free(f);

	/* globs alone stop at their own cap */
	ck_assert_int_eq(ftrace_funcs_filter_build(avail, (const char *const *)req + n_req, 100, &f), 0);
	ck_assert_uint_eq(f->n_accepted, FTRACE_MAX_FUNCTION_GLOBS);
	ck_assert_uint_eq(f->n_dropped, 100 - FTRACE_MAX_FUNCTION_GLOBS);
	ftrace_funcs_filter_free(f);

	for (size_t i = 0; i < n_req + 100; i++)
		free(req[i]);
	free(req);
	ftrace_funcs_free(avail);
	free(text);
}
END_TEST

/* ---- kprobes ------------------------------------------------------------ */

START_TEST(test_kprobe_plan)
{
	Perfetto__Protos__FtraceConfig__KprobeEvent k[5];
	Perfetto__Protos__FtraceConfig__KprobeEvent *kp[5];
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_funcs *avail = funcs_of("do_sys_open\nvfs_read\nvfs_write\n");
	struct ftrace_kprobe_plan *p = NULL;
	char line[256];

	for (size_t i = 0; i < 5; i++) {
		k[i] = (Perfetto__Protos__FtraceConfig__KprobeEvent)PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__INIT;
		k[i].has_type = true;
		kp[i] = &k[i];
	}
	k[0].probe = "do_sys_open";
	k[0].type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_KPROBE;
	k[1].probe = "vfs_read";
	k[1].type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_BOTH;
	k[2].probe = "vfs_write/../x";
	k[2].type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_KRETPROBE;
	k[3].probe = "vfs_write";
	k[3].type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_UNKNOWN;
	k[4].probe = "nosuch";
	k[4].type = PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_KPROBE;
	cfg.kprobe_events = kp;
	cfg.n_kprobe_events = 5;

	ck_assert_int_eq(ftrace_kprobe_plan_build(&cfg, avail, &p), 0);
	ck_assert_uint_eq(p->n_probes, 3);
	ck_assert_str_eq(p->probes[0].name, "do_sys_open");
	ck_assert(!p->probes[0].retprobe);
	ck_assert_int_eq(p->probes[0].trace_type, FTRACE_KPROBE_TRACE_INSTANT);
	ck_assert(!p->probes[1].retprobe);
	ck_assert_int_eq(p->probes[1].trace_type, FTRACE_KPROBE_TRACE_BEGIN);
	ck_assert(p->probes[2].retprobe);
	ck_assert_int_eq(p->probes[2].trace_type, FTRACE_KPROBE_TRACE_END);
	ck_assert_uint_eq(p->n_rejected, 2);
	ck_assert_str_eq(p->rejected[0], "perfetto_kretprobes/vfs_write/../x");
	ck_assert_str_eq(p->rejected[1], "perfetto_kprobes/nosuch");

	ck_assert_int_eq(ftrace_kprobe_line(&p->probes[0], line, sizeof(line)), 42);
	ck_assert_str_eq(line, "p:perfetto_kprobes/do_sys_open do_sys_open");
	ck_assert_int_gt(ftrace_kprobe_line(&p->probes[2], line, sizeof(line)), 0);
	ck_assert_str_eq(line, "r1024:perfetto_kretprobes/vfs_read vfs_read");
	ck_assert_int_gt(ftrace_kprobe_remove_line(&p->probes[2], line, sizeof(line)), 0);
	ck_assert_str_eq(line, "-:perfetto_kretprobes/vfs_read");
	ck_assert_int_eq(ftrace_kprobe_line(&p->probes[0], line, 10), -ENOBUFS);
	ftrace_kprobe_plan_free(p);

	/* without the function list, "nosuch" passes (the kernel decides) */
	ck_assert_int_eq(ftrace_kprobe_plan_build(&cfg, NULL, &p), 0);
	ck_assert_uint_eq(p->n_probes, 4);
	ck_assert_uint_eq(p->n_rejected_total, 1);
	ftrace_kprobe_plan_free(p);
	ftrace_funcs_free(avail);

	ck_assert(ftrace_kprobe_name_valid("do_sys_open"));
	ck_assert(!ftrace_kprobe_name_valid("foo.isra.0"));
	ck_assert(!ftrace_kprobe_name_valid(""));
	ck_assert(!ftrace_kprobe_name_valid(NULL));
}
END_TEST

/* ---- tids, cpumask, options --------------------------------------------- */

START_TEST(test_opts)
{
	const uint32_t tids[] = { 42, 1, 4294967295u };
	const uint32_t bad[] = { 3, 0 };
	_cleanup_free_ uint32_t *many = calloc(FTRACE_MAX_TIDS + 1, sizeof(uint32_t));
	char *s = NULL;

	ck_assert_int_eq(ftrace_opts_tids(tids, 3, &s), 0);
	ck_assert_str_eq(s, "42 1 4294967295");
	free(s);
	ck_assert_int_eq(ftrace_opts_tids(tids, 0, &s), -EINVAL);
	ck_assert_int_eq(ftrace_opts_tids(bad, 2, &s), -EINVAL);
	for (size_t i = 0; i <= FTRACE_MAX_TIDS; i++)
		many[i] = (uint32_t)i + 1;
	ck_assert_int_eq(ftrace_opts_tids(many, FTRACE_MAX_TIDS + 1, &s), -E2BIG);
	ck_assert_int_eq(ftrace_opts_tids(many, FTRACE_MAX_TIDS, &s), 0);
	ck_assert_uint_gt(strlen(s), FTRACE_MAX_TIDS * 2);
	free(s);

	ck_assert(ftrace_opts_cpumask_valid("3"));
	ck_assert(ftrace_opts_cpumask_valid("ff,ffffffff"));
	ck_assert(ftrace_opts_cpumask_valid("0"));
	ck_assert(!ftrace_opts_cpumask_valid(""));
	ck_assert(!ftrace_opts_cpumask_valid("3,"));
	ck_assert(!ftrace_opts_cpumask_valid(",3"));
	ck_assert(!ftrace_opts_cpumask_valid("3 "));
	ck_assert(!ftrace_opts_cpumask_valid("0x3"));
	ck_assert(!ftrace_opts_cpumask_valid(NULL));

	ck_assert(ftrace_opts_option_name_valid("print-parent"));
	ck_assert(ftrace_opts_option_name_valid("funcgraph_proc"));
	ck_assert(!ftrace_opts_option_name_valid("../tracing_on"));
	ck_assert(!ftrace_opts_option_name_valid("a b"));
	ck_assert(!ftrace_opts_option_name_valid(""));

	s = ftrace_opts_printable("a\x01\xff" "b");
	ck_assert_str_eq(s, "a??b");
	free(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_features");
	TCase *tc = tcase_create("pure");

	tcase_add_test(tc, test_atrace_sched_freq_idle);
	tcase_add_test(tc, test_atrace_categories);
	tcase_add_test(tc, test_atrace_userspace_only_and_apps);
	tcase_add_test(tc, test_atrace_memory_and_rss_throttle);
	tcase_add_test(tc, test_implied_syscalls_and_funcgraph);
	tcase_add_test(tc, test_syscall_tables);
	tcase_add_test(tc, test_syscall_table_matches_headers);
	tcase_add_test(tc, test_syscall_table_has_linux_6_12);
	tcase_add_test(tc, test_syscall_filter);
	tcase_add_loop_test(tc, test_syscall_filter_all, 0, _FTRACE_SYSCALL_ARCH_MAX);
	tcase_add_test(tc, test_funcs_parse);
	tcase_add_test(tc, test_funcs_names);
	tcase_add_test(tc, test_funcs_filter);
	tcase_add_test(tc, test_funcs_filter_huge);
	tcase_add_test(tc, test_kprobe_plan);
	tcase_add_test(tc, test_opts);
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
