/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ProducerPort method calls: the lowest layer of the producer, below the
 * commits and the data-source instances, so that none of them needs to call
 * back into the connection code above.
 */
#include "probes/producer_internal.h"
#include "util/util.h"

static const char *const method_names[_PRODUCER_METHOD_MAX] = {
	[PRODUCER_METHOD_INITIALIZE_CONNECTION] = "InitializeConnection",
	[PRODUCER_METHOD_REGISTER_DATA_SOURCE] = "RegisterDataSource",
	[PRODUCER_METHOD_UNREGISTER_DATA_SOURCE] = "UnregisterDataSource",
	[PRODUCER_METHOD_COMMIT_DATA] = "CommitData",
	[PRODUCER_METHOD_GET_ASYNC_COMMAND] = "GetAsyncCommand",
	[PRODUCER_METHOD_REGISTER_TRACE_WRITER] = "RegisterTraceWriter",
	[PRODUCER_METHOD_UNREGISTER_TRACE_WRITER] = "UnregisterTraceWriter",
	[PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STARTED] = "NotifyDataSourceStarted",
	[PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STOPPED] = "NotifyDataSourceStopped",
};

const char *producer_method_name(enum producer_method method)
{
	if (method < 0 || method >= _PRODUCER_METHOD_MAX)
		return NULL;
	return method_names[method];
}

int producer_invoke(struct producer *p, enum producer_method method, const ProtobufCMessage *m,
		    ipc_client_reply_cb cb)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len = protobuf_c_message_get_packed_size(m);
	int r;

	if (p->dead || !p->client)
		return -ENOTCONN;
	if (p->method_ids[method] <= 0)
		return -EPROTO;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(m, buf);
	r = ipc_client_invoke(p->client, p->service_id, (uint32_t)p->method_ids[method], buf, len,
			      -EBADF, cb, p, NULL);
	if (r < 0)
		log_debug_errno(r, "Failed to send %s: %m", method_names[method]);
	return r;
}
