/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_page - the kernel ring-buffer page header.  The record walker
 * itself is inline (ftrace_page_next() in ftrace_parse_internal.h) so that
 * the per-event loop pays no call.
 */
#include <errno.h>
#include <string.h>

#include "probes/ftrace/ftrace_parse_internal.h"
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
