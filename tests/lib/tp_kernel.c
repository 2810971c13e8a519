/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/lib/tp_kernel.h"
#include "util/util.h"

/* children a failed test may leave behind: killed at teardown */
static pid_t spawned[64];

static void note_spawned(pid_t pid)
{
	for (size_t i = 0; i < ARRAY_SIZE(spawned); i++)
		if (spawned[i] <= 0) {
			spawned[i] = pid;
			return;
		}
}

void tp_note_spawned(pid_t pid)
{
	note_spawned(pid);
}

static void forget_spawned(pid_t pid)
{
	for (size_t i = 0; i < sizeof(spawned) / sizeof(spawned[0]); i++)
		if (spawned[i] == pid)
			spawned[i] = 0;
}

/*
 * Until the first use of tracing since boot a buffer holds a page per CPU
 * and its buffer_size_kb reads "7 (expanded: 1408)"; the first event
 * enabled grows it for good, to "1410" on 6.1.  Before 6.7 that first use
 * anywhere grew every buffer; since 6.7 each buffer (the top level and
 * each instance) grows on its own first use.  No one can shrink a buffer
 * back, so the test takes that step for the top level first, as any first
 * tracer would: otherwise a snapshot of the top level taken on a fresh boot
 * never matches.  Writing 0 to an event's enable file does it without
 * enabling anything; an unexpanded top level has no event enabled (enabling
 * one expands it), so the write changes nothing else.
 */
static void expand_buffers_once(void)
{
	_cleanup_free_ char *size = NULL;
	int fd;

	if (read_full_file_at(AT_FDCWD, TP_TRACEFS "/buffer_size_kb", 4096, &size, NULL) < 0 ||
	    !strstr(size, "(expanded:"))
		return;
	fd = open(TP_TRACEFS "/events/sched/sched_switch/enable", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, "0", 1);
		close(fd);
	}
}

bool tp_kernel_available(void)
{
	if (geteuid() != 0)
		return false;
	if (access(TP_TRACEFS "/trace", F_OK) != 0)
		(void)mount("nodev", TP_TRACEFS, "tracefs", 0, NULL);
	if (access(TP_TRACEFS "/trace", F_OK) != 0)
		return false;
	expand_buffers_once();
	return true;
}

void tp_tracefs_text_normalize(const char *file, char *text)
{
	char *p;

	if (strcmp(file, "buffer_size_kb") == 0 && (p = strstr(text, " (expanded:")))
		strcpy(p, "\n");
}

char *tp_tracefs_snapshot(const char *dir)
{
	static const char *const files[] = {
		"tracing_on", "set_event", "buffer_size_kb", "trace_clock", "buffer_percent",
		"current_tracer", "tracing_cpumask", "set_event_pid", "buffer_subbuf_size_kb",
	};
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char path[512];
		_cleanup_free_ char *data = NULL;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (read_full_file_at(AT_FDCWD, path, 1 << 20, &data, NULL) < 0) {
			fprintf(f, "%s: <absent>\n", files[i]);
			continue;
		}
		tp_tracefs_text_normalize(files[i], data);
		fprintf(f, "%s: %s\n", files[i], data);
	}
	fclose(f);
	return out;
}

static char created[8][64];

static void remove_all(void)
{
	/*
	 * A failed assertion can leave a recorder or producer of the test
	 * unfreed, its trace_pipe_raw descriptors still open, and the kernel
	 * refuses to remove an instance while any of them is: at exit nothing
	 * needs a descriptor any more.
	 */
	(void)syscall(SYS_close_range, 3u, ~0u, 0u);
	for (size_t i = 0; i < ARRAY_SIZE(created); i++)
		if (created[i][0])
			tp_instance_remove(created[i]);
}

/*
 * Instances of ours ("tp-...-PID") whose process is gone: a suite killed by
 * its timeout or a signal never ran its teardown nor remove_all().
 */
static void remove_orphans(void)
{
	DIR *d = opendir(TP_TRACEFS "/instances");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		const char *dash = strrchr(de->d_name, '-');
		char *end;
		long pid;

		if (strncmp(de->d_name, "tp-", 3) != 0 || !dash)
			continue;
		errno = 0;
		pid = strtol(dash + 1, &end, 10);
		if (errno || *end || end == dash + 1 || pid <= 0 || pid == getpid())
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
			char path[512];

			snprintf(path, sizeof(path), TP_TRACEFS "/instances/%s", de->d_name);
			if (rmdir(path) == 0)
				fprintf(stderr, "removed the instance %s of a process that is gone\n", de->d_name);
		}
	}
	if (d)
		closedir(d);
}

int tp_instance_create(const char *name, char *ret_path, size_t len)
{
	static bool registered;
	char path[256];

	snprintf(path, sizeof(path), TP_TRACEFS "/instances/%s", name);
	(void)rmdir(path); /* a stale one from a crashed run */
	if (mkdir(path, 0755) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(created); i++)
		if (!created[i][0]) {
			snprintf(created[i], sizeof(created[i]), "%s", name);
			break;
		}
	if (!registered) {
		remove_orphans();
		atexit(remove_all);
		registered = true;
	}
	if (ret_path)
		snprintf(ret_path, len, "%s", path);
	return 0;
}

struct rmdir_arg {
	const char *path;
	int error;
};

static bool rmdir_done(void *arg)
{
	struct rmdir_arg *a = arg;

	a->error = rmdir(a->path) < 0 ? errno : 0;
	return a->error != EBUSY;
}

void tp_instance_remove(const char *name)
{
	char path[256];
	struct rmdir_arg a = { .path = path };

	snprintf(path, sizeof(path), TP_TRACEFS "/instances/%s", name);
	/* a process that just exited may still hold its files for a moment */
	(void)tp_wait_until(rmdir_done, &a, 2000);
	/*
	 * Still busy: a failed test left a descriptor of ours open in it (a
	 * trace_marker, a reader).  remove_all() tries again at exit, when
	 * none is open any more.
	 */
	if (a.error == EBUSY)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(created); i++)
		if (strcmp(created[i], name) == 0)
			created[i][0] = '\0';
}

struct pair {
	int ping[2], pong[2];
	uint64_t deadline_ns;
	bool first;
	int report_fd;
};

static uint64_t mono_ns(void)
{
	return now_ns(CLOCK_MONOTONIC);
}

static void *pair_thread(void *arg)
{
	struct pair *p = arg;
	char c = 0;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	(void)!write(p->report_fd, &tid, sizeof(tid));
	for (unsigned long n = 0;; n++) {
		if (p->first) {
			/* the first side decides when to stop: a zero byte ends the pair */
			c = mono_ns() < p->deadline_ns ? 1 : 0;
			if (write(p->ping[1], &c, 1) != 1 || c == 0)
				break;
			if (read(p->pong[0], &c, 1) != 1)
				break;
		} else {
			if (read(p->ping[0], &c, 1) != 1 || c == 0)
				break;
			if (write(p->pong[1], &c, 1) != 1)
				break;
		}
	}
	return NULL;
}

static void workload_child(const char *comm, unsigned pairs, unsigned ms, int report_fd)
{
	struct pair *ps = calloc(pairs, sizeof(*ps));
	pthread_t *th = calloc(2 * pairs, sizeof(*th));
	uint64_t deadline = mono_ns() + (uint64_t)ms * 1000000ull;

	(void)prctl(PR_SET_NAME, comm);
	for (unsigned i = 0; i < pairs; i++) {
		if (pipe(ps[i].ping) < 0 || pipe(ps[i].pong) < 0)
			_exit(2);
		ps[i].deadline_ns = deadline;
		ps[i].report_fd = report_fd;
	}
	for (unsigned i = 0; i < pairs; i++) {
		struct pair *second = malloc(sizeof(*second));

		*second = ps[i];
		ps[i].first = true;
		second->first = false;
		pthread_create(&th[2 * i], NULL, pair_thread, &ps[i]);
		pthread_create(&th[2 * i + 1], NULL, pair_thread, second);
	}
	for (unsigned i = 0; i < 2 * pairs; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

int tp_workload_start(const char *comm, unsigned pairs, unsigned ms, struct tp_workload *w)
{
	int fds[2];
	pid_t pid;

	memset(w, 0, sizeof(*w));
	if (pairs * 2 > ARRAY_SIZE(w->tids) || pipe2(fds, O_CLOEXEC) < 0)
		return -EINVAL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		sigset_t none;

		/* the test may have blocked signals for a recorder it ran */
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		/* Not the recorder's trace_pipe_raw descriptors: open, they
		 * keep the kernel from changing current_tracer back. */
		if (fds[1] != 3)
			(void)dup2(fds[1], 3);
		(void)close_range(4, ~0u, 0);
		workload_child(comm, pairs, ms, 3);
	}
	close(fds[1]);
	w->pid = pid;
	snprintf(w->comm, sizeof(w->comm), "%s", comm);
	while (w->n_tids < pairs * 2) {
		pid_t tid;

		if (read(fds[0], &tid, sizeof(tid)) != sizeof(tid))
			break;
		w->tids[w->n_tids++] = tid;
	}
	close(fds[0]);
	note_spawned(pid);
	return w->n_tids == pairs * 2 ? 0 : -EIO;
}

int tp_workload_stop(struct tp_workload *w)
{
	int status = 0;

	if (w->pid <= 0)
		return -ECHILD;
	/* SIGKILL: the child may have inherited a mask that blocks SIGTERM */
	(void)kill(w->pid, SIGKILL);
	if (waitpid(w->pid, &status, 0) < 0)
		return -errno;
	forget_spawned(w->pid);
	w->pid = 0;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		return 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -EIO;
}

int tp_workload_wait(struct tp_workload *w)
{
	int status = 0;

	if (w->pid <= 0)
		return -ECHILD;
	if (waitpid(w->pid, &status, 0) < 0)
		return -errno;
	forget_spawned(w->pid);
	w->pid = 0;
	return status;
}

bool tp_wait_until(bool (*cond)(void *arg), void *arg, unsigned ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)ms * 1000000ull;
	const struct timespec pause = { .tv_nsec = 5 * 1000 * 1000 };

	while (!cond(arg)) {
		if (mono_ns() >= deadline)
			return cond(arg);
		(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &pause, NULL);
	}
	return true;
}

static bool call_plain(void *arg)
{
	bool (*const *cond)(void) = arg;

	return (*cond)();
}

bool tp_wait_for(bool (*cond)(void), unsigned ms)
{
	return tp_wait_until(call_plain, &cond, ms);
}

int tp_cpu_stat(const char *instance_dir, unsigned cpu, const char *key, uint64_t *ret)
{
	_cleanup_free_ char *stats = NULL;
	char path[512];
	const char *at;
	int r;

	snprintf(path, sizeof(path), "%s/per_cpu/cpu%u/stats", instance_dir, cpu);
	r = read_full_file_at(AT_FDCWD, path, 1 << 16, &stats, NULL);
	if (r < 0)
		return r;
	/* a whole line's key: "entries: " must not match "commit entries: " */
	for (at = strstr(stats, key); at && at != stats && at[-1] != '\n'; at = strstr(at + 1, key))
		;
	if (!at || sscanf(at + strlen(key), "%" SCNu64, ret) != 1)
		return -EBADMSG;
	return 0;
}

uint64_t tp_read_events(const char *instance_dir)
{
	uint64_t total = 0, v;
	int r;

	for (unsigned cpu = 0; (r = tp_cpu_stat(instance_dir, cpu, "read events: ", &v)) != -ENOENT; cpu++)
		if (r == 0)
			total += v;
	return total;
}

bool tp_read_events_reached(void *goal)
{
	const struct tp_read_events_goal *g = goal;

	return tp_read_events(g->dir) >= g->n;
}

bool tp_wait_read_events(const char *instance_dir, uint64_t n, unsigned ms)
{
	struct tp_read_events_goal g = { .dir = instance_dir, .n = n };

	return tp_wait_until(tp_read_events_reached, &g, ms);
}

void tp_watch_add(struct tp_watch *w, const char *name, pid_t pid)
{
	ck_assert_uint_lt(w->n, ARRAY_SIZE(w->pid));
	w->pid[w->n] = pid;
	w->name[w->n] = name;
	w->n++;
}

void tp_watch_drop(struct tp_watch *w, pid_t pid)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->pid[i] == pid) {
			w->pid[i] = w->pid[w->n - 1];
			w->name[i] = w->name[w->n - 1];
			w->n--;
			return;
		}
}

/* waitid(WNOWAIT): the status is seen and the child stays to be reaped */
static bool exited(pid_t pid, int *ret_status)
{
	siginfo_t si = { 0 };

	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid != pid)
		return false;
	*ret_status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
	return true;
}

bool tp_watch_exited(const struct tp_watch *w, char *ret, size_t len)
{
	int status;

	for (size_t i = 0; w && i < w->n; i++)
		if (exited(w->pid[i], &status)) {
			snprintf(ret, len, "%s (pid %d) exited with status %d", w->name[i], (int)w->pid[i],
				 status);
			return true;
		}
	return false;
}

int tp_wait_until_or_exit(bool (*cond)(void *arg), void *arg, const struct tp_watch *w,
			  unsigned ms, char *ret, size_t len)
{
	uint64_t deadline = mono_ns() + (uint64_t)ms * 1000000ull;
	const struct timespec pause = { .tv_nsec = 5 * 1000 * 1000 };

	snprintf(ret, len, "not within %u s", ms / 1000);
	for (;;) {
		if (cond(arg))
			return 0;
		/* the condition first: a process may reach it and then exit */
		if (tp_watch_exited(w, ret, len))
			return cond(arg) ? 0 : -ECHILD;
		if (mono_ns() >= deadline)
			return cond(arg) ? 0 : -ETIMEDOUT;
		(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &pause, NULL);
	}
}

void tp_assert_wait(const struct tp_watch *w, bool (*cond)(void *arg), void *arg, const char *what)
{
	char why[256];

	if (tp_wait_until_or_exit(cond, arg, w, TP_WAIT_HANG_MS, why, sizeof(why)) < 0)
		ck_abort_msg("%s: %s", what, why);
}

struct exit_arg {
	pid_t pid;
	int status;
};

static bool has_exited(void *arg)
{
	struct exit_arg *a = arg;

	return exited(a->pid, &a->status);
}

int tp_assert_exit(struct tp_watch *w, pid_t pid, const char *what)
{
	struct exit_arg a = { .pid = pid };

	if (w)
		tp_watch_drop(w, pid);
	tp_assert_wait(NULL, has_exited, &a, what);
	return tp_wait_exit(pid);
}

int tp_wait_exit(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	forget_spawned(pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool tp_event_enabled(const char *instance_dir, const char *event)
{
	_cleanup_free_ char *events = NULL;
	char path[512];

	snprintf(path, sizeof(path), "%s/set_event", instance_dir);
	return read_full_file_at(AT_FDCWD, path, 1 << 16, &events, NULL) == 0 &&
	       strstr(events, event) != NULL;
}

void tp_kill_spawned(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(spawned); i++) {
		if (spawned[i] > 0 && kill(spawned[i], SIGKILL) == 0)
			(void)waitpid(spawned[i], NULL, 0);
		spawned[i] = 0;
	}
}

pid_t tp_spawn_service(const char *bin, const char *sock, const char *cfg, const char *out,
		       bool quiet)
{
	return tp_spawn_service_ex(bin, sock, cfg, out, quiet, NULL);
}

pid_t tp_spawn_service_ex(const char *bin, const char *sock, const char *cfg, const char *out,
			  bool quiet, const char *extra_arg)
{
	char line[16] = "", wait_ms[16];
	int fds[2];
	pid_t pid;

	/*
	 * It starts the session without a data source still missing only after
	 * this: a daemon slow to register on a loaded machine is not a reason
	 * to record nothing (the test fails on its own if the daemon exits).
	 */
	snprintf(wait_ms, sizeof(wait_ms), "%u", TP_WAIT_HANG_MS);
	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		if (quiet) {
			int null = open("/dev/null", O_WRONLY);
			dup2(null, STDERR_FILENO);
		}
		close(fds[0]);
		execl(bin, bin, "-s", sock, "-c", cfg, "--txt", "-o", out, "-w", wait_ms, extra_arg, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (pid > 0)
		note_spawned(pid);
	/* it prints "ready" once listening */
	if (pid < 0 || read(fds[0], line, sizeof(line) - 1) <= 0 || !strstr(line, "ready")) {
		close(fds[0]);
		return -1;
	}
	close(fds[0]);
	return pid;
}

pid_t tp_spawn_daemon(const char *bin, const char *sock, const char *state_dir, int stderr_fd,
		      const char *extra_arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		setenv("PERFETTO_PRODUCER_SOCK_NAME", sock, 1);
		setenv("TRACED_PROBES_STATE_DIR", state_dir, 1);
		if (stderr_fd >= 0)
			dup2(stderr_fd, STDERR_FILENO);
		execl(bin, bin, "-l", "notice", extra_arg, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		note_spawned(pid);
	return pid;
}

/* One thread of ours: its name, wait channel, system call and kernel stack. */
static void dump_task(const char *task)
{
	static const char *const files[] = { "comm", "wchan", "syscall", "stack" };

	fprintf(stderr, "--- thread %s\n", task);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *data = NULL;
		char path[320];

		snprintf(path, sizeof(path), "/proc/self/task/%s/%s", task, files[i]);
		if (read_full_file_at(AT_FDCWD, path, 1 << 16, &data, NULL) == 0)
			fprintf(stderr, "%s: %s%s", files[i], data,
				data[0] && data[strlen(data) - 1] == '\n' ? "" : "\n");
	}
}

static void dump_user_stacks(void)
{
	char pid[16], c;
	int done[2];
	pid_t child;

	if (access("/usr/bin/gdb", X_OK) != 0 || pipe2(done, O_CLOEXEC) < 0)
		return;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	/*
	 * gdb as a grandchild, and its end seen as the pipe's: a gdb that is
	 * our own child never finished stopping the thread waiting for it.
	 */
	child = fork();
	if (child == 0) {
		if (fork() == 0) {
			close(done[0]);
			(void)fcntl(done[1], F_SETFD, 0);
			dup2(STDERR_FILENO, STDOUT_FILENO);
			execl("/usr/bin/gdb", "gdb", "-p", pid, "-batch", "-nx", "-ex", "thread apply all bt",
			      (char *)NULL);
		}
		_exit(0);
	}
	close(done[1]);
	if (child > 0) {
		(void)waitpid(child, NULL, 0);
		while (read(done[0], &c, 1) < 0 && errno == EINTR)
			;
	}
	close(done[0]);
}

static void *watchdog_main(void *arg)
{
	unsigned secs = (unsigned)(uintptr_t)arg;
	struct timespec d = { .tv_sec = secs };
	struct dirent *de;
	DIR *dir;

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &d, &d) == EINTR)
		;
	fprintf(stderr, "\n=== the suite is still running after %u s: hung; where each thread is:\n", secs);
	dir = opendir("/proc/self/task");
	while (dir && (de = readdir(dir)))
		if (de->d_name[0] != '.')
			dump_task(de->d_name);
	if (dir)
		closedir(dir);
	dump_user_stacks();
	tp_kill_spawned();
	remove_all();
	_exit(1);
}

/*
 * Without a fork Check enforces no timeout, so a hang waited for meson's
 * kill and left no word of where it was.  A thread armed for the whole
 * suite a little before meson's limit (CK_DEFAULT_TIMEOUT, which
 * tests/kernel/meson.build sets to it, times CK_TIMEOUT_MULTIPLIER) writes
 * every thread's kernel stack, wait channel and system call, and the user
 * stacks when gdb is there, then removes the suite's instances and fails
 * the suite.
 */
static void watchdog_start(void)
{
	const char *t = getenv("CK_DEFAULT_TIMEOUT"), *m = getenv("CK_TIMEOUT_MULTIPLIER");
	unsigned long secs = t ? strtoul(t, NULL, 10) : 0;
	sigset_t all, old;
	pthread_t th;

	if (secs < 20)
		return;
	/* Check's own scale, which tests/vm/matrix.sh sets beside meson's --timeout-multiplier */
	if (m && strtoul(m, NULL, 10) > 1)
		secs *= strtoul(m, NULL, 10);
	/* before meson's limit, with time left for gdb */
	secs = secs - MIN(secs / 10, 30ul);
	/* no signal of the suite's may land on this thread */
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&th, NULL, watchdog_main, (void *)(uintptr_t)secs) == 0)
		(void)pthread_detach(th);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int tp_run_suite(Suite *s, const char *tmpdir)
{
	SRunner *sr = srunner_create(s);
	char cmd[600];
	int failed;

	watchdog_start();
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (tmpdir && tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		(void)!system(cmd);
	}
	return failed ? 1 : 0;
}

int tp_fixture_setup(struct tp_fixture *f, const char *prefix)
{
	int r;

	memset(f, 0, sizeof(*f));
	snprintf(f->instance, sizeof(f->instance), "%s-%d", prefix, (int)getpid());
	r = tp_instance_create(f->instance, f->path, sizeof(f->path));
	if (r < 0)
		return r;
	f->top_before = tp_tracefs_snapshot(TP_TRACEFS);
	f->inst_before = tp_tracefs_snapshot(f->path);
	return f->top_before && f->inst_before ? 0 : -ENOMEM;
}

void tp_fixture_teardown(struct tp_fixture *f)
{
	/* a failed test may leave a daemon holding the instance open */
	tp_kill_spawned();
	tp_instance_remove(f->instance);
	free(f->top_before);
	free(f->inst_before);
	f->top_before = f->inst_before = NULL;
}

bool tp_fixture_restored(const struct tp_fixture *f)
{
	_cleanup_free_ char *top = tp_tracefs_snapshot(TP_TRACEFS);
	_cleanup_free_ char *inst = tp_tracefs_snapshot(f->path);

	return top && inst && strcmp(top, f->top_before) == 0 && strcmp(inst, f->inst_before) == 0;
}

/* The first line that differs between two snapshots, for a failure message. */
void tp_first_difference(const char *a, const char *b, char *ret, size_t len)
{
	while (*a && *a == *b) {
		const char *na = strchr(a, '\n'), *nb = strchr(b, '\n');

		if (!na || !nb || na - a != nb - b || strncmp(a, b, (size_t)(na - a)) != 0)
			break;
		a = na + 1;
		b = nb + 1;
	}
	snprintf(ret, len, "before \"%.*s\", after \"%.*s\"", (int)strcspn(a, "\n"), a,
		 (int)strcspn(b, "\n"), b);
}

void tp_fixture_assert_restored(const struct tp_fixture *f)
{
	_cleanup_free_ char *top = tp_tracefs_snapshot(TP_TRACEFS);
	_cleanup_free_ char *inst = tp_tracefs_snapshot(f->path);
	char diff[600];

	ck_assert_ptr_nonnull(top);
	ck_assert_ptr_nonnull(inst);
	if (strcmp(top, f->top_before) != 0) {
		tp_first_difference(f->top_before, top, diff, sizeof(diff));
		ck_abort_msg("top-level tracefs not restored: %s", diff);
	}
	if (strcmp(inst, f->inst_before) != 0) {
		tp_first_difference(f->inst_before, inst, diff, sizeof(diff));
		ck_abort_msg("instance %s not restored: %s", f->instance, diff);
	}
}

static bool tracing_on_in(const char *dir)
{
	_cleanup_free_ char *on = NULL;
	char path[512];

	snprintf(path, sizeof(path), "%s/tracing_on", dir);
	return read_full_file_at(AT_FDCWD, path, 64, &on, NULL) == 0 && on[0] == '1';
}

bool tp_is_recording(void *instance_dir)
{
	const char *dir = instance_dir;

	return tp_event_enabled(dir, "sched_switch") && tracing_on_in(dir);
}

bool tp_wait_recording(const char *instance_dir, unsigned ms)
{
	return tp_wait_until(tp_is_recording, (void *)instance_dir, ms);
}

uint64_t tp_context_switches(void)
{
	_cleanup_free_ char *stat = NULL;
	const char *line;

	if (read_full_file_at(AT_FDCWD, "/proc/stat", 1 << 20, &stat, NULL) < 0)
		return 0;
	line = strstr(stat, "\nctxt ");
	return line ? strtoull(line + 6, NULL, 10) : 0;
}

static bool not_recording(void *arg)
{
	return !tp_is_recording(arg);
}

static void *deferred_main(void *arg)
{
	struct tp_deferred_workload *d = arg;

	d->r = -ETIMEDOUT;
	if (!tp_wait_recording(d->instance_dir, 60000))
		return NULL;
	d->ctxt_start = tp_context_switches();
	d->r = tp_workload_start(d->comm, d->pairs, TP_WORKLOAD_UNTIL_STOPPED, &d->w);
	if (d->r < 0)
		return NULL;
	/* the window the kernel's counter covers ends with the recording */
	if (tp_wait_until(not_recording, d->instance_dir, 120000))
		d->ctxt_end = tp_context_switches();
	return NULL;
}

int tp_workload_start_deferred(struct tp_deferred_workload *d, const char *instance_dir,
			       const char *comm, unsigned pairs)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->instance_dir, sizeof(d->instance_dir), "%s", instance_dir);
	snprintf(d->comm, sizeof(d->comm), "%s", comm);
	d->pairs = pairs;
	return -pthread_create(&d->thread, NULL, deferred_main, d);
}

int tp_workload_finish_deferred(struct tp_deferred_workload *d)
{
	(void)pthread_join(d->thread, NULL);
	if (d->r == 0)
		(void)tp_workload_stop(&d->w);
	return d->r;
}
