/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mapped per-CPU reader: trace_pipe_raw mapped read-only (Linux 6.10+),
 * the reader sub-buffer swapped with TRACE_MMAP_IOCTL_GET_READER, the pages
 * parsed where they lie (ftrace_mapped.c decides which bytes).  No copy to
 * user space, no per-page read().
 *
 * Off unless TRACED_PROBES_FTRACE_MMAP=1 is in the environment: on Linux
 * 6.18 the swap call advances the kernel's reader over every event of the
 * new sub-buffer one by one (ring_buffer_map_get_reader() ->
 * rb_advance_reader()), which costs more per event (about 45 ns measured
 * on the 2-CPU test VM) than read()'s whole-page swap and 4 KiB copy (about
 * 10 ns per event): the copy we save is cheaper than the walk we pay.
 * Kept for kernels where that changes, and for comparisons (bench_live).
 *
 * Older kernels have no mmap on trace_pipe_raw (ENODEV): we learn that on
 * the first try and never ask again.  A buffer that refuses the mapping
 * (an instance with a snapshot allocated: EBUSY) is read with read(), per
 * CPU.
 *
 * The mapping is the kernel's own ring-buffer pages: it counts as
 * file-backed shared memory of the process (RssFile / Shared_Clean), not
 * as anything we allocated.  It goes away with the process, however that
 * ends: the kernel unmaps it at exit, and the buffer is an ordinary one
 * again (read(), resizes) once no mapping is left.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/ds/ftrace_ds_internal.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "util/util.h"

#define MMAP_ENV "TRACED_PROBES_FTRACE_MMAP"

struct ftrace_cpu_map {
	int fd;                 /* borrowed */
	void *meta;
	size_t meta_len;
	void *data;
	size_t data_len;
	struct ftrace_mapped m;
};

/* Once per process: 1 the kernel maps ring buffers, 0 not, -1 not known yet. */
static int mmap_supported = -1;

static int get_reader(void *ctx)
{
	struct ftrace_cpu_map *map = ctx;

	if (ioctl(map->fd, FTRACE_RB_IOCTL_GET_READER) < 0)
		return negative_errno();
	return 0;
}

bool ftrace_cpu_map_enabled(void)
{
	const char *e;

	if (mmap_supported == 0)
		return false;
	e = getenv(MMAP_ENV);
	return e && strcmp(e, "1") == 0;
}

struct ftrace_cpu_map *ftrace_cpu_map_free(struct ftrace_cpu_map *map)
{
	if (!map)
		return NULL;
	if (map->data && map->data != MAP_FAILED)
		(void)munmap(map->data, map->data_len);
	if (map->meta && map->meta != MAP_FAILED)
		(void)munmap(map->meta, map->meta_len);
	free(map);
	return NULL;
}

int ftrace_cpu_map_open(int fd, size_t page_size, unsigned commit_size, struct ftrace_cpu_map **ret)
{
	_cleanup_free_ struct ftrace_cpu_map *map = NULL;
	const struct ftrace_rb_meta *meta;
	long sys_page = sysconf(_SC_PAGESIZE);
	int r;

	if (!ftrace_cpu_map_enabled())
		return -EOPNOTSUPP;
	if (sys_page <= 0)
		return -EINVAL;
	map = calloc(1, sizeof(*map));
	if (!map)
		return -ENOMEM;
	map->fd = fd;
	map->meta_len = (size_t)sys_page;
	map->meta = mmap(NULL, map->meta_len, PROT_READ, MAP_SHARED, fd, 0);
	if (map->meta == MAP_FAILED) {
		r = negative_errno();
		map->meta = NULL;
		/* No mmap on trace_pipe_raw at all: a kernel before 6.10. */
		if (r == -ENODEV)
			mmap_supported = 0;
		return r;
	}
	mmap_supported = 1;
	meta = map->meta;
	if (meta->meta_page_size < (uint32_t)sys_page || meta->meta_page_size % (uint32_t)sys_page ||
	    meta->subbuf_size != page_size || meta->nr_subbufs == 0) {
		r = -EINVAL;
		goto fail;
	}
	if (meta->meta_page_size != map->meta_len) {
		/*
		 * The data starts after the whole meta area: map that instead.
		 * Its size is read before the first page goes (with 4 KiB
		 * sub-buffers the area is one page and this never ran; larger
		 * ones make it longer).
		 */
		size_t len = meta->meta_page_size;

		(void)munmap(map->meta, map->meta_len);
		map->meta_len = len;
		map->meta = mmap(NULL, map->meta_len, PROT_READ, MAP_SHARED, fd, 0);
		if (map->meta == MAP_FAILED) {
			r = negative_errno();
			map->meta = NULL;
			goto fail;
		}
		meta = map->meta;
	}
	map->data_len = (size_t)meta->subbuf_size * meta->nr_subbufs;
	map->data = mmap(NULL, map->data_len, PROT_READ, MAP_SHARED, fd, (off_t)map->meta_len);
	if (map->data == MAP_FAILED) {
		r = negative_errno();
		map->data = NULL;
		goto fail;
	}
	r = ftrace_mapped_init(&map->m, map->meta, map->data, map->data_len, page_size, commit_size,
			       get_reader, map);
	if (r < 0)
		goto fail;
	*ret = TAKE_PTR(map);
	return 0;

fail:
	ftrace_cpu_map_free(TAKE_PTR(map));
	return r;
}

int ftrace_cpu_map_next(struct ftrace_cpu_map *map, uint8_t *buf, const uint8_t **ret_page,
			bool *ret_caught_up)
{
	return ftrace_mapped_next(&map->m, buf, ret_page, ret_caught_up);
}

void ftrace_cpu_map_counters(const struct ftrace_cpu_map *map, struct ftrace_cpu_map_counters *ret)
{
	const struct ftrace_rb_meta *meta = map->m.meta;

	*ret = (struct ftrace_cpu_map_counters){
		.entries = __atomic_load_n(&meta->entries, __ATOMIC_RELAXED),
		.overrun = __atomic_load_n(&meta->overrun, __ATOMIC_RELAXED),
		.read = __atomic_load_n(&meta->read, __ATOMIC_RELAXED),
		.lost_events = __atomic_load_n(&meta->reader.lost_events, __ATOMIC_RELAXED),
		.in_place = map->m.in_place,
		.copied = map->m.copied,
		.swaps = map->m.swaps,
		.mapped_bytes = map->meta_len + map->data_len,
	};
}
