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
	while (s->last_producer_id == 0 || producer_by_id(s, s->last_producer_id));
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
	notify_producer_hook(s);
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
		notify_producer_hook(s);
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
			notify_producer_hook(s);
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
		p->writers[id] = SVC_WRITER_REGISTERED | (uint16_t)req->target_buffer;
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
	svc_producer_bind_async(p, reply);
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
	svc_commit_apply(p, req);
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

int svc_port_call(struct svc_producer *p, uint32_t method_id, const uint8_t *args, size_t len,
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
