/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One producer connection: the ProducerPort methods as traced's
 * ProducerIPCService + ProducerEndpointImpl implement them, the lazily
 * created SMB and its reader, and the queue of commands for the
 * GetAsyncCommand stream.
 *
 * Everything the producer sends is untrusted: undecodable arguments are
 * rejected, bad chunk and patch entries are counted and skipped.
 */
#include <string.h>
#include <sys/mman.h>

#include "ipc/ipc.h"
#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "service/svc_internal.h"
#include "smb/smb.h"
#include "util/util.h"

enum {
	M_INITIALIZE_CONNECTION = 1,
	M_REGISTER_DATA_SOURCE,
	M_UNREGISTER_DATA_SOURCE,
	M_COMMIT_DATA,
	M_GET_ASYNC_COMMAND,
	M_REGISTER_TRACE_WRITER,
	M_UNREGISTER_TRACE_WRITER,
	M_NOTIFY_DATA_SOURCE_STARTED,
	M_NOTIFY_DATA_SOURCE_STOPPED,
	M_ACTIVATE_TRIGGERS,
	M_SYNC,
	M_UPDATE_DATA_SOURCE,
};

#define WRITER_REGISTERED (1u << 16)
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

static void remove_reg(struct svc *s, struct svc_ds_reg *reg)
{
	SVC_LIST_REMOVE(regs, s, reg);
	s->n_regs--;
	reg->producer->n_regs--;
	free(reg->name);
	free(reg);
}

void svc_producer_disconnected(struct svc_producer *p)
{
	struct svc *s = p->svc;
	struct svc_ds_reg *reg, *next;

	if (p->disconnected)
		return;
	p->disconnected = true;

	/* Keep what was committed: hand out every packet still readable. */
	if (p->reader)
		svc_producer_read(p, /* final= */ true);

	for (reg = s->regs_head; reg; reg = next) {
		next = reg->regs_next;
		if (reg->producer != p)
			continue;
		svc_session_on_unregister(s, reg);
		remove_reg(s, reg);
	}
	while (p->outs_head) {
		struct svc_out *o = p->outs_head;

		SVC_LIST_REMOVE(outs, p, o);
		out_free(o);
	}
	p->async = ipc_reply_free(p->async);
	if (p->initialized) {
		p->initialized = false;
		s->n_producers--;
		svc_notify_producer_hook(s);
	}
}

struct svc_producer *svc_producer_free(struct svc_producer *p)
{
	struct svc *s;

	if (!p)
		return NULL;
	s = p->svc;
	svc_producer_disconnected(p);
	SVC_LIST_REMOVE(producers, s, p);
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

static void reply_empty(struct ipc_reply *reply)
{
	/* All these responses are empty messages; the send also releases. */
	(void)ipc_reply_send(reply, NULL, 0, /* has_more= */ false, -EBADF);
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

static bool writer_buffer_mismatch(const struct svc_producer *p, uint16_t writer_id, uint16_t buffer_id)
{
	uint32_t w;

	if (!p->writers)
		return false;
	w = p->writers[writer_id];
	return (w & WRITER_REGISTERED) && (uint16_t)w != buffer_id;
}

static int on_packet(const struct smb_packet *pkt, void *userdata)
{
	struct svc_producer *p = userdata;
	struct svc_session *ss = NULL;
	struct svc_buffer *b;

	if (pkt->target_buffer > UINT16_MAX)
		return 0;
	b = svc_buffer_by_id(p->svc, (uint16_t)pkt->target_buffer, &ss);
	/* The buffer is gone, or it was freed and its id reused by a session
	 * this producer is not part of: traced would have discarded it. */
	if (!b || !svc_producer_buffer_allowed(p, b->id) ||
	    writer_buffer_mismatch(p, pkt->writer_id, b->id)) {
		p->svc->chunks_discarded++;
		return 0;
	}
	(void)svc_session_packet(ss, p, pkt->data, pkt->len, pkt->writer_id, (uint32_t)(b - ss->buffers),
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
			svc_session_after_read(ss);
}

/* ---- methods ------------------------------------------------------------- */

#define UNPACK(type, args, len) perfetto__protos__##type##__unpack(NULL, (len), (args))

static int initialize_connection(struct svc_producer *p, const uint8_t *args, size_t len,
				 struct ipc_reply *reply)
{
	struct svc *s = p->svc;
	Perfetto__Protos__InitializeConnectionRequest *req;
	Perfetto__Protos__InitializeConnectionResponse resp =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_RESPONSE__INIT;
	uint8_t buf[16];
	size_t n;
	int fd;

	req = UNPACK(initialize_connection_request, args, len);
	if (!req)
		return -EBADMSG;
	/* A producer-provided SMB is never adopted: the service creates its
	 * own, which traced also does when the offered one does not fit. */
	fd = ipc_conn_take_fd(p->conn);
	closep(&fd);

	if (p->initialized || s->n_producers >= s->opts.max_producers) {
		perfetto__protos__initialize_connection_request__free_unpacked(req, NULL);
		(void)ipc_reply_reject(reply);
		return 0;
	}
	do
		s->last_producer_id++;
	while (s->last_producer_id == 0 || svc_producer_by_id(s, s->last_producer_id));
	p->id = s->last_producer_id;
	p->name = strdup(req->producer_name ? req->producer_name : "");
	p->sdk_version = req->sdk_version ? strdup(req->sdk_version) : NULL;
	p->shm_size_hint = req->shared_memory_size_hint_bytes;
	p->page_size_hint = req->shared_memory_page_size_hint_bytes;
	perfetto__protos__initialize_connection_request__free_unpacked(req, NULL);
	if (!p->name) {
		(void)ipc_reply_reject(reply);
		return 0;
	}
	p->initialized = true;
	s->n_producers++;

	resp.has_using_shmem_provided_by_producer = true;
	resp.using_shmem_provided_by_producer = false;
	resp.has_direct_smb_patching_supported = true;
	resp.direct_smb_patching_supported = true;
	resp.has_use_shmem_emulation = true;
	resp.use_shmem_emulation = p->emulation;
	n = perfetto__protos__initialize_connection_response__pack(&resp, buf);
	(void)ipc_reply_send(reply, buf, n, /* has_more= */ false, -EBADF);
	svc_notify_producer_hook(s);
	return 0;
}

static int register_data_source(struct svc_producer *p, const uint8_t *args, size_t len,
				struct ipc_reply *reply)
{
	struct svc *s = p->svc;
	Perfetto__Protos__RegisterDataSourceRequest *req;
	const Perfetto__Protos__DataSourceDescriptor *d;
	struct svc_ds_reg *reg = NULL;

	req = UNPACK(register_data_source_request, args, len);
	if (!req)
		return -EBADMSG;
	d = req->data_source_descriptor;
	if (!d || !d->name || !*d->name)
		goto out; /* traced ignores it, and still answers */
	if (p->n_regs >= SVC_MAX_DS_PER_PRODUCER)
		goto out;
	for (struct svc_ds_reg *r = s->regs_head; r; r = r->regs_next)
		if (d->id && r->producer == p && r->id == d->id)
			goto out; /* duplicate non-zero id: ignored */
	reg = calloc(1, sizeof(*reg));
	if (!reg || !(reg->name = strdup(d->name))) {
		free(reg);
		reg = NULL;
		goto out;
	}
	reg->producer = p;
	reg->id = d->id;
	reg->will_notify_on_start = d->will_notify_on_start;
	reg->will_notify_on_stop = d->will_notify_on_stop;
	reg->handles_incremental_state_clear = d->handles_incremental_state_clear;
	reg->no_flush = d->no_flush;
	SVC_LIST_APPEND(regs, s, reg);
	s->n_regs++;
	p->n_regs++;
out:
	perfetto__protos__register_data_source_request__free_unpacked(req, NULL);
	reply_empty(reply);
	if (reg) {
		svc_session_on_register(s, reg);
		svc_notify_producer_hook(s);
	}
	return 0;
}

static int update_data_source(struct svc_producer *p, const uint8_t *args, size_t len, struct ipc_reply *reply)
{
	Perfetto__Protos__UpdateDataSourceRequest *req;
	const Perfetto__Protos__DataSourceDescriptor *d;

	req = UNPACK(update_data_source_request, args, len);
	if (!req)
		return -EBADMSG;
	d = req->data_source_descriptor;
	/* Only (name, non-zero id) of this producer can be updated. */
	if (d && d->name && d->id)
		for (struct svc_ds_reg *r = p->svc->regs_head; r; r = r->regs_next)
			if (r->producer == p && r->id == d->id && streq(r->name, d->name)) {
				r->will_notify_on_start = d->will_notify_on_start;
				r->will_notify_on_stop = d->will_notify_on_stop;
				r->handles_incremental_state_clear = d->handles_incremental_state_clear;
				r->no_flush = d->no_flush;
				break;
			}
	perfetto__protos__update_data_source_request__free_unpacked(req, NULL);
	reply_empty(reply);
	return 0;
}

static int unregister_data_source(struct svc_producer *p, const uint8_t *args, size_t len,
				  struct ipc_reply *reply)
{
	struct svc *s = p->svc;
	Perfetto__Protos__UnregisterDataSourceRequest *req;

	req = UNPACK(unregister_data_source_request, args, len);
	if (!req)
		return -EBADMSG;
	for (struct svc_ds_reg *r = s->regs_head; r; r = r->regs_next)
		if (r->producer == p && req->data_source_name && streq(r->name, req->data_source_name)) {
			svc_session_on_unregister(s, r);
			remove_reg(s, r);
			svc_notify_producer_hook(s);
			break;
		}
	perfetto__protos__unregister_data_source_request__free_unpacked(req, NULL);
	reply_empty(reply);
	return 0;
}

static int register_trace_writer(struct svc_producer *p, const uint8_t *args, size_t len,
				 struct ipc_reply *reply)
{
	Perfetto__Protos__RegisterTraceWriterRequest *req;
	uint16_t id;

	req = UNPACK(register_trace_writer_request, args, len);
	if (!req)
		return -EBADMSG;
	/* traced keeps (WriterID) and (BufferID) casts of whatever it got. */
	id = (uint16_t)req->trace_writer_id;
	if (!p->writers)
		p->writers = calloc(UINT16_MAX + 1u, sizeof(*p->writers));
	if (p->writers)
		p->writers[id] = WRITER_REGISTERED | (uint16_t)req->target_buffer;
	perfetto__protos__register_trace_writer_request__free_unpacked(req, NULL);
	reply_empty(reply);
	return 0;
}

static int unregister_trace_writer(struct svc_producer *p, const uint8_t *args, size_t len,
				   struct ipc_reply *reply)
{
	Perfetto__Protos__UnregisterTraceWriterRequest *req;

	req = UNPACK(unregister_trace_writer_request, args, len);
	if (!req)
		return -EBADMSG;
	if (p->writers)
		p->writers[(uint16_t)req->trace_writer_id] = 0;
	perfetto__protos__unregister_trace_writer_request__free_unpacked(req, NULL);
	reply_empty(reply);
	return 0;
}

static int notify_ds(struct svc_producer *p, bool started, const uint8_t *args, size_t len,
		     struct ipc_reply *reply)
{
	uint64_t id;

	if (started) {
		Perfetto__Protos__NotifyDataSourceStartedRequest *req =
			UNPACK(notify_data_source_started_request, args, len);

		if (!req)
			return -EBADMSG;
		id = req->data_source_id;
		perfetto__protos__notify_data_source_started_request__free_unpacked(req, NULL);
	} else {
		Perfetto__Protos__NotifyDataSourceStoppedRequest *req =
			UNPACK(notify_data_source_stopped_request, args, len);

		if (!req)
			return -EBADMSG;
		id = req->data_source_id;
		perfetto__protos__notify_data_source_stopped_request__free_unpacked(req, NULL);
	}
	reply_empty(reply);
	if (started)
		svc_session_on_ds_started(p->svc, p, id);
	else
		svc_session_on_ds_stopped(p->svc, p, id);
	return 0;
}

static int activate_triggers(struct svc_producer *p, const uint8_t *args, size_t len, struct ipc_reply *reply)
{
	Perfetto__Protos__ActivateTriggersRequest *req;

	(void)p;
	req = UNPACK(activate_triggers_request, args, len);
	if (!req)
		return -EBADMSG;
	/* No session here uses trigger_config: triggers match nothing. */
	perfetto__protos__activate_triggers_request__free_unpacked(req, NULL);
	reply_empty(reply);
	return 0;
}

static int get_async_command(struct svc_producer *p, const uint8_t *args, size_t len, struct ipc_reply *reply)
{
	Perfetto__Protos__GetAsyncCommandRequest *req;

	req = UNPACK(get_async_command_request, args, len);
	if (!req)
		return -EBADMSG;
	perfetto__protos__get_async_command_request__free_unpacked(req, NULL);
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
	return 0;
}

static int sync_call(struct svc_producer *p, const uint8_t *args, size_t len, struct ipc_reply *reply)
{
	Perfetto__Protos__SyncRequest *req;
	struct svc_out *o;

	req = UNPACK(sync_request, args, len);
	if (!req)
		return -EBADMSG;
	perfetto__protos__sync_request__free_unpacked(req, NULL);
	o = calloc(1, sizeof(*o));
	if (!o) {
		reply_empty(reply);
		return 0;
	}
	o->reply = reply;
	svc_producer_queue(p, o);
	return 0;
}

/* ---- CommitData ---------------------------------------------------------- */

static struct svc_buffer *commit_buffer(struct svc_producer *p, uint32_t target, struct svc_session **ret_ss)
{
	if (target > UINT16_MAX)
		return NULL;
	return svc_buffer_by_id(p->svc, (uint16_t)target, ret_ss);
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

static int commit_data(struct svc_producer *p, const uint8_t *args, size_t len, struct ipc_reply *reply)
{
	Perfetto__Protos__CommitDataRequest *req;

	req = UNPACK(commit_data_request, args, len);
	if (!req)
		return -EBADMSG;
	if (!p->reader) {
		/* traced drops commits that come before the SMB exists, without
		 * an answer; its IPC layer then rejects the pending call. */
		perfetto__protos__commit_data_request__free_unpacked(req, NULL);
		ipc_reply_free(reply);
		return 0;
	}
	for (struct svc_session *ss = p->svc->sessions_head; ss; ss = ss->sessions_next)
		if (svc_producer_in_session(p, ss))
			ss->stats.commits++;
	for (size_t i = 0; i < req->n_chunks_to_move; i++)
		move_chunk(p, req->chunks_to_move[i]);
	for (size_t i = 0; i < req->n_chunks_to_patch; i++)
		patch_chunk(p, req->chunks_to_patch[i]);
	/* Stream out whatever became readable, before acking flushes, so that
	 * the data precedes the "flushed" marker in the file. */
	svc_producer_read(p, /* final= */ false);
	if (req->flush_request_id)
		svc_session_on_flush_ack(p->svc, p, req->flush_request_id);
	perfetto__protos__commit_data_request__free_unpacked(req, NULL);
	reply_empty(reply);
	return 0;
}

static const ProtobufCMessageDescriptor *const request_types[] = {
	&perfetto__protos__initialize_connection_request__descriptor,
	&perfetto__protos__register_data_source_request__descriptor,
	&perfetto__protos__unregister_data_source_request__descriptor,
	&perfetto__protos__commit_data_request__descriptor,
	&perfetto__protos__get_async_command_request__descriptor,
	&perfetto__protos__register_trace_writer_request__descriptor,
	&perfetto__protos__unregister_trace_writer_request__descriptor,
	&perfetto__protos__notify_data_source_started_request__descriptor,
	&perfetto__protos__notify_data_source_stopped_request__descriptor,
	&perfetto__protos__activate_triggers_request__descriptor,
	&perfetto__protos__sync_request__descriptor,
	&perfetto__protos__update_data_source_request__descriptor,
};

int svc_producer_call(struct svc_producer *p, uint32_t method_id, const uint8_t *args, size_t len,
		      struct ipc_reply *reply)
{
	if (p->disconnected) {
		ipc_reply_free(reply);
		return 0;
	}
	if (method_id == M_INITIALIZE_CONNECTION)
		return initialize_connection(p, args, len, reply);
	if (!p->initialized) {
		/* traced's IPC layer decodes the arguments first (undecodable:
		 * rejected even with drop_reply), then the service rejects
		 * everything before InitializeConnection, answering only when
		 * an answer was asked for. */
		ProtobufCMessage *m;

		if (method_id > ARRAY_SIZE(request_types))
			return -EINVAL;
		m = protobuf_c_message_unpack(request_types[method_id - 1], NULL, len, args);
		if (!m)
			return -EBADMSG;
		protobuf_c_message_free_unpacked(m, NULL);
		(void)ipc_reply_reject(reply);
		return 0;
	}
	switch (method_id) {
	case M_REGISTER_DATA_SOURCE:
		return register_data_source(p, args, len, reply);
	case M_UNREGISTER_DATA_SOURCE:
		return unregister_data_source(p, args, len, reply);
	case M_COMMIT_DATA:
		return commit_data(p, args, len, reply);
	case M_GET_ASYNC_COMMAND:
		return get_async_command(p, args, len, reply);
	case M_REGISTER_TRACE_WRITER:
		return register_trace_writer(p, args, len, reply);
	case M_UNREGISTER_TRACE_WRITER:
		return unregister_trace_writer(p, args, len, reply);
	case M_NOTIFY_DATA_SOURCE_STARTED:
		return notify_ds(p, true, args, len, reply);
	case M_NOTIFY_DATA_SOURCE_STOPPED:
		return notify_ds(p, false, args, len, reply);
	case M_ACTIVATE_TRIGGERS:
		return activate_triggers(p, args, len, reply);
	case M_SYNC:
		return sync_call(p, args, len, reply);
	case M_UPDATE_DATA_SOURCE:
		return update_data_source(p, args, len, reply);
	default:
		return -EINVAL;
	}
}
