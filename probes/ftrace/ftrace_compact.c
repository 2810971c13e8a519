/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_compact - FtraceEventBundle.CompactSched: sched_switch and
 * sched_waking as parallel columns of packed varints, comms interned per
 * bundle.  The columns are plain arrays filled by the parser; this file
 * allocates them and serializes them when a bundle ends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/ftrace_parse_internal.h"
#include "smb/pbw.h"
#include "util/util.h"

/* FtraceEventBundle.CompactSched field numbers. */
enum {
	CS_SWITCH_TIMESTAMP = 1,
	CS_SWITCH_PREV_STATE = 2,
	CS_SWITCH_NEXT_PID = 3,
	CS_SWITCH_NEXT_PRIO = 4,
	CS_INTERN_TABLE = 5,
	CS_SWITCH_NEXT_COMM_INDEX = 6,
	CS_WAKING_TIMESTAMP = 7,
	CS_WAKING_PID = 8,
	CS_WAKING_TARGET_CPU = 9,
	CS_WAKING_PRIO = 10,
	CS_WAKING_COMM_INDEX = 11,
	CS_WAKING_COMMON_FLAGS = 12,
	BUNDLE_COMPACT_SCHED = 4,
};

int ftrace_compact_buf_new(struct ftrace_compact_buf **ret)
{
	struct ftrace_compact_buf *b;
	size_t n = FTRACE_COMPACT_CAP;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->sw_ts = calloc(n, sizeof(*b->sw_ts));
	b->sw_prev_state = calloc(n, sizeof(*b->sw_prev_state));
	b->sw_next_pid = calloc(n, sizeof(*b->sw_next_pid));
	b->sw_next_prio = calloc(n, sizeof(*b->sw_next_prio));
	b->sw_comm = calloc(n, sizeof(*b->sw_comm));
	b->wk_ts = calloc(n, sizeof(*b->wk_ts));
	b->wk_pid = calloc(n, sizeof(*b->wk_pid));
	b->wk_target_cpu = calloc(n, sizeof(*b->wk_target_cpu));
	b->wk_prio = calloc(n, sizeof(*b->wk_prio));
	b->wk_comm = calloc(n, sizeof(*b->wk_comm));
	b->wk_flags = calloc(n, sizeof(*b->wk_flags));
	b->comms = calloc(FTRACE_COMPACT_MAX_COMMS, sizeof(*b->comms));
	b->comm_len = calloc(FTRACE_COMPACT_MAX_COMMS, sizeof(*b->comm_len));
	b->comm_hash = calloc(FTRACE_COMPACT_HASH_SLOTS, sizeof(*b->comm_hash));
	if (!b->sw_ts || !b->sw_prev_state || !b->sw_next_pid || !b->sw_next_prio ||
	    !b->sw_comm || !b->wk_ts || !b->wk_pid || !b->wk_target_cpu || !b->wk_prio ||
	    !b->wk_comm || !b->wk_flags || !b->comms || !b->comm_len ||
	    !b->comm_hash) {
		ftrace_compact_buf_free(b);
		return -ENOMEM;
	}
	*ret = b;
	return 0;
}

struct ftrace_compact_buf *ftrace_compact_buf_free(struct ftrace_compact_buf *b)
{
	if (!b)
		return NULL;
	free(b->sw_ts);
	free(b->sw_prev_state);
	free(b->sw_next_pid);
	free(b->sw_next_prio);
	free(b->sw_comm);
	free(b->wk_ts);
	free(b->wk_pid);
	free(b->wk_target_cpu);
	free(b->wk_prio);
	free(b->wk_comm);
	free(b->wk_flags);
	free(b->comms);
	free(b->comm_len);
	free(b->comm_hash);
	free(b);
	return NULL;
}

/*
 * Packed fields get their exact length first (a pass over the column),
 * then the values go out in runs: each run is as long as the contiguous
 * room is sure to hold (the whole rest of the column, usually), written
 * without a bounds check per value.  Values that meet the end of a chunk go
 * one by one through pbw_append_varint(), which moves to the next chunk.
 */

static inline void packed_head(struct pbw *w, uint32_t field, size_t len)
{
	pbw_tag(w, field, PBW_WIRE_LEN);
	pbw_append_varint(w, len);
}

/*
 * How many of the next values (at most @left, whose encoding takes
 * @rem_bytes, each at most @max_len bytes) fit in the room at the cursor.
 */
static inline uint32_t run_length(size_t room, uint32_t left, size_t rem_bytes, size_t max_len)
{
	if (rem_bytes <= room)
		return left;
	return (uint32_t)MIN((size_t)left, room / max_len);
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	if (_likely_(v < 0x80)) {
		*p = (uint8_t)v;
		return p + 1;
	}
	return pbw_put_varint_raw(p, v);
}

/* A varint of at most 3 bytes inline, longer ones through the loop. */
static inline uint8_t *put_varint64(uint8_t *p, uint64_t v)
{
	if (v < 0x80) {
		p[0] = (uint8_t)v;
		return p + 1;
	}
	if (v < 0x4000) {
		p[0] = (uint8_t)(v | 0x80);
		p[1] = (uint8_t)(v >> 7);
		return p + 2;
	}
	if (v < 0x200000) {
		p[0] = (uint8_t)(v | 0x80);
		p[1] = (uint8_t)((v >> 7) | 0x80);
		p[2] = (uint8_t)(v >> 14);
		return p + 3;
	}
	return pbw_put_varint_raw(p, v);
}

/*
 * Timestamps are written as deltas, so the column is turned into deltas in
 * place while it is measured (it is reset after the write anyway).
 */
static void packed_ts(struct pbw *w, uint32_t field, uint64_t *v, uint32_t n)
{
	uint64_t prev = 0;
	size_t len = 0, rem;

	/* Deltas restart at 0 in every bundle: the first value is absolute. */
	for (uint32_t i = 0; i < n; i++) {
		uint64_t t = v[i];

		v[i] = t - prev;
		prev = t;
		len += pbw_varint_len(v[i]);
	}
	packed_head(w, field, len);
	rem = len;
	for (uint32_t i = 0; i < n;) {
		size_t room;
		uint8_t *p = pbw_span(w, &room), *p0 = p;
		uint32_t k = run_length(room, n - i, rem, 10);

		if (k == 0) {
			rem -= pbw_varint_len(v[i]);
			pbw_append_varint(w, v[i++]);
			continue;
		}
		for (uint32_t e = i + k; i < e; i++)
			p = put_varint64(p, v[i]);
		rem -= (size_t)(p - p0);
		pbw_span_commit(w, p);
	}
}

static void packed_s64(struct pbw *w, uint32_t field, const int64_t *v, uint32_t n)
{
	size_t len = 0, rem;

	for (uint32_t i = 0; i < n; i++)
		len += pbw_varint_len((uint64_t)v[i]);
	packed_head(w, field, len);
	rem = len;
	for (uint32_t i = 0; i < n;) {
		size_t room;
		uint8_t *p = pbw_span(w, &room), *p0 = p;
		uint32_t k = run_length(room, n - i, rem, 10);

		if (k == 0) {
			rem -= pbw_varint_len((uint64_t)v[i]);
			pbw_append_varint(w, (uint64_t)v[i++]);
			continue;
		}
		for (uint32_t e = i + k; i < e; i++)
			p = put_varint(p, (uint64_t)v[i]);
		rem -= (size_t)(p - p0);
		pbw_span_commit(w, p);
	}
}

/* Varint length of an int32 sign-extended to 64 bits, as protobuf does. */
static inline size_t s32_len(int32_t x)
{
	return 1 + (x > 0x7f) + (x > 0x3fff) + (x > 0x1fffff) + (x > 0xfffffff) + 9 * (x < 0);
}

typedef int32_t v4s32 __attribute__((vector_size(16)));

/* Sum of s32_len() over a column, four values per step. */
static size_t s32_column_len(const int32_t *v, uint32_t n)
{
	v4s32 acc = { 0, 0, 0, 0 };
	size_t len = n;
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4) {
		v4s32 x;

		memcpy(&x, v + i, sizeof(x));
		/* Comparisons are -1 per true lane. */
		acc -= (x > 0x7f) + (x > 0x3fff) + (x > 0x1fffff) + (x > 0xfffffff);
		acc += (x < 0) & 9;
	}
	len += (size_t)(acc[0] + acc[1] + acc[2] + acc[3]);
	for (; i < n; i++)
		len += s32_len(v[i]) - 1;
	return len;
}

/* A non-negative int32 (pids, priorities, CPUs) takes at most 5 bytes. */
static inline uint8_t *put_varint32(uint8_t *p, int32_t x)
{
	uint32_t u = (uint32_t)x;

	if (_likely_(u < 0x80)) {
		p[0] = (uint8_t)u;
		return p + 1;
	}
	if (u < 0x4000) {
		p[0] = (uint8_t)(u | 0x80);
		p[1] = (uint8_t)(u >> 7);
		return p + 2;
	}
	if (u < 0x200000) {
		p[0] = (uint8_t)(u | 0x80);
		p[1] = (uint8_t)((u >> 7) | 0x80);
		p[2] = (uint8_t)(u >> 14);
		return p + 3;
	}
	return pbw_put_varint_raw(p, (uint64_t)(int64_t)x);
}

/* int32 columns: negative values sign-extend to 10 bytes, as protobuf does. */
static void packed_s32(struct pbw *w, uint32_t field, const int32_t *v, uint32_t n)
{
	size_t len = s32_column_len(v, n), rem, span_room;
	uint8_t *span;

	packed_head(w, field, len);
	span = pbw_span(w, &span_room);
	if (len == n && n <= span_room) {
		/* All in [0, 127] (priorities, CPUs): one byte each. */
		for (uint32_t i = 0; i < n; i++)
			span[i] = (uint8_t)v[i];
		pbw_span_commit(w, span + n);
		return;
	}
	rem = len;
	for (uint32_t i = 0; i < n;) {
		size_t room;
		uint8_t *p = pbw_span(w, &room), *p0 = p;
		uint32_t k = run_length(room, n - i, rem, 10);

		if (k == 0) {
			rem -= s32_len(v[i]);
			pbw_append_varint(w, (uint64_t)(int64_t)v[i++]);
			continue;
		}
		for (uint32_t e = i + k; i < e; i++)
			p = put_varint32(p, v[i]);
		rem -= (size_t)(p - p0);
		pbw_span_commit(w, p);
	}
}

/* Values of 128 and more among 8 bytes (little-endian load of a u8 column). */
static inline unsigned high_bytes8(uint64_t x)
{
	return (unsigned)((((x >> 7) & 0x0101010101010101ull) * 0x0101010101010101ull) >> 56);
}

static void packed_u8(struct pbw *w, uint32_t field, const uint8_t *v, uint32_t n)
{
	size_t len = n, rem;
	uint32_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t x;

		memcpy(&x, v + i, 8);
		len += high_bytes8(x);
	}
	for (; i < n; i++)
		len += v[i] >> 7;
	packed_head(w, field, len);
	if (len == n) {
		/* All below 128: each value is its own one-byte varint. */
		pbw_append_raw(w, v, n);
		return;
	}
	rem = len;
	for (i = 0; i < n;) {
		size_t room;
		uint8_t *p = pbw_span(w, &room), *p0 = p;
		uint32_t k = run_length(room, n - i, rem, 2);

		if (k == 0) {
			rem -= 1u + (v[i] >> 7);
			pbw_append_varint(w, v[i++]);
			continue;
		}
		for (uint32_t e = i + k; i < e; i++)
			p = put_varint(p, v[i]);
		rem -= (size_t)(p - p0);
		pbw_span_commit(w, p);
	}
}

void ftrace_compact_buf_write(struct ftrace_compact_buf *b, struct pbw *w)
{
	if (ftrace_compact_buf_empty(b)) {
		ftrace_compact_buf_reset(b);
		return;
	}
	/* Same field order as Perfetto: comms, switch columns, waking columns. */
	pbw_begin_nested(w, BUNDLE_COMPACT_SCHED);
	for (uint32_t i = 0; i < b->n_comms; i++)
		pbw_bytes(w, CS_INTERN_TABLE, b->comms[i], b->comm_len[i]);
	if (b->n_sw) {
		packed_ts(w, CS_SWITCH_TIMESTAMP, b->sw_ts, b->n_sw);
		packed_s32(w, CS_SWITCH_NEXT_PID, b->sw_next_pid, b->n_sw);
		packed_s64(w, CS_SWITCH_PREV_STATE, b->sw_prev_state, b->n_sw);
		packed_s32(w, CS_SWITCH_NEXT_PRIO, b->sw_next_prio, b->n_sw);
		packed_u8(w, CS_SWITCH_NEXT_COMM_INDEX, b->sw_comm, b->n_sw);
	}
	if (b->n_wk) {
		packed_ts(w, CS_WAKING_TIMESTAMP, b->wk_ts, b->n_wk);
		packed_s32(w, CS_WAKING_PID, b->wk_pid, b->n_wk);
		packed_s32(w, CS_WAKING_TARGET_CPU, b->wk_target_cpu, b->n_wk);
		packed_s32(w, CS_WAKING_PRIO, b->wk_prio, b->n_wk);
		packed_u8(w, CS_WAKING_COMM_INDEX, b->wk_comm, b->n_wk);
		packed_u8(w, CS_WAKING_COMMON_FLAGS, b->wk_flags, b->n_wk);
	}
	pbw_end_nested(w);
	ftrace_compact_buf_reset(b);
}
