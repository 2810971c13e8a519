/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * ftrace_mapped - the reader side of a per-CPU ring buffer mapped into our
 * address space (Linux 6.10+, trace_pipe_raw's mmap), without the syscalls
 * (ftrace_mapped.c).  It decides which bytes of the mapping are the next
 * page to parse, and hands them over in place when the sub-buffer is
 * complete, or as the page read() would have returned otherwise, so that
 * the parser sees what it would have seen through read().  The caller maps
 * the buffer and supplies the "swap the reader page" call (the ioctl on a
 * live buffer, a simulated ring in tests and replays).
 *
 * Kernel facts (include/uapi/linux/trace_mmap.h, kernel/trace/ring_buffer.c):
 * the mapping is the meta page, then nr_subbufs sub-buffers of subbuf_size
 * bytes (header included), in the order of their ids.  The reader owns the
 * sub-buffer reader.id; TRACE_MMAP_IOCTL_GET_READER marks all its committed
 * bytes read and, if it was read to the end, swaps in the next one.  The
 * writer may still be committing into the reader sub-buffer (it is the
 * writer's page when the ring was nearly empty); its commit word grows
 * then, and everything up to it is valid.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* struct trace_buffer_meta (uapi), laid out as the kernel writes it. */
struct ftrace_rb_meta {
	uint32_t meta_page_size;
	uint32_t meta_struct_len;
	uint32_t subbuf_size;
	uint32_t nr_subbufs;
	struct {
		uint64_t lost_events;
		uint32_t id;
		uint32_t read;
	} reader;
	uint64_t flags;
	uint64_t entries;
	uint64_t overrun;
	uint64_t read;
	uint64_t reserved1;
	uint64_t reserved2;
};

/* TRACE_MMAP_IOCTL_GET_READER: _IO('R', 0x20). */
#define FTRACE_RB_IOCTL_GET_READER 0x5220u

/* Smallest ring-buffer event (header + one word): the writer cannot put
 * anything in a sub-buffer with less room left (RB_EVNT_MIN_SIZE). */
#define FTRACE_RB_MIN_EVENT 8u

struct ftrace_mapped {
	const struct ftrace_rb_meta *meta;
	const uint8_t *subbufs;         /* sub-buffer 0 */
	size_t page_size;               /* subbuf_size: header + data */
	uint32_t nr_subbufs;
	unsigned commit_size;
	unsigned header_size;           /* 8 + commit_size */
	/* Swap the reader sub-buffer (TRACE_MMAP_IOCTL_GET_READER); 0 or -errno. */
	int (*get_reader)(void *ctx);
	void *ctx;
	/* Where we are: bytes of reader sub-buffer @id already handed over, and
	 * the kernel's read timestamp at that offset. */
	uint32_t id;
	uint32_t pos;
	uint64_t pos_ts;
	uint32_t kread;                 /* reader.read after our last swap call: we hand
					 * over nothing past it */
	/* Counters, for tests and benchmarks. */
	uint64_t in_place, copied, swaps;
};

/**
 * ftrace_mapped_init - set up @m over a mapping: @meta (the meta page) and
 * @subbufs (@subbufs_len bytes of sub-buffers), and start where the
 * kernel's reader is (a reader page partly read by an earlier reader is
 * taken up where it stopped).
 * @page_size: the ring buffer's page size; must equal meta->subbuf_size.
 * @commit_size: size of the page header's commit word (4 or 8).
 * Returns: 0, or -EINVAL for a meta page that does not describe this mapping.
 */
int ftrace_mapped_init(struct ftrace_mapped *m, const void *meta, const void *subbufs,
		       size_t subbufs_len, size_t page_size, unsigned commit_size,
		       int (*get_reader)(void *ctx), void *ctx);

/**
 * ftrace_mapped_next - the next page of data, no allocation.  A complete
 * sub-buffer not read before is handed over in place (*@ret_page points
 * into the mapping, valid until the next call); otherwise the rest of the
 * reader sub-buffer is copied into @buf (page_size bytes) with the header
 * read() would have given it: the kernel's read timestamp at that offset,
 * the bytes copied as commit, zeros after.
 * @ret_caught_up: set when the page is the writer's (more may come later).
 * Returns: 1 with a page, 0 when the buffer is empty, -EIO for a sub-buffer
 * the kernel could not have written, or the get_reader error.
 */
int ftrace_mapped_next(struct ftrace_mapped *m, uint8_t *buf, const uint8_t **ret_page,
		       bool *ret_caught_up);

/**
 * ftrace_mapped_read_stamp - the kernel's read timestamp after the records
 * in @data[@from, @to), starting from @ts (rb_update_read_stamp(): padding
 * adds nothing, time extends add, absolute stamps replace).
 */
uint64_t ftrace_mapped_read_stamp(const uint8_t *data, uint32_t from, uint32_t to, uint64_t ts);
