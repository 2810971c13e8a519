/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading packets back out of the copied chunks, the way traced's
 * TraceBufferV1 does: per sequence in chunk-id order, fragments stitched
 * across chunks, stopping at gaps and at chunks that still wait for
 * patches, and flagging the first packet after any loss.
 */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "smb/smb_reader_internal.h"
#include "util/util.h"
#include "util/util_varint.h"

/* Top-level TracePacket fields only the service may write. */
static const uint32_t reserved_fields[] = { 3, 10, 33, 35, 36, 50, 69, 79, 98, 124, 125, 133 };

#define MAX_LD_LEN 0x0FFFFFFFu

bool smb_reader_packet_valid(const uint8_t *p, size_t len)
{
	const uint8_t *q = p, *end = p + len;

	while (q < end) {
		uint64_t tag, v;
		uint32_t field;

		if (!varint_get(&q, end, &tag))
			return false;
		field = (uint32_t)(tag >> 3);
		for (size_t k = 0; k < ARRAY_SIZE(reserved_fields); k++)
			if (field == reserved_fields[k])
				return false;

		switch (tag & 7) {
		case 0:
			if (!varint_get(&q, end, &v))
				return false;
			break;
		case 1:
			if (end - q < 8)
				return false;
			q += 8;
			break;
		case 5:
			if (end - q < 4)
				return false;
			q += 4;
			break;
		case 2:
			if (!varint_get(&q, end, &v) || v > MAX_LD_LEN || v > (uint64_t)(end - q))
				return false;
			q += v;
			break;
		default:
			/* groups (3, 4) and the undefined wire types 6, 7 */
			return false;
		}
	}
	return true;
}

static void lose_partial(struct smb_reader *r, struct smb_seq *s)
{
	if (s->partial)
		r->stats.packets_lost++;
	s->partial = false;
	s->len = 0;
	s->loss = true;
}

static bool gap_is_permanent(const struct smb_seq *s)
{
	return s->evicted && !smb_chunk_id_before(s->evicted_upto, s->next_id);
}

static int partial_append(struct smb_reader *r, struct smb_seq *s, const uint8_t *data,
			  size_t size)
{
	if (size > r->max_bytes - MIN(s->len, r->max_bytes))
		return -EFBIG;
	if (s->len + size > s->cap) {
		size_t cap = MAX(s->cap * 2, s->len + size);
		uint8_t *b;

		cap = MIN(MAX(cap, (size_t)4096), r->max_bytes);
		b = realloc(s->buf, cap);
		if (!b)
			return -ENOMEM;
		s->buf = b;
		s->cap = cap;
	}
	if (size > 0)
		memcpy(s->buf + s->len, data, size);
	s->len += size;
	return 0;
}

/* Returns: 1 delivered, 0 dropped as invalid, or the negative callback result. */
static int deliver(struct smb_reader *r, struct smb_seq *s, const uint8_t *data, size_t len,
		   int (*cb)(const struct smb_packet *p, void *userdata), void *userdata)
{
	struct smb_packet pkt;
	int k;

	if (!smb_reader_packet_valid(data, len)) {
		r->stats.packets_invalid++;
		return 0;
	}
	pkt = (struct smb_packet){
		.data = data,
		.len = len,
		.writer_id = s->writer_id,
		.target_buffer = s->target_buffer,
		.sequence_id = s->sequence_id,
		.previous_packet_dropped = s->loss ? SMB_DATA_LOSS_PRESENT : 0,
	};
	s->loss = false;
	r->stats.packets_delivered++;
	k = cb(&pkt, userdata);
	return k < 0 ? k : 1;
}

/* Parse one fragment size prefix: a varint of at most 4 bytes inside the payload. */
static bool parse_fragment_size(const uint8_t *payload, uint32_t size, uint32_t off,
				uint32_t *ret_hdr, uint64_t *ret_len)
{
	const uint8_t *p = payload + off;

	if (off >= size || !varint_get(&p, p + MIN(size - off, SMB_PACKET_HEADER_SIZE), ret_len))
		return false;
	*ret_hdr = (uint32_t)(p - (payload + off));
	return true;
}

static int read_chunk(struct smb_reader *r, struct smb_seq *s, struct smb_chunk_rec *c,
		      int (*cb)(const struct smb_packet *p, void *userdata), void *userdata,
		      int *n)
{
	const uint8_t *payload = smb_chunk_rec_payload(c);

	while (c->frag_read < c->count) {
		uint32_t hdr, data_off, idx;
		uint64_t len;
		bool cont_prev, cont_next;
		int k;

		if (c->offset >= c->payload_size ||
		    !parse_fragment_size(payload, c->payload_size, c->offset, &hdr, &len)) {
			/* more fragments declared than fit, or a bad prefix */
			r->stats.abi_violations++;
			lose_partial(r, s);
			c->frag_read = c->count;
			break;
		}
		data_off = c->offset + hdr;
		if (len == SMB_PACKET_SIZE_DROP) {
			/* The writer gave up on this packet (and it is always the last fragment). */
			r->stats.producer_dropped++;
			s->partial = false;
			s->len = 0;
			s->loss = true;
			c->frag_read = c->count;
			break;
		}
		if (len > c->payload_size - data_off) {
			r->stats.abi_violations++;
			lose_partial(r, s);
			c->frag_read = c->count;
			break;
		}

		idx = c->frag_read++;
		c->offset = data_off + (uint32_t)len;
		cont_prev = idx == 0 && (c->flags & SMB_CHUNK_FLAG_FIRST_CONTINUES);
		cont_next = idx + 1 == c->count && (c->flags & SMB_CHUNK_FLAG_LAST_CONTINUES);

		if (cont_prev) {
			if (!s->partial) {
				/* the start of this packet is gone */
				s->loss = true;
				continue;
			}
			if (partial_append(r, s, payload + data_off, (size_t)len) < 0) {
				lose_partial(r, s);
				continue;
			}
			if (cont_next)
				continue;
			s->partial = false;
			k = deliver(r, s, s->buf, s->len, cb, userdata);
			s->len = 0;
		} else if (cont_next) {
			s->partial = true;
			s->len = 0;
			if (partial_append(r, s, payload + data_off, (size_t)len) < 0)
				lose_partial(r, s);
			continue;
		} else {
			if (len == 0)
				continue;
			k = deliver(r, s, payload + data_off, (size_t)len, cb, userdata);
		}
		if (k < 0)
			return k;
		*n += k;
	}
	return 0;
}

static int read_seq(struct smb_reader *r, struct smb_seq *s, bool final,
		    int (*cb)(const struct smb_packet *p, void *userdata), void *userdata, int *n)
{
	struct smb_chunk_rec *c;
	int k;

	while ((c = s->head)) {
		if (!c->started) {
			if (s->have_next && c->chunk_id != s->next_id) {
				/* A missing chunk may still come, unless it was evicted or this is the end. */
				if (!final && !gap_is_permanent(s))
					break;
				lose_partial(r, s);
			}
			if (c->flags & SMB_CHUNK_FLAG_NEEDS_PATCHING) {
				if (!final)
					break;
				lose_partial(r, s);
				r->stats.packets_lost += c->count;
				s->have_next = true;
				s->next_id = c->chunk_id + 1;
				smb_reader_drop_chunk(r, c);
				continue;
			}
			c->started = true;
			s->have_next = true;
			s->next_id = c->chunk_id + 1;
			if (c->count == 0) {
				/* empty chunks keep the id sequence intact and nothing else */
				smb_reader_drop_chunk(r, c);
				continue;
			}
			if (s->partial && !(c->flags & SMB_CHUNK_FLAG_FIRST_CONTINUES))
				lose_partial(r, s);
		}
		k = read_chunk(r, s, c, cb, userdata, n);
		if (k < 0) {
			if (c->frag_read >= c->count)
				smb_reader_drop_chunk(r, c);
			return k;
		}
		smb_reader_drop_chunk(r, c);
	}
	if (final && s->partial)
		lose_partial(r, s);
	return 0;
}

int smb_reader_read_packets(struct smb_reader *r, bool final,
			    int (*cb)(const struct smb_packet *p, void *userdata), void *userdata)
{
	int n = 0, k;

	for (size_t i = 0; i < r->n_seqs; i++) {
		k = read_seq(r, r->seqs[i], final, cb, userdata, &n);
		if (k < 0)
			return k;
		if (n == INT_MAX)
			break;
	}
	return n;
}
