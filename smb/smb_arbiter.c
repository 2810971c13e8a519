/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The producer-side arbiter: owns the mapped pages, hands chunks to writers,
 * collects released chunks and finished patches for the next CommitData.
 *
 * The service shares the page words with us and may be buggy or hostile:
 * chunk bounds always come from our own geometry (never from the page word),
 * only Div1 pages we can recognise are used, and every CAS loop is bounded.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "smb/smb_arbiter.h"
#include "util/util.h"

static bool valid_page_size(size_t page_size)
{
	return page_size >= SMB_MIN_PAGE_SIZE && page_size <= SMB_MAX_PAGE_SIZE &&
	       (page_size & (page_size - 1)) == 0;
}

int smb_new(void *base, size_t size, size_t page_size, struct smb **ret)
{
	_cleanup_free_ struct smb *smb = NULL;
	size_t slots;

	if (!ret || !base || ((uintptr_t)base & (SMB_MIN_PAGE_SIZE - 1)) != 0)
		return -EINVAL;
	if (!valid_page_size(page_size) || size == 0 || size % page_size != 0)
		return -EINVAL;
	/* slot indices are 32-bit */
	if (size / page_size > UINT32_MAX / (PBW_MAX_NESTING + 1))
		return -EINVAL;

	smb = calloc(1, sizeof(*smb));
	if (!smb)
		return -ENOMEM;
	smb->base = base;
	smb->size = size;
	smb->page_size = page_size;
	smb->num_pages = size / page_size;
	smb->chunk_size = smb_layout_chunk_size(page_size, SMB_LAYOUT_DIV1);

	/*
	 * One chunk per page: a chunk can be pending at most once (it must be
	 * freed by the service before we can take it again).
	 */
	smb->moves_cap = smb->num_pages;
	smb->moves = calloc(smb->moves_cap, sizeof(*smb->moves));
	smb->moves_out = calloc(smb->moves_cap, sizeof(*smb->moves_out));

	/*
	 * A released chunk creates at most one patch per open nested level,
	 * and between two takes at most every chunk is released once.
	 */
	slots = smb->num_pages * PBW_MAX_NESTING;
	smb->slots_cap = (uint32_t)slots;
	smb->slots = calloc(slots, sizeof(*smb->slots));
	smb->patches_out = calloc(slots, sizeof(*smb->patches_out));
	if (!smb->moves || !smb->moves_out || !smb->slots || !smb->patches_out) {
		free(smb->moves);
		free(smb->moves_out);
		free(smb->slots);
		free(smb->patches_out);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < smb->slots_cap; i++)
		smb->slots[i].next = i + 2 <= smb->slots_cap ? i + 2 : 0;
	smb->free_head = 1;
	smb->n_free = smb->slots_cap;

	*ret = TAKE_PTR(smb);
	return 0;
}

int smb_new_from_fd(int fd, size_t page_size, struct smb **ret)
{
	struct stat st;
	void *p;
	int r;

	if (fd < 0 || !ret || !valid_page_size(page_size))
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size <= 0 || (uint64_t)st.st_size > SIZE_MAX ||
	    (size_t)st.st_size % page_size != 0)
		return -EINVAL;

	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	r = smb_new(p, (size_t)st.st_size, page_size, ret);
	if (r < 0) {
		(void)munmap(p, (size_t)st.st_size);
		return r;
	}
	(*ret)->owns_mapping = true;
	return 0;
}

struct smb *smb_free(struct smb *smb)
{
	if (!smb)
		return NULL;
	if (smb->owns_mapping)
		(void)munmap(smb->base, smb->size);
	free(smb->moves);
	free(smb->moves_out);
	free(smb->slots);
	free(smb->patches_out);
	free(smb);
	return NULL;
}

size_t smb_size(const struct smb *smb)
{
	return smb->size;
}

size_t smb_page_size(const struct smb *smb)
{
	return smb->page_size;
}

void *smb_base(const struct smb *smb)
{
	return smb->base;
}

size_t smb_num_chunks(const struct smb *smb)
{
	return smb->num_pages;
}

size_t smb_pending_moves(const struct smb *smb)
{
	return smb->n_moves;
}

void smb_get_stats(const struct smb *smb, struct smb_stats *ret)
{
	*ret = smb->stats;
}

void smb_set_commit_hook(struct smb *smb, void (*hook)(void *userdata), void *userdata)
{
	smb->hook = hook;
	smb->hook_userdata = userdata;
}

/* Try to move chunk 0 of @page from Free to BeingWritten, partitioning a free page first. */
static bool try_acquire_page(struct smb *smb, size_t page)
{
	struct smb_page_header *ph = smb_page_header_at(smb->base, smb->page_size, page);

	for (int attempt = 0; attempt < SMB_CAS_ATTEMPTS; attempt++) {
		uint32_t bm = atomic_load_explicit(&ph->bitmap, memory_order_acquire);

		if (bm == 0) {
			/* Losing this race (or winning it) just means: look again. */
			(void)atomic_compare_exchange_strong_explicit(
				&ph->bitmap, &bm, (uint32_t)SMB_LAYOUT_DIV1 << SMB_LAYOUT_SHIFT,
				memory_order_acq_rel, memory_order_acquire);
			continue;
		}
		/* Only layouts we made are ours; anything else is not our business. */
		if (smb_bitmap_layout(bm) != SMB_LAYOUT_DIV1 ||
		    smb_bitmap_chunk_state(bm, 0) != SMB_CHUNK_FREE)
			return false;
		if (atomic_compare_exchange_strong_explicit(
			    &ph->bitmap, &bm, smb_bitmap_with_state(bm, 0, SMB_CHUNK_BEING_WRITTEN),
			    memory_order_acq_rel, memory_order_acquire))
			return true;
	}
	return false;
}

/*
 * The lowest free page, not the next one round-robin: any free chunk is as
 * good to the service, and reusing the same few pages keeps the part of
 * the buffer we ever touch (our resident memory, and the cache) to what is
 * in flight at once instead of the whole buffer.
 */
static int scan_for_chunk(struct smb *smb, uint16_t writer_id, uint32_t chunk_id, uint16_t packets,
			  struct smb_chunk *ret)
{
	for (size_t page = 0; page < smb->num_pages; page++) {
		uint8_t *chunk;

		if (!try_acquire_page(smb, page))
			continue;

		chunk = smb->base + page * smb->page_size + SMB_PAGE_HEADER_SIZE;
		ret->header = (struct smb_chunk_header *)chunk;
		ret->payload = chunk + SMB_CHUNK_HEADER_SIZE;
		ret->end = chunk + smb->chunk_size;
		ret->page = (uint32_t)page;
		atomic_store_explicit(&ret->header->writer_id, writer_id, memory_order_relaxed);
		atomic_store_explicit(&ret->header->chunk_id, chunk_id, memory_order_relaxed);
		atomic_store_explicit(&ret->header->packets, packets, memory_order_release);
		return 0;
	}
	return -ENOSPC;
}

/*
 * The buffer is full: hand everything finished to the service now and give
 * it a moment to copy chunks out, polling the page words (no IPC needed to
 * see them freed).  Bounded: after one stall that found nothing, later
 * acquisitions drop at once until a chunk frees up, so a service that is
 * gone costs one timeout, not one per packet.
 */
static int stall_for_chunk(struct smb *smb, uint16_t writer_id, uint32_t chunk_id, uint16_t packets,
			   struct smb_chunk *ret)
{
	uint64_t waited = 0, step = 50;
	struct timespec ts;

	if (smb->stall_max_us == 0 || smb->stall_failed)
		return -ENOSPC;
	if (smb->hook && !smb->in_hook && smb->n_moves > 0) {
		smb->in_hook = true;
		smb->hook(smb->hook_userdata);
		smb->in_hook = false;
	}
	while (waited < smb->stall_max_us) {
		ts.tv_sec = 0;
		ts.tv_nsec = (long)step * 1000;
		(void)nanosleep(&ts, NULL);
		waited += step;
		step = MIN(step * 2, (uint64_t)1000);
		if (scan_for_chunk(smb, writer_id, chunk_id, packets, ret) == 0) {
			smb->stats.stalls++;
			return 0;
		}
	}
	smb->stall_failed = true;
	return -ENOSPC;
}

/*
 * The lowest free page, not the next one round-robin: any free chunk is as
 * good to the service, and reusing the same few pages keeps the part of
 * the buffer we ever touch (our resident memory, and the cache) to what is
 * in flight at once instead of the whole buffer.
 */
int smb_chunk_acquire(struct smb *smb, uint16_t writer_id, uint32_t chunk_id, uint16_t packets,
		      struct smb_chunk *ret)
{
	if (scan_for_chunk(smb, writer_id, chunk_id, packets, ret) == 0 ||
	    stall_for_chunk(smb, writer_id, chunk_id, packets, ret) == 0) {
		smb->stall_failed = false;
		return 0;
	}
	smb->stats.acquire_failures++;
	return -ENOSPC;
}

void smb_set_stall(struct smb *smb, uint32_t max_us)
{
	smb->stall_max_us = max_us;
	smb->stall_failed = false;
}

void smb_chunk_release(struct smb *smb, struct smb_chunk *c, uint16_t packets,
		       uint32_t target_buffer)
{
	struct smb_page_header *ph = smb_page_header_at(smb->base, smb->page_size, c->page);
	uint32_t page = c->page;
	bool done = false;

	atomic_store_explicit(&c->header->packets, packets, memory_order_release);
	for (int attempt = 0; attempt < SMB_CAS_ATTEMPTS; attempt++) {
		uint32_t bm = atomic_load_explicit(&ph->bitmap, memory_order_acquire);

		if (smb_bitmap_layout(bm) != SMB_LAYOUT_DIV1 ||
		    smb_bitmap_chunk_state(bm, 0) != SMB_CHUNK_BEING_WRITTEN)
			break;
		if (atomic_compare_exchange_strong_explicit(
			    &ph->bitmap, &bm, smb_bitmap_with_state(bm, 0, SMB_CHUNK_COMPLETE),
			    memory_order_acq_rel, memory_order_acquire)) {
			done = true;
			break;
		}
	}
	*c = (struct smb_chunk){};

	/* Someone else changed the state: naming the chunk would not help the service. */
	if (!done || smb->n_moves >= smb->moves_cap) {
		smb->stats.chunks_lost++;
		return;
	}
	smb->moves[smb->n_moves++] = (struct smb_chunk_move){
		.page = page,
		.chunk = 0,
		.target_buffer = target_buffer,
	};
	smb->stats.chunks_released++;
}

/* Our pages are Div1: only chunk 0 of a page exists. */
static struct smb_chunk_header *local_chunk(const struct smb *smb, uint32_t page, uint32_t chunk)
{
	if (page >= smb->num_pages || chunk != 0)
		return NULL;
	return (struct smb_chunk_header *)(smb->base + (size_t)page * smb->page_size +
					   SMB_PAGE_HEADER_SIZE);
}

int smb_chunk_bytes(const struct smb *smb, uint32_t page, uint32_t chunk, const void **ret_data,
		    size_t *ret_len)
{
	struct smb_chunk_header *ch = local_chunk(smb, page, chunk);
	uint32_t bm;

	if (!ch)
		return -EINVAL;
	bm = atomic_load_explicit(&smb_page_header_at(smb->base, smb->page_size, page)->bitmap,
				  memory_order_acquire);
	if (smb_bitmap_layout(bm) != SMB_LAYOUT_DIV1 ||
	    smb_bitmap_chunk_state(bm, 0) != SMB_CHUNK_COMPLETE)
		return -EBUSY;
	*ret_data = ch;
	*ret_len = smb->chunk_size;
	return 0;
}

void smb_chunk_release_local(struct smb *smb, uint32_t page, uint32_t chunk)
{
	struct smb_chunk_header *ch = local_chunk(smb, page, chunk);
	struct smb_page_header *ph;

	if (!ch)
		return;
	ph = smb_page_header_at(smb->base, smb->page_size, page);
	for (int attempt = 0; attempt < SMB_CAS_ATTEMPTS; attempt++) {
		uint32_t bm = atomic_load_explicit(&ph->bitmap, memory_order_acquire);

		if (smb_bitmap_layout(bm) != SMB_LAYOUT_DIV1 ||
		    smb_bitmap_chunk_state(bm, 0) != SMB_CHUNK_COMPLETE)
			return;
		atomic_store_explicit(&ch->writer_id, 0, memory_order_relaxed);
		atomic_store_explicit(&ch->chunk_id, 0, memory_order_relaxed);
		atomic_store_explicit(&ch->packets, 0, memory_order_release);
		/* Div1: the only chunk is free, so the whole page is */
		if (atomic_compare_exchange_strong_explicit(&ph->bitmap, &bm, 0,
							    memory_order_acq_rel,
							    memory_order_acquire))
			return;
	}
}

void smb_set_commit_threshold(struct smb *smb, size_t chunks)
{
	smb->commit_threshold = chunks;
}

void smb_maybe_commit(struct smb *smb)
{
	size_t threshold = smb->commit_threshold ? smb->commit_threshold : (smb->num_pages + 1) / 2;

	if (!smb->hook || smb->in_hook || smb->n_moves < threshold)
		return;
	smb->in_hook = true;
	smb->hook(smb->hook_userdata);
	smb->in_hook = false;
}

uint8_t *smb_patch_alloc(struct smb *smb, uint32_t target_buffer, uint16_t writer_id,
			 uint32_t chunk_id, uint32_t offset)
{
	struct smb_patch_slot *s;
	uint32_t idx = smb->free_head;

	if (idx == 0)
		return NULL;
	s = &smb->slots[idx - 1];
	smb->free_head = s->next;
	smb->n_free--;

	*s = (struct smb_patch_slot){
		.patch = {
			.target_buffer = target_buffer,
			.writer_id = writer_id,
			.chunk_id = chunk_id,
			.offset = offset,
		},
		.prev = smb->live_tail,
	};
	if (smb->live_tail)
		smb->slots[smb->live_tail - 1].next = idx;
	else
		smb->live_head = idx;
	smb->live_tail = idx;
	return s->patch.data;
}

static void patch_slot_free(struct smb *smb, uint32_t idx)
{
	struct smb_patch_slot *s = &smb->slots[idx - 1];

	if (s->prev)
		smb->slots[s->prev - 1].next = s->next;
	else
		smb->live_head = s->next;
	if (s->next)
		smb->slots[s->next - 1].prev = s->prev;
	else
		smb->live_tail = s->prev;
	s->prev = 0;
	s->next = smb->free_head;
	smb->free_head = idx;
	smb->n_free++;
}

static bool same_chunk(const struct smb_patch *a, const struct smb_patch *b)
{
	return a->writer_id == b->writer_id && a->chunk_id == b->chunk_id &&
	       a->target_buffer == b->target_buffer;
}

static bool patch_done(const struct smb_patch *p)
{
	/* A redundant varint never starts with 0: 0 means not written yet. */
	return p->data[0] != 0;
}

/* Emit the finished patches of the run of slots for one chunk starting at @idx. */
static uint32_t take_chunk_patches(struct smb *smb, uint32_t idx, size_t *n_out)
{
	uint32_t end = idx, pending = 0, done = 0, emitted = 0;
	const struct smb_patch *first = &smb->slots[idx - 1].patch;

	while (end && same_chunk(&smb->slots[end - 1].patch, first)) {
		if (patch_done(&smb->slots[end - 1].patch))
			done++;
		else
			pending++;
		end = smb->slots[end - 1].next;
	}

	while (idx != end) {
		uint32_t next = smb->slots[idx - 1].next;
		struct smb_patch *p = &smb->slots[idx - 1].patch;

		if (patch_done(p)) {
			struct smb_patch *o = &smb->patches_out[(*n_out)++];

			*o = *p;
			emitted++;
			o->has_more = emitted < done || pending > 0;
			patch_slot_free(smb, idx);
		}
		idx = next;
	}
	return end;
}

bool smb_take_commit(struct smb *smb, struct smb_commit *ret)
{
	struct smb_chunk_move *tmp;
	size_t n_patches = 0;

	tmp = smb->moves_out;
	smb->moves_out = smb->moves;
	smb->moves = tmp;
	ret->moves = smb->moves_out;
	ret->n_moves = smb->n_moves;
	smb->n_moves = 0;

	for (uint32_t idx = smb->live_head; idx;)
		idx = take_chunk_patches(smb, idx, &n_patches);
	ret->patches = smb->patches_out;
	ret->n_patches = n_patches;

	return ret->n_moves > 0 || ret->n_patches > 0;
}

int smb_writer_id_claim(struct smb *smb, uint16_t writer_id)
{
	uint64_t bit = UINT64_C(1) << (writer_id % 64);

	if (writer_id == 0 || writer_id > SMB_MAX_WRITER_ID)
		return -EINVAL;
	if (smb->writer_ids[writer_id / 64] & bit)
		return -EEXIST;
	smb->writer_ids[writer_id / 64] |= bit;
	return 0;
}

void smb_writer_id_release(struct smb *smb, uint16_t writer_id)
{
	if (writer_id == 0 || writer_id > SMB_MAX_WRITER_ID)
		return;
	smb->writer_ids[writer_id / 64] &= ~(UINT64_C(1) << (writer_id % 64));
}
