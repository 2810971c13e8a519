/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.sysfs_power: battery counters from /sys/class/power_supply, once a
 * second (see sysfs_power.h for what is written).
 *
 * The batteries and their counter files are found and opened at setup;
 * every poll reads each open file with one pread() at offset 0, which makes
 * sysfs produce a fresh value, into a stack buffer: no allocation and no
 * open() per poll.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop/loop.h"
#include "probes/sysfs_power/sysfs_power.h"
#include "protos/pbw.h"
#include "util/util.h"

/* Perfetto v58.2's poll period for linux.sysfs_power (it has no config). */
#define SYSFS_POWER_PERIOD_MS 1000u
/* A counter file: a number and a newline. */
#define SYSFS_POWER_VALUE_MAX 64u
/* type and present: "Battery\n", "1\n". */
#define SYSFS_POWER_WORD_MAX 64u

/* TracePacket and BatteryCounters field numbers (Perfetto v58.2). */
enum {
	SYSFS_POWER_PKT_TIMESTAMP = 8,
	SYSFS_POWER_PKT_BATTERY = 38,
	SYSFS_POWER_CHARGE_COUNTER_UAH = 1,
	SYSFS_POWER_CAPACITY_PERCENT = 2,
	SYSFS_POWER_CURRENT_UA = 3,
	SYSFS_POWER_CURRENT_AVG_UA = 4,
	SYSFS_POWER_NAME = 5,
	SYSFS_POWER_ENERGY_COUNTER_UWH = 6,
	SYSFS_POWER_VOLTAGE_UV = 7,
};

/* The counter files of one battery, in the order they are written. */
static const struct {
	const char *file;
	uint32_t field;
} counters[] = {
	{ "charge_now", SYSFS_POWER_CHARGE_COUNTER_UAH },
	{ "capacity", SYSFS_POWER_CAPACITY_PERCENT },
	{ "current_now", SYSFS_POWER_CURRENT_UA },
	{ "current_avg", SYSFS_POWER_CURRENT_AVG_UA },
	{ "energy_now", SYSFS_POWER_ENERGY_COUNTER_UWH },
	{ "voltage_now", SYSFS_POWER_VOLTAGE_UV },
};
#define N_COUNTERS ARRAY_SIZE(counters)

struct battery {
	char name[256];        /* the power_supply directory name */
	int fd[N_COUNTERS];    /* -EBADF: the battery has no such file */
};

struct sysfs_power {
	struct pbw_sink sink;
	struct ds_host host;
	struct loop *loop;
	struct loop_source *timer;
	struct battery *bat;
	unsigned n_bat;
	unsigned batteries_skipped;   /* found past SYSFS_POWER_BATTERIES_MAX */
	bool started;
	struct sysfs_power_stats stats;
};

int sysfs_power_parse_value(const char *text, size_t len, int64_t *ret)
{
	char buf[SYSFS_POWER_VALUE_MAX];

	if (!text || !ret || len == 0 || len >= sizeof(buf))
		return -EINVAL;
	if (memchr(text, '\0', len))
		return -EINVAL;
	memcpy(buf, text, len);
	buf[len] = '\0';
	return safe_atoi64(buf, ret);
}

static void battery_close(struct battery *b)
{
	for (size_t i = 0; i < N_COUNTERS; i++)
		if (b->fd[i] >= 0) {
			(void)close(b->fd[i]);
			b->fd[i] = -EBADF;
		}
}

static struct sysfs_power *sysfs_power_free(struct sysfs_power *sp)
{
	if (!sp)
		return NULL;
	sp->timer = loop_source_disable_unref(sp->timer);
	for (unsigned i = 0; i < sp->n_bat; i++)
		battery_close(&sp->bat[i]);
	free(sp->bat);
	free(sp);
	return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct sysfs_power *, sysfs_power_free);

/* @file of directory @dirfd reads exactly @want (one trailing newline allowed). */
static bool file_is(int dirfd, const char *file, const char *want)
{
	char buf[SYSFS_POWER_WORD_MAX];
	_cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	if (buf[n - 1] == '\n')
		n--;
	return (size_t)n == strlen(want) && memcmp(buf, want, (size_t)n) == 0;
}

/* Opens the counter files of battery @name below @dirfd, if it is one. */
static int battery_open(int dirfd, const char *name, struct battery *ret)
{
	_cleanup_close_ int bfd = -EBADF;

	bfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bfd < 0)
		return -errno;
	if (!file_is(bfd, "type", "Battery") || !file_is(bfd, "present", "1"))
		return -ENOENT;
	if (strlen(name) >= sizeof(ret->name))
		return -ENAMETOOLONG;
	strcpy(ret->name, name);
	for (size_t i = 0; i < N_COUNTERS; i++) {
		int fd = openat(bfd, counters[i].file, O_RDONLY | O_CLOEXEC);

		ret->fd[i] = fd >= 0 ? fd : -EBADF;
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct battery *)a)->name, ((const struct battery *)b)->name);
}

/* The batteries of @path, in name order (readdir's is the filesystem's). */
static int find_batteries(struct sysfs_power *sp, const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	sp->bat = calloc(SYSFS_POWER_BATTERIES_MAX, sizeof(*sp->bat));
	if (!sp->bat) {
		closedir(d);
		return -ENOMEM;
	}
	while ((de = readdir(d))) {
		struct battery extra;

		if (de->d_name[0] == '.')
			continue;
		if (sp->n_bat < SYSFS_POWER_BATTERIES_MAX) {
			if (battery_open(dirfd(d), de->d_name, &sp->bat[sp->n_bat]) == 0)
				sp->n_bat++;
		} else if (battery_open(dirfd(d), de->d_name, &extra) == 0) {
			/* past the cap: counted, so the warning can say so */
			battery_close(&extra);
			sp->batteries_skipped++;
		}
	}
	closedir(d);
	qsort(sp->bat, sp->n_bat, sizeof(*sp->bat), name_cmp);
	sp->stats.batteries = sp->n_bat;
	return 0;
}

int sysfs_power_setup_at(const struct ds_env *env, const char *power_supply_dir,
			 struct sysfs_power **ret, char **ret_warnings)
{
	_cleanup_(sysfs_power_freep) struct sysfs_power *sp = NULL;
	const char *path = power_supply_dir ? power_supply_dir : "/sys/class/power_supply";
	int r;

	if (!env || !env->sink.begin_packet || !env->sink.end_packet || !ret)
		return -EINVAL;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->sink = env->sink;
	sp->host = env->host;
	sp->loop = env->event;
	r = find_batteries(sp, path);
	if (r < 0)
		return r;
	if (sp->batteries_skipped && ret_warnings)
		*ret_warnings = strdup_printf("linux.sysfs_power: %u batteries in %s past the first %u "
					      "are left out", sp->batteries_skipped, path,
					      SYSFS_POWER_BATTERIES_MAX);
	if (sp->n_bat == 0 && ret_warnings)
		*ret_warnings = strdup_printf("linux.sysfs_power: no battery in %s (a directory whose "
					      "type is Battery and present is 1): nothing will be written",
					      path);
	*ret = TAKE_PTR(sp);
	return 0;
}

/* One battery's packet. */
static int write_battery(struct sysfs_power *sp, const struct battery *b)
{
	struct pbw *w = sp->sink.begin_packet(sp->sink.userdata);
	int r;

	if (!w) {
		sp->stats.packets_dropped++;
		return -ENOSPC;
	}
	pbw_varint(w, SYSFS_POWER_PKT_TIMESTAMP, now_ns(CLOCK_BOOTTIME));
	pbw_begin_nested(w, SYSFS_POWER_PKT_BATTERY);
	for (size_t i = 0; i < N_COUNTERS; i++) {
		char buf[SYSFS_POWER_VALUE_MAX];
		ssize_t n;
		int64_t v;

		if (b->fd[i] < 0)
			continue;
		n = pread(b->fd[i], buf, sizeof(buf), 0);
		if (n <= 0 || sysfs_power_parse_value(buf, (size_t)n, &v) < 0) {
			/* a driver that errs now and then (a fuel gauge on a busy
			 * bus): that poll leaves the field out */
			sp->stats.read_errors++;
			continue;
		}
		if (counters[i].field == SYSFS_POWER_CAPACITY_PERCENT) {
			float f = (float)v;
			uint32_t bits;

			memcpy(&bits, &f, sizeof(bits));
			pbw_fixed32(w, counters[i].field, bits);
		} else
			pbw_int(w, counters[i].field, v);
	}
	/* as v58.2: the name only where it tells batteries apart */
	if (sp->n_bat > 1)
		pbw_string(w, SYSFS_POWER_NAME, b->name);
	(void)pbw_end_nested(w);
	r = sp->sink.end_packet(sp->sink.userdata);
	if (r < 0) {
		sp->stats.packets_dropped++;
		return r;
	}
	sp->stats.packets++;
	return 0;
}

int sysfs_power_poll(struct sysfs_power *sp)
{
	int r = 0;

	if (!sp)
		return -EINVAL;
	sp->stats.polls++;
	for (unsigned i = 0; i < sp->n_bat; i++) {
		int k = write_battery(sp, &sp->bat[i]);

		if (k < 0 && r == 0)
			r = k;
	}
	if (sp->n_bat && sp->host.commit_soon)
		sp->host.commit_soon(sp->host.host);
	return r;
}

void sysfs_power_get_stats(const struct sysfs_power *sp, struct sysfs_power_stats *ret)
{
	if (sp && ret)
		*ret = sp->stats;
}

static int on_timer(struct loop_source *s, uint64_t usec, void *userdata)
{
	(void)sysfs_power_poll(userdata);
	return 0;
}

/* ---- ds_ops ------------------------------------------------------------------ */

static int op_setup(const struct ds_env *env, const struct Perfetto__Protos__DataSourceConfig *cfg,
		    void **ret, char **ret_error, char **ret_warnings)
{
	struct sysfs_power *sp;
	int r;

	r = sysfs_power_setup_at(env, NULL, &sp, ret_warnings);
	if (r < 0) {
		if (ret_error)
			*ret_error = strdup_printf("linux.sysfs_power: setup failed: %s", strerror(-r));
		return r;
	}
	*ret = sp;
	return 0;
}

static int op_start(void *ds)
{
	struct sysfs_power *sp = ds;
	int r;

	if (!sp)
		return -EINVAL;
	if (sp->started)
		return -EALREADY;
	sp->started = true;
	if (sp->n_bat == 0)
		return 0;
	/* the first poll at once (a posted task), the next ones on whole
	 * seconds of the wall clock, as traced_probes aligns them */
	r = loop_add_periodic(sp->loop, &sp->timer, SYSFS_POWER_PERIOD_MS, /* first_now= */ true,
			      on_timer, sp);
	if (r < 0)
		return r;
	(void)loop_source_set_description(sp->timer, "sysfs-power-poll");
	return 0;
}

static int op_flush(void *ds)
{
	struct sysfs_power *sp = ds;

	if (!sp)
		return -EINVAL;
	if (sp->sink.flush)
		sp->sink.flush(sp->sink.userdata);
	return 0;
}

static int op_report(void *ds, struct ds_report *r)
{
	struct sysfs_power *sp = ds;

	if (!sp || !r)
		return -EINVAL;
	r->events = sp->stats.packets;
	return 0;
}

static void op_free(void *ds)
{
	sysfs_power_free(ds);
}

const struct ds_ops sysfs_power_ds_ops = {
	.name = "linux.sysfs_power",
	.setup = op_setup,
	.start = op_start,
	.flush = op_flush,
	.report = op_report,
	.free = op_free,
};
