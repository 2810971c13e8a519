/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The converter on trace.dat files trace-cmd records now, in a tracefs
 * instance of their own: scheduler events as file version 7 (zstd, the
 * default) and 6, and every event trace-cmd report prints is in the
 * Perfetto trace with the same CPU, timestamp and pid.  Needs root,
 * tracefs and trace-cmd; run under flock /tmp/tracefs.lock.
 */
#include <sys/wait.h>

#include "tests/lib/convert_check.h"

const char *__lsan_default_suppressions(void);

/* libtracecmd 3.1.6 does not free the strings of its sscanf("%ms") calls
 * while opening a file (the stack ends in glibc's vsscanf). */
_public_ const char *__lsan_default_suppressions(void)
{
	return "leak:libtracecmd.so\nleak:__isoc99_vsscanf\n";
}

#define INSTANCE "tp-convert-live"
#define TRACEFS "/sys/kernel/tracing"

static bool can_run(void)
{
	return geteuid() == 0 && access(TRACEFS "/instances", W_OK) == 0 &&
	       access("/usr/bin/trace-cmd", X_OK) == 0;
}

static char tracing_on_before[8];

static void read_tracing_on(char *buf, size_t len)
{
	_cleanup_close_ int fd = open(TRACEFS "/tracing_on", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	memset(buf, 0, len);
	if (fd >= 0 && (n = read(fd, buf, len - 1)) > 0)
		buf[n] = '\0';
}

/* What trace-cmd may leave behind, even when it fails. */
static void restore(void)
{
	char now[8];
	int fd;

	(void)rmdir(TRACEFS "/instances/" INSTANCE);
	read_tracing_on(now, sizeof(now));
	if (tracing_on_before[0] && strcmp(now, tracing_on_before) != 0) {
		fd = open(TRACEFS "/tracing_on", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void)write_all(fd, tracing_on_before, strlen(tracing_on_before));
			close(fd);
		}
	}
}

/* trace-cmd record into the instance; -d and --no-filter: this machine's
 * function-tracer files may not be writable, and they are not needed. */
static void record(const char *out, const char *extra)
{
	_cleanup_free_ char *cmd = NULL;
	int st;

	read_tracing_on(tracing_on_before, sizeof(tracing_on_before));
	ck_assert_int_ge(asprintf(&cmd,
				  "trace-cmd record -q -d --no-filter -B " INSTANCE " %s -e sched "
				  "-o %s -- sh -c 'for i in 1 2 3 4 5 6 7 8; do cat /proc/self/stat "
				  ">/dev/null; done' >/dev/null 2>&1",
				  extra, out),
			 0);
	st = system(cmd);
	restore();
	ck_assert_msg(access(out, R_OK) == 0, "trace-cmd wrote nothing (status %d)", st);
}

/* Lines of trace-cmd report that are events. */
static uint64_t report_events(const char *dat)
{
	_cleanup_free_ char *cmd = NULL;
	char line[4096];
	uint64_t n = 0;
	FILE *f;

	ck_assert_int_ge(asprintf(&cmd, "trace-cmd report -i %s 2>/dev/null", dat), 0);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		n += strchr(line, '[') && strchr(line, ':') && strncmp(line, "cpus=", 5) != 0;
	ck_assert_int_eq(pclose(f), 0);
	return n;
}

static void check(const char *extra)
{
	_cleanup_free_ struct convert_summary *sum = NULL;
	char dir[] = "/tmp/tp-convert-live-XXXXXX";
	_cleanup_free_ char *dat = NULL;
	struct cc_pf pf = {};

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_ge(asprintf(&dat, "%s/trace.dat", dir), 0);
	record(dat, extra);
	cc_check_file(dat, true, &sum, &pf);
	ck_assert_uint_eq(sum->events, report_events(dat));
	ck_assert_uint_eq(sum->parse_errors, 0);
	ck_assert_uint_gt(pf.threads, 0);
	cc_pf_done(&pf);
	unlink(dat);
	rmdir(dir);
}

START_TEST(test_live_v7)
{
	if (!can_run())
		return;
	check("");
}
END_TEST

START_TEST(test_live_v6)
{
	if (!can_run())
		return;
	check("--file-version 6");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("convert_live");
	TCase *tc = tcase_create("trace-cmd");
	SRunner *sr;
	int failed;

	if (!can_run()) {
		fprintf(stderr, "needs root, tracefs and trace-cmd: skipped\n");
		return 77;
	}
	tracecmd_set_loglevel(TEP_LOG_NONE);
	tcase_add_test(tc, test_live_v7);
	tcase_add_test(tc, test_live_v6);
	tcase_add_unchecked_fixture(tc, NULL, restore);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
