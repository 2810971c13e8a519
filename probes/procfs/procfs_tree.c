/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ProcessTree packets: the full scan at start and the lookups of pids that
 * ftrace (or the poller) saw and that are not known yet.
 *
 * Wire shape, field for field as traced_probes v58.2 writes it:
 *   Process { pid, ppid, uid, nspid*, cmdline* | (cmdline = Name:,
 *             cmdline_is_comm), process_start_from_boot?, is_kthread? }
 *   Thread  { tid, tgid, nstid*, name? }
 * A process is followed by a Thread for its main thread unless
 * skip_main_thread_message.  Every pid/tid written is remembered in
 * ds->seen until ClearIncrementalState (or a task_rename of that pid).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probes/procfs/procfs_internal.h"
#include "util/util.h"

static void count_read_error(struct procfs_ds *ds, int r, uint64_t *gone_counter)
{
	if (r == -ENOENT)
		(*gone_counter)++;
	else
		ds->stats.read_errors++;
}

static void write_cmdline(struct procfs_ds *ds, struct pbw *w, int32_t pid,
			  const struct procfs_status *st)
{
	struct procfs_buf *b = &ds->root.cmdline;
	const char *arg;
	size_t pos = 0, len;
	bool any = false;
	int r;

	r = procfs_read_pid_file(&ds->root, pid, 0, "cmdline", b);
	if (r == 1)
		ds->stats.cmdlines_truncated++;
	if (r >= 0)
		while (procfs_cmdline_next(b->data, b->len, &pos, &arg, &len)) {
			/* bytes as the kernel has them: no UTF-8 check, as Perfetto */
			pbw_bytes(w, PROCFS_PROC_CMDLINE, arg, len);
			any = true;
		}
	if (!any) {
		/*
		 * Kernel threads and zombies have an empty cmdline (and so does
		 * a process whose arguments are all empty strings): use comm.
		 */
		pbw_bytes(w, PROCFS_PROC_CMDLINE, st->name ? st->name : "", st->name_len);
		pbw_varint(w, PROCFS_PROC_CMDLINE_IS_COMM, 1);
	}
}

static void write_detailed_thread(struct procfs_ds *ds, int32_t tid, int32_t tgid,
				  const struct procfs_status *st)
{
	struct pbw *w = procfs_ds_open_msg(ds, PROCFS_PKT_PROCESS_TREE);

	pbw_begin_nested(w, PROCFS_TREE_THREADS);
	pbw_int(w, PROCFS_THREAD_TID, tid);
	pbw_int(w, PROCFS_THREAD_TGID, tgid);
	for (unsigned i = 0; i < st->n_nspid; i++)
		pbw_int(w, PROCFS_THREAD_NSTID, st->nspid[i]);
	if (ds->record_thread_names && st->has_name)
		pbw_bytes(w, PROCFS_THREAD_NAME, st->name, st->name_len);
	(void)pbw_end_nested(w);
	ds->stats.threads++;
	(void)procfs_pidset_add(&ds->seen, tid);
}

static void write_thread(struct procfs_ds *ds, int32_t tid, int32_t tgid)
{
	struct pbw *w = procfs_ds_open_msg(ds, PROCFS_PKT_PROCESS_TREE);

	pbw_begin_nested(w, PROCFS_TREE_THREADS);
	pbw_int(w, PROCFS_THREAD_TID, tid);
	pbw_int(w, PROCFS_THREAD_TGID, tgid);
	(void)pbw_end_nested(w);
	ds->stats.threads++;
	(void)procfs_pidset_add(&ds->seen, tid);
}

/* Returns: true if the process lives in a pid namespace below ours. */
static bool write_process(struct procfs_ds *ds, int32_t pid, const struct procfs_status *st)
{
	struct procfs_stat pst;
	struct pbw *w;

	/* the pid may have been reused by a non-main thread since we listed it */
	if (st->tgid != pid)
		return false;

	w = procfs_ds_open_msg(ds, PROCFS_PKT_PROCESS_TREE);
	pbw_begin_nested(w, PROCFS_TREE_PROCESSES);
	pbw_int(w, PROCFS_PROC_PID, pid);
	pbw_int(w, PROCFS_PROC_PPID, st->ppid);
	pbw_int(w, PROCFS_PROC_UID, st->uid);
	for (unsigned i = 0; i < st->n_nspid; i++)
		pbw_int(w, PROCFS_PROC_NSPID, st->nspid[i]);
	write_cmdline(ds, w, pid, st);
	if (ds->record_process_age &&
	    procfs_read_pid_file(&ds->root, pid, 0, "stat", &ds->root.stat) >= 0 &&
	    procfs_stat_parse(ds->root.stat.data, ds->root.stat.len, &pst) >= 0)
		pbw_varint(w, PROCFS_PROC_START_FROM_BOOT, pst.starttime * ds->ns_per_tick);
	/* Only what the kernel says (6.4+); older kernels leave it unset. */
	if (st->kthread >= 0)
		pbw_varint(w, PROCFS_PROC_IS_KTHREAD, (uint64_t)st->kthread);
	(void)pbw_end_nested(w);
	ds->stats.processes++;

	if (!ds->skip_main_thread)
		write_detailed_thread(ds, pid, pid, st);
	(void)procfs_pidset_add(&ds->seen, pid);
	return st->n_nspid > 0;
}

int procfs_tree_scan_all(struct procfs_ds *ds)
{
	struct procfs_root *root = &ds->root;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	struct procfs_status st, tst;
	int32_t pid;
	int r;

	r = procfs_dir_open_top(root);
	if (r < 0)
		return r;
	procfs_ds_mark_scan_start(ds);

	while ((pid = procfs_dir_next(&root->top)) > 0) {
		bool namespaced;
		int32_t tid;

		r = procfs_read_pid_file(root, pid, 0, "status", &root->status);
		if (r >= 0 && procfs_status_parse(root->status.data, root->status.len, &st) < 0)
			r = -EBADMSG;
		if (r < 0) {
			count_read_error(ds, r, &ds->stats.vanished);
			continue;
		}
		/*
		 * A pid reused by a non-main thread since we listed it: its
		 * task/ would list another process's threads.
		 */
		if (st.tgid != pid)
			continue;
		namespaced = write_process(ds, pid, &st);

		r = procfs_dir_open_task(root, pid);
		if (r < 0) {
			count_read_error(ds, r, &ds->stats.vanished);
			continue;
		}
		while ((tid = procfs_dir_next(&root->task)) > 0) {
			if (tid == pid)
				continue;
			/* One more read per thread only when it adds something. */
			if (!ds->record_thread_names && !namespaced) {
				write_thread(ds, tid, pid);
				continue;
			}
			r = procfs_read_pid_file(root, pid, tid, "status", &root->status);
			if (r >= 0 &&
			    procfs_status_parse(root->status.data, root->status.len, &tst) < 0)
				r = -EBADMSG;
			if (r < 0) {
				count_read_error(ds, r, &ds->stats.vanished);
				write_thread(ds, tid, pid);
				continue;
			}
			write_detailed_thread(ds, tid, pid, &tst);
		}
		procfs_dir_close(&root->task);
	}
	procfs_dir_close(&root->top);

	procfs_ds_end_packet(ds);
	ds->stats.full_scans++;
	ds->stats.last_full_scan_ns = now_ns(CLOCK_MONOTONIC) - t0;
	return pid < 0 ? pid : 0;
}

static void write_process_or_thread(struct procfs_ds *ds, int32_t pid, uint64_t *gone_counter)
{
	struct procfs_root *root = &ds->root;
	struct procfs_status st, pst;
	int r;

	procfs_ds_mark_scan_start(ds);
	ds->stats.pids_looked_up++;

	/* /proc/<tid>/ exists for every thread even though readdir hides it */
	r = procfs_read_pid_file(root, pid, 0, "status", &root->status);
	if (r >= 0 && procfs_status_parse(root->status.data, root->status.len, &st) < 0)
		r = -EBADMSG;
	if (r < 0) {
		count_read_error(ds, r, gone_counter);
		return;
	}
	if (st.tgid <= 0 || st.pid <= 0)
		return;

	if (!procfs_pidset_contains(&ds->seen, st.tgid)) {
		if (st.tgid == st.pid) {
			(void)write_process(ds, st.tgid, &st);
		} else {
			r = procfs_read_pid_file(root, st.tgid, 0, "status", &root->status_tgid);
			if (r >= 0 && procfs_status_parse(root->status_tgid.data,
							  root->status_tgid.len, &pst) < 0)
				r = -EBADMSG;
			if (r < 0)
				count_read_error(ds, r, &ds->stats.vanished);
			else
				(void)write_process(ds, st.tgid, &pst);
		}
	}
	if (pid != st.tgid)
		write_detailed_thread(ds, pid, st.tgid, &st);
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

int procfs_tree_write_pids(struct procfs_ds *ds, const int32_t *pids, size_t n,
			   uint64_t *gone_counter)
{
	size_t m = 0;
	int looked = 0;

	if (n > ds->pids_cap) {
		size_t cap = MAX(n, ds->pids_cap * 2);
		int32_t *p = realloc(ds->pids, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ds->pids = p;
		ds->pids_cap = cap;
	}

	/* Only unknown pids, sorted and unique: the order Perfetto writes them in. */
	for (size_t i = 0; i < n; i++)
		if (pids[i] > 0 && !procfs_pidset_contains(&ds->seen, pids[i]))
			ds->pids[m++] = pids[i];
	if (m == 0)
		return 0;
	qsort(ds->pids, m, sizeof(*ds->pids), cmp_i32);

	for (size_t i = 0; i < m; i++) {
		if (i > 0 && ds->pids[i] == ds->pids[i - 1])
			continue;
		/* an earlier entry of this pass may have written it as a main thread */
		if (procfs_pidset_contains(&ds->seen, ds->pids[i]))
			continue;
		write_process_or_thread(ds, ds->pids[i], gone_counter);
		looked++;
	}
	procfs_ds_end_packet(ds);
	return looked;
}
