/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the bundle writer emits, decoded with the generated protobuf-c code:
 * typed events, compact_sched columns and their bundle splits, dense and
 * legacy generic events with their descriptors, clock fields, pids and
 * symbol indices; and the same bytes through a real SMB writer and reader.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/perfetto/common/descriptor.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "smb/smb.h"
#include "tests/lib/ftrace_fixtures.h"
#include "util/util_varint.h"

/* ---- helpers ----------------------------------------------------------------- */

struct run {
	struct fx_sink s;
	struct ftrace_pass_stats stats;
	Perfetto__Protos__Trace *trace;
	int packets;
};

static void run_pages(struct ftrace_parser *p, const uint8_t *pages, size_t n_pages,
		      struct ftrace_cpu_state *st, struct ftrace_pidset *pids, struct run *out)
{
	memset(out, 0, sizeof(*out));
	fx_sink_init(&out->s, 8 << 20);
	out->packets = ftrace_parser_parse_pages(p, 1, pages, n_pages, FX_PAGE_SIZE, &out->s.sink,
						 st, pids, &out->stats);
	ck_assert_int_ge(out->packets, 0);
	ck_assert(!pbw_overflowed(&out->s.w));
	out->trace = perfetto__protos__trace__unpack(NULL, fx_sink_len(&out->s), out->s.buf);
	ck_assert_ptr_nonnull(out->trace);
	ck_assert_uint_eq(out->trace->n_packet, (size_t)out->packets);
	for (size_t i = 0; i < out->trace->n_packet; i++) {
		ck_assert_ptr_nonnull(out->trace->packet[i]->ftrace_events);
		/* ftrace bundles never carry a packet timestamp. */
		ck_assert(!out->trace->packet[i]->has_timestamp);
	}
}

static void run_done(struct run *r)
{
	perfetto__protos__trace__free_unpacked(r->trace, NULL);
	fx_sink_done(&r->s);
}

static Perfetto__Protos__FtraceEventBundle *bundle(struct run *r, size_t i)
{
	ck_assert_uint_lt(i, r->trace->n_packet);
	return r->trace->packet[i]->ftrace_events;
}

static struct ftrace_parser *parser_with(struct ftrace_format_table *t,
					 const struct ftrace_parser_opts *o, const int *ids,
					 size_t n)
{
	struct ftrace_parser *p = NULL;

	ck_assert_int_eq(ftrace_parser_new(t, o, &p), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(ftrace_parser_enable(p, ids[i]), 0);
	return p;
}

static struct ftrace_parser_opts opts(bool compact, bool dense)
{
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;

	o.compact_sched = compact;
	o.generic_dense = dense;
	return o;
}

/* A minimal protobuf reader for the dynamic (unknown to protobuf-c) fields. */
struct pbr {
	const uint8_t *p, *end;
};

static bool pbr_varint(struct pbr *r, uint64_t *v)
{
	return varint_get(&r->p, r->end, v);
}

/* Next field: number, wire type, varint value or (ptr,len). */
static bool pbr_next(struct pbr *r, uint32_t *num, uint64_t *v, const uint8_t **data, size_t *len)
{
	uint64_t tag;

	if (r->p >= r->end || !pbr_varint(r, &tag))
		return false;
	*num = (uint32_t)(tag >> 3);
	switch (tag & 7) {
	case 0:
		return pbr_varint(r, v);
	case 2:
		if (!pbr_varint(r, v) || *v > (uint64_t)(r->end - r->p))
			return false;
		*data = r->p;
		*len = (size_t)*v;
		r->p += *v;
		return true;
	default:
		return false;
	}
}

static const ProtobufCMessageUnknownField *unknown(const Perfetto__Protos__FtraceEvent *e,
						   uint32_t tag)
{
	for (unsigned i = 0; i < e->base.n_unknown_fields; i++)
		if (e->base.unknown_fields[i].tag == tag)
			return &e->base.unknown_fields[i];
	return NULL;
}

/* protobuf-c keeps an unknown LEN field with its length prefix: skip it. */
static struct pbr unknown_payload(const ProtobufCMessageUnknownField *u)
{
	struct pbr r = { u->data, u->data + u->len };
	uint64_t len;

	ck_assert(pbr_varint(&r, &len));
	ck_assert_uint_eq(len, (uint64_t)(r.end - r.p));
	return r;
}

static uint8_t *pages_buf;

static void teardown(void)
{
	free(pages_buf);
	pages_buf = NULL;
}

/* ---- typed ----------------------------------------------------------------------- */

START_TEST(test_typed_sched_switch)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(false, true);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_SCHED_SWITCH }, 1);
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];
	Perfetto__Protos__FtraceEventBundle *b;
	Perfetto__Protos__SchedSwitchFtraceEvent *sw;

	ck_assert_int_eq(ftrace_pidset_new(64, &pids), 0);
	ck_assert(!ftrace_parser_compact_sched_active(p));
	fx_page_init(&pg, 5000);
	fx_event(&pg, 10, r,
		 fx_sched_switch(r, 100, "bash", 100, 120, 0x402, "exactly16chars!!", 200, 98));
	fx_event(&pg, 10, r, fx_sched_switch(r, 200, "x", 200, -5, -2, "", 0, 139));
	fx_page_finish(&pg);

	run_pages(p, pg.b, 1, &st, pids, &run);
	ck_assert_int_eq(run.packets, 1);
	b = bundle(&run, 0);
	ck_assert(b->has_cpu);
	ck_assert_uint_eq(b->cpu, 1);
	ck_assert(b->has_previous_bundle_end_timestamp);
	ck_assert_uint_eq(b->previous_bundle_end_timestamp, 0);
	ck_assert(!b->has_lost_events);
	ck_assert(!b->has_ftrace_clock);
	ck_assert_ptr_null(b->compact_sched);
	ck_assert_uint_eq(b->n_event, 2);

	ck_assert_uint_eq(b->event[0]->timestamp, 5010);
	ck_assert_uint_eq(b->event[0]->pid, 100);
	ck_assert(!b->event[0]->has_common_flags);
	ck_assert_int_eq(b->event[0]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH);
	sw = b->event[0]->sched_switch;
	ck_assert_str_eq(sw->prev_comm, "bash");
	ck_assert_int_eq(sw->prev_pid, 100);
	ck_assert_int_eq(sw->prev_prio, 120);
	ck_assert_int_eq(sw->prev_state, 0x402);
	/* A comm that fills all 16 bytes has no NUL: it is cut at 16. */
	ck_assert_str_eq(sw->next_comm, "exactly16chars!!");
	ck_assert_int_eq(sw->next_pid, 200);
	ck_assert_int_eq(sw->next_prio, 98);

	sw = b->event[1]->sched_switch;
	ck_assert_uint_eq(b->event[1]->timestamp, 5020);
	ck_assert_int_eq(sw->prev_prio, -5);
	ck_assert_int_eq(sw->prev_state, -2);   /* long, sign-extended */
	ck_assert_ptr_nonnull(sw->next_comm);
	ck_assert_str_eq(sw->next_comm, "");
	ck_assert_int_eq(sw->next_pid, 0);
	ck_assert_uint_eq(st.last_event_ts, 5020);
	ck_assert_uint_eq(run.stats.events, 2);

	/* pids: common pids and every pid field. */
	ck_assert(ftrace_pidset_contains(pids, 100));
	ck_assert(ftrace_pidset_contains(pids, 200));
	ck_assert(ftrace_pidset_contains(pids, 0));
	{
		const int32_t *list;

		ck_assert_uint_eq(ftrace_pidset_pids(pids, &list), 3);
		ck_assert_int_eq(list[0], 100);
	}
	run_done(&run);

	/* The next pass's bundle points back at the last event written. */
	run_pages(p, pg.b, 1, &st, NULL, &run);
	ck_assert_uint_eq(bundle(&run, 0)->previous_bundle_end_timestamp, 5020);
	run_done(&run);

	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_typed_misc)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p = parser_with(t, &o,
					      (int[]){ FX_ID_PRINT, FX_ID_TASK_RENAME,
						       FX_ID_SCHED_PROCESS_EXEC, FX_ID_SYS_ENTER,
						       FX_ID_HRTIMER_EXPIRE_ENTRY },
					      5);
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[128];
	Perfetto__Protos__FtraceEventBundle *b;

	ck_assert_int_eq(ftrace_pidset_new(64, &pids), 0);
	fx_page_init(&pg, 1);

	/* ftrace/print: ip at 8, buf at 16 to the end of the record. */
	memset(r, 0, sizeof(r));
	fx_common(r, FX_ID_PRINT, 0, 11);
	memcpy(r + 8, &(uint64_t){ 0xffffffff81000000ull }, 8);
	memcpy(r + 16, "hello world\n", 13);
	fx_event(&pg, 1, r, 29);

	/* task_rename: pid 8, oldcomm 12, newcomm 28, oom_score_adj 44 (short). */
	memset(r, 0, sizeof(r));
	fx_common(r, FX_ID_TASK_RENAME, 0, 12);
	memcpy(r + 8, &(int32_t){ 12 }, 4);
	memcpy(r + 12, "old", 3);
	memcpy(r + 28, "new", 3);
	memcpy(r + 44, &(int16_t){ -1000 }, 2);
	fx_event(&pg, 1, r, 46);

	/* sched_process_exec: __data_loc filename at 8, pid 12, old_pid 16, string at 20. */
	memset(r, 0, sizeof(r));
	fx_common(r, FX_ID_SCHED_PROCESS_EXEC, 0, 13);
	memcpy(r + 8, &(uint32_t){ 20u | (10u << 16) }, 4);
	memcpy(r + 12, &(int32_t){ 13 }, 4);
	memcpy(r + 16, &(int32_t){ 14 }, 4);
	memcpy(r + 20, "/bin/true", 10);
	fx_event(&pg, 1, r, 30);

	/* sys_enter: long id at 8, unsigned long args[6] at 16. */
	memset(r, 0, sizeof(r));
	fx_common(r, FX_ID_SYS_ENTER, 0, 15);
	memcpy(r + 8, &(int64_t){ 59 }, 8);
	for (uint64_t i = 0; i < 6; i++)
		memcpy(r + 16 + 8 * i, &(uint64_t){ 1000 + i }, 8);
	fx_event(&pg, 1, r, 64);

	/* hrtimer_expire_entry: void *hrtimer 8, s64 now 16, void *function 24. */
	memset(r, 0, sizeof(r));
	fx_common(r, FX_ID_HRTIMER_EXPIRE_ENTRY, 0, 0);
	memcpy(r + 8, &(uint64_t){ 0xffff888000001000ull }, 8);
	memcpy(r + 16, &(int64_t){ 123456789 }, 8);
	memcpy(r + 24, &(uint64_t){ 0xffffffff81234567ull }, 8);
	fx_event(&pg, 1, r, 32);
	fx_page_finish(&pg);

	run_pages(p, pg.b, 1, &st, pids, &run);
	b = bundle(&run, 0);
	ck_assert_uint_eq(b->n_event, 5);

	ck_assert_int_eq(b->event[0]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT);
	ck_assert_str_eq(b->event[0]->print->buf, "hello world\n");
	/* Perfetto v58.2 does not write print.ip. */
	ck_assert(!b->event[0]->print->has_ip);

	ck_assert_int_eq(b->event[1]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME);
	ck_assert_int_eq(b->event[1]->task_rename->pid, 12);
	ck_assert_str_eq(b->event[1]->task_rename->oldcomm, "old");
	ck_assert_str_eq(b->event[1]->task_rename->newcomm, "new");
	ck_assert_int_eq(b->event[1]->task_rename->oom_score_adj, -1000);
	{
		const int32_t *ren;

		ck_assert_uint_eq(ftrace_pidset_renamed(pids, &ren), 1);
		ck_assert_int_eq(ren[0], 12);
	}

	ck_assert_int_eq(b->event[2]->event_case,
			 PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXEC);
	ck_assert_str_eq(b->event[2]->sched_process_exec->filename, "/bin/true");
	ck_assert_int_eq(b->event[2]->sched_process_exec->old_pid, 14);
	ck_assert(ftrace_pidset_contains(pids, 14));

	ck_assert_int_eq(b->event[3]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_ENTER);
	ck_assert_int_eq(b->event[3]->sys_enter->id, 59);
	ck_assert_uint_eq(b->event[3]->sys_enter->n_args, 6);
	ck_assert_uint_eq(b->event[3]->sys_enter->args[5], 1005);

	/* Kernel addresses become 1-based indices in first-seen order. */
	ck_assert_int_eq(b->event[4]->event_case,
			 PERFETTO__PROTOS__FTRACE_EVENT__EVENT_HRTIMER_EXPIRE_ENTRY);
	ck_assert_uint_eq(b->event[4]->hrtimer_expire_entry->hrtimer, 1);
	ck_assert_uint_eq(b->event[4]->hrtimer_expire_entry->function, 2);
	ck_assert_int_eq(b->event[4]->hrtimer_expire_entry->now, 123456789);
	{
		const uint64_t *addrs;

		ck_assert_uint_eq(ftrace_pidset_addrs(pids, &addrs), 2);
		ck_assert_uint_eq(addrs[1], 0xffffffff81234567ull);
	}
	run_done(&run);

	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

/* ---- compact_sched ------------------------------------------------------------ */

START_TEST(test_compact)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_SCHED_WAKING, FX_ID_SCHED_SWITCH }, 2);
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];
	Perfetto__Protos__FtraceEventBundle *b;
	Perfetto__Protos__FtraceEventBundle__CompactSched *cs;

	ck_assert(ftrace_parser_compact_sched_active(p));
	ck_assert_int_eq(ftrace_pidset_new(64, &pids), 0);
	fx_page_init(&pg, 1000000);
	fx_event(&pg, 100, r, fx_sched_switch(r, 999, "a", 1, 120, 1, "alpha", 10, 120));
	fx_event(&pg, 5, r, fx_sched_waking(r, 0x0d, 999, "beta", 20, 100, 3));
	fx_event(&pg, 50, r, fx_sched_switch(r, 998, "a", 1, 120, -1, "beta", 20, 100));
	fx_event(&pg, 7, r, fx_sched_waking(r, 0x01, 999, "alpha", 10, 120, 1));
	fx_event(&pg, 1, r, fx_sched_switch(r, 997, "a", 1, 120, 0, "alpha", 10, 120));
	fx_page_finish(&pg);

	run_pages(p, pg.b, 1, &st, pids, &run);
	ck_assert_int_eq(run.packets, 1);
	b = bundle(&run, 0);
	ck_assert_uint_eq(b->n_event, 0);
	cs = b->compact_sched;
	ck_assert_ptr_nonnull(cs);
	/* Two distinct comms, first-use order. */
	ck_assert_uint_eq(cs->n_intern_table, 2);
	ck_assert_str_eq(cs->intern_table[0], "alpha");
	ck_assert_str_eq(cs->intern_table[1], "beta");

	ck_assert_uint_eq(cs->n_switch_timestamp, 3);
	ck_assert_uint_eq(cs->switch_timestamp[0], 1000100);   /* absolute */
	ck_assert_uint_eq(cs->switch_timestamp[1], 55);        /* deltas within the list */
	ck_assert_uint_eq(cs->switch_timestamp[2], 8);
	ck_assert_uint_eq(cs->n_switch_prev_state, 3);
	ck_assert_int_eq(cs->switch_prev_state[1], -1);
	ck_assert_uint_eq(cs->n_switch_next_pid, 3);
	ck_assert_int_eq(cs->switch_next_pid[1], 20);
	ck_assert_int_eq(cs->switch_next_prio[1], 100);
	ck_assert_uint_eq(cs->n_switch_next_comm_index, 3);
	ck_assert_uint_eq(cs->switch_next_comm_index[0], 0);
	ck_assert_uint_eq(cs->switch_next_comm_index[1], 1);
	ck_assert_uint_eq(cs->switch_next_comm_index[2], 0);

	ck_assert_uint_eq(cs->n_waking_timestamp, 2);
	ck_assert_uint_eq(cs->waking_timestamp[0], 1000105);
	ck_assert_uint_eq(cs->waking_timestamp[1], 57);
	ck_assert_int_eq(cs->waking_pid[0], 20);
	ck_assert_int_eq(cs->waking_target_cpu[0], 3);
	ck_assert_int_eq(cs->waking_prio[0], 100);
	ck_assert_uint_eq(cs->waking_comm_index[0], 1);
	ck_assert_uint_eq(cs->waking_comm_index[1], 0);
	ck_assert_uint_eq(cs->n_waking_common_flags, 2);
	ck_assert_uint_eq(cs->waking_common_flags[0], 0x0d);
	ck_assert_uint_eq(cs->waking_common_flags[1], 0x01);

	/* Compacted events contribute next_pid / waking pid, not common_pid. */
	ck_assert(ftrace_pidset_contains(pids, 10));
	ck_assert(ftrace_pidset_contains(pids, 20));
	ck_assert(!ftrace_pidset_contains(pids, 999));
	ck_assert(!ftrace_pidset_contains(pids, 1));
	ck_assert_uint_eq(st.last_event_ts, 1000163);
	ck_assert_uint_eq(run.stats.compact_switch, 3);
	ck_assert_uint_eq(run.stats.compact_waking, 2);
	ck_assert_uint_eq(run.stats.events, 5);
	run_done(&run);

	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_compact_rules)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p;
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];
	Perfetto__Protos__FtraceEventBundle *b;

	fx_page_init(&pg, 1);
	fx_event(&pg, 1, r, fx_sched_waking(r, 0, 5, "w", 6, 120, 0));
	fx_event(&pg, 1, r, fx_sched_switch(r, 5, "a", 5, 120, 0, "b", 6, 120));
	fx_page_finish(&pg);

	/* Waking alone is never compacted (its common_pid would be lost). */
	p = parser_with(t, &o, (int[]){ FX_ID_SCHED_WAKING }, 1);
	ck_assert(!ftrace_parser_compact_sched_active(p));
	run_pages(p, pg.b, 1, &st, NULL, &run);
	b = bundle(&run, 0);
	ck_assert_ptr_null(b->compact_sched);
	ck_assert_uint_eq(b->n_event, 1);
	ck_assert_int_eq(b->event[0]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING);
	ck_assert_int_eq(b->event[0]->sched_waking->target_cpu, 0);
	ck_assert_int_eq(b->event[0]->sched_waking->pid, 6);
	/* success is gone from this kernel's format: not written. */
	ck_assert(!b->event[0]->sched_waking->has_success);
	run_done(&run);

	/* Enabling switch later turns compact on for both. */
	ck_assert_int_eq(ftrace_parser_enable(p, FX_ID_SCHED_SWITCH), 0);
	ck_assert(ftrace_parser_compact_sched_active(p));
	run_pages(p, pg.b, 1, &st, NULL, &run);
	b = bundle(&run, 0);
	ck_assert_uint_eq(b->n_event, 0);
	ck_assert_uint_eq(b->compact_sched->n_waking_pid, 1);
	ck_assert_uint_eq(b->compact_sched->n_switch_next_pid, 1);
	run_done(&run);
	ftrace_parser_free(p);

	/* compact_sched=false: both typed. */
	o = opts(false, true);
	p = parser_with(t, &o, (int[]){ FX_ID_SCHED_SWITCH, FX_ID_SCHED_WAKING }, 2);
	ck_assert(!ftrace_parser_compact_sched_active(p));
	run_pages(p, pg.b, 1, &st, NULL, &run);
	ck_assert_uint_eq(bundle(&run, 0)->n_event, 2);
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_compact_intern_split)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_SCHED_SWITCH }, 1);
	struct ftrace_cpu_state st = {};
	struct fx_page pg[3];
	struct run run;
	uint8_t r[64];
	char comm[16];
	Perfetto__Protos__FtraceEventBundle *b0, *b1;

	/* Pages 0 and 1: 40 distinct comms each (80 > 64 after page 1);
	 * page 2 must then start a fresh bundle. */
	for (int pgi = 0; pgi < 3; pgi++) {
		fx_page_init(&pg[pgi], 1000000u * (pgi + 1));
		for (int i = 0; i < 40; i++) {
			snprintf(comm, sizeof(comm), "task-%d-%d", pgi, i);
			fx_event(&pg[pgi], 3, r, fx_sched_switch(r, 1, "x", 1, 120, 0, comm, i, 120));
		}
		fx_page_finish(&pg[pgi]);
	}
	pages_buf = fx_pack(pg, 3);
	run_pages(p, pages_buf, 3, &st, NULL, &run);
	ck_assert_int_eq(run.packets, 2);
	b0 = bundle(&run, 0);
	b1 = bundle(&run, 1);
	ck_assert_uint_eq(b0->compact_sched->n_intern_table, 80);
	ck_assert_uint_eq(b1->compact_sched->n_intern_table, 40);
	ck_assert_uint_eq(b0->compact_sched->n_switch_timestamp, 80);
	ck_assert_uint_eq(b1->compact_sched->n_switch_timestamp, 40);
	/* The table restarts: indices start from 0 again. */
	ck_assert_uint_eq(b1->compact_sched->switch_next_comm_index[0], 0);
	ck_assert_str_eq(b1->compact_sched->intern_table[0], "task-2-0");
	/* Deltas restart too, and the new bundle points back at the old one. */
	ck_assert_uint_eq(b1->compact_sched->switch_timestamp[0], 3000003);
	ck_assert_uint_eq(b1->previous_bundle_end_timestamp, 2000120);
	ck_assert(!b1->has_lost_events);
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_compact_capacity_split)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_SCHED_SWITCH }, 1);
	struct ftrace_cpu_state st = {};
	size_t n_pages = 140, per_page = 60, total = 0;
	struct fx_page *pg = calloc(n_pages, sizeof(*pg));
	struct run run;
	uint8_t r[64];
	uint64_t sum = 0, last = 0;

	ck_assert_ptr_nonnull(pg);
	for (size_t i = 0; i < n_pages; i++) {
		fx_page_init(&pg[i], 1000 + i * 10000);
		for (size_t k = 0; k < per_page; k++)
			fx_event(&pg[i], 1, r, fx_sched_switch(r, 1, "x", 1, 120, 0, "same", 2, 120));
		fx_page_finish(&pg[i]);
	}
	pages_buf = fx_pack(pg, n_pages);
	free(pg);
	run_pages(p, pages_buf, n_pages, &st, NULL, &run);
	/* More entries than one bundle's columns hold: split, nothing lost. */
	ck_assert_int_ge(run.packets, 2);
	for (size_t i = 0; i < run.trace->n_packet; i++) {
		Perfetto__Protos__FtraceEventBundle__CompactSched *cs = bundle(&run, i)->compact_sched;

		ck_assert_uint_eq(cs->n_intern_table, 1);
		total += cs->n_switch_timestamp;
		sum = 0;
		for (size_t k = 0; k < cs->n_switch_timestamp; k++)
			sum += cs->switch_timestamp[k];
		ck_assert_uint_gt(sum, last);
		last = sum;
	}
	ck_assert_uint_eq(total, n_pages * per_page);
	ck_assert_uint_eq(last, st.last_event_ts);
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

/* ---- generic events ----------------------------------------------------------------- */

static void check_descriptor(const Perfetto__Protos__FtraceEventBundle__GenericEventDescriptor *g,
			     int32_t field_id, const char *group, const char *name,
			     const char *const *fields, const int *types, size_t n)
{
	Perfetto__Protos__DescriptorProto *d;

	ck_assert_int_eq(g->field_id, field_id);
	ck_assert_str_eq(g->group_name, group);
	ck_assert(g->has_event_descriptor);
	d = perfetto__protos__descriptor_proto__unpack(NULL, g->event_descriptor.len,
						       g->event_descriptor.data);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->name, name);
	ck_assert_uint_eq(d->n_field, n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(d->field[i]->name, fields[i]);
		ck_assert_int_eq(d->field[i]->number, (int)i + 1);
		ck_assert_int_eq(d->field[i]->type, types[i]);
	}
	perfetto__protos__descriptor_proto__free_unpacked(d, NULL);
}

START_TEST(test_generic_dense)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	/* Enable order decides the dynamic ids: stat_runtime 65536, ipi 65537. */
	struct ftrace_parser *p = parser_with(t, &o,
					      (int[]){ FX_ID_SCHED_STAT_RUNTIME, FX_ID_IPI_SEND_CPU }, 2);
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];
	Perfetto__Protos__FtraceEventBundle *b;
	const ProtobufCMessageUnknownField *u;
	struct pbr rd;
	uint32_t num;
	uint64_t v;
	const uint8_t *data;
	size_t len;

	ck_assert(!ftrace_translate_is_typed("sched", "sched_stat_runtime"));
	ck_assert(ftrace_translate_is_typed("sched", "sched_switch"));
	ck_assert_int_eq(ftrace_pidset_new(64, &pids), 0);
	fx_page_init(&pg, 100);
	fx_event(&pg, 1, r, fx_ipi_send_cpu(r, 7, 1, 0xffffffff81000010ull, 0xffffffff81000020ull));
	fx_event(&pg, 1, r, fx_stat_runtime(r, 8, "kworker/0:1", 8, 929069));
	fx_event(&pg, 1, r, fx_stat_runtime(r, 9, "sh", 9, 5));
	fx_event(&pg, 1, r, fx_ipi_send_cpu(r, 7, 0, 0xffffffff81000020ull, 0xffffffff81000030ull));
	fx_page_finish(&pg);

	run_pages(p, pg.b, 1, &st, pids, &run);
	ck_assert_int_eq(run.packets, 1);
	b = bundle(&run, 0);
	ck_assert_uint_eq(b->n_event, 4);
	ck_assert_uint_eq(run.stats.generic_events, 4);

	/* ipi_send_cpu at 65537: cpu=1, callsite/callback as symbol indices. */
	ck_assert_uint_eq(b->event[0]->pid, 7);
	u = unknown(b->event[0], 65537);
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(u->wire_type, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
	rd = unknown_payload(u);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 1 && v == 1);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 2 && v == 1);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 3 && v == 2);
	ck_assert(!pbr_next(&rd, &num, &v, &data, &len));
	/* The same address later gets the same index. */
	u = unknown(b->event[3], 65537);
	rd = unknown_payload(u);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 1 && v == 0);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 2 && v == 2);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 3 && v == 3);

	/* sched_stat_runtime at 65536: comm (string), pid (int64), runtime. */
	u = unknown(b->event[1], 65536);
	ck_assert_ptr_nonnull(u);
	rd = unknown_payload(u);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 1);
	ck_assert_uint_eq(len, 11);
	ck_assert(memcmp(data, "kworker/0:1", 11) == 0);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 2 && v == 8);
	ck_assert(pbr_next(&rd, &num, &v, &data, &len) && num == 3 && v == 929069);

	/* One descriptor per type used, ascending ids. */
	ck_assert_uint_eq(b->n_generic_event_descriptors, 2);
	check_descriptor(b->generic_event_descriptors[0], 65536, "sched", "sched_stat_runtime",
			 (const char *const[]){ "comm", "pid", "runtime" }, (int[]){ 9, 3, 4 }, 3);
	check_descriptor(b->generic_event_descriptors[1], 65537, "ipi", "ipi_send_cpu",
			 (const char *const[]){ "cpu", "callsite", "callback" }, (int[]){ 4, 4, 4 }, 3);
	run_done(&run);

	/* A bundle with only stat_runtime carries only its descriptor. */
	fx_page_init(&pg, 100);
	fx_event(&pg, 1, r, fx_stat_runtime(r, 8, "a", 8, 1));
	fx_page_finish(&pg);
	run_pages(p, pg.b, 1, &st, pids, &run);
	b = bundle(&run, 0);
	ck_assert_uint_eq(b->n_generic_event_descriptors, 1);
	ck_assert_int_eq(b->generic_event_descriptors[0]->field_id, 65536);
	run_done(&run);

	/* Ids belong to the table: a second session reuses them, a new type
	 * takes the next one. */
	{
		struct ftrace_parser *p2 = parser_with(t, &o, (int[]){ FX_ID_IPI_SEND_CPU }, 1);

		fx_page_init(&pg, 100);
		fx_event(&pg, 1, r, fx_ipi_send_cpu(r, 7, 1, 1, 2));
		fx_page_finish(&pg);
		run_pages(p2, pg.b, 1, &st, NULL, &run);
		ck_assert_ptr_nonnull(unknown(bundle(&run, 0)->event[0], 65537));
		run_done(&run);
		ftrace_parser_free(p2);
	}
	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_generic_legacy)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, false);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_SCHED_STAT_RUNTIME }, 1);
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];
	Perfetto__Protos__FtraceEventBundle *b;
	Perfetto__Protos__GenericFtraceEvent *g;

	fx_page_init(&pg, 100);
	fx_event(&pg, 1, r, fx_stat_runtime(r, 8, "kworker", -3, 77));
	fx_page_finish(&pg);
	run_pages(p, pg.b, 1, &st, NULL, &run);
	b = bundle(&run, 0);
	ck_assert_uint_eq(b->n_event, 1);
	ck_assert_uint_eq(b->n_generic_event_descriptors, 0);
	ck_assert_int_eq(b->event[0]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC);
	g = b->event[0]->generic;
	ck_assert_str_eq(g->event_name, "sched_stat_runtime");
	ck_assert_uint_eq(g->n_field, 3);
	ck_assert_str_eq(g->field[0]->name, "comm");
	ck_assert_int_eq(g->field[0]->value_case,
			 PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_STR_VALUE);
	ck_assert_str_eq(g->field[0]->str_value, "kworker");
	ck_assert_str_eq(g->field[1]->name, "pid");
	ck_assert_int_eq(g->field[1]->value_case,
			 PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_INT_VALUE);
	ck_assert_int_eq(g->field[1]->int_value, -3);
	ck_assert_str_eq(g->field[2]->name, "runtime");
	ck_assert_int_eq(g->field[2]->value_case,
			 PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_UINT_VALUE);
	ck_assert_uint_eq(g->field[2]->uint_value, 77);
	run_done(&run);
	ftrace_parser_free(p);

	/* disable_generic_events refuses what has no typed message. */
	o.disable_generic_events = true;
	ck_assert_int_eq(ftrace_parser_new(t, &o, &p), 0);
	ck_assert_int_eq(ftrace_parser_enable(p, FX_ID_SCHED_STAT_RUNTIME), -EOPNOTSUPP);
	ck_assert_int_eq(ftrace_parser_enable(p, FX_ID_SCHED_SWITCH), 0);
	ck_assert_int_eq(ftrace_parser_enable(p, 9999), -ENOENT);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_bad_data_loc)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_SCHED_STAT_RUNTIME }, 1);
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];
	size_t n = fx_stat_runtime(r, 8, "abc", 8, 1);
	Perfetto__Protos__FtraceEventBundle *b;

	/* Point the string past the record. */
	memcpy(r + 8, &(uint32_t){ 24u | (200u << 16) }, 4);
	fx_page_init(&pg, 100);
	fx_event(&pg, 1, r, n);
	fx_event(&pg, 1, r, n);
	fx_page_finish(&pg);
	run_pages(p, pg.b, 1, &st, NULL, &run);
	b = bundle(&run, 0);
	/* The event is finished without the string; the page stops there. */
	ck_assert_uint_eq(b->n_event, 1);
	ck_assert_uint_eq(b->n_error, 1);
	ck_assert_int_eq(b->error[0]->status, FTRACE_STATUS_INVALID_EVENT);
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_large_event)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_PRINT }, 1);
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	static uint8_t r[3000];
	Perfetto__Protos__FtraceEventBundle *b;

	/* A payload beyond the per-event scratch buffer takes the nested path. */
	memset(r, 0, sizeof(r));
	fx_common(r, FX_ID_PRINT, 0, 77);
	memset(r + 16, 'q', 2500);
	fx_page_init(&pg, 100);
	fx_event(&pg, 1, r, 16 + 2501);
	fx_event(&pg, 1, r, 16 + 8);   /* and a small one after it, fast path again */
	fx_page_finish(&pg);
	run_pages(p, pg.b, 1, &st, NULL, &run);
	b = bundle(&run, 0);
	ck_assert_uint_eq(b->n_event, 2);
	ck_assert_uint_eq(b->event[0]->pid, 77);
	ck_assert_uint_eq(strlen(b->event[0]->print->buf), 2500);
	ck_assert_uint_eq(b->event[1]->timestamp, 102);
	ck_assert_str_eq(b->event[1]->print->buf, "qqqqqqqq");
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_clock_fields)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(false, true);
	struct ftrace_parser *p = parser_with(t, &o, (int[]){ FX_ID_SCHED_SWITCH }, 1);
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];
	Perfetto__Protos__FtraceEventBundle *b;

	fx_page_init(&pg, 100);
	fx_event(&pg, 1, r, fx_sched_switch(r, 1, "a", 1, 1, 1, "b", 2, 2));
	fx_page_finish(&pg);
	ftrace_parser_set_clock(p, FTRACE_CLOCK_GLOBAL, 123456, 789012);
	run_pages(p, pg.b, 1, &st, NULL, &run);
	b = bundle(&run, 0);
	ck_assert(b->has_ftrace_clock);
	ck_assert_int_eq(b->ftrace_clock, PERFETTO__PROTOS__FTRACE_CLOCK__FTRACE_CLOCK_GLOBAL);
	ck_assert_int_eq(b->ftrace_timestamp, 123456);
	ck_assert_int_eq(b->boot_timestamp, 789012);
	run_done(&run);

	ftrace_parser_set_clock(p, FTRACE_CLOCK_UNSPECIFIED, 0, 0);
	run_pages(p, pg.b, 1, &st, NULL, &run);
	b = bundle(&run, 0);
	ck_assert(!b->has_ftrace_clock && !b->has_ftrace_timestamp && !b->has_boot_timestamp);
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_pidset)
{
	struct ftrace_pidset *s = NULL;
	const int32_t *list;

	ck_assert_int_eq(ftrace_pidset_new(0, &s), -EINVAL);
	ck_assert_int_eq(ftrace_pidset_new(4, &s), 0);
	ck_assert(ftrace_pidset_add(s, 1));
	ck_assert(!ftrace_pidset_add(s, 1));
	ck_assert(ftrace_pidset_add(s, -1));
	ck_assert(ftrace_pidset_add(s, 0));
	ck_assert(ftrace_pidset_add(s, 1 << 22));
	ck_assert(!ftrace_pidset_overflowed(s));
	ck_assert(!ftrace_pidset_add(s, 5));
	ck_assert(ftrace_pidset_overflowed(s));
	ck_assert_uint_eq(ftrace_pidset_pids(s, &list), 4);
	ck_assert_int_eq(list[1], -1);
	ck_assert_uint_eq(ftrace_pidset_intern_addr(s, 0xabc), 1);
	ck_assert_uint_eq(ftrace_pidset_intern_addr(s, 0xdef), 2);
	ck_assert_uint_eq(ftrace_pidset_intern_addr(s, 0xabc), 1);

	ftrace_pidset_clear(s);
	ck_assert(!ftrace_pidset_overflowed(s));
	ck_assert_uint_eq(ftrace_pidset_pids(s, &list), 0);
	ck_assert(!ftrace_pidset_contains(s, 1));
	ck_assert_uint_eq(ftrace_pidset_intern_addr(s, 0xdef), 1);
	/* Refill after clear: every slot must be usable again. */
	for (int32_t i = 100; i < 104; i++)
		ck_assert(ftrace_pidset_add(s, i));
	for (int32_t i = 100; i < 104; i++)
		ck_assert(ftrace_pidset_contains(s, i));
	ftrace_pidset_free(s);
}
END_TEST

/* ---- through a real SMB writer and reader ------------------------------------- */

struct collected {
	Perfetto__Protos__TracePacket *pkts[16];
	size_t n;
};

static int collect(const struct smb_packet *pkt, void *userdata)
{
	struct collected *c = userdata;

	ck_assert_uint_lt(c->n, 16);
	c->pkts[c->n] = perfetto__protos__trace_packet__unpack(NULL, pkt->len, pkt->data);
	ck_assert_ptr_nonnull(c->pkts[c->n]);
	c->n++;
	return 0;
}

START_TEST(test_smb_writer_path)
{
	const size_t size = 256 * 1024, page = 4096;
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = opts(true, true);
	struct ftrace_parser *p = parser_with(t, &o,
					      (int[]){ FX_ID_SCHED_SWITCH, FX_ID_SCHED_STAT_RUNTIME }, 2);
	struct ftrace_cpu_state st = {};
	struct smb *smb = NULL;
	struct smb_writer *w = NULL;
	struct pbw_sink sink;
	struct smb_reader *rd = NULL;
	struct smb_commit commit;
	struct collected c = {};
	struct fx_page pg[2];
	uint8_t r[64];
	void *mem = aligned_alloc(4096, size);
	Perfetto__Protos__FtraceEventBundle *b;

	ck_assert_ptr_nonnull(mem);
	memset(mem, 0, size);
	for (int i = 0; i < 2; i++) {
		fx_page_init(&pg[i], 1000 * (i + 1));
		for (int k = 0; k < 50; k++)
			fx_event(&pg[i], 1, r, fx_sched_switch(r, 1, "a", 1, 120, 0, "b", k, 120));
		fx_event(&pg[i], 1, r, fx_stat_runtime(r, 3, "c", 3, 99));
	}
	fx_page_set_missed(&pg[1], true, 3);
	fx_page_finish(&pg[0]);
	fx_page_finish(&pg[1]);
	pages_buf = fx_pack(pg, 2);

	ck_assert_int_eq(smb_new(mem, size, page, &smb), 0);
	ck_assert_int_eq(smb_writer_new(smb, 1, 0, &w), 0);
	sink = smb_writer_sink(w);
	ck_assert_int_eq(ftrace_parser_parse_pages(p, 0, pages_buf, 2, FX_PAGE_SIZE, &sink, &st, NULL,
						   NULL), 2);
	smb_writer_flush(w);

	ck_assert_int_eq(smb_reader_new(mem, size, page, 1 << 20, &rd), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(rd, 0), 0);
	ck_assert(smb_take_commit(smb, &commit));
	for (size_t i = 0; i < commit.n_moves; i++)
		ck_assert_int_eq(smb_reader_move(rd, &commit.moves[i]), 0);
	ck_assert_int_ge(smb_reader_read_packets(rd, true, collect, &c), 2);
	ck_assert_uint_eq(c.n, 2);
	b = c.pkts[0]->ftrace_events;
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->compact_sched->n_switch_next_pid, 50);
	ck_assert_uint_eq(b->n_event, 1);
	ck_assert_uint_eq(b->n_generic_event_descriptors, 1);
	b = c.pkts[1]->ftrace_events;
	ck_assert(b->lost_events);
	ck_assert_uint_eq(b->compact_sched->n_switch_next_pid, 50);
	ck_assert_uint_eq(b->previous_bundle_end_timestamp, 1051);
	for (size_t i = 0; i < c.n; i++)
		perfetto__protos__trace_packet__free_unpacked(c.pkts[i], NULL);

	smb_reader_free(rd);
	smb_writer_free(w);
	smb_free(smb);
	free(mem);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_encode");
	TCase *tc = tcase_create("encode");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_typed_sched_switch);
	tcase_add_test(tc, test_typed_misc);
	tcase_add_test(tc, test_compact);
	tcase_add_test(tc, test_compact_rules);
	tcase_add_test(tc, test_compact_intern_split);
	tcase_add_test(tc, test_compact_capacity_split);
	tcase_add_test(tc, test_generic_dense);
	tcase_add_test(tc, test_generic_legacy);
	tcase_add_test(tc, test_bad_data_loc);
	tcase_add_test(tc, test_large_event);
	tcase_add_test(tc, test_clock_fields);
	tcase_add_test(tc, test_pidset);
	tcase_add_test(tc, test_smb_writer_path);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
