/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * pbcheck - checks on a message's wire bytes that protobuf-c cannot make
 * once it has unpacked them.  protobuf-c hands a string field back as a
 * NUL-terminated char *, so a string with a NUL inside ("sched/sched_switch\0x",
 * an instance_name of "\0") reaches every later check cut at its first NUL.
 * The bytes are the only place the whole string can be seen.
 */

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Nested messages deeper than this are refused (the schema's own configs nest about 5 deep). */
#define PBCHECK_MAX_DEPTH 32

/**
 * pbcheck_strings - walk the wire bytes @data[0..@len) of a message of type
 * @d and refuse a NUL byte in any string field, in this message and in every
 * message field the descriptors know, at any depth up to PBCHECK_MAX_DEPTH.
 * Unknown fields and bytes fields are skipped (bytes may hold anything); no
 * length is trusted before it is checked against what is left.  Allocates
 * nothing.
 * @err (may be NULL) receives the field's path and the reason, e.g.
 * "field 'data_sources[0].config.ftrace_config.ftrace_events[1]' has a NUL
 * byte at offset 18 of its 22 bytes".
 * Returns: 0; -EINVAL for a string with a NUL; -EBADMSG for bytes that are
 * not a well-formed message (a cut varint or length, a group, field 0) or
 * that nest too deeply.
 */
int pbcheck_strings(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len, char *err,
		    size_t err_len);
