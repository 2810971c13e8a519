/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_spawn - run a tracer or the workload as a child and account for it
 * the way time(1) would: wait4()'s rusage covers the child and every
 * descendant it reaped (trace-cmd's per-CPU recorders included).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/util.h"

int bench_spawn(char *const argv[], bool want_stdin, struct bench_child *ret)
{
	int out[2] = { -EBADF, -EBADF }, in[2] = { -EBADF, -EBADF };
	uint64_t start;
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) < 0)
		return negative_errno();
	if (want_stdin && pipe2(in, O_CLOEXEC) < 0) {
		int r = negative_errno();

		(void)close(out[0]);
		(void)close(out[1]);
		return r;
	}
	start = bench_mono_ns();
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();

		(void)close(out[0]);
		(void)close(out[1]);
		if (want_stdin) {
			(void)close(in[0]);
			(void)close(in[1]);
		}
		return r;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		(void)setpgid(0, 0);
		if (dup2(want_stdin ? in[0] : null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	/* Both sides, so a signal cannot race the child's own setpgid(). */
	(void)setpgid(pid, pid);
	(void)close(out[1]);
	if (want_stdin)
		(void)close(in[0]);
	*ret = (struct bench_child){ .pid = pid, .in_fd = in[1], .out_fd = out[0], .start_ns = start };
	return 0;
}

bool bench_child_exited(const struct bench_child *c)
{
	siginfo_t si = {};

	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return true;
	return si.si_pid == c->pid;
}

void bench_child_signal(const struct bench_child *c, int sig)
{
	if (c->pid > 0)
		(void)kill(-c->pid, sig);
}

/* A zombie keeps its main thread's schedstat: on-CPU time in ns, first field. */
uint64_t bench_schedstat_ns(const char *path)
{
	char buf[128] = "";
	unsigned long long ns = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%llu", &ns) != 1)
		ns = 0;
	fclose(f);
	return ns;
}

static uint64_t main_thread_ns(pid_t pid)
{
	char path[64];
	siginfo_t si = {};

	while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	(void)snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	return bench_schedstat_ns(path);
}

int bench_child_finish(struct bench_child *c, char **ret_out, int *ret_status, struct rusage *ret_ru,
		       uint64_t *ret_main_ns)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	int r = 0;

	if (c->in_fd >= 0) {
		(void)close(c->in_fd);
		c->in_fd = -EBADF;
	}
	while (c->out_fd >= 0) {
		ssize_t k;

		if (cap - len < 4096) {
			char *b = realloc(buf, cap + 65536);

			if (!b) {
				r = -ENOMEM;
				break;
			}
			buf = b;
			cap += 65536;
		}
		k = read(c->out_fd, buf + len, cap - len - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	if (buf)
		buf[len] = 0;
	if (c->out_fd >= 0) {
		(void)close(c->out_fd);
		c->out_fd = -EBADF;
	}
	if (ret_main_ns)
		*ret_main_ns = main_thread_ns(c->pid);
	for (;;) {
		pid_t p = wait4(c->pid, ret_status, 0, ret_ru);

		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0 && r == 0)
			r = negative_errno();
		break;
	}
	c->pid = 0;
	if (ret_out)
		*ret_out = buf ? TAKE_PTR(buf) : strdup("");
	return r;
}

int bench_workload_run(unsigned pairs, uint64_t duration_ns, double *ret_rate)
{
	int fds[2], status;
	char buf[64] = "";
	unsigned long long trips = 0, ns = 0;
	ssize_t k;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return negative_errno();
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();

		(void)close(fds[0]);
		(void)close(fds[1]);
		return r;
	}
	if (pid == 0) {
		struct bench_workload *w = NULL;
		uint64_t t = 0, d = 0;
		int n;

		if (bench_workload_start(pairs, &w) < 0)
			_exit(1);
		bench_sleep_ns(duration_ns);
		bench_workload_stop(w, &t, &d);
		n = snprintf(buf, sizeof(buf), "%llu %llu\n", (unsigned long long)t,
			     (unsigned long long)d);
		_exit(write(fds[1], buf, (size_t)n) == n ? 0 : 1);
	}
	(void)close(fds[1]);
	do
		k = read(fds[0], buf, sizeof(buf) - 1);
	while (k < 0 && errno == EINTR);
	(void)close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (k <= 0)
		return -EIO;
	buf[k] = 0;
	if (sscanf(buf, "%llu %llu", &trips, &ns) != 2 || ns == 0)
		return -EBADMSG;
	*ret_rate = (double)trips * 1e9 / (double)ns;
	return 0;
}
