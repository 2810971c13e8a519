/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The linux.process_stats data source: configuration, lifecycle, the poll
 * timer and the packet framing shared by the ProcessTree and ProcessStats
 * writers (procfs_tree.c, procfs_stats.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probes/procfs/procfs_internal.h"
#include "protos/perfetto/config/process_stats/process_stats_config.pb-c.h"
#include "util/util.h"

#define PROCFS_MIN_POLL_MS 100u

static void apply_config(struct procfs_ds *ds, const Perfetto__Protos__ProcessStatsConfig *cfg)
{
	ds->on_demand = true;
	if (!cfg)
		return;

	ds->scan_on_start = cfg->has_scan_all_processes_on_start && cfg->scan_all_processes_on_start;
	ds->record_thread_names = cfg->has_record_thread_names && cfg->record_thread_names;
	ds->record_process_age = cfg->has_record_process_age && cfg->record_process_age;
	ds->record_process_runtime = cfg->has_record_process_runtime && cfg->record_process_runtime;
	ds->record_dmabuf_rss = cfg->has_record_process_dmabuf_rss && cfg->record_process_dmabuf_rss;
	ds->scan_smaps_rollup = cfg->has_scan_smaps_rollup && cfg->scan_smaps_rollup;
	ds->skip_main_thread = cfg->has_skip_main_thread_message && cfg->skip_main_thread_message;
	/*
	 * resolve_process_fds (deprecated upstream) needs (pid, fd) pairs from
	 * ftrace syscall exits that we do not collect: it is ignored.
	 */
	for (size_t i = 0; i < cfg->n_quirks; i++)
		if (cfg->quirks[i] == PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_ON_DEMAND)
			ds->on_demand = false;

	if (cfg->has_proc_stats_poll_ms && cfg->proc_stats_poll_ms > 0) {
		uint32_t ttl = cfg->has_proc_stats_cache_ttl_ms ? cfg->proc_stats_cache_ttl_ms : 0;

		ds->poll_ms = MAX(cfg->proc_stats_poll_ms, PROCFS_MIN_POLL_MS);
		ds->cache_ttl_ticks = MAX(ttl / ds->poll_ms, 1u);
	}
}

int procfs_ds_setup(struct loop *e, uint64_t instance_id, uint64_t tracing_session_id,
		    const Perfetto__Protos__ProcessStatsConfig *cfg, const struct pbw_sink *sink,
		    struct procfs_ds **ret)
{
	struct procfs_ds *ds;
	long hz;

	if (!sink || !sink->begin_packet || !sink->end_packet || !ret)
		return -EINVAL;

	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->instance_id = instance_id;
	ds->tracing_session_id = tracing_session_id;
	ds->sink = *sink;
	ds->root.fd = -EBADF;
	ds->packet_split_bytes = PROCFS_PACKET_SPLIT;
	/* Perfetto's writer marks the very first packet as a cleared state. */
	ds->clear_pending = true;
	apply_config(ds, cfg);

	if (ds->poll_ms > 0 && !e) {
		free(ds);
		return -EINVAL;
	}
	if (e)
		ds->event = loop_ref(e);

	hz = sysconf(_SC_CLK_TCK);
	ds->ns_per_tick = hz > 0 ? UINT64_C(1000000000) / (uint64_t)hz : UINT64_C(10000000);

	*ret = ds;
	return 0;
}

int procfs_ds_set_proc_root(struct procfs_ds *ds, const char *path)
{
	struct procfs_root r;
	int ret;

	if (!ds || !path)
		return -EINVAL;
	if (ds->started)
		return -EBUSY;
	ret = procfs_root_init(&r, path);
	if (ret < 0)
		return ret;
	if (ds->root.fd >= 0)
		procfs_root_done(&ds->root);
	ds->root = r;
	return 0;
}

void procfs_ds_set_rescan_on_clear(struct procfs_ds *ds, bool enable)
{
	if (ds)
		ds->rescan_on_clear = enable;
}

static int on_poll_timer(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct procfs_ds *ds = userdata;

	(void)procfs_stats_poll(ds);
	return 0;
}

int procfs_ds_start(struct procfs_ds *ds)
{
	int r = 0;

	if (!ds)
		return -EINVAL;
	if (ds->started)
		return -EALREADY;
	if (ds->root.fd < 0) {
		r = procfs_root_init(&ds->root, "/proc");
		if (r < 0)
			return r;
	}
	ds->started = true;

	if (ds->poll_ms > 0) {
		/* The first tick runs on the next loop iteration, as a posted task;
		 * the next ones on the wall-clock multiples of the period, as
		 * Perfetto aligns its ticks. */
		r = loop_add_periodic(ds->event, &ds->poll_timer, ds->poll_ms,
				      /* first_now= */ true, on_poll_timer, ds);
		if (r < 0)
			return r;
		(void)loop_source_set_description(ds->poll_timer, "procfs-poll");
	}

	if (ds->scan_on_start)
		r = procfs_tree_scan_all(ds);
	return r < 0 ? r : 0;
}

int procfs_ds_on_ftrace_pids(struct procfs_ds *ds, const int32_t *pids, size_t n,
			     const int32_t *renamed, size_t n_renamed)
{
	int r;

	if (!ds)
		return -EINVAL;
	if (!ds->started || !ds->on_demand)
		return 0;
	/* Renamed first, so that a renamed pid in @pids is written again now. */
	for (size_t i = 0; i < n_renamed; i++)
		procfs_pidset_remove(&ds->seen, renamed[i]);
	if (n == 0)
		return 0;
	r = procfs_tree_write_pids(ds, pids, n, &ds->stats.pids_exited);
	if (r > 0)
		ds->stats.on_demand_passes++;
	return r;
}

bool procfs_ds_on_demand_enabled(const struct procfs_ds *ds)
{
	return ds && ds->on_demand;
}

int procfs_ds_clear_incremental_state(struct procfs_ds *ds)
{
	if (!ds)
		return -EINVAL;
	procfs_pidset_clear(&ds->seen);
	procfs_pidset_clear(&ds->skip_mem);
	procfs_cache_clear(&ds->cache);
	ds->cache_ticks = 0;
	ds->clear_pending = true;

	if (ds->rescan_on_clear && ds->scan_on_start && ds->started)
		return procfs_tree_scan_all(ds);
	return 0;
}

int procfs_ds_flush(struct procfs_ds *ds)
{
	if (!ds)
		return -EINVAL;
	if (ds->sink.flush)
		ds->sink.flush(ds->sink.userdata);
	return 0;
}

struct procfs_ds *procfs_ds_free(struct procfs_ds *ds)
{
	if (!ds)
		return NULL;
	ds->poll_timer = loop_source_disable_unref(ds->poll_timer);
	ds->event = loop_unref(ds->event);
	if (ds->root.fd >= 0)
		procfs_root_done(&ds->root);
	procfs_pidset_done(&ds->seen);
	procfs_pidset_done(&ds->skip_mem);
	procfs_cache_done(&ds->cache);
	free(ds->pids);
	free(ds->poll_pids);
	free(ds);
	return NULL;
}

uint64_t procfs_ds_tracing_session_id(const struct procfs_ds *ds)
{
	return ds ? ds->tracing_session_id : 0;
}

uint64_t procfs_ds_instance_id(const struct procfs_ds *ds)
{
	return ds ? ds->instance_id : 0;
}

void procfs_ds_get_stats(const struct procfs_ds *ds, struct procfs_ds_stats *ret)
{
	if (ds && ret)
		*ret = ds->stats;
}
