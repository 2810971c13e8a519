/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_page - the kernel ring-buffer page header, and the checked
 * record walker.  Its fast path, for the records well inside the data,
 * is inline (ftrace_page_next() in ftrace_page.h) so that the
 * per-event loop pays no call.
 */
#include <errno.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_page.h"
#include "util/util.h"

/* Pages are read in place: the kernel's byte order must be ours. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ftrace pages are parsed as little-endian");

static const char *const status_names[_FTRACE_STATUS_MAX] = {
	[FTRACE_STATUS_UNSPECIFIED] = "FTRACE_STATUS_UNSPECIFIED",
	[FTRACE_STATUS_OK] = "FTRACE_STATUS_OK",
	[FTRACE_STATUS_UNEXPECTED_READ_ERROR] = "FTRACE_STATUS_UNEXPECTED_READ_ERROR",
	[FTRACE_STATUS_PARTIAL_PAGE_READ] = "FTRACE_STATUS_PARTIAL_PAGE_READ",
	[FTRACE_STATUS_ABI_INVALID_PAGE_HEADER] = "FTRACE_STATUS_ABI_INVALID_PAGE_HEADER",
	[FTRACE_STATUS_ABI_SHORT_EVENT_HEADER] = "FTRACE_STATUS_ABI_SHORT_EVENT_HEADER",
	[FTRACE_STATUS_ABI_NULL_PADDING] = "FTRACE_STATUS_ABI_NULL_PADDING",
	[FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH] = "FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH",
	[FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH] = "FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH",
	[FTRACE_STATUS_ABI_SHORT_TIME_EXTEND] = "FTRACE_STATUS_ABI_SHORT_TIME_EXTEND",
	[FTRACE_STATUS_ABI_SHORT_TIME_STAMP] = "FTRACE_STATUS_ABI_SHORT_TIME_STAMP",
	[FTRACE_STATUS_ABI_SHORT_DATA_LENGTH] = "FTRACE_STATUS_ABI_SHORT_DATA_LENGTH",
	[FTRACE_STATUS_ABI_ZERO_DATA_LENGTH] = "FTRACE_STATUS_ABI_ZERO_DATA_LENGTH",
	[FTRACE_STATUS_ABI_INVALID_DATA_LENGTH] = "FTRACE_STATUS_ABI_INVALID_DATA_LENGTH",
	[FTRACE_STATUS_ABI_SHORT_EVENT_ID] = "FTRACE_STATUS_ABI_SHORT_EVENT_ID",
	[FTRACE_STATUS_ABI_END_OVERFLOW] = "FTRACE_STATUS_ABI_END_OVERFLOW",
	[FTRACE_STATUS_SHORT_COMPACT_EVENT] = "FTRACE_STATUS_SHORT_COMPACT_EVENT",
	[FTRACE_STATUS_INVALID_EVENT] = "FTRACE_STATUS_INVALID_EVENT",
};

const char *ftrace_parse_status_to_string(enum ftrace_parse_status s)
{
	if ((int)s < 0 || s >= _FTRACE_STATUS_MAX)
		return NULL;
	return status_names[s];
}

int ftrace_page_parse_header(const uint8_t *page, size_t page_size, unsigned commit_size,
			     struct ftrace_page_header *ret)
{
	uint32_t commit;
	size_t header_size = 8 + commit_size;

	*ret = (struct ftrace_page_header){};
	if (commit_size != 4 && commit_size != 8)
		return -EINVAL;
	if (page_size < header_size)
		return -EBADMSG;
	memcpy(&ret->timestamp, page, 8);
	/* Little-endian: flags and size live in the low 32 bits either way. */
	commit = ftrace_rd32(page + 8);
	ret->header_size = (uint32_t)header_size;
	ret->data_size = commit & FTRACE_PAGE_COMMIT_MASK;
	ret->missed_events = commit & FTRACE_PAGE_MISSED_EVENTS;
	if (ret->data_size == 0 || ret->data_size > page_size - header_size)
		return -EBADMSG;
	/* The kernel appends the count (an unsigned long, as wide as commit)
	 * after the data only when it fits in the page. */
	if (ret->missed_events && (commit & FTRACE_PAGE_MISSED_STORED) &&
	    page_size - header_size - ret->data_size >= commit_size) {
		const uint8_t *p = page + header_size + ret->data_size;

		if (commit_size == 8)
			memcpy(&ret->missed_count, p, 8);
		else
			ret->missed_count = ftrace_rd32(p);
		ret->missed_stored = true;
	}
	return 0;
}

int ftrace_page_next_slow(struct ftrace_page_iter *it, struct ftrace_record *rec)
{
	for (;;) {
		const uint8_t *p = it->ptr;
		uint32_t hdr, type_len, delta, len;

		if (p >= it->end)
			return 0;
		if ((size_t)(it->end - p) < 4)
			return -FTRACE_STATUS_ABI_SHORT_EVENT_HEADER;
		hdr = ftrace_rd32(p);
		p += 4;
		type_len = hdr & 0x1f;
		delta = hdr >> 5;
		it->ts += delta;

		/* Data records with their length in type_len: most of them. */
		if (__builtin_expect(type_len - 1u < FTRACE_RB_TYPE_PADDING - 1u, 1)) {
			len = 4 * type_len;
		} else {
			switch (type_len) {
			case FTRACE_RB_TYPE_PADDING:
				/* A null padding (delta 0) only ever lies past the commit. */
				if (delta == 0)
					return -FTRACE_STATUS_ABI_NULL_PADDING;
				if ((size_t)(it->end - p) < 4)
					return -FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH;
				len = ftrace_rd32(p);
				if (len < 4)
					return -FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH;
				/* Length counts its own word.  May point past the end:
				 * that ends the walk, as it would the kernel's. */
				if ((size_t)(it->end - p) < len) {
					it->ptr = it->end;
					return 0;
				}
				it->ptr = p + len;
				continue;
			case FTRACE_RB_TYPE_TIME_EXTEND:
				if ((size_t)(it->end - p) < 4)
					return -FTRACE_STATUS_ABI_SHORT_TIME_EXTEND;
				it->ts += (uint64_t)ftrace_rd32(p) << FTRACE_RB_TS_SHIFT;
				it->ptr = p + 4;
				continue;
			case FTRACE_RB_TYPE_TIME_STAMP:
				if ((size_t)(it->end - p) < 4)
					return -FTRACE_STATUS_ABI_SHORT_TIME_STAMP;
				/* Undo the delta added above: the header's 27 bits are the
				 * low part of an absolute time. */
				it->ts = (uint64_t)delta + ((uint64_t)ftrace_rd32(p) << FTRACE_RB_TS_SHIFT);
				it->ptr = p + 4;
				continue;
			case 0:
				if ((size_t)(it->end - p) < 4)
					return -FTRACE_STATUS_ABI_SHORT_DATA_LENGTH;
				len = ftrace_rd32(p);
				if (len == 0)
					return -FTRACE_STATUS_ABI_ZERO_DATA_LENGTH;
				if (len < 4)
					return -FTRACE_STATUS_ABI_INVALID_DATA_LENGTH;
				p += 4;
				len -= 4;
				break;
			default:
				len = 4 * type_len;
				break;
			}
		}

		if ((size_t)(it->end - p) < len)
			return -FTRACE_STATUS_ABI_END_OVERFLOW;
		/* The id is read against the data end, not the record end: a
		 * record too short for its event is caught by the event's size
		 * check (INVALID_EVENT / SHORT_COMPACT_EVENT), as in Perfetto. */
		if ((size_t)(it->end - p) < 2)
			return -FTRACE_STATUS_ABI_SHORT_EVENT_ID;
		rec->event_id = (uint16_t)(p[0] | (p[1] << 8));
		rec->data = p;
		rec->len = len;
		rec->ts = it->ts;
		it->ptr = p + len;
		return 1;
	}
}
