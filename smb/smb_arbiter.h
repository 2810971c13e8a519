/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Producer-side arbiter internals shared by smb_arbiter.c and smb_writer.c:
 * chunk acquisition and release on the mapped pages, the pending commit
 * lists and the patch slot pool.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smb/smb.h"
#include "smb/smb_abi.h"

/* A chunk this process is writing: all bounds come from our own geometry. */
struct smb_chunk {
	struct smb_chunk_header *header;
	uint8_t *payload;         /* header + 8 */
	uint8_t *end;             /* one past the last payload byte */
	uint32_t page;
};

/*
 * A patch waiting for its nested message to end.  The redirected size field
 * of the pbw points at patch.data, so slots never move.  Live slots form a
 * list in creation order (indices + 1; 0 ends the list).
 */
struct smb_patch_slot {
	struct smb_patch patch;
	uint32_t prev;
	uint32_t next;
};

struct smb {
	uint8_t *base;
	size_t size;
	size_t page_size;
	size_t num_pages;
	size_t chunk_size;        /* Div1 */
	bool owns_mapping;

	/* released chunks not yet taken, and the array handed out by take */
	struct smb_chunk_move *moves;
	struct smb_chunk_move *moves_out;
	size_t n_moves;
	size_t moves_cap;

	struct smb_patch_slot *slots;
	uint32_t slots_cap;
	uint32_t free_head;       /* singly linked through .next */
	uint32_t live_head;
	uint32_t live_tail;
	uint32_t n_free;
	struct smb_patch *patches_out;

	void (*hook)(void *userdata);
	void *hook_userdata;
	size_t commit_threshold;        /* pending moves that call the hook; 0: half */
	bool in_hook;
	uint32_t stall_max_us;    /* 0: drop at once when full */
	bool stall_failed;        /* the last stall found nothing: do not wait again */

	uint64_t writer_ids[(SMB_MAX_WRITER_ID + 1) / 64];
	struct smb_stats stats;
};

/*
 * smb_chunk_acquire - find a free chunk (partitioning free pages as Div1),
 * move it Free -> BeingWritten and write its header.  Never blocks.
 * Returns: 0 or -ENOSPC.
 */
int smb_chunk_acquire(struct smb *smb, uint16_t writer_id, uint32_t chunk_id, uint16_t packets,
		      struct smb_chunk *ret);

/*
 * smb_chunk_release - publish @packets, mark the chunk Complete (release) and
 * queue it for the next commit.  The chunk must not be touched afterwards.
 */
void smb_chunk_release(struct smb *smb, struct smb_chunk *c, uint16_t packets,
		       uint32_t target_buffer);

/* Room for @n more patches? */
static inline bool smb_patch_slots_available(const struct smb *smb, size_t n)
{
	return smb->n_free >= n;
}

/*
 * smb_patch_alloc - a zeroed patch slot for (@writer_id, @chunk_id, @offset).
 * Returns: the 4 bytes the nested length is redirected to, or NULL.
 */
uint8_t *smb_patch_alloc(struct smb *smb, uint32_t target_buffer, uint16_t writer_id,
			 uint32_t chunk_id, uint32_t offset);

/* Run the commit hook if pending moves reached half the buffer. */
void smb_maybe_commit(struct smb *smb);

int smb_writer_id_claim(struct smb *smb, uint16_t writer_id);
void smb_writer_id_release(struct smb *smb, uint16_t writer_id);
