/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * smb - Perfetto's shared memory buffer: its page/chunk ABI, the producer's
 * trace writers (packet -> fragments -> chunks -> commit list), and the
 * service-side reader (commit list -> chunks -> reassembled packets).
 *
 * Knows nothing of ftrace, /proc or sockets: commits and patches leave as
 * plain structs, and the caller turns them into CommitDataRequest.
 *
 * Threading: a struct smb and all its writers belong to one thread (the
 * producer's main loop); nothing there takes locks.  The only thing shared
 * with another party is the mapped memory, through atomics.  A reader is
 * independent and may run in another thread or process.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protos/pbw.h"

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
 * @page_size (4 KiB..64 KiB, power of two, size % page_size == 0, @base
 * 4096-aligned).  Chunks use one chunk per page, as Perfetto's producers do.
 * Does not take ownership of @base.  Every array the writers need later
 * (commit lists, patch slots) is allocated here.
 * Returns: 0 or -EINVAL/-ENOMEM.
 */
int smb_new(void *base, size_t size, size_t page_size, struct smb **ret);

/**
 * smb_new_from_fd - mmap the memfd the service sent (size from fstat),
 * PROT_READ|PROT_WRITE, MAP_SHARED.  The mapping is owned and unmapped by
 * smb_free(); @fd is not consumed (the caller may close it).
 * Returns: 0, -EINVAL for a bad size or page size, -errno from fstat/mmap.
 */
int smb_new_from_fd(int fd, size_t page_size, struct smb **ret);

/**
 * smb_free - free the arbiter (and the mapping if smb_new_from_fd made it).
 * All writers must have been freed first.
 */
struct smb *smb_free(struct smb *smb);

/**
 * smb_size - bytes in the buffer.  smb_page_size(), smb_base(): its page
 * size and where it is mapped.
 */
size_t smb_size(const struct smb *smb);
size_t smb_page_size(const struct smb *smb);
void *smb_base(const struct smb *smb);

/* One chunk that became Complete and must be named in a CommitData. */
struct smb_chunk_move {
	uint32_t page;
	uint32_t chunk;
	uint32_t target_buffer;
};

/*
 * One 4-byte length fix-up for a chunk that was already released.  @data is
 * a redundant varint; its first byte is never 0 once written.
 */
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
 * valid until the next smb_take_commit() (smb_chunk_bytes() and
 * smb_chunk_release_local() do not touch them).
 */
struct smb_commit {
	const struct smb_chunk_move *moves;
	size_t n_moves;
	const struct smb_patch *patches;
	size_t n_patches;
};

/**
 * smb_take_commit - hand over every chunk released and every patch completed
 * since the last call.  Patches come in the order they were created; those
 * of one chunk are adjacent, and @has_more is set on each one while another
 * patch of the same chunk is still pending (so the service keeps holding
 * the chunk back).  A completed patch is not held back behind an unfinished
 * patch of another chunk, which keeps the slot pool bounded.
 * Returns: true if there is anything to commit.
 */
bool smb_take_commit(struct smb *smb, struct smb_commit *ret);

/**
 * smb_chunk_bytes - shmem emulation: the whole chunk (8-byte header
 * included) that a taken move names, to be sent inline in ChunksToMove.data.
 * Returns: 0, -EINVAL for a bad index, -EBUSY if the chunk is not Complete.
 */
int smb_chunk_bytes(const struct smb *smb, uint32_t page, uint32_t chunk, const void **ret_data,
		    size_t *ret_len);

/**
 * smb_chunk_release_local - shmem emulation: no service reads our buffer,
 * so once the bytes were sent the producer frees the chunk itself
 * (Complete -> Free, header cleared, page word reset when all chunks are
 * free).  Ignores chunks that are not Complete.
 */
void smb_chunk_release_local(struct smb *smb, uint32_t page, uint32_t chunk);

/**
 * smb_pending_moves - chunks released but not yet taken; the producer commits
 * at once when this reaches half the buffer instead of waiting for the cycle.
 */
size_t smb_pending_moves(const struct smb *smb);

/**
 * smb_num_chunks - chunks in the buffer (one per page).
 */
size_t smb_num_chunks(const struct smb *smb);

/**
 * smb_set_commit_hook - called (from inside a write, right after a chunk
 * switch) whenever a chunk is released while pending moves are at least
 * half of the buffer (see smb_set_commit_threshold()), so the owner can send a CommitData before it fills up.
 * The hook may call smb_take_commit() but must not write to any writer.
 */
void smb_set_commit_hook(struct smb *smb, void (*hook)(void *userdata), void *userdata);

/**
 * smb_set_commit_threshold - call the commit hook once @chunks released
 * chunks are pending instead of half the buffer (0 restores that).  A low
 * threshold keeps the pages in flight, and so the pages of the buffer ever
 * touched, few.
 */
void smb_set_commit_threshold(struct smb *smb, size_t chunks);

struct smb_stats {
	uint64_t chunks_released;   /* named in a commit */
	uint64_t chunks_lost;       /* state changed under us: not named */
	uint64_t acquire_failures;  /* no free chunk anywhere */
	uint64_t patch_slots_full;  /* packet dropped: no room to record a patch */
	uint64_t stalls;            /* full, but a chunk freed up while we waited */
};

/**
 * smb_set_stall - when no chunk is free, commit what is pending (the commit
 * hook) and wait up to @max_us for the service to free one before dropping
 * (Perfetto's stall-then-drop).  After a wait that found nothing, further
 * acquisitions drop at once until a chunk is free again.  0 (the default):
 * drop at once.
 */
void smb_set_stall(struct smb *smb, uint32_t max_us);

/**
 * smb_get_stats - counters of the arbiter, for logs and tests.
 */
void smb_get_stats(const struct smb *smb, struct smb_stats *ret);

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
 * Returns: 0, -EINVAL for a bad id, -EEXIST if the id is in use, -ENOMEM.
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
 * closed; any left open are closed here).
 * Returns: 0, or -ENOSPC if the packet was dropped.
 */
int smb_writer_end_packet(struct smb_writer *w);

/**
 * smb_writer_flush - release the current chunk even if not full, so that the
 * next smb_take_commit() names it.
 */
void smb_writer_flush(struct smb_writer *w);

/**
 * smb_writer_sink - the packet sink that writes through @w (not owned): what
 * the producer hands every data source, and what tests use to drive a
 * writer of packets into an SMB of their own.
 */
struct pbw_sink smb_writer_sink(struct smb_writer *w);

/**
 * smb_writer_id - the writer id; smb_writer_target_buffer(): its buffer;
 * smb_writer_get_stats(): its counters.
 */
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
	uint64_t chunks_evicted;    /* dropped unread to stay under max_bytes */
	uint64_t abi_violations;
	uint64_t patches_applied;
	uint64_t patches_failed;
	uint64_t packets_delivered;
	uint64_t packets_invalid;   /* reserved top-level fields, malformed */
	uint64_t packets_lost;      /* fragments that could not be reassembled */
	uint64_t producer_dropped;  /* drop markers written by the producer */
	uint64_t bytes_read;
};

/**
 * smb_reader_new - read chunks of the producer's buffer at @base/@size with
 * @page_size.  @max_bytes bounds the chunks kept waiting for reassembly
 * (oldest are evicted first) and the size of one reassembled packet.  @base
 * may be NULL (size 0) for a reader that only gets smb_reader_move_bytes().
 * Returns: 0, -EINVAL, -ENOMEM.
 */
int smb_reader_new(void *base, size_t size, size_t page_size, size_t max_bytes,
		   struct smb_reader **ret);
/**
 * smb_reader_free - drop every chunk still held and free the reader.
 */
struct smb_reader *smb_reader_free(struct smb_reader *r);

/**
 * smb_reader_allow_buffer - target buffers this producer may write to; a
 * chunk naming another is discarded (as traced does).
 */
int smb_reader_allow_buffer(struct smb_reader *r, uint32_t target_buffer);

/**
 * smb_reader_set_first_sequence_id - sequence ids are handed out per writer
 * id in order of first appearance, starting at @first (default 1), so a
 * service can keep low ids for its own packets.
 */
void smb_reader_set_first_sequence_id(struct smb_reader *r, uint32_t first);

/**
 * smb_reader_move - copy one committed chunk out of shared memory
 * (Complete -> BeingRead -> Free).  Untrusted: every field is checked, and
 * the chunk is freed even when its header is then rejected.
 * Returns: 0, -EAGAIN if the chunk was not Complete, -EBADMSG on ABI
 * violations (bad writer id, target buffer not allowed, duplicate or stale
 * chunk id), -EINVAL for bad indices, -ENOBUFS if the chunk alone exceeds
 * max_bytes.
 */
int smb_reader_move(struct smb_reader *r, const struct smb_chunk_move *m);

/**
 * smb_reader_move_bytes - the shmem-emulation path: a whole chunk (header
 * included, 8..65536 bytes) carried inline in CommitData.
 * Returns: 0, -EBADMSG on ABI violations (counted).
 */
int smb_reader_move_bytes(struct smb_reader *r, uint32_t target_buffer, const void *chunk,
			  size_t len);

/**
 * smb_reader_patch - apply one patch to a chunk already moved and not yet
 * read; with @has_more false the chunk no longer waits for patches.
 * Returns: 0, -EINVAL for a bad writer id / offset, -ENOENT if the chunk is
 * not held (both counted as patches_failed).
 */
int smb_reader_patch(struct smb_reader *r, const struct smb_patch *p);

/**
 * smb_reader_read_packets - hand every packet that is now complete, in
 * chunk-id order per writer, to @cb.  Sequences with a gap or a chunk still
 * waiting for patches stop there until a later call (or @final, which
 * gives up on gaps and unpatched chunks and counts what is lost).
 * Packets failing the service's validation are dropped (packets_invalid).
 * As traced does, previous_packet_dropped is SMB_DATA_LOSS_PRESENT on the
 * first packet of each sequence and on the first packet after any loss.
 * @p->data is valid only during the callback.
 * Returns: number of packets delivered or the first negative @cb result.
 */
int smb_reader_read_packets(struct smb_reader *r, bool final,
			    int (*cb)(const struct smb_packet *p, void *userdata), void *userdata);

/**
 * smb_reader_get_stats - what was read, lost and rejected so far.
 */
void smb_reader_get_stats(const struct smb_reader *r, struct smb_reader_stats *ret);
