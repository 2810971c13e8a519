/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Inside the parse room (and its tests) only: the parser's shared state,
 * over the page walker (ftrace_page.h).
 */

/*
 * Internals of the ftrace data path shared by ftrace_format.c,
 * ftrace_translate.c, ftrace_parser.c, ftrace_parser_batch.c and
 * ftrace_compact.c.  Not for the control side: it uses ftrace_parse.h.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_page.h"
#include "util/util_varint.h"

struct tep_handle;
struct tep_event;

/* ---- translations -------------------------------------------------------- */

/* How one kernel field is read and written; the hot loop switches on it. */
enum ftrace_fkind {
	FTRACE_FK_U8,
	FTRACE_FK_U16,
	FTRACE_FK_U32,
	FTRACE_FK_U64,
	FTRACE_FK_S8,
	FTRACE_FK_S16,
	FTRACE_FK_S32,
	FTRACE_FK_S64,
	FTRACE_FK_PID,          /* s32, also added to the pidset */
	FTRACE_FK_FIXED_STR,    /* char[N], cut at NUL */
	FTRACE_FK_CSTR,         /* char[] (size 0): to NUL or record end */
	FTRACE_FK_DATALOC_STR,  /* __data_loc char[] */
	FTRACE_FK_DATALOC_BYTES,/* __data_loc u8[] */
	FTRACE_FK_RELLOC_STR,   /* __rel_loc char[]: offset from the field end */
	FTRACE_FK_RELLOC_BYTES,
	FTRACE_FK_STRPTR,       /* const char *: printk_formats lookup */
	FTRACE_FK_SYM32,        /* void *: interned kernel address index */
	FTRACE_FK_SYM64,
	FTRACE_FK_DEV32,        /* dev_t: kernel -> userspace encoding */
	FTRACE_FK_DEV64,
	FTRACE_FK_ARGS6_32,     /* sys_enter args[6]: repeated uint64 */
	FTRACE_FK_ARGS6_64,
	_FTRACE_FK_MAX,
};

/* Proto scalar type a generic field is declared with. */
enum ftrace_gtype {
	FTRACE_GT_INT64,
	FTRACE_GT_UINT64,
	FTRACE_GT_STRING,
	FTRACE_GT_BYTES,
};

struct ftrace_field_tr {
	uint16_t offset;
	uint16_t size;
	uint8_t kind;           /* enum ftrace_fkind */
	uint8_t legacy_value;   /* GenericFtraceEvent.Field value number: 3/4/5 */
	uint32_t proto_field;
	uint16_t name_len;
	const char *name;       /* kernel field name (legacy generic encoding) */
};

enum ftrace_tr_type {
	FTRACE_TR_TYPED,
	FTRACE_TR_GENERIC,      /* dense or legacy is a parser option */
	FTRACE_TR_KPROBE,       /* KprobeEvent{name, type}: no field is read */
};

/* FtraceEvent.kprobe_event, and the groups whose events it carries. */
#define FTRACE_FIELD_KPROBE 542u

struct ftrace_event_tr {
	uint32_t proto_field;   /* FtraceEvent field: typed id or dynamic id */
	uint16_t event_id;
	uint16_t min_size;      /* records shorter than this are INVALID_EVENT */
	uint8_t type;           /* enum ftrace_tr_type */
	bool is_rename;         /* task/task_rename: common_pid -> renamed set */
	uint16_t n_fields;
	struct ftrace_field_tr *fields;
	uint16_t name_len;
	const char *name;       /* event name (legacy generic encoding) */
	/* Dense generic only: serialized GenericEventDescriptor. */
	uint8_t *descriptor;
	size_t descriptor_len;
};

/* Offsets that compact_sched needs, validated against the expected types. */
struct ftrace_compact_format {
	bool valid;
	int switch_id, waking_id;
	uint16_t switch_size, waking_size;
	uint16_t sw_prev_state_off, sw_next_pid_off, sw_next_prio_off, sw_next_comm_off;
	uint8_t sw_prev_state_size; /* 4 or 8 */
	uint16_t wk_pid_off, wk_target_cpu_off, wk_prio_off, wk_comm_off, wk_common_flags_off;
};

#define FTRACE_DYN_FIELD_BASE 65536u
#define FTRACE_FIELD_GENERIC 327u
#define FTRACE_MAX_EVENT_ID 65535

/* ---- format table internals (ftrace_format.c) --------------------------- */

struct tep_event *ftrace_format_table_tep_event(const struct ftrace_format_table *t, int id);
const char *ftrace_format_table_group(const struct ftrace_format_table *t, int id);

/* Highest event id loaded so far (0: none). */
int ftrace_format_table_max_id(const struct ftrace_format_table *t);

/*
 * The cache of the layer above (ftrace_translate.c), kept with the table so
 * that every parser of one instance shares it: set once, freed with
 * @free_cache when the table is freed (or the cache replaced).
 */
void *ftrace_format_table_cache(const struct ftrace_format_table *t);
void ftrace_format_table_set_cache(struct ftrace_format_table *t, void *cache,
				   void (*free_cache)(void *cache));

/* printk_formats: address -> string, loaded on first use. */
int ftrace_format_table_load_printk(struct ftrace_format_table *t);
const char *ftrace_format_table_printk_lookup(const struct ftrace_format_table *t,
					      uint64_t addr, size_t *ret_len);

/* ---- translate (ftrace_translate.c) ------------------------------------ */

/**
 * ftrace_translate_get - the translation of event @id of @t: typed when
 * the table of known events has it, else generic.  Built once per table
 * and shared by its parsers: a generic event keeps the dynamic field id
 * (65536, 65537... in the order first asked for) it got first.
 * Returns: 0, -ENOENT for an id the table has not loaded, -ENOMEM.
 */
int ftrace_translate_get(struct ftrace_format_table *t, int id, const struct ftrace_event_tr **ret);

/**
 * ftrace_translate_compact - the sched_switch/sched_waking layout of @t
 * (their formats loaded on first use), checked against the one
 * compact_sched assumes; resolved once per table.  Never NULL: ->valid is
 * false when the formats are absent or unexpected.
 */
const struct ftrace_compact_format *ftrace_translate_compact(struct ftrace_format_table *t);

/* ---- compact_sched columns (ftrace_compact.c) -------------------------- */

/*
 * Entries per column.  A 4 KiB page holds at most ~100 compact records, and
 * Perfetto starts a new bundle once the comm table passes 64 at a page
 * boundary, so bundles rarely get near this; when they do, the bundle is
 * closed early (a split, not a loss).
 */
#define FTRACE_COMPACT_CAP 8192u
/* Comm table size: 64 (the per-page threshold) plus a page's worth. */
#define FTRACE_COMPACT_MAX_COMMS 255u
#define FTRACE_COMPACT_COMM_THRESHOLD 64u
#define FTRACE_COMM_LEN 16u

/* Open-addressing index over the comm table: slots hold index + 1. */
#define FTRACE_COMPACT_HASH_SLOTS 512u

/*
 * The columns, in the order a bundle carries them.  Each is kept as the
 * bytes of its packed field (varints, timestamps as deltas) from the moment
 * an event is stored: closing a bundle is then a length and a copy per
 * column, and the buffer holds a few bytes per value instead of 4 or 8.
 */
enum ftrace_compact_col {
	FTRACE_CS_SW_TS,
	FTRACE_CS_SW_NEXT_PID,
	FTRACE_CS_SW_PREV_STATE,
	FTRACE_CS_SW_NEXT_PRIO,
	FTRACE_CS_SW_COMM,
	FTRACE_CS_WK_TS,
	FTRACE_CS_WK_PID,
	FTRACE_CS_WK_TARGET_CPU,
	FTRACE_CS_WK_PRIO,
	FTRACE_CS_WK_COMM,
	FTRACE_CS_WK_FLAGS,
	_FTRACE_CS_COL_MAX,
};

struct ftrace_compact_buf {
	uint32_t n_sw, n_wk, n_comms;
	/* Previous timestamp of each column, 0 at the start of a bundle:
	 * the first value of a bundle is absolute. */
	uint64_t sw_last_ts, wk_last_ts;
	uint8_t *cur[_FTRACE_CS_COL_MAX];       /* where the next varint goes */
	uint8_t *start[_FTRACE_CS_COL_MAX];     /* room for FTRACE_COMPACT_CAP values */
	/* Comms NUL-cut and zero-padded to 16 bytes, compared as two words. */
	uint64_t (*comms)[2];
	uint8_t *comm_len;
	uint16_t *comm_hash;
	void *map;              /* every array above lives in this mapping */
	size_t map_len;
};

int ftrace_compact_buf_new(struct ftrace_compact_buf **ret);
struct ftrace_compact_buf *ftrace_compact_buf_free(struct ftrace_compact_buf *b);

static inline void ftrace_compact_buf_reset(struct ftrace_compact_buf *b)
{
	if (b->n_comms)
		memset(b->comm_hash, 0, FTRACE_COMPACT_HASH_SLOTS * sizeof(*b->comm_hash));
	b->n_sw = b->n_wk = b->n_comms = 0;
	b->sw_last_ts = b->wk_last_ts = 0;
	for (int i = 0; i < _FTRACE_CS_COL_MAX; i++)
		b->cur[i] = b->start[i];
}

/*
 * Room kept past the end of each column for varint_put(), which stores a
 * three-byte value as a four-byte word (the next value overwrites the
 * extra byte).
 */
#define FTRACE_COMPACT_COL_SLACK 8u

/* Append @v to column @c (int32 values are sign-extended first, as protobuf does). */
static inline void ftrace_compact_put(struct ftrace_compact_buf *b, enum ftrace_compact_col c,
				      uint64_t v)
{
	b->cur[c] = varint_put(b->cur[c], v);
}

/* Same, for columns whose values are seldom below 128 (timestamp deltas,
 * pids): their usual two-byte case is tested first. */
static inline void ftrace_compact_put_wide(struct ftrace_compact_buf *b, enum ftrace_compact_col c,
					   uint64_t v)
{
	uint8_t *p = b->cur[c];

	if (__builtin_expect(v - 0x80 < 0x4000 - 0x80, 1)) {
		uint16_t w = (uint16_t)(v + (v & 0x3f80) + 0x80);

		memcpy(p, &w, 2);
		b->cur[c] = p + 2;
		return;
	}
	b->cur[c] = varint_put(p, v);
}

static inline bool ftrace_compact_buf_empty(const struct ftrace_compact_buf *b)
{
	return b->n_sw == 0 && b->n_wk == 0;
}

/**
 * ftrace_compact_intern - index of the kernel comm at @p (16 bytes, cut at
 * the first NUL) in this bundle's table, added if new: indices follow
 * first sight.  Returns: the index, or -1 if the table is full.
 */
int ftrace_compact_intern(struct ftrace_compact_buf *b, const uint8_t *p);

/*
 * ftrace_compact_comm_at - whether entry @i of the table is the comm whose
 * 16 kernel bytes are @raw: then it is what ftrace_compact_intern() would
 * return for them, since keys are unique.  A guess for @i that proves wrong
 * (stale, or another comm) costs nothing but this check.
 */
static inline bool ftrace_compact_comm_at(const struct ftrace_compact_buf *b, uint32_t i,
					  const uint64_t raw[2])
{
	return i < b->n_comms && b->comms[i][0] == raw[0] && b->comms[i][1] == raw[1];
}

/**
 * ftrace_compact_buf_write - append FtraceEventBundle.compact_sched (field
 * 4) to the bundle at @w if any entry is buffered, then reset.
 */
void ftrace_compact_buf_write(struct ftrace_compact_buf *b, struct pbw *w);

/* ---- parser (ftrace_parser.c), used by ftrace_parser_batch.c ------------ */

struct ftrace_parser {
	struct ftrace_format_table *t;
	struct ftrace_parser_opts opts;

	/* Event id -> translation; NULL = not this session's event. */
	const struct ftrace_event_tr **by_id;
	size_t n_ids;

	/* -1 unless compact_sched is active (and, for waking, enabled). */
	int compact_switch_id;
	int compact_waking_id;
	const struct ftrace_compact_format *cf;
	struct ftrace_compact_buf *cb;

	/* Dense generic events: dynamic index -> translation, and which
	 * descriptors the open bundle must carry. */
	const struct ftrace_event_tr **dyn_trs;
	uint64_t *dyn_used;
	size_t n_dyn;       /* entries in dyn_trs (bits in dyn_used) */

	enum ftrace_clock clock;
	int64_t clock_ftrace_ts;
	int64_t clock_boot_ts;

	/* print_filter: -1 unless a filter applies to an enabled ftrace/print */
	int print_id;
	uint16_t print_buf_off;
	const struct ftrace_print_filter *print_filter;

	/* Kprobe events: KprobeEvent.type by event id (0: not a kprobe). */
	uint8_t *kprobe_type;
	size_t n_kprobe_type;

	/* Called with each bundle's packet before it is finished. */
	ftrace_parser_bundle_hook bundle_hook;
	void *bundle_hook_ctx;

	/* The open batch of ftrace_parser_batch_*() (ftrace_parser_batch.c). */
	struct bundler *batch;
};

/* ftrace_parser_batch.c: the batch state, allocated with the parser. */
int ftrace_parser_batch_alloc(struct ftrace_parser *p);
void ftrace_parser_batch_free(struct ftrace_parser *p);
