/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as the argument or reply of every
 * ProducerPort method, and as a command on the GetAsyncCommand stream,
 * decoded the way the service and the producer decode them (protobuf-c under
 * the capped IPC allocator), then packed again.  The first byte picks the
 * message type.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ipc/ipc.h"
#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *const types[] = {
	&perfetto__protos__initialize_connection_request__descriptor,
	&perfetto__protos__initialize_connection_response__descriptor,
	&perfetto__protos__register_data_source_request__descriptor,
	&perfetto__protos__unregister_data_source_request__descriptor,
	&perfetto__protos__update_data_source_request__descriptor,
	&perfetto__protos__commit_data_request__descriptor,
	&perfetto__protos__register_trace_writer_request__descriptor,
	&perfetto__protos__unregister_trace_writer_request__descriptor,
	&perfetto__protos__notify_data_source_started_request__descriptor,
	&perfetto__protos__notify_data_source_stopped_request__descriptor,
	&perfetto__protos__activate_triggers_request__descriptor,
	&perfetto__protos__get_async_command_response__descriptor,
	&perfetto__protos__trace_config__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m = NULL;

	if (size == 0)
		return 0;
	d = types[data[0] % (sizeof(types) / sizeof(types[0]))];
	if (ipc_message_unpack(d, data + 1, size - 1, &m) == 0) {
		size_t len = protobuf_c_message_get_packed_size(m);
		uint8_t *buf = malloc(len ? len : 1);

		/* what decoded must pack again */
		if (buf)
			(void)protobuf_c_message_pack(m, buf);
		free(buf);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	return 0;
}
