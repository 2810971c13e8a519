/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbw slow paths: refills, nested-message bookkeeping, long copies and the
 * discard sink.  Everything per field stays inline in pbw.h.
 */

#include <assert.h>
#include <errno.h>

#include "protos/pbw.h"
#include "util/util_varint.h"

#define PBW_ONE_BYTE_MAX 127u

void pbw_init(struct pbw *w, uint8_t *buf, size_t len, pbw_refill_fn refill, void *owner)
{
	memset(w, 0, sizeof(*w));
	w->cur = buf;
	w->end = buf ? buf + len : buf;
	w->range_start = buf;
	w->refill = refill;
	w->owner = owner;
}

void pbw_enter_discard(struct pbw *w)
{
	w->discarding = true;
	pbw_reset_range(w, w->sink, sizeof(w->sink));
}

void pbw_leave_discard(struct pbw *w, uint8_t *buf, size_t len)
{
	assert(w->depth == 0);
	if (w->discarding)
		w->discarded += (uint64_t)(w->cur - w->range_start);
	w->discarding = false;
	pbw_reset_range(w, buf, len);
}

/* The sink is scratch space: wrap around in it, only the position counts. */
static void sink_wrap(struct pbw *w)
{
	w->discarded += (uint64_t)(w->cur - w->range_start);
	pbw_reset_range(w, w->sink, sizeof(w->sink));
}

int pbw_refill_slow(struct pbw *w, size_t min_bytes)
{
	int r;

	assert(min_bytes <= sizeof(w->sink));
	if (w->discarding) {
		sink_wrap(w);
		return -ENOSPC;
	}
	if (!w->refill) {
		pbw_enter_discard(w);
		return -ENOSPC;
	}
	r = w->refill(w, min_bytes);
	if (r < 0 || (size_t)(w->end - w->cur) < min_bytes) {
		/* A refill that neither delivered nor gave up must not let us write out of bounds. */
		if (!w->discarding)
			pbw_enter_discard(w);
		return -ENOSPC;
	}
	return 0;
}

void pbw_append_raw(struct pbw *w, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len > 0) {
		size_t room = (size_t)(w->end - w->cur);

		if (w->discarding) {
			/* Nothing is kept: advance the stream position without copying. */
			w->range_base += len;
			w->discarded += len;
			return;
		}
		if (room == 0) {
			(void)pbw_refill_slow(w, 1);
			continue;
		}
		if (room > len)
			room = len;
		memcpy(w->cur, p, room);
		w->cur += room;
		p += room;
		len -= room;
	}
}

void pbw_begin_nested(struct pbw *w, uint32_t field)
{
	assert(w->depth < PBW_MAX_NESTING);
	if (w->depth >= PBW_MAX_NESTING)
		pbw_enter_discard(w); /* NDEBUG builds: the message is lost, not corrupted */
	/* tag (<= 5 bytes) and the length stay in one range: a patch covers 4 contiguous bytes */
	pbw_reserve(w, 5 + PBW_SIZE_FIELD_LEN);
	w->cur = varint_put(w->cur, ((uint64_t)field << 3) | PBW_WIRE_LEN);
	if (w->depth < PBW_MAX_NESTING) {
		w->size_field[w->depth] = w->cur;
		memset(w->cur, 0, PBW_SIZE_FIELD_LEN);
		w->cur += PBW_SIZE_FIELD_LEN;
		w->payload_start[w->depth] = pbw_position(w);
	}
	w->depth++;
}

uint32_t pbw_end_nested(struct pbw *w)
{
	uint8_t *sf;
	uint32_t size;

	assert(w->depth > 0);
	if (w->depth == 0)
		return 0;
	w->depth--;
	if (w->depth >= PBW_MAX_NESTING)
		return 0;

	size = (uint32_t)(pbw_position(w) - w->payload_start[w->depth]);
	sf = w->size_field[w->depth];
	w->size_field[w->depth] = NULL;
	if (!sf)
		return size;

	/*
	 * Compaction is only possible when the length and the whole payload are
	 * in the current range (nothing of it was handed over yet).  Compare as
	 * integers: @sf may point into a patch slot outside the range.
	 */
	if (size <= PBW_ONE_BYTE_MAX && !w->discarding &&
	    (uintptr_t)sf >= (uintptr_t)w->range_start &&
	    (uintptr_t)sf + PBW_SIZE_FIELD_LEN + size == (uintptr_t)w->cur) {
		memmove(sf + 1, sf + PBW_SIZE_FIELD_LEN, size);
		w->cur -= PBW_SIZE_FIELD_LEN - 1;
		sf[0] = (uint8_t)size;
		return size;
	}
	varint_put_redundant4(sf, size);
	return size;
}
