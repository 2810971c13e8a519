/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proc_stats_poll_ms tick: one ProcessStats packet with the counters
 * that changed since they were last written, then a ProcessTree for the
 * processes not written yet.
 *
 * A ProcessStats.Process entry is opened only when its first changed
 * counter shows up, and the counters go out in the order Perfetto writes
 * them: runtimes (stat), dmabuf_rss, the status lines, smaps_rollup, then
 * oom_score_adj.  Pids without VmSize (kernel threads) are not read again
 * until ClearIncrementalState.
 */
#include <errno.h>
#include <stdlib.h>

#include "probes/procfs/procfs_internal.h"
#include "util/util.h"

static void close_stats_proc(struct procfs_ds *ds)
{
	if (ds->stats_proc_open) {
		(void)pbw_end_nested(ds->pkt);
		ds->stats_proc_open = false;
	}
}

static void write_counter(struct procfs_ds *ds, int32_t pid, struct procfs_cache_entry *ce,
			  enum procfs_counter c, uint64_t v)
{
	uint32_t bit = 1u << c;
	struct pbw *w;

	if (ce && (ce->valid & bit) && ce->value[c] == v)
		return;
	if (!ds->stats_proc_open) {
		w = procfs_packet_open_msg(ds, PROCFS_PKT_PROCESS_STATS);
		pbw_begin_nested(w, PROCFS_STATS_PROCESSES);
		pbw_int(w, 1, pid);
		ds->stats_proc_open = true;
		ds->stats.stats_processes++;
	}
	w = ds->pkt;
	if (c == PROCFS_CNT_OOM_SCORE_ADJ)
		pbw_int(w, procfs_counter_field[c], (int64_t)v);
	else
		pbw_varint(w, procfs_counter_field[c], v);
	if (ce) {
		ce->value[c] = v;
		ce->valid |= bit;
	}
}

static int remember_pid(struct procfs_ds *ds, int32_t pid)
{
	if (ds->poll_pids_len == ds->poll_pids_cap) {
		size_t cap = ds->poll_pids_cap ? ds->poll_pids_cap * 2 : 1024;
		int32_t *p = realloc(ds->poll_pids, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ds->poll_pids = p;
		ds->poll_pids_cap = cap;
	}
	ds->poll_pids[ds->poll_pids_len++] = pid;
	return 0;
}

/* Returns: true if @pid should get a ProcessTree entry if still unknown. */
static bool poll_one(struct procfs_ds *ds, int32_t pid)
{
	struct procfs_root *root = &ds->root;
	struct procfs_cache_entry *ce = NULL;
	struct procfs_status st;
	bool listed = false;
	int64_t oom;
	uint64_t v;
	int r;

	/* With a TTL of one tick the cache would be empty at every read. */
	if (ds->cache_ttl_ticks > 1)
		ce = procfs_cache_get(&ds->cache, pid);

	if (ds->record_process_runtime) {
		struct procfs_stat pst;

		r = procfs_read_pid_file(root, pid, 0, "stat", &root->stat);
		if (r >= 0 && procfs_stat_parse(root->stat.data, root->stat.len, &pst) >= 0) {
			write_counter(ds, pid, ce, PROCFS_CNT_RUNTIME_USER,
				      pst.utime * ds->ns_per_tick);
			write_counter(ds, pid, ce, PROCFS_CNT_RUNTIME_KERNEL,
				      pst.stime * ds->ns_per_tick);
			listed = true;
		}
	}

	if (procfs_pidset_contains(&ds->skip_mem, pid))
		return listed;

	r = procfs_read_pid_file(root, pid, 0, "status", &root->status);
	if (r >= 0 && procfs_status_parse(root->status.data, root->status.len, &st) < 0)
		r = -EBADMSG;
	if (r < 0) {
		if (r == -ENOENT)
			ds->stats.vanished++;
		else
			ds->stats.read_errors++;
		return listed;
	}

	/* not a process (any more): the pid was reused by a thread */
	if (st.tgid != pid)
		return listed;

	if (ds->record_dmabuf_rss &&
	    procfs_read_pid_file(root, pid, 0, "dmabuf_rss", &root->small) >= 0 &&
	    procfs_parse_uint_prefix(root->small.data, root->small.data + root->small.len, &v) >= 0)
		write_counter(ds, pid, ce, PROCFS_CNT_DMABUF_RSS, v / 1024);

	if (ds->scan_smaps_rollup &&
	    procfs_read_pid_file(root, pid, 0, "smaps_rollup", &root->smaps) >= 0)
		procfs_smaps_rollup_parse(root->smaps.data, root->smaps.len, &st);

	if (!st.has_mem) {
		/* a kernel thread: nothing to poll, ever */
		(void)procfs_pidset_add(&ds->skip_mem, pid);
		return listed;
	}

	for (int c = PROCFS_CNT_VM_SIZE; c <= PROCFS_CNT_SMR_SWAP_PSS; c++)
		if (st.mem_present & (1u << c))
			write_counter(ds, pid, ce, (enum procfs_counter)c, st.mem[c]);

	if (procfs_read_pid_file(root, pid, 0, "oom_score_adj", &root->small) >= 0 &&
	    procfs_parse_int_prefix(root->small.data, root->small.data + root->small.len, &oom) >= 0)
		write_counter(ds, pid, ce, PROCFS_CNT_OOM_SCORE_ADJ, (uint64_t)oom);

	return true;
}

int procfs_stats_poll(struct procfs_ds *ds)
{
	struct procfs_root *root = &ds->root;
	int32_t pid;
	int r;

	ds->stats.poll_ticks++;
	ds->poll_pids_len = 0;

	r = procfs_dir_open_top(root);
	if (r >= 0) {
		procfs_packet_mark_scan_start(ds);
		while ((pid = procfs_dir_next(&root->top)) > 0) {
			close_stats_proc(ds);
			procfs_packet_maybe_split(ds);
			if (poll_one(ds, pid))
				(void)remember_pid(ds, pid);
		}
		close_stats_proc(ds);
		procfs_dir_close(&root->top);
		procfs_packet_end(ds);
		if (pid < 0)
			r = pid;

		/* long-lived process details for processes seen the first time */
		int k = procfs_tree_write_pids(ds, ds->poll_pids, ds->poll_pids_len,
					       &ds->stats.vanished);
		if (k < 0 && r >= 0)
			r = k;
	}

	if (++ds->cache_ticks >= ds->cache_ttl_ticks) {
		ds->cache_ticks = 0;
		procfs_cache_clear(&ds->cache);
	}
	return r;
}
