/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NUL bytes inside string fields, found on the wire before protobuf-c cuts
 * the strings at them.  A plain walk over tags and lengths, driven by the
 * descriptors protobuf-c generated: nothing is unpacked or allocated, every
 * length is checked against the bytes left before it is used, and the depth
 * is bounded, so the walk is safe on anything a peer sends.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "protos/pbcheck.h"
#include "util/util_varint.h"

/* protobuf's wire types; groups (3, 4) are refused, as protobuf-c refuses them */
enum {
	WIRE_VARINT = 0,
	WIRE_FIXED64 = 1,
	WIRE_LENGTH = 2,
	WIRE_FIXED32 = 5,
};

#define FIELD_ID_MAX ((1u << 29) - 1)

struct segment {
	const char *name;
	long index;                      /* -1: not a repeated field */
};

struct walk {
	const uint8_t *base;             /* the top-level message, for offsets */
	struct segment path[PBCHECK_MAX_DEPTH + 1];
	unsigned n_path;                 /* segments of the failing field, once one failed */
	char reason[128];
};

/* One field's tag and the extent of its payload. */
struct field {
	uint32_t id;
	unsigned wire;
	const uint8_t *payload, *end;    /* [payload, end): the value's bytes */
};

/* The next field in [*p, end), or a reason in @w why there is none. */
static int next_field(struct walk *w, const uint8_t **p, const uint8_t *end, struct field *ret)
{
	const uint8_t *q = *p;
	uint64_t tag, v;

	if (!varint_get(&q, end, &tag)) {
		snprintf(w->reason, sizeof(w->reason), "a tag is cut short at byte %td", *p - w->base);
		return -EBADMSG;
	}
	if ((tag >> 3) == 0 || (tag >> 3) > FIELD_ID_MAX) {
		snprintf(w->reason, sizeof(w->reason), "field number %llu at byte %td is out of range",
			 (unsigned long long)(tag >> 3), *p - w->base);
		return -EBADMSG;
	}
	ret->id = (uint32_t)(tag >> 3);
	ret->wire = (unsigned)(tag & 7);
	switch (ret->wire) {
	case WIRE_VARINT:
		ret->payload = q;
		if (!varint_get(&q, end, &v))
			goto cut;
		break;
	case WIRE_FIXED64:
	case WIRE_FIXED32: {
		size_t n = ret->wire == WIRE_FIXED64 ? 8 : 4;

		ret->payload = q;
		if ((size_t)(end - q) < n)
			goto cut;
		q += n;
		break;
	}
	case WIRE_LENGTH:
		if (!varint_get(&q, end, &v))
			goto cut;
		ret->payload = q;
		if (v > (uint64_t)(end - q))
			goto cut;
		q += v;
		break;
	default:
		snprintf(w->reason, sizeof(w->reason), "field %u at byte %td has wire type %u",
			 ret->id, *p - w->base, ret->wire);
		return -EBADMSG;
	}
	ret->end = q;
	*p = q;
	return 0;
cut:
	snprintf(w->reason, sizeof(w->reason), "field %u at byte %td runs past the end", ret->id,
		 *p - w->base);
	return -EBADMSG;
}

/* Which occurrence of field @id, among those in [start, at), is the one at @at (all well formed). */
static long occurrence(struct walk *w, const uint8_t *start, const uint8_t *at, uint32_t id)
{
	struct field f;
	long n = 0;

	while (start < at && next_field(w, &start, at, &f) == 0)
		if (f.id == id)
			n++;
	return n;
}

static int walk_message(struct walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *start,
			const uint8_t *end, unsigned depth)
{
	const uint8_t *p = start;

	if (depth > PBCHECK_MAX_DEPTH) {
		snprintf(w->reason, sizeof(w->reason), "messages nest deeper than %u",
			 PBCHECK_MAX_DEPTH);
		w->n_path = depth;
		return -EBADMSG;
	}
	while (p < end) {
		const uint8_t *at = p;
		const ProtobufCFieldDescriptor *fd;
		struct field f;
		int r;

		r = next_field(w, &p, end, &f);
		if (r < 0) {
			w->n_path = depth;
			return r;
		}
		/* only length-delimited values can be strings or messages; a known
		 * field of the wrong wire type is protobuf-c's to refuse */
		if (f.wire != WIRE_LENGTH)
			continue;
		fd = protobuf_c_message_descriptor_get_field(d, f.id);
		if (!fd)
			continue;
		if (fd->type == PROTOBUF_C_TYPE_STRING) {
			const uint8_t *nul = memchr(f.payload, '\0', (size_t)(f.end - f.payload));

			if (!nul)
				continue;
			snprintf(w->reason, sizeof(w->reason), "has a NUL byte at offset %td of its %td bytes",
				 nul - f.payload, f.end - f.payload);
			w->n_path = depth + 1;
			r = -EINVAL;
		} else if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
			r = walk_message(w, fd->descriptor, f.payload, f.end, depth + 1);
			if (r >= 0)
				continue;
		} else {
			continue;
		}
		w->path[depth] = (struct segment){
			.name = fd->name,
			.index = fd->label == PROTOBUF_C_LABEL_REPEATED ? occurrence(w, start, at, f.id) : -1,
		};
		return r;
	}
	return 0;
}

/* "a.b[2].c" into @err at @n; returns the new length (may pass @err_len: cut). */
static size_t put_path(const struct walk *w, char *err, size_t err_len, size_t n)
{
	for (unsigned i = 0; i < w->n_path && n < err_len; i++) {
		n += (size_t)snprintf(err + n, err_len - n, "%s%s", i ? "." : "", w->path[i].name);
		if (w->path[i].index >= 0 && n < err_len)
			n += (size_t)snprintf(err + n, err_len - n, "[%ld]", w->path[i].index);
	}
	return n;
}

int pbcheck_strings(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len, char *err,
		    size_t err_len)
{
	struct walk w = { .base = data };
	size_t n;
	int r;

	if (!d || (!data && len))
		return -EINVAL;
	r = walk_message(&w, d, data, data + len, 0);
	if (r >= 0 || !err || !err_len)
		return r;
	/*
	 * "field 'a.b[2].c' has a NUL byte ...": the field first; bad bytes say
	 * why first, since their path may be as deep as the bound
	 */
	if (r == -EINVAL) {
		n = (size_t)snprintf(err, err_len, "field '");
		n = put_path(&w, err, err_len, n);
		if (n < err_len)
			(void)snprintf(err + n, err_len - n, "' %s", w.reason);
	} else {
		n = (size_t)snprintf(err, err_len, "%s", w.reason);
		if (w.n_path && n < err_len) {
			n += (size_t)snprintf(err + n, err_len - n, " (in field '");
			n = put_path(&w, err, err_len, n);
			if (n < err_len)
				(void)snprintf(err + n, err_len - n, "')");
		}
	}
	return r;
}
