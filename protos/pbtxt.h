/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * pbtxt - protobuf text format (what `perfetto --txt -c` reads) for any
 * message type protobuf-c has a descriptor of.  Lives beside the schema
 * because it knows nothing of tracing: only descriptors and wire types.
 */

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/**
 * pbtxt_to_binary - translate protobuf text format for message type @d into
 * its binary encoding.  Unknown fields, bad enum names, out-of-range numbers
 * and unterminated strings are errors; @err (may be NULL) receives
 * "line N: what went wrong".
 * Returns: 0 with a malloc'd buffer in @ret_data/@ret_len, -EINVAL on a
 * syntax or schema error, -ENOMEM.
 */
int pbtxt_to_binary(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
		    uint8_t **ret_data, size_t *ret_len, char *err, size_t err_len);

/**
 * pbtxt_parse - like pbtxt_to_binary, then unpacked with protobuf-c.  Free
 * the result with protobuf_c_message_free_unpacked(m, NULL).
 * Returns: 0, -EINVAL, -EBADMSG, -ENOMEM.
 */
int pbtxt_parse(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
		ProtobufCMessage **ret, char *err, size_t err_len);
