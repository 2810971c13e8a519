/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Trace configs in text form come from users and scripts: arbitrary bytes
 * through the text-format reader, then through protobuf-c.  Nothing may
 * crash, hang or recurse without bound.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "protos/pbtxt.h"
#include "protos/perfetto/common/descriptor.pb-c.h"
#include "protos/perfetto/config/trace_config.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the recursive DescriptorProto exercises the depth bound */
	static const ProtobufCMessageDescriptor *const types[] = {
		&perfetto__protos__trace_config__descriptor,
		&perfetto__protos__descriptor_proto__descriptor,
	};
	char err[256];

	if (size == 0)
		return 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		ProtobufCMessage *m = NULL;

		if (pbtxt_parse(types[i], (const char *)data + 1, size - 1, &m, err, sizeof(err)) == 0)
			protobuf_c_message_free_unpacked(m, NULL);
		if (data[0] & 1)
			break;
	}
	return 0;
}
