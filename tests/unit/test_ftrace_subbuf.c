/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sub-buffers larger than a page (buffer_subbuf_size_kb, Linux 6.8+): the
 * page header and the missed-events count stored after the data of a large
 * sub-buffer, and the same events written as 4 KiB pages and as 16 KiB,
 * 64 KiB and 1 MiB sub-buffers (tests/lib/ftrace_fixtures.h fx_merge())
 * parsed into bundles that hold the same events, fields and timestamps,
 * plain and compact_sched, with the same loss accounting.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"
#include "util/util.h"

/* ---- the header of a large sub-buffer ----------------------------------------- */

START_TEST(test_header_large)
{
	static const size_t sizes[] = { 8192, 16384, 65536, 1u << 20 };

	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		const size_t size = sizes[i];
		uint8_t *sb = calloc(1, size);
		struct ftrace_page_header h;
		uint64_t ts = 77, commit, count = 4242;

		ck_assert_ptr_nonnull(sb);
		memcpy(sb, &ts, 8);

		/* Data well past the first 4 KiB, and the count right after it. */
		commit = (size - FX_HDR - 8) | FTRACE_PAGE_MISSED_EVENTS | FTRACE_PAGE_MISSED_STORED;
		memcpy(sb + 8, &commit, 8);
		memcpy(sb + size - 8, &count, 8);
		ck_assert_int_eq(ftrace_page_parse_header(sb, size, 8, &h), 0);
		ck_assert_uint_eq(h.timestamp, 77);
		ck_assert_uint_eq(h.data_size, size - FX_HDR - 8);
		ck_assert(h.missed_events && h.missed_stored);
		ck_assert_uint_eq(h.missed_count, 4242);

		/* No room left for the count: lost, count unknown. */
		commit = (size - FX_HDR - 4) | FTRACE_PAGE_MISSED_EVENTS | FTRACE_PAGE_MISSED_STORED;
		memcpy(sb + 8, &commit, 8);
		ck_assert_int_eq(ftrace_page_parse_header(sb, size, 8, &h), 0);
		ck_assert(h.missed_events && !h.missed_stored);

		/* Full to the last byte; one past it is a bad header. */
		commit = size - FX_HDR;
		memcpy(sb + 8, &commit, 8);
		ck_assert_int_eq(ftrace_page_parse_header(sb, size, 8, &h), 0);
		ck_assert_uint_eq(h.data_size, size - FX_HDR);
		commit = size - FX_HDR + 1;
		memcpy(sb + 8, &commit, 8);
		ck_assert_int_eq(ftrace_page_parse_header(sb, size, 8, &h), -EBADMSG);
		/* The same data read as a 4 KiB page: bigger than the page. */
		commit = FX_PAGE_SIZE;
		memcpy(sb + 8, &commit, 8);
		ck_assert_int_eq(ftrace_page_parse_header(sb, FX_PAGE_SIZE, 8, &h), -EBADMSG);
		free(sb);
	}
}
END_TEST

/* ---- the same events in pages of any size ---------------------------------------- */

#define N_PAGES 48u
#define LOST_STORED_PAGE 20u
#define LOST_STORED_COUNT 33u
#define LOST_UNKNOWN_PAGE 35u

static struct fx_page pages[N_PAGES];

/*
 * Pages as a busy CPU fills them: sched_switch and sched_waking of 300
 * threads with names of their own (well past the 64 comms after which a
 * bundle starts afresh), a time extend now and then, one page with a stored
 * missed-events count and one with an unknown count.
 */
static void build_pages(void)
{
	uint64_t now = 5000000000ull;
	unsigned k = 0;

	for (unsigned i = 0; i < N_PAGES; i++) {
		struct fx_page *pg = &pages[i];

		now += 1000;
		fx_page_init(pg, now);
		if (i % 11 == 5) {
			fx_time_extend(pg, 3, 1);
			now += 3 + (1ull << 27);
		}
		while (pg->pos + 80 + 8 <= FX_PAGE_SIZE) {
			uint8_t r[64];
			char comm[16], other[16];
			int32_t pid = 100 + (int32_t)((k * 7) % 300), pid2 = 100 + (int32_t)((k * 13) % 300);
			uint32_t delta = 1 + (k * 37) % 900;

			(void)snprintf(comm, sizeof(comm), "thread-%d", pid);
			(void)snprintf(other, sizeof(other), "thread-%d", pid2);
			if (k % 3 == 2)
				fx_event(pg, delta, r, fx_sched_waking(r, (uint8_t)(k & 0x0f), pid2, comm, pid,
								       100 + (int32_t)(k % 40), (int32_t)(k % 2)));
			else
				fx_event(pg, delta, r, fx_sched_switch(r, pid2, other, pid2, 120, (int64_t)(k % 3),
								       comm, pid, 100 + (int32_t)(k % 40)));
			now += delta;
			k++;
		}
		if (i == LOST_STORED_PAGE)
			fx_page_set_missed(pg, true, LOST_STORED_COUNT);
		if (i == LOST_UNKNOWN_PAGE)
			fx_page_set_missed(pg, false, 0);
		fx_page_finish(pg);
	}
}

/* One event as a trace shows it, whatever the bundle or encoding. */
struct ev {
	uint64_t ts;
	int kind;               /* 0 switch, 1 waking */
	int32_t pid, a, b, c, d;
	char comm[16];
};

struct evs {
	struct ev *v;
	size_t n, cap;
};

static struct ev *ev_add(struct evs *e)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 1024;
		e->v = realloc(e->v, e->cap * sizeof(*e->v));
		ck_assert_ptr_nonnull(e->v);
	}
	memset(&e->v[e->n], 0, sizeof(e->v[0]));
	return &e->v[e->n++];
}

static void copy_comm(char dst[16], const char *s)
{
	(void)snprintf(dst, 16, "%s", s ? s : "");
}

static void flatten_bundle(const Perfetto__Protos__FtraceEventBundle *b, struct evs *out)
{
	const Perfetto__Protos__FtraceEventBundle__CompactSched *cs = b->compact_sched;
	uint64_t ts;

	for (size_t i = 0; i < b->n_event; i++) {
		const Perfetto__Protos__FtraceEvent *e = b->event[i];
		struct ev *v = ev_add(out);

		v->ts = e->timestamp;
		v->pid = (int32_t)e->pid;
		if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH) {
			const Perfetto__Protos__SchedSwitchFtraceEvent *s = e->sched_switch;

			v->kind = 0;
			v->a = s->next_pid;
			v->b = s->next_prio;
			v->c = (int32_t)s->prev_state;
			v->d = s->prev_pid;
			copy_comm(v->comm, s->next_comm);
		} else {
			const Perfetto__Protos__SchedWakingFtraceEvent *w = e->sched_waking;

			ck_assert_int_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING);
			v->kind = 1;
			v->a = w->pid;
			v->b = w->prio;
			v->c = w->target_cpu;
			copy_comm(v->comm, w->comm);
		}
	}
	if (!cs)
		return;
	ts = 0;
	for (size_t i = 0; i < cs->n_switch_timestamp; i++) {
		struct ev *v = ev_add(out);

		ts += cs->switch_timestamp[i];
		v->ts = ts;
		v->kind = 0;
		v->a = cs->switch_next_pid[i];
		v->b = cs->switch_next_prio[i];
		v->c = (int32_t)cs->switch_prev_state[i];
		ck_assert_uint_lt(cs->switch_next_comm_index[i], cs->n_intern_table);
		copy_comm(v->comm, cs->intern_table[cs->switch_next_comm_index[i]]);
	}
	ts = 0;
	for (size_t i = 0; i < cs->n_waking_timestamp; i++) {
		struct ev *v = ev_add(out);

		ts += cs->waking_timestamp[i];
		v->ts = ts;
		v->kind = 1;
		v->a = cs->waking_pid[i];
		v->b = cs->waking_prio[i];
		v->c = cs->waking_target_cpu[i];
		v->d = (int32_t)cs->waking_common_flags[i];
		ck_assert_uint_lt(cs->waking_comm_index[i], cs->n_intern_table);
		copy_comm(v->comm, cs->intern_table[cs->waking_comm_index[i]]);
	}
}

static int ev_cmp(const void *x, const void *y)
{
	const struct ev *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->kind - b->kind;
}

struct result {
	struct evs evs;
	struct ftrace_pass_stats stats;
	size_t bundles, lost_bundles;
	uint64_t last_ts;
};

/* Parse @n sub-buffers of @size in batches of @batch, as a drain would. */
static void parse(const uint8_t *sb, size_t n, size_t size, size_t batch, bool compact, struct result *out)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;
	struct ftrace_parser *p = NULL;
	struct ftrace_cpu_state st = { .last_event_ts = 1 };
	Perfetto__Protos__Trace *trace;
	struct fx_sink s;

	memset(out, 0, sizeof(*out));
	o.compact_sched = compact;
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(ftrace_parser_new(t, &o, &p), 0);
	ck_assert_int_eq(ftrace_parser_enable(p, FX_ID_SCHED_SWITCH), 0);
	ck_assert_int_eq(ftrace_parser_enable(p, FX_ID_SCHED_WAKING), 0);
	ck_assert(ftrace_parser_compact_sched_active(p) == compact);
	fx_sink_init(&s, 16u << 20);
	for (size_t first = 0; first < n; first += batch)
		ck_assert_int_ge(ftrace_parser_parse_pages(p, 0, sb + first * size, MIN(batch, n - first), size,
							   &s.sink, &st, NULL, &out->stats), 0);
	ck_assert(!pbw_overflowed(&s.w));
	trace = perfetto__protos__trace__unpack(NULL, fx_sink_len(&s), s.buf);
	ck_assert_ptr_nonnull(trace);
	for (size_t i = 0; i < trace->n_packet; i++) {
		const Perfetto__Protos__FtraceEventBundle *b = trace->packet[i]->ftrace_events;

		ck_assert_ptr_nonnull(b);
		ck_assert_int_eq((int)b->n_error, 0);
		out->bundles++;
		out->lost_bundles += b->has_lost_events && b->lost_events;
		flatten_bundle(b, &out->evs);
	}
	qsort(out->evs.v, out->evs.n, sizeof(out->evs.v[0]), ev_cmp);
	out->last_ts = st.last_event_ts;
	perfetto__protos__trace__free_unpacked(trace, NULL);
	fx_sink_done(&s);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}

static void same_events(size_t size, bool compact)
{
	uint8_t *small = fx_pack(pages, N_PAGES), *big;
	struct result a, b;
	size_t n_big = 0;

	big = fx_merge(pages, N_PAGES, size, &n_big);
	/* Fewer, fuller sub-buffers; the two lost pages start their own. */
	ck_assert_uint_lt(n_big, N_PAGES);
	ck_assert_uint_ge(n_big, 3);
	/* Batches of the same bytes as the drain's (FTRACE_BATCH_BYTES). */
	parse(small, N_PAGES, FX_PAGE_SIZE, 32, compact, &a);
	parse(big, n_big, size, MAX((32u * FX_PAGE_SIZE) / size, (size_t)1), compact, &b);

	ck_assert_uint_gt(a.evs.n, 2000);
	ck_assert_uint_eq(b.evs.n, a.evs.n);
	for (size_t i = 0; i < a.evs.n; i++)
		ck_assert_msg(memcmp(&a.evs.v[i], &b.evs.v[i], sizeof(a.evs.v[i])) == 0,
			      "event %zu of %zu differs (ts %llu vs %llu) with %zu-byte sub-buffers", i, a.evs.n,
			      (unsigned long long)a.evs.v[i].ts, (unsigned long long)b.evs.v[i].ts, size);
	ck_assert_uint_eq(b.last_ts, a.last_ts);
	ck_assert_uint_eq(b.stats.events, a.stats.events);
	ck_assert_uint_eq(b.stats.compact_switch, a.stats.compact_switch);
	ck_assert_uint_eq(b.stats.compact_waking, a.stats.compact_waking);
	ck_assert_uint_eq(b.stats.skipped_events, 0);
	/* Loss accounting: the same pages with loss, count and unknown flag. */
	ck_assert_uint_eq(a.stats.lost_pages, 2);
	ck_assert_uint_eq(b.stats.lost_pages, 2);
	ck_assert_uint_eq(a.stats.lost_events, LOST_STORED_COUNT);
	ck_assert_uint_eq(b.stats.lost_events, LOST_STORED_COUNT);
	ck_assert(a.stats.lost_unknown && b.stats.lost_unknown);
	ck_assert_uint_eq(a.lost_bundles, 2);
	ck_assert_uint_eq(b.lost_bundles, 2);
	ck_assert_uint_eq(b.stats.pages, n_big);
	/* Bytes of event data: the 4 KiB pages' plus one 8-byte stamp per page merged. */
	ck_assert_uint_eq(b.stats.bytes, a.stats.bytes + 8u * (N_PAGES - n_big));
	free(a.evs.v);
	free(b.evs.v);
	free(small);
	free(big);
}

START_TEST(test_same_events_16k_compact) { same_events(16384, true); }
END_TEST
START_TEST(test_same_events_64k_compact) { same_events(65536, true); }
END_TEST
START_TEST(test_same_events_1m_compact) { same_events(1u << 20, true); }
END_TEST
START_TEST(test_same_events_16k_plain) { same_events(16384, false); }
END_TEST
START_TEST(test_same_events_64k_plain) { same_events(65536, false); }
END_TEST
START_TEST(test_same_events_1m_plain) { same_events(1u << 20, false); }
END_TEST

int main(void)
{
	Suite *s = suite_create("ftrace_subbuf");
	TCase *tc = tcase_create("subbuf");
	SRunner *sr;
	int failed;

	build_pages();
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_header_large);
	tcase_add_test(tc, test_same_events_16k_compact);
	tcase_add_test(tc, test_same_events_64k_compact);
	tcase_add_test(tc, test_same_events_1m_compact);
	tcase_add_test(tc, test_same_events_16k_plain);
	tcase_add_test(tc, test_same_events_64k_plain);
	tcase_add_test(tc, test_same_events_1m_plain);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
