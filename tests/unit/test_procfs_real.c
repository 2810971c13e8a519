/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.process_stats on the real /proc, against helper processes whose
 * names, command lines and threads we chose: the full scan, on-demand
 * lookups, a task in another pid namespace, and packets through the real
 * SMB writer and the service-side reader.  Fixtures are in test_procfs.
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

/* ---- real /proc --------------------------------------------------------- */

#define HELPER_ENV "TP_PROCFS_HELPER_THREADS"
#define HELPER_COMM "hlp (x) y"
#define MAX_HELPER_THREADS 16

static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t helper_cond = PTHREAD_COND_INITIALIZER;
static unsigned helper_ready;

static void *helper_thread(void *arg)
{
	char name[16], line[64];
	int n;

	/* thread 0: a backslash, which status escapes */
	if ((uintptr_t)arg == 0)
		snprintf(name, sizeof(name), "thr\\0");
	else
		snprintf(name, sizeof(name), "thr %u", (unsigned)(uintptr_t)arg);
	(void)prctl(PR_SET_NAME, name);
	n = snprintf(line, sizeof(line), "%d %s\n", gettid(), name);
	pthread_mutex_lock(&helper_lock);
	(void)write_all(STDOUT_FILENO, line, (size_t)n);
	helper_ready++;
	pthread_cond_broadcast(&helper_cond);
	/* sleep until the process exits */
	for (;;)
		pthread_cond_wait(&helper_cond, &helper_lock);
	return NULL;
}

/* Re-executed test binary: named threads, then wait for stdin to close. */
static int helper_main(const char *threads)
{
	uint32_t n = 0;
	char line[64], c;
	int len;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (safe_atou32(threads, &n) < 0 || n > MAX_HELPER_THREADS)
		return 2;
	(void)prctl(PR_SET_NAME, HELPER_COMM);
	for (uint32_t i = 0; i < n; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, helper_thread, (void *)(uintptr_t)i) != 0)
			return 3;
	}
	pthread_mutex_lock(&helper_lock);
	while (helper_ready < n)
		pthread_cond_wait(&helper_cond, &helper_lock);
	len = snprintf(line, sizeof(line), "ready %d\n", getpid());
	(void)write_all(STDOUT_FILENO, line, (size_t)len);
	pthread_mutex_unlock(&helper_lock);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	_exit(0);
}

struct helper {
	pid_t pid;
	int in_fd;
	unsigned n;
	int32_t tids[MAX_HELPER_THREADS];
	char names[MAX_HELPER_THREADS][16];
};

static void helper_spawn(struct helper *h, char *const argv[], unsigned n_threads)
{
	int in[2], out[2];
	char buf[4096], env[64];
	size_t len = 0;
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + 10000000000ull;

	memset(h, 0, sizeof(*h));
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	snprintf(env, sizeof(env), HELPER_ENV "=%u", n_threads);
	h->pid = fork();
	ck_assert_int_ge(h->pid, 0);
	if (h->pid == 0) {
		char *envp[] = { env, NULL };

		(void)dup2(in[0], STDIN_FILENO);
		(void)dup2(out[1], STDOUT_FILENO);
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	h->in_fd = in[1];

	/* "<tid> <name>\n" per thread, then "ready <pid>\n" */
	for (;;) {
		struct pollfd pfd = { .fd = out[0], .events = POLLIN };
		char *nl;
		ssize_t k;

		ck_assert_msg(now_ns(CLOCK_MONOTONIC) < deadline, "helper did not start");
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		k = read(out[0], buf + len, sizeof(buf) - 1 - len);
		ck_assert_int_gt(k, 0);
		len += (size_t)k;
		buf[len] = '\0';
		while ((nl = strchr(buf, '\n'))) {
			*nl = '\0';
			if (strncmp(buf, "ready ", 6) == 0) {
				ck_assert_uint_eq(h->n, n_threads);
				close(out[0]);
				return;
			}
			ck_assert_uint_lt(h->n, MAX_HELPER_THREADS);
			ck_assert_int_eq(sscanf(buf, "%d", &h->tids[h->n]), 1);
			ck_assert_ptr_nonnull(strchr(buf, ' '));
			snprintf(h->names[h->n], 16, "%s", strchr(buf, ' ') + 1);
			h->n++;
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
	}
}

static void helper_stop(struct helper *h)
{
	int status;

	close(h->in_fd);
	ck_assert_int_eq(waitpid(h->pid, &status, 0), h->pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static bool kernel_has_kthread_line(void)
{
	_cleanup_free_ char *s = NULL;

	if (read_full_file_at(AT_FDCWD, "/proc/self/status", 1 << 20, &s, NULL) < 0)
		return false;
	return strstr(s, "\nKthread:") != NULL;
}

static char *big_arg;

static void helper_argv(char **argv)
{
	if (!big_arg) {
		size_t n = 64 * 1024;

		big_arg = malloc(n + 1);
		ck_assert_ptr_nonnull(big_arg);
		for (size_t i = 0; i < n; i++)
			big_arg[i] = (char)('a' + i % 26);
		big_arg[n] = '\0';
	}
	argv[0] = (char *)"procfs helper";
	argv[1] = (char *)"arg with spaces";
	argv[2] = (char *)"";                      /* dropped, as Perfetto does */
	argv[3] = (char *)"ünïcødé ✓";
	argv[4] = (char *)"\xff\xfe\x01odd";        /* not UTF-8: kept as bytes */
	argv[5] = big_arg;
	argv[6] = NULL;
}

/* What status's Name: shows for a comm: '\\' and newline escaped. */
static void status_escape(const char *in, char *out, size_t size)
{
	size_t n = 0;

	for (; *in && n + 3 < size; in++) {
		if (*in == '\\' || *in == '\n') {
			out[n++] = '\\';
			out[n++] = *in == '\n' ? 'n' : '\\';
		} else {
			out[n++] = *in;
		}
	}
	out[n] = '\0';
}

static void check_helper(const Perfetto__Protos__Trace *t, size_t from, const struct helper *h)
{
	const char *const want[] = { "procfs helper", "arg with spaces", "ünïcødé ✓",
				     "\xff\xfe\x01odd", big_arg };
	const TreeProcess *p = find_process(t, from, h->pid);
	const TreeThread *th;

	ck_assert_msg(p, "helper process %d missing", h->pid);
	ck_assert(cmdline_is(p, want, ARRAY_SIZE(want)));
	ck_assert_uint_eq(strlen(p->cmdline[4]), 64 * 1024);
	ck_assert(!p->has_cmdline_is_comm);
	ck_assert_int_eq(p->ppid, getpid());
	ck_assert_int_eq(p->uid, (int32_t)getuid());
	ck_assert_uint_eq(p->n_nspid, 0);
	if (kernel_has_kthread_line())
		ck_assert(p->has_is_kthread && !p->is_kthread);

	th = find_thread(t, from, h->pid);
	ck_assert_ptr_nonnull(th);
	ck_assert_int_eq(th->tgid, h->pid);
	ck_assert_str_eq(th->name, HELPER_COMM);
	for (unsigned i = 0; i < h->n; i++) {
		th = find_thread(t, from, h->tids[i]);
		ck_assert_msg(th, "thread %d missing", h->tids[i]);
		char want_name[64];

		ck_assert_int_eq(th->tgid, h->pid);
		status_escape(h->names[i], want_name, sizeof(want_name));
		ck_assert_str_eq(th->name, want_name);
	}
	/* one helper thread is named "thr\0": written as status shows it */
	for (unsigned i = 0;; i++) {
		ck_assert_uint_lt(i, h->n);
		if (strcmp(h->names[i], "thr\\0") == 0) {
			ck_assert_str_eq(find_thread(t, from, h->tids[i])->name, "thr\\\\0");
			break;
		}
	}
}

START_TEST(test_real_full_scan)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds_stats st;
	struct pbw_sink sink;
	struct procfs_ds *ds;
	struct capture c;
	struct helper h;
	const TreeProcess *p;
	char *argv[7];

	helper_argv(argv);
	helper_spawn(&h, argv, 5);

	CFG_SET(cfg, scan_all_processes_on_start, true);
	CFG_SET(cfg, record_thread_names, true);
	CFG_SET(cfg, record_process_age, true);
	cap_init(&c, 32 << 20);
	sink = cap_sink(&c);
	ck_assert_int_eq(procfs_ds_setup(NULL, 1, 1, &cfg, &sink, &ds), 0);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 1);
	check_helper(t, 0, &h);

	p = find_process(t, 0, h.pid);
	ck_assert(p->has_process_start_from_boot);
	ck_assert_uint_gt(p->process_start_from_boot, 0);
	ck_assert_uint_le(p->process_start_from_boot, t->packet[0]->timestamp);

	/* ourselves, and a kernel thread */
	ck_assert_ptr_nonnull(find_process(t, 0, getpid()));
	p = find_process(t, 0, 2);
	if (p) {
		ck_assert(p->has_cmdline_is_comm && p->cmdline_is_comm);
		ck_assert_str_eq(p->cmdline[0], "kthreadd");
		if (kernel_has_kthread_line())
			ck_assert(p->is_kthread);
	}
	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_eq(st.packets, 1);
	ck_assert_uint_ge(st.threads, st.processes);
	ck_assert_uint_eq(st.read_errors, 0);
	procfs_ds_free(ds);
	cap_done(&c);
	helper_stop(&h);
}
END_TEST

START_TEST(test_real_on_demand)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct procfs_ds_stats st;
	struct pbw_sink sink;
	struct procfs_ds *ds;
	struct capture c;
	struct helper h;
	int32_t pids[MAX_HELPER_THREADS + 2];
	size_t n = 0;
	char *argv[7];
	pid_t dead;
	int status;

	helper_argv(argv);
	helper_spawn(&h, argv, 3);
	/* a short-lived child, reaped: its pid has no /proc entry any more */
	dead = fork();
	ck_assert_int_ge(dead, 0);
	if (dead == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(dead, &status, 0), dead);

	/* only the threads and the dead pid: the process comes from the threads */
	for (unsigned i = 0; i < h.n; i++)
		pids[n++] = h.tids[i];
	pids[n++] = dead;
	pids[n++] = 0;

	CFG_SET(cfg, record_thread_names, true);
	cap_init(&c, 4 << 20);
	sink = cap_sink(&c);
	ck_assert_int_eq(procfs_ds_setup(NULL, 1, 1, &cfg, &sink, &ds), 0);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, pids, n, NULL, 0), (int)h.n + 1);
	t = cap_decode(&c);
	ck_assert_uint_eq(t->n_packet, 1);
	check_helper(t, 0, &h);
	ck_assert_uint_eq(packet_tree(t->packet[0])->n_processes, 1);
	ck_assert_uint_eq(packet_tree(t->packet[0])->n_threads, h.n + 1);
	ck_assert_ptr_null(find_thread(t, 0, dead));
	procfs_ds_get_stats(ds, &st);
	ck_assert_uint_eq(st.pids_exited, 1);
	ck_assert_uint_eq(st.on_demand_passes, 1);

	/* the main pid is known now (written as the process's main thread) */
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, (const int32_t[]){ h.pid }, 1, NULL, 0), 0);
	ck_assert_uint_eq(c.packets, 1);

	procfs_ds_free(ds);
	cap_done(&c);
	helper_stop(&h);
}
END_TEST

struct ns_child {
	pid_t parent;     /* ours, in our namespace: it made the namespace */
	pid_t pid;        /* pid 1 of the new namespace, as we see it */
	int32_t thread;   /* its second thread, as we see it */
	int hold_fd;      /* closing it ends both */
};

static int ns_hold_fd, ns_ready_fd;

static void *ns_thread(void *arg)
{
	char c;

	(void)prctl(PR_SET_NAME, "nsthread");
	(void)write_all(ns_ready_fd, "x", 1);
	while (read(ns_hold_fd, &c, 1) > 0)
		;
	_exit(0);
}

/*
 * A child of ours unshares the pid namespace (so that this process stays
 * in ours and can still fork, and its sanitizers can still run at exit),
 * forks the namespace's pid 1 and tells us its pid.
 * Returns: false if pid namespaces are not available to us.
 */
static bool ns_spawn(struct ns_child *nc)
{
	int hold[2], ready[2], info[2];
	pid_t init;
	char c;

	ck_assert_int_eq(pipe2(hold, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(info, O_CLOEXEC), 0);
	nc->parent = fork();
	ck_assert_int_ge(nc->parent, 0);
	if (nc->parent == 0) {
		int status;

		close(hold[1]);
		close(ready[0]);
		close(info[0]);
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		init = unshare(CLONE_NEWPID) < 0 ? -1 : fork();
		if (init == 0) {
			pthread_t t;

			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			(void)prctl(PR_SET_NAME, "nsinit");
			ns_hold_fd = hold[0];
			ns_ready_fd = ready[1];
			/* the thread says when it is named, and ends us at EOF */
			if (pthread_create(&t, NULL, ns_thread, NULL) != 0)
				_exit(1);
			for (;;)
				pause();
		}
		(void)write_all(info[1], &init, sizeof(init));
		if (init > 0)
			(void)waitpid(init, &status, 0);
		_exit(0);
	}
	close(hold[0]);
	close(ready[1]);
	close(info[1]);
	nc->hold_fd = hold[1];
	ck_assert_int_eq(read(info[0], &init, sizeof(init)), (ssize_t)sizeof(init));
	close(info[0]);
	if (init < 0) {
		close(ready[0]);
		close(nc->hold_fd);
		(void)waitpid(nc->parent, NULL, 0);
		return false;
	}
	nc->pid = init;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return true;
}

static void ns_stop(struct ns_child *nc)
{
	int status;

	close(nc->hold_fd);
	ck_assert_int_eq(waitpid(nc->parent, &status, 0), nc->parent);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int32_t other_task(pid_t pid)
{
	struct procfs_root r;
	int32_t tid, found = 0;

	ck_assert_int_eq(procfs_root_init(&r, "/proc"), 0);
	ck_assert_int_eq(procfs_dir_open_task(&r, pid), 0);
	while ((tid = procfs_dir_next(&r.task)) > 0)
		if (tid != pid)
			found = tid;
	procfs_root_done(&r);
	return found;
}

START_TEST(test_real_pid_namespace)
{
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	const Perfetto__Protos__Trace *t;
	struct pbw_sink sink;
	struct procfs_ds *ds;
	struct ns_child nc;
	struct capture c;
	const TreeProcess *p;
	const TreeThread *th;

	if (!ns_spawn(&nc)) {
		fprintf(stderr, "no pid namespaces here: not tested\n");
		return;
	}
	nc.thread = other_task(nc.pid);
	ck_assert_int_gt(nc.thread, 0);

	/* full scan without thread names: namespaced threads are read anyway */
	CFG_SET(cfg, scan_all_processes_on_start, true);
	cap_init(&c, 32 << 20);
	sink = cap_sink(&c);
	ck_assert_int_eq(procfs_ds_setup(NULL, 1, 1, &cfg, &sink, &ds), 0);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	t = cap_decode(&c);
	p = find_process(t, 0, nc.pid);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->n_nspid, 1);
	ck_assert_int_eq(p->nspid[0], 1);
	th = find_thread(t, 0, nc.pid);
	ck_assert_uint_eq(th->n_nstid, 1);
	ck_assert_int_eq(th->nstid[0], 1);
	th = find_thread(t, 0, nc.thread);
	ck_assert_ptr_nonnull(th);
	ck_assert_int_eq(th->tgid, nc.pid);
	ck_assert_uint_eq(th->n_nstid, 1);
	ck_assert_int_eq(th->nstid[0], 2);
	ck_assert_ptr_null(th->name);
	procfs_ds_free(ds);
	cap_done(&c);

	/* on demand, from the thread */
	cfg = cfg_default();
	cap_init(&c, 1 << 20);
	sink = cap_sink(&c);
	ck_assert_int_eq(procfs_ds_setup(NULL, 1, 1, &cfg, &sink, &ds), 0);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_int_eq(procfs_ds_on_ftrace_pids(ds, &nc.thread, 1, NULL, 0), 1);
	t = cap_decode(&c);
	ck_assert_int_eq(find_process(t, 0, nc.pid)->nspid[0], 1);
	ck_assert_int_eq(find_thread(t, 0, nc.thread)->nstid[0], 2);
	procfs_ds_free(ds);
	cap_done(&c);

	ns_stop(&nc);
}
END_TEST

/* ---- through the real SMB writer and the service-side reader ------------ */

struct collected {
	Packet *pkts[16];
	unsigned n;
};

static int collect_packet(const struct smb_packet *p, void *userdata)
{
	struct collected *col = userdata;
	Packet *pkt = perfetto__protos__trace_packet__unpack(NULL, p->len, p->data);

	ck_assert_ptr_nonnull(pkt);
	ck_assert_uint_lt(col->n, ARRAY_SIZE(col->pkts));
	col->pkts[col->n++] = pkt;
	return 0;
}

START_TEST(test_real_through_smb)
{
	const size_t size = 2u << 20, page = 32u << 10; /* what traced_probes asks for */
	Perfetto__Protos__ProcessStatsConfig cfg = cfg_default();
	Perfetto__Protos__Trace tr = PERFETTO__PROTOS__TRACE__INIT;
	struct collected col = {};
	struct smb_reader *rd;
	struct smb_writer *w;
	struct smb_commit cm;
	struct pbw_sink sink;
	struct procfs_ds *ds;
	struct smb *smb;
	struct helper h;
	char *argv[7];
	uint8_t *svc;
	int fd;

	helper_argv(argv);
	helper_spawn(&h, argv, 4);

	fd = memfd_create("test-procfs", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	svc = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(svc, MAP_FAILED);
	ck_assert_int_eq(smb_new_from_fd(fd, page, &smb), 0);
	ck_assert_int_eq(smb_writer_new(smb, 1, 1, &w), 0);
	ck_assert_int_eq(smb_reader_new(svc, size, page, 64u << 20, &rd), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(rd, 1), 0);

	CFG_SET(cfg, scan_all_processes_on_start, true);
	CFG_SET(cfg, record_thread_names, true);
	sink = smb_writer_sink(w);
	ck_assert_int_eq(procfs_ds_setup(NULL, 3, 9, &cfg, &sink, &ds), 0);
	ck_assert_int_eq(procfs_ds_setup(NULL, 3, 9, &cfg, NULL, &ds), -EINVAL);
	ck_assert_int_eq(procfs_ds_start(ds), 0);
	ck_assert_int_eq(procfs_ds_flush(ds), 0);

	ck_assert(smb_take_commit(smb, &cm));
	ck_assert_uint_gt(cm.n_moves, 1); /* the 64 KiB argument alone spans chunks */
	for (size_t i = 0; i < cm.n_moves; i++)
		ck_assert_int_eq(smb_reader_move(rd, &cm.moves[i]), 0);
	for (size_t i = 0; i < cm.n_patches; i++)
		ck_assert_int_eq(smb_reader_patch(rd, &cm.patches[i]), 0);
	ck_assert_int_eq(smb_reader_read_packets(rd, true, collect_packet, &col), 1);

	ck_assert_uint_eq(col.n, 1);
	ck_assert(col.pkts[0]->has_first_packet_on_sequence);
	ck_assert(col.pkts[0]->incremental_state_cleared);
	tr.n_packet = col.n;
	tr.packet = col.pkts;
	check_helper(&tr, 0, &h);

	for (unsigned i = 0; i < col.n; i++)
		perfetto__protos__trace_packet__free_unpacked(col.pkts[i], NULL);
	procfs_ds_free(ds);
	smb_writer_free(w);
	smb_reader_free(rd);
	smb_free(smb);
	munmap(svc, size);
	close(fd);
	helper_stop(&h);
}
END_TEST

static Suite *procfs_real_suite(void)
{
	Suite *s = suite_create("procfs_real");
	TCase *tc;

	tc = tcase_create("real");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_real_full_scan);
	tcase_add_test(tc, test_real_on_demand);
	tcase_add_test(tc, test_real_pid_namespace);
	tcase_add_test(tc, test_real_through_smb);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *helper = getenv(HELPER_ENV);
	SRunner *sr;
	int failed;

	if (helper)
		return helper_main(helper);

	sr = srunner_create(procfs_real_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
