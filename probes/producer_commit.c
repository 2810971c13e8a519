/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CommitData: chunks that became Complete and patches that became known,
 * named to the service so it copies them out of the SMB.  On transports that
 * cannot pass an fd the chunk bytes travel inline (shared memory emulation)
 * and the chunk is freed here, since no service process can see it.
 * Below the instances: calls only producer_rpc.c (and the loop, to send
 * what waited for the socket).
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

/*
 * Emulation: the chunk bytes go inline, in requests that each fit a frame,
 * and each chunk is freed here once its request is queued.  The socket's
 * send queue is the only buffer between us and the service: a request is
 * queued only while the queue is under EMULATION_QUEUE_MARK, so that a
 * service (or a link) slower than the data never makes it overflow, which
 * would drop the connection and every session with it.  What does not fit
 * waits in p->em_moves, its chunks still Complete in the SMB: the SMB fills
 * up and its writers drop packets and count them, as with a slow service
 * on shared memory.  Patches and the flush ack go after every chunk taken
 * before them.
 */
#define EMULATION_QUEUE_MARK (IPC_SEND_QUEUE_MAX_DEFAULT / 2)
#define EMULATION_RETRY_USEC 2000u

static int emulation_take(struct producer *p, const struct smb_commit *c)
{
	int r;

	r = array_grow((void **)&p->em_moves, &p->em_cap_moves, p->em_n_moves + c->n_moves,
		       sizeof(*p->em_moves), 64);
	if (r >= 0)
		r = array_grow((void **)&p->em_patches, &p->em_cap_patches, p->em_n_patches + c->n_patches,
			       sizeof(*p->em_patches), 64);
	if (r < 0)
		return r;
	/* an empty take has NULL arrays, which memcpy() may not be given */
	if (c->n_moves)
		memcpy(p->em_moves + p->em_n_moves, c->moves, c->n_moves * sizeof(*c->moves));
	p->em_n_moves += c->n_moves;
	if (c->n_patches)
		memcpy(p->em_patches + p->em_n_patches, c->patches, c->n_patches * sizeof(*c->patches));
	p->em_n_patches += c->n_patches;
	return 0;
}

static int on_emulation_retry(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct producer *p = userdata;

	(void)s;
	(void)usec;
	(void)producer_commit(p, 0);
	return 0;
}

/* Come back once the socket had time to take some of the queue. */
static void emulation_retry_later(struct producer *p)
{
	uint64_t at = now_ns(CLOCK_MONOTONIC) / 1000u + EMULATION_RETRY_USEC;

	if (!p->em_retry) {
		if (loop_add_time(p->event, &p->em_retry, CLOCK_MONOTONIC, at, 0, on_emulation_retry, p) < 0)
			p->em_retry = NULL;
		return;
	}
	(void)loop_source_set_time(p->em_retry, at);
	(void)loop_source_set_enabled(p->em_retry, LOOP_ONESHOT);
}

/* Returns: 0 when all is sent and acked, 1 when some waits for the queue, -errno. */
static int commit_emulated(struct producer *p, const struct smb_commit *c, uint64_t flush_id)
{
	Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove *moves = NULL, **move_ptrs = NULL;
	struct ipc_channel *ch = ipc_client_get_channel(p->client);
	struct smb_commit held;
	size_t i = 0;
	int r;

	r = emulation_take(p, c);
	if (r < 0)
		return r;
	moves = calloc(p->em_n_moves ? p->em_n_moves : 1, sizeof(*moves));
	move_ptrs = calloc(p->em_n_moves ? p->em_n_moves : 1, sizeof(*move_ptrs));
	if (!moves || !move_ptrs) {
		r = -ENOMEM;
		goto out;
	}
	while (i < p->em_n_moves) {
		size_t bytes = 0, n = 0;

		while (i + n < p->em_n_moves) {
			Perfetto__Protos__CommitDataRequest__ChunksToMove *m = &moves[i + n];
			const struct smb_chunk_move *cm = &p->em_moves[i + n];
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
		if (ch && ipc_channel_get_send_queue_size(ch) + bytes > EMULATION_QUEUE_MARK) {
			if (p->em_waits++ == 0)
				log_notice("The tracing service takes the data slower than it comes: chunks wait in the "
					   "shared memory buffer, and what does not fit there is dropped and counted");
			break;
		}
		req.chunks_to_move = &move_ptrs[i];
		req.n_chunks_to_move = n;
		r = send_commit(p, &req);
		for (size_t k = 0; k < n; k++)
			smb_chunk_release_local(p->smb, p->em_moves[i + k].page, p->em_moves[i + k].chunk);
		i += n;
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	/* what was sent (or released on a failed send) leaves the backlog */
	if (i > 0 && i < p->em_n_moves)
		memmove(p->em_moves, p->em_moves + i, (p->em_n_moves - i) * sizeof(*p->em_moves));
	p->em_n_moves -= i;
	free(moves);
	free(move_ptrs);
	if (r < 0)
		return r;
	if (p->em_n_moves > 0) {
		emulation_retry_later(p);
		return 1;
	}
	/* every chunk is out: the patches and the flush ack that follow them */
	held = (struct smb_commit){ .patches = p->em_patches, .n_patches = p->em_n_patches };
	req.chunks_to_move = NULL;
	req.n_chunks_to_move = 0;
	r = commit_patches_and_ack(p, &held, flush_id, &req);
	if (r >= 0)
		p->em_n_patches = 0;
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
	if (c.n_moves == 0 && c.n_patches == 0 && flush_id == 0 && p->em_n_moves == 0 && p->em_n_patches == 0)
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
	/* 1: the emulated chunks before the ack still wait for the socket */
	if (r == 0)
		p->pending_flush_id = 0;
	else if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN)
		/* the service is gone; the disconnect path reports it once */
		log_debug_errno(r, "Failed to commit to the tracing service: %m");
	else if (r < 0)
		log_warning_errno(r, "Failed to commit to the tracing service: %m");
	p->in_commit = false;
	free(moves);
	free(move_ptrs);
	return r < 0 ? r : 0;
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
