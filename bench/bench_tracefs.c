/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_tracefs - the few tracefs operations the benchmarks need, on plain
 * paths.  The benchmarks set up their own instance by hand instead of
 * through probes/ftrace so that the control side's cost stays out of the
 * floor and kbuffer figures.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/util.h"

int bench_tracefs_ready(void)
{
	if (geteuid() != 0)
		return -EPERM;
	if (access(BENCH_TRACEFS "/per_cpu/cpu0/trace_pipe_raw", F_OK) < 0)
		return -ENOENT;
	return 0;
}

int bench_instance_create(const char *name, char *ret_dir, size_t len)
{
	int n = snprintf(ret_dir, len, BENCH_TRACEFS "/instances/%s", name);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (mkdir(ret_dir, 0750) < 0)
		return negative_errno();
	return 0;
}

int bench_instance_remove(const char *name)
{
	char dir[PATH_MAX];
	int r = 0;

	(void)snprintf(dir, sizeof(dir), BENCH_TRACEFS "/instances/%s", name);
	if (access(dir, F_OK) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	(void)bench_file_write(dir, "events/enable", "0", false);
	(void)bench_file_write(dir, "tracing_on", "0", false);
	/* A reader that just exited may still pin it for a moment. */
	for (int i = 0; i < 200; i++) {
		r = rmdir(dir) < 0 ? negative_errno() : 0;
		if (r != -EBUSY)
			break;
		bench_sleep_ns(10 * 1000 * 1000);
	}
	return r == -ENOENT ? 0 : r;
}

int bench_file_write(const char *dir, const char *file, const char *value, bool append)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -EBADF;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC | (append ? O_APPEND : O_TRUNC));
	if (fd < 0)
		return negative_errno();
	return write_all(fd, value, strlen(value));
}

int bench_file_read_alloc(const char *dir, const char *file, char **ret, size_t *ret_len)
{
	_cleanup_close_ int dfd = -EBADF;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	return read_full_file_at(dfd, file, 16u << 20, ret, ret_len);
}

int bench_file_read(const char *dir, const char *file, char *buf, size_t len)
{
	_cleanup_free_ char *s = NULL;
	size_t n;
	int r;

	if (len == 0)
		return -EINVAL;
	r = bench_file_read_alloc(dir, file, &s, &n);
	if (r < 0)
		return r;
	n = MIN(n, len - 1);
	memcpy(buf, s, n);
	buf[n] = 0;
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = 0;
	return 0;
}

int bench_cpu_stat(const char *dir, unsigned cpu, const char *key, uint64_t *ret)
{
	_cleanup_free_ char *s = NULL;
	char file[64];
	size_t klen = strlen(key), n;
	int r;

	(void)snprintf(file, sizeof(file), "per_cpu/cpu%u/stats", cpu);
	r = bench_file_read_alloc(dir, file, &s, &n);
	if (r < 0)
		return r;
	for (char *line = s; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		unsigned long long v;

		if (strncmp(line, key, klen) != 0 || line[klen] != ':')
			continue;
		if (sscanf(line + klen + 1, "%llu", &v) != 1)
			return -EBADMSG;
		*ret = v;
		return 0;
	}
	return -ENOENT;
}

unsigned bench_ncpus(const char *dir)
{
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	unsigned n = 0;

	for (long i = 0; i < MAX(conf, 1L); i++) {
		char path[PATH_MAX];

		(void)snprintf(path, sizeof(path), "%s/per_cpu/cpu%ld", dir, i);
		if (access(path, F_OK) == 0)
			n = (unsigned)i + 1;
	}
	return n;
}

unsigned bench_commit_size(const char *header_page)
{
	const char *p = header_page ? strstr(header_page, "commit;") : NULL;
	unsigned v;

	/* "field: local_t commit;	offset:8;	size:8;	signed:1;" */
	p = p ? strstr(p, "size:") : NULL;
	if (!p || sscanf(p, "size:%u", &v) != 1 || (v != 4 && v != 8))
		return 8;
	return v;
}
