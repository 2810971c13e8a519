/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ring-buffer page walker on hand-built pages: timestamps through
 * extends, absolute stamps and padding; long records; every layout error
 * mapped to its FtraceParseStatus; missed-event flags; and how errors reach
 * the bundle and the pass stats.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"

/* Walk the page's data; record what came out.  Returns the final status
 * (0 = clean end, else the FTRACE_STATUS_* that stopped it). */
struct walk {
	size_t n;
	uint64_t ts[64];
	uint16_t id[64];
	uint32_t len[64];
	int status;
};

static void walk_page(const struct fx_page *p, struct walk *out)
{
	struct ftrace_page_header hdr;
	struct ftrace_page_iter it;
	struct ftrace_record rec;
	int r;

	memset(out, 0, sizeof(*out));
	ck_assert_int_eq(ftrace_page_parse_header(p->b, FX_PAGE_SIZE, 8, &hdr), 0);
	ftrace_page_iter_init(&it, p->b + hdr.header_size, hdr.data_size, hdr.timestamp);
	while ((r = ftrace_page_next(&it, &rec)) > 0) {
		ck_assert_uint_lt(out->n, 64);
		/* Never outside the committed data. */
		ck_assert(rec.data >= p->b + FX_HDR);
		ck_assert(rec.data + rec.len <= p->b + FX_HDR + hdr.data_size);
		out->ts[out->n] = rec.ts;
		out->id[out->n] = rec.event_id;
		out->len[out->n] = rec.len;
		out->n++;
	}
	out->status = r < 0 ? -r : 0;
}

static size_t switch_rec(uint8_t r[64], int32_t pid)
{
	return fx_sched_switch(r, pid, "prev", pid, 120, 1, "next", pid + 1, 120);
}

START_TEST(test_header)
{
	struct fx_page p;
	struct ftrace_page_header h;
	uint8_t r[64];

	fx_page_init(&p, 1000);
	fx_event(&p, 1, r, switch_rec(r, 7));
	fx_page_finish(&p);
	ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 8, &h), 0);
	ck_assert_uint_eq(h.timestamp, 1000);
	ck_assert_uint_eq(h.data_size, 68);
	ck_assert_uint_eq(h.header_size, 16);
	ck_assert(!h.missed_events);

	/* 32-bit kernels: a 4-byte commit, data at 12. */
	ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 4, &h), 0);
	ck_assert_uint_eq(h.header_size, 12);

	/* Empty and oversized pages are invalid headers. */
	fx_page_init(&p, 5);
	fx_page_finish(&p);
	ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 8, &h), -EBADMSG);
	ck_assert_uint_eq(h.timestamp, 5);
	{
		uint64_t commit = FX_PAGE_SIZE - FX_HDR + 1;

		memcpy(p.b + 8, &commit, 8);
		ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 8, &h), -EBADMSG);
		commit = FX_PAGE_SIZE - FX_HDR;
		memcpy(p.b + 8, &commit, 8);
		ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 8, &h), 0);
	}
	ck_assert_int_eq(ftrace_page_parse_header(p.b, 12, 8, &h), -EBADMSG);
	ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 6, &h), -EINVAL);
}
END_TEST

START_TEST(test_missed_flags)
{
	struct fx_page p;
	struct ftrace_page_header h;
	uint8_t r[64];

	/* Bit 31 alone: events lost, count unknown. */
	fx_page_init(&p, 1);
	fx_event(&p, 1, r, switch_rec(r, 7));
	fx_page_set_missed(&p, false, 0);
	fx_page_finish(&p);
	ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 8, &h), 0);
	ck_assert(h.missed_events);
	ck_assert(!h.missed_stored);
	ck_assert_uint_eq(h.data_size, 68);

	/* Bits 31+30: the count follows the data. */
	fx_page_init(&p, 1);
	fx_event(&p, 1, r, switch_rec(r, 7));
	fx_page_set_missed(&p, true, 12345);
	fx_page_finish(&p);
	ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 8, &h), 0);
	ck_assert(h.missed_events && h.missed_stored);
	ck_assert_uint_eq(h.missed_count, 12345);
	ck_assert_uint_eq(h.data_size, 68);

	/* Bit 30 claims a count but the data fills the page: not read. */
	{
		uint64_t commit = (FX_PAGE_SIZE - FX_HDR - 4) | FTRACE_PAGE_MISSED_EVENTS |
				  FTRACE_PAGE_MISSED_STORED;

		memcpy(p.b + 8, &commit, 8);
		ck_assert_int_eq(ftrace_page_parse_header(p.b, FX_PAGE_SIZE, 8, &h), 0);
		ck_assert(h.missed_events);
		ck_assert(!h.missed_stored);
	}
}
END_TEST

START_TEST(test_timestamps)
{
	struct fx_page p;
	struct walk w;
	uint8_t r[64];
	size_t n = switch_rec(r, 7);

	fx_page_init(&p, 1000000);
	fx_event(&p, 10, r, n);                    /* 1000010 */
	fx_time_extend(&p, 5, 3);                  /* + 5 + 3<<27 */
	fx_event(&p, 7, r, n);                     /* ... + 7 */
	fx_padding(&p, 100, 24);                   /* a discarded event: delta counts */
	fx_event(&p, 1, r, n);
	fx_abs_ts(&p, 0x123456789ull);
	fx_event(&p, 2, r, n);
	fx_event_long(&p, 3, r, n);                /* type-0 form */
	fx_page_finish(&p);

	walk_page(&p, &w);
	ck_assert_int_eq(w.status, 0);
	ck_assert_uint_eq(w.n, 5);
	ck_assert_uint_eq(w.ts[0], 1000010);
	ck_assert_uint_eq(w.ts[1], 1000010 + 5 + (3ull << 27) + 7);
	ck_assert_uint_eq(w.ts[2], w.ts[1] + 100 + 1);
	/* An absolute stamp's own 27 bits are its low part, not a delta. */
	ck_assert_uint_eq(w.ts[3], 0x123456789ull + 2);
	ck_assert_uint_eq(w.ts[4], 0x123456789ull + 2 + 3);
	for (size_t i = 0; i < w.n; i++) {
		ck_assert_uint_eq(w.id[i], FX_ID_SCHED_SWITCH);
		ck_assert_uint_eq(w.len[i], 64);
	}
}
END_TEST

START_TEST(test_long_record)
{
	struct fx_page p;
	struct walk w;
	uint8_t big[300];

	memset(big, 'x', sizeof(big));
	fx_common(big, FX_ID_PRINT, 0, 42);
	fx_page_init(&p, 1);
	fx_event(&p, 1, big, sizeof(big));      /* > 112 bytes: type 0 */
	fx_event(&p, 1, big, 13);               /* padded to 16 */
	fx_page_finish(&p);
	walk_page(&p, &w);
	ck_assert_int_eq(w.status, 0);
	ck_assert_uint_eq(w.n, 2);
	ck_assert_uint_eq(w.len[0], 300);
	ck_assert_uint_eq(w.len[1], 16);
	ck_assert_uint_eq(w.id[0], FX_ID_PRINT);
}
END_TEST

/* Build a page with one good record then @tail raw words; check the status. */
static void check_malformed(const uint32_t *tail, size_t n_words, size_t extra_bytes,
			    int want_status, size_t want_records)
{
	struct fx_page p;
	struct walk w;
	uint8_t r[64];

	fx_page_init(&p, 77);
	fx_event(&p, 1, r, switch_rec(r, 7));
	for (size_t i = 0; i < n_words; i++)
		fx_put32(&p, tail[i]);
	p.pos += extra_bytes;
	fx_page_finish(&p);
	walk_page(&p, &w);
	ck_assert_int_eq(w.status, want_status);
	ck_assert_uint_eq(w.n, want_records);
}

START_TEST(test_malformations)
{
	/* 2 bytes left: not even a record header. */
	check_malformed(NULL, 0, 2, FTRACE_STATUS_ABI_SHORT_EVENT_HEADER, 1);
	/* Padding with delta 0 inside the commit. */
	check_malformed((uint32_t[]){ fx_rec_hdr(29, 0), 8 }, 2, 0, FTRACE_STATUS_ABI_NULL_PADDING, 1);
	/* Padding with no length word. */
	check_malformed((uint32_t[]){ fx_rec_hdr(29, 1) }, 1, 0,
			FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH, 1);
	/* Padding length below its own size. */
	check_malformed((uint32_t[]){ fx_rec_hdr(29, 1), 3 }, 2, 0,
			FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH, 1);
	/* Time extend / absolute stamp with no second word. */
	check_malformed((uint32_t[]){ fx_rec_hdr(30, 1) }, 1, 0, FTRACE_STATUS_ABI_SHORT_TIME_EXTEND, 1);
	check_malformed((uint32_t[]){ fx_rec_hdr(31, 1) }, 1, 0, FTRACE_STATUS_ABI_SHORT_TIME_STAMP, 1);
	/* Type-0 record with no length word, length 0, length 1..3. */
	check_malformed((uint32_t[]){ fx_rec_hdr(0, 1) }, 1, 0, FTRACE_STATUS_ABI_SHORT_DATA_LENGTH, 1);
	check_malformed((uint32_t[]){ fx_rec_hdr(0, 1), 0 }, 2, 0, FTRACE_STATUS_ABI_ZERO_DATA_LENGTH, 1);
	check_malformed((uint32_t[]){ fx_rec_hdr(0, 1), 3 }, 2, 0,
			FTRACE_STATUS_ABI_INVALID_DATA_LENGTH, 1);
	/* A record longer than the data left (short and long forms). */
	check_malformed((uint32_t[]){ fx_rec_hdr(28, 1), 0x10001 }, 2, 0,
			FTRACE_STATUS_ABI_END_OVERFLOW, 1);
	check_malformed((uint32_t[]){ fx_rec_hdr(0, 1), 4000 }, 2, 8, FTRACE_STATUS_ABI_END_OVERFLOW, 1);
	/* An empty type-0 record at the very end: no room for an id. */
	check_malformed((uint32_t[]){ fx_rec_hdr(0, 1), 4 }, 2, 0, FTRACE_STATUS_ABI_SHORT_EVENT_ID, 1);
	/* A padding that runs past the data just ends the page. */
	check_malformed((uint32_t[]){ fx_rec_hdr(29, 1), 400 }, 2, 0, 0, 1);
}
END_TEST

START_TEST(test_truncated_at_page_end)
{
	struct fx_page p;
	struct walk w;
	uint8_t r[64];
	size_t n = switch_rec(r, 1);

	/* Fill the page; the last record's length would cross the page end. */
	fx_page_init(&p, 1);
	while (p.pos + 68 + 8 <= FX_PAGE_SIZE)
		fx_event(&p, 1, r, n);
	fx_put32(&p, fx_rec_hdr(20, 1)); /* claims 80 bytes, 64 remain */
	p.pos = FX_PAGE_SIZE;
	fx_page_finish(&p);
	walk_page(&p, &w);
	ck_assert_int_eq(w.status, FTRACE_STATUS_ABI_END_OVERFLOW);
	ck_assert_uint_eq(w.n, (FX_PAGE_SIZE - FX_HDR - 8) / 68);
}
END_TEST

/* ---- errors through the whole parser --------------------------------------- */

struct run {
	struct fx_sink s;
	struct ftrace_pass_stats stats;
	Perfetto__Protos__Trace *trace;
	int packets;
};

static void run_pages(struct ftrace_parser *p, const uint8_t *pages, size_t n_pages,
		      struct ftrace_cpu_state *st, struct run *out)
{
	memset(out, 0, sizeof(*out));
	fx_sink_init(&out->s, 1 << 20);
	out->packets = ftrace_parser_parse_pages(p, 3, pages, n_pages, FX_PAGE_SIZE, &out->s.sink,
						 st, NULL, &out->stats);
	ck_assert_int_ge(out->packets, 0);
	ck_assert(!pbw_overflowed(&out->s.w));
	out->trace = perfetto__protos__trace__unpack(NULL, fx_sink_len(&out->s), out->s.buf);
	ck_assert_ptr_nonnull(out->trace);
	ck_assert_uint_eq(out->trace->n_packet, (size_t)out->packets);
}

static void run_done(struct run *r)
{
	perfetto__protos__trace__free_unpacked(r->trace, NULL);
	fx_sink_done(&r->s);
}

static struct ftrace_parser *parser_with(struct ftrace_format_table *t, bool compact,
					 const int *ids, size_t n)
{
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;
	struct ftrace_parser *p = NULL;

	o.compact_sched = compact;
	ck_assert_int_eq(ftrace_parser_new(t, &o, &p), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(ftrace_parser_enable(p, ids[i]), 0);
	return p;
}

START_TEST(test_errors_in_bundle)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser *p;
	struct ftrace_cpu_state st = {};
	struct fx_page pages[3];
	struct run run;
	uint8_t r[64], *packed;
	Perfetto__Protos__FtraceEventBundle *b;

	ck_assert_ptr_nonnull(t);
	p = parser_with(t, false, (int[]){ FX_ID_SCHED_SWITCH }, 1);

	/* Page 0: an event then a zero-length record.  Page 1: empty commit.
	 * Page 2: a sched_switch record cut to 12 bytes (INVALID_EVENT). */
	fx_page_init(&pages[0], 500);
	fx_event(&pages[0], 1, r, switch_rec(r, 9));
	fx_put32(&pages[0], fx_rec_hdr(0, 1));
	fx_put32(&pages[0], 0);
	fx_page_finish(&pages[0]);
	fx_page_init(&pages[1], 600);
	fx_page_finish(&pages[1]);
	fx_page_init(&pages[2], 700);
	fx_event(&pages[2], 5, r, 12);
	fx_page_finish(&pages[2]);

	packed = fx_pack(pages, 3);
	run_pages(p, packed, 3, &st, &run);
	ck_assert_int_eq(run.packets, 1);
	b = run.trace->packet[0]->ftrace_events;
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->cpu, 3);
	ck_assert_uint_eq(b->n_error, 3);
	ck_assert_int_eq(b->error[0]->status, FTRACE_STATUS_ABI_ZERO_DATA_LENGTH);
	ck_assert_uint_eq(b->error[0]->timestamp, 500);
	ck_assert_int_eq(b->error[1]->status, FTRACE_STATUS_ABI_INVALID_PAGE_HEADER);
	ck_assert_uint_eq(b->error[1]->timestamp, 600);
	ck_assert_int_eq(b->error[2]->status, FTRACE_STATUS_INVALID_EVENT);
	/* The short event is still there, with only its timestamp. */
	ck_assert_uint_eq(b->n_event, 2);
	ck_assert_uint_eq(b->event[1]->timestamp, 705);
	ck_assert(!b->event[1]->has_pid);
	ck_assert_uint_eq(run.stats.parse_errors, 3);
	ck_assert_uint_eq(run.stats.parse_errors_mask,
			  (1u << FTRACE_STATUS_ABI_ZERO_DATA_LENGTH) |
				  (1u << FTRACE_STATUS_ABI_INVALID_PAGE_HEADER) |
				  (1u << FTRACE_STATUS_INVALID_EVENT));
	/* Pages that failed do not move the end mark: page 0 failed too. */
	ck_assert_uint_eq(st.last_event_ts, 0);
	run_done(&run);

	/* With compact_sched the short record is a SHORT_COMPACT_EVENT. */
	ftrace_parser_free(p);
	p = parser_with(t, true, (int[]){ FX_ID_SCHED_SWITCH }, 1);
	ck_assert(ftrace_parser_compact_sched_active(p));
	run_pages(p, packed + 2 * FX_PAGE_SIZE, 1, &st, &run);
	b = run.trace->packet[0]->ftrace_events;
	ck_assert_uint_eq(b->n_error, 1);
	ck_assert_int_eq(b->error[0]->status, FTRACE_STATUS_SHORT_COMPACT_EVENT);
	ck_assert_uint_eq(b->error[0]->timestamp, 700);
	run_done(&run);

	free(packed);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_lost_events_bundles)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser *p = parser_with(t, false, (int[]){ FX_ID_SCHED_SWITCH }, 1);
	struct ftrace_cpu_state st = { .last_event_ts = 42 };
	struct fx_page pages[3];
	struct run run;
	uint8_t r[64], *packed;
	Perfetto__Protos__FtraceEventBundle *b0, *b1, *b2;

	for (int i = 0; i < 3; i++) {
		fx_page_init(&pages[i], 1000u * (i + 1));
		fx_event(&pages[i], 1, r, switch_rec(r, 10 + i));
		fx_event(&pages[i], 1, r, switch_rec(r, 20 + i));
	}
	fx_page_set_missed(&pages[1], true, 17);
	fx_page_set_missed(&pages[2], false, 0);
	for (int i = 0; i < 3; i++)
		fx_page_finish(&pages[i]);

	packed = fx_pack(pages, 3);
	run_pages(p, packed, 3, &st, &run);
	free(packed);
	/* Each flagged page starts a bundle of its own. */
	ck_assert_int_eq(run.packets, 3);
	b0 = run.trace->packet[0]->ftrace_events;
	b1 = run.trace->packet[1]->ftrace_events;
	b2 = run.trace->packet[2]->ftrace_events;
	ck_assert(!b0->has_lost_events);
	ck_assert(b1->has_lost_events && b1->lost_events);
	ck_assert(b2->has_lost_events && b2->lost_events);
	ck_assert(b0->has_previous_bundle_end_timestamp);
	ck_assert_uint_eq(b0->previous_bundle_end_timestamp, 42);
	ck_assert_uint_eq(b1->previous_bundle_end_timestamp, 1002);
	ck_assert_uint_eq(b2->previous_bundle_end_timestamp, 2002);
	ck_assert_uint_eq(st.last_event_ts, 3002);
	ck_assert_uint_eq(b0->n_event + b1->n_event + b2->n_event, 6);
	ck_assert_uint_eq(run.stats.lost_pages, 2);
	ck_assert_uint_eq(run.stats.lost_events, 17);
	ck_assert(run.stats.lost_unknown);
	ck_assert_uint_eq(run.stats.events, 6);
	ck_assert_uint_eq(run.stats.pages, 3);
	run_done(&run);

	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

START_TEST(test_other_sessions_events_skipped)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser *p = parser_with(t, false, (int[]){ FX_ID_SCHED_WAKING }, 1);
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64];

	fx_page_init(&pg, 1);
	for (int i = 0; i < 10; i++)
		fx_event(&pg, 1, r, switch_rec(r, i));
	fx_page_finish(&pg);
	run_pages(p, pg.b, 1, &st, &run);
	/* Nothing of ours: no packet at all. */
	ck_assert_int_eq(run.packets, 0);
	ck_assert_uint_eq(run.stats.records, 10);
	ck_assert_uint_eq(run.stats.events, 0);
	ck_assert_uint_eq(run.stats.skipped_events, 10);
	ck_assert_uint_eq(st.last_event_ts, 0);
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

/*
 * trace_marker lines (ftrace/print, which the kernel records whatever is
 * enabled) between this session's compact sched_switch records: each one is
 * counted as skipped, so that events + skipped is every record the reader
 * consumed, as the kernel's read_events counts them.
 */
START_TEST(test_foreign_events_counted)
{
	struct ftrace_format_table *t = fx_table();
	struct ftrace_parser *p = parser_with(t, true, (int[]){ FX_ID_SCHED_SWITCH }, 1);
	struct ftrace_cpu_state st = {};
	struct fx_page pg;
	struct run run;
	uint8_t r[64], marker[40];

	memset(marker, 'm', sizeof(marker));
	fx_common(marker, FX_ID_PRINT, 0, 42);
	fx_page_init(&pg, 1);
	for (int i = 0; i < 5; i++) {
		fx_event(&pg, 1, r, switch_rec(r, 100 + i));
		if (i % 2 == 0)
			fx_event(&pg, 1, marker, sizeof(marker));
	}
	fx_page_finish(&pg);
	run_pages(p, pg.b, 1, &st, &run);
	ck_assert_int_eq(run.packets, 1);
	ck_assert_uint_eq(run.stats.events, 5);
	ck_assert_uint_eq(run.stats.compact_switch, 5);
	ck_assert_uint_eq(run.stats.skipped_events, 3);
	ck_assert_uint_eq(run.stats.filtered_events, 0);
	ck_assert_uint_eq(run.stats.records, 8);
	run_done(&run);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}
END_TEST

static void write_file(const char *dir, const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* A tracefs-shaped fixture directory, as the table reads a real one. */
START_TEST(test_table_from_dir)
{
	char dir[] = "/tmp/tp-ftrace-fmt-XXXXXX", path[512];
	struct ftrace_format_table *t = NULL;
	int id = 0;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(ftrace_format_table_new(dir, &t), -ENOENT); /* no header_page */
	snprintf(path, sizeof(path), "%s/events", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/events/sched", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/events/sched/sched_switch", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	write_file(dir, "events/header_page", "garbage\n");
	ck_assert_int_eq(ftrace_format_table_new(dir, &t), -EBADMSG);
	write_file(dir, "events/header_page", fx_header_page);
	write_file(dir, "events/sched/sched_switch/format", fx_fmt_sched_switch);

	ck_assert_int_eq(ftrace_format_table_new(dir, &t), 0);
	ck_assert_uint_eq(ftrace_format_table_commit_size(t), 8);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "sched_switch", &id), 0);
	ck_assert_int_eq(id, FX_ID_SCHED_SWITCH);
	id = 0;
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "sched_switch", &id), 0);
	ck_assert_int_eq(id, FX_ID_SCHED_SWITCH);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "sched_waking", &id), -ENOENT);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "nope", "x", &id), -ENOENT);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "..", "x", &id), -EINVAL);
	ck_assert_int_eq(ftrace_format_table_load_event(t, "sched", "a/b", &id), -EINVAL);
	ck_assert_int_eq(ftrace_format_table_add_format(t, "sched", "bad", "not a format", &id),
			 -EBADMSG);
	t = ftrace_format_table_free(t);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(ftrace_format_table_new("/nonexistent/tracefs", &t), -ENOENT);

	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

START_TEST(test_status_names)
{
	ck_assert_str_eq(ftrace_parse_status_to_string(FTRACE_STATUS_INVALID_EVENT),
			 "FTRACE_STATUS_INVALID_EVENT");
	ck_assert_str_eq(ftrace_parse_status_to_string(FTRACE_STATUS_ABI_END_OVERFLOW),
			 "FTRACE_STATUS_ABI_END_OVERFLOW");
	ck_assert_ptr_null(ftrace_parse_status_to_string(_FTRACE_STATUS_MAX));
	/* Our numbering is the proto's. */
	ck_assert_int_eq(FTRACE_STATUS_INVALID_EVENT,
			 PERFETTO__PROTOS__FTRACE_PARSE_STATUS__FTRACE_STATUS_INVALID_EVENT);
	ck_assert_int_eq(FTRACE_STATUS_ABI_NULL_PADDING,
			 PERFETTO__PROTOS__FTRACE_PARSE_STATUS__FTRACE_STATUS_ABI_NULL_PADDING);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_page");
	TCase *tc = tcase_create("walker");

	tcase_add_test(tc, test_header);
	tcase_add_test(tc, test_missed_flags);
	tcase_add_test(tc, test_timestamps);
	tcase_add_test(tc, test_long_record);
	tcase_add_test(tc, test_malformations);
	tcase_add_test(tc, test_truncated_at_page_end);
	tcase_add_test(tc, test_errors_in_bundle);
	tcase_add_test(tc, test_lost_events_bundles);
	tcase_add_test(tc, test_other_sessions_events_skipped);
	tcase_add_test(tc, test_foreign_events_counted);
	tcase_add_test(tc, test_table_from_dir);
	tcase_add_test(tc, test_status_names);
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
