/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.systemd_journald's field parser: which "KEY=value" fields of a
 * journal entry become which SystemdJournaldEvent fields, numbers that are
 * not a whole uint32, empty values, fields with '=' in the value, and the
 * limits record checks before it starts.  (The journal itself:
 * tests/kernel/test_journald_live.c.)
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "probes/journald/journald.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "protos/perfetto/config/linux/journald_config.pb-c.h"
#include "util/util.h"

static int field(const char *f, struct journald_entry *e)
{
	return journald_entry_field(f, strlen(f), e);
}

START_TEST(test_fields)
{
	struct journald_entry e = {};

	ck_assert_int_eq(field("MESSAGE=disk full: /var = 100%", &e), 1);
	ck_assert_uint_eq(e.str_len[JOURNALD_MESSAGE], strlen("disk full: /var = 100%"));
	ck_assert_int_eq(memcmp(e.str[JOURNALD_MESSAGE], "disk full: /var = 100%", e.str_len[JOURNALD_MESSAGE]), 0);
	ck_assert_int_eq(field("SYSLOG_IDENTIFIER=tp-test", &e), 1);
	ck_assert_int_eq(field("_SYSTEMD_UNIT=ssh.service", &e), 1);
	ck_assert_int_eq(field("_COMM=logger", &e), 1);
	ck_assert_int_eq(field("_EXE=/usr/bin/logger", &e), 1);
	ck_assert_int_eq(field("_HOSTNAME=box", &e), 1);
	ck_assert_int_eq(field("_TRANSPORT=journal", &e), 1);
	ck_assert_int_eq(field("PRIORITY=4", &e), 1);
	ck_assert_int_eq(field("_PID=4242", &e), 1);
	ck_assert_int_eq(field("_TID=4243", &e), 1);
	ck_assert_int_eq(field("_UID=0", &e), 1);
	ck_assert_int_eq(field("_GID=4294967295", &e), 1);
	ck_assert_uint_eq(e.prio, 4);
	ck_assert_uint_eq(e.pid, 4242);
	ck_assert_uint_eq(e.tid, 4243);
	ck_assert_uint_eq(e.uid, 0);
	ck_assert_uint_eq(e.gid, 4294967295u);
	ck_assert_uint_eq(e.has_num, 0x1f);
	for (int i = 0; i < _JOURNALD_STR_MAX; i++)
		ck_assert_ptr_nonnull(e.str[i]);
}
END_TEST

START_TEST(test_fields_refused)
{
	struct journald_entry e = {};

	/* not ours, or not a field */
	ck_assert_int_eq(field("_BOOT_ID=0123456789abcdef", &e), 0);
	ck_assert_int_eq(field("MESSAGE_ID=abc", &e), 0);
	ck_assert_int_eq(field("_PIDX=1", &e), 0);
	ck_assert_int_eq(field("MESSAGE", &e), 0);
	ck_assert_int_eq(journald_entry_field(NULL, 0, &e), 0);
	/* empty values and numbers that are not a whole uint32 */
	ck_assert_int_eq(field("MESSAGE=", &e), 0);
	ck_assert_int_eq(field("_PID=", &e), 0);
	ck_assert_int_eq(field("_PID=-1", &e), 0);
	ck_assert_int_eq(field("_PID=12a", &e), 0);
	ck_assert_int_eq(field("_UID=4294967296", &e), 0);
	ck_assert_int_eq(field("PRIORITY=99999999999", &e), 0);
	ck_assert_uint_eq(e.has_num, 0);
	ck_assert_ptr_null(e.str[JOURNALD_MESSAGE]);
	/* a key is matched whole, not as a prefix of the data */
	ck_assert_int_eq(journald_entry_field("_PID=7", 4, &e), 0);
}
END_TEST

START_TEST(test_check_config)
{
	Perfetto__Protos__DataSourceConfig dc = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
	Perfetto__Protos__SystemdJournaldConfig jc = PERFETTO__PROTOS__SYSTEMD_JOURNALD_CONFIG__INIT;
	static char *ids[300];
	char longname[600], err[256];

	ck_assert_int_eq(journald_ds_ops.check_config(&dc, err, sizeof(err)), 0);
	dc.journald_config = &jc;
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
		ids[i] = (char *)"x";
	jc.filter_identifiers = ids;
	jc.n_filter_identifiers = 256;
	ck_assert_int_eq(journald_ds_ops.check_config(&dc, err, sizeof(err)), 0);
	jc.n_filter_identifiers = 257;
	ck_assert_int_eq(journald_ds_ops.check_config(&dc, err, sizeof(err)), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err, "more than the limit of 256"));
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ids[0] = longname;
	jc.n_filter_identifiers = 1;
	ck_assert_int_eq(journald_ds_ops.check_config(&dc, err, sizeof(err)), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err, "bytes, more than the limit of"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("journald");
	TCase *tc = tcase_create("fields");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_fields);
	tcase_add_test(tc, test_fields_refused);
	tcase_add_test(tc, test_check_config);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
