/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.sysfs_power on a fake /sys/class/power_supply: which directories
 * are batteries, what each counter file becomes in BatteryCounters (and
 * that current_avg no longer overwrites current_now), names only with more
 * than one battery, fresh values on every poll, a counter that stops
 * parsing, no battery at all, and the value parser's edges.  Packets go to
 * a sink over a plain buffer and are decoded with the generated code.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probes/sysfs_power/sysfs_power.h"
#include "protos/pbw.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "util/util.h"

static char root[] = "/tmp/tp-sysfs-power-XXXXXX";

/* ---- a fake power_supply tree ------------------------------------------------ */

static void put(const char *dev, const char *file, const char *text)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, dev);
	(void)mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", root, dev, file);
	/* rewritten in place, as sysfs keeps one inode: an open fd sees it */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, text, strlen(text)), 0);
	close(fd);
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
	strcpy(root, "/tmp/tp-sysfs-power-XXXXXX");
}

/* ---- capture sink ----------------------------------------------------------- */

struct capture {
	uint8_t buf[16384];
	struct pbw w;
	bool inited;
	unsigned packets, commits;
	Perfetto__Protos__Trace *trace;
};

static struct pbw *cap_begin(void *userdata)
{
	struct capture *c = userdata;

	if (!c->inited) {
		pbw_init(&c->w, c->buf, sizeof(c->buf), NULL, NULL);
		c->inited = true;
	}
	pbw_begin_nested(&c->w, 1);
	return &c->w;
}

static int cap_end(void *userdata)
{
	struct capture *c = userdata;

	(void)pbw_end_nested(&c->w);
	c->packets++;
	return pbw_overflowed(&c->w) ? -ENOSPC : 0;
}

static void cap_commit(void *host)
{
	((struct capture *)host)->commits++;
}

static struct ds_env cap_env(struct capture *c)
{
	return (struct ds_env){
		.sink = { .begin_packet = cap_begin, .end_packet = cap_end, .userdata = c },
		.host = { .commit_soon = cap_commit, .host = c },
	};
}

/* The battery of packet @i of what @c captured. */
static const Perfetto__Protos__BatteryCounters *cap_battery(struct capture *c, size_t i)
{
	const Perfetto__Protos__TracePacket *p;

	if (c->trace)
		perfetto__protos__trace__free_unpacked(c->trace, NULL);
	c->trace = perfetto__protos__trace__unpack(NULL, pbw_position(&c->w), c->buf);
	ck_assert_msg(c->trace, "captured packets do not decode");
	ck_assert_uint_eq(c->trace->n_packet, c->packets);
	ck_assert_uint_lt(i, c->trace->n_packet);
	p = c->trace->packet[i];
	ck_assert(p->has_timestamp);
	ck_assert_uint_gt(p->timestamp, 0);
	ck_assert_int_eq(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_BATTERY);
	return p->battery;
}

static void cap_done(struct capture *c)
{
	if (c->trace)
		perfetto__protos__trace__free_unpacked(c->trace, NULL);
	c->trace = NULL;
}

static void battery(const char *dev, const char *present)
{
	put(dev, "type", "Battery\n");
	put(dev, "present", present);
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(test_parse_value)
{
	int64_t v = 42;

	ck_assert_int_eq(sysfs_power_parse_value("4123000\n", 8, &v), 0);
	ck_assert_int_eq(v, 4123000);
	ck_assert_int_eq(sysfs_power_parse_value("-1520000\n", 9, &v), 0);
	ck_assert_int_eq(v, -1520000);
	ck_assert_int_eq(sysfs_power_parse_value("87", 2, &v), 0);
	ck_assert_int_eq(v, 87);
	v = 42;
	ck_assert_int_eq(sysfs_power_parse_value("", 0, &v), -EINVAL);
	ck_assert_int_eq(sysfs_power_parse_value("\n", 1, &v), -EINVAL);
	ck_assert_int_eq(sysfs_power_parse_value("12abc\n", 6, &v), -EINVAL);
	ck_assert_int_eq(sysfs_power_parse_value("1\0002\n", 4, &v), -EINVAL);
	ck_assert_int_eq(sysfs_power_parse_value("Full\n", 5, &v), -EINVAL);
	ck_assert_int_eq(sysfs_power_parse_value("99999999999999999999\n", 21, &v), -ERANGE);
	ck_assert_int_eq(v, 42);
}
END_TEST

/* Two batteries among other supplies: each counter in its field, names on. */
START_TEST(test_two_batteries)
{
	struct capture c = {};
	struct ds_env env = cap_env(&c);
	struct sysfs_power *sp = NULL;
	struct sysfs_power_stats st;
	const Perfetto__Protos__BatteryCounters *b;
	char *warnings = NULL;

	battery("BAT0", "1\n");
	put("BAT0", "charge_now", "4123000\n");
	put("BAT0", "capacity", "87\n");
	put("BAT0", "current_now", "-1520000\n");
	put("BAT0", "current_avg", "-1490000\n");
	put("BAT0", "energy_now", "47310000\n");
	put("BAT0", "voltage_now", "12380000\n");
	battery("BAT1", "1");          /* no newline: still "1" */
	put("BAT1", "capacity", "55\n");
	put("BAT1", "voltage_now", "3900000\n");
	put("AC", "type", "Mains\n");  /* not a battery */
	put("AC", "online", "1\n");
	battery("BAT2", "0\n");        /* an empty bay */
	put("BAT2", "capacity", "0\n");
	put("hidpp_battery_0", "type", "Battery\n"); /* no present file */

	ck_assert_int_eq(sysfs_power_setup_at(&env, root, &sp, &warnings), 0);
	ck_assert_ptr_null(warnings);
	ck_assert_int_eq(sysfs_power_poll(sp), 0);
	ck_assert_uint_eq(c.packets, 2);
	ck_assert_uint_eq(c.commits, 1);

	b = cap_battery(&c, 0);
	ck_assert_str_eq(b->name, "BAT0");
	ck_assert(b->has_charge_counter_uah && b->charge_counter_uah == 4123000);
	ck_assert(b->has_capacity_percent && b->capacity_percent == 87.0f);
	ck_assert(b->has_current_ua && b->current_ua == -1520000);
	ck_assert(b->has_current_avg_ua && b->current_avg_ua == -1490000);
	ck_assert(b->has_energy_counter_uwh && b->energy_counter_uwh == 47310000);
	ck_assert(b->has_voltage_uv && b->voltage_uv == 12380000);

	b = cap_battery(&c, 1);
	ck_assert_str_eq(b->name, "BAT1");
	ck_assert(b->has_capacity_percent && b->capacity_percent == 55.0f);
	ck_assert(b->has_voltage_uv && b->voltage_uv == 3900000);
	ck_assert(!b->has_charge_counter_uah && !b->has_current_ua && !b->has_current_avg_ua &&
		  !b->has_energy_counter_uwh);

	sysfs_power_get_stats(sp, &st);
	ck_assert_uint_eq(st.batteries, 2);
	ck_assert_uint_eq(st.polls, 1);
	ck_assert_uint_eq(st.packets, 2);
	ck_assert_uint_eq(st.read_errors, 0);
	cap_done(&c);
	sysfs_power_ds_ops.free(sp);
}
END_TEST

/* One battery: no name; every poll reads the value as it is now; a counter
 * that stops parsing is left out of that poll and counted. */
START_TEST(test_fresh_values)
{
	struct capture c = {};
	struct ds_env env = cap_env(&c);
	struct sysfs_power *sp = NULL;
	struct sysfs_power_stats st;
	const Perfetto__Protos__BatteryCounters *b;
	char *warnings = NULL;

	battery("BAT0", "1\n");
	put("BAT0", "capacity", "80\n");
	put("BAT0", "current_now", "1000\n");
	ck_assert_int_eq(sysfs_power_setup_at(&env, root, &sp, &warnings), 0);
	ck_assert_int_eq(sysfs_power_poll(sp), 0);
	b = cap_battery(&c, 0);
	ck_assert_ptr_null(b->name);
	ck_assert(b->capacity_percent == 80.0f && b->current_ua == 1000);

	put("BAT0", "capacity", "79\n");
	put("BAT0", "current_now", "not a number\n");
	ck_assert_int_eq(sysfs_power_poll(sp), 0);
	b = cap_battery(&c, 1);
	ck_assert(b->has_capacity_percent && b->capacity_percent == 79.0f);
	ck_assert(!b->has_current_ua);
	sysfs_power_get_stats(sp, &st);
	ck_assert_uint_eq(st.read_errors, 1);
	ck_assert_uint_eq(st.packets, 2);
	cap_done(&c);
	sysfs_power_ds_ops.free(sp);
}
END_TEST

/* No battery, or no power_supply class at all: said once, nothing written. */
START_TEST(test_no_battery)
{
	struct capture c = {};
	struct ds_env env = cap_env(&c);
	struct sysfs_power *sp = NULL;
	char *warnings = NULL, missing[600];

	put("AC", "type", "Mains\n");
	ck_assert_int_eq(sysfs_power_setup_at(&env, root, &sp, &warnings), 0);
	ck_assert_ptr_nonnull(warnings);
	ck_assert_msg(strstr(warnings, "no battery in"), "%s", warnings);
	free(warnings);
	warnings = NULL;
	ck_assert_int_eq(sysfs_power_poll(sp), 0);
	ck_assert_uint_eq(c.packets, 0);
	ck_assert_uint_eq(c.commits, 0);
	sysfs_power_ds_ops.free(sp);

	snprintf(missing, sizeof(missing), "%s/none", root);
	ck_assert_int_eq(sysfs_power_setup_at(&env, missing, &sp, &warnings), 0);
	ck_assert_ptr_nonnull(warnings);
	free(warnings);
	sysfs_power_ds_ops.free(sp);
	ck_assert_int_eq(sysfs_power_setup_at(NULL, root, &sp, NULL), -EINVAL);
}
END_TEST

/* Past SYSFS_POWER_BATTERIES_MAX batteries: the rest are left out and said so. */
START_TEST(test_too_many_batteries)
{
	struct capture c = {};
	struct ds_env env = cap_env(&c);
	struct sysfs_power *sp = NULL;
	struct sysfs_power_stats st;
	char *warnings = NULL, dev[32];

	for (unsigned i = 0; i < SYSFS_POWER_BATTERIES_MAX + 2; i++) {
		snprintf(dev, sizeof(dev), "BAT%02u", i);
		battery(dev, "1\n");
		put(dev, "capacity", "50\n");
	}
	ck_assert_int_eq(sysfs_power_setup_at(&env, root, &sp, &warnings), 0);
	ck_assert_ptr_nonnull(warnings);
	ck_assert_msg(strstr(warnings, "2 batteries"), "%s", warnings);
	free(warnings);
	sysfs_power_get_stats(sp, &st);
	ck_assert_uint_eq(st.batteries, SYSFS_POWER_BATTERIES_MAX);
	sysfs_power_ds_ops.free(sp);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sysfs_power");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_parse_value);
	tcase_add_test(tc, test_two_batteries);
	tcase_add_test(tc, test_fresh_values);
	tcase_add_test(tc, test_no_battery);
	tcase_add_test(tc, test_too_many_batteries);
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
