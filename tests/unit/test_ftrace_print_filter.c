/* SPDX-License-Identifier: Apache-2.0 */
/* FtraceConfig.print_filter rules, on the bytes of a print event's buf. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/ftrace_parse.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"

typedef Perfetto__Protos__FtraceConfig__PrintFilter__Rule Rule;
typedef Perfetto__Protos__FtraceConfig__PrintFilter__Rule__AtraceMessage AtraceMsg;

static Rule prefix_rule(const char *prefix, bool allow)
{
	Rule r = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__INIT;

	r.match_case = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__MATCH_PREFIX;
	r.prefix = (char *)prefix;
	r.has_allow = true;
	r.allow = allow;
	return r;
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
	Perfetto__Protos__FtraceConfig__PrintFilter cfg = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__INIT;
	Rule rules[3];
	Rule *ptrs[3] = { &rules[0], &rules[1], &rules[2] };
	AtraceMsg msg = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__ATRACE_MESSAGE__INIT;
	struct ftrace_print_filter *f = NULL;

	rules[0] = prefix_rule("keep-me", true);
	rules[1] = prefix_rule("keep", false);
	rules[2] = prefix_rule("", true);
	rules[2].match_case = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__MATCH_ATRACE_MSG;
	rules[2].atrace_msg = &msg;
	rules[2].allow = false;
	msg.type = "B";
	msg.prefix = "noisy";
	cfg.rules = ptrs;
	cfg.n_rules = 3;
	ck_assert_int_eq(ftrace_print_filter_new(&cfg, &f), 0);
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
	Perfetto__Protos__FtraceConfig__PrintFilter cfg = PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__INIT;
	struct ftrace_print_filter *f = (void *)1;
	Rule r = prefix_rule("x", false), *ptr = &r;
	char *huge = malloc(5000);

	ck_assert_int_eq(ftrace_print_filter_new(NULL, &f), 0);
	ck_assert_ptr_null(f);
	ck_assert_int_eq(ftrace_print_filter_new(&cfg, &f), 0);
	ck_assert_ptr_null(f);
	memset(huge, 'a', 4999);
	huge[4999] = '\0';
	r.prefix = huge;
	cfg.rules = &ptr;
	cfg.n_rules = 1;
	ck_assert_int_eq(ftrace_print_filter_new(&cfg, &f), -EINVAL);
	cfg.n_rules = 5000;
	ck_assert_int_eq(ftrace_print_filter_new(&cfg, &f), -E2BIG);
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
