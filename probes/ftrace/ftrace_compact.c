/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_compact - FtraceEventBundle.CompactSched: sched_switch and
 * sched_waking as parallel columns of packed varints, comms interned per
 * bundle.  The columns are plain arrays filled by the parser; this file
 * allocates them and serializes them when a bundle ends.
 */
#include <errno.h>
#include <stdlib.h>

#include "probes/ftrace/ftrace_parse_internal.h"
#include "smb/pbw.h"
#include "util/util.h"

/* FtraceEventBundle.CompactSched field numbers. */
enum {
	CS_SWITCH_TIMESTAMP = 1,
	CS_SWITCH_PREV_STATE = 2,
	CS_SWITCH_NEXT_PID = 3,
	CS_SWITCH_NEXT_PRIO = 4,
	CS_INTERN_TABLE = 5,
	CS_SWITCH_NEXT_COMM_INDEX = 6,
	CS_WAKING_TIMESTAMP = 7,
	CS_WAKING_PID = 8,
	CS_WAKING_TARGET_CPU = 9,
	CS_WAKING_PRIO = 10,
	CS_WAKING_COMM_INDEX = 11,
	CS_WAKING_COMMON_FLAGS = 12,
	BUNDLE_COMPACT_SCHED = 4,
};

int ftrace_compact_buf_new(struct ftrace_compact_buf **ret)
{
	struct ftrace_compact_buf *b;
	size_t n = FTRACE_COMPACT_CAP;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->sw_ts = calloc(n, sizeof(*b->sw_ts));
	b->sw_prev_state = calloc(n, sizeof(*b->sw_prev_state));
	b->sw_next_pid = calloc(n, sizeof(*b->sw_next_pid));
	b->sw_next_prio = calloc(n, sizeof(*b->sw_next_prio));
	b->sw_comm = calloc(n, sizeof(*b->sw_comm));
	b->wk_ts = calloc(n, sizeof(*b->wk_ts));
	b->wk_pid = calloc(n, sizeof(*b->wk_pid));
	b->wk_target_cpu = calloc(n, sizeof(*b->wk_target_cpu));
	b->wk_prio = calloc(n, sizeof(*b->wk_prio));
	b->wk_comm = calloc(n, sizeof(*b->wk_comm));
	b->wk_flags = calloc(n, sizeof(*b->wk_flags));
	b->comms = calloc(FTRACE_COMPACT_MAX_COMMS, sizeof(*b->comms));
	b->comm_len = calloc(FTRACE_COMPACT_MAX_COMMS, sizeof(*b->comm_len));
	b->comm_hash = calloc(FTRACE_COMPACT_HASH_SLOTS, sizeof(*b->comm_hash));
	if (!b->sw_ts || !b->sw_prev_state || !b->sw_next_pid || !b->sw_next_prio ||
	    !b->sw_comm || !b->wk_ts || !b->wk_pid || !b->wk_target_cpu || !b->wk_prio ||
	    !b->wk_comm || !b->wk_flags || !b->comms || !b->comm_len ||
	    !b->comm_hash) {
		ftrace_compact_buf_free(b);
		return -ENOMEM;
	}
	*ret = b;
	return 0;
}

struct ftrace_compact_buf *ftrace_compact_buf_free(struct ftrace_compact_buf *b)
{
	if (!b)
		return NULL;
	free(b->sw_ts);
	free(b->sw_prev_state);
	free(b->sw_next_pid);
	free(b->sw_next_prio);
	free(b->sw_comm);
	free(b->wk_ts);
	free(b->wk_pid);
	free(b->wk_target_cpu);
	free(b->wk_prio);
	free(b->wk_comm);
	free(b->wk_flags);
	free(b->comms);
	free(b->comm_len);
	free(b->comm_hash);
	free(b);
	return NULL;
}

/*
 * Packed fields get their exact length (two passes over the column) rather
 * than a reserved 4-byte one: the columns are long and the sizes cheap.
 */
static void packed_ts(struct pbw *w, uint32_t field, const uint64_t *v, uint32_t n)
{
	uint64_t prev = 0;
	size_t len = 0;

	/* Deltas restart at 0 in every bundle: the first value is absolute. */
	for (uint32_t i = 0; i < n; i++) {
		len += pbw_varint_len(v[i] - prev);
		prev = v[i];
	}
	pbw_tag(w, field, PBW_WIRE_LEN);
	pbw_append_varint(w, len);
	prev = 0;
	for (uint32_t i = 0; i < n; i++) {
		pbw_append_varint(w, v[i] - prev);
		prev = v[i];
	}
}

static void packed_s64(struct pbw *w, uint32_t field, const int64_t *v, uint32_t n)
{
	size_t len = 0;

	for (uint32_t i = 0; i < n; i++)
		len += pbw_varint_len((uint64_t)v[i]);
	pbw_tag(w, field, PBW_WIRE_LEN);
	pbw_append_varint(w, len);
	for (uint32_t i = 0; i < n; i++)
		pbw_append_varint(w, (uint64_t)v[i]);
}

/* int32 columns: negative values sign-extend to 10 bytes, as protobuf does. */
static void packed_s32(struct pbw *w, uint32_t field, const int32_t *v, uint32_t n)
{
	size_t len = 0;

	for (uint32_t i = 0; i < n; i++)
		len += pbw_varint_len((uint64_t)(int64_t)v[i]);
	pbw_tag(w, field, PBW_WIRE_LEN);
	pbw_append_varint(w, len);
	for (uint32_t i = 0; i < n; i++)
		pbw_append_varint(w, (uint64_t)(int64_t)v[i]);
}

static void packed_u8(struct pbw *w, uint32_t field, const uint8_t *v, uint32_t n)
{
	size_t len = 0;

	for (uint32_t i = 0; i < n; i++)
		len += pbw_varint_len(v[i]);
	pbw_tag(w, field, PBW_WIRE_LEN);
	pbw_append_varint(w, len);
	for (uint32_t i = 0; i < n; i++)
		pbw_append_varint(w, v[i]);
}

void ftrace_compact_buf_write(struct ftrace_compact_buf *b, struct pbw *w)
{
	if (ftrace_compact_buf_empty(b)) {
		ftrace_compact_buf_reset(b);
		return;
	}
	/* Same field order as Perfetto: comms, switch columns, waking columns. */
	pbw_begin_nested(w, BUNDLE_COMPACT_SCHED);
	for (uint32_t i = 0; i < b->n_comms; i++)
		pbw_bytes(w, CS_INTERN_TABLE, b->comms[i], b->comm_len[i]);
	if (b->n_sw) {
		packed_ts(w, CS_SWITCH_TIMESTAMP, b->sw_ts, b->n_sw);
		packed_s32(w, CS_SWITCH_NEXT_PID, b->sw_next_pid, b->n_sw);
		packed_s64(w, CS_SWITCH_PREV_STATE, b->sw_prev_state, b->n_sw);
		packed_s32(w, CS_SWITCH_NEXT_PRIO, b->sw_next_prio, b->n_sw);
		packed_u8(w, CS_SWITCH_NEXT_COMM_INDEX, b->sw_comm, b->n_sw);
	}
	if (b->n_wk) {
		packed_ts(w, CS_WAKING_TIMESTAMP, b->wk_ts, b->n_wk);
		packed_s32(w, CS_WAKING_PID, b->wk_pid, b->n_wk);
		packed_s32(w, CS_WAKING_TARGET_CPU, b->wk_target_cpu, b->n_wk);
		packed_s32(w, CS_WAKING_PRIO, b->wk_prio, b->n_wk);
		packed_u8(w, CS_WAKING_COMM_INDEX, b->wk_comm, b->n_wk);
		packed_u8(w, CS_WAKING_COMMON_FLAGS, b->wk_flags, b->n_wk);
	}
	pbw_end_nested(w);
	ftrace_compact_buf_reset(b);
}
