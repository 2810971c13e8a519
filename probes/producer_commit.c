/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CommitData: chunks that became Complete and patches that became known,
 * named to the service so it copies them out of the SMB.  On transports that
 * cannot pass an fd the chunk bytes travel inline (shared memory emulation)
 * and the chunk is freed here, since no service process can see it.
 * Below the instances: calls only producer_rpc.c.
 */
#include <string.h>

#include "probes/producer_internal.h"
#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "util/util.h"

/* Keep inline chunk data under one IPC frame, with room for the envelope. */
#define EMULATION_MAX_REQUEST (IPC_FRAME_MAX_PAYLOAD - 4096)

static int commit_patches_and_ack(struct producer *p, const struct smb_commit *c,
				  uint64_t flush_id, Perfetto__Protos__CommitDataRequest *req);

static int send_commit(struct producer *p, Perfetto__Protos__CommitDataRequest *req)
{
	return producer_invoke(p, PRODUCER_METHOD_COMMIT_DATA, &req->base, NULL);
}

/* Emulation: one request per batch that fits a frame; chunks freed locally. */
static int commit_emulated(struct producer *p, const struct smb_commit *c, uint64_t flush_id)
{
	Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove *moves = NULL, **move_ptrs = NULL;
	size_t i = 0;
	int r = 0;

	moves = calloc(c->n_moves ? c->n_moves : 1, sizeof(*moves));
	move_ptrs = calloc(c->n_moves ? c->n_moves : 1, sizeof(*move_ptrs));
	if (!moves || !move_ptrs) {
		r = -ENOMEM;
		goto out;
	}
	while (i < c->n_moves) {
		size_t bytes = 0, n = 0;

		while (i + n < c->n_moves) {
			Perfetto__Protos__CommitDataRequest__ChunksToMove *m = &moves[i + n];
			const struct smb_chunk_move *cm = &c->moves[i + n];
			const void *data;
			size_t len;

			r = smb_chunk_bytes(p->smb, cm->page, cm->chunk, &data, &len);
			if (r < 0)
				goto out;
			if (n > 0 && bytes + len > EMULATION_MAX_REQUEST)
				break;
			perfetto__protos__commit_data_request__chunks_to_move__init(m);
			m->has_page = m->has_chunk = m->has_target_buffer = m->has_data = true;
			m->page = cm->page;
			m->chunk = cm->chunk;
			m->target_buffer = cm->target_buffer;
			m->data.data = (uint8_t *)data;
			m->data.len = len;
			move_ptrs[i + n] = m;
			bytes += len;
			n++;
		}
		req.chunks_to_move = &move_ptrs[i];
		req.n_chunks_to_move = n;
		r = send_commit(p, &req);
		for (size_t k = 0; k < n; k++)
			smb_chunk_release_local(p->smb, c->moves[i + k].page, c->moves[i + k].chunk);
		if (r < 0)
			goto out;
		i += n;
	}
	/* patches and the flush ack go last, after every chunk they refer to */
	req.chunks_to_move = NULL;
	req.n_chunks_to_move = 0;
	r = commit_patches_and_ack(p, c, flush_id, &req);
out:
	free(moves);
	free(move_ptrs);
	return r;
}

static int commit_patches_and_ack(struct producer *p, const struct smb_commit *c,
				  uint64_t flush_id, Perfetto__Protos__CommitDataRequest *req)
{
	Perfetto__Protos__CommitDataRequest__ChunkToPatch *cps = NULL, **cp_ptrs = NULL;
	Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *patches = NULL, **patch_ptrs = NULL;
	size_t n_cp = 0;
	int r;

	if (c->n_patches) {
		cps = calloc(c->n_patches, sizeof(*cps));
		cp_ptrs = calloc(c->n_patches, sizeof(*cp_ptrs));
		patches = calloc(c->n_patches, sizeof(*patches));
		patch_ptrs = calloc(c->n_patches, sizeof(*patch_ptrs));
		if (!cps || !cp_ptrs || !patches || !patch_ptrs) {
			r = -ENOMEM;
			goto out;
		}
	}
	/* consecutive patches of one chunk share a ChunkToPatch */
	for (size_t i = 0; i < c->n_patches; i++) {
		const struct smb_patch *sp = &c->patches[i];
		Perfetto__Protos__CommitDataRequest__ChunkToPatch *cp = n_cp ? cp_ptrs[n_cp - 1] : NULL;
		Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *pp = &patches[i];

		if (!cp || cp->writer_id != sp->writer_id || cp->chunk_id != sp->chunk_id ||
		    cp->target_buffer != sp->target_buffer) {
			cp = &cps[n_cp];
			perfetto__protos__commit_data_request__chunk_to_patch__init(cp);
			cp->has_target_buffer = cp->has_writer_id = cp->has_chunk_id = true;
			cp->target_buffer = sp->target_buffer;
			cp->writer_id = sp->writer_id;
			cp->chunk_id = sp->chunk_id;
			cp->patches = &patch_ptrs[i];
			cp_ptrs[n_cp++] = cp;
		}
		perfetto__protos__commit_data_request__chunk_to_patch__patch__init(pp);
		pp->has_offset = pp->has_data = true;
		pp->offset = sp->offset;
		pp->data.data = (uint8_t *)sp->data;
		pp->data.len = 4;
		patch_ptrs[i] = pp;
		cp->n_patches++;
		cp->has_has_more_patches = true;
		cp->has_more_patches = sp->has_more;
	}
	req->chunks_to_patch = cp_ptrs;
	req->n_chunks_to_patch = n_cp;
	if (flush_id) {
		req->has_flush_request_id = true;
		req->flush_request_id = flush_id;
	}
	r = 0;
	if (req->n_chunks_to_move || req->n_chunks_to_patch || req->has_flush_request_id)
		r = send_commit(p, req);
out:
	free(cps);
	free(cp_ptrs);
	free(patches);
	free(patch_ptrs);
	return r;
}

int producer_commit(struct producer *p, uint64_t flush_id)
{
	Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove *moves = NULL, **move_ptrs = NULL;
	struct smb_commit c = {};
	int r;

	if (p->dead)
		return -ENOTCONN;
	if (p->in_commit)
		return 0;
	if (flush_id > p->pending_flush_id)
		p->pending_flush_id = flush_id;
	flush_id = p->pending_flush_id;
	if (p->smb)
		(void)smb_take_commit(p->smb, &c);
	if (c.n_moves == 0 && c.n_patches == 0 && flush_id == 0)
		return 0;
	p->in_commit = true;
	if (p->emulation) {
		r = commit_emulated(p, &c, flush_id);
		goto out;
	}
	if (c.n_moves) {
		moves = calloc(c.n_moves, sizeof(*moves));
		move_ptrs = calloc(c.n_moves, sizeof(*move_ptrs));
		if (!moves || !move_ptrs) {
			r = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < c.n_moves; i++) {
		perfetto__protos__commit_data_request__chunks_to_move__init(&moves[i]);
		moves[i].has_page = moves[i].has_chunk = moves[i].has_target_buffer = true;
		moves[i].page = c.moves[i].page;
		moves[i].chunk = c.moves[i].chunk;
		moves[i].target_buffer = c.moves[i].target_buffer;
		move_ptrs[i] = &moves[i];
	}
	req.chunks_to_move = move_ptrs;
	req.n_chunks_to_move = c.n_moves;
	r = commit_patches_and_ack(p, &c, flush_id, &req);
out:
	if (r >= 0)
		p->pending_flush_id = 0;
	else if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN)
		/* the service is gone; the disconnect path reports it once */
		log_debug_errno(r, "Failed to commit to the tracing service: %m");
	else
		log_warning_errno(r, "Failed to commit to the tracing service: %m");
	p->in_commit = false;
	free(moves);
	free(move_ptrs);
	return r;
}

static int on_commit_soon(struct loop_source *s, void *userdata)
{
	struct producer *p = userdata;

	(void)loop_source_set_enabled(s, LOOP_OFF);
	(void)producer_commit(p, 0);
	return 0;
}

void producer_commit_soon(struct producer *p)
{
	if (!p->commit_source) {
		if (loop_add_defer(p->event, &p->commit_source, on_commit_soon, p) < 0) {
			(void)producer_commit(p, 0);
			return;
		}
	}
	(void)loop_source_set_enabled(p->commit_source, LOOP_ONESHOT);
}

/* Half the SMB is waiting: commit now rather than at the end of the pass. */
void producer_commit_hook(void *userdata)
{
	(void)producer_commit(userdata, 0);
}
