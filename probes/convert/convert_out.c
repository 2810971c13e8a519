/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The output: `0A <len> <TracePacket>` records (Trace.packet), built in one
 * growing buffer and written out between packets.  A packet is built whole
 * before any of it is written, because nested lengths are back-filled; the
 * buffer therefore grows to the largest packet (a bundle of
 * CONVERT_BATCH_PAGES pages) and stays there: memory does not grow with the
 * trace.
 */
#include <unistd.h>

#include "probes/convert/convert_internal.h"
#include "protos/pbw.h"
#include "util/util.h"

/* Smaller in the fuzzer (see convert.c). */
#ifndef OUT_INITIAL
#define OUT_INITIAL (1u << 20)
#endif
#ifndef OUT_FLUSH_AT
#define OUT_FLUSH_AT (1u << 20)
#endif
#define OUT_MAX_SEQ 64u

struct convert_out {
	int fd;
	int error;
	uint8_t *buf;
	size_t cap;
	struct pbw w;
	uint64_t written;
	uint64_t packets;
	uint64_t seq_started; /* bit per sequence id that wrote its first packet */
};

/* pbw refill: grow the buffer and move every pointer into it along. */
static int out_grow(struct pbw *w, size_t min_bytes)
{
	struct convert_out *o = w->owner;
	size_t used = (size_t)(w->cur - o->buf), ncap = o->cap * 2;
	size_t range_off = (size_t)(w->range_start - o->buf);
	ptrdiff_t sf_off[PBW_MAX_NESTING];
	unsigned depth = MIN(w->depth, (unsigned)PBW_MAX_NESTING);
	uint8_t *n;

	while (ncap - used < min_bytes)
		ncap *= 2;
	/* Offsets, not pointers, survive the move. */
	for (unsigned i = 0; i < depth; i++)
		sf_off[i] = w->size_field[i] ? w->size_field[i] - o->buf : -1;
	n = realloc(o->buf, ncap);
	if (!n)
		return -ENOMEM;
	for (unsigned i = 0; i < depth; i++)
		if (sf_off[i] >= 0)
			w->size_field[i] = n + sf_off[i];
	w->cur = n + used;
	w->range_start = n + range_off;
	w->end = n + ncap;
	o->buf = n;
	o->cap = ncap;
	return 0;
}

int convert_out_new(int fd, struct convert_out **ret)
{
	struct convert_out *o;

	if (fd < 0)
		return -EBADF;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->buf = malloc(OUT_INITIAL);
	if (!o->buf) {
		free(o);
		return -ENOMEM;
	}
	o->fd = fd;
	o->cap = OUT_INITIAL;
	pbw_init(&o->w, o->buf, o->cap, out_grow, o);
	*ret = o;
	return 0;
}

struct convert_out *convert_out_free(struct convert_out *o)
{
	if (!o)
		return NULL;
	free(o->buf);
	free(o);
	return NULL;
}

struct pbw *convert_out_begin(struct convert_out *o, uint32_t seq, uint32_t flags)
{
	struct pbw *w = &o->w;

	pbw_begin_nested(w, 1); /* Trace.packet */
	pbw_varint(w, CONVERT_PKT_TRUSTED_SEQ_ID, seq);
	if (seq == CONVERT_SEQ_SERVICE)
		pbw_int(w, CONVERT_PKT_TRUSTED_UID, (int64_t)getuid());
	if (seq < OUT_MAX_SEQ && !(o->seq_started & (1ull << seq))) {
		o->seq_started |= 1ull << seq;
		pbw_varint(w, CONVERT_PKT_FIRST_ON_SEQUENCE, 1);
	}
	if (flags)
		pbw_varint(w, CONVERT_PKT_SEQUENCE_FLAGS, flags);
	return w;
}

int convert_out_flush(struct convert_out *o)
{
	size_t len = (size_t)(o->w.cur - o->buf);
	int r;

	if (o->error)
		return o->error;
	if (pbw_overflowed(&o->w))
		return (o->error = -ENOMEM);
	if (len == 0)
		return 0;
	r = write_all(o->fd, o->buf, len);
	if (r < 0)
		return (o->error = r);
	o->written += len;
	pbw_reset_range(&o->w, o->buf, o->cap);
	return 0;
}

int convert_out_end(struct convert_out *o)
{
	(void)pbw_end_nested(&o->w);
	o->packets++;
	if (o->w.depth == 0 && (size_t)(o->w.cur - o->buf) >= OUT_FLUSH_AT)
		return convert_out_flush(o);
	return o->error;
}

uint64_t convert_out_bytes(const struct convert_out *o)
{
	return o->written + (uint64_t)(o->w.cur - o->buf);
}

uint64_t convert_out_packets(const struct convert_out *o)
{
	return o->packets;
}
