/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * ftrace_page - the checked walker over the records of one ring-buffer
 * page (ftrace_page.c).  Its fast path is inline so that the per-event
 * loop of the parser pays no call; the rest is out of line.  Depends on
 * nothing but the public page layout in ftrace_parse.h.  The parse room's
 * second internal header: the walker is its own concept, used by the parser,
 * the mapped reader and the tests that compare it with libtraceevent.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse.h"

/* Record header type_len values (kernel ring_buffer.h). */
#define FTRACE_RB_TYPE_PADDING 29
#define FTRACE_RB_TYPE_TIME_EXTEND 30
#define FTRACE_RB_TYPE_TIME_STAMP 31
#define FTRACE_RB_TS_SHIFT 27

/* Longest record whose length is in its header: header word + 4 * 28. */
#define FTRACE_RB_MAX_SHORT_RECORD (4u + 4u * (FTRACE_RB_TYPE_PADDING - 1u))

struct ftrace_page_iter {
	const uint8_t *ptr;
	const uint8_t *end;     /* end of the committed data */
	/* Records starting before this one fit whole whatever their header
	 * says: ptr itself when the data is shorter than that. */
	const uint8_t *fast_end;
	uint64_t ts;
};

/* One data record: the bytes after the record header (and length word). */
struct ftrace_record {
	const uint8_t *data;
	uint32_t len;
	uint16_t event_id;
	uint64_t ts;
};

static inline void ftrace_page_iter_init(struct ftrace_page_iter *it, const uint8_t *data,
					 uint32_t data_size, uint64_t page_ts)
{
	it->ptr = data;
	it->end = data + data_size;
	it->fast_end = data_size >= FTRACE_RB_MAX_SHORT_RECORD ?
		       it->end - FTRACE_RB_MAX_SHORT_RECORD : data;
	it->ts = page_ts;
}

static inline uint32_t ftrace_rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/**
 * ftrace_page_next_slow - ftrace_page_next() for any record, every read
 * checked against it->end (ftrace_page.c).  Out of line: it runs for the
 * last few records of a page and for the rare non-data ones.
 */
int ftrace_page_next_slow(struct ftrace_page_iter *it, struct ftrace_record *rec);

/*
 * ftrace_page_next - step to the next data record.  Padding, time-extend
 * and absolute-time records are consumed here.  Every read is checked
 * against it->end; a malformed record stops the walk for this page.
 * Returns: 1 with @rec filled, 0 at the end of the data, or
 * -FTRACE_STATUS_* for a layout error.
 */
static inline int ftrace_page_next(struct ftrace_page_iter *it, struct ftrace_record *rec)
{
	const uint8_t *p = it->ptr;

	/*
	 * Most records are data with their length in type_len, and start more
	 * than the longest of those before the end: none of the checks of the
	 * slow path can fail for them (header, length and id all lie inside
	 * the data), so they cost one comparison.
	 */
	if (__builtin_expect(p < it->fast_end, 1)) {
		uint32_t hdr = ftrace_rd32(p);
		uint32_t type_len = hdr & 0x1f;

		if (__builtin_expect(type_len - 1u < FTRACE_RB_TYPE_PADDING - 1u, 1)) {
			p += 4;
			it->ts += hdr >> 5;
			rec->event_id = (uint16_t)(p[0] | (p[1] << 8));
			rec->data = p;
			rec->len = 4 * type_len;
			rec->ts = it->ts;
			it->ptr = p + 4 * type_len;
			return 1;
		}
	}
	/* Through copies: the caller's iterator and record then never have
	 * their address taken, and stay in registers in its loop. */
	struct ftrace_page_iter tmp = *it;
	struct ftrace_record r;
	int ret = ftrace_page_next_slow(&tmp, &r);

	*it = tmp;
	if (ret > 0)
		*rec = r;
	return ret;
}
