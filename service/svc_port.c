/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ProducerPort methods, as traced's ProducerIPCService +
 * ProducerEndpointImpl implement them, and what a producer's disconnect
 * undoes: the registry of data sources (svc->regs), the producer ids, and
 * the calls into the sessions (a data source registered, started, stopped,
 * a flush acked).  This is the top of the per-producer path: it uses the
 * sessions (svc_session.c), the connection (svc_producer.c) and CommitData
 * (svc_commit.c); none of them calls back up here.
 *
 * Everything the producer sends is untrusted: undecodable arguments are
 * rejected, bad chunk and patch entries are counted and skipped.
 */
#include <string.h>

#include "ipc/ipc.h"
#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "service/svc_internal.h"
#include "util/util.h"

static struct svc_producer *producer_by_id(const struct svc *s, uint16_t id)
{
	for (struct svc_producer *p = s->producers_head; p; p = p->producers_next)
		if (p->id == id && p->initialized)
			return p;
	return NULL;
}

static void notify_producer_hook(struct svc *s)
{
	if (s->producer_hook)
		s->producer_hook(s, s->producer_hook_userdata);
}

static void reply_empty(struct ipc_reply *reply)
{
	/* All these responses are empty messages; the send also releases. */
	(void)ipc_reply_send(reply, NULL, 0, /* has_more= */ false, -EBADF);
}

static void remove_reg(struct svc *s, struct svc_ds_reg *reg)
{
	SVC_LIST_REMOVE(regs, s, reg);
	s->n_regs--;
	reg->producer->n_regs--;
	free(reg->name);
	free(reg);
}

/* Undo what the producer set up, in traced's order: read what it
 * committed, unregister its data sources from the sessions, drop what was
 * still to be sent. */
void svc_port_disconnected(struct svc_producer *p)
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
	svc_producer_close(p);
	if (p->initialized) {
		p->initialized = false;
		s->n_producers--;
		notify_producer_hook(s);
	}
}

/*
 * The handlers below get the request already decoded by svc_port_call()
 * (undecodable arguments never reach them) and freed after they return;
 * each one answers or hands @reply on.
 */
static void initialize_connection(struct svc_producer *p, const ProtobufCMessage *m,
				  struct ipc_reply *reply)
{
	const Perfetto__Protos__InitializeConnectionRequest *req = (const void *)m;
	struct svc *s = p->svc;
	Perfetto__Protos__InitializeConnectionResponse resp =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_RESPONSE__INIT;
	uint8_t buf[16];
	size_t n;
	int fd;

	/* A producer-provided SMB is never adopted: the service creates its
	 * own, which traced also does when the offered one does not fit. */
	fd = ipc_conn_take_fd(p->conn);
	closep(&fd);

	if (p->initialized || s->n_producers >= s->opts.max_producers) {
		(void)ipc_reply_reject(reply);
		return;
	}
	do
		s->last_producer_id++;
	while (s->last_producer_id == 0 || producer_by_id(s, s->last_producer_id));
	p->id = s->last_producer_id;
	p->name = strdup(req->producer_name ? req->producer_name : "");
	p->sdk_version = req->sdk_version ? strdup(req->sdk_version) : NULL;
	p->shm_size_hint = req->shared_memory_size_hint_bytes;
	p->page_size_hint = req->shared_memory_page_size_hint_bytes;
	if (!p->name) {
		(void)ipc_reply_reject(reply);
		return;
	}
	svc_producer_take_identity(p);
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
	notify_producer_hook(s);
}

static void register_data_source(struct svc_producer *p, const ProtobufCMessage *m,
				 struct ipc_reply *reply)
{
	const Perfetto__Protos__RegisterDataSourceRequest *req = (const void *)m;
	const Perfetto__Protos__DataSourceDescriptor *d = req->data_source_descriptor;
	struct svc *s = p->svc;
	struct svc_ds_reg *reg = NULL;

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
	reply_empty(reply);
	if (reg) {
		svc_session_on_register(s, reg);
		notify_producer_hook(s);
	}
}

static void update_data_source(struct svc_producer *p, const ProtobufCMessage *m,
			       struct ipc_reply *reply)
{
	const Perfetto__Protos__UpdateDataSourceRequest *req = (const void *)m;
	const Perfetto__Protos__DataSourceDescriptor *d = req->data_source_descriptor;

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
	reply_empty(reply);
}

static void unregister_data_source(struct svc_producer *p, const ProtobufCMessage *m,
				   struct ipc_reply *reply)
{
	const Perfetto__Protos__UnregisterDataSourceRequest *req = (const void *)m;
	struct svc *s = p->svc;

	for (struct svc_ds_reg *r = s->regs_head; r; r = r->regs_next)
		if (r->producer == p && req->data_source_name && streq(r->name, req->data_source_name)) {
			svc_session_on_unregister(s, r);
			remove_reg(s, r);
			notify_producer_hook(s);
			break;
		}
	reply_empty(reply);
}

static void register_trace_writer(struct svc_producer *p, const ProtobufCMessage *m,
				  struct ipc_reply *reply)
{
	const Perfetto__Protos__RegisterTraceWriterRequest *req = (const void *)m;
	uint16_t id;

	/* traced keeps (WriterID) and (BufferID) casts of whatever it got. */
	id = (uint16_t)req->trace_writer_id;
	if (!p->writers)
		p->writers = calloc(UINT16_MAX + 1u, sizeof(*p->writers));
	if (p->writers)
		p->writers[id] = SVC_WRITER_REGISTERED | (uint16_t)req->target_buffer;
	reply_empty(reply);
}

static void unregister_trace_writer(struct svc_producer *p, const ProtobufCMessage *m,
				    struct ipc_reply *reply)
{
	const Perfetto__Protos__UnregisterTraceWriterRequest *req = (const void *)m;

	if (p->writers)
		p->writers[(uint16_t)req->trace_writer_id] = 0;
	reply_empty(reply);
}

static void notify_ds_started(struct svc_producer *p, const ProtobufCMessage *m,
			      struct ipc_reply *reply)
{
	const Perfetto__Protos__NotifyDataSourceStartedRequest *req = (const void *)m;

	reply_empty(reply);
	svc_session_on_ds_started(p->svc, p, req->data_source_id);
}

static void notify_ds_stopped(struct svc_producer *p, const ProtobufCMessage *m,
			      struct ipc_reply *reply)
{
	const Perfetto__Protos__NotifyDataSourceStoppedRequest *req = (const void *)m;

	reply_empty(reply);
	svc_session_on_ds_stopped(p->svc, p, req->data_source_id);
}

static void activate_triggers(struct svc_producer *p, const ProtobufCMessage *m,
			      struct ipc_reply *reply)
{
	(void)p;
	(void)m;
	/* No session here uses trigger_config: triggers match nothing. */
	reply_empty(reply);
}

static void get_async_command(struct svc_producer *p, const ProtobufCMessage *m,
			      struct ipc_reply *reply)
{
	(void)m;
	svc_producer_bind_async(p, reply);
}

static void sync_call(struct svc_producer *p, const ProtobufCMessage *m, struct ipc_reply *reply)
{
	struct svc_out *o;

	(void)m;
	o = calloc(1, sizeof(*o));
	if (!o) {
		reply_empty(reply);
		return;
	}
	o->reply = reply;
	svc_producer_queue(p, o);
}

static void commit_data(struct svc_producer *p, const ProtobufCMessage *m, struct ipc_reply *reply)
{
	const Perfetto__Protos__CommitDataRequest *req = (const void *)m;

	if (!p->reader) {
		/* traced drops commits that come before the SMB exists, without
		 * an answer; its IPC layer then rejects the pending call. */
		ipc_reply_free(reply);
		return;
	}
	svc_commit_apply(p, req);
	/* Stream out whatever became readable, before acking flushes, so that
	 * the data precedes the "flushed" marker in the file. */
	svc_producer_read(p, /* final= */ false);
	if (req->flush_request_id)
		svc_session_on_flush_ack(p->svc, p, req->flush_request_id);
	reply_empty(reply);
}

/*
 * ProducerPort in v58.2 declaration order (method ids are index + 1): the
 * name the host registers, the request the arguments must decode as, and
 * the handler.  One list, so that a method cannot get a name without a
 * decoder or a handler.
 */
#define PRODUCER_PORT_METHODS(X)                                                          \
	X(InitializeConnection, initialize_connection_request, initialize_connection)       \
	X(RegisterDataSource, register_data_source_request, register_data_source)           \
	X(UnregisterDataSource, unregister_data_source_request, unregister_data_source)     \
	X(CommitData, commit_data_request, commit_data)                                     \
	X(GetAsyncCommand, get_async_command_request, get_async_command)                    \
	X(RegisterTraceWriter, register_trace_writer_request, register_trace_writer)        \
	X(UnregisterTraceWriter, unregister_trace_writer_request, unregister_trace_writer)  \
	X(NotifyDataSourceStarted, notify_data_source_started_request, notify_ds_started)   \
	X(NotifyDataSourceStopped, notify_data_source_stopped_request, notify_ds_stopped)   \
	X(ActivateTriggers, activate_triggers_request, activate_triggers)                   \
	X(Sync, sync_request, sync_call)                                                    \
	X(UpdateDataSource, update_data_source_request, update_data_source)

struct port_method {
	const ProtobufCMessageDescriptor *request;
	void (*handler)(struct svc_producer *p, const ProtobufCMessage *req, struct ipc_reply *reply);
};

#define METHOD_NAME(name, request, handler) #name,
#define METHOD_ENTRY(name, request, handler) { &perfetto__protos__##request##__descriptor, handler },

const char *const svc_port_methods[] = { PRODUCER_PORT_METHODS(METHOD_NAME) };
const size_t svc_port_n_methods = ARRAY_SIZE(svc_port_methods);
static const struct port_method methods[] = { PRODUCER_PORT_METHODS(METHOD_ENTRY) };

int svc_port_call(struct svc_producer *p, uint32_t method_id, const uint8_t *args, size_t len,
		      struct ipc_reply *reply)
{
	const struct port_method *m;
	ProtobufCMessage *req;

	if (p->disconnected) {
		ipc_reply_free(reply);
		return 0;
	}
	if (method_id == 0 || method_id > ARRAY_SIZE(methods))
		return -EINVAL;
	m = &methods[method_id - 1];
	/* As traced's IPC layer: the arguments are decoded first, and
	 * undecodable ones are rejected (even with drop_reply). */
	req = protobuf_c_message_unpack(m->request, NULL, len, args);
	if (!req)
		return -EBADMSG;
	if (!p->initialized && m->handler != initialize_connection)
		/* The service rejects everything before InitializeConnection,
		 * answering only when an answer was asked for. */
		(void)ipc_reply_reject(reply);
	else
		m->handler(p, req, reply);
	protobuf_c_message_free_unpacked(req, NULL);
	return 0;
}
