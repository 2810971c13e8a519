/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Top-level check of a producer packet before the service appends its
 * trusted fields, with traced's rules: the packet must not set a field only
 * the service may write, must use wire types 0, 1, 2 or 5 only, and must
 * parse to its end.  Nested messages are not looked into.
 */
#include "service/svc_internal.h"
#include "util/util_varint.h"

/* TracePacket fields only the service writes (trusted_uid,
 * trusted_packet_sequence_id, trace_config, trace_stats, compressed_packets,
 * zstd_compressed_packets, synchronization_marker, trusted_pid, machine_id,
 * service_event, trace_provenance, protovms). */
static bool reserved_field(uint32_t field)
{
	switch (field) {
	case 3: case 10: case 33: case 35: case 36: case 50:
	case 69: case 79: case 98: case 124: case 125: case 133:
		return true;
	default:
		return false;
	}
}

/* Max length of a length-delimited field (2^28 - 1), as protozero. */
#define MAX_LEN_FIELD 0x0FFFFFFFu

bool svc_validate_packet(const uint8_t *data, size_t len)
{
	const uint8_t *p = data, *end = data + len;

	while (p < end) {
		uint64_t key, v;

		if (!varint_get(&p, end, &key))
			return false;
		/* traced compares the id truncated to 32 bits */
		if (reserved_field((uint32_t)(key >> 3)))
			return false;
		switch (key & 7) {
		case 0:
			if (!varint_get(&p, end, &v))
				return false;
			break;
		case 1:
			if ((size_t)(end - p) < 8)
				return false;
			p += 8;
			break;
		case 5:
			if ((size_t)(end - p) < 4)
				return false;
			p += 4;
			break;
		case 2:
			if (!varint_get(&p, end, &v))
				return false;
			if (v > MAX_LEN_FIELD || v > (uint64_t)(end - p))
				return false;
			p += v;
			break;
		default:
			return false;
		}
	}
	return true;
}
