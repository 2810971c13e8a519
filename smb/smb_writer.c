/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The trace writer: one sequence of TracePackets (one writer id) cut into
 * fragments and chunks, following Perfetto's TraceWriterImpl semantics:
 *
 *  - a packet starts with a 4-byte size prefix and count++ in the chunk
 *    header; the prefix is final (1 byte if the fragment is < 127 bytes and
 *    did not continue, else a redundant varint) before the chunk is released;
 *  - a packet that does not fit continues in chunk_id+1 (LastContinuesOnNext
 *    on the old chunk, FirstContinuesFromPrev and count 1 on the new one);
 *  - nested lengths still open in a released chunk move to patch slots and
 *    the chunk gets NeedsPatching before it is marked Complete;
 *  - with no free chunk the writer never waits: the fragment in flight gets
 *    the drop size, the rest goes to the pbw sink, and the next packet that
 *    gets a chunk carries previous_packet_dropped = PRESENT | SMB_FULL.
 *
 * The per-chunk work (acquire, release, patch redirection) happens in the
 * pbw refill callback; begin/end of a packet touch only the current chunk.
 */

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "smb/smb_arbiter.h"
#include "util/util.h"
#include "util/util_varint.h"

/* TracePacket fields the writer itself sets (protos/perfetto/trace/trace_packet.proto). */
#define TRACE_PACKET_PREVIOUS_PACKET_DROPPED 42
#define TRACE_PACKET_FIRST_PACKET_ON_SEQUENCE 87

#define ONE_BYTE_FRAGMENT_MAX 127u

struct smb_writer {
	struct pbw pbw;           /* first: the hot cursor */
	struct smb *smb;
	uint16_t id;
	uint32_t target_buffer;
	uint32_t next_chunk_id;

	struct smb_chunk chunk;   /* .header == NULL: no chunk */
	uint32_t chunk_id;
	unsigned count;
	unsigned flags;

	bool in_packet;
	bool continued;           /* the current fragment continues the packet */
	bool dropping;            /* no chunk could be had: bytes go to the sink */
	bool first_packet;
	uint8_t *frag_size;       /* size prefix of the fragment in flight */
	uint8_t *frag_start;
	uint64_t packet_start;

	struct smb_writer_stats stats;
};

static bool have_chunk(const struct smb_writer *w)
{
	return w->chunk.header != NULL;
}

static void publish_packets(struct smb_writer *w)
{
	atomic_store_explicit(&w->chunk.header->packets, smb_packets_make(w->count, w->flags),
			      memory_order_release);
}

static void release_chunk(struct smb_writer *w)
{
	smb_chunk_release(w->smb, &w->chunk, smb_packets_make(w->count, w->flags),
			  w->target_buffer);
}

static void install_chunk(struct smb_writer *w, const struct smb_chunk *c, unsigned count,
			  unsigned flags)
{
	w->chunk = *c;
	w->chunk_id = w->next_chunk_id++;
	w->count = count;
	w->flags = flags;
	w->stats.chunks_acquired++;
}

static bool in_chunk(const struct smb_writer *w, const uint8_t *p)
{
	return (uintptr_t)p >= (uintptr_t)w->chunk.payload &&
	       (uintptr_t)p + PBW_SIZE_FIELD_LEN <= (uintptr_t)w->chunk.end;
}

static unsigned open_depth(const struct smb_writer *w)
{
	return MIN(w->pbw.depth, (unsigned)PBW_MAX_NESTING);
}

/*
 * Give up on the packet in flight: the service must throw its fragment
 * away, and lengths inside the chunk we hand over can no longer be written.
 */
static void abort_fragment(struct smb_writer *w)
{
	varint_put_redundant4(w->frag_size, SMB_PACKET_SIZE_DROP);
	w->frag_size = NULL;
	w->flags &= ~SMB_CHUNK_FLAG_LAST_CONTINUES;
	for (unsigned i = 0; i < open_depth(w); i++)
		if (w->pbw.size_field[i] && in_chunk(w, w->pbw.size_field[i]))
			w->pbw.size_field[i] = NULL;
	release_chunk(w);
	w->dropping = true;
	pbw_enter_discard(&w->pbw);
}

/* Mid-packet: continue the packet in a new chunk (or drop it). */
static int writer_refill(struct pbw *p, size_t min_bytes)
{
	struct smb_writer *w = p->owner;
	struct smb_chunk c;
	unsigned need = 0;
	uint32_t partial;

	if (!w->in_packet || !have_chunk(w) || !w->frag_size) {
		/* Writing outside a packet is a caller bug: keep it harmless. */
		pbw_enter_discard(p);
		return -ENOSPC;
	}

	partial = (uint32_t)(p->cur - w->frag_start);
	if (partial == 0 && !w->continued) {
		/*
		 * Nothing of the packet is in this chunk yet: start it afresh in
		 * the next chunk instead of leaving an empty first fragment.
		 */
		if (smb_chunk_acquire(w->smb, w->id, w->next_chunk_id, smb_packets_make(1, 0), &c) < 0) {
			w->count--;
			w->frag_size = NULL;
			release_chunk(w);
			w->dropping = true;
			pbw_enter_discard(p);
			return -ENOSPC;
		}
		w->count--;
		release_chunk(w);
		install_chunk(w, &c, 1, 0);
		w->frag_size = c.payload;
		memset(c.payload, 0, SMB_PACKET_HEADER_SIZE);
		w->frag_start = c.payload + SMB_PACKET_HEADER_SIZE;
		pbw_reset_range(p, w->frag_start, (size_t)(c.end - w->frag_start));
		smb_maybe_commit(w->smb);
		return 0;
	}

	for (unsigned i = 0; i < open_depth(w); i++)
		if (p->size_field[i] && in_chunk(w, p->size_field[i]))
			need++;
	if (!smb_patch_slots_available(w->smb, need)) {
		w->smb->stats.patch_slots_full++;
		abort_fragment(w);
		return -ENOSPC;
	}
	if (smb_chunk_acquire(w->smb, w->id, w->next_chunk_id,
			      smb_packets_make(1, SMB_CHUNK_FLAG_FIRST_CONTINUES), &c) < 0) {
		abort_fragment(w);
		return -ENOSPC;
	}

	varint_put_redundant4(w->frag_size, partial);
	w->flags |= SMB_CHUNK_FLAG_LAST_CONTINUES;
	for (unsigned i = 0; i < open_depth(w); i++) {
		uint8_t *sf = p->size_field[i];

		if (!sf || !in_chunk(w, sf))
			continue;
		p->size_field[i] = smb_patch_alloc(w->smb, w->target_buffer, w->id, w->chunk_id,
						   (uint32_t)(sf - w->chunk.payload));
		w->flags |= SMB_CHUNK_FLAG_NEEDS_PATCHING;
		w->stats.patches++;
	}
	release_chunk(w);

	install_chunk(w, &c, 1, SMB_CHUNK_FLAG_FIRST_CONTINUES);
	w->continued = true;
	w->frag_size = c.payload;
	memset(c.payload, 0, SMB_PACKET_HEADER_SIZE);
	w->frag_start = c.payload + SMB_PACKET_HEADER_SIZE;
	pbw_reset_range(p, w->frag_start, (size_t)(c.end - w->frag_start));
	smb_maybe_commit(w->smb);
	return min_bytes <= (size_t)(c.end - w->frag_start) ? 0 : -ENOSPC;
}

/* Between packets: take a fresh chunk, or go on dropping. */
static void new_chunk_for_packet(struct smb_writer *w)
{
	struct smb_chunk c;

	if (smb_chunk_acquire(w->smb, w->id, w->next_chunk_id, smb_packets_make(0, 0), &c) < 0) {
		if (have_chunk(w))
			release_chunk(w);
		if (!w->dropping) {
			w->dropping = true;
			pbw_enter_discard(&w->pbw);
		}
		return;
	}
	if (have_chunk(w))
		release_chunk(w);
	install_chunk(w, &c, 0, 0);
	if (w->dropping || w->pbw.discarding) {
		w->dropping = false;
		pbw_leave_discard(&w->pbw, c.payload, (size_t)(c.end - c.payload));
	} else {
		pbw_reset_range(&w->pbw, c.payload, (size_t)(c.end - c.payload));
	}
	smb_maybe_commit(w->smb);
}

int smb_writer_new(struct smb *smb, uint16_t writer_id, uint32_t target_buffer,
		   struct smb_writer **ret)
{
	struct smb_writer *w;
	int r;

	if (!smb || !ret)
		return -EINVAL;
	r = smb_writer_id_claim(smb, writer_id);
	if (r < 0)
		return r;
	w = calloc(1, sizeof(*w));
	if (!w) {
		smb_writer_id_release(smb, writer_id);
		return -ENOMEM;
	}
	w->smb = smb;
	w->id = writer_id;
	w->target_buffer = target_buffer;
	w->first_packet = true;
	pbw_init(&w->pbw, NULL, 0, writer_refill, w);
	*ret = w;
	return 0;
}

struct smb_writer *smb_writer_free(struct smb_writer *w)
{
	if (!w)
		return NULL;
	if (w->in_packet)
		(void)smb_writer_end_packet(w);
	smb_writer_flush(w);
	smb_writer_id_release(w->smb, w->id);
	free(w);
	return NULL;
}

struct pbw *smb_writer_begin_packet(struct smb_writer *w)
{
	bool was_dropping;

	assert(!w->in_packet);
	if (w->in_packet)
		(void)smb_writer_end_packet(w);

	was_dropping = w->dropping;
	if (w->dropping || !have_chunk(w) ||
	    (size_t)(w->pbw.end - w->pbw.cur) < SMB_MIN_PACKET_ROOM ||
	    w->count >= SMB_SWITCH_AT_FRAGMENTS)
		new_chunk_for_packet(w);

	w->in_packet = true;
	w->continued = false;
	if (!w->dropping) {
		/* room for the prefix is guaranteed: SMB_MIN_PACKET_ROOM */
		w->frag_size = w->pbw.cur;
		memset(w->frag_size, 0, SMB_PACKET_HEADER_SIZE);
		w->pbw.cur += SMB_PACKET_HEADER_SIZE;
		w->frag_start = w->pbw.cur;
		w->count++;
		publish_packets(w);
	} else {
		w->frag_size = NULL;
		w->frag_start = NULL;
	}
	w->packet_start = pbw_position(&w->pbw);

	if (_unlikely_(was_dropping && !w->dropping))
		pbw_varint(&w->pbw, TRACE_PACKET_PREVIOUS_PACKET_DROPPED,
			   SMB_DATA_LOSS_PRESENT | SMB_DATA_LOSS_SMB_FULL);
	if (_unlikely_(w->first_packet)) {
		/* As Perfetto does, the flag is spent even if this packet is dropped. */
		pbw_varint(&w->pbw, TRACE_PACKET_FIRST_PACKET_ON_SEQUENCE, 1);
		w->first_packet = false;
	}
	return &w->pbw;
}

int smb_writer_end_packet(struct smb_writer *w)
{
	uint32_t size;

	if (!w->in_packet)
		return -EINVAL;
	/* forgiving on purpose: the writer's destructor ends packets this way */
	while (w->pbw.depth > 0)
		(void)pbw_end_nested(&w->pbw);
	w->in_packet = false;

	if (w->dropping) {
		w->stats.packets_dropped++;
		return -ENOSPC;
	}
	if (_unlikely_(w->pbw.discarding)) {
		/*
		 * The cursor gave up by itself (nesting too deep): the packet is
		 * incomplete, so mark it dropped and start clean in a new chunk.
		 */
		if (have_chunk(w) && w->frag_size) {
			varint_put_redundant4(w->frag_size, SMB_PACKET_SIZE_DROP);
			release_chunk(w);
		}
		w->frag_size = NULL;
		pbw_leave_discard(&w->pbw, NULL, 0);
		w->stats.packets_dropped++;
		return -ENOSPC;
	}

	size = (uint32_t)(w->pbw.cur - w->frag_start);
	w->stats.bytes_written += pbw_position(&w->pbw) - w->packet_start;
	w->stats.packets_written++;
	if (size < ONE_BYTE_FRAGMENT_MAX && !w->continued) {
		/* The prefix and the fragment are both still ours: drop 3 bytes. */
		memmove(w->frag_size + 1, w->frag_start, size);
		w->frag_size[0] = (uint8_t)size;
		w->pbw.cur -= SMB_PACKET_HEADER_SIZE - 1;
	} else {
		varint_put_redundant4(w->frag_size, size);
	}
	w->frag_size = NULL;
	return 0;
}

void smb_writer_flush(struct smb_writer *w)
{
	assert(!w->in_packet);
	if (w->in_packet || !have_chunk(w))
		return;
	release_chunk(w);
	pbw_reset_range(&w->pbw, NULL, 0);
}

/* The sink's calls: the writer's own, behind the void pointer a sink carries. */
static struct pbw *sink_begin(void *userdata)
{
	return smb_writer_begin_packet(userdata);
}

static int sink_end(void *userdata)
{
	return smb_writer_end_packet(userdata);
}

static void sink_flush(void *userdata)
{
	smb_writer_flush(userdata);
}

struct pbw_sink smb_writer_sink(struct smb_writer *w)
{
	return (struct pbw_sink){
		.begin_packet = sink_begin,
		.end_packet = sink_end,
		.flush = sink_flush,
		.userdata = w,
	};
}

uint16_t smb_writer_id(const struct smb_writer *w)
{
	return w->id;
}

uint32_t smb_writer_target_buffer(const struct smb_writer *w)
{
	return w->target_buffer;
}

void smb_writer_get_stats(const struct smb_writer *w, struct smb_writer_stats *ret)
{
	*ret = w->stats;
}
