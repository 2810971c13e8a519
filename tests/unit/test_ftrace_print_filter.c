/* SPDX-License-Identifier: Apache-2.0 */
/* Print filter rules (FtraceConfig.print_filter as the plan has them), on the bytes of a print event's buf. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse.h"
static struct ftrace_print_rule prefix_rule(const char *prefix, bool allow)
{
	return (struct ftrace_print_rule){ .match = FTRACE_PRINT_MATCH_PREFIX, .prefix = prefix, .allow = allow };
}

static bool allows(const struct ftrace_print_filter *f, const char *s)
{
	char rec[64] = "";

	/* as in a record: the string, its NUL, then other bytes */
	strcpy(rec, s);
	memset(rec + strlen(s) + 1, 'Z', sizeof(rec) - strlen(s) - 1);
	return ftrace_print_filter_allows(f, rec, sizeof(rec));
}

START_TEST(test_first_match_decides)
{
	struct ftrace_print_rule rules[4];
	struct ftrace_print_filter *f = NULL;

	rules[0] = prefix_rule("keep-me", true);
	rules[1] = prefix_rule("keep", false);
	rules[2] = (struct ftrace_print_rule){ .match = FTRACE_PRINT_MATCH_ATRACE, .type = "B", .prefix = "noisy" };
	/* nothing to match: left out */
	rules[3] = (struct ftrace_print_rule){ .match = FTRACE_PRINT_MATCH_NONE, .allow = false };
	ck_assert_int_eq(ftrace_print_filter_new(rules, 4, &f), 0);
	ck_assert_ptr_nonnull(f);

	ck_assert(allows(f, "keep-me please"));
	ck_assert(!allows(f, "keep out"));
	ck_assert(!allows(f, "B|1234|noisy slice"));
	ck_assert(!allows(f, "B||noisy"));             /* an empty pid is still a pid */
	ck_assert(allows(f, "B|12a|noisy"));            /* not a pid: no match, kept */
	ck_assert(allows(f, "E|1234|noisy"));           /* another type */
	ck_assert(allows(f, "B|1234|quiet"));
	ck_assert(allows(f, "B"));
	ck_assert(allows(f, "unrelated"));              /* nothing matches: kept */
	ck_assert(allows(f, ""));
	/* the match never looks past the NUL that ends the message */
	ck_assert(allows(f, "kee"));
	ftrace_print_filter_free(f);
}
END_TEST

START_TEST(test_empty_and_limits)
{
	struct ftrace_print_filter *f = (void *)1;
	struct ftrace_print_rule r = prefix_rule("x", false);
	char *huge = malloc(5000);

	ck_assert_int_eq(ftrace_print_filter_new(NULL, 0, &f), 0);
	ck_assert_ptr_null(f);
	memset(huge, 'a', 4999);
	huge[4999] = '\0';
	r.prefix = huge;
	ck_assert_int_eq(ftrace_print_filter_new(&r, 1, &f), -EINVAL);
	/* the count is checked before any rule is read */
	ck_assert_int_eq(ftrace_print_filter_new(&r, 5000, &f), -E2BIG);
	free(huge);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ftrace_print_filter");
	TCase *tc = tcase_create("rules");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_first_match_decides);
	tcase_add_test(tc, test_empty_and_limits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
