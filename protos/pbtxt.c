/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protobuf text format ("pbtxt", what `perfetto --txt -c` reads) to binary,
 * driven by protobuf-c descriptors.  The text is translated straight into
 * wire bytes and then unpacked by protobuf-c, so struct layouts never matter
 * here and protobuf-c stays the one place that validates the message.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "protos/pbtxt.h"
#include "util/util.h"
#include "util/util_varint.h"

#define PBTXT_MAX_DEPTH 32
#define PBTXT_MAX_OUTPUT (16u << 20)

struct buf {
	uint8_t *data;
	size_t len, cap;
	bool oom;
};

struct parser {
	const char *s, *end;
	unsigned line;
	char *err;
	size_t err_len;
};

static void buf_put(struct buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 256;
		uint8_t *nd;

		while (ncap < b->len + n)
			ncap *= 2;
		if (ncap > PBTXT_MAX_OUTPUT) {
			b->oom = true;
			return;
		}
		nd = realloc(b->data, ncap);
		if (!nd) {
			b->oom = true;
			return;
		}
		b->data = nd;
		b->cap = ncap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void buf_varint(struct buf *b, uint64_t v)
{
	uint8_t tmp[VARINT_PUT_ROOM];

	buf_put(b, tmp, (size_t)(varint_put(tmp, v) - tmp));
}

static int fail(struct parser *p, const char *fmt, ...) _printf_(2, 3);
static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->err && p->err[0] == '\0') {
		n = snprintf(p->err, p->err_len, "line %u: ", p->line);
		if (n > 0 && (size_t)n < p->err_len) {
			va_start(ap, fmt);
			(void)vsnprintf(p->err + n, p->err_len - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

static void skip_space(struct parser *p)
{
	while (p->s < p->end) {
		if (*p->s == '\n') {
			p->line++;
			p->s++;
		} else if (isspace((unsigned char)*p->s)) {
			p->s++;
		} else if (*p->s == '#') {
			while (p->s < p->end && *p->s != '\n')
				p->s++;
		} else {
			break;
		}
	}
}

static bool peek(struct parser *p, char c)
{
	skip_space(p);
	return p->s < p->end && *p->s == c;
}

static bool accept(struct parser *p, char c)
{
	if (!peek(p, c))
		return false;
	p->s++;
	return true;
}

/* identifiers, numbers and enum names: one token of [A-Za-z0-9_.+-] */
static int read_token(struct parser *p, char *out, size_t max)
{
	size_t n = 0;

	skip_space(p);
	while (p->s < p->end && (isalnum((unsigned char)*p->s) || strchr("_.+-", *p->s))) {
		if (n + 1 >= max)
			return fail(p, "token too long");
		out[n++] = *p->s++;
	}
	out[n] = '\0';
	if (n == 0)
		return fail(p, "expected a name or value, found '%c'", p->s < p->end ? *p->s : '?');
	return 0;
}

/*
 * One or more adjacent quoted strings, C escapes decoded, appended to @b.
 * A string field (@f not bytes) may not hold a NUL: protobuf-c would hand
 * it on cut at the NUL, and every later check would see only the start.
 */
static int read_string(struct parser *p, const ProtobufCFieldDescriptor *f, struct buf *b)
{
	if (!peek(p, '"') && !peek(p, '\''))
		return fail(p, "expected a quoted string");
	while (peek(p, '"') || peek(p, '\'')) {
		char q = *p->s++;

		for (;;) {
			char c;

			if (p->s >= p->end || *p->s == '\n')
				return fail(p, "unterminated string");
			c = *p->s++;
			if (c == q)
				break;
			if (c == '\\') {
				if (p->s >= p->end)
					return fail(p, "unterminated string");
				c = *p->s++;
				switch (c) {
				case 'n': c = '\n'; break;
				case 't': c = '\t'; break;
				case 'r': c = '\r'; break;
				case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
					int v = c - '0';
					for (int i = 0; i < 2 && p->s < p->end && *p->s >= '0' && *p->s <= '7'; i++)
						v = v * 8 + (*p->s++ - '0');
					c = (char)v;
					break;
				}
				case 'x': {
					int v = 0, i;
					for (i = 0; i < 2 && p->s < p->end && hex_digit_value(*p->s) >= 0; i++)
						v = v * 16 + hex_digit_value(*p->s++);
					if (i == 0)
						return fail(p, "bad \\x escape");
					c = (char)v;
					break;
				}
				case '\\': case '\'': case '"': case '?':
					break;
				default:
					return fail(p, "unknown escape \\%c", c);
				}
			}
			if (c == '\0' && f->type == PROTOBUF_C_TYPE_STRING)
				return fail(p, "field '%s' has a NUL byte: a string may not hold one",
					    f->name);
			buf_put(b, &c, 1);
		}
	}
	return 0;
}

/* Returns -EINVAL for something that is not a number, -ERANGE outside [min, max]. */
static int parse_int(const char *tok, bool is_signed, int64_t min, uint64_t max, uint64_t *ret)
{
	char *endp;

	errno = 0;
	if (tok[0] == '-') {
		long long v = strtoll(tok, &endp, 0);

		if (*endp || endp == tok)
			return -EINVAL;
		if (!is_signed || errno || v < min)
			return -ERANGE;
		*ret = (uint64_t)v;
	} else {
		unsigned long long v = strtoull(tok, &endp, 0);

		if (*endp || endp == tok)
			return -EINVAL;
		if (errno || v > max)
			return -ERANGE;
		*ret = v;
	}
	return 0;
}

static int parse_message(struct parser *p, const ProtobufCMessageDescriptor *d, struct buf *out,
			 char close, unsigned depth);

static int parse_scalar(struct parser *p, const ProtobufCFieldDescriptor *f, struct buf *out)
{
	char tok[128];
	uint64_t v = 0;
	uint32_t tag = f->id << 3;
	int r;

	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES: {
		struct buf s = {};

		r = read_string(p, f, &s);
		if (r == 0 && s.oom)
			r = fail(p, "string too long");
		if (r == 0) {
			buf_varint(out, tag | 2);
			buf_varint(out, s.len);
			buf_put(out, s.data, s.len);
		}
		free(s.data);
		return r;
	}
	default:
		break;
	}

	r = read_token(p, tok, sizeof(tok));
	if (r < 0)
		return r;

	switch (f->type) {
	case PROTOBUF_C_TYPE_BOOL:
		if (strcmp(tok, "true") == 0 || strcmp(tok, "True") == 0 || strcmp(tok, "t") == 0 ||
		    strcmp(tok, "1") == 0)
			v = 1;
		else if (strcmp(tok, "false") == 0 || strcmp(tok, "False") == 0 ||
			 strcmp(tok, "f") == 0 || strcmp(tok, "0") == 0)
			v = 0;
		else
			return fail(p, "field '%s' wants true or false, not '%s'", f->name, tok);
		buf_varint(out, tag | 0);
		buf_varint(out, v);
		return 0;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(ed, tok);

		if (ev) {
			v = (uint64_t)(int64_t)ev->value;
		} else {
			r = parse_int(tok, true, INT32_MIN, INT32_MAX, &v);
			if (r < 0 || !protobuf_c_enum_descriptor_get_value(ed, (int)(int64_t)v))
				return fail(p, "'%s' is not a value of %s (field '%s')", tok, ed->name, f->name);
		}
		buf_varint(out, tag | 0);
		buf_varint(out, v);
		return 0;
	}
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_SINT32:
		r = parse_int(tok, true, INT32_MIN, INT32_MAX, &v);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_SINT64:
		r = parse_int(tok, true, INT64_MIN, INT64_MAX, &v);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		r = parse_int(tok, false, 0, UINT32_MAX, &v);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		r = parse_int(tok, false, 0, UINT64_MAX, &v);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_DOUBLE: {
		char *endp;
		double dv = strtod(tok, &endp);

		if (*endp || isnan(dv))
			return fail(p, "'%s' is not a number (field '%s')", tok, f->name);
		if (f->type == PROTOBUF_C_TYPE_FLOAT) {
			float fv = (float)dv;
			buf_varint(out, tag | 5);
			buf_put(out, &fv, 4);
		} else {
			buf_varint(out, tag | 1);
			buf_put(out, &dv, 8);
		}
		return 0;
	}
	default:
		return fail(p, "field '%s' has a type this parser does not handle", f->name);
	}
	if (r == -ERANGE)
		return fail(p, "'%s' is out of range for field '%s'", tok, f->name);
	if (r < 0)
		return fail(p, "'%s' is not a valid value for field '%s'", tok, f->name);

	switch (f->type) {
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SINT64: {
		int64_t sv = (int64_t)v;
		buf_varint(out, tag | 0);
		buf_varint(out, varint_zigzag(sv));
		break;
	}
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_SFIXED32: {
		uint32_t x = (uint32_t)v;
		buf_varint(out, tag | 5);
		buf_put(out, &x, 4);
		break;
	}
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_SFIXED64:
		buf_varint(out, tag | 1);
		buf_put(out, &v, 8);
		break;
	case PROTOBUF_C_TYPE_INT32:
		/* negative int32 is sign-extended to 10 bytes on the wire */
		buf_varint(out, tag | 0);
		buf_varint(out, (uint64_t)(int64_t)(int32_t)v);
		break;
	default:
		buf_varint(out, tag | 0);
		buf_varint(out, v);
		break;
	}
	return 0;
}

static int parse_value(struct parser *p, const ProtobufCFieldDescriptor *f, struct buf *out,
		       unsigned depth)
{
	if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
		struct buf sub = {};
		char close;
		int r;

		if (accept(p, '{'))
			close = '}';
		else if (accept(p, '<'))
			close = '>';
		else
			return fail(p, "field '%s' is a message: expected '{'", f->name);
		r = parse_message(p, f->descriptor, &sub, close, depth + 1);
		if (r == 0 && sub.oom)
			r = fail(p, "config too large");
		if (r == 0) {
			buf_varint(out, (f->id << 3) | 2);
			buf_varint(out, sub.len);
			buf_put(out, sub.data, sub.len);
		}
		free(sub.data);
		return r;
	}
	return parse_scalar(p, f, out);
}

static int parse_message(struct parser *p, const ProtobufCMessageDescriptor *d, struct buf *out,
			 char close, unsigned depth)
{
	char name[128];
	int r;

	if (depth > PBTXT_MAX_DEPTH)
		return fail(p, "messages nested too deeply");

	for (;;) {
		const ProtobufCFieldDescriptor *f;

		skip_space(p);
		if (close ? accept(p, close) : p->s >= p->end)
			return 0;
		if (p->s >= p->end)
			return fail(p, "missing '%c'", close);
		r = read_token(p, name, sizeof(name));
		if (r < 0)
			return r;
		f = protobuf_c_message_descriptor_get_field_by_name(d, name);
		if (!f)
			return fail(p, "%s has no field '%s'", d->name, name);
		if (!accept(p, ':') && f->type != PROTOBUF_C_TYPE_MESSAGE)
			return fail(p, "expected ':' after '%s'", name);
		if (accept(p, '[')) {
			if (f->label != PROTOBUF_C_LABEL_REPEATED)
				return fail(p, "field '%s' is not repeated", name);
			if (!accept(p, ']')) {
				do {
					r = parse_value(p, f, out, depth);
					if (r < 0)
						return r;
				} while (accept(p, ','));
				if (!accept(p, ']'))
					return fail(p, "expected ']'");
			}
		} else {
			r = parse_value(p, f, out, depth);
			if (r < 0)
				return r;
		}
		if (!accept(p, ','))
			(void)accept(p, ';');
	}
}

int pbtxt_to_binary(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
		    uint8_t **ret_data, size_t *ret_len, char *err, size_t err_len)
{
	struct parser p = { .s = text, .end = text + len, .line = 1, .err = err, .err_len = err_len };
	struct buf out = {};
	int r;

	if (err && err_len)
		err[0] = '\0';
	r = parse_message(&p, d, &out, '\0', 0);
	if (r == 0 && out.oom)
		r = out.len >= PBTXT_MAX_OUTPUT ? fail(&p, "config too large") : -ENOMEM;
	if (r < 0) {
		free(out.data);
		return r;
	}
	if (!out.data) {
		out.data = malloc(1);
		if (!out.data)
			return -ENOMEM;
	}
	*ret_data = out.data;
	*ret_len = out.len;
	return 0;
}

int pbtxt_parse(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
		ProtobufCMessage **ret, char *err, size_t err_len)
{
	_cleanup_free_ uint8_t *bin = NULL;
	ProtobufCMessage *m;
	size_t n;
	int r;

	r = pbtxt_to_binary(d, text, len, &bin, &n, err, err_len);
	if (r < 0)
		return r;
	m = protobuf_c_message_unpack(d, NULL, n, bin);
	if (!m) {
		if (err && err_len)
			snprintf(err, err_len, "the config does not form a valid %s", d->name);
		return -EBADMSG;
	}
	*ret = m;
	return 0;
}
