/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process names end to end: a process with a known command line (spaces,
 * UTF-8, a 64 KiB argument) and named threads, plus a short-lived child
 * that exits mid-trace, recorded with sched + linux.process_stats through
 * the standalone recorder.  Every thread of ours that ran maps to the right
 * process and names in the decoded ProcessTree; the short-lived child, gone
 * before /proc could be read, is still in the trace through the fork event.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "probes/recorder.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

#define N_THREADS 4
#define LONG_ARG_LEN 65536
#define UTF8_ARG "ünïcødé ✓"
#define SPACE_ARG "an argument with spaces"

static char self_exe[4096];
static char tmpdir[] = "/tmp/tp-procs-XXXXXX";

/* ---- the child process, re-executed with a command line we chose ------- */

struct child_thread {
	int in, out;
	char name[16];
};

static void *child_thread_main(void *arg)
{
	struct child_thread *t = arg;
	char c;

	(void)prctl(PR_SET_NAME, t->name);
	while (read(t->in, &c, 1) == 1 && c)
		if (write(t->out, &c, 1) != 1)
			break;
	return NULL;
}

static volatile sig_atomic_t fork_now, stop_now;

static void on_usr1(int sig)
{
	fork_now = 1;
}

static void on_usr2(int sig)
{
	stop_now = 1;
}

/*
 * Ping-pongs with its named threads until SIGUSR2 (or @ms), and forks a
 * short-lived child on SIGUSR1: the test sends that once tracing is on, so
 * the child's whole life is inside the recording however late it started.
 */
static int child_main(unsigned ms, int report_fd)
{
	struct child_thread th[N_THREADS];
	pthread_t ids[N_THREADS];
	int to[N_THREADS][2], from[N_THREADS][2];
	uint64_t end = now_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000ull;
	bool forked = false;
	char c = 1;

	(void)prctl(PR_SET_NAME, "tp-procs-main");
	for (int i = 0; i < N_THREADS; i++) {
		if (pipe(to[i]) < 0 || pipe(from[i]) < 0)
			return 2;
		th[i].in = to[i][0];
		th[i].out = from[i][1];
		snprintf(th[i].name, sizeof(th[i].name), "tp-thread-%d", i);
		pthread_create(&ids[i], NULL, child_thread_main, &th[i]);
		/* named before we report ready, so the first /proc scan sees the names */
		pthread_setname_np(ids[i], th[i].name);
	}
	{
		pid_t ready = 0;
		(void)!write(report_fd, &ready, sizeof(ready));
	}
	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	while (!stop_now && now_ns(CLOCK_MONOTONIC) < end) {
		for (int i = 0; i < N_THREADS; i++)
			if (write(to[i][1], &c, 1) != 1 || read(from[i][0], &c, 1) != 1)
				return 3;
		if (!forked && fork_now) {
			int gate[2];
			pid_t pid;

			if (pipe(gate) < 0)
				return 4;
			pid = fork();
			if (pid == 0) {
				close(gate[1]);
				(void)prctl(PR_SET_NAME, "tp-short-lived");
				/* blocks until the parent has reported it, then exits */
				(void)!read(gate[0], &c, 1);
				_exit(0);
			}
			close(gate[0]);
			(void)!write(report_fd, &pid, sizeof(pid));
			close(gate[1]);
			(void)waitpid(pid, NULL, 0);
			forked = true;
		}
	}
	c = 0;
	for (int i = 0; i < N_THREADS; i++) {
		(void)!write(to[i][1], &c, 1);
		pthread_join(ids[i], NULL);
	}
	return 0;
}

struct spawned {
	pid_t pid;
	pid_t short_lived;
	int report_fd;
};

static void spawn(unsigned ms, struct spawned *s)
{
	char *long_arg = malloc(LONG_ARG_LEN + 1);
	char ms_arg[16], fd_arg[16];
	int fds[2];

	ck_assert_ptr_nonnull(long_arg);
	memset(long_arg, 'x', LONG_ARG_LEN);
	long_arg[LONG_ARG_LEN] = '\0';
	ck_assert_int_eq(pipe(fds), 0);
	snprintf(ms_arg, sizeof(ms_arg), "%u", ms);
	snprintf(fd_arg, sizeof(fd_arg), "%d", fds[1]);
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (s->pid == 0) {
		close(fds[0]);
		execl(self_exe, self_exe, "--child", ms_arg, fd_arg, SPACE_ARG, UTF8_ARG, long_arg,
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	free(long_arg);
	s->report_fd = fds[0];
	{
		pid_t ready = -1;
		ck_assert_int_eq(read(fds[0], &ready, sizeof(ready)), sizeof(ready));
		ck_assert_int_eq(ready, 0);
	}
}

static void reap(struct spawned *s)
{
	int status;

	ck_assert_int_eq(read(s->report_fd, &s->short_lived, sizeof(s->short_lived)),
			 sizeof(s->short_lived));
	close(s->report_fd);
	ck_assert_int_eq(waitpid(s->pid, &status, 0), s->pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- checks on the decoded trace --------------------------------------- */

static const Perfetto__Protos__ProcessTree__Process *find_process(const struct tp_trace_summary *s,
								   int32_t pid)
{
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
			continue;
		for (size_t k = 0; k < p->process_tree->n_processes; k++)
			if (p->process_tree->processes[k]->pid == pid)
				return p->process_tree->processes[k];
	}
	return NULL;
}

static const char *thread_name(const struct tp_trace_summary *s, int32_t tid)
{
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
			continue;
		for (size_t k = 0; k < p->process_tree->n_threads; k++)
			if (p->process_tree->threads[k]->tid == tid && p->process_tree->threads[k]->name)
				return p->process_tree->threads[k]->name;
	}
	return NULL;
}

/* the fork event that created @pid, if the trace has one */
static const Perfetto__Protos__SchedProcessForkFtraceEvent *find_fork(const struct tp_trace_summary *s,
									int32_t pid)
{
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			continue;
		for (size_t k = 0; k < p->ftrace_events->n_event; k++) {
			const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[k];

			if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK &&
			    e->sched_process_fork->child_pid == pid)
				return e->sched_process_fork;
		}
	}
	return NULL;
}

/*
 * The short-lived child ran: switched in, or its own events (it renames
 * itself).  The kernel now and then records no sched_switch into a freshly
 * forked task at all: 11 of 300 forks here, read back from the instance's
 * own trace file with no consumer attached.
 */
static bool ran(const struct tp_trace_summary *s, int32_t pid)
{
	if (tp_trace_has_next_pid(s, pid))
		return true;
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			continue;
		for (size_t k = 0; k < p->ftrace_events->n_event; k++)
			if (p->ftrace_events->event[k]->has_pid && p->ftrace_events->event[k]->pid == (uint32_t)pid)
				return true;
	}
	return false;
}

/* every tid of our process tree that was switched in */
static unsigned check_our_threads(const struct tp_trace_summary *s, pid_t pid)
{
	unsigned checked = 0;

	/* the process has exited: the trace itself is the only source now */
	for (size_t i = 0; i < s->trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s->trace->packet[i];

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
			continue;
		for (size_t k = 0; k < p->process_tree->n_threads; k++) {
			const Perfetto__Protos__ProcessTree__Thread *t = p->process_tree->threads[k];

			if (t->tgid != pid || t->tid == pid)
				continue;
			ck_assert_msg(tp_trace_has_next_pid(s, t->tid), "thread %d never ran", t->tid);
			ck_assert_ptr_nonnull(t->name);
			ck_assert_msg(strncmp(t->name, "tp-thread-", 10) == 0, "thread %d named '%s'",
				      t->tid, t->name);
			checked++;
		}
	}
	return checked;
}

static char g_instance_path[256];

/* once our instance traces sched_switch, have the child fork its short-lived child */
static void *kick_child(void *arg)
{
	struct spawned *c = arg;

	/* recording and draining: the fork is traced, after the start-up scan */
	if (tp_wait_recording(g_instance_path, 60000))
		(void)tp_wait_read_events(g_instance_path, 1, 60000);
	kill(c->pid, SIGUSR1);
	return NULL;
}

START_TEST(test_process_names)
{
	pthread_t kick;
	char instance[64], instance_path[256], out[512];
	struct recorder_options o;
	struct spawned child;
	struct tp_trace_summary s;
	const Perfetto__Protos__ProcessTree__Process *proc;
	const Perfetto__Protos__SchedProcessForkFtraceEvent *fork_ev;
	const char *main_name;

	snprintf(instance, sizeof(instance), "tp-procs-%d", (int)getpid());
	ck_assert_int_eq(tp_instance_create(instance, instance_path, sizeof(instance_path)), 0);
	snprintf(g_instance_path, sizeof(g_instance_path), "%s", instance_path);
	snprintf(out, sizeof(out), "%s/procs.pftrace", tmpdir);

	spawn(120000, &child);
	ck_assert_int_eq(pthread_create(&kick, NULL, kick_child, &child), 0);
	recorder_options_init(&o);
	o.output = out;
	o.instance = instance;
	o.quiet = true;
	o.duration_ms = 2000;
	ck_assert_int_eq(recorder_run(&o), 0);
	pthread_join(kick, NULL);
	kill(child.pid, SIGUSR2);
	reap(&child);
	tp_instance_remove(instance);

	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	/* the process, its command line byte for byte */
	proc = find_process(&s, child.pid);
	ck_assert_ptr_nonnull(proc);
	ck_assert_uint_eq(proc->n_cmdline, 7);
	ck_assert_str_eq(proc->cmdline[1], "--child");
	ck_assert_str_eq(proc->cmdline[4], SPACE_ARG);
	ck_assert_str_eq(proc->cmdline[5], UTF8_ARG);
	ck_assert_uint_eq(strlen(proc->cmdline[6]), LONG_ARG_LEN);
	ck_assert_int_eq(proc->ppid, getpid());
	/* its main thread and its named threads */
	ck_assert_int_eq(tp_trace_thread_tgid(&s, child.pid), child.pid);
	main_name = thread_name(&s, child.pid);
	ck_assert_ptr_nonnull(main_name);
	ck_assert_uint_eq(check_our_threads(&s, child.pid), N_THREADS);
	/* the short-lived child exited before any lookup: ftrace's fork event names it */
	ck_assert_int_gt(child.short_lived, 0);
	ck_assert(ran(&s, child.short_lived));
	fork_ev = find_fork(&s, child.short_lived);
	ck_assert_ptr_nonnull(fork_ev);
	ck_assert_int_eq(fork_ev->parent_pid, child.pid);
	tp_trace_free(&s);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s;
	TCase *tc;
	ssize_t n;

	if (argc >= 4 && strcmp(argv[1], "--child") == 0)
		return child_main((unsigned)atoi(argv[2]), atoi(argv[3]));
	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0 || !mkdtemp(tmpdir))
		return 1;
	self_exe[n] = '\0';
	s = suite_create("record_procs");
	tc = tcase_create("procs");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_process_names);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
