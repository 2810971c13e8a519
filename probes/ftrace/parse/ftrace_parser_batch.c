/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_bundle - the drain hot path: walk pages, pick this session's
 * records, encode them into FtraceEventBundle packets.  Nothing here
 * allocates, makes a syscall or compares strings; per record it is an
 * array lookup by event id and a switch over precomputed field kinds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "protos/pbw.h"
#include "util/util.h"

/* TracePacket / FtraceEventBundle / FtraceEvent field numbers. */
enum {
	PACKET_FTRACE_EVENTS = 1,
	BUNDLE_CPU = 1,
	BUNDLE_EVENT = 2,
	BUNDLE_LOST_EVENTS = 3,
	BUNDLE_FTRACE_CLOCK = 5,
	BUNDLE_FTRACE_TIMESTAMP = 6,
	BUNDLE_BOOT_TIMESTAMP = 7,
	BUNDLE_ERROR = 8,
	BUNDLE_PREVIOUS_END_TS = 10,
	BUNDLE_GENERIC_DESCRIPTORS = 11,
	ERROR_TIMESTAMP = 1,
	ERROR_STATUS = 2,
	EVENT_TIMESTAMP = 1,
	EVENT_PID = 2,
	GENERIC_EVENT_NAME = 1,
	GENERIC_FIELD = 2,
	GENERIC_FIELD_NAME = 1,
};

/*
 * Event payloads are first encoded here, so that their lengths are known
 * before they go to the bundle: exact one-byte lengths, no nested-message
 * bookkeeping per event.  Larger ones take the nested path.
 */
#define SCRATCH_SIZE 1024u

/*
 * Pids already given to the pidset in this call, direct-mapped by the low
 * bits: most events name a pid seen a few events before, and the set
 * answers "already there" anyway, so a hit skips a call that would change
 * nothing.  The set is cleared only between calls.
 *
 * Each slot also guesses the comm index of its pid for compact_sched:
 * the index last interned for it, checked against the comm table before
 * use (ftrace_compact_comm_at()), so a stale guess only costs the hash
 * lookup it would have cost anyway.
 */
#define PID_CACHE_SLOTS 256u

struct pid_slot {
	int32_t pid;
	uint32_t comm;
};

/*
 * The page loop has one copy per compact_sched case (parse_payload()): what
 * it calls per record goes into each copy, whatever the compiler's size
 * limits.
 */
#define _always_inline_ inline __attribute__((always_inline))

/* State of one parse_pages call. */
struct bundler {
	struct ftrace_parser *p;
	const struct pbw_sink *sink;
	struct pbw *w;                  /* open bundle, or NULL */
	uint32_t cpu;
	struct ftrace_cpu_state *st;
	struct ftrace_pidset *pids;
	struct ftrace_pass_stats *stats;
	bool dyn_used;                  /* some dyn_used bit is set */
	bool usual_layout;              /* compact formats are usual_layout's */
	int packets;
	size_t page_size;
	unsigned commit_size;
	bool open;                      /* between batch_begin and batch_end */
	struct pbw_sink sink_store;     /* the batch API's sink */
	struct pid_slot pid_cache[PID_CACHE_SLOTS];
	struct pbw scratch;
	uint8_t scratch_buf[SCRATCH_SIZE];
};

static void bundle_open(struct bundler *b, bool lost, uint64_t prev_end)
{
	struct ftrace_parser *p = b->p;
	struct pbw *w = b->sink->begin_packet(b->sink->userdata);

	pbw_begin_nested(w, PACKET_FTRACE_EVENTS);
	pbw_varint(w, BUNDLE_CPU, b->cpu);
	if (lost)
		pbw_varint(w, BUNDLE_LOST_EVENTS, 1);
	/* Always written, 0 included: "valid since the session started". */
	pbw_varint(w, BUNDLE_PREVIOUS_END_TS, prev_end);
	if (p->clock != FTRACE_CLOCK_UNSPECIFIED) {
		pbw_varint(w, BUNDLE_FTRACE_CLOCK, (uint64_t)p->clock);
		pbw_int(w, BUNDLE_FTRACE_TIMESTAMP, p->clock_ftrace_ts);
		pbw_int(w, BUNDLE_BOOT_TIMESTAMP, p->clock_boot_ts);
	}
	b->w = w;
}

static void write_descriptors(struct bundler *b)
{
	struct ftrace_parser *p = b->p;
	size_t words = (p->n_dyn + 63) / 64;

	/* Ascending field id, once each, as Perfetto orders them. */
	for (size_t i = 0; i < words; i++) {
		uint64_t m = p->dyn_used[i];

		while (m) {
			size_t idx = i * 64 + (size_t)__builtin_ctzll(m);
			const struct ftrace_event_tr *tr = p->dyn_trs[idx];

			m &= m - 1;
			if (tr)
				pbw_bytes(b->w, BUNDLE_GENERIC_DESCRIPTORS, tr->descriptor,
					  tr->descriptor_len);
		}
		p->dyn_used[i] = 0;
	}
	b->dyn_used = false;
}

static void bundle_close(struct bundler *b)
{
	struct ftrace_compact_buf *cb = b->p->cb;

	if (!b->w)
		return;
	if (b->stats) {
		/* Compact entries are counted here rather than one by one:
		 * each is stored in an open bundle, and every bundle is
		 * closed before the pass returns. */
		b->stats->records += cb->n_sw + cb->n_wk;
		b->stats->events += cb->n_sw + cb->n_wk;
		b->stats->compact_switch += cb->n_sw;
		b->stats->compact_waking += cb->n_wk;
	}
	ftrace_compact_buf_write(cb, b->w);
	if (b->dyn_used)
		write_descriptors(b);
	pbw_end_nested(b->w);
	if (b->p->bundle_hook)
		b->p->bundle_hook(b->p->bundle_hook_ctx, b->w, b->pids);
	b->w = NULL;
	b->packets++;
	if (b->stats) {
		b->stats->packets++;
		if (b->sink->end_packet(b->sink->userdata) < 0)
			b->stats->packets_dropped++;
	} else {
		(void)b->sink->end_packet(b->sink->userdata);
	}
}

static inline struct pbw *bundle_get(struct bundler *b)
{
	if (_unlikely_(!b->w))
		bundle_open(b, false, b->st->last_event_ts);
	return b->w;
}

static void write_error(struct bundler *b, uint64_t ts, enum ftrace_parse_status status)
{
	struct pbw *w = bundle_get(b);

	pbw_begin_nested(w, BUNDLE_ERROR);
	if (ts)
		pbw_varint(w, ERROR_TIMESTAMP, ts);
	pbw_varint(w, ERROR_STATUS, (uint64_t)status);
	pbw_end_nested(w);
	if (b->stats) {
		b->stats->parse_errors++;
		b->stats->parse_errors_mask |= 1u << status;
	}
}

static inline struct pid_slot *pid_slot(struct bundler *b, int32_t pid)
{
	return &b->pid_cache[(uint32_t)pid & (PID_CACHE_SLOTS - 1)];
}

/* Give @pid to the pidset unless this call already did. */
static inline void note_pid(struct bundler *b, int32_t pid)
{
	struct pid_slot *s = pid_slot(b, pid);

	if (s->pid == pid)
		return;
	s->pid = pid;
	/* Full set: the pid is dropped and flagged now, and would be again. */
	(void)ftrace_pidset_add(b->pids, pid);
}

static void pid_cache_init(struct bundler *b)
{
	/* Slot i starts with a value that maps to another slot: no pid hits it. */
	for (uint32_t i = 0; i < PID_CACHE_SLOTS; i++)
		b->pid_cache[i] = (struct pid_slot){ .pid = (int32_t)(i ^ 1) };
}

/* ---- field encoding ------------------------------------------------------ */

static inline uint64_t rd_u(const uint8_t *p, unsigned size)
{
	uint64_t v = 0;

	memcpy(&v, p, size); /* little-endian host, as the kernel's buffer */
	return v;
}

static inline int64_t rd_s(const uint8_t *p, unsigned size)
{
	switch (size) {
	case 1: return (int8_t)p[0];
	case 2: { int16_t v; memcpy(&v, p, 2); return v; }
	case 4: { int32_t v; memcpy(&v, p, 4); return v; }
	default: { int64_t v; memcpy(&v, p, 8); return v; }
	}
}

/* Kernel dev_t (major << 20 | minor) -> userspace makedev() layout. */
static inline uint64_t dev_to_user(uint64_t kdev)
{
	uint64_t maj = kdev >> 20, min = kdev & ((1u << 20) - 1);

	return ((maj & 0xfffff000ull) << 32) | ((maj & 0xfffull) << 8) |
	       ((min & 0xffffff00ull) << 12) | (min & 0xffull);
}

/*
 * A __data_loc/__rel_loc word: offset (from the record start, or from the
 * end of the field for rel) in the low 16 bits, length in the high 16.
 * Returns: false if it points outside the record.
 */
static inline bool loc_span(const uint8_t *rec, uint32_t rec_len, const struct ftrace_field_tr *f,
			    bool rel, const uint8_t **ret, size_t *ret_len)
{
	uint32_t v = ftrace_rd32(rec + f->offset);
	size_t off = (v & 0xffff) + (rel ? (size_t)f->offset + 4 : 0), len = v >> 16;

	*ret = rec;
	*ret_len = 0;
	if (len == 0)
		return true;
	if (off > rec_len || len > rec_len - off)
		return false;
	*ret = rec + off;
	*ret_len = len;
	return true;
}

/*
 * Write one field at @field_no.  Returns: false if the record contradicts
 * the format (the event is still finished; the page stops after it).
 */
static bool write_field(struct bundler *b, struct pbw *w, const struct ftrace_field_tr *f,
			uint32_t field_no, const uint8_t *rec, uint32_t rec_len)
{
	const uint8_t *fp = rec + f->offset;
	const uint8_t *s;
	size_t len;

	switch (f->kind) {
	case FTRACE_FK_U8:
		pbw_varint(w, field_no, fp[0]);
		return true;
	case FTRACE_FK_U16:
		pbw_varint(w, field_no, rd_u(fp, 2));
		return true;
	case FTRACE_FK_U32:
		pbw_varint(w, field_no, ftrace_rd32(fp));
		return true;
	case FTRACE_FK_U64:
		pbw_varint(w, field_no, rd_u(fp, 8));
		return true;
	case FTRACE_FK_S8:
		pbw_int(w, field_no, rd_s(fp, 1));
		return true;
	case FTRACE_FK_S16:
		pbw_int(w, field_no, rd_s(fp, 2));
		return true;
	case FTRACE_FK_S32:
		pbw_int(w, field_no, rd_s(fp, 4));
		return true;
	case FTRACE_FK_S64:
		pbw_int(w, field_no, rd_s(fp, 8));
		return true;
	case FTRACE_FK_PID: {
		int32_t pid = (int32_t)ftrace_rd32(fp);

		pbw_int(w, field_no, pid);
		if (b->pids)
			note_pid(b, pid);
		return true;
	}
	case FTRACE_FK_FIXED_STR:
		pbw_string_n(w, field_no, (const char *)fp, f->size);
		return true;
	case FTRACE_FK_CSTR:
		pbw_string_n(w, field_no, (const char *)fp, rec_len - f->offset);
		return true;
	case FTRACE_FK_DATALOC_STR:
	case FTRACE_FK_RELLOC_STR:
		if (!loc_span(rec, rec_len, f, f->kind == FTRACE_FK_RELLOC_STR, &s, &len))
			return false;
		pbw_string_n(w, field_no, (const char *)s, len);
		return true;
	case FTRACE_FK_DATALOC_BYTES:
	case FTRACE_FK_RELLOC_BYTES:
		if (!loc_span(rec, rec_len, f, f->kind == FTRACE_FK_RELLOC_BYTES, &s, &len))
			return false;
		pbw_bytes(w, field_no, s, len);
		return true;
	case FTRACE_FK_STRPTR: {
		const char *str = ftrace_format_table_printk_lookup(b->p->t,
								    rd_u(fp, MIN(f->size, 8u)), &len);

		pbw_bytes(w, field_no, str, len);
		return true;
	}
	case FTRACE_FK_SYM32:
	case FTRACE_FK_SYM64: {
		uint64_t addr = rd_u(fp, f->kind == FTRACE_FK_SYM32 ? 4 : 8);

		pbw_varint(w, field_no, b->pids ? ftrace_pidset_intern_addr(b->pids, addr) : 0);
		return true;
	}
	case FTRACE_FK_DEV32:
		pbw_varint(w, field_no, dev_to_user(ftrace_rd32(fp)));
		return true;
	case FTRACE_FK_DEV64:
		pbw_varint(w, field_no, dev_to_user(rd_u(fp, 8)));
		return true;
	case FTRACE_FK_ARGS6_32:
	case FTRACE_FK_ARGS6_64: {
		unsigned es = f->kind == FTRACE_FK_ARGS6_32 ? 4 : 8;

		for (unsigned i = 0; i < 6; i++)
			pbw_varint(w, field_no, rd_u(fp + i * es, es));
		return true;
	}
	default:
		return false;
	}
}

static bool write_fields(struct bundler *b, struct pbw *w, const struct ftrace_event_tr *tr,
			 const struct ftrace_record *rec)
{
	bool ok = true;

	if (_unlikely_(tr->type == FTRACE_TR_KPROBE)) {
		const struct ftrace_parser *p = b->p;
		uint8_t type = tr->event_id < p->n_kprobe_type ? p->kprobe_type[tr->event_id] : 0;

		/* KprobeEvent: name (1), type (2) */
		pbw_bytes(w, 1, tr->name, tr->name_len);
		if (type)
			pbw_varint(w, 2, type);
		return true;
	}

	for (uint16_t i = 0; i < tr->n_fields; i++)
		ok &= write_field(b, w, &tr->fields[i], tr->fields[i].proto_field, rec->data,
				  rec->len);
	return ok;
}

static bool write_legacy_fields(struct bundler *b, struct pbw *w, const struct ftrace_event_tr *tr,
				const struct ftrace_record *rec)
{
	bool ok = true;

	pbw_bytes(w, GENERIC_EVENT_NAME, tr->name, tr->name_len);
	for (uint16_t i = 0; i < tr->n_fields; i++) {
		const struct ftrace_field_tr *f = &tr->fields[i];

		pbw_begin_nested(w, GENERIC_FIELD);
		pbw_bytes(w, GENERIC_FIELD_NAME, f->name, f->name_len);
		ok &= write_field(b, w, f, f->legacy_value, rec->data, rec->len);
		pbw_end_nested(w);
	}
	return ok;
}

/*
 * Returns: false for INVALID_EVENT (record too short or bad string span).
 * Part of the page loop when compact_sched is off; write_event_apart()
 * when it is on.
 */
static _always_inline_ bool write_event(struct bundler *b, const struct ftrace_event_tr *tr,
					const struct ftrace_record *rec)
{
	struct ftrace_parser *p = b->p;
	struct pbw *w = bundle_get(b);
	bool legacy = tr->type == FTRACE_TR_GENERIC && !p->opts.generic_dense;
	struct pbw *s = &b->scratch;
	bool ok;
	int32_t pid;

	if (_unlikely_(rec->len < tr->min_size)) {
		/* As Perfetto: the event stays, with its timestamp only. */
		pbw_begin_nested(w, BUNDLE_EVENT);
		pbw_varint(w, EVENT_TIMESTAMP, rec->ts);
		pbw_end_nested(w);
		return false;
	}
	pid = (int32_t)ftrace_rd32(rec->data + 4);
	if (b->pids) {
		note_pid(b, pid);
		if (_unlikely_(tr->is_rename))
			(void)ftrace_pidset_add_renamed(b->pids, pid);
	}
	if (tr->type == FTRACE_TR_GENERIC && !legacy) {
		size_t idx = tr->proto_field - FTRACE_DYN_FIELD_BASE;

		p->dyn_used[idx / 64] |= 1ull << (idx % 64);
		b->dyn_used = true;
	}

	if (_likely_(!legacy)) {
		pbw_reset_range(s, b->scratch_buf, sizeof(b->scratch_buf));
		ok = write_fields(b, s, tr, rec);
		if (_likely_(!pbw_overflowed(s))) {
			size_t inner = (size_t)(s->cur - b->scratch_buf);
			uint64_t upid = (uint64_t)(int64_t)pid;
			size_t outer = 1 + pbw_varint_len(rec->ts) + 1 + pbw_varint_len(upid) +
				       pbw_varint_len((uint64_t)tr->proto_field << 3) +
				       pbw_varint_len(inner) + inner;

			pbw_tag(w, BUNDLE_EVENT, PBW_WIRE_LEN);
			pbw_append_varint(w, outer);
			pbw_varint(w, EVENT_TIMESTAMP, rec->ts);
			pbw_varint(w, EVENT_PID, upid);
			pbw_bytes(w, tr->proto_field, b->scratch_buf, inner);
			return ok;
		}
		pbw_leave_discard(s, b->scratch_buf, sizeof(b->scratch_buf));
	}

	/* Legacy encoding, or a payload larger than the scratch buffer. */
	pbw_begin_nested(w, BUNDLE_EVENT);
	pbw_varint(w, EVENT_TIMESTAMP, rec->ts);
	pbw_int(w, EVENT_PID, pid);
	if (legacy) {
		pbw_begin_nested(w, FTRACE_FIELD_GENERIC);
		ok = write_legacy_fields(b, w, tr, rec);
	} else {
		pbw_begin_nested(w, tr->proto_field);
		ok = write_fields(b, w, tr, rec);
	}
	pbw_end_nested(w);
	pbw_end_nested(w);
	return ok;
}

/* write_event(), not inlined: the page loop with compact_sched keeps its
 * registers for the compact path. */
static __attribute__((noinline)) bool write_event_apart(struct bundler *b,
							const struct ftrace_event_tr *tr,
							const struct ftrace_record *rec)
{
	return write_event(b, tr, rec);
}

/* ---- compact_sched ------------------------------------------------------- */

/*
 * Check the limits of the open bundle before the next compact entry: an
 * open bundle, and a full column or comm table ends the bundle early.
 * @page_last_ts: newest event of this page already written (0: none yet).
 * Returns: how many compact entries may be stored before the limits must
 * be checked again.  Each entry adds one to a column and at most one comm,
 * so below every limit by that many, none can be reached in between.
 */
static uint32_t compact_room(struct bundler *b, struct ftrace_compact_buf *cb,
			     uint64_t page_last_ts)
{
	if (cb->n_sw >= FTRACE_COMPACT_CAP || cb->n_wk >= FTRACE_COMPACT_CAP ||
	    cb->n_comms >= FTRACE_COMPACT_MAX_COMMS) {
		bundle_close(b);
		/* The newest event already written ends the closed bundle. */
		bundle_open(b, false, page_last_ts ? page_last_ts : b->st->last_event_ts);
	}
	(void)bundle_get(b);
	return MIN(MIN(FTRACE_COMPACT_CAP - cb->n_sw, FTRACE_COMPACT_CAP - cb->n_wk),
		   FTRACE_COMPACT_MAX_COMMS - cb->n_comms);
}

/*
 * Note @pid and return the index of its comm at @p.  The pid's cache slot
 * answers both most of the time: the pid is known in this call, and its
 * comm is the one it had the last time.
 */
static _always_inline_ uint32_t compact_pid_comm(struct bundler *b, struct ftrace_compact_buf *cb,
						 int32_t pid, const uint8_t *p)
{
	struct pid_slot *s = pid_slot(b, pid);
	uint64_t raw[2];

	memcpy(&raw[0], p, 8);
	memcpy(&raw[1], p + 8, 8);
	if (_likely_(s->pid == pid)) {
		if (_likely_(ftrace_compact_comm_at(cb, s->comm, raw)))
			return s->comm;
	} else {
		s->pid = pid;
		if (b->pids)
			(void)ftrace_pidset_add(b->pids, pid);
	}
	/* compact_room() left a free comm slot, so this cannot fail. */
	s->comm = (uint32_t)ftrace_compact_intern(cb, p);
	return s->comm;
}

static _always_inline_ void compact_switch(struct bundler *b, const struct ftrace_compact_format *cf,
					   struct ftrace_compact_buf *cb,
					   const struct ftrace_record *rec)
{
	const uint8_t *d = rec->data;
	int64_t prev_state;
	int32_t pid;
	uint32_t comm;

	cb->n_sw++;
	pid = (int32_t)ftrace_rd32(d + cf->sw_next_pid_off);
	/* long: 8 bytes but on 32-bit kernels. */
	prev_state = _likely_(cf->sw_prev_state_size == 8) ? rd_s(d + cf->sw_prev_state_off, 8)
							   : rd_s(d + cf->sw_prev_state_off, 4);
	comm = compact_pid_comm(b, cb, pid, d + cf->sw_next_comm_off);
	ftrace_compact_put_wide(cb, FTRACE_CS_SW_TS, rec->ts - cb->sw_last_ts);
	cb->sw_last_ts = rec->ts;
	ftrace_compact_put_wide(cb, FTRACE_CS_SW_NEXT_PID, (uint64_t)(int64_t)pid);
	ftrace_compact_put(cb, FTRACE_CS_SW_PREV_STATE, (uint64_t)prev_state);
	ftrace_compact_put(cb, FTRACE_CS_SW_NEXT_PRIO,
			   (uint64_t)(int64_t)(int32_t)ftrace_rd32(d + cf->sw_next_prio_off));
	ftrace_compact_put(cb, FTRACE_CS_SW_COMM, (uint8_t)comm);
}

static _always_inline_ void compact_waking(struct bundler *b, const struct ftrace_compact_format *cf,
					   struct ftrace_compact_buf *cb,
					   const struct ftrace_record *rec)
{
	const uint8_t *d = rec->data;
	int32_t pid;
	uint32_t comm;

	cb->n_wk++;
	pid = (int32_t)ftrace_rd32(d + cf->wk_pid_off);
	comm = compact_pid_comm(b, cb, pid, d + cf->wk_comm_off);
	ftrace_compact_put_wide(cb, FTRACE_CS_WK_TS, rec->ts - cb->wk_last_ts);
	cb->wk_last_ts = rec->ts;
	ftrace_compact_put_wide(cb, FTRACE_CS_WK_PID, (uint64_t)(int64_t)pid);
	ftrace_compact_put(cb, FTRACE_CS_WK_TARGET_CPU,
			   (uint64_t)(int64_t)(int32_t)ftrace_rd32(d + cf->wk_target_cpu_off));
	ftrace_compact_put(cb, FTRACE_CS_WK_PRIO,
			   (uint64_t)(int64_t)(int32_t)ftrace_rd32(d + cf->wk_prio_off));
	ftrace_compact_put(cb, FTRACE_CS_WK_COMM, (uint8_t)comm);
	ftrace_compact_put(cb, FTRACE_CS_WK_FLAGS, d[cf->wk_common_flags_off]);
}

/* ---- pages ----------------------------------------------------------------- */

/*
 * sched_switch and sched_waking as 64-bit kernels lay them out (prev_state
 * a long).  Sessions whose formats match get a copy of the page loop
 * compiled with these offsets and sizes as constants: no load per field,
 * no test of the prev_state size.  Others get the copy that reads them
 * from the parser's layout.
 */
static const struct ftrace_compact_format usual_layout = {
	.switch_size = 64,
	.waking_size = 36,
	.sw_prev_state_off = 32,
	.sw_prev_state_size = 8,
	.sw_next_pid_off = 56,
	.sw_next_prio_off = 60,
	.sw_next_comm_off = 40,
	.wk_pid_off = 24,
	.wk_target_cpu_off = 32,
	.wk_prio_off = 28,
	.wk_comm_off = 8,
	.wk_common_flags_off = 2,
};

static bool is_usual_layout(const struct ftrace_compact_format *cf)
{
	const struct ftrace_compact_format *u = &usual_layout;

	return cf->switch_size == u->switch_size && cf->waking_size == u->waking_size &&
	       cf->sw_prev_state_off == u->sw_prev_state_off &&
	       cf->sw_prev_state_size == u->sw_prev_state_size &&
	       cf->sw_next_pid_off == u->sw_next_pid_off &&
	       cf->sw_next_prio_off == u->sw_next_prio_off &&
	       cf->sw_next_comm_off == u->sw_next_comm_off && cf->wk_pid_off == u->wk_pid_off &&
	       cf->wk_target_cpu_off == u->wk_target_cpu_off && cf->wk_prio_off == u->wk_prio_off &&
	       cf->wk_comm_off == u->wk_comm_off &&
	       cf->wk_common_flags_off == u->wk_common_flags_off;
}

/*
 * The page loop.  @compact: compact_sched is on, with layout @cf.  Callers
 * pass constants where they can: each gets its own copy of the loop.
 */
static _always_inline_ enum ftrace_parse_status parse_payload_as(struct bundler *b,
								 const uint8_t *data,
								 const struct ftrace_page_header *hdr,
								 bool compact,
								 const struct ftrace_compact_format *cf)
{
	struct ftrace_parser *p = b->p;
	struct ftrace_pass_stats *stats = b->stats;
	/* Locals: the column stores below could alias the parser's fields. */
	struct ftrace_compact_buf *cb = p->cb;
	const struct ftrace_event_tr *const *by_id = p->by_id;
	const size_t n_ids = p->n_ids;
	const int sw_id = p->compact_switch_id, wk_id = p->compact_waking_id;
	struct ftrace_page_iter it;
	struct ftrace_record rec;
	/* Compact entries are counted by bundle_close(). */
	uint64_t page_last_ts = 0, n_records = 0, n_events = 0, n_generic = 0, n_skipped = 0;
	/* Compact entries storable before compact_room() must look again. */
	uint32_t room = 0;
	enum ftrace_parse_status status = FTRACE_STATUS_OK;
	int r;

	ftrace_page_iter_init(&it, data, hdr->data_size, hdr->timestamp);
	while ((r = ftrace_page_next(&it, &rec)) > 0) {
		const struct ftrace_event_tr *tr;

		/* Compact ids are -1 unless active, and then enabled: test them first. */
		if (compact && rec.event_id == sw_id) {
			if (_unlikely_(rec.len < cf->switch_size)) {
				n_records++;
				status = FTRACE_STATUS_SHORT_COMPACT_EVENT;
				break;
			}
			if (_unlikely_(room == 0))
				room = compact_room(b, cb, page_last_ts);
			room--;
			compact_switch(b, cf, cb, &rec);
		} else if (compact && rec.event_id == wk_id) {
			if (_unlikely_(rec.len < cf->waking_size)) {
				n_records++;
				status = FTRACE_STATUS_SHORT_COMPACT_EVENT;
				break;
			}
			if (_unlikely_(room == 0))
				room = compact_room(b, cb, page_last_ts);
			room--;
			compact_waking(b, cf, cb, &rec);
		} else {
			bool ok;

			n_records++;
			tr = rec.event_id < n_ids ? by_id[rec.event_id] : NULL;
			if (!tr) {
				/* Not ours (another session's, a trace_marker write): counted, so
				 * that the trace accounts for every event the kernel handed out. */
				n_skipped++;
				continue;
			}
			if (_unlikely_(rec.event_id == p->print_id) && rec.len > p->print_buf_off &&
			    !ftrace_print_filter_allows(p->print_filter,
							(const char *)rec.data + p->print_buf_off,
							rec.len - p->print_buf_off)) {
				if (stats)
					stats->filtered_events++;
				page_last_ts = rec.ts;
				continue;
			}
			if (compact) {
				/* Through a copy: rec never has its address taken,
				 * and stays in registers for the compact path. */
				const struct ftrace_record copy = rec;

				ok = write_event_apart(b, tr, &copy);
			} else {
				ok = write_event(b, tr, &rec);
			}
			n_events++;
			n_generic += tr->type == FTRACE_TR_GENERIC;
			if (!ok) {
				status = FTRACE_STATUS_INVALID_EVENT;
				break;
			}
		}
		page_last_ts = rec.ts;
	}
	if (r < 0)
		status = (enum ftrace_parse_status)-r;

	if (stats) {
		stats->records += n_records;
		stats->events += n_events;
		stats->generic_events += n_generic;
		stats->skipped_events += n_skipped;
	}
	/* As in Perfetto, a page that failed does not move the end mark. */
	if (status == FTRACE_STATUS_OK && page_last_ts)
		b->st->last_event_ts = page_last_ts;
	return status;
}

/*
 * Walk one page's records and encode this session's.  Returns: OK, or the
 * status that stopped the walk (the rest of the page is skipped).
 */
static enum ftrace_parse_status parse_payload(struct bundler *b, const uint8_t *data,
					      const struct ftrace_page_header *hdr)
{
	if (b->p->compact_switch_id < 0)
		return parse_payload_as(b, data, hdr, false, NULL);
	if (b->usual_layout)
		return parse_payload_as(b, data, hdr, true, &usual_layout);
	return parse_payload_as(b, data, hdr, true, b->p->cf);
}

static void batch_init(struct bundler *b, struct ftrace_parser *p, uint32_t cpu, size_t page_size,
		       const struct pbw_sink *sink, struct ftrace_cpu_state *st,
		       struct ftrace_pidset *pids, struct ftrace_pass_stats *stats)
{
	b->p = p;
	b->sink = sink;
	b->w = NULL;
	b->cpu = cpu;
	b->st = st;
	b->pids = pids;
	b->stats = stats;
	b->dyn_used = false;
	b->packets = 0;
	b->page_size = page_size;
	b->commit_size = ftrace_format_table_commit_size(p->t);
	pid_cache_init(b);
	pbw_init(&b->scratch, b->scratch_buf, sizeof(b->scratch_buf), NULL, NULL);
	ftrace_compact_buf_reset(p->cb);
	b->usual_layout = p->cf && is_usual_layout(p->cf);
}

static void batch_page(struct bundler *b, const uint8_t *page)
{
	struct ftrace_parser *p = b->p;
	struct ftrace_pass_stats *stats = b->stats;
	struct ftrace_page_header hdr;
	enum ftrace_parse_status status;

	if (stats)
		stats->pages++;
	if (ftrace_page_parse_header(page, b->page_size, b->commit_size, &hdr) < 0) {
		write_error(b, hdr.timestamp, FTRACE_STATUS_ABI_INVALID_PAGE_HEADER);
		return;
	}
	if (stats) {
		stats->bytes += hdr.data_size;
		if (hdr.missed_events) {
			stats->lost_pages++;
			if (hdr.missed_stored)
				stats->lost_events += hdr.missed_count;
			else
				stats->lost_unknown = true;
		}
	}
	/* One lost_events flag per bundle; and a long comm table makes
	 * interning slow, so Perfetto restarts it at page boundaries. */
	if (hdr.missed_events || (b->w && p->cb->n_comms > FTRACE_COMPACT_COMM_THRESHOLD)) {
		bundle_close(b);
		bundle_open(b, hdr.missed_events, b->st->last_event_ts);
	}
	status = parse_payload(b, page + hdr.header_size, &hdr);
	if (status != FTRACE_STATUS_OK)
		write_error(b, hdr.timestamp, status);
}

static bool batch_args_ok(const struct ftrace_parser *p, const struct pbw_sink *sink,
			  const struct ftrace_cpu_state *st, size_t page_size)
{
	return p && sink && sink->begin_packet && sink->end_packet && st && page_size >= 16 &&
	       page_size <= (1u << 27);
}

int ftrace_parser_parse_pages(struct ftrace_parser *p, uint32_t cpu, const uint8_t *pages,
			      size_t n_pages, size_t page_size, const struct pbw_sink *sink,
			      struct ftrace_cpu_state *st, struct ftrace_pidset *pids,
			      struct ftrace_pass_stats *stats)
{
	struct bundler b;

	if (!batch_args_ok(p, sink, st, page_size) || (n_pages && !pages))
		return -EINVAL;
	batch_init(&b, p, cpu, page_size, sink, st, pids, stats);
	for (size_t i = 0; i < n_pages; i++)
		batch_page(&b, pages + i * page_size);
	bundle_close(&b);
	return b.packets;
}

/*
 * The batch API keeps the bundler in the parser, so that the drain loop can
 * parse each page right after read() put it in a one-page buffer that is
 * still in L1, instead of reading a whole batch first.  Same bundles.
 */
int ftrace_parser_batch_begin(struct ftrace_parser *p, uint32_t cpu, size_t page_size,
			      const struct pbw_sink *sink, struct ftrace_cpu_state *st,
			      struct ftrace_pidset *pids, struct ftrace_pass_stats *stats)
{
	struct bundler *b = p ? p->batch : NULL;

	if (!b || !sink || b->open)
		return -EINVAL;
	b->sink_store = *sink;
	if (!batch_args_ok(p, &b->sink_store, st, page_size))
		return -EINVAL;
	batch_init(b, p, cpu, page_size, &b->sink_store, st, pids, stats);
	b->open = true;
	return 0;
}

void ftrace_parser_batch_page(struct ftrace_parser *p, const uint8_t *page)
{
	if (p && p->batch && p->batch->open && page)
		batch_page(p->batch, page);
}

int ftrace_parser_batch_end(struct ftrace_parser *p)
{
	struct bundler *b = p ? p->batch : NULL;

	if (!b || !b->open)
		return -EINVAL;
	bundle_close(b);
	b->open = false;
	return b->packets;
}

int ftrace_parser_batch_alloc(struct ftrace_parser *p)
{
	p->batch = calloc(1, sizeof(*p->batch));
	return p->batch ? 0 : -ENOMEM;
}

void ftrace_parser_batch_free(struct ftrace_parser *p)
{
	free(p->batch);
	p->batch = NULL;
}
