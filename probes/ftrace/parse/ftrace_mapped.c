/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_mapped - which bytes of a mapped per-CPU ring buffer to parse
 * next (see ftrace_parse.h for the kernel's side of the contract).
 *
 * The parser must see exactly the pages read() would have returned.  For a
 * sub-buffer the writer has left, read() swaps the page out whole, which is
 * the sub-buffer itself: we parse it where it lies.  When the writer is
 * still on the reader sub-buffer, read() copies what is committed from the
 * kernel's read offset and stamps the copy with the kernel's read timestamp
 * at that offset; we do the same copy (the only copy of this reader, and
 * only for the last page of a pass).  The one difference the parser cannot
 * see: a sub-buffer the writer left early keeps its trailing padding record
 * where read() cuts the commit before it.
 */
#include <errno.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ftrace/parse/ftrace_parse_internal.h"

/* The top five bits of an absolute stamp are not in the record (TS_MSB). */
#define RB_TS_MSB (0xf8ull << 56)

static uint32_t load_commit(const uint8_t *page)
{
	/* The kernel publishes the commit after the data (smp_wmb()); the low
	 * 32 bits of the little-endian word hold the size and flags. */
	return __atomic_load_n((const uint32_t *)(page + 8), __ATOMIC_ACQUIRE);
}

static uint32_t load_u32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

uint64_t ftrace_mapped_read_stamp(const uint8_t *data, uint32_t from, uint32_t to, uint64_t ts)
{
	uint32_t off = from;

	while (to - off >= 4 && off < to) {
		uint32_t hdr = ftrace_rd32(data + off);
		uint32_t type_len = hdr & 0x1f, delta = hdr >> 5, len;

		if (type_len >= 1 && type_len <= 28) {
			ts += delta;
			len = 4 + 4 * type_len;
		} else if (to - off < 8) {
			break;
		} else if (type_len == 0) {
			ts += delta;
			len = 4 + ftrace_rd32(data + off + 4);
		} else if (type_len == FTRACE_RB_TYPE_PADDING) {
			/* rb_update_read_stamp() ignores a padding's delta; a null
			 * padding runs to the end of the page. */
			if (delta == 0)
				break;
			len = 4 + ftrace_rd32(data + off + 4);
		} else {
			uint64_t v = ((uint64_t)ftrace_rd32(data + off + 4) << FTRACE_RB_TS_SHIFT) + delta;

			if (type_len == FTRACE_RB_TYPE_TIME_EXTEND) {
				ts += v;
			} else {
				/* rb_fix_abs_ts(): the missing top bits come from
				 * the previous stamp, carried over a wrap. */
				if (ts & RB_TS_MSB) {
					uint64_t prev = ts;

					v |= prev & RB_TS_MSB;
					if (v < prev)
						v += 1ull << 59;
				}
				ts = v;
			}
			len = 8;
		}
		if (len < 4 || len > to - off)
			break;
		off += len;
	}
	return ts;
}

int ftrace_mapped_init(struct ftrace_mapped *m, const void *meta, const void *subbufs,
		       size_t subbufs_len, size_t page_size, unsigned commit_size,
		       int (*get_reader)(void *ctx), void *ctx)
{
	const struct ftrace_rb_meta *mt = meta;
	const uint8_t *page;
	uint64_t ts;

	if (!mt || !subbufs || !get_reader || (commit_size != 4 && commit_size != 8))
		return -EINVAL;
	if (mt->meta_struct_len < offsetof(struct ftrace_rb_meta, reserved1) ||
	    mt->subbuf_size != page_size || mt->nr_subbufs == 0 ||
	    (uint64_t)mt->nr_subbufs * page_size > subbufs_len ||
	    mt->reader.id >= mt->nr_subbufs || page_size <= 8u + commit_size + FTRACE_RB_MIN_EVENT)
		return -EINVAL;
	*m = (struct ftrace_mapped){
		.meta = mt,
		.subbufs = subbufs,
		.page_size = page_size,
		.nr_subbufs = mt->nr_subbufs,
		.commit_size = commit_size,
		.header_size = 8 + commit_size,
		.get_reader = get_reader,
		.ctx = ctx,
		.id = load_u32(&mt->reader.id),
		.pos = load_u32(&mt->reader.read),
	};
	m->kread = m->pos;
	page = m->subbufs + (size_t)m->id * page_size;
	memcpy(&ts, page, 8);
	/* A reader page partly read before us: go on from the kernel's read
	 * offset, at its read timestamp, as read() would. */
	if (m->pos > page_size - m->header_size)
		return -EINVAL;
	m->pos_ts = m->pos ? ftrace_mapped_read_stamp(page + m->header_size, 0, m->pos, ts) : ts;
	return 0;
}

/*
 * Bytes [m->pos, @end) of the reader sub-buffer, as read()'s copy: from its
 * start (and to the commit) the page keeps its lost-events flags and the
 * count the kernel stored after the data.
 */
static void copy_part(struct ftrace_mapped *m, const uint8_t *page, uint32_t commit, uint32_t end,
		      uint8_t *buf)
{
	uint32_t size = commit & FTRACE_PAGE_COMMIT_MASK, n = end - m->pos;
	bool whole = m->pos == 0 && end == size;
	size_t hs = m->header_size, stop = hs + n;
	uint64_t word = whole ? commit : n;

	memcpy(buf, &m->pos_ts, 8);
	memcpy(buf + 8, &word, m->commit_size);
	memcpy(buf + hs, page + hs + m->pos, n);
	if (whole && (commit & FTRACE_PAGE_MISSED_STORED) && m->page_size - stop >= m->commit_size) {
		memcpy(buf + stop, page + stop, m->commit_size);
		stop += m->commit_size;
	}
	memset(buf + stop, 0, m->page_size - stop);
	m->pos_ts = ftrace_mapped_read_stamp(page + hs, m->pos, end, m->pos_ts);
	m->pos = end;
	m->copied++;
}

/*
 * We hand over only what the kernel has counted read: up to reader.read as
 * the last swap call left it, never the bytes committed since.  The kernel's
 * "read events" then always equal the events we parsed, as with read(), and
 * one swap call per step is enough (it either marks new bytes read or swaps).
 */
int ftrace_mapped_next(struct ftrace_mapped *m, uint8_t *buf, const uint8_t **ret_page,
		       bool *ret_caught_up)
{
	const uint32_t data_max = (uint32_t)(m->page_size - m->header_size);

	/* Bounded: a swap brings a sub-buffer with data, or nothing. */
	for (unsigned loops = 0; loops < 4; loops++) {
		const uint8_t *page = m->subbufs + (size_t)m->id * m->page_size;
		uint32_t commit = load_commit(page);
		uint32_t size = commit & FTRACE_PAGE_COMMIT_MASK;
		uint32_t end = size < m->kread ? size : m->kread;
		uint32_t id, kread;
		int r;

		if (size > data_max)
			return -EIO;
		if (m->pos > size) {
			/* The buffer was cleared under us (a write to "trace"):
			 * go on from what the reader page holds now. */
			memcpy(&m->pos_ts, page, 8);
			m->pos_ts = ftrace_mapped_read_stamp(page + m->header_size, 0, size, m->pos_ts);
			m->pos = end = size;
		}
		if (m->pos < end) {
			/* Less room left than the smallest event: the writer
			 * has gone, the sub-buffer will not change again. */
			bool complete = data_max - end < FTRACE_RB_MIN_EVENT;

			if (m->pos == 0 && end == size && complete) {
				*ret_page = page;
				m->pos = end;
				m->in_place++;
			} else {
				copy_part(m, page, commit, end, buf);
				*ret_page = buf;
			}
			*ret_caught_up = !complete;
			return 1;
		}
		r = m->get_reader(m->ctx);
		if (r < 0)
			return r;
		id = load_u32(&m->meta->reader.id);
		kread = load_u32(&m->meta->reader.read);
		if (id >= m->nr_subbufs)
			return -EIO;
		if (id != m->id) {
			m->id = id;
			m->pos = 0;
			memcpy(&m->pos_ts, m->subbufs + (size_t)id * m->page_size, 8);
			m->swaps++;
		} else if (kread <= m->pos) {
			m->kread = kread;
			return 0;
		}
		m->kread = kread;
	}
	return 0;
}
