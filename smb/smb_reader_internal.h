/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Service-side reader internals shared by smb_reader.c (moving chunks out of
 * shared memory, patches, memory bound) and smb_reader_read.c (fragments,
 * reassembly, validation).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smb/smb.h"
#include "smb/smb_abi.h"

/* One copied chunk, waiting to be read. */
struct smb_chunk_rec {
	struct smb_chunk_rec *prev, *next;         /* in its sequence, by chunk id */
	struct smb_chunk_rec *age_prev, *age_next; /* all chunks, by arrival */
	struct smb_seq *seq;
	size_t alloc_size;        /* counted against max_bytes */
	uint32_t chunk_id;
	uint16_t count;           /* fragments */
	uint8_t flags;            /* SMB_CHUNK_FLAG_* */
	bool started;             /* gap and patch checks passed, reading began */
	uint16_t frag_read;
	uint32_t offset;          /* of the next fragment in the payload */
	uint32_t payload_size;
	uint8_t data[];           /* chunk header + payload, a private copy */
};

/* One (writer id, target buffer) stream. */
struct smb_seq {
	struct smb_seq *next_same_writer;
	uint16_t writer_id;
	uint32_t target_buffer;
	uint32_t sequence_id;
	struct smb_chunk_rec *head, *tail;
	bool have_next;           /* next_id is the only chunk that may follow */
	uint32_t next_id;
	bool evicted;             /* chunks up to evicted_upto were thrown away */
	uint32_t evicted_upto;
	bool loss;                /* the next packet gets previous_packet_dropped */
	bool partial;             /* a packet is being reassembled in buf */
	uint8_t *buf;
	size_t len;
	size_t cap;
};

struct smb_reader {
	uint8_t *base;
	size_t size;
	size_t page_size;
	size_t num_pages;
	size_t max_bytes;
	size_t held_bytes;

	struct smb_chunk_rec *age_head, *age_tail;
	struct smb_seq **seqs;    /* in order of creation */
	size_t n_seqs;
	size_t seqs_cap;
	uint32_t *seq_by_writer;  /* index + 1 into seqs of the writer's first sequence */
	uint32_t next_sequence_id;

	uint32_t *allowed;
	size_t n_allowed;
	size_t allowed_cap;

	struct smb_reader_stats stats;
};

static inline uint8_t *smb_chunk_rec_payload(struct smb_chunk_rec *c)
{
	return c->data + SMB_CHUNK_HEADER_SIZE;
}

/* true if chunk id @a comes before @b (serial number arithmetic, ids wrap) */
static inline bool smb_chunk_id_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* Unlink @c from its sequence and the age list and free it. */
void smb_reader_drop_chunk(struct smb_reader *r, struct smb_chunk_rec *c);

/* Validate a reassembled packet as traced's PacketStreamValidator does. */
bool smb_reader_packet_valid(const uint8_t *p, size_t len);
