/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading /proc (or a fixture tree laid out like it) relative to one root
 * directory fd.  Every buffer is owned by the root and reused: a scan of
 * thousands of tasks allocates nothing once the buffers have grown to the
 * largest file seen.  Directories are listed with getdents64 into a buffer
 * we own, so no DIR stream is allocated per /proc/<pid>/task either.
 *
 * Tasks exit while we read them; ENOENT (at open) and ESRCH (at read) both
 * come back as -ENOENT so the callers can count and skip them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/procfs/procfs_internal.h"
#include "util/util.h"

#define PROCFS_DIR_BUF (32u * 1024u)

static void buf_init(struct procfs_buf *b, size_t max)
{
	*b = (struct procfs_buf){ .max = max };
}

static void buf_done(struct procfs_buf *b)
{
	free(b->data);
	*b = (struct procfs_buf){ .max = b->max };
}

/* Room for at least one more byte (plus the NUL we keep at the end). */
static int buf_grow(struct procfs_buf *b)
{
	size_t ncap = b->cap ? b->cap * 2 : 4096;
	char *n;

	if (ncap > b->max + 1)
		ncap = b->max + 1;
	if (ncap <= b->cap)
		return -EFBIG;
	n = realloc(b->data, ncap);
	if (!n)
		return -ENOMEM;
	b->data = n;
	b->cap = ncap;
	return 0;
}

static void dir_init(struct procfs_dir *d)
{
	*d = (struct procfs_dir){ .fd = -EBADF };
}

int procfs_root_init(struct procfs_root *r, const char *path)
{
	int fd;

	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;

	*r = (struct procfs_root){ .fd = fd };
	buf_init(&r->status, PROCFS_STATUS_MAX);
	buf_init(&r->status_tgid, PROCFS_STATUS_MAX);
	buf_init(&r->stat, PROCFS_STAT_MAX);
	buf_init(&r->cmdline, PROCFS_CMDLINE_MAX);
	buf_init(&r->small, PROCFS_SMALL_MAX);
	buf_init(&r->smaps, PROCFS_SMAPS_MAX);
	dir_init(&r->top);
	dir_init(&r->task);
	return 0;
}

void procfs_root_done(struct procfs_root *r)
{
	procfs_dir_close(&r->top);
	procfs_dir_close(&r->task);
	free(r->top.buf);
	free(r->task.buf);
	buf_done(&r->status);
	buf_done(&r->status_tgid);
	buf_done(&r->stat);
	buf_done(&r->cmdline);
	buf_done(&r->small);
	buf_done(&r->smaps);
	if (r->fd >= 0)
		(void)close(r->fd);
	r->fd = -EBADF;
}

static int gone_errno(int e)
{
	return e == ENOENT || e == ESRCH ? -ENOENT : -e;
}

int procfs_read_pid_file(struct procfs_root *r, int32_t pid, int32_t tid, const char *name,
			 struct procfs_buf *b)
{
	_cleanup_close_ int fd = -EBADF;
	char path[64];
	int n;

	if (pid <= 0)
		return -EINVAL;
	if (tid > 0)
		n = snprintf(path, sizeof(path), "%d/task/%d/%s", pid, tid, name);
	else
		n = snprintf(path, sizeof(path), "%d/%s", pid, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;

	b->len = 0;
	fd = openat(r->fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return gone_errno(errno);

	for (;;) {
		ssize_t k;

		if (b->len + 1 >= b->cap) {
			int e = buf_grow(b);

			if (e == -EFBIG)
				break;          /* at b->max: see below */
			if (e < 0)
				return e;
		}
		k = read(fd, b->data + b->len, b->cap - 1 - b->len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return gone_errno(errno);
		}
		if (k == 0) {
			b->data[b->len] = '\0';
			return 0;
		}
		b->len += (size_t)k;
	}

	/* Full at b->max: is there more?  Then the content was cut. */
	b->data[b->len] = '\0';
	for (;;) {
		char probe;
		ssize_t k = read(fd, &probe, 1);

		if (k < 0 && errno == EINTR)
			continue;
		return k > 0 ? 1 : 0;
	}
}

static int dir_open_at(struct procfs_root *r, struct procfs_dir *d, const char *path)
{
	procfs_dir_close(d);
	if (!d->buf) {
		d->buf = malloc(PROCFS_DIR_BUF);
		if (!d->buf)
			return -ENOMEM;
		d->cap = PROCFS_DIR_BUF;
	}
	d->fd = openat(r->fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0) {
		int e = errno;

		d->fd = -EBADF;
		return gone_errno(e);
	}
	d->len = d->pos = 0;
	return 0;
}

int procfs_dir_open_top(struct procfs_root *r)
{
	return dir_open_at(r, &r->top, ".");
}

int procfs_dir_open_task(struct procfs_root *r, int32_t pid)
{
	char path[32];

	(void)snprintf(path, sizeof(path), "%d/task", pid);
	return dir_open_at(r, &r->task, path);
}

int32_t procfs_dir_next(struct procfs_dir *d)
{
	if (d->fd < 0)
		return 0;
	for (;;) {
		const struct dirent64 *de;
		int32_t pid;

		if (d->pos >= d->len) {
			ssize_t n = getdents64(d->fd, d->buf, d->cap);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				return gone_errno(errno);
			}
			if (n == 0)
				return 0;
			d->len = (size_t)n;
			d->pos = 0;
		}
		de = (const struct dirent64 *)(d->buf + d->pos);
		if (de->d_reclen == 0)
			return -EIO;
		d->pos += de->d_reclen;
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		pid = procfs_parse_pid(de->d_name);
		if (pid > 0)
			return pid;
	}
}

void procfs_dir_close(struct procfs_dir *d)
{
	if (d->fd >= 0)
		(void)close(d->fd);
	d->fd = -EBADF;
	d->len = d->pos = 0;
}
