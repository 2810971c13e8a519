/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The protobuf base-128 varint, written and read in one place.  Every
 * encoder in the tree (pbw, the compact_sched columns, the text-format
 * parser, the service's packet writer) and every decoder (packet
 * validation, the reader of chunks, the tests) uses these.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The longest varint: 64 bits in 7-bit digits. */
#define VARINT_MAX_LEN 10u

/* Bytes that varint_put() may touch at @p: the value plus one spare byte. */
#define VARINT_PUT_ROOM VARINT_MAX_LEN

/* ceil(significant bits / 7), at least 1; branch-free: (bits * 9 + 64) / 64. */
static inline size_t varint_len(uint64_t v)
{
	unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1);

	return (bits * 9u + 64u) >> 6;
}

/*
 * varint_put - encode @v at @p and return the byte after it.  @p must have
 * VARINT_PUT_ROOM writable bytes: a three-byte value is stored as one
 * four-byte word and the next value overwrites the spare byte.
 *
 * Up to four bytes the encoding is computed as one little-endian word
 * rather than byte by byte, because most values on the hot path are short:
 * for v = a + 2^7 b + 2^14 c + 2^21 d (digits below 128), the word
 * a + 2^8 b + 2^16 c + 2^24 d is v plus the masked parts of v that move
 * each digit up to its byte; then the continuation bits are added.
 */
static inline uint8_t *varint_put(uint8_t *p, uint64_t v)
{
	if (__builtin_expect(v < 0x80, 1)) {
		p[0] = (uint8_t)v;
		return p + 1;
	}
	if (v < 0x4000) {
		uint16_t w = (uint16_t)(v + (v & 0x3f80) + 0x80);

		memcpy(p, &w, 2);
		return p + 2;
	}
	if (v < 0x200000) {
		uint32_t w = (uint32_t)(v + (v & 0x1fff80) + ((v & 0x1fc000) << 1) + 0x8080);

		memcpy(p, &w, 4);
		return p + 3;
	}
	if (v < 0x10000000) {
		uint32_t w = (uint32_t)(v + (v & 0xfffff80) + ((v & 0xfffc000) << 1) +
					((v & 0xfe00000) << 2) + 0x808080);

		memcpy(p, &w, 4);
		return p + 4;
	}
	do {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	} while (v >= 0x80);
	*p++ = (uint8_t)v;
	return p;
}

/*
 * varint_put_redundant4 - @v (< 2^28) as exactly four bytes, the first three
 * with the continuation bit set: the form of a length written before the
 * payload's size is known, patched later in place.
 */
static inline void varint_put_redundant4(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)((v & 0x7f) | 0x80);
	p[1] = (uint8_t)(((v >> 7) & 0x7f) | 0x80);
	p[2] = (uint8_t)(((v >> 14) & 0x7f) | 0x80);
	p[3] = (uint8_t)((v >> 21) & 0x7f);
}

/*
 * varint_get - decode one varint from [*p, end) into @ret and advance *p.
 * Returns: false (nothing consumed) if the bytes end first or the varint
 * runs past VARINT_MAX_LEN bytes.
 */
static inline bool varint_get(const uint8_t **p, const uint8_t *end, uint64_t *ret)
{
	const uint8_t *q = *p;
	uint64_t v = 0;

	for (unsigned k = 0; k < VARINT_MAX_LEN && q < end; k++) {
		uint8_t b = *q++;

		v |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80)) {
			*ret = v;
			*p = q;
			return true;
		}
	}
	return false;
}

static inline uint64_t varint_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t varint_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}
