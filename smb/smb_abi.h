/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The shared memory ABI between producer and service (internal to smb/).
 *
 * The buffer is an array of pages.  Each page starts with an 8-byte page
 * header; the rest is split into 1..14 chunks by the page layout.  Each chunk
 * starts with an 8-byte chunk header followed by the payload (fragments).
 * Both sides treat every word here as written by an untrusted peer.
 *
 * struct smb_page_header:
 *   @bitmap:   bits [2i+1:2i] state of chunk i (enum smb_chunk_state),
 *              bits [30:28] enum smb_page_layout, bit 31 reserved.
 *              0 means "free, not partitioned".
 *   @reserved: 0.
 *
 * struct smb_chunk_header:
 *   @chunk_id:  per-writer sequence number, wraps at 2^32.
 *   @writer_id: 1..32767.
 *   @packets:   bits 0-9 fragment count, bits 10-15 SMB_CHUNK_FLAG_*.
 */

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum smb_chunk_state {
	SMB_CHUNK_FREE = 0,
	SMB_CHUNK_BEING_WRITTEN = 1,
	SMB_CHUNK_BEING_READ = 2,
	SMB_CHUNK_COMPLETE = 3,
};

enum smb_page_layout {
	SMB_LAYOUT_NOT_PARTITIONED = 0,
	SMB_LAYOUT_DIV1 = 1,
	SMB_LAYOUT_DIV2 = 2,
	SMB_LAYOUT_DIV4 = 3,
	SMB_LAYOUT_DIV7 = 4,
	SMB_LAYOUT_DIV14 = 5,
	_SMB_LAYOUT_MAX = 8, /* 6 and 7 are reserved: 0 chunks */
};

#define SMB_PAGE_HEADER_SIZE 8u
#define SMB_CHUNK_HEADER_SIZE 8u
#define SMB_LAYOUT_SHIFT 28
#define SMB_LAYOUT_MASK 0x70000000u
#define SMB_ALL_CHUNKS_MASK 0x0FFFFFFFu
#define SMB_CHUNK_STATE_MASK 0x3u

#define SMB_CHUNK_FLAG_FIRST_CONTINUES (1u << 0)
#define SMB_CHUNK_FLAG_LAST_CONTINUES (1u << 1)
#define SMB_CHUNK_FLAG_NEEDS_PATCHING (1u << 2)
#define SMB_CHUNK_FLAGS_KNOWN 0x7u
#define SMB_PACKETS_COUNT_MASK 0x3FFu
#define SMB_PACKETS_FLAGS_SHIFT 10
#define SMB_MAX_FRAGMENTS 1023u
/* Perfetto's writer leaves one count free; we switch chunk at the same point. */
#define SMB_SWITCH_AT_FRAGMENTS 1022u

/* Longest fragment size prefix (a redundant varint) */
#define SMB_PACKET_HEADER_SIZE 4u
/* No new packet is started in a chunk with fewer bytes left than this. */
#define SMB_MIN_PACKET_ROOM (SMB_PACKET_HEADER_SIZE + 8u)

/* Bounded CAS retries: a hostile peer must never make us spin. */
#define SMB_CAS_ATTEMPTS 64

struct smb_page_header {
	_Atomic uint32_t bitmap;
	uint32_t reserved;
};

struct smb_chunk_header {
	_Atomic uint32_t chunk_id;
	_Atomic uint16_t writer_id;
	_Atomic uint16_t packets;
};

static_assert(sizeof(struct smb_page_header) == SMB_PAGE_HEADER_SIZE, "page header is 8 bytes");
static_assert(offsetof(struct smb_page_header, bitmap) == 0, "bitmap at offset 0");
static_assert(sizeof(struct smb_chunk_header) == SMB_CHUNK_HEADER_SIZE, "chunk header is 8 bytes");
static_assert(offsetof(struct smb_chunk_header, chunk_id) == 0, "chunk_id at offset 0");
static_assert(offsetof(struct smb_chunk_header, writer_id) == 4, "writer_id at offset 4");
static_assert(offsetof(struct smb_chunk_header, packets) == 6, "packets at offset 6");
static_assert(sizeof(_Atomic uint32_t) == 4 && sizeof(_Atomic uint16_t) == 2, "plain-sized atomics");

static inline unsigned smb_layout_num_chunks(unsigned layout)
{
	static const uint8_t n[_SMB_LAYOUT_MAX] = { 0, 1, 2, 4, 7, 14, 0, 0 };

	return layout < _SMB_LAYOUT_MAX ? n[layout] : 0;
}

/* Chunk size for @layout: the page minus its header, split evenly, 4-aligned. */
static inline size_t smb_layout_chunk_size(size_t page_size, unsigned layout)
{
	unsigned n = smb_layout_num_chunks(layout);

	if (n == 0 || page_size <= SMB_PAGE_HEADER_SIZE)
		return 0;
	return ((page_size - SMB_PAGE_HEADER_SIZE) / n) & ~(size_t)3;
}

static inline unsigned smb_bitmap_layout(uint32_t bitmap)
{
	return (bitmap & SMB_LAYOUT_MASK) >> SMB_LAYOUT_SHIFT;
}

static inline unsigned smb_bitmap_chunk_state(uint32_t bitmap, unsigned chunk)
{
	return (bitmap >> (2 * chunk)) & SMB_CHUNK_STATE_MASK;
}

static inline uint32_t smb_bitmap_with_state(uint32_t bitmap, unsigned chunk, unsigned state)
{
	bitmap &= ~(SMB_CHUNK_STATE_MASK << (2 * chunk));
	return bitmap | ((uint32_t)state << (2 * chunk));
}

static inline uint16_t smb_packets_make(unsigned count, unsigned flags)
{
	return (uint16_t)((count & SMB_PACKETS_COUNT_MASK) | (flags << SMB_PACKETS_FLAGS_SHIFT));
}

static inline unsigned smb_packets_count(uint16_t packets)
{
	return packets & SMB_PACKETS_COUNT_MASK;
}

static inline unsigned smb_packets_flags(uint16_t packets)
{
	return packets >> SMB_PACKETS_FLAGS_SHIFT;
}

static inline struct smb_page_header *smb_page_header_at(uint8_t *base, size_t page_size, size_t page)
{
	return (struct smb_page_header *)(base + page * page_size);
}
