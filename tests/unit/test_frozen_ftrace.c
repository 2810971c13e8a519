/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.frozen_ftrace on a fake boot-mapped instance: a tracefs tree in a
 * temporary directory whose per_cpu/cpu0/trace_pipe_raw is a file of
 * ring-buffer pages (read() gives them a page at a time, then 0, as the
 * kernel's empty buffer gives EAGAIN).  What is checked: the START stats
 * with preserve_ftrace_buffer first, every event of the pages, the old
 * boot's kernel address named through this boot's kallsyms shifted by
 * last_boot_info's delta (both kernel formats), the END stats, the buffer
 * cleared only after it was read; a missing instance and one that is not
 * boot-mapped refused with the reason and left untouched; and the
 * last_boot_info parser's edges.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loop/loop.h"
#include "probes/frozen_ftrace/frozen_ftrace.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"
#include "tests/lib/tp_record.h"
#include "util/util.h"

static char root[] = "/tmp/tp-frozen-XXXXXX";

/* The old boot's kernel: a work function at this address, and this boot's
 * kernel moved up by DELTA (KASLR). */
#define OLD_TEXT 0xffffffff81000000ull
#define OLD_WORK_FN 0xffffffff81234560ull
#define DELTA 0x2a00000ull
#define OLD_MOD_FN 0xffffffffc0100040ull

static const char fmt_workqueue_execute_start[] =
	"name: workqueue_execute_start\n"
	"ID: 335\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;\n"
	"\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n"
	"\n"
	"print fmt: \"work struct %p: function %ps\", REC->work, REC->function\n";

static void put(const char *rel, const void *data, size_t len)
{
	char path[512], *slash;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		(void)mkdir(path, 0755);
		*slash = '/';
	}
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, data, len), 0);
}

static void puts_file(const char *rel, const char *text)
{
	put(rel, text, strlen(text));
}

static off_t size_of(const char *rel)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (stat(path, &st) < 0)
		return -1;
	return st.st_size;
}

#define INST "instances/boot_mapped/"
#define N_SWITCH 40u

/*
 * Three pages on CPU 0: sched_switch records, one workqueue_execute_start
 * of the old boot's OLD_WORK_FN, an ftrace/print.
 */
static void make_instance(const char *last_boot_info)
{
	struct fx_page pages[3];
	uint8_t rec[64];
	char kallsyms[256];
	size_t n;

	puts_file(INST "events/header_page", fx_header_page);
	puts_file(INST "events/sched/sched_switch/format", fx_fmt_sched_switch);
	puts_file(INST "events/workqueue/workqueue_execute_start/format", fmt_workqueue_execute_start);
	puts_file(INST "events/ftrace/print/format", fx_fmt_print);
	puts_file(INST "buffer_size_kb", "7168\n");
	puts_file(INST "tracing_on", "0\n");
	puts_file(INST "trace", "not empty\n");
	puts_file(INST "per_cpu/cpu0/stats", "entries: 0\noverrun: 0\ncommit overrun: 0\nbytes: 0\n"
					     "oldest event ts: 0.000000\nnow ts: 1.000000\ndropped events: 0\n"
					     "read events: 42\n");
	if (last_boot_info)
		puts_file(INST "last_boot_info", last_boot_info);

	for (unsigned pg = 0; pg < 2; pg++) {
		fx_page_init(&pages[pg], 1000000000ull + pg * 1000000ull);
		for (unsigned i = 0; i < N_SWITCH / 2; i++) {
			n = fx_sched_switch(rec, 10 + i, "a", 10 + i, 120, 0, "b", 11 + i, 120);
			fx_event(&pages[pg], 100, rec, n);
		}
		fx_page_finish(&pages[pg]);
	}
	fx_page_init(&pages[2], 1100000000ull);
	memset(rec, 0, 24);
	fx_common(rec, 335, 0, 77);
	{
		uint64_t work = 0xffff888012345678ull, fn = OLD_WORK_FN;

		memcpy(rec + 8, &work, 8);
		memcpy(rec + 16, &fn, 8);
	}
	fx_event(&pages[2], 100, rec, 24);
	/* a work function in a module: the kernel's delta does not move it */
	{
		uint64_t fn = OLD_MOD_FN;

		memcpy(rec + 16, &fn, 8);
	}
	fx_event(&pages[2], 100, rec, 24);
	fx_page_finish(&pages[2]);
	{
		uint8_t *all = fx_pack(pages, 3);

		put(INST "per_cpu/cpu0/trace_pipe_raw", all, 3 * FX_PAGE_SIZE);
		free(all);
	}
	/* this boot's kallsyms: the kernel moved up by DELTA */
	n = (size_t)snprintf(kallsyms, sizeof(kallsyms),
			     "%llx T _text\n%llx T startup_64\n%llx t my_work_fn\n%llx T after_work_fn\n"
			     "%llx T _etext\n%llx t mod_fn_now_here\t[mod]\n",
			     OLD_TEXT + DELTA, OLD_TEXT + DELTA, OLD_WORK_FN - 0x60 + DELTA,
			     OLD_WORK_FN + 0x1000 + DELTA, OLD_TEXT + DELTA + 0x2000000,
			     OLD_MOD_FN + DELTA - 0x40);
	put("kallsyms", kallsyms, n);
}

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(root, "/tmp/tp-frozen-XXXXXX");
}

/* Setup with @instance; on success, the started instance. */
static int frozen_setup(const char *instance, struct loop *e, struct fx_sink *sink, void **ret,
			char **ret_error, char **ret_warnings)
{
	Perfetto__Protos__FrozenFtraceConfig fc = PERFETTO__PROTOS__FROZEN_FTRACE_CONFIG__INIT;
	Perfetto__Protos__DataSourceConfig cfg = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
	char kallsyms[512];
	struct frozen_ftrace_paths paths = { .tracefs_root = root, .kallsyms = kallsyms };
	struct ds_env env = { .event = e, .sink = sink->sink };

	snprintf(kallsyms, sizeof(kallsyms), "%s/kallsyms", root);
	cfg.name = (char *)"linux.frozen_ftrace";
	fc.instance_name = (char *)instance;
	cfg.frozen_ftrace_config = &fc;
	return frozen_ftrace_setup_at(&env, &cfg, &paths, ret, ret_error, ret_warnings);
}

/* Record the instance through the loop (slices) or the final flush alone. */
static void record(bool through_loop, struct tp_ftrace_scan *scan, uint64_t *ret_events)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	_cleanup_free_ char *err = NULL, *warn = NULL;
	struct fx_sink sink;
	struct ds_report rep = { 0 };
	char out[512];
	void *ds = NULL;

	ck_assert_int_eq(loop_new(&e), 0);
	fx_sink_init(&sink, 1 << 20);
	ck_assert_msg(frozen_setup("boot_mapped", e, &sink, &ds, &err, &warn) == 0, "setup: %s",
		      err ? err : "?");
	ck_assert_ptr_null(warn);
	ck_assert_int_eq(frozen_ftrace_ds_ops.start(ds), 0);
	if (through_loop) {
		/* the reading task ends once every CPU is read; the buffer is then cleared */
		for (int i = 0; i < 1000 && size_of(INST "trace") != 0; i++)
			ck_assert_int_ge(loop_run_once(e, 0), 0);
	}
	ck_assert_int_eq((through_loop ? frozen_ftrace_ds_ops.flush_last : frozen_ftrace_ds_ops.flush_final)(ds), 0);
	ck_assert_int_eq(size_of(INST "trace"), 0);
	ck_assert_int_eq(frozen_ftrace_ds_ops.report(ds, &rep), 0);
	*ret_events = rep.events;
	frozen_ftrace_ds_ops.free(ds);

	snprintf(out, sizeof(out), "%s/out.pftrace", root);
	put("out.pftrace", sink.buf, fx_sink_len(&sink));
	ck_assert_int_eq(tp_scan_trace_events(out, scan), 0);
	fx_sink_done(&sink);
}

static void check_scan(const struct tp_ftrace_scan *s, uint64_t events)
{
	ck_assert_uint_eq(events, N_SWITCH + 2);
	ck_assert_uint_eq(s->n_events, N_SWITCH + 2);
	ck_assert_uint_eq(s->events_by_field[4], N_SWITCH);       /* sched_switch */
	ck_assert_uint_eq(s->events_by_field[58], 2);             /* workqueue_execute_start */
	ck_assert(s->preserve_ftrace_buffer);
	ck_assert_uint_eq(s->stats_packets, 2);
	ck_assert_uint_eq(s->compact_bundles, 0);
	/* the old boot's timestamps, untouched, in order */
	ck_assert_uint_eq(s->events[0].ts, 1000000000ull + 100);
	for (size_t i = 1; i < s->n_events; i++)
		ck_assert_uint_gt(s->events[i].ts, s->events[i - 1].ts);
	ck_assert_msg(tp_scan_has_symbol(s, "my_work_fn"), "the old boot's work function was not named");
	/* and the module's function left unnamed, not misnamed */
	ck_assert_uint_eq(s->n_symbol_names, 1);
}

START_TEST(test_read_delta_612)
{
	struct tp_ftrace_scan s;
	uint64_t events;
	char info[128];

	snprintf(info, sizeof(info), "text delta:\t%llu\ndata delta:\t%llu\n", DELTA, DELTA);
	make_instance(info);
	record(true, &s, &events);
	check_scan(&s, events);
	tp_scan_free(&s);
}
END_TEST

START_TEST(test_read_text_addr_615)
{
	struct tp_ftrace_scan s;
	uint64_t events;
	char info[128];

	snprintf(info, sizeof(info), "%llx\t[kernel]\nffffffffc0200000\tvirtio_blk\n", OLD_TEXT);
	make_instance(info);
	/* no loop turn: the final flush reads it all */
	record(false, &s, &events);
	check_scan(&s, events);
	tp_scan_free(&s);
}
END_TEST

START_TEST(test_missing_instance)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	_cleanup_free_ char *err = NULL, *warn = NULL;
	struct fx_sink sink;
	void *ds = NULL;

	make_instance("text delta:\t0\n");
	ck_assert_int_eq(loop_new(&e), 0);
	fx_sink_init(&sink, 4096);
	ck_assert_int_eq(frozen_setup("nosuch", e, &sink, &ds, &err, &warn), -ENOENT);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "reserve_mem=") && strstr(err, "nosuch"), "%s", err);
	free(err);
	err = NULL;
	ck_assert_int_eq(frozen_setup("../x", e, &sink, &ds, &err, &warn), -EINVAL);
	free(err);
	err = NULL;
	ck_assert_int_eq(frozen_setup("", e, &sink, &ds, &err, &warn), -EINVAL);
	ck_assert_msg(strstr(err, "instance_name is required"), "%s", err);
	ck_assert_int_eq(sink.packets, 0);
	fx_sink_done(&sink);
}
END_TEST

START_TEST(test_not_boot_mapped)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	_cleanup_free_ char *err = NULL, *warn = NULL;
	struct fx_sink sink;
	void *ds = NULL;

	make_instance(NULL);
	ck_assert_int_eq(loop_new(&e), 0);
	fx_sink_init(&sink, 4096);
	ck_assert_int_eq(frozen_setup("boot_mapped", e, &sink, &ds, &err, &warn), -EMEDIUMTYPE);
	ck_assert_msg(strstr(err, "not boot-mapped"), "%s", err);
	/* left as found: nothing read, nothing cleared */
	ck_assert_int_eq(size_of(INST "trace"), (off_t)strlen("not empty\n"));
	ck_assert_int_eq(size_of(INST "per_cpu/cpu0/trace_pipe_raw"), 3 * FX_PAGE_SIZE);
	fx_sink_done(&sink);
}
END_TEST

START_TEST(test_empty_instance)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	_cleanup_free_ char *err = NULL, *warn = NULL;
	struct tp_ftrace_scan scan;
	struct fx_sink sink;
	struct ds_report rep = { 0 };
	char out[512];
	void *ds = NULL;

	make_instance("text delta:\t0\n");
	puts_file(INST "per_cpu/cpu0/trace_pipe_raw", "");
	puts_file(INST "trace", "# tracer: nop\n#\n# entries-in-buffer/entries-written: 0/0   #P:2\n");
	ck_assert_int_eq(loop_new(&e), 0);
	fx_sink_init(&sink, 1 << 16);
	ck_assert_int_eq(frozen_setup("boot_mapped", e, &sink, &ds, &err, &warn), 0);
	ck_assert_msg(warn && strstr(warn, "holds no event"), "%s", warn ? warn : "(no warning)");
	ck_assert_int_eq(frozen_ftrace_ds_ops.start(ds), 0);
	ck_assert_int_eq(frozen_ftrace_ds_ops.flush_final(ds), 0);
	ck_assert_int_eq(frozen_ftrace_ds_ops.report(ds, &rep), 0);
	ck_assert_uint_eq(rep.events, 0);
	frozen_ftrace_ds_ops.free(ds);
	snprintf(out, sizeof(out), "%s/out.pftrace", root);
	put("out.pftrace", sink.buf, fx_sink_len(&sink));
	ck_assert_int_eq(tp_scan_trace(out, &scan), 0);
	/* the two stats packets, nothing else */
	ck_assert_uint_eq(scan.stats_packets, 2);
	ck_assert_uint_eq(scan.bundles, 0);
	tp_scan_free(&scan);
	fx_sink_done(&sink);
}
END_TEST

START_TEST(test_boot_info_parse)
{
	struct frozen_boot_info bi;
	int64_t d;
	static const char v612[] = "text delta:\t-41943040\ndata delta:\t-41943040\n";
	static const char v615[] = "# comment\nffffffff9a000000\t[kernel]\nffffffffc0100000\text4\n";

	ck_assert_int_eq(frozen_ftrace_parse_boot_info(v612, strlen(v612), &bi), 0);
	ck_assert(bi.has_text_delta && !bi.has_text_addr && !bi.current);
	ck_assert_int_eq(bi.text_delta, -41943040);
	ck_assert_int_eq(frozen_ftrace_addr_delta(&bi, 0, &d), 0);
	ck_assert_int_eq(d, -41943040);

	ck_assert_int_eq(frozen_ftrace_parse_boot_info(v615, strlen(v615), &bi), 0);
	ck_assert(bi.has_text_addr && !bi.has_text_delta);
	ck_assert_uint_eq(bi.text_addr, 0xffffffff9a000000ull);
	ck_assert_int_eq(frozen_ftrace_addr_delta(&bi, 0, &d), -ENODATA);
	ck_assert_int_eq(frozen_ftrace_addr_delta(&bi, 0xffffffff9c000000ull, &d), 0);
	ck_assert_int_eq(d, 0x2000000);
	ck_assert_int_eq(frozen_ftrace_addr_delta(&bi, 0xffffffff99000000ull, &d), 0);
	ck_assert_int_eq(d, -0x1000000);

	/* a later line that does not parse leaves what an earlier one said */
	ck_assert_int_eq(frozen_ftrace_parse_boot_info("ffffffff9a000000\t[kernel]\n0\t[kernel]\n"
						       "text delta:\t5\ntext delta:\tx\n", 65, &bi), 0);
	ck_assert(bi.has_text_addr && bi.has_text_delta);
	ck_assert_uint_eq(bi.text_addr, 0xffffffff9a000000ull);
	ck_assert_int_eq(bi.text_delta, 5);

	ck_assert_int_eq(frozen_ftrace_parse_boot_info("# Current\n", 10, &bi), 0);
	ck_assert(bi.current);
	ck_assert_int_eq(frozen_ftrace_addr_delta(&bi, 0, &d), 0);
	ck_assert_int_eq(d, 0);

	/* nothing understood: a number too long, a bad hex address, junk, nothing */
	ck_assert_int_eq(frozen_ftrace_parse_boot_info("text delta:\t123456789012345678901234567890\n", 44, &bi),
			 -EBADMSG);
	ck_assert_int_eq(frozen_ftrace_parse_boot_info("ffffzzzz\t[kernel]\n", 18, &bi), -EBADMSG);
	ck_assert_int_eq(frozen_ftrace_parse_boot_info("11112222333344445\t[kernel]\n", 27, &bi), -EBADMSG);
	ck_assert_int_eq(frozen_ftrace_parse_boot_info("hello\n", 6, &bi), -EBADMSG);
	ck_assert_int_eq(frozen_ftrace_parse_boot_info("", 0, &bi), -EBADMSG);
	ck_assert_int_eq(frozen_ftrace_parse_boot_info("text delta:\t1\0", 14, &bi), -EBADMSG);
	ck_assert_int_eq(frozen_ftrace_parse_boot_info(NULL, 0, &bi), -EINVAL);
}
END_TEST

static Suite *frozen_suite(void)
{
	Suite *s = suite_create("frozen_ftrace");
	TCase *tc = tcase_create("instance");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_read_delta_612);
	tcase_add_test(tc, test_read_text_addr_615);
	tcase_add_test(tc, test_missing_instance);
	tcase_add_test(tc, test_not_boot_mapped);
	tcase_add_test(tc, test_empty_instance);
	suite_add_tcase(s, tc);
	tc = tcase_create("boot_info");
	tcase_add_test(tc, test_boot_info_parse);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(frozen_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
