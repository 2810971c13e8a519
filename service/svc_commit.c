/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CommitData's chunks: each chunk to move goes into the producer's reader
 * (from the SMB, or inline under shmem emulation) and each patch is
 * applied, with traced's per-buffer and per-session counters.  Everything
 * here is untrusted: a bad page, chunk, buffer or patch is counted and
 * skipped.  Reading the packets out is the caller's next step
 * (svc_producer_read()).
 */
#include <string.h>

#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "service/svc_internal.h"
#include "smb/smb.h"
#include "util/util.h"

static struct svc_buffer *commit_buffer(struct svc_producer *p, uint32_t target, struct svc_session **ret_ss)
{
	if (target > UINT16_MAX)
		return NULL;
	return svc_producer_buffer_by_id(p->svc, (uint16_t)target, ret_ss);
}

static void count_discard(struct svc_producer *p, struct svc_buffer *b, struct svc_session *ss)
{
	if (b) {
		b->chunks_discarded++;
		ss->stats.chunks_discarded++;
	} else {
		for (struct svc_session *x = p->svc->sessions_head; x; x = x->sessions_next)
			if (x->state != SVC_SESSION_DISABLED && svc_producer_in_session(p, x))
				x->stats.chunks_discarded++;
	}
}

static void move_chunk(struct svc_producer *p, const Perfetto__Protos__CommitDataRequest__ChunksToMove *m)
{
	struct svc_session *ss = NULL;
	struct svc_buffer *b = commit_buffer(p, m->target_buffer, &ss);
	struct smb_reader_stats before, after;
	int r;

	smb_reader_get_stats(p->reader, &before);
	if (m->has_data) {
		/* Shmem emulation: the whole chunk travels in the request. */
		if (m->data.len > SVC_MAX_INLINE_CHUNK || m->chunk_incomplete) {
			/* The reader takes only whole chunks; a scraped,
			 * incomplete one is counted and dropped. */
			count_discard(p, b, ss);
			return;
		}
		r = smb_reader_move_bytes(p->reader, m->target_buffer, m->data.data, m->data.len);
	} else {
		struct smb_chunk_move cm = {
			.page = m->page, .chunk = m->chunk, .target_buffer = m->target_buffer,
		};

		if (p->smb_size == 0 || m->page >= p->smb_size / p->page_size ||
		    m->chunk >= SMB_MAX_CHUNKS_PER_PAGE) {
			count_discard(p, b, ss);
			return;
		}
		r = smb_reader_move(p->reader, &cm);
	}
	smb_reader_get_stats(p->reader, &after);
	if (r < 0) {
		count_discard(p, b, ss);
		if (!b || !svc_producer_buffer_allowed(p, b->id))
			p->svc->chunks_discarded++;
	} else if (b) {
		b->chunks_written++;
		b->bytes_written += after.bytes_read - before.bytes_read;
		ss->stats.chunks_read++;
	}
	if (b) {
		b->abi_violations += after.abi_violations - before.abi_violations;
		ss->stats.abi_violations += after.abi_violations - before.abi_violations;
	}
}

static void patch_chunk(struct svc_producer *p, const Perfetto__Protos__CommitDataRequest__ChunkToPatch *c)
{
	struct svc *s = p->svc;
	struct svc_session *ss = NULL;
	struct svc_buffer *b = commit_buffer(p, c->target_buffer, &ss);
	size_t last = SIZE_MAX;

	if (!c->writer_id || c->writer_id > SVC_MAX_WRITER_ID || !b ||
	    c->n_patches > SVC_MAX_PATCHES_PER_CHUNK) {
		s->patches_discarded += c->n_patches;
		return;
	}
	for (size_t i = 0; i < c->n_patches; i++)
		if (c->patches[i]->data.len == 4)
			last = i;
	for (size_t i = 0; i < c->n_patches; i++) {
		const Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *pp = c->patches[i];
		struct smb_patch patch = {
			.target_buffer = c->target_buffer,
			.writer_id = (uint16_t)c->writer_id,
			.chunk_id = c->chunk_id,
			.offset = pp->offset,
			.has_more = i != last || c->has_more_patches,
		};

		if (pp->data.len != 4) {
			s->patches_discarded++;
			continue;
		}
		memcpy(patch.data, pp->data.data, 4);
		if (smb_reader_patch(p->reader, &patch) < 0) {
			b->patches_failed++;
			ss->stats.patches_failed++;
		} else {
			b->patches_succeeded++;
			ss->stats.patches_applied++;
		}
	}
}

void svc_commit_apply(struct svc_producer *p, const Perfetto__Protos__CommitDataRequest *req)
{
	for (struct svc_session *ss = p->svc->sessions_head; ss; ss = ss->sessions_next)
		if (svc_producer_in_session(p, ss))
			ss->stats.commits++;
	for (size_t i = 0; i < req->n_chunks_to_move; i++)
		move_chunk(p, req->chunks_to_move[i]);
	for (size_t i = 0; i < req->n_chunks_to_patch; i++)
		patch_chunk(p, req->chunks_to_patch[i]);
}
