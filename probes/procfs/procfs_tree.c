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
	struct pbw *w = procfs_packet_open_msg(ds, PROCFS_PKT_PROCESS_TREE);

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

/* Thread{tid, tgid[, name]}; @name as status would show it, or NULL. */
static void write_thread(struct procfs_ds *ds, int32_t tid, int32_t tgid, const char *name,
			 size_t name_len)
{
	struct pbw *w = procfs_packet_open_msg(ds, PROCFS_PKT_PROCESS_TREE);

	pbw_begin_nested(w, PROCFS_TREE_THREADS);
	pbw_int(w, PROCFS_THREAD_TID, tid);
	pbw_int(w, PROCFS_THREAD_TGID, tgid);
	if (name)
		pbw_bytes(w, PROCFS_THREAD_NAME, name, name_len);
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

	w = procfs_packet_open_msg(ds, PROCFS_PKT_PROCESS_TREE);
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
	char name[2 * PROCFS_COMM_MAX];
	int32_t pid;
	int r;

	r = procfs_dir_open_top(root);
	if (r < 0)
		return r;
	procfs_packet_mark_scan_start(ds);

	while ((pid = procfs_dir_next(&root->top)) > 0) {
		bool namespaced;
		int32_t tid;

		procfs_packet_maybe_split(ds);
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
			procfs_packet_maybe_split(ds);
			/* One more read per thread only when it adds something. */
			if (!ds->record_thread_names && !namespaced) {
				write_thread(ds, tid, pid, NULL, 0);
				continue;
			}
			if (!namespaced) {
				/*
				 * Only the name is needed: comm costs the kernel a
				 * fraction of what status does, and escaped the same
				 * way it is byte for byte status's Name:.
				 */
				r = procfs_read_pid_file(root, pid, tid, "comm", &root->small);
				if (r >= 0) {
					size_t n = procfs_comm_to_name(root->small.data, root->small.len,
								       name, sizeof(name));

					write_thread(ds, tid, pid, name, n);
				} else {
					count_read_error(ds, r, &ds->stats.vanished);
					write_thread(ds, tid, pid, NULL, 0);
				}
				continue;
			}
			r = procfs_read_pid_file(root, pid, tid, "status", &root->status);
			if (r >= 0 &&
			    procfs_status_parse(root->status.data, root->status.len, &tst) < 0)
				r = -EBADMSG;
			if (r < 0) {
				count_read_error(ds, r, &ds->stats.vanished);
				write_thread(ds, tid, pid, NULL, 0);
				continue;
			}
			write_detailed_thread(ds, tid, pid, &tst);
		}
		procfs_dir_close(&root->task);
	}
	procfs_dir_close(&root->top);

	procfs_packet_end(ds);
	ds->stats.full_scans++;
	ds->stats.last_full_scan_ns = now_ns(CLOCK_MONOTONIC) - t0;
	return pid < 0 ? pid : 0;
}

static void write_process_or_thread(struct procfs_ds *ds, int32_t pid, uint64_t *gone_counter)
{
	struct procfs_root *root = &ds->root;
	struct procfs_status st, pst;
	int r;

	procfs_packet_mark_scan_start(ds);
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

static void sift_down(int32_t *a, size_t root, size_t n)
{
	for (;;) {
		size_t child = 2 * root + 1;
		int32_t t;

		if (child >= n)
			return;
		if (child + 1 < n && a[child + 1] > a[child])
			child++;
		if (a[root] >= a[child])
			return;
		t = a[root];
		a[root] = a[child];
		a[child] = t;
		root = child;
	}
}

/* In place and without allocating, unlike glibc's qsort (which mallocs). */
static void sort_pids(int32_t *a, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down(a, i, n);
	while (n > 1) {
		int32_t t = a[0];

		a[0] = a[--n];
		a[n] = t;
		sift_down(a, 0, n);
	}
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
	sort_pids(ds->pids, m);

	for (size_t i = 0; i < m; i++) {
		if (i > 0 && ds->pids[i] == ds->pids[i - 1])
			continue;
		/* an earlier entry of this pass may have written it as a main thread */
		if (procfs_pidset_contains(&ds->seen, ds->pids[i]))
			continue;
		procfs_packet_maybe_split(ds);
		write_process_or_thread(ds, ds->pids[i], gone_counter);
		looked++;
	}
	procfs_packet_end(ds);
	return looked;
}
