/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * pbw - a streaming protobuf writer for the data plane.
 *
 * Writes protobuf fields straight into whatever memory backs it (an SMB
 * chunk, a caller's buffer) without building message trees.  Nested messages
 * reserve a 4-byte length that is back-filled when the message ends; when the
 * backing range runs out, the owner's refill callback supplies the next
 * range (the SMB trace writer moves to a new chunk and, if a reserved length
 * now lives in a released chunk, redirects it to a patch slot).
 *
 * The cursor is a public struct so that the per-field fast path inlines; only
 * pbw_* functions and the owner's refill callback touch its members.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/util_varint.h"

#define PBW_MAX_NESTING 12
/* Bytes a nested message reserves for its length: a redundant varint. */
#define PBW_SIZE_FIELD_LEN 4
/* Longest single write the fast path ever asks to be contiguous. */
#define PBW_MAX_CONTIGUOUS 32

enum pbw_wire_type {
	PBW_WIRE_VARINT = 0,
	PBW_WIRE_FIXED64 = 1,
	PBW_WIRE_LEN = 2,
	PBW_WIRE_FIXED32 = 5,
};

struct pbw;

/*
 * Must leave at least @min_bytes contiguous room in [cur, end), or switch the
 * writer to its discard sink (pbw_enter_discard()) and return -ENOSPC.
 * Called with w->cur possibly < w->end (the tail is abandoned, not written).
 * Before it returns, every size_field[] entry that points into memory the
 * owner gives up must be redirected (to a patch slot) or set to NULL.
 * Never called while the writer is discarding.
 */
typedef int (*pbw_refill_fn)(struct pbw *w, size_t min_bytes);

struct pbw {
	uint8_t *cur;
	uint8_t *end;
	uint8_t *range_start;     /* start of the current backing range */
	uint64_t range_base;      /* stream offset of range_start */
	pbw_refill_fn refill;
	void *owner;
	unsigned depth;
	bool discarding;          /* refill failed: bytes go to the sink */
	uint64_t discarded;       /* bytes written while discarding */
	/*
	 * Per open nested message: where its 4-byte length lives (NULL: the
	 * owner dropped it, nothing is written) and the stream offset of its
	 * payload.
	 */
	uint8_t *size_field[PBW_MAX_NESTING];
	uint64_t payload_start[PBW_MAX_NESTING];
	uint8_t sink[64];
};

/**
 * pbw_init - bind @w to [@buf, @buf+@len) with an optional @refill.  With no
 * refill, running out of room switches to the discard sink (check
 * pbw_overflowed()).
 */
void pbw_init(struct pbw *w, uint8_t *buf, size_t len, pbw_refill_fn refill, void *owner);

/**
 * pbw_reset_range - owner-side: point the cursor at a new backing range.
 */
static inline void pbw_reset_range(struct pbw *w, uint8_t *buf, size_t len)
{
	w->range_base += (uint64_t)(w->cur - w->range_start);
	w->range_start = buf;
	w->cur = buf;
	w->end = len ? buf + len : buf;
}

/**
 * pbw_enter_discard - owner-side: send all further bytes to the sink.  The
 * stream position keeps advancing; pbw_overflowed() turns true.
 */
void pbw_enter_discard(struct pbw *w);

/**
 * pbw_leave_discard - owner-side: stop discarding and continue writing at
 * [@buf, @buf+@len).  Only between messages (depth 0).
 */
void pbw_leave_discard(struct pbw *w, uint8_t *buf, size_t len);

/* Offset of the cursor in the whole stream since pbw_init. */
static inline uint64_t pbw_position(const struct pbw *w)
{
	return w->range_base + (uint64_t)(w->cur - w->range_start);
}

static inline bool pbw_overflowed(const struct pbw *w)
{
	return w->discarding;
}

/**
 * pbw_refill_slow - the fast path ran out of room: ask the owner's refill
 * for at least @min_bytes (<= PBW_MAX_CONTIGUOUS) contiguous bytes, or
 * continue in the discard sink.
 * Returns: 0, or -ENOSPC when the bytes now go to the sink.
 */
int pbw_refill_slow(struct pbw *w, size_t min_bytes);

/* Guarantee @n contiguous bytes at w->cur (n <= PBW_MAX_CONTIGUOUS). */
static inline void pbw_reserve(struct pbw *w, size_t n)
{
	if (__builtin_expect((size_t)(w->end - w->cur) < n, 0))
		(void)pbw_refill_slow(w, n);
}

/*
 * The codec is util/util_varint.h.  These two names stay for callers that
 * still use them; like varint_put(), pbw_put_varint_raw() may write one byte
 * past the varint (VARINT_PUT_ROOM bytes at @p).
 */
static inline uint8_t *pbw_put_varint_raw(uint8_t *p, uint64_t v)
{
	return varint_put(p, v);
}

static inline size_t pbw_varint_len(uint64_t v)
{
	return varint_len(v);
}

/* A varint with no tag: the elements of a packed repeated field. */
static inline void pbw_append_varint(struct pbw *w, uint64_t v)
{
	pbw_reserve(w, 10);
	w->cur = varint_put(w->cur, v);
}

static inline void pbw_tag(struct pbw *w, uint32_t field, enum pbw_wire_type wt)
{
	pbw_reserve(w, 5);
	w->cur = varint_put(w->cur, ((uint64_t)field << 3) | wt);
}

/* uint32/uint64/bool/enum and non-negative ints */
static inline void pbw_varint(struct pbw *w, uint32_t field, uint64_t v)
{
	pbw_reserve(w, 15);
	w->cur = varint_put(w->cur, ((uint64_t)field << 3) | PBW_WIRE_VARINT);
	w->cur = varint_put(w->cur, v);
}

/* int32/int64: negative values take 10 bytes, as protobuf encodes them. */
static inline void pbw_int(struct pbw *w, uint32_t field, int64_t v)
{
	pbw_varint(w, field, (uint64_t)v);
}

static inline void pbw_fixed64(struct pbw *w, uint32_t field, uint64_t v)
{
	pbw_reserve(w, 13);
	w->cur = varint_put(w->cur, ((uint64_t)field << 3) | PBW_WIRE_FIXED64);
	memcpy(w->cur, &v, 8); /* little-endian host: the wire order */
	w->cur += 8;
}

static inline void pbw_fixed32(struct pbw *w, uint32_t field, uint32_t v)
{
	pbw_reserve(w, 9);
	w->cur = varint_put(w->cur, ((uint64_t)field << 3) | PBW_WIRE_FIXED32);
	memcpy(w->cur, &v, 4);
	w->cur += 4;
}

/* sint32/sint64: zigzag, so small negative values stay short. */
static inline void pbw_sint(struct pbw *w, uint32_t field, int64_t v)
{
	pbw_varint(w, field, varint_zigzag(v));
}

static inline void pbw_double(struct pbw *w, uint32_t field, double d)
{
	uint64_t v;

	memcpy(&v, &d, 8);
	pbw_fixed64(w, field, v);
}

/**
 * pbw_append_raw - copy @len bytes, across ranges if needed.
 */
void pbw_append_raw(struct pbw *w, const void *data, size_t len);

static inline void pbw_bytes(struct pbw *w, uint32_t field, const void *data, size_t len)
{
	pbw_reserve(w, 15);
	w->cur = varint_put(w->cur, ((uint64_t)field << 3) | PBW_WIRE_LEN);
	w->cur = varint_put(w->cur, len);
	if (len <= (size_t)(w->end - w->cur)) {
		memcpy(w->cur, data, len);
		w->cur += len;
	} else {
		pbw_append_raw(w, data, len);
	}
}

/* A string of at most @max bytes, cut at the first NUL (kernel char[N]). */
static inline void pbw_string_n(struct pbw *w, uint32_t field, const char *s, size_t max)
{
	pbw_bytes(w, field, s, strnlen(s, max));
}

static inline void pbw_string(struct pbw *w, uint32_t field, const char *s)
{
	pbw_bytes(w, field, s, strlen(s));
}

/**
 * pbw_begin_nested - open a length-delimited sub-message at @field (also
 * used for packed repeated fields).  The tag and the 4-byte length are kept
 * contiguous, so a length never straddles two backing ranges.
 * Deeper than PBW_MAX_NESTING is a programming error (asserted).
 */
void pbw_begin_nested(struct pbw *w, uint32_t field);

/**
 * pbw_end_nested - close the innermost sub-message and back-fill its length.
 * Like protozero, a message of at most 127 bytes that lies wholly in the
 * current range is compacted to a 1-byte length (its payload moves back 3
 * bytes, so the stream position drops by 3); otherwise the length is a
 * 4-byte redundant varint.
 * Returns: the payload size of the closed message.
 */
uint32_t pbw_end_nested(struct pbw *w);

/*
 * Where TracePackets go: one sequence of one writer.  Every writer of
 * packets (the data sources, the ftrace parser, convert) is handed one and
 * knows nothing of what is behind it: the SMB trace writer in the daemon
 * and `record` (smb_writer_sink()), a file for convert, a plain buffer in
 * tests and benchmarks.  The calls are per packet, never per field.
 *
 * begin_packet() always returns a cursor: when no room could be had the
 * packet goes to a discard cursor, is counted by the owner and
 * end_packet() returns -ENOSPC (the SMB writer's behaviour; a sink for
 * tests must do the same).
 */
struct pbw_sink {
	struct pbw *(*begin_packet)(void *userdata);
	/* Returns: 0, or -ENOSPC if the packet was dropped on the way. */
	int (*end_packet)(void *userdata);
	/* Release what was written so that the next commit carries it;
	 * may be NULL where nothing is held back (a plain buffer). */
	void (*flush)(void *userdata);
	void *userdata;
};
