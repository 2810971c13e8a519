/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_translate - kernel event format -> proto encoding plan.
 *
 * A kernel field is first classified the way Perfetto v58.2 classifies it
 * (from its declared type, size and signedness).  A typed event then keeps
 * the fields whose names its proto message has and whose (kernel type, proto
 * type) pair Perfetto accepts; a generic event keeps every classifiable field,
 * numbered 1..N in format order, and gets a pre-serialized
 * GenericEventDescriptor.  All of this runs once per event per table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "protos/pbw.h"
#include "util/util.h"
#include "util/util_varint.h"

struct known_event {
	const char *group;
	const char *name;
	uint32_t proto_field;
	const char *spec; /* "field:number:type ..." */
};

static const struct known_event known_events[] = {
#define FTRACE_EVENT(g, n, id, spec) { g, n, id, spec },
#include "probes/ftrace/parse/ftrace_events.inc"
#undef FTRACE_EVENT
};

/* Perfetto's view of a kernel field type. */
enum ftype {
	FT_INVALID,
	FT_U8, FT_U16, FT_U32, FT_U64,
	FT_S8, FT_S16, FT_S32, FT_S64,
	FT_BOOL,
	FT_FIXED_STR, FT_CSTR, FT_STRPTR,
	FT_DATALOC, FT_DATALOC_U8, FT_RELLOC, FT_RELLOC_U8,
	FT_INODE32, FT_INODE64,
	FT_PID32, FT_COMMON_PID32,
	FT_DEV32, FT_DEV64,
	FT_SYM32, FT_SYM64,
	FT_ARGS6_32, FT_ARGS6_64,
};

/* FieldDescriptorProto.Type */
enum { PB_TYPE_INT64 = 3, PB_TYPE_UINT64 = 4, PB_TYPE_STRING = 9, PB_TYPE_BYTES = 12 };

/* GenericFtraceEvent.Field value numbers */
enum { LEGACY_STR = 3, LEGACY_INT = 4, LEGACY_UINT = 5 };

static int known_cmp(const void *key, const void *elem)
{
	const struct known_event *k = key, *e = elem;
	int c = strcmp(k->group, e->group);

	return c ? c : strcmp(k->name, e->name);
}

static const struct known_event *known_find(const char *group, const char *name)
{
	struct known_event key = { .group = group, .name = name };

	return bsearch(&key, known_events, ARRAY_SIZE(known_events), sizeof(known_events[0]),
		       known_cmp);
}

bool ftrace_translate_is_typed(const char *group, const char *name)
{
	return group && name && known_find(group, name);
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* "char" as the last word of the element type: "char", "unsigned char"... */
static bool base_is_char(const char *type)
{
	const char *br = strchr(type, '[');
	size_t n = br ? (size_t)(br - type) : strlen(type);

	while (n > 0 && type[n - 1] == ' ')
		n--;
	if (n < 4 || memcmp(type + n - 4, "char", 4) != 0)
		return false;
	return n == 4 || type[n - 5] == ' ';
}

static enum ftype classify(const struct tep_format_field *f, const char *group, const char *event)
{
	const char *type = f->type ? f->type : "";
	unsigned size = (unsigned)f->size;
	bool is_signed = f->flags & TEP_FIELD_IS_SIGNED;

	if (f->flags & TEP_FIELD_IS_DYNAMIC) {
		bool rel = f->flags & TEP_FIELD_IS_RELATIVE;
		bool u8 = strstr(type, " u8[]") || strstr(type, " __u8[]") ||
			  strstr(type, "unsigned char[]");

		if (size != 4)
			return FT_INVALID;
		if (rel)
			return u8 ? FT_RELLOC_U8 : FT_RELLOC;
		return u8 ? FT_DATALOC_U8 : FT_DATALOC;
	}
	/* char name[N] with a real bound: a NUL-padded fixed string. */
	if ((f->flags & TEP_FIELD_IS_ARRAY) && f->arraylen > 0 && base_is_char(type))
		return FT_FIXED_STR;
	if (strcmp(type, "unsigned long[6]") == 0 && strcmp(f->name, "args") == 0) {
		bool sys_enter = group && event && strcmp(group, "raw_syscalls") == 0 &&
				 strcmp(event, "sys_enter") == 0;
		if (size == 24)
			return sys_enter ? FT_ARGS6_32 : FT_U32;
		if (size == 48)
			return sys_enter ? FT_ARGS6_64 : FT_U64;
	}
	if (strstr(type, "char *"))
		return FT_STRPTR;
	/* function_graph stores kernel function addresses in u64 fields. */
	if (group && event && strcmp(group, "ftrace") == 0 &&
	    (strcmp(event, "funcgraph_entry") == 0 || strcmp(event, "funcgraph_exit") == 0) &&
	    strcmp(f->name, "func") == 0)
		type = "void *";
	if (starts_with(type, "void*") || starts_with(type, "void *")) {
		if (size == 4)
			return FT_SYM32;
		if (size == 8)
			return FT_SYM64;
	}
	if (starts_with(type, "char") && size == 0)
		return FT_CSTR;
	if (starts_with(type, "bool"))
		return FT_BOOL;
	if (starts_with(type, "ino_t") || starts_with(type, "i_ino")) {
		if (size == 4)
			return FT_INODE32;
		if (size == 8)
			return FT_INODE64;
	}
	if (starts_with(type, "dev_t")) {
		if (size == 4)
			return FT_DEV32;
		if (size == 8)
			return FT_DEV64;
	}
	if (starts_with(type, "pid_t") && size == 4)
		return FT_PID32;
	if (strstr(f->name, "common_pid") && size == 4)
		return FT_COMMON_PID32;
	switch (size) {
	case 1:
		return is_signed ? FT_S8 : FT_U8;
	case 2:
		return is_signed ? FT_S16 : FT_U16;
	case 4:
		return is_signed ? FT_S32 : FT_U32;
	case 8:
		return is_signed ? FT_S64 : FT_U64;
	default:
		return FT_INVALID;
	}
}

/*
 * The (kernel type, proto type) pairs Perfetto translates; any other pair
 * drops the field.  @pt is a type code from ftrace_events.inc.
 */
static int typed_kind(enum ftype ft, char pt, enum ftrace_fkind *ret)
{
	bool i = pt == 'i' || pt == 'I', u = pt == 'u' || pt == 'U';
	enum ftrace_fkind k;

	switch (ft) {
	case FT_U8: case FT_U16: case FT_U32:
		if (!u)
			return -EINVAL;
		k = ft == FT_U8 ? FTRACE_FK_U8 : ft == FT_U16 ? FTRACE_FK_U16 : FTRACE_FK_U32;
		break;
	case FT_U64:
		if (pt != 'U')
			return -EINVAL;
		k = FTRACE_FK_U64;
		break;
	case FT_S8: case FT_S16: case FT_S32:
		if (!i)
			return -EINVAL;
		k = ft == FT_S8 ? FTRACE_FK_S8 : ft == FT_S16 ? FTRACE_FK_S16 : FTRACE_FK_S32;
		break;
	case FT_S64:
		if (pt != 'I')
			return -EINVAL;
		k = FTRACE_FK_S64;
		break;
	case FT_BOOL:
		if (!u)
			return -EINVAL;
		k = FTRACE_FK_U8;
		break;
	case FT_PID32: case FT_COMMON_PID32:
		if (!i)
			return -EINVAL;
		k = FTRACE_FK_PID;
		break;
	case FT_INODE32: case FT_INODE64: case FT_DEV32: case FT_DEV64:
	case FT_SYM32: case FT_SYM64: case FT_ARGS6_32: case FT_ARGS6_64:
		if (pt != 'U')
			return -EINVAL;
		k = ft == FT_INODE32 ? FTRACE_FK_U32 : ft == FT_INODE64 ? FTRACE_FK_U64 :
		    ft == FT_DEV32 ? FTRACE_FK_DEV32 : ft == FT_DEV64 ? FTRACE_FK_DEV64 :
		    ft == FT_SYM32 ? FTRACE_FK_SYM32 : ft == FT_SYM64 ? FTRACE_FK_SYM64 :
		    ft == FT_ARGS6_32 ? FTRACE_FK_ARGS6_32 : FTRACE_FK_ARGS6_64;
		break;
	case FT_FIXED_STR: case FT_CSTR: case FT_STRPTR: case FT_DATALOC: case FT_RELLOC:
		if (pt != 's')
			return -EINVAL;
		k = ft == FT_FIXED_STR ? FTRACE_FK_FIXED_STR : ft == FT_CSTR ? FTRACE_FK_CSTR :
		    ft == FT_STRPTR ? FTRACE_FK_STRPTR : ft == FT_DATALOC ? FTRACE_FK_DATALOC_STR :
		    FTRACE_FK_RELLOC_STR;
		break;
	case FT_DATALOC_U8: case FT_RELLOC_U8:
		if (pt != 'b')
			return -EINVAL;
		k = ft == FT_DATALOC_U8 ? FTRACE_FK_DATALOC_BYTES : FTRACE_FK_RELLOC_BYTES;
		break;
	default:
		return -EINVAL;
	}
	*ret = k;
	return 0;
}

/* Generic events: every integer becomes int64 or uint64. */
static int generic_kind(enum ftype ft, enum ftrace_fkind *ret_kind, enum ftrace_gtype *ret_gt)
{
	switch (ft) {
	case FT_FIXED_STR: case FT_CSTR: case FT_STRPTR: case FT_DATALOC: case FT_RELLOC:
		*ret_gt = FTRACE_GT_STRING;
		return typed_kind(ft, 's', ret_kind);
	case FT_DATALOC_U8: case FT_RELLOC_U8:
		*ret_gt = FTRACE_GT_BYTES;
		return typed_kind(ft, 'b', ret_kind);
	case FT_S8: case FT_S16: case FT_S32: case FT_S64: case FT_PID32: case FT_COMMON_PID32:
		*ret_gt = FTRACE_GT_INT64;
		return typed_kind(ft, 'I', ret_kind);
	case FT_U8: case FT_U16: case FT_U32: case FT_U64: case FT_BOOL: case FT_DEV32:
	case FT_DEV64: case FT_INODE32: case FT_INODE64: case FT_SYM32: case FT_SYM64:
	case FT_ARGS6_32: case FT_ARGS6_64:
		*ret_gt = FTRACE_GT_UINT64;
		return typed_kind(ft, 'U', ret_kind);
	default:
		return -EINVAL;
	}
}

static struct ftrace_event_tr *event_tr_free(struct ftrace_event_tr *tr)
{
	if (!tr)
		return NULL;
	free(tr->fields);
	free(tr->descriptor);
	free(tr);
	return NULL;
}

static uint16_t common_end(const struct tep_event *ev)
{
	unsigned end = 0;

	for (const struct tep_format_field *f = ev->format.common_fields; f; f = f->next)
		end = MAX(end, (unsigned)(f->offset + f->size));
	return (uint16_t)MIN(end, 0xffffu);
}

static uint16_t field_end(const struct tep_format_field *f)
{
	return (uint16_t)MIN((unsigned)(f->offset + f->size), 0xffffu);
}

static bool field_fits_u16(const struct tep_format_field *f)
{
	return f->offset >= 0 && f->size >= 0 && f->offset + f->size <= 0xffff;
}

static int build_typed(const struct known_event *k, const struct tep_event *ev,
		       struct ftrace_event_tr **ret)
{
	_cleanup_free_ struct ftrace_field_tr *fields = NULL;
	struct ftrace_event_tr *tr;
	size_t n = 0, cap = 1;
	uint16_t min_size = MAX(common_end(ev), (uint16_t)8);
	const char *s;

	for (s = k->spec; *s; s++)
		cap += *s == ' ';
	fields = calloc(cap, sizeof(*fields));
	if (!fields)
		return -ENOMEM;

	/* Walk "name:number:type" tokens; the spec is our own generated data. */
	for (s = k->spec; *s;) {
		char fname[64];
		const char *colon = strchr(s, ':');
		const struct tep_format_field *f;
		enum ftrace_fkind kind;
		unsigned long num;
		char *endp;
		size_t len;
		char pt;

		if (!colon)
			break;
		len = (size_t)(colon - s);
		if (len >= sizeof(fname))
			return -EINVAL;
		memcpy(fname, s, len);
		fname[len] = '\0';
		num = strtoul(colon + 1, &endp, 10);
		if (*endp != ':' || !endp[1])
			return -EINVAL;
		pt = endp[1];
		s = endp + 2;
		while (*s == ' ')
			s++;

		f = tep_find_field((struct tep_event *)ev, fname);
		if (!f || !field_fits_u16(f))
			continue;
		{
			enum ftype ft = classify(f, ev->system, ev->name);

			if (ft == FT_INVALID)
				continue;
			min_size = MAX(min_size, field_end(f));
			if (typed_kind(ft, pt, &kind) < 0)
				continue;
		}
		fields[n++] = (struct ftrace_field_tr){
			.offset = (uint16_t)f->offset,
			.size = (uint16_t)f->size,
			.kind = (uint8_t)kind,
			.proto_field = (uint32_t)num,
			.name_len = (uint16_t)strnlen(f->name, 0xffff),
			.name = f->name,
		};
	}

	tr = calloc(1, sizeof(*tr));
	if (!tr)
		return -ENOMEM;
	*tr = (struct ftrace_event_tr){
		.proto_field = k->proto_field,
		.event_id = (uint16_t)ev->id,
		.min_size = min_size,
		.type = FTRACE_TR_TYPED,
		.is_rename = strcmp(k->group, "task") == 0 && strcmp(k->name, "task_rename") == 0,
		.n_fields = (uint16_t)n,
		.fields = TAKE_PTR(fields),
		.name_len = (uint16_t)strnlen(ev->name, 0xffff),
		.name = ev->name,
	};
	*ret = tr;
	return 0;
}

/* ---- generic event descriptor ------------------------------------------- */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int buf_reserve(struct buf *b, size_t n)
{
	uint8_t *np;
	size_t ncap;

	if (b->len + n <= b->cap)
		return 0;
	ncap = MAX(b->cap * 2, b->len + n + 64);
	np = realloc(b->p, ncap);
	if (!np)
		return -ENOMEM;
	b->p = np;
	b->cap = ncap;
	return 0;
}

static int buf_varint(struct buf *b, uint32_t field, uint64_t v)
{
	if (buf_reserve(b, 20) < 0)
		return -ENOMEM;
	b->len = (size_t)(varint_put(b->p + b->len, ((uint64_t)field << 3) | PBW_WIRE_VARINT) - b->p);
	b->len = (size_t)(varint_put(b->p + b->len, v) - b->p);
	return 0;
}

static int buf_bytes(struct buf *b, uint32_t field, const void *data, size_t len)
{
	if (buf_reserve(b, 20 + len) < 0)
		return -ENOMEM;
	b->len = (size_t)(varint_put(b->p + b->len, ((uint64_t)field << 3) | PBW_WIRE_LEN) - b->p);
	b->len = (size_t)(varint_put(b->p + b->len, len) - b->p);
	if (len)
		memcpy(b->p + b->len, data, len);
	b->len += len;
	return 0;
}

/*
 * GenericEventDescriptor{field_id=1, group_name=3,
 *   event_descriptor=2: DescriptorProto{name=1,
 *     field=2: FieldDescriptorProto{number=3, name=1, type=5}...}}
 * in the field order Perfetto writes.
 */
static int build_descriptor(const struct ftrace_event_tr *tr, const uint8_t *gtypes,
			    const char *group, uint8_t **ret, size_t *ret_len)
{
	struct buf field = {}, desc = {}, out = {};
	int r = -ENOMEM;

	if (buf_bytes(&desc, 1, tr->name, strlen(tr->name)) < 0)
		goto out;
	for (size_t i = 0; i < tr->n_fields; i++) {
		static const uint8_t pb_type[] = {
			[FTRACE_GT_INT64] = PB_TYPE_INT64,
			[FTRACE_GT_UINT64] = PB_TYPE_UINT64,
			[FTRACE_GT_STRING] = PB_TYPE_STRING,
			[FTRACE_GT_BYTES] = PB_TYPE_BYTES,
		};
		const struct ftrace_field_tr *f = &tr->fields[i];

		field.len = 0;
		if (buf_varint(&field, 3, f->proto_field) < 0 ||
		    buf_bytes(&field, 1, f->name, strlen(f->name)) < 0 ||
		    buf_varint(&field, 5, pb_type[gtypes[i]]) < 0 ||
		    buf_bytes(&desc, 2, field.p, field.len) < 0)
			goto out;
	}
	if (buf_varint(&out, 1, tr->proto_field) < 0 ||
	    buf_bytes(&out, 3, group, strlen(group)) < 0 ||
	    buf_bytes(&out, 2, desc.p, desc.len) < 0)
		goto out;
	*ret = TAKE_PTR(out.p);
	*ret_len = out.len;
	r = 0;
out:
	free(field.p);
	free(desc.p);
	free(out.p);
	return r;
}

/* ---- the per-table cache ------------------------------------------------- */

/* What this file derives from one format table, kept with it. */
struct tr_cache {
	struct ftrace_event_tr **trs;   /* by kernel event id */
	size_t n_trs;
	uint32_t next_dyn_id;           /* next generic field id: 65536, 65537... */
	bool compact_resolved;
	struct ftrace_compact_format compact;
};

static void tr_cache_free(void *p)
{
	struct tr_cache *c = p;

	if (!c)
		return;
	for (size_t i = 0; i < c->n_trs; i++)
		event_tr_free(c->trs[i]);
	free(c->trs);
	free(c);
}

static struct tr_cache *tr_cache_get(struct ftrace_format_table *t)
{
	struct tr_cache *c = ftrace_format_table_cache(t);

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->next_dyn_id = FTRACE_DYN_FIELD_BASE;
	ftrace_format_table_set_cache(t, c, tr_cache_free);
	return c;
}

/* The cache slot of event @id, grown to the table's highest id on demand. */
static struct ftrace_event_tr **tr_cache_slot(struct tr_cache *c, const struct ftrace_format_table *t,
					      int id)
{
	size_t want = (size_t)ftrace_format_table_max_id(t) + 1;
	struct ftrace_event_tr **n;

	if (id <= 0 || id > ftrace_format_table_max_id(t))
		return NULL;
	if ((size_t)id < c->n_trs)
		return &c->trs[id];
	want = MAX(want, c->n_trs * 2);
	want = MIN(want, (size_t)FTRACE_MAX_EVENT_ID + 1);
	n = realloc(c->trs, want * sizeof(*n));
	if (!n)
		return NULL;
	memset(n + c->n_trs, 0, (want - c->n_trs) * sizeof(*n));
	c->trs = n;
	c->n_trs = want;
	return &c->trs[id];
}

static int build_generic(struct tr_cache *c, const struct tep_event *ev,
			 struct ftrace_event_tr **ret)
{
	_cleanup_free_ struct ftrace_field_tr *fields = NULL;
	_cleanup_free_ uint8_t *gtypes = NULL;
	struct ftrace_event_tr *tr;
	uint16_t min_size = MAX(common_end(ev), (uint16_t)8);
	size_t n = 0;
	uint8_t *descriptor = NULL;
	size_t descriptor_len = 0;
	int r;

	fields = calloc((size_t)ev->format.nr_fields + 1, sizeof(*fields));
	gtypes = calloc((size_t)ev->format.nr_fields + 1, 1);
	if (!fields || !gtypes)
		return -ENOMEM;

	for (const struct tep_format_field *f = ev->format.fields; f; f = f->next) {
		enum ftrace_fkind kind;
		enum ftrace_gtype gt;

		if (n >= (size_t)ev->format.nr_fields || !field_fits_u16(f))
			continue;
		min_size = MAX(min_size, field_end(f));
		if (!f->name || !*f->name)
			continue;
		if (generic_kind(classify(f, ev->system, ev->name), &kind, &gt) < 0)
			continue;
		gtypes[n] = (uint8_t)gt;
		fields[n] = (struct ftrace_field_tr){
			.offset = (uint16_t)f->offset,
			.size = (uint16_t)f->size,
			.kind = (uint8_t)kind,
			.legacy_value = gt == FTRACE_GT_INT64 ? LEGACY_INT :
					gt == FTRACE_GT_UINT64 ? LEGACY_UINT : LEGACY_STR,
			.proto_field = (uint32_t)(n + 1),
			.name_len = (uint16_t)strnlen(f->name, 0xffff),
			.name = f->name,
		};
		n++;
	}

	tr = calloc(1, sizeof(*tr));
	if (!tr)
		return -ENOMEM;
	*tr = (struct ftrace_event_tr){
		.proto_field = c->next_dyn_id++,
		.event_id = (uint16_t)ev->id,
		.min_size = min_size,
		.type = FTRACE_TR_GENERIC,
		.n_fields = (uint16_t)n,
		.fields = TAKE_PTR(fields),
		.name_len = (uint16_t)strnlen(ev->name, 0xffff),
		.name = ev->name,
	};
	r = build_descriptor(tr, gtypes, ev->system, &descriptor, &descriptor_len);
	if (r < 0) {
		event_tr_free(tr);
		return r;
	}
	tr->descriptor = descriptor;
	tr->descriptor_len = descriptor_len;
	*ret = tr;
	return 0;
}

/*
 * The groups traced_probes reserves for the kprobes it creates: their
 * events carry no fields, only the probe's name (and, per session, the
 * KprobeEvent type), whatever the kernel puts in the record.
 */
static bool is_kprobe_group(const char *group)
{
	return group && (strcmp(group, "perfetto_kprobes") == 0 || strcmp(group, "perfetto_kretprobes") == 0);
}

static int build_kprobe(const struct tep_event *ev, struct ftrace_event_tr **ret)
{
	struct ftrace_event_tr *tr = calloc(1, sizeof(*tr));

	if (!tr)
		return -ENOMEM;
	*tr = (struct ftrace_event_tr){
		.proto_field = FTRACE_FIELD_KPROBE,
		.event_id = (uint16_t)ev->id,
		.min_size = MAX(common_end(ev), (uint16_t)8),
		.type = FTRACE_TR_KPROBE,
		.name_len = (uint16_t)strnlen(ev->name, 0xffff),
		.name = ev->name,
	};
	*ret = tr;
	return 0;
}

int ftrace_translate_get(struct ftrace_format_table *t, int id, const struct ftrace_event_tr **ret)
{
	struct tr_cache *c = tr_cache_get(t);
	struct ftrace_event_tr **slot;
	const struct known_event *k;
	const struct tep_event *ev;
	int r;

	if (!c)
		return -ENOMEM;
	if (id <= 0 || id > ftrace_format_table_max_id(t))
		return -ENOENT;
	slot = tr_cache_slot(c, t, id);
	if (!slot)
		return -ENOMEM;
	if (*slot) {
		*ret = *slot;
		return 0;
	}
	ev = ftrace_format_table_tep_event(t, id);
	if (!ev)
		return -ENOENT;
	k = known_find(ev->system, ev->name);
	if (is_kprobe_group(ev->system))
		r = build_kprobe(ev, slot);
	else
		r = k ? build_typed(k, ev, slot) : build_generic(c, ev, slot);
	if (r < 0)
		return r;
	for (uint16_t i = 0; i < (*slot)->n_fields; i++)
		if ((*slot)->fields[i].kind == FTRACE_FK_STRPTR) {
			/* Without the map such fields are written empty, as
			 * Perfetto does for addresses it cannot resolve. */
			(void)ftrace_format_table_load_printk(t);
			break;
		}
	*ret = *slot;
	return 0;
}

/* ---- compact_sched layout ----------------------------------------------- */

static const struct ftrace_field_tr *tr_field(const struct ftrace_event_tr *tr, uint32_t proto)
{
	for (uint16_t i = 0; i < tr->n_fields; i++)
		if (tr->fields[i].proto_field == proto)
			return &tr->fields[i];
	return NULL;
}

static int resolve_compact(struct ftrace_format_table *t, struct ftrace_compact_format *ret)
{
	const struct ftrace_event_tr *sw, *wk;
	const struct ftrace_field_tr *ps, *np, *npr, *nc, *wp, *wc, *wpr, *wcpu;
	const struct tep_format_field *flags;
	struct tep_event *wev;
	int sw_id, wk_id, r;

	*ret = (struct ftrace_compact_format){};
	r = ftrace_format_table_load_event(t, "sched", "sched_switch", &sw_id);
	if (r < 0)
		return r;
	r = ftrace_format_table_load_event(t, "sched", "sched_waking", &wk_id);
	if (r < 0)
		return r;
	r = ftrace_translate_get(t, sw_id, &sw);
	if (r < 0)
		return r;
	r = ftrace_translate_get(t, wk_id, &wk);
	if (r < 0)
		return r;

	/* SchedSwitchFtraceEvent / SchedWakingFtraceEvent field numbers. */
	ps = tr_field(sw, 4);
	np = tr_field(sw, 6);
	npr = tr_field(sw, 7);
	nc = tr_field(sw, 5);
	wc = tr_field(wk, 1);
	wp = tr_field(wk, 2);
	wpr = tr_field(wk, 3);
	wcpu = tr_field(wk, 5);
	wev = ftrace_format_table_tep_event(t, wk_id);
	flags = wev ? tep_find_common_field(wev, "common_flags") : NULL;

	if (!ps || (ps->kind != FTRACE_FK_S32 && ps->kind != FTRACE_FK_S64) ||
	    !np || np->kind != FTRACE_FK_PID || !npr || npr->kind != FTRACE_FK_S32 ||
	    !nc || nc->kind != FTRACE_FK_FIXED_STR || nc->size != 16 ||
	    !wp || wp->kind != FTRACE_FK_PID || !wcpu || wcpu->kind != FTRACE_FK_S32 ||
	    !wpr || wpr->kind != FTRACE_FK_S32 || !wc || wc->kind != FTRACE_FK_FIXED_STR ||
	    wc->size != 16 || !flags || flags->size != 1 || (flags->flags & TEP_FIELD_IS_SIGNED))
		return -EPROTO;

	*ret = (struct ftrace_compact_format){
		.valid = true,
		.switch_id = sw_id,
		.waking_id = wk_id,
		.switch_size = sw->min_size,
		.waking_size = wk->min_size,
		.sw_prev_state_off = ps->offset,
		.sw_prev_state_size = ps->kind == FTRACE_FK_S32 ? 4 : 8,
		.sw_next_pid_off = np->offset,
		.sw_next_prio_off = npr->offset,
		.sw_next_comm_off = nc->offset,
		.wk_pid_off = wp->offset,
		.wk_target_cpu_off = wcpu->offset,
		.wk_prio_off = wpr->offset,
		.wk_comm_off = wc->offset,
		.wk_common_flags_off = (uint16_t)flags->offset,
	};
	return 0;
}

const struct ftrace_compact_format *ftrace_translate_compact(struct ftrace_format_table *t)
{
	static const struct ftrace_compact_format invalid = { .valid = false };
	struct tr_cache *c = tr_cache_get(t);

	if (!c)
		return &invalid;
	if (!c->compact_resolved) {
		/* Failure (formats absent or unexpected) leaves valid=false. */
		(void)resolve_compact(t, &c->compact);
		c->compact_resolved = true;
	}
	return &c->compact;
}
