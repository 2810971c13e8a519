/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NUL check runs on every command from the service and on binary
 * configs, before protobuf-c sees them: arbitrary bytes must never be read
 * past, recurse without bound, or leave the error text unterminated.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "protos/pbcheck.h"
#include "protos/perfetto/common/descriptor.pb-c.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the recursive DescriptorProto exercises the depth bound */
	static const ProtobufCMessageDescriptor *const types[] = {
		&perfetto__protos__get_async_command_response__descriptor,
		&perfetto__protos__trace_config__descriptor,
		&perfetto__protos__descriptor_proto__descriptor,
	};
	const ProtobufCMessageDescriptor *d;
	char err[128];
	int r;

	if (size == 0)
		return 0;
	d = types[data[0] % (sizeof(types) / sizeof(types[0]))];
	memset(err, 'x', sizeof(err));
	r = pbcheck_strings(d, data + 1, size - 1, err, sizeof(err));
	if (r < 0 && !memchr(err, '\0', sizeof(err)))
		abort();
	if (r != 0 && r != -EINVAL && r != -EBADMSG)
		abort();
	return 0;
}
