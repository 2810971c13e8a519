/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service side of the SMB: move committed chunks out of shared memory
 * (Complete -> BeingRead -> Free), keep private copies per writer sequence
 * under a memory bound, and apply out-of-band patches to them.
 *
 * Everything in shared memory and in the commit requests is untrusted: the
 * chunk is copied once and only the copy is looked at, every index is
 * checked, and every CAS loop is bounded.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "smb/smb_reader_internal.h"
#include "util/util.h"

#define SMB_MAX_CHUNK_BYTES 65536u

int smb_reader_new(void *base, size_t size, size_t page_size, size_t max_bytes,
		   struct smb_reader **ret)
{
	_cleanup_free_ struct smb_reader *r = NULL;

	if (!ret || max_bytes == 0)
		return -EINVAL;
	if (base) {
		if (page_size < SMB_MIN_PAGE_SIZE || page_size > SMB_MAX_PAGE_SIZE ||
		    (page_size & (page_size - 1)) != 0 || size == 0 || size % page_size != 0)
			return -EINVAL;
	} else if (size != 0) {
		return -EINVAL;
	}

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->seq_by_writer = calloc(SMB_MAX_WRITER_ID + 1, sizeof(*r->seq_by_writer));
	if (!r->seq_by_writer)
		return -ENOMEM;
	r->base = base;
	r->size = size;
	r->page_size = page_size;
	r->num_pages = base ? size / page_size : 0;
	r->max_bytes = max_bytes;
	r->next_sequence_id = 1;
	*ret = TAKE_PTR(r);
	return 0;
}

struct smb_reader *smb_reader_free(struct smb_reader *r)
{
	if (!r)
		return NULL;
	while (r->age_head)
		smb_reader_drop_chunk(r, r->age_head);
	for (size_t i = 0; i < r->n_seqs; i++) {
		free(r->seqs[i]->buf);
		free(r->seqs[i]);
	}
	free(r->seqs);
	free(r->seq_by_writer);
	free(r->allowed);
	free(r);
	return NULL;
}

int smb_reader_allow_buffer(struct smb_reader *r, uint32_t target_buffer)
{
	for (size_t i = 0; i < r->n_allowed; i++)
		if (r->allowed[i] == target_buffer)
			return 0;
	if (r->n_allowed == r->allowed_cap) {
		size_t cap = r->allowed_cap ? r->allowed_cap * 2 : 4;
		uint32_t *a = reallocarray(r->allowed, cap, sizeof(*a));

		if (!a)
			return -ENOMEM;
		r->allowed = a;
		r->allowed_cap = cap;
	}
	r->allowed[r->n_allowed++] = target_buffer;
	return 0;
}

void smb_reader_set_first_sequence_id(struct smb_reader *r, uint32_t first)
{
	if (r->n_seqs == 0 && first > 0)
		r->next_sequence_id = first;
}

void smb_reader_get_stats(const struct smb_reader *r, struct smb_reader_stats *ret)
{
	*ret = r->stats;
}

static bool buffer_allowed(const struct smb_reader *r, uint32_t target_buffer)
{
	for (size_t i = 0; i < r->n_allowed; i++)
		if (r->allowed[i] == target_buffer)
			return true;
	return false;
}

static struct smb_seq *find_seq(const struct smb_reader *r, uint16_t writer_id,
				uint32_t target_buffer)
{
	uint32_t idx = r->seq_by_writer[writer_id];
	struct smb_seq *s = idx ? r->seqs[idx - 1] : NULL;

	while (s && s->target_buffer != target_buffer)
		s = s->next_same_writer;
	return s;
}

static struct smb_seq *get_seq(struct smb_reader *r, uint16_t writer_id, uint32_t target_buffer)
{
	struct smb_seq *s = find_seq(r, writer_id, target_buffer), *first;
	uint32_t idx;

	if (s)
		return s;
	if (r->n_seqs == r->seqs_cap) {
		size_t cap = r->seqs_cap ? r->seqs_cap * 2 : 8;
		struct smb_seq **a = reallocarray(r->seqs, cap, sizeof(*a));

		if (!a)
			return NULL;
		r->seqs = a;
		r->seqs_cap = cap;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->writer_id = writer_id;
	s->target_buffer = target_buffer;
	/* traced marks the first packet it reads of every sequence */
	s->loss = true;

	idx = r->seq_by_writer[writer_id];
	first = idx ? r->seqs[idx - 1] : NULL;
	if (first) {
		/* one trusted sequence id per writer, whatever buffer it writes to */
		s->sequence_id = first->sequence_id;
		s->next_same_writer = first->next_same_writer;
		first->next_same_writer = s;
	} else {
		s->sequence_id = r->next_sequence_id++;
		r->seq_by_writer[writer_id] = (uint32_t)r->n_seqs + 1;
	}
	r->seqs[r->n_seqs++] = s;
	return s;
}

void smb_reader_drop_chunk(struct smb_reader *r, struct smb_chunk_rec *c)
{
	struct smb_seq *s = c->seq;

	if (c->prev)
		c->prev->next = c->next;
	else
		s->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->tail = c->prev;

	if (c->age_prev)
		c->age_prev->age_next = c->age_next;
	else
		r->age_head = c->age_next;
	if (c->age_next)
		c->age_next->age_prev = c->age_prev;
	else
		r->age_tail = c->age_prev;

	r->held_bytes -= c->alloc_size;
	free(c);
}

static void note_evicted(struct smb_seq *s, uint32_t chunk_id)
{
	if (!s->evicted || smb_chunk_id_before(s->evicted_upto, chunk_id))
		s->evicted_upto = chunk_id;
	s->evicted = true;
	s->loss = true;
}

/* Throw away the oldest unread chunk to stay under max_bytes. */
static void evict_oldest(struct smb_reader *r)
{
	struct smb_chunk_rec *c = r->age_head;
	struct smb_seq *s = c->seq;

	/* A half-read chunk already set next_id: what follows it stays readable. */
	note_evicted(s, c->chunk_id);
	r->stats.chunks_evicted++;
	smb_reader_drop_chunk(r, c);
}

/* Takes ownership of @c (its data[] already holds the private copy). */
static int ingest(struct smb_reader *r, uint32_t target_buffer, struct smb_chunk_rec *c,
		  size_t chunk_len)
{
	struct smb_seq *s;
	struct smb_chunk_rec *p;
	uint32_t chunk_id;
	uint16_t writer_id, packets;

	memcpy(&chunk_id, c->data, 4);
	memcpy(&writer_id, c->data + 4, 2);
	memcpy(&packets, c->data + 6, 2);

	if (writer_id == 0 || writer_id > SMB_MAX_WRITER_ID || !buffer_allowed(r, target_buffer)) {
		r->stats.chunks_discarded++;
		r->stats.abi_violations++;
		free(c);
		return -EBADMSG;
	}
	s = get_seq(r, writer_id, target_buffer);
	if (!s) {
		free(c);
		return -ENOMEM;
	}

	c->seq = s;
	c->chunk_id = chunk_id;
	c->count = (uint16_t)smb_packets_count(packets);
	c->flags = (uint8_t)(smb_packets_flags(packets) & SMB_CHUNK_FLAGS_KNOWN);
	c->payload_size = (uint32_t)(chunk_len - SMB_CHUNK_HEADER_SIZE);

	/* Older than what was already read: a late duplicate. */
	if (s->have_next && smb_chunk_id_before(chunk_id, s->next_id)) {
		r->stats.chunks_discarded++;
		r->stats.abi_violations++;
		free(c);
		return -EBADMSG;
	}
	for (p = s->tail; p && smb_chunk_id_before(chunk_id, p->chunk_id); p = p->prev)
		;
	if (p && p->chunk_id == chunk_id) {
		r->stats.chunks_discarded++;
		r->stats.abi_violations++;
		free(c);
		return -EBADMSG;
	}

	if (c->alloc_size > r->max_bytes) {
		note_evicted(s, chunk_id);
		r->stats.chunks_evicted++;
		free(c);
		return -ENOBUFS;
	}
	while (r->age_head && r->held_bytes + c->alloc_size > r->max_bytes) {
		/* the neighbour we link to may be the one evicted */
		if (r->age_head == p)
			p = p->prev;
		evict_oldest(r);
	}

	c->prev = p;
	c->next = p ? p->next : s->head;
	if (c->next)
		c->next->prev = c;
	else
		s->tail = c;
	if (p)
		p->next = c;
	else
		s->head = c;

	c->age_prev = r->age_tail;
	c->age_next = NULL;
	if (r->age_tail)
		r->age_tail->age_next = c;
	else
		r->age_head = c;
	r->age_tail = c;
	r->held_bytes += c->alloc_size;
	r->stats.chunks_read++;
	r->stats.bytes_read += chunk_len;
	return 0;
}

static struct smb_chunk_rec *chunk_rec_alloc(size_t chunk_len)
{
	size_t n = sizeof(struct smb_chunk_rec) + chunk_len;
	struct smb_chunk_rec *c = malloc(n);

	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->alloc_size = n;
	return c;
}

/* Free the chunk in shared memory: BeingRead -> Free, the page word -> 0 when all are free. */
static void free_shared_chunk(struct smb_page_header *ph, unsigned chunk)
{
	for (int attempt = 0; attempt < SMB_CAS_ATTEMPTS; attempt++) {
		uint32_t bm = atomic_load_explicit(&ph->bitmap, memory_order_acquire);
		uint32_t next;

		if (smb_bitmap_chunk_state(bm, chunk) != SMB_CHUNK_BEING_READ)
			return; /* the producer changed it: not ours to fix */
		next = smb_bitmap_with_state(bm, chunk, SMB_CHUNK_FREE);
		if ((next & SMB_ALL_CHUNKS_MASK) == 0)
			next = 0;
		if (atomic_compare_exchange_strong_explicit(&ph->bitmap, &bm, next,
							    memory_order_acq_rel,
							    memory_order_acquire))
			return;
	}
}

int smb_reader_move(struct smb_reader *r, const struct smb_chunk_move *m)
{
	struct smb_page_header *ph;
	struct smb_chunk_header *ch;
	struct smb_chunk_rec *c;
	size_t chunk_size = 0;
	unsigned layout = 0;
	bool acquired = false;

	if (!r->base || m->page >= r->num_pages || m->chunk >= SMB_MAX_CHUNKS_PER_PAGE) {
		r->stats.chunks_discarded++;
		return -EINVAL;
	}
	ph = smb_page_header_at(r->base, r->page_size, m->page);
	for (int attempt = 0; attempt < SMB_CAS_ATTEMPTS && !acquired; attempt++) {
		uint32_t bm = atomic_load_explicit(&ph->bitmap, memory_order_acquire);

		layout = smb_bitmap_layout(bm);
		if (m->chunk >= smb_layout_num_chunks(layout)) {
			r->stats.chunks_discarded++;
			return -EINVAL;
		}
		if (smb_bitmap_chunk_state(bm, m->chunk) != SMB_CHUNK_COMPLETE)
			break;
		acquired = atomic_compare_exchange_strong_explicit(
			&ph->bitmap, &bm, smb_bitmap_with_state(bm, m->chunk, SMB_CHUNK_BEING_READ),
			memory_order_acq_rel, memory_order_acquire);
	}
	if (!acquired) {
		r->stats.chunks_discarded++;
		return -EAGAIN;
	}

	/* Geometry from the layout we won the CAS with; always inside the page. */
	chunk_size = smb_layout_chunk_size(r->page_size, layout);
	ch = (struct smb_chunk_header *)((uint8_t *)ph + SMB_PAGE_HEADER_SIZE +
					 (size_t)m->chunk * chunk_size);
	c = chunk_rec_alloc(chunk_size);
	if (c)
		memcpy(c->data, ch, chunk_size);

	atomic_store_explicit(&ch->writer_id, 0, memory_order_relaxed);
	atomic_store_explicit(&ch->chunk_id, 0, memory_order_relaxed);
	atomic_store_explicit(&ch->packets, 0, memory_order_release);
	free_shared_chunk(ph, m->chunk);

	if (!c)
		return -ENOMEM;
	return ingest(r, m->target_buffer, c, chunk_size);
}

int smb_reader_move_bytes(struct smb_reader *r, uint32_t target_buffer, const void *chunk,
			  size_t len)
{
	struct smb_chunk_rec *c;

	if (!chunk || len < SMB_CHUNK_HEADER_SIZE || len > SMB_MAX_CHUNK_BYTES) {
		r->stats.chunks_discarded++;
		r->stats.abi_violations++;
		return -EBADMSG;
	}
	c = chunk_rec_alloc(len);
	if (!c)
		return -ENOMEM;
	memcpy(c->data, chunk, len);
	return ingest(r, target_buffer, c, len);
}

int smb_reader_patch(struct smb_reader *r, const struct smb_patch *p)
{
	struct smb_seq *s;
	struct smb_chunk_rec *c;

	if (p->writer_id == 0 || p->writer_id > SMB_MAX_WRITER_ID) {
		r->stats.patches_failed++;
		return -EINVAL;
	}
	s = find_seq(r, p->writer_id, p->target_buffer);
	for (c = s ? s->head : NULL; c && c->chunk_id != p->chunk_id; c = c->next)
		;
	/* Already read (even in part) or never seen: too late to change it. */
	if (!c || c->started) {
		r->stats.patches_failed++;
		return -ENOENT;
	}
	if (c->payload_size < PBW_SIZE_FIELD_LEN || p->offset > c->payload_size - PBW_SIZE_FIELD_LEN) {
		r->stats.patches_failed++;
		return -EINVAL;
	}
	memcpy(smb_chunk_rec_payload(c) + p->offset, p->data, PBW_SIZE_FIELD_LEN);
	if (!p->has_more)
		c->flags &= (uint8_t)~SMB_CHUNK_FLAG_NEEDS_PATCHING;
	r->stats.patches_applied++;
	return 0;
}
