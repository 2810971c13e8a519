/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The floor: the least a consumer of trace_pipe_raw pages can do and still
 * have looked at every record - decode the page header, follow the record
 * headers (padding, time extends, absolute stamps), keep the timestamp and
 * read each record's event id.  No validation beyond staying inside the
 * page, no encoding.  Written from the ring-buffer layout the kernel
 * documents in include/linux/ring_buffer.h, independently of
 * probes/ftrace/parse/ftrace_page.h so that the two can be compared.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct bench_walk {
	uint64_t records;
	uint64_t pages;
	uint64_t payload_bytes;
	/* Folded timestamps and ids, so the compiler cannot skip the walk. */
	uint64_t sink;
};

static inline uint32_t bench_rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline void bench_walk_page(const uint8_t *page, size_t page_size, unsigned commit_size,
				   struct bench_walk *w)
{
	size_t header = 8 + commit_size;
	const uint8_t *p, *end;
	uint64_t ts;
	uint32_t size;

	memcpy(&ts, page, 8);
	size = bench_rd32(page + 8) & ((1u << 27) - 1);
	w->pages++;
	if (size > page_size - header)
		return;
	w->payload_bytes += size;
	p = page + header;
	end = p + size;
	while (end - p >= 4) {
		uint32_t hdr = bench_rd32(p), type_len = hdr & 0x1f, len;

		p += 4;
		ts += hdr >> 5;
		if (type_len == 0) {
			if (end - p < 4)
				return;
			len = bench_rd32(p);    /* counts its own word */
			if (len < 4)
				return;
			p += 4;
			len -= 4;
		} else if (type_len <= 28) {
			len = type_len * 4;
		} else if (type_len == 29) {    /* padding: length counts its own word */
			if ((hdr >> 5) == 0 || end - p < 4)
				return;
			len = bench_rd32(p);
			if (len < 4 || len > (size_t)(end - p))
				return;
			p += len;
			continue;
		} else {                        /* 30: time extend, 31: absolute stamp */
			if (end - p < 4)
				return;
			if (type_len == 30)
				ts += (uint64_t)bench_rd32(p) << 27;
			else
				ts = (hdr >> 5) + ((uint64_t)bench_rd32(p) << 27);
			p += 4;
			continue;
		}
		if ((size_t)(end - p) < len || len < 2)
			return;
		w->records++;
		w->sink += ts ^ (uint64_t)(p[0] | (p[1] << 8));
		p += len;
	}
}
