/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raw page reader of one CPU's ring buffer (per_cpu/cpuN/trace_pipe_raw).
 *
 * We open the file ourselves (O_CLOEXEC, which tracefs_cpu_open() in
 * libtracefs 1.6.4 does not set) and hand the fd to tracefs_cpu_alloc_fd().
 * libtracefs 1.6.4 turns EAGAIN into "0 bytes, errno 0"; a partly filled
 * page comes back as a whole zero-padded page, its events consumed.  The
 * page header's commit word (its size comes from events/header_page, via
 * the format table) tells how full a page was, which is how we see that we
 * caught up with the writer.
 *
 * Where the kernel can map the buffer (ftrace_cpu_map.c), the pages come
 * from the mapping instead and read() is not called; the fd stays open for
 * the mapping's ioctl and for poll().
 */

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <tracefs.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/ds/ftrace_ds_internal.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "util/util.h"


struct ftrace_cpu {
	unsigned cpu;
	size_t page_size;
	struct tracefs_cpu *tcpu;
	unsigned commit_offset;
	unsigned commit_size;
	size_t pages_this_pass;
	int fd;                 /* borrowed from tcpu, for poll wake-ups */
	struct ftrace_cpu_map *map;     /* NULL: read() */
};

int ftrace_cpu_open(struct ftrace_tracefs *t, unsigned cpu, size_t page_size, unsigned commit_size,
		    struct ftrace_cpu **ret)
{
	_cleanup_close_ int fd = -EBADF;
	struct ftrace_cpu *c;
	char path[64];

	if (page_size < 64 || page_size > (1u << 20) || (commit_size != 4 && commit_size != 8))
		return -EINVAL;
	(void)snprintf(path, sizeof(path), "per_cpu/cpu%u/trace_pipe_raw", cpu);
	fd = openat(ftrace_tracefs_dirfd(t), path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cpu = cpu;
	c->page_size = page_size;
	/* The page header is a u64 timestamp followed by the commit word. */
	c->commit_offset = 8;
	c->commit_size = commit_size;
	c->tcpu = tracefs_cpu_alloc_fd(fd, (int)page_size, /* nonblock= */ true);
	if (!c->tcpu) {
		int r = negative_errno();

		free(c);
		return r;
	}
	c->fd = TAKE_FD(fd); /* owned by tcpu now: tracefs_cpu_close() closes it */
	/* Any refusal leaves this CPU on read(): the mapping is only faster. */
	if (ftrace_cpu_map_enabled())
		(void)ftrace_cpu_map_open(c->fd, page_size, commit_size, &c->map);
	*ret = c;
	return 0;
}

int ftrace_cpu_fd(const struct ftrace_cpu *c)
{
	return c ? c->fd : -EBADF;
}

struct ftrace_cpu *ftrace_cpu_free(struct ftrace_cpu *c)
{
	if (!c)
		return NULL;
	/* Unmapped before the fd closes, though either order is fine. */
	ftrace_cpu_map_free(c->map);
	if (c->tcpu)
		tracefs_cpu_close(c->tcpu);
	free(c);
	return NULL;
}

unsigned ftrace_cpu_index(const struct ftrace_cpu *c)
{
	return c->cpu;
}

size_t ftrace_cpu_page_size(const struct ftrace_cpu *c)
{
	return c->page_size;
}

void ftrace_cpu_begin_pass(struct ftrace_cpu *c)
{
	c->pages_this_pass = 0;
}

static size_t page_data_length(const struct ftrace_cpu *c, const uint8_t *page)
{
	uint64_t commit = 0;

	if (c->commit_size == 4) {
		uint32_t v;

		memcpy(&v, page + c->commit_offset, 4);
		commit = v;
	} else {
		memcpy(&commit, page + c->commit_offset, 8);
	}
	return (size_t)(commit & FTRACE_PAGE_COMMIT_MASK);
}

bool ftrace_cpu_mapped(const struct ftrace_cpu *c, struct ftrace_cpu_map_counters *ret)
{
	if (!c || !c->map)
		return false;
	if (ret)
		ftrace_cpu_map_counters(c->map, ret);
	return true;
}

static int read_mapped(struct ftrace_cpu *c, void *buf, const uint8_t **ret_page,
		       enum ftrace_cpu_read_status *ret_status, int *ret_parse_status)
{
	bool caught_up = false;
	int k;

	k = ftrace_cpu_map_next(c->map, buf, ret_page, &caught_up);
	if (k < 0) {
		/* The buffer going away under us reads as empty, as with read(). */
		if (k == -ENODEV || k == -EBUSY)
			return 0;
		*ret_parse_status = FTRACE_STATUS_UNEXPECTED_READ_ERROR;
		return k;
	}
	if (k == 0)
		return 0;
	c->pages_this_pass++;
	/* The writer's own page ends the pass for this CPU, as a short read() does. */
	if (!caught_up)
		*ret_status = FTRACE_CPU_MORE;
	return 1;
}

int ftrace_cpu_read_page(struct ftrace_cpu *c, void *buf, const uint8_t **ret_page,
			 enum ftrace_cpu_read_status *ret_status, int *ret_parse_status)
{
	size_t header = c->commit_offset + c->commit_size;
	uint8_t *page = buf;
	int k;

	*ret_status = FTRACE_CPU_EMPTY;
	if (c->map)
		return read_mapped(c, buf, ret_page, ret_status, ret_parse_status);
	*ret_page = page;
	errno = 0;
	k = tracefs_cpu_read(c->tcpu, page, /* nonblock= */ true);
	if (k == 0 || (k < 0 && errno == EAGAIN))
		return 0;
	if (k < 0) {
		/* Buffer being resized, CPU going away: stop quietly as Perfetto does. */
		if (errno == ENOMEM || errno == EBUSY || errno == ENODEV)
			return 0;
		*ret_parse_status = FTRACE_STATUS_UNEXPECTED_READ_ERROR;
		return negative_errno();
	}
	if ((size_t)k != c->page_size) {
		/* The events in it are consumed and lost: say so, skip the page. */
		*ret_parse_status = FTRACE_STATUS_PARTIAL_PAGE_READ;
		return -EIO;
	}
	c->pages_this_pass++;
	/*
	 * A page under half full means the writer had just started it: we
	 * have caught up.  Reading on would return a trickle of tiny pages
	 * on a busy CPU.  The first page of a pass does not count, it may be
	 * the remainder of the last one.
	 */
	if (!(c->pages_this_pass > 1 && page_data_length(c, page) < (c->page_size - header) / 2))
		*ret_status = FTRACE_CPU_MORE;
	return 1;
}
