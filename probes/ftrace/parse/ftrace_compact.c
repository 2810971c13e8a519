/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_compact - FtraceEventBundle.CompactSched: sched_switch and
 * sched_waking as parallel columns of packed varints, comms interned per
 * bundle.  The parser appends each value to its column already encoded
 * (ftrace_compact_put()); this file allocates the columns and writes them
 * out when a bundle ends.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "protos/pbw.h"
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

/* FtraceEventBundle.CompactSched field number of each column. */
static const uint8_t col_field[_FTRACE_CS_COL_MAX] = {
	[FTRACE_CS_SW_TS] = CS_SWITCH_TIMESTAMP,
	[FTRACE_CS_SW_NEXT_PID] = CS_SWITCH_NEXT_PID,
	[FTRACE_CS_SW_PREV_STATE] = CS_SWITCH_PREV_STATE,
	[FTRACE_CS_SW_NEXT_PRIO] = CS_SWITCH_NEXT_PRIO,
	[FTRACE_CS_SW_COMM] = CS_SWITCH_NEXT_COMM_INDEX,
	[FTRACE_CS_WK_TS] = CS_WAKING_TIMESTAMP,
	[FTRACE_CS_WK_PID] = CS_WAKING_PID,
	[FTRACE_CS_WK_TARGET_CPU] = CS_WAKING_TARGET_CPU,
	[FTRACE_CS_WK_PRIO] = CS_WAKING_PRIO,
	[FTRACE_CS_WK_COMM] = CS_WAKING_COMM_INDEX,
	[FTRACE_CS_WK_FLAGS] = CS_WAKING_COMMON_FLAGS,
};

/* Longest encoding of one value: 10 bytes, 2 for comm indices and flags (< 256). */
static size_t col_max_value_len(enum ftrace_compact_col c)
{
	return c == FTRACE_CS_SW_COMM || c == FTRACE_CS_WK_COMM || c == FTRACE_CS_WK_FLAGS ? 2 : 10;
}

static void *carve(uint8_t **p, size_t bytes)
{
	void *r = *p;

	*p += ALIGN_UP(bytes, 64);
	return r;
}

/*
 * Everything comes from one anonymous mapping rather than calloc(): the
 * columns are sized for the worst case (FTRACE_COMPACT_CAP values of 10
 * bytes), but the kernel only backs the pages a bundle actually reaches,
 * a few dozen KiB.  calloc() could clear recycled heap memory and so touch
 * all of it up front.
 */
int ftrace_compact_buf_new(struct ftrace_compact_buf **ret)
{
	const size_t k = FTRACE_COMPACT_MAX_COMMS;
	struct ftrace_compact_buf *b;
	size_t len = k * (sizeof(uint64_t[2]) + 1) + FTRACE_COMPACT_HASH_SLOTS * sizeof(uint16_t) +
		     (_FTRACE_CS_COL_MAX + 3) * 64;
	uint8_t *m, *p;

	for (int c = 0; c < _FTRACE_CS_COL_MAX; c++)
		len += FTRACE_COMPACT_CAP * col_max_value_len(c) + FTRACE_COMPACT_COL_SLACK;
	len = ALIGN_UP(len, (size_t)4096);
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		free(b);
		return -ENOMEM;
	}
	b->map = m;
	b->map_len = len;
	p = m;
	for (int c = 0; c < _FTRACE_CS_COL_MAX; c++)
		b->start[c] = carve(&p, FTRACE_COMPACT_CAP * col_max_value_len(c) +
				       FTRACE_COMPACT_COL_SLACK);
	b->comms = carve(&p, k * sizeof(*b->comms));
	b->comm_len = carve(&p, k * sizeof(*b->comm_len));
	b->comm_hash = carve(&p, FTRACE_COMPACT_HASH_SLOTS * sizeof(*b->comm_hash));
	assert((size_t)(p - m) <= len);
	ftrace_compact_buf_reset(b);
	*ret = b;
	return 0;
}

struct ftrace_compact_buf *ftrace_compact_buf_free(struct ftrace_compact_buf *b)
{
	if (!b)
		return NULL;
	if (b->map)
		(void)munmap(b->map, b->map_len);
	free(b);
	return NULL;
}

/* Bit 7 of each byte of @v that is zero set; exact up to the first zero byte. */
static inline uint64_t zero_bytes(uint64_t v)
{
	return (v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull;
}

/*
 * The comm in @raw (16 kernel bytes as two words) cut at its first NUL and
 * zero-padded, and its length: a mask instead of strnlen() and memcpy().
 */
static size_t comm_key(const uint64_t raw[2], uint64_t key[2])
{
	uint64_t z = zero_bytes(raw[0]);

	/* Little-endian: byte i of a word is its bits 8i..8i+7. */
	if (z) {
		unsigned n = (unsigned)__builtin_ctzll(z) >> 3;

		key[0] = raw[0] & ((1ull << (n * 8)) - 1); /* n <= 7 */
		key[1] = 0;
		return n;
	}
	key[0] = raw[0];
	z = zero_bytes(raw[1]);
	if (z) {
		unsigned n = (unsigned)__builtin_ctzll(z) >> 3;

		key[1] = raw[1] & ((1ull << (n * 8)) - 1);
		return 8 + n;
	}
	key[1] = raw[1];
	return FTRACE_COMM_LEN;
}

/* Slot of a comm: one multiply; the table's order never depends on it. */
static inline uint32_t comm_hash(const uint64_t k[2])
{
	uint64_t x = k[0] ^ ((k[1] << 29) | (k[1] >> 35));

	return (uint32_t)((x * 0x9e3779b97f4a7c15ull) >> 55);
}

/* Probe for @k from slot @i.  Returns: the index, or -1 with @i the empty
 * slot where @k belongs. */
static int comm_find(const struct ftrace_compact_buf *b, const uint64_t k[2], uint32_t *i)
{
	for (;; *i = (*i + 1) & (FTRACE_COMPACT_HASH_SLOTS - 1)) {
		uint16_t v = b->comm_hash[*i];

		if (v == 0)
			return -1;
		if (b->comms[v - 1][0] == k[0] && b->comms[v - 1][1] == k[1])
			return v - 1;
	}
}

int ftrace_compact_intern(struct ftrace_compact_buf *b, const uint8_t *p)
{
	uint64_t raw[2], key[2];
	uint32_t i;
	size_t len;
	int idx;

	/*
	 * The kernel pads comms with zeros, so the raw bytes are the key
	 * itself: look them up as they are.  Table keys are zero-padded, so a
	 * raw comm with other bytes after its NUL never matches one; it is
	 * looked up again by its key below.
	 */
	memcpy(&raw[0], p, 8);
	memcpy(&raw[1], p + 8, 8);
	i = comm_hash(raw);
	idx = comm_find(b, raw, &i);
	if (idx >= 0)
		return idx;
	len = comm_key(raw, key);
	if (key[0] != raw[0] || key[1] != raw[1]) {
		i = comm_hash(key);
		idx = comm_find(b, key, &i);
		if (idx >= 0)
			return idx;
	}
	if (b->n_comms >= FTRACE_COMPACT_MAX_COMMS)
		return -1;
	b->comms[b->n_comms][0] = key[0];
	b->comms[b->n_comms][1] = key[1];
	b->comm_len[b->n_comms] = (uint8_t)len;
	b->comm_hash[i] = (uint16_t)(b->n_comms + 1);
	return (int)b->n_comms++;
}

/* Columns [@first, @last] as packed fields: they are their own bytes already. */
static void write_columns(struct ftrace_compact_buf *b, struct pbw *w, int first, int last)
{
	for (int c = first; c <= last; c++) {
		size_t len = (size_t)(b->cur[c] - b->start[c]);

		pbw_tag(w, col_field[c], PBW_WIRE_LEN);
		pbw_append_varint(w, len);
		pbw_append_raw(w, b->start[c], len);
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
	if (b->n_sw)
		write_columns(b, w, FTRACE_CS_SW_TS, FTRACE_CS_SW_COMM);
	if (b->n_wk)
		write_columns(b, w, FTRACE_CS_WK_TS, FTRACE_CS_WK_FLAGS);
	pbw_end_nested(w);
	ftrace_compact_buf_reset(b);
}
