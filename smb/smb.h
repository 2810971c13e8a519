/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * smb - Perfetto's shared memory buffer: its page/chunk ABI, the producer's
 * trace writers (packet -> fragments -> chunks -> commit list), and the
 * service-side reader (commit list -> chunks -> reassembled packets).
 *
 * Knows nothing of ftrace, /proc or sockets: commits and patches leave as
 * plain structs, and the caller turns them into CommitDataRequest.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smb/pbw.h"

#define SMB_MIN_PAGE_SIZE 4096u
#define SMB_MAX_PAGE_SIZE 65536u
#define SMB_MAX_CHUNKS_PER_PAGE 14u
#define SMB_MAX_WRITER_ID 32767u
/* A fragment size of 2^28-1 means "the writer gave up on this packet". */
#define SMB_PACKET_SIZE_DROP 0x0FFFFFFFu
/* TracePacket.previous_packet_dropped bits (DataLossReason). */
#define SMB_DATA_LOSS_PRESENT 1u
#define SMB_DATA_LOSS_SMB_FULL 256u

/* ---- the mapped buffer (producer side arbiter) -------------------------- */

struct smb;

/**
 * smb_new - wrap an already mapped region of @size bytes split into pages of
 * @page_size (4 KiB..64 KiB, power of two, size % page_size == 0).  Chunks
 * use one chunk per page, as Perfetto's producers do.  Does not take
 * ownership of @base.
 * Returns: 0 or -EINVAL/-ENOMEM.
 */
int smb_new(void *base, size_t size, size_t page_size, struct smb **ret);

/**
 * smb_new_from_fd - mmap the memfd the service sent (size from fstat).  The
 * mapping is owned and unmapped by smb_free().
 */
int smb_new_from_fd(int fd, size_t page_size, struct smb **ret);

struct smb *smb_free(struct smb *smb);

size_t smb_size(const struct smb *smb);
size_t smb_page_size(const struct smb *smb);
void *smb_base(const struct smb *smb);

/* One chunk that became Complete and must be named in a CommitData. */
struct smb_chunk_move {
	uint32_t page;
	uint32_t chunk;
	uint32_t target_buffer;
};

/* One 4-byte length fix-up for a chunk that was already released. */
struct smb_patch {
	uint32_t target_buffer;
	uint16_t writer_id;
	uint32_t chunk_id;
	uint32_t offset;          /* from the start of the chunk payload */
	uint8_t data[4];
	bool has_more;            /* more patches for this chunk still pending */
};

/*
 * What the next CommitData must carry.  Arrays point into the smb and stay
 * valid until the next smb_* call on it.
 */
struct smb_commit {
	const struct smb_chunk_move *moves;
	size_t n_moves;
	const struct smb_patch *patches;
	size_t n_patches;
};

/**
 * smb_take_commit - hand over every chunk released and every patch completed
 * since the last call.  Returns: true if there is anything to commit.
 */
bool smb_take_commit(struct smb *smb, struct smb_commit *ret);

/**
 * smb_pending_moves - chunks released but not yet taken; the producer commits
 * at once when this reaches half the buffer instead of waiting for the cycle.
 */
size_t smb_pending_moves(const struct smb *smb);
size_t smb_num_chunks(const struct smb *smb);

/**
 * smb_set_commit_hook - called (from inside a write) when pending moves reach
 * half of the buffer, so the owner can send a CommitData before it fills up.
 */
void smb_set_commit_hook(struct smb *smb, void (*hook)(void *userdata), void *userdata);

/* ---- trace writer: one sequence (writer id) into one target buffer ------- */

struct smb_writer;

struct smb_writer_stats {
	uint64_t packets_written;
	uint64_t packets_dropped;   /* lost because no chunk was free */
	uint64_t bytes_written;
	uint64_t chunks_acquired;
	uint64_t patches;
};

/**
 * smb_writer_new - a writer with @writer_id (1..32767) for @target_buffer.
 * Chunk ids start at 0 and are never skipped.
 */
int smb_writer_new(struct smb *smb, uint16_t writer_id, uint32_t target_buffer,
		   struct smb_writer **ret);

/**
 * smb_writer_free - releases the current chunk (like a flush) and frees.
 */
struct smb_writer *smb_writer_free(struct smb_writer *w);

/**
 * smb_writer_begin_packet - start a TracePacket.  The returned cursor writes
 * TracePacket fields; it stays valid until smb_writer_end_packet().  The
 * first packet of a writer carries first_packet_on_sequence, and the first
 * packet after a loss carries previous_packet_dropped; both are written here.
 * Never blocks: with no free chunk the packet goes to the discard sink and is
 * counted as dropped.
 */
struct pbw *smb_writer_begin_packet(struct smb_writer *w);

/**
 * smb_writer_end_packet - finish the packet (all nested messages must be
 * closed).  Returns: 0, or -ENOSPC if the packet was dropped.
 */
int smb_writer_end_packet(struct smb_writer *w);

/**
 * smb_writer_flush - release the current chunk even if not full, so that the
 * next smb_take_commit() names it.
 */
void smb_writer_flush(struct smb_writer *w);

uint16_t smb_writer_id(const struct smb_writer *w);
uint32_t smb_writer_target_buffer(const struct smb_writer *w);
void smb_writer_get_stats(const struct smb_writer *w, struct smb_writer_stats *ret);

/* ---- service-side reader ------------------------------------------------ */

struct smb_reader;

/* One reassembled packet, as the service hands it to a trace file. */
struct smb_packet {
	const uint8_t *data;
	size_t len;
	uint16_t writer_id;
	uint32_t target_buffer;
	uint32_t sequence_id;       /* trusted_packet_sequence_id for this writer */
	uint32_t previous_packet_dropped; /* 0, or DataLossReason bits */
};

struct smb_reader_stats {
	uint64_t chunks_read;
	uint64_t chunks_discarded;  /* not Complete, bad target, bad header */
	uint64_t abi_violations;
	uint64_t patches_applied;
	uint64_t patches_failed;
	uint64_t packets_lost;      /* fragments that could not be reassembled */
	uint64_t producer_dropped;  /* drop markers written by the producer */
	uint64_t bytes_read;
};

/**
 * smb_reader_new - read chunks of the producer's buffer at @base/@size with
 * @page_size.  @max_bytes bounds the chunks kept waiting for reassembly.
 */
int smb_reader_new(void *base, size_t size, size_t page_size, size_t max_bytes,
		   struct smb_reader **ret);
struct smb_reader *smb_reader_free(struct smb_reader *r);

/**
 * smb_reader_allow_buffer - target buffers this producer may write to; a
 * chunk naming another is discarded (as traced does).
 */
int smb_reader_allow_buffer(struct smb_reader *r, uint32_t target_buffer);

/**
 * smb_reader_move - copy one committed chunk out of shared memory
 * (Complete -> BeingRead -> Free).  Untrusted: every field is checked.
 * Returns: 0, -EAGAIN if the chunk was not Complete, -EBADMSG on ABI
 * violations, -EINVAL for bad indices.
 */
int smb_reader_move(struct smb_reader *r, const struct smb_chunk_move *m);

/**
 * smb_reader_move_bytes - the shmem-emulation path: a whole chunk (header
 * included) carried inline in CommitData.
 */
int smb_reader_move_bytes(struct smb_reader *r, uint32_t target_buffer, const void *chunk,
			  size_t len);

/**
 * smb_reader_patch - apply one patch to a chunk already moved.
 */
int smb_reader_patch(struct smb_reader *r, const struct smb_patch *p);

/**
 * smb_reader_read_packets - hand every packet that is now complete, in
 * chunk-id order per writer, to @cb.  Sequences with a gap or a chunk still
 * waiting for patches stop there until a later call (or @final, which
 * gives up on gaps and counts what is lost).
 * Returns: number of packets delivered or the first negative @cb result.
 */
int smb_reader_read_packets(struct smb_reader *r, bool final,
			    int (*cb)(const struct smb_packet *p, void *userdata), void *userdata);

void smb_reader_get_stats(const struct smb_reader *r, struct smb_reader_stats *ret);
