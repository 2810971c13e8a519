/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One producer connection as the sessions see it: the queue of commands
 * for the GetAsyncCommand stream (and Sync replies), the lazily created SMB
 * and its reader, the buffers the producer may write into, and the read
 * pass that hands complete packets to the sessions' output.  The
 * ProducerPort methods that drive it are in svc_port.c.
 */
#include <string.h>
#include <sys/mman.h>

#include "ipc/ipc.h"
#include "service/svc_internal.h"
#include "smb/smb.h"
#include "util/util.h"

#define MIN_READER_BUDGET (1024u * 1024)

static struct svc_out *out_free(struct svc_out *o)
{
	if (!o)
		return NULL;
	ipc_reply_free(o->reply);
	free(o->data);
	free(o);
	return NULL;
}

int svc_producer_new(struct svc *s, struct ipc_conn *conn, struct svc_producer **ret)
{
	struct svc_producer *p;
	struct ipc_peer peer;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->svc = s;
	p->conn = ipc_conn_ref(conn);
	p->smb_fd = -EBADF;
	if (ipc_conn_get_peer(conn, &peer) >= 0) {
		p->uid = peer.uid;
		p->pid = peer.pid;
		p->have_pid = peer.pid > 0;
	}
	p->emulation = !ipc_conn_can_pass_fds(conn) || s->opts.force_shmem_emulation;
	SVC_LIST_APPEND(producers, s, p);
	s->n_connections++;
	*ret = p;
	return 0;
}

struct svc_producer *svc_producer_free(struct svc_producer *p)
{
	struct svc *s;

	if (!p)
		return NULL;
	s = p->svc;
	SVC_LIST_REMOVE(producers, s, p);
	p->relay = svc_relay_free(p->relay);
	free(p->machine_name);
	s->n_connections--;
	p->reader = smb_reader_free(p->reader);
	if (p->smb_base)
		(void)munmap(p->smb_base, p->smb_size);
	closep(&p->smb_fd);
	if (p->conn) {
		ipc_conn_disconnect(p->conn);
		ipc_conn_unref(p->conn);
	}
	free(p->writers);
	free(p->allowed_buffers);
	free(p->name);
	free(p->sdk_version);
	free(p);
	return NULL;
}

/* ---- sending ------------------------------------------------------------ */

static int send_async(struct svc_producer *p, const struct svc_out *o)
{
	int fd = -EBADF;

	if (o->with_smb_fd && !p->emulation)
		fd = p->smb_fd;
	return ipc_reply_send(p->async, o->data, o->len, /* has_more= */ true, fd);
}

void svc_producer_flush_outbox(struct svc_producer *p)
{
	while (p->outs_head && !p->disconnected) {
		struct svc_out *o = p->outs_head;

		SVC_LIST_REMOVE(outs, p, o);
		if (o->reply) {
			(void)ipc_reply_send(o->reply, NULL, 0, /* has_more= */ false, -EBADF);
			o->reply = NULL; /* released by the send */
		} else if (!p->async) {
			/* traced drops commands until GetAsyncCommand is bound,
			 * except SetupTracing which it holds until then. */
			if (o->with_smb_fd)
				p->setup_tracing_pending = true;
			else
				log_debug("service: producer %u has no command stream, dropping a command",
					  p->id);
		} else {
			int r = send_async(p, o);

			if (r < 0)
				log_debug_errno(r, "service: sending a command to producer %u failed: %m", p->id);
		}
		out_free(o);
	}
}

int svc_producer_send_command(struct svc_producer *p, const Perfetto__Protos__GetAsyncCommandResponse *cmd,
			      bool with_smb_fd)
{
	struct svc_out *o;

	if (p->disconnected)
		return -ENOTCONN;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->len = perfetto__protos__get_async_command_response__get_packed_size(cmd);
	o->data = malloc(o->len ? o->len : 1);
	if (!o->data) {
		free(o);
		return -ENOMEM;
	}
	perfetto__protos__get_async_command_response__pack(cmd, o->data);
	o->with_smb_fd = with_smb_fd;
	svc_producer_queue(p, o);
	return 0;
}

void svc_producer_queue(struct svc_producer *p, struct svc_out *out)
{
	SVC_LIST_APPEND(outs, p, out);
	(void)loop_source_set_enabled(p->svc->out_defer, LOOP_ONESHOT);
}

void svc_producer_bind_async(struct svc_producer *p, struct ipc_reply *reply)
{
	/* A second stream replaces the first, which ends rejected. */
	ipc_reply_free(p->async);
	p->async = reply;
	if (p->setup_tracing_pending) {
		Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
		Perfetto__Protos__GetAsyncCommandResponse__SetupTracing st =
			PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_TRACING__INIT;
		uint8_t buf[16];
		struct svc_out o = { .data = buf, .with_smb_fd = true };

		p->setup_tracing_pending = false;
		st.has_shared_buffer_page_size_kb = true;
		st.shared_buffer_page_size_kb = (uint32_t)(p->page_size / 1024);
		cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING;
		cmd.setup_tracing = &st;
		o.len = perfetto__protos__get_async_command_response__pack(&cmd, buf);
		(void)send_async(p, &o);
	}
}

void svc_producer_close(struct svc_producer *p)
{
	while (p->outs_head) {
		struct svc_out *o = p->outs_head;

		SVC_LIST_REMOVE(outs, p, o);
		out_free(o);
	}
	p->async = ipc_reply_free(p->async);
}

/* ---- SMB ----------------------------------------------------------------- */

int svc_producer_ensure_smb(struct svc_producer *p, const Perfetto__Protos__TraceConfig *cfg, uint64_t budget)
{
	Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
	Perfetto__Protos__GetAsyncCommandResponse__SetupTracing st =
		PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_TRACING__INIT;
	size_t page = 0, size = 0, max_bytes;
	int r;

	if (p->reader)
		return 0;
	/* TraceConfig.producers overrides the producer's hints. */
	for (size_t i = 0; cfg && i < cfg->n_producers; i++) {
		const Perfetto__Protos__TraceConfig__ProducerConfig *pc = cfg->producers[i];

		if (pc->producer_name && p->name && streq(pc->producer_name, p->name)) {
			page = (size_t)pc->page_size_kb * 1024;
			size = (size_t)pc->shm_size_kb * 1024;
			break;
		}
	}
	if (page == 0)
		page = p->page_size_hint;
	if (size == 0)
		size = p->shm_size_hint;
	svc_shm_valid_sizes(size, page, &size, &page);

	if (!p->emulation) {
		r = svc_shm_create(size, &p->smb_fd, &p->smb_base);
		if (r < 0)
			return r;
		p->smb_size = size;
	}
	p->page_size = page;
	max_bytes = p->svc->opts.max_pending_bytes_per_producer;
	if (max_bytes == 0)
		max_bytes = (size_t)MAX(budget, (uint64_t)MIN_READER_BUDGET);
	r = smb_reader_new(p->smb_base, p->smb_size, page, max_bytes, &p->reader);
	if (r < 0)
		return r;
	p->reader_budget = max_bytes;

	st.has_shared_buffer_page_size_kb = true;
	st.shared_buffer_page_size_kb = (uint32_t)(page / 1024);
	cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING;
	cmd.setup_tracing = &st;
	return svc_producer_send_command(p, &cmd, /* with_smb_fd= */ true);
}

bool svc_producer_buffer_allowed(const struct svc_producer *p, uint16_t buffer_id)
{
	for (size_t i = 0; i < p->n_allowed; i++)
		if (p->allowed_buffers[i] == buffer_id)
			return true;
	return false;
}

int svc_producer_allow_buffer(struct svc_producer *p, uint16_t buffer_id)
{
	uint16_t *n;
	int r;

	if (svc_producer_buffer_allowed(p, buffer_id))
		return 0;
	n = realloc(p->allowed_buffers, (p->n_allowed + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	p->allowed_buffers = n;
	if (p->reader) {
		r = smb_reader_allow_buffer(p->reader, buffer_id);
		if (r < 0)
			return r;
	}
	n[p->n_allowed++] = buffer_id;
	return 0;
}

void svc_producer_disallow_buffer(struct svc_producer *p, uint16_t buffer_id)
{
	for (size_t i = 0; i < p->n_allowed; i++)
		if (p->allowed_buffers[i] == buffer_id) {
			p->allowed_buffers[i] = p->allowed_buffers[--p->n_allowed];
			return;
		}
}

bool svc_producer_in_session(const struct svc_producer *p, const struct svc_session *ss)
{
	for (size_t i = 0; i < ss->n_buffers; i++)
		if (svc_producer_buffer_allowed(p, ss->buffers[i].id))
			return true;
	return false;
}

/* ---- reading packets ----------------------------------------------------- */

struct svc_buffer *svc_producer_buffer_by_id(const struct svc *s, uint16_t id, struct svc_session **ret_session)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		if (ss->state == SVC_SESSION_DISABLED)
			continue;
		for (size_t i = 0; i < ss->n_buffers; i++)
			if (ss->buffers[i].id == id) {
				if (ret_session)
					*ret_session = ss;
				return &ss->buffers[i];
			}
	}
	return NULL;
}

static bool writer_buffer_mismatch(const struct svc_producer *p, uint16_t writer_id, uint16_t buffer_id)
{
	uint32_t w;

	if (!p->writers)
		return false;
	w = p->writers[writer_id];
	return (w & SVC_WRITER_REGISTERED) && (uint16_t)w != buffer_id;
}

static int on_packet(const struct smb_packet *pkt, void *userdata)
{
	struct svc_producer *p = userdata;
	struct svc_session *ss = NULL;
	struct svc_buffer *b;

	if (pkt->target_buffer > UINT16_MAX)
		return 0;
	b = svc_producer_buffer_by_id(p->svc, (uint16_t)pkt->target_buffer, &ss);
	/* The buffer is gone, or it was freed and its id reused by a session
	 * this producer is not part of: traced would have discarded it. */
	if (!b || !svc_producer_buffer_allowed(p, b->id) ||
	    writer_buffer_mismatch(p, pkt->writer_id, b->id)) {
		p->svc->chunks_discarded++;
		return 0;
	}
	(void)svc_output_packet(ss, p, pkt->data, pkt->len, pkt->writer_id, (uint32_t)(b - ss->buffers),
				 pkt->previous_packet_dropped);
	return 0;
}

/* Loss found while reassembling cannot be tied to one buffer: charge it to
 * every running session this producer writes into. */
static void account_read(struct svc_producer *p, const struct smb_reader_stats *before)
{
	struct smb_reader_stats after;

	smb_reader_get_stats(p->reader, &after);
	for (struct svc_session *ss = p->svc->sessions_head; ss; ss = ss->sessions_next) {
		if (ss->state == SVC_SESSION_DISABLED || !svc_producer_in_session(p, ss))
			continue;
		ss->stats.packets_lost += after.packets_lost - before->packets_lost;
		ss->stats.producer_dropped += after.producer_dropped - before->producer_dropped;
		ss->stats.abi_violations += after.abi_violations - before->abi_violations;
		ss->stats.invalid_packets += after.packets_invalid - before->packets_invalid;
		ss->stats.chunks_discarded += after.chunks_evicted - before->chunks_evicted;
		for (size_t i = 0; i < ss->n_buffers; i++)
			if (svc_producer_buffer_allowed(p, ss->buffers[i].id)) {
				struct svc_buffer *b = &ss->buffers[i];

				b->trace_writer_packet_loss += after.producer_dropped - before->producer_dropped;
				b->abi_violations += after.abi_violations - before->abi_violations;
				break;
			}
	}
}

void svc_producer_read(struct svc_producer *p, bool final)
{
	struct smb_reader_stats before;

	if (!p->reader)
		return;
	smb_reader_get_stats(p->reader, &before);
	(void)smb_reader_read_packets(p->reader, final, on_packet, p);
	account_read(p, &before);
	for (struct svc_session *ss = p->svc->sessions_head; ss; ss = ss->sessions_next)
		if (ss->state != SVC_SESSION_DISABLED && svc_producer_in_session(p, ss))
			svc_output_flush(ss);
}


int svc_producer_send(struct svc_producer *p, Perfetto__Protos__GetAsyncCommandResponse *cmd)
{
	int r = svc_producer_send_command(p, cmd, false);

	if (r < 0)
		log_debug_errno(r, "service: queueing a command for producer %u failed: %m", p->id);
	return r;
}
