/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.process_stats on fixtures: the /proc parsers on fixture text, and
 * the data source on fixture trees (full scan, on-demand lookups,
 * incremental-state clears, the poll tick).  The data source on the real
 * /proc is in test_procfs_real.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probes/ds/ds.h"
#include "probes/procfs/procfs.h"
#include "probes/procfs/procfs_internal.h"
#include "protos/perfetto/config/process_stats/process_stats_config.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "protos/pbw.h"
#include "smb/smb.h"
#include "tests/lib/procfs_capture.h"
#include "util/util.h"

/* ---- fixture trees ------------------------------------------------------ */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void rm_rf(const char *path)
{
	(void)nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			(void)mkdir(path, 0755);
			*p = '/';
		}
	(void)mkdir(path, 0755);
}

static void fx_write(const char *root, const char *rel, const void *data, size_t len)
{
	char path[512], dir[512];
	_cleanup_close_ int fd = -EBADF;

	ck_assert_uint_lt(strlen(root) + strlen(rel) + 2, sizeof(path));
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	mkdir_p(dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, data, len), 0);
}

static void fx_str(const char *root, const char *rel, const char *s)
{
	fx_write(root, rel, s, strlen(s));
}

struct fx_task {
	const char *name;
	int32_t tgid, pid, ppid, uid;
	const char *nspid;           /* "NSpid:" value, NULL: just the pid */
	int kthread;                 /* -1: no Kthread: line (kernel < 6.4) */
	bool mem;                    /* Vm* lines (a user process) */
	uint64_t vm_rss;
};

static void fx_status(const char *root, int32_t pid, int32_t tid, const struct fx_task *t)
{
	char rel[128], ns[64], kt[32] = "", mem[512] = "", buf[2048];

	if (tid > 0)
		snprintf(rel, sizeof(rel), "%d/task/%d/status", pid, tid);
	else
		snprintf(rel, sizeof(rel), "%d/status", pid);
	if (t->nspid)
		snprintf(ns, sizeof(ns), "%s", t->nspid);
	else
		snprintf(ns, sizeof(ns), "%d", t->pid);
	if (t->kthread >= 0)
		snprintf(kt, sizeof(kt), "Kthread:\t%d\n", t->kthread);
	if (t->mem)
		snprintf(mem, sizeof(mem),
			 "VmPeak:\t   12000 kB\nVmSize:\t   11000 kB\nVmLck:\t       4 kB\n"
			 "VmPin:\t       0 kB\nVmHWM:\t    5000 kB\nVmRSS:\t %7llu kB\n"
			 "RssAnon:\t    1000 kB\nRssFile:\t    2000 kB\nRssShmem:\t       8 kB\n"
			 "VmData:\t     500 kB\nVmStk:\t     132 kB\nVmExe:\t      20 kB\n"
			 "VmLib:\t    1800 kB\nVmPTE:\t      48 kB\nVmSwap:\t      16 kB\n"
			 "HugetlbPages:\t       0 kB\n",
			 (unsigned long long)t->vm_rss);
	snprintf(buf, sizeof(buf),
		 "Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nNgid:\t0\n"
		 "Pid:\t%d\nPPid:\t%d\nTracerPid:\t0\nUid:\t%d\t%d\t%d\t%d\n"
		 "Gid:\t0\t0\t0\t0\nFDSize:\t64\nGroups:\t4 24 27 \nNStgid:\t%s\nNSpid:\t%s\n"
		 "NSpgid:\t%d\nNSsid:\t%d\n%s%sThreads:\t1\nSigQ:\t0/31439\n"
		 "Cpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t5\n",
		 t->name, t->tgid, t->pid, t->ppid, t->uid, t->uid, t->uid, t->uid, ns, ns,
		 t->tgid, t->tgid, kt, mem);
	fx_str(root, rel, buf);
	if (tid > 0) {
		snprintf(rel, sizeof(rel), "%d/task/%d/comm", pid, tid);
		snprintf(buf, sizeof(buf), "%s\n", t->name);
		fx_str(root, rel, buf);
	}
}

static void fx_stat(const char *root, int32_t pid, const char *comm, uint64_t starttime)
{
	char rel[64], buf[512];

	snprintf(rel, sizeof(rel), "%d/stat", pid);
	snprintf(buf, sizeof(buf),
		 "%d (%s) S 1 %d %d 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 %llu 1000 "
		 "100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
		 pid, comm, pid, pid, (unsigned long long)starttime);
	fx_str(root, rel, buf);
}

static char fx_root[64];

/*
 * A small /proc:
 *   1    init, Kthread: 0, cmdline with trailing NUL
 *   2    kthreadd, Kthread: 1, empty cmdline
 *   100  name "a) (b" with threads 101 ("worker 1"), 102 (status missing),
 *        cmdline without its final NUL and an empty argument
 *   200  in a pid namespace (NSpid: 200 1), thread 201 (NSpid: 201 2)
 *   300  no status at all: exited while listed
 * plus entries that are not pids.
 */
static void fx_build(void)
{
	const struct fx_task init = { "init", 1, 1, 0, 0, NULL, 0, true, 3000 };
	const struct fx_task kthreadd = { "kthreadd", 2, 2, 0, 0, NULL, 1, false, 0 };
	const struct fx_task odd = { "a) (b", 100, 100, 1, 1000, NULL, 0, true, 3000 };
	const struct fx_task worker = { "worker 1", 100, 101, 1, 1000, NULL, 0, true, 3000 };
	const struct fx_task ns = { "nsinit", 200, 200, 1, 0, "200\t1", 0, true, 3000 };
	const struct fx_task ns_thr = { "nsthr", 200, 201, 1, 0, "201\t2", 0, true, 3000 };

	snprintf(fx_root, sizeof(fx_root), "/tmp/test-procfs-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fx_root));

	fx_status(fx_root, 1, 0, &init);
	fx_status(fx_root, 1, 1, &init);
	fx_write(fx_root, "1/cmdline", "/sbin/init\0splash\0", 18);
	fx_stat(fx_root, 1, "init", 5);
	fx_str(fx_root, "1/oom_score_adj", "0\n");

	fx_status(fx_root, 2, 0, &kthreadd);
	fx_status(fx_root, 2, 2, &kthreadd);
	fx_write(fx_root, "2/cmdline", "", 0);
	fx_stat(fx_root, 2, "kthreadd", 6);

	fx_status(fx_root, 100, 0, &odd);
	fx_status(fx_root, 100, 100, &odd);
	fx_status(fx_root, 100, 101, &worker);
	fx_status(fx_root, 101, 0, &worker); /* /proc/<tid>/ of a thread */
	fx_write(fx_root, "100/cmdline", "prog\0\0arg one", 13);
	fx_stat(fx_root, 100, "a) (b", 777);
	fx_str(fx_root, "100/oom_score_adj", "-100\n");

	fx_status(fx_root, 200, 0, &ns);
	fx_status(fx_root, 200, 200, &ns);
	fx_status(fx_root, 200, 201, &ns_thr);
	fx_write(fx_root, "200/cmdline", "ns\0", 3);
	fx_stat(fx_root, 200, "nsinit", 9);

	{
		char path[256];

		snprintf(path, sizeof(path), "%s/100/task/102", fx_root);
		mkdir_p(path);
		snprintf(path, sizeof(path), "%s/300/task", fx_root);
		mkdir_p(path);
		snprintf(path, sizeof(path), "%s/sys", fx_root);
		mkdir_p(path);
		snprintf(path, sizeof(path), "%s/0123", fx_root);
		mkdir_p(path);
		snprintf(path, sizeof(path), "%s/self", fx_root);
		ck_assert_int_eq(symlink("1", path), 0);
	}
}

static void fx_teardown(void)
{
	if (fx_root[0])
		rm_rf(fx_root);
	fx_root[0] = '\0';
}

static struct procfs_ds *fx_ds(struct capture *c, const Perfetto__Protos__ProcessStatsConfig *cfg,
			       struct loop *e)
{
	struct pbw_sink sink = cap_sink(c);
	struct procfs_ds *ds = NULL;

	ck_assert_int_eq(procfs_ds_setup(e, 7, 42, cfg, &sink, &ds), 0);
	ck_assert_int_eq(procfs_ds_set_proc_root(ds, fx_root), 0);
	return ds;
}

/* ---- parsers ------------------------------------------------------------ */

START_TEST(test_parse_status)
{
	static const char text[] =
		"Name:\ta) (b Pid: 9\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t1234\n"
		"Ngid:\t0\nPid:\t1240\nPPid:\t77\nTracerPid:\t0\nUid:\t1000\t1001\t1002\t1003\n"
		"Gid:\t5\t5\t5\t5\nGroups:\t1 2 3\nNStgid:\t1234\t10\t1\nNSpid:\t1240\t16\t7\n"
		"Kthread:\t0\nVmPeak:\t 9 kB\nVmSize:\t  123456 kB\nVmLck:\t 1 kB\nVmHWM:\t 2 kB\n"
		"VmRSS:\t 3 kB\nRssAnon:\t 4 kB\nRssFile:\t 5 kB\nRssShmem:\t 6 kB\nVmSwap:\t 7 kB\n";
	struct procfs_status st;

	ck_assert_int_eq(procfs_status_parse(text, sizeof(text) - 1, &st), 0);
	ck_assert(st.has_name);
	ck_assert_uint_eq(st.name_len, strlen("a) (b Pid: 9"));
	ck_assert(memcmp(st.name, "a) (b Pid: 9", st.name_len) == 0);
	ck_assert_int_eq(st.tgid, 1234);
	ck_assert_int_eq(st.pid, 1240);   /* not fooled by "Pid:" inside Name: */
	ck_assert_int_eq(st.ppid, 77);
	ck_assert_int_eq(st.uid, 1000);
	ck_assert_uint_eq(st.n_nspid, 2);
	ck_assert_int_eq(st.nspid[0], 16);
	ck_assert_int_eq(st.nspid[1], 7);
	ck_assert_int_eq(st.kthread, 0);
	ck_assert(st.has_mem);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_VM_SIZE], 123456);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_VM_LOCKED], 1);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_VM_HWM], 2);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_VM_RSS], 3);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_RSS_ANON], 4);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_RSS_FILE], 5);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_RSS_SHMEM], 6);
	ck_assert_uint_eq(st.mem[PROCFS_CNT_VM_SWAP], 7);
}
END_TEST

START_TEST(test_parse_status_kthread_and_edges)
{
	/* a kernel thread on a pre-6.4 kernel, no final newline */
	static const char kt[] = "Name:\tkworker/0:1\nTgid:\t9\nPid:\t9\nPPid:\t2\nUid:\t0\t0\t0\t0\nNSpid:\t9";
	/* a comm that starts with a blank keeps it */
	static const char blank[] = "Name:\t  x\nTgid:\t5\nPid:\t5\n";
	static const char junk[] = "hello\nworld: 5\n\n\n";
	struct procfs_status st;

	ck_assert_int_eq(procfs_status_parse(kt, sizeof(kt) - 1, &st), 0);
	ck_assert_int_eq(st.kthread, -1);
	ck_assert(!st.has_mem);
	ck_assert_uint_eq(st.n_nspid, 0);
	ck_assert_int_eq(st.ppid, 2);
	ck_assert(memcmp(st.name, "kworker/0:1", st.name_len) == 0);

	ck_assert_int_eq(procfs_status_parse(blank, sizeof(blank) - 1, &st), 0);
	ck_assert_uint_eq(st.name_len, 3);
	ck_assert(memcmp(st.name, "  x", 3) == 0);

	ck_assert_int_eq(procfs_status_parse(junk, sizeof(junk) - 1, &st), -EINVAL);
	ck_assert_int_eq(procfs_status_parse("", 0, &st), -EINVAL);
}
END_TEST

START_TEST(test_parse_stat)
{
	static const char text[] =
		"4242 (a) (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 11 22 -3 -4 20 -5 1 0 "
		"987654 1000 100 18446744073709551615\n";
	struct procfs_stat st;

	ck_assert_int_eq(procfs_stat_parse(text, sizeof(text) - 1, &st), 0);
	ck_assert_int_eq(st.pid, 4242);
	ck_assert_uint_eq(st.comm_len, strlen("a) (b) c"));
	ck_assert(memcmp(st.comm, "a) (b) c", st.comm_len) == 0);
	ck_assert_int_eq(st.state, 'S');
	ck_assert_int_eq(st.ppid, 17);
	ck_assert_uint_eq(st.utime, 11);
	ck_assert_uint_eq(st.stime, 22);
	ck_assert_uint_eq(st.starttime, 987654);

	ck_assert_int_eq(procfs_stat_parse("12 (x S 1 2", 11, &st), -EINVAL);
	ck_assert_int_eq(procfs_stat_parse("12 (x) S 1 2 3", 14, &st), -EINVAL);
	ck_assert_int_eq(procfs_stat_parse("", 0, &st), -EINVAL);
	ck_assert_int_eq(procfs_stat_parse("x (y) S", 7, &st), -EINVAL);
}
END_TEST

static size_t split(const char *buf, size_t len, char out[][16], size_t max)
{
	size_t pos = 0, n = 0, l;
	const char *a;

	while (n < max && procfs_cmdline_next(buf, len, &pos, &a, &l)) {
		ck_assert_uint_lt(l, 16);
		memcpy(out[n], a, l);
		out[n][l] = '\0';
		n++;
	}
	return n;
}

START_TEST(test_parse_cmdline)
{
	char out[8][16];

	ck_assert_uint_eq(split("a\0bc\0", 5, out, 8), 2);
	ck_assert_str_eq(out[0], "a");
	ck_assert_str_eq(out[1], "bc");
	/* the final NUL is missing (seen on some kernels) */
	ck_assert_uint_eq(split("a\0bc", 4, out, 8), 2);
	ck_assert_str_eq(out[1], "bc");
	/* empty arguments are dropped, as Perfetto's splitter does */
	ck_assert_uint_eq(split("\0a\0\0b\0\0", 7, out, 8), 2);
	ck_assert_str_eq(out[0], "a");
	ck_assert_str_eq(out[1], "b");
	ck_assert_uint_eq(split("", 0, out, 8), 0);
	ck_assert_uint_eq(split("\0\0", 2, out, 8), 0);
	/* setproctitle() style: one argument with spaces */
	ck_assert_uint_eq(split("nginx: worker", 13, out, 8), 1);
	ck_assert_str_eq(out[0], "nginx: worker");
}
END_TEST

START_TEST(test_comm_to_name)
{
	char out[2 * PROCFS_COMM_MAX];
	size_t n;

	n = procfs_comm_to_name("a\\b\nc\n", 6, out, sizeof(out));
	ck_assert_uint_eq(n, 7);
	ck_assert(memcmp(out, "a\\\\b\\nc", 7) == 0);
	n = procfs_comm_to_name("t\tx y\n", 6, out, sizeof(out));
	ck_assert_uint_eq(n, 5);
	ck_assert(memcmp(out, "t\tx y", 5) == 0);
	ck_assert_uint_eq(procfs_comm_to_name("\n", 1, out, sizeof(out)), 0);
	/* cut, never overrun: a 2-byte escape that does not fit is dropped */
	ck_assert_uint_eq(procfs_comm_to_name("ab\\", 3, out, 3), 2);
}
END_TEST

START_TEST(test_parse_numbers)
{
	static const char kb[] = "  1234 kB", neg[] = "-1000\n", big[] = "99999999999999999999";
	static const char sp[] = "- 5", unit[] = "kB";
	int64_t i;
	uint64_t u;

	ck_assert_int_eq(procfs_parse_pid("1"), 1);
	ck_assert_int_eq(procfs_parse_pid("4194303"), 4194303);
	ck_assert_int_eq(procfs_parse_pid("0"), 0);
	ck_assert_int_eq(procfs_parse_pid("0123"), 0);
	ck_assert_int_eq(procfs_parse_pid("12a"), 0);
	ck_assert_int_eq(procfs_parse_pid(""), 0);
	ck_assert_int_eq(procfs_parse_pid("self"), 0);
	ck_assert_int_eq(procfs_parse_pid("2147483648"), 0);

	ck_assert_int_eq(procfs_parse_uint_prefix(kb, kb + sizeof(kb) - 1, &u), 0);
	ck_assert_uint_eq(u, 1234);
	ck_assert_int_eq(procfs_parse_int_prefix(neg, neg + sizeof(neg) - 1, &i), 0);
	ck_assert_int_eq(i, -1000);
	ck_assert_int_eq(procfs_parse_uint_prefix(big, big + sizeof(big) - 1, &u), -ERANGE);
	ck_assert_int_eq(procfs_parse_int_prefix(sp, sp + sizeof(sp) - 1, &i), -EINVAL);
	ck_assert_int_eq(procfs_parse_uint_prefix(unit, unit + sizeof(unit) - 1, &u), -EINVAL);
}
END_TEST

START_TEST(test_pidset)
{
	struct procfs_pidset s = {};

	ck_assert(!procfs_pidset_contains(&s, 5));
	ck_assert_int_eq(procfs_pidset_add(&s, 5), 1);
	ck_assert_int_eq(procfs_pidset_add(&s, 5), 0);
	ck_assert_int_eq(procfs_pidset_add(&s, 4194303), 1);
	ck_assert_int_eq(procfs_pidset_add(&s, 4194304), -ERANGE);
	ck_assert_int_eq(procfs_pidset_add(&s, -1), -ERANGE);
	ck_assert(procfs_pidset_contains(&s, 5));
	ck_assert(procfs_pidset_contains(&s, 4194303));
	ck_assert(!procfs_pidset_contains(&s, 6));
	ck_assert(!procfs_pidset_contains(&s, 4194304));
	ck_assert_uint_eq(s.count, 2);
	procfs_pidset_remove(&s, 5);
	ck_assert(!procfs_pidset_contains(&s, 5));
	ck_assert_uint_eq(s.count, 1);
	procfs_pidset_clear(&s);
	ck_assert(!procfs_pidset_contains(&s, 4194303));
	ck_assert_uint_eq(s.count, 0);
	procfs_pidset_done(&s);
}
END_TEST

START_TEST(test_cache)
{
	struct procfs_cache c = {};
	struct procfs_cache_entry *e;

	for (int32_t pid = 1; pid <= 5000; pid++) {
		e = procfs_cache_get(&c, pid);
		ck_assert_ptr_nonnull(e);
		ck_assert_uint_eq(e->valid, 0);
		e->value[PROCFS_CNT_VM_RSS] = (uint64_t)pid * 3;
		e->valid = 1u << PROCFS_CNT_VM_RSS;
	}
	ck_assert_uint_eq(c.used, 5000);
	for (int32_t pid = 1; pid <= 5000; pid++) {
		e = procfs_cache_get(&c, pid);
		ck_assert_uint_eq(e->value[PROCFS_CNT_VM_RSS], (uint64_t)pid * 3);
	}
	ck_assert_ptr_null(procfs_cache_get(&c, 0));
	procfs_cache_clear(&c);
	ck_assert_uint_eq(procfs_cache_get(&c, 17)->valid, 0);
	procfs_cache_done(&c);
}
END_TEST

/* ---- data source on fixture trees --------------------------------------- */

/* Top-level TracePacket field numbers of packet @idx, in wire order. */
static size_t raw_packet_fields(const struct capture *c, size_t idx, uint32_t *out, size_t max)
{
	const uint8_t *p = c->buf, *end = c->buf + pbw_position(&c->w);

	for (;;) {
		uint64_t key = 0, len = 0;
		unsigned s = 0;

		ck_assert(p < end);
		do
			key |= (uint64_t)(*p & 0x7f) << s, s += 7;
		while (*p++ & 0x80);
		ck_assert_uint_eq(key, (1 << 3) | 2);
		s = 0;
		do
			len |= (uint64_t)(*p & 0x7f) << s, s += 7;
		while (*p++ & 0x80);
		if (idx-- > 0) {
			p += len;
			continue;
		}

		const uint8_t *q = p, *qend = p + len;
		size_t n = 0;

		while (q < qend && n < max) {
			uint64_t k = 0, v = 0;

			s = 0;
			do
				k |= (uint64_t)(*q & 0x7f) << s, s += 7;
			while (*q++ & 0x80);
			out[n++] = (uint32_t)(k >> 3);
			if ((k & 7) == 0) {
				while (*q++ & 0x80)
					;
			} else {
				ck_assert_uint_eq(k & 7, 2);
				s = 0;
				do
					v |= (uint64_t)(*q & 0x7f) << s, s += 7;
				while (*q++ & 0x80);
				q += v;
			}
		}
		return n;
	}
}

START_TEST(test_fixture_full_scan)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds_stats st;
	struct procfs_ds *ds;
	struct capture c;
	const TreeProcess *p;
	const TreeThread *th;
	uint32_t fields[8];
	uint64_t before = now_ns(CLOCK_BOOTTIME);

	CFG_SET(cfg, scan_all_processes_on_start, true);
	CFG_SET(cfg, record_thread_names, true);
	CFG_SET(cfg, record_process_age, true);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, NULL);
	ck_assert_uint_eq(procfs_ds_tracing_session_id(ds), 42);
	ck_assert_uint_eq(procfs_ds_instance_id(ds), 7);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_int_eq(procfs_ds_start(ds), -EALREADY);
	ck_assert_int_eq(procfs_ds_set_proc_root(ds, fx_root), -EBUSY);

	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 1);
	ck_assert(t->packet[0]->has_timestamp);
	ck_assert_uint_ge(t->packet[0]->timestamp, before);
	ck_assert(t->packet[0]->has_incremental_state_cleared);
	ck_assert(t->packet[0]->incremental_state_cleared);
	ck_assert_ptr_nonnull(packet_tree(t->packet[0]));
	ck_assert(packet_tree(t->packet[0])->has_collection_end_timestamp);
	ck_assert_uint_ge(packet_tree(t->packet[0])->collection_end_timestamp,
			  t->packet[0]->timestamp);
	/* the same field order as traced_probes: timestamp, cleared, tree */
	ck_assert_uint_eq(raw_packet_fields(&c, 0, fields, 8), 3);
	ck_assert_uint_eq(fields[0], 8);
	ck_assert_uint_eq(fields[1], 41);
	ck_assert_uint_eq(fields[2], 2);

	ck_assert_uint_eq(packet_tree(t->packet[0])->n_processes, 4);

	p = find_process(t, 0, 1);
	ck_assert_ptr_nonnull(p);
	ck_assert(cmdline_is(p, (const char *const[]){ "/sbin/init", "splash" }, 2));
	ck_assert(!p->has_cmdline_is_comm);
	ck_assert(p->has_ppid && p->ppid == 0);
	ck_assert(p->has_uid && p->uid == 0);
	ck_assert(p->has_is_kthread && !p->is_kthread);
	ck_assert(p->has_process_start_from_boot);
	ck_assert_uint_eq(p->process_start_from_boot, 5 * (1000000000ull / sysconf(_SC_CLK_TCK)));
	ck_assert_uint_eq(p->n_nspid, 0);

	p = find_process(t, 0, 2);
	ck_assert_ptr_nonnull(p);
	ck_assert(cmdline_is(p, (const char *const[]){ "kthreadd" }, 1));
	ck_assert(p->has_cmdline_is_comm && p->cmdline_is_comm);
	ck_assert(p->has_is_kthread && p->is_kthread);

	p = find_process(t, 0, 100);
	ck_assert_ptr_nonnull(p);
	ck_assert(cmdline_is(p, (const char *const[]){ "prog", "arg one" }, 2));
	ck_assert_int_eq(p->ppid, 1);
	ck_assert_int_eq(p->uid, 1000);
	ck_assert_uint_eq(p->process_start_from_boot, 777 * (1000000000ull / sysconf(_SC_CLK_TCK)));

	p = find_process(t, 0, 200);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->n_nspid, 1);
	ck_assert_int_eq(p->nspid[0], 1);

	ck_assert_ptr_null(find_process(t, 0, 300));
	ck_assert_ptr_null(find_process(t, 0, 101));

	/* v58: a Thread for every main thread, named with record_thread_names */
	th = find_thread(t, 0, 100);
	ck_assert_ptr_nonnull(th);
	ck_assert_int_eq(th->tgid, 100);
	ck_assert_str_eq(th->name, "a) (b");
	th = find_thread(t, 0, 101);
	ck_assert_ptr_nonnull(th);
	ck_assert_int_eq(th->tgid, 100);
	ck_assert_str_eq(th->name, "worker 1");
	/* listed but its status is gone: written without a name, counted */
	th = find_thread(t, 0, 102);
	ck_assert_ptr_nonnull(th);
	ck_assert_int_eq(th->tgid, 100);
	ck_assert_ptr_null(th->name);
	th = find_thread(t, 0, 2);
	ck_assert_ptr_nonnull(th);
	ck_assert_str_eq(th->name, "kthreadd");
	th = find_thread(t, 0, 200);
	ck_assert_uint_eq(th->n_nstid, 1);
	ck_assert_int_eq(th->nstid[0], 1);
	th = find_thread(t, 0, 201);
	ck_assert_int_eq(th->tgid, 200);
	ck_assert_uint_eq(th->n_nstid, 1);
	ck_assert_int_eq(th->nstid[0], 2);
	ck_assert_uint_eq(packet_tree(t->packet[0])->n_threads, 7);

	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_eq(st.processes, 4);
	ck_assert_uint_eq(st.threads, 7);
	ck_assert_uint_eq(st.vanished, 2); /* 300/status, 100/task/102/status */
	ck_assert_uint_eq(st.full_scans, 1);
	ck_assert_uint_eq(st.packets, 1);
	ck_assert_uint_eq(st.packets_dropped, 0);

	/* Flush only flushes the writer: no new packet */
	ck_assert_int_eq(procfs_ds_flush(ds), 0);
	ck_assert_uint_eq(c.flushes, 1);
	ck_assert_uint_eq(c.packets, 1);

	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

START_TEST(test_fixture_full_scan_minimal)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds_stats st;
	struct procfs_ds *ds;
	struct capture c;
	const TreeThread *th;

	/* no thread names, no main-thread entries */
	CFG_SET(cfg, scan_all_processes_on_start, true);
	CFG_SET(cfg, skip_main_thread_message, true);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, NULL);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 1);
	ck_assert_ptr_null(find_thread(t, 0, 1));
	ck_assert_ptr_null(find_thread(t, 0, 100));
	th = find_thread(t, 0, 101);
	ck_assert_ptr_nonnull(th);
	ck_assert_ptr_null(th->name);
	/* thread status not read at all without names outside namespaces */
	th = find_thread(t, 0, 102);
	ck_assert_ptr_nonnull(th);
	/* namespaced process: its threads are read for their nstid */
	th = find_thread(t, 0, 201);
	ck_assert_uint_eq(th->n_nstid, 1);
	ck_assert_ptr_null(th->name);
	ck_assert(!find_process(t, 0, 1)->has_process_start_from_boot);
	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_eq(st.vanished, 1);
	ck_assert_uint_eq(st.threads, 3);
	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

START_TEST(test_fixture_split_packets)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds *ds;
	struct capture c;
	size_t procs = 0, threads = 0;

	/* a tiny split size: every entry past the first starts a packet */
	CFG_SET(cfg, scan_all_processes_on_start, true);
	CFG_SET(cfg, record_thread_names, true);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, NULL);
	ds->packet_split_bytes = 16;
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	t = cap_decode(&c);
	ck_assert_uint_gt(t->n_packet, 4);
	for (size_t i = 0; i < t->n_packet; i++) {
		const Perfetto__Protos__ProcessTree *tree = packet_tree(t->packet[i]);

		ck_assert_ptr_nonnull(tree);
		ck_assert(tree->has_collection_end_timestamp);
		ck_assert_uint_eq(t->packet[i]->timestamp, t->packet[0]->timestamp);
		ck_assert(t->packet[i]->has_incremental_state_cleared == (i == 0));
		procs += tree->n_processes;
		threads += tree->n_threads;
	}
	/* the same entries as one packet would hold, each once */
	ck_assert_uint_eq(procs, 4);
	ck_assert_uint_eq(threads, 7);
	ck_assert_ptr_nonnull(find_process(t, 0, 200));
	ck_assert_int_eq(find_thread(t, 0, 201)->tgid, 200);
	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

START_TEST(test_fixture_on_demand)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds_stats st;
	struct procfs_ds *ds;
	struct capture c;
	const TreeProcess *p;
	const TreeThread *th;
	const int32_t pass1[] = { 101, 0, 999, 101, 2, -5 };
	const int32_t renamed[] = { 101 };

	CFG_SET(cfg, record_thread_names, true);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, NULL);
	ck_assert(procfs_ds_on_demand_enabled(ds));

	/* before start: ignored */
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, pass1, ARRAY_SIZE(pass1), NULL, 0), 0);
	ck_assert_uint_eq(c.packets, 0);

	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_uint_eq(c.packets, 0); /* no scan on start */

	/* 2, 101 (-> process 100), 999 (gone) */
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, pass1, ARRAY_SIZE(pass1), NULL, 0), 3);
	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 1);
	ck_assert(t->packet[0]->incremental_state_cleared);
	p = find_process(t, 0, 100);
	ck_assert_ptr_nonnull(p);
	ck_assert(cmdline_is(p, (const char *const[]){ "prog", "arg one" }, 2));
	ck_assert_ptr_nonnull(find_process(t, 0, 2));
	th = find_thread(t, 0, 101);
	ck_assert_ptr_nonnull(th);
	ck_assert_int_eq(th->tgid, 100);
	ck_assert_str_eq(th->name, "worker 1");
	ck_assert_int_eq(find_thread(t, 0, 100)->tgid, 100);
	ck_assert_int_eq(find_thread(t, 0, 2)->tgid, 2);
	ck_assert_ptr_null(find_thread(t, 0, 999));
	/* Perfetto's order: pids ascending, each process before its thread */
	ck_assert_int_eq(packet_tree(t->packet[0])->processes[0]->pid, 2);
	ck_assert_int_eq(packet_tree(t->packet[0])->processes[1]->pid, 100);
	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_eq(st.pids_exited, 1);
	ck_assert_uint_eq(st.pids_looked_up, 3);
	ck_assert_uint_eq(st.on_demand_passes, 1);

	/* everything known: only the dead pid is looked up again, no packet */
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, pass1, ARRAY_SIZE(pass1), NULL, 0), 1);
	ck_assert_uint_eq(c.packets, 1);
	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_eq(st.pids_exited, 2);

	/* a rename makes the thread come out again, not its process */
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, renamed, 1, renamed, 1), 1);
	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 2);
	ck_assert(!t->packet[1]->has_incremental_state_cleared);
	ck_assert_ptr_nonnull(find_thread(t, 1, 101));
	ck_assert_ptr_null(find_process(t, 1, 100));

	/* clear: everything again on next sight, flagged */
	ck_assert_int_eq(procfs_ds_clear_incremental_state(ds), 0);
	ck_assert_uint_eq(c.packets, 2); /* no rescan by default */
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, (const int32_t[]){ 100 }, 1, NULL, 0), 1);
	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 3);
	ck_assert(t->packet[2]->has_incremental_state_cleared && t->packet[2]->incremental_state_cleared);
	ck_assert_ptr_nonnull(find_process(t, 2, 100));
	ck_assert_ptr_nonnull(find_thread(t, 2, 100));
	ck_assert_ptr_null(find_thread(t, 2, 101));

	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

START_TEST(test_fixture_disable_on_demand)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	Perfetto__Protos__ProcessStatsConfig__Quirks q =
		PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_ON_DEMAND;
	struct procfs_ds *ds;
	struct capture c;

	cfg.n_quirks = 1;
	cfg.quirks = &q;
	cap_init(&c, 1 << 16);
	ds = fx_ds(&c, &cfg, NULL);
	ck_assert(!procfs_ds_on_demand_enabled(ds));
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, (const int32_t[]){ 1, 100 }, 2, NULL, 0), 0);
	ck_assert_uint_eq(c.packets, 0);
	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

START_TEST(test_fixture_rescan_on_clear)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds *ds;
	struct capture c;

	CFG_SET(cfg, scan_all_processes_on_start, true);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, NULL);
	procfs_ds_set_rescan_on_clear(ds, true);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_int_eq(procfs_ds_clear_incremental_state(ds), 0);
	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 2);
	ck_assert(t->packet[1]->incremental_state_cleared);
	ck_assert_ptr_nonnull(find_process(t, 1, 100));
	ck_assert_ptr_nonnull(find_thread(t, 1, 101));
	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

START_TEST(test_fixture_cmdline_truncated)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds_stats st;
	struct procfs_ds *ds;
	struct capture c;
	const TreeProcess *p;
	size_t big = 200 * 1024;
	_cleanup_free_ char *line = malloc(big);

	ck_assert_ptr_nonnull(line);
	memset(line, 'q', big);
	memcpy(line, "long\0", 5);
	fx_write(fx_root, "100/cmdline", line, big);

	CFG_SET(cfg, scan_all_processes_on_start, true);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, NULL);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	t = cap_decode(&c);
	p = find_process(t, 0, 100);
	ck_assert_uint_eq(p->n_cmdline, 2);
	ck_assert_str_eq(p->cmdline[0], "long");
	ck_assert_uint_eq(strlen(p->cmdline[1]), PROCFS_CMDLINE_MAX - 5);
	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_eq(st.cmdlines_truncated, 1);
	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

static void run_until_packets(struct loop *e, struct capture *c, unsigned n)
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + 5000000000ull;

	while (c->packets < n) {
		ck_assert_msg(now_ns(CLOCK_MONOTONIC) < deadline, "timed out waiting for %u packets", n);
		ck_assert_int_ge(loop_run_once(e, 100000), 0);
	}
}

START_TEST(test_fixture_poll)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const struct fx_task init2 = { "init", 1, 1, 0, 0, NULL, 0, true, 4444 };
	const struct fx_task newp = { "newp", 300, 300, 1, 0, NULL, 0, true, 10 };
	const Perfetto__Protos__Trace *t;
	const StatsProcess *sp;
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct procfs_ds_stats st;
	struct procfs_ds *ds;
	struct capture c;

	ck_assert_int_eq(loop_new(&e), 0);
	CFG_SET(cfg, proc_stats_poll_ms, 10);     /* raised to 100 */
	CFG_SET(cfg, proc_stats_cache_ttl_ms, 60000);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, e);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_uint_eq(c.packets, 0); /* the first tick is posted, not run inline */

	/* tick 1: ProcessStats, then ProcessTree for the processes with counters */
	run_until_packets(e, &c, 2);
	t = cap_decode(&c);
	ck_assert_ptr_nonnull(packet_stats(t->packet[0]));
	ck_assert(t->packet[0]->incremental_state_cleared);
	ck_assert(packet_stats(t->packet[0])->has_collection_end_timestamp);
	sp = find_stats(t->packet[0], 1);
	ck_assert_ptr_nonnull(sp);
	ck_assert(sp->has_vm_size_kb && sp->vm_size_kb == 11000);
	ck_assert(sp->has_vm_rss_kb && sp->vm_rss_kb == 3000);
	ck_assert(sp->has_rss_anon_kb && sp->rss_anon_kb == 1000);
	ck_assert(sp->has_rss_file_kb && sp->rss_file_kb == 2000);
	ck_assert(sp->has_rss_shmem_kb && sp->rss_shmem_kb == 8);
	ck_assert(sp->has_vm_swap_kb && sp->vm_swap_kb == 16);
	ck_assert(sp->has_vm_locked_kb && sp->vm_locked_kb == 4);
	ck_assert(sp->has_vm_hwm_kb && sp->vm_hwm_kb == 5000);
	ck_assert(sp->has_oom_score_adj && sp->oom_score_adj == 0);
	ck_assert_int_eq(find_stats(t->packet[0], 100)->oom_score_adj, -100);
	ck_assert_ptr_null(find_stats(t->packet[0], 2)); /* kernel thread */
	ck_assert_ptr_nonnull(packet_tree(t->packet[1]));
	ck_assert_ptr_nonnull(find_process(t, 1, 1));
	ck_assert_ptr_nonnull(find_process(t, 1, 100));
	ck_assert_ptr_nonnull(find_thread(t, 1, 100));
	ck_assert_ptr_null(find_process(t, 1, 2));
	ck_assert(!t->packet[1]->has_incremental_state_cleared);

	/* tick 2: pid 1's RSS moved, pid 300 appeared: only those */
	fx_status(fx_root, 1, 0, &init2);
	fx_status(fx_root, 300, 0, &newp);
	fx_write(fx_root, "300/cmdline", "newp\0", 5);
	run_until_packets(e, &c, 4);
	t = cap_decode(&c);
	sp = find_stats(t->packet[2], 1);
	ck_assert_ptr_nonnull(sp);
	ck_assert(sp->has_vm_rss_kb && sp->vm_rss_kb == 4444);
	ck_assert(!sp->has_vm_size_kb);
	ck_assert(!sp->has_oom_score_adj);
	ck_assert_ptr_null(find_stats(t->packet[2], 100));
	sp = find_stats(t->packet[2], 300);
	ck_assert(sp && sp->has_vm_size_kb && !sp->has_oom_score_adj); /* no oom file */
	ck_assert_ptr_nonnull(find_process(t, 3, 300));
	ck_assert_ptr_null(find_process(t, 3, 1));

	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_ge(st.poll_ticks, 2);
	ck_assert_uint_eq(st.stats_processes, 5); /* 1, 100, 200; then 1, 300 */
	procfs_ds_free(ds);
	cap_done(&c);
}
END_TEST

START_TEST(test_fixture_poll_no_ttl)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct procfs_ds *ds;
	struct capture c;

	/* without a TTL the cache lives one tick: every counter, every tick */
	ck_assert_int_eq(loop_new(&e), 0);
	CFG_SET(cfg, proc_stats_poll_ms, 100);
	cap_init(&c, 1 << 20);
	ds = fx_ds(&c, &cfg, e);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	run_until_packets(e, &c, 3);
	t = cap_decode(&c);
	ck_assert_ptr_nonnull(packet_stats(t->packet[2]));
	ck_assert(find_stats(t->packet[2], 1)->has_vm_size_kb);
	ck_assert(find_stats(t->packet[2], 100)->has_oom_score_adj);
	procfs_ds_free(ds);
	cap_done(&c);

	/* a poll period needs a loop */
	cap_init(&c, 1 << 10);
	struct pbw_sink sink = cap_sink(&c);
	ck_assert_int_eq(procfs_ds_setup(NULL, 1, 1, &cfg, &sink, &ds), -EINVAL);
	cap_done(&c);
}
END_TEST

static Suite *procfs_suite(void)
{
	Suite *s = suite_create("procfs");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_test(tc, test_parse_status);
	tcase_add_test(tc, test_parse_status_kthread_and_edges);
	tcase_add_test(tc, test_parse_stat);
	tcase_add_test(tc, test_parse_cmdline);
	tcase_add_test(tc, test_comm_to_name);
	tcase_add_test(tc, test_parse_numbers);
	tcase_add_test(tc, test_pidset);
	tcase_add_test(tc, test_cache);
	suite_add_tcase(s, tc);

	tc = tcase_create("fixture");
	tcase_add_checked_fixture(tc, fx_build, fx_teardown);
	tcase_add_test(tc, test_fixture_full_scan);
	tcase_add_test(tc, test_fixture_full_scan_minimal);
	tcase_add_test(tc, test_fixture_split_packets);
	tcase_add_test(tc, test_fixture_on_demand);
	tcase_add_test(tc, test_fixture_disable_on_demand);
	tcase_add_test(tc, test_fixture_rescan_on_clear);
	tcase_add_test(tc, test_fixture_cmdline_truncated);
	tcase_add_test(tc, test_fixture_poll);
	tcase_add_test(tc, test_fixture_poll_no_ttl);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(procfs_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
