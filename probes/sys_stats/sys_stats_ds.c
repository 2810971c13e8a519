/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.sys_stats: configuration, lifecycle, the poll timer and the packet
 * around what the sources write (sys_stats_sources.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop/loop.h"
#include "probes/sys_stats/sys_stats_internal.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "protos/perfetto/config/sys_stats/sys_stats_config.pb-c.h"
#include "util/util.h"

typedef Perfetto__Protos__SysStatsConfig SysStatsConfig;

/* 0 stays 0 (off); below SYS_STATS_MIN_PERIOD_MS is raised to it. */
static uint32_t clamp_period(bool has, uint32_t ms, enum sys_stats_source s, FILE *warn)
{
	if (!has || ms == 0)
		return 0;
	if (ms < SYS_STATS_MIN_PERIOD_MS) {
		fprintf(warn, "linux.sys_stats: %s_period_ms %u is below %u ms: %u ms is used\n",
			sys_stats_source_to_string(s), ms, SYS_STATS_MIN_PERIOD_MS, SYS_STATS_MIN_PERIOD_MS);
		return SYS_STATS_MIN_PERIOD_MS;
	}
	return ms;
}

static void counters_enabled(const int *list, size_t n, uint64_t enabled[SYS_STATS_COUNTER_MAX / 64])
{
	memset(enabled, 0, SYS_STATS_COUNTER_MAX / 64 * sizeof(uint64_t));
	/* out-of-range numbers (a newer schema) are ignored, as traced_probes does */
	for (size_t i = 0; i < n; i++)
		if (list[i] > 0 && list[i] < SYS_STATS_COUNTER_MAX)
			enabled[list[i] / 64] |= UINT64_C(1) << (list[i] % 64);
}

static void apply_config(struct sys_stats *ss, const SysStatsConfig *c, FILE *warn)
{
	uint64_t enabled[SYS_STATS_COUNTER_MAX / 64];
	uint32_t periods[_SYS_STATS_SRC_MAX] = {};
	uint32_t period = 0;

	if (!c)
		return;
	periods[SYS_STATS_SRC_MEMINFO] = clamp_period(c->has_meminfo_period_ms, c->meminfo_period_ms, SYS_STATS_SRC_MEMINFO, warn);
	periods[SYS_STATS_SRC_VMSTAT] = clamp_period(c->has_vmstat_period_ms, c->vmstat_period_ms, SYS_STATS_SRC_VMSTAT, warn);
	periods[SYS_STATS_SRC_STAT] = clamp_period(c->has_stat_period_ms, c->stat_period_ms, SYS_STATS_SRC_STAT, warn);
	periods[SYS_STATS_SRC_DEVFREQ] = clamp_period(c->has_devfreq_period_ms, c->devfreq_period_ms, SYS_STATS_SRC_DEVFREQ, warn);
	periods[SYS_STATS_SRC_CPUFREQ] = clamp_period(c->has_cpufreq_period_ms, c->cpufreq_period_ms, SYS_STATS_SRC_CPUFREQ, warn);
	periods[SYS_STATS_SRC_BUDDYINFO] = clamp_period(c->has_buddyinfo_period_ms, c->buddyinfo_period_ms, SYS_STATS_SRC_BUDDYINFO, warn);
	periods[SYS_STATS_SRC_DISKSTAT] = clamp_period(c->has_diskstat_period_ms, c->diskstat_period_ms, SYS_STATS_SRC_DISKSTAT, warn);
	periods[SYS_STATS_SRC_PSI] = clamp_period(c->has_psi_period_ms, c->psi_period_ms, SYS_STATS_SRC_PSI, warn);
	periods[SYS_STATS_SRC_THERMAL] = clamp_period(c->has_thermal_period_ms, c->thermal_period_ms, SYS_STATS_SRC_THERMAL, warn);
	periods[SYS_STATS_SRC_CPUIDLE] = clamp_period(c->has_cpuidle_period_ms, c->cpuidle_period_ms, SYS_STATS_SRC_CPUIDLE, warn);
	periods[SYS_STATS_SRC_GPUFREQ] = clamp_period(c->has_gpufreq_period_ms, c->gpufreq_period_ms, SYS_STATS_SRC_GPUFREQ, warn);
	periods[SYS_STATS_SRC_SLAB] = clamp_period(c->has_slab_period_ms, c->slab_period_ms, SYS_STATS_SRC_SLAB, warn);

	for (size_t s = 0; s < _SYS_STATS_SRC_MAX; s++)
		if (periods[s] && (period == 0 || periods[s] < period))
			period = periods[s];
	if (period == 0)
		return;
	/*
	 * One timer at the shortest period; a source is read every
	 * period_s / shortest ticks.  Periods that do not divide are refused,
	 * as traced_probes refuses them (it polls nothing either).
	 */
	for (size_t s = 0; s < _SYS_STATS_SRC_MAX; s++)
		if (periods[s] % period != 0) {
			fprintf(warn, "linux.sys_stats: the periods are not multiples of the shortest (%u ms): nothing is polled\n",
				period);
			return;
		}
	for (size_t s = 0; s < _SYS_STATS_SRC_MAX; s++)
		ss->every[s] = periods[s] / period;
	ss->period_ms = period;

	if (c->n_meminfo_counters) {
		counters_enabled((const int *)c->meminfo_counters, c->n_meminfo_counters, enabled);
		sys_stats_keymap_init(&ss->meminfo_keys, SYS_STATS_FILE_MEMINFO, enabled);
	} else {
		sys_stats_keymap_init(&ss->meminfo_keys, SYS_STATS_FILE_MEMINFO, NULL);
	}
	if (c->n_vmstat_counters) {
		counters_enabled((const int *)c->vmstat_counters, c->n_vmstat_counters, enabled);
		sys_stats_keymap_init(&ss->vmstat_keys, SYS_STATS_FILE_VMSTAT, enabled);
	} else {
		sys_stats_keymap_init(&ss->vmstat_keys, SYS_STATS_FILE_VMSTAT, NULL);
	}
	ss->stat_mask = c->n_stat_counters ? 0 : SYS_STATS_STAT_ALL;
	for (size_t i = 0; i < c->n_stat_counters; i++)
		if (c->stat_counters[i] > 0 && c->stat_counters[i] < 32)
			ss->stat_mask |= 1u << c->stat_counters[i];
}

static int open_root(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static void sys_stats_free(struct sys_stats *ss)
{
	if (!ss)
		return;
	ss->timer = loop_source_disable_unref(ss->timer);
	ss->event = loop_unref(ss->event);
	sys_stats_sources_close(ss);
	if (ss->proc_fd >= 0)
		(void)close(ss->proc_fd);
	if (ss->sys_fd >= 0)
		(void)close(ss->sys_fd);
	free(ss);
}

/* The warnings stream's text, or NULL when nothing was said. */
static char *take_text(char **text, size_t len)
{
	if (len == 0) {
		free(*text);
		*text = NULL;
		return NULL;
	}
	/* one line per warning, without the last newline */
	if ((*text)[len - 1] == '\n')
		(*text)[len - 1] = '\0';
	return TAKE_PTR(*text);
}

int sys_stats_setup_at(const struct ds_env *env, const SysStatsConfig *cfg, const char *proc_root,
		       const char *sys_root, struct sys_stats **ret, char **ret_error,
		       char **ret_warnings)
{
	_cleanup_free_ char *text = NULL;
	struct sys_stats *ss;
	size_t text_len = 0;
	FILE *warn;
	long hz;
	int r;

	if (!env || !env->sink.begin_packet || !env->sink.end_packet || !ret)
		return -EINVAL;

	ss = calloc(1, sizeof(*ss));
	if (!ss)
		return -ENOMEM;
	ss->proc_fd = ss->sys_fd = -EBADF;
	ss->sink = env->sink;
	ss->host = env->host;
	ss->instance_id = env->instance_id;
	ss->tracing_session_id = env->tracing_session_id;
	hz = sysconf(_SC_CLK_TCK);
	ss->ns_per_user_hz = hz > 0 ? UINT64_C(1000000000) / (uint64_t)hz : UINT64_C(10000000);

	warn = open_memstream(&text, &text_len);
	if (!warn) {
		free(ss);
		return -ENOMEM;
	}
	apply_config(ss, cfg, warn);

	r = open_root(proc_root ? proc_root : "/proc");
	if (r >= 0) {
		ss->proc_fd = r;
		r = open_root(sys_root ? sys_root : "/sys");
	}
	if (r >= 0) {
		ss->sys_fd = r;
		r = sys_stats_sources_open(ss, warn);
	}
	if (r >= 0 && ss->period_ms && !env->event)
		r = -EINVAL;
	if (r >= 0 && env->event)
		ss->event = loop_ref(env->event);
	if (fclose(warn) != 0 && r >= 0)
		r = -ENOMEM;
	if (r < 0) {
		/* asprintf() leaves *ret_error undefined when it fails */
		if (ret_error &&
		    asprintf(ret_error, "linux.sys_stats: setup failed: %s", strerror(-r)) < 0)
			*ret_error = NULL;
		sys_stats_free(ss);
		return r;
	}
	if (ret_warnings)
		*ret_warnings = take_text(&text, text_len);
	*ret = ss;
	return 0;
}

int sys_stats_poll(struct sys_stats *ss)
{
	struct pbw *w;
	int r;

	if (!ss)
		return -EINVAL;
	ss->stats.polls++;
	w = ss->sink.begin_packet(ss->sink.userdata);
	if (!w) {
		ss->stats.packets_dropped++;
		ss->tick++;
		return -ENOSPC;
	}
	pbw_varint(w, SYS_STATS_PKT_TIMESTAMP, now_ns(CLOCK_BOOTTIME));
	pbw_begin_nested(w, SYS_STATS_PKT_SYS_STATS);
	for (size_t s = 0; s < _SYS_STATS_SRC_MAX; s++)
		if (ss->every[s] && ss->tick % ss->every[s] == 0)
			sys_stats_source_write(ss, (enum sys_stats_source)s, w);
	pbw_varint(w, SYS_STATS_COLLECTION_END, now_ns(CLOCK_BOOTTIME));
	(void)pbw_end_nested(w);
	ss->tick++;
	r = ss->sink.end_packet(ss->sink.userdata);
	if (r < 0) {
		ss->stats.packets_dropped++;
		return r;
	}
	if (ss->host.commit_soon)
		ss->host.commit_soon(ss->host.host);
	return 0;
}

static int on_timer(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct sys_stats *ss = userdata;

	(void)sys_stats_poll(ss);
	return 0;
}

uint32_t sys_stats_period_ms(const struct sys_stats *ss)
{
	return ss ? ss->period_ms : 0;
}

void sys_stats_get_stats(const struct sys_stats *ss, struct sys_stats_stats *ret)
{
	if (ss && ret)
		*ret = ss->stats;
}

/* ---- ds_ops ------------------------------------------------------------------ */

static int op_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
		    void **ret, char **ret_error, char **ret_warnings)
{
	struct sys_stats *ss;
	int r;

	r = sys_stats_setup_at(env, cfg ? cfg->sys_stats_config : NULL, NULL, NULL, &ss,
			       ret_error, ret_warnings);
	if (r < 0)
		return r;
	*ret = ss;
	return 0;
}

static int op_start(void *ds)
{
	struct sys_stats *ss = ds;
	int r;

	if (!ss)
		return -EINVAL;
	if (ss->started)
		return -EALREADY;
	ss->started = true;
	if (ss->period_ms == 0)
		return 0;
	/* the first poll runs on the next loop iteration, as a posted task; the
	 * next ones on the wall-clock multiples of the period, as traced_probes
	 * aligns its polls */
	r = loop_add_periodic(ss->event, &ss->timer, ss->period_ms, /* first_now= */ true, on_timer, ss);
	if (r < 0)
		return r;
	(void)loop_source_set_description(ss->timer, "sys-stats-poll");
	return 0;
}

static int op_flush(void *ds)
{
	struct sys_stats *ss = ds;

	if (!ss)
		return -EINVAL;
	if (ss->sink.flush)
		ss->sink.flush(ss->sink.userdata);
	return 0;
}

static int op_report(void *ds, struct ds_report *r)
{
	struct sys_stats *ss = ds;

	if (!ss || !r)
		return -EINVAL;
	r->events = ss->stats.polls - ss->stats.packets_dropped;
	return 0;
}

static void op_free(void *ds)
{
	sys_stats_free(ds);
}

const struct ds_ops sys_stats_ds_ops = {
	.name = "linux.sys_stats",
	.setup = op_setup,
	.start = op_start,
	.flush = op_flush,
	.report = op_report,
	.free = op_free,
};
