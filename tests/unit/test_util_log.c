/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Log lines carry syslog priority prefixes ("<4>") only when stderr is the
 * journal stream named by $JOURNAL_STREAM; on anything else (a terminal, a
 * pipe, a file) they are plain.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/util.h"

/* Log one warning with stderr on a fresh pipe; return what was written. */
static void capture_warning(const char *journal_stream_for_pipe, char *out, size_t len)
{
	int p[2], saved;
	ssize_t n;
	struct stat st;
	char env[64];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(fstat(p[1], &st), 0);
	if (journal_stream_for_pipe) {
		if (strcmp(journal_stream_for_pipe, "match") == 0)
			(void)snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
				       (unsigned long long)st.st_ino);
		else
			(void)snprintf(env, sizeof(env), "%s", journal_stream_for_pipe);
		ck_assert_int_eq(setenv("JOURNAL_STREAM", env, 1), 0);
	} else {
		ck_assert_int_eq(unsetenv("JOURNAL_STREAM"), 0);
	}
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_ge(dup2(p[1], STDERR_FILENO), 0);
	log_warning("disk %s", "full");
	fflush(stderr);
	ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
	close(saved);
	close(p[1]);
	n = read(p[0], out, len - 1);
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
	close(p[0]);
}

START_TEST(test_plain_without_journal)
{
	char buf[256];

	capture_warning(NULL, buf, sizeof(buf));
	ck_assert_str_eq(buf, "traced-probes: warning: disk full\n");
}
END_TEST

START_TEST(test_prefix_on_journal)
{
	char buf[256];

	capture_warning("match", buf, sizeof(buf));
	ck_assert_str_eq(buf, "<4>traced-probes: warning: disk full\n");
}
END_TEST

/* Inherited from a parent whose stderr was the journal, then redirected. */
START_TEST(test_plain_when_redirected)
{
	char buf[256];

	capture_warning("1:1", buf, sizeof(buf));
	ck_assert_str_eq(buf, "traced-probes: warning: disk full\n");
	capture_warning("garbage", buf, sizeof(buf));
	ck_assert_str_eq(buf, "traced-probes: warning: disk full\n");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("util_log");
	TCase *tc = tcase_create("journal");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_plain_without_journal);
	tcase_add_test(tc, test_prefix_on_journal);
	tcase_add_test(tc, test_plain_when_redirected);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
