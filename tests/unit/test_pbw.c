/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbw: exact bytes for the primitive encodings, and whole TracePackets
 * written with pbw then decoded with the protobuf-c code generated from our
 * protos (flat buffer, a refill that hands out small ranges, discard mode).
 */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "protos/perfetto/trace/ftrace/ftrace_event.pb-c.h"
#include "protos/perfetto/trace/ftrace/ftrace_event_bundle.pb-c.h"
#include "protos/perfetto/trace/ftrace/sched.pb-c.h"
#include "protos/perfetto/trace/trace_packet.pb-c.h"
#include "protos/pbw.h"
#include "smb/smb.h"
#include "util/util.h"
#include "util/util_varint.h"

/* TracePacket / FtraceEventBundle / FtraceEvent field numbers */
#define TP_FTRACE_EVENTS 1
#define TP_TIMESTAMP 8
#define TP_PREVIOUS_PACKET_DROPPED 42
#define TP_FIRST_PACKET_ON_SEQUENCE 87
#define FB_CPU 1
#define FB_EVENT 2
#define FB_COMPACT_SCHED 4
#define FB_BROKEN_ABI_TRACE_PAGE 512
#define CS_SWITCH_TIMESTAMP 1
#define CS_SWITCH_PREV_STATE 2
#define CS_SWITCH_NEXT_PID 3
#define CS_INTERN_TABLE 5
#define FE_TIMESTAMP 1
#define FE_PID 2
#define FE_PRINT 3
#define FE_SCHED_SWITCH 4
#define PRINT_BUF 2
#define SS_PREV_COMM 1
#define SS_PREV_PID 2
#define SS_PREV_STATE 4
#define SS_NEXT_COMM 5
#define SS_NEXT_PID 6

static size_t written(const struct pbw *w)
{
	return (size_t)pbw_position(w);
}

static void assert_bytes(const uint8_t *got, size_t got_len, const uint8_t *want, size_t want_len)
{
	ck_assert_uint_eq(got_len, want_len);
	for (size_t i = 0; i < want_len; i++)
		ck_assert_msg(got[i] == want[i], "byte %zu: got %02x want %02x", i, got[i], want[i]);
}

START_TEST(test_varints)
{
	uint8_t buf[128];
	struct pbw w;
	const uint8_t want[] = {
		0x08, 0x00,                         /* 1: 0 */
		0x10, 0x7f,                         /* 2: 127 */
		0x18, 0x80, 0x01,                   /* 3: 128 */
		0x20, 0xac, 0x02,                   /* 4: 300 */
		0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* 5: -1 */
		0x80, 0x01, 0x01,                   /* 16: 1 (2-byte tag) */
		0x30, 0x03,                         /* 6: sint -2 */
		0x3d, 0x78, 0x56, 0x34, 0x12,       /* 7: fixed32 */
		0x41, 1, 2, 3, 4, 5, 6, 7, 8,       /* 8: fixed64 */
		0x49, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, /* 9: double 1.0 */
		0x52, 0x03, 'a', 'b', 'c',          /* 10: string */
		0x01, 0xff, 0x7f,                   /* packed elements: 1, 16383 */
	};

	pbw_init(&w, buf, sizeof(buf), NULL, NULL);
	pbw_varint(&w, 1, 0);
	pbw_varint(&w, 2, 127);
	pbw_varint(&w, 3, 128);
	pbw_varint(&w, 4, 300);
	pbw_int(&w, 5, -1);
	pbw_varint(&w, 16, 1);
	pbw_sint(&w, 6, -2);
	pbw_fixed32(&w, 7, 0x12345678);
	pbw_fixed64(&w, 8, 0x0807060504030201ull);
	pbw_double(&w, 9, 1.0);
	pbw_string_n(&w, 10, "abcdef", 3);
	pbw_append_varint(&w, 1);
	pbw_append_varint(&w, 16383);
	ck_assert(!pbw_overflowed(&w));
	assert_bytes(buf, written(&w), want, sizeof(want));
	ck_assert_uint_eq(varint_len(UINT64_MAX), 10);
	ck_assert_uint_eq(varint_len(127), 1);
	ck_assert_uint_eq(varint_len(128), 2);
}
END_TEST

START_TEST(test_redundant_varint)
{
	uint8_t b[4];
	const uint8_t v300[] = { 0xac, 0x82, 0x80, 0x00 };
	const uint8_t v0[] = { 0x80, 0x80, 0x80, 0x00 };
	const uint8_t drop[] = { 0xff, 0xff, 0xff, 0x7f };

	varint_put_redundant4(b, 300);
	assert_bytes(b, 4, v300, 4);
	varint_put_redundant4(b, 0);
	assert_bytes(b, 4, v0, 4);
	varint_put_redundant4(b, SMB_PACKET_SIZE_DROP);
	assert_bytes(b, 4, drop, 4);
}
END_TEST

/* <= 127 bytes in one range: 1-byte length; 128: a 4-byte redundant length. */
START_TEST(test_nested_compaction)
{
	uint8_t buf[512], payload[128];
	struct pbw w;

	memset(payload, 0x5a, sizeof(payload));
	pbw_init(&w, buf, sizeof(buf), NULL, NULL);
	pbw_begin_nested(&w, 2);
	pbw_bytes(&w, 1, payload, 10); /* 12 bytes */
	ck_assert_uint_eq(pbw_end_nested(&w), 12);
	ck_assert_uint_eq(written(&w), 14);
	ck_assert_uint_eq(buf[0], 0x12);
	ck_assert_uint_eq(buf[1], 12);
	ck_assert_uint_eq(buf[2], 0x0a);
	ck_assert_uint_eq(buf[3], 10);
	ck_assert_uint_eq(buf[4], 0x5a);

	pbw_init(&w, buf, sizeof(buf), NULL, NULL);
	pbw_begin_nested(&w, 2);
	pbw_bytes(&w, 1, payload, 125); /* 2 + 125 = 127 */
	ck_assert_uint_eq(pbw_end_nested(&w), 127);
	ck_assert_uint_eq(written(&w), 2 + 127);
	ck_assert_uint_eq(buf[1], 127);

	pbw_init(&w, buf, sizeof(buf), NULL, NULL);
	pbw_begin_nested(&w, 2);
	pbw_bytes(&w, 1, payload, 126); /* 2 + 126 = 128 */
	ck_assert_uint_eq(pbw_end_nested(&w), 128);
	ck_assert_uint_eq(written(&w), 1 + 4 + 128);
	ck_assert_uint_eq(buf[1], 0x80);
	ck_assert_uint_eq(buf[2], 0x81);
	ck_assert_uint_eq(buf[3], 0x80);
	ck_assert_uint_eq(buf[4], 0x00);

	/* an empty message compacts to 1 byte too; nesting inside keeps lengths right */
	pbw_init(&w, buf, sizeof(buf), NULL, NULL);
	pbw_begin_nested(&w, 3);
	pbw_begin_nested(&w, 4);
	ck_assert_uint_eq(pbw_end_nested(&w), 0);
	pbw_varint(&w, 1, 1);
	ck_assert_uint_eq(pbw_end_nested(&w), 4);
	{
		const uint8_t want[] = { 0x1a, 0x04, 0x22, 0x00, 0x08, 0x01 };

		assert_bytes(buf, written(&w), want, sizeof(want));
	}
}
END_TEST

/* A TracePacket with a bundle, events, strings and packed fields. */
static void write_packet(struct pbw *w, const uint8_t *blob, size_t blob_len, unsigned n_events)
{
	pbw_varint(w, TP_PREVIOUS_PACKET_DROPPED, SMB_DATA_LOSS_PRESENT | SMB_DATA_LOSS_SMB_FULL);
	pbw_varint(w, TP_FIRST_PACKET_ON_SEQUENCE, 1);
	pbw_varint(w, TP_TIMESTAMP, 123456789012345ull);
	pbw_begin_nested(w, TP_FTRACE_EVENTS);
	pbw_varint(w, FB_CPU, 3);
	for (unsigned i = 0; i < n_events; i++) {
		pbw_begin_nested(w, FB_EVENT);
		pbw_varint(w, FE_TIMESTAMP, 1000000ull + i);
		pbw_varint(w, FE_PID, 100 + i);
		if (i % 2 == 0) {
			pbw_begin_nested(w, FE_SCHED_SWITCH);
			pbw_string_n(w, SS_PREV_COMM, "swapper/0\0garbage", 16);
			pbw_int(w, SS_PREV_PID, (int64_t)i);
			pbw_int(w, SS_PREV_STATE, -1);
			pbw_string(w, SS_NEXT_COMM, "kworker/u8:1");
			pbw_int(w, SS_NEXT_PID, -(int64_t)i);
			pbw_end_nested(w);
		} else {
			pbw_begin_nested(w, FE_PRINT);
			pbw_bytes(w, PRINT_BUF, "hello world", 11);
			pbw_end_nested(w);
		}
		pbw_end_nested(w);
	}
	pbw_begin_nested(w, FB_COMPACT_SCHED);
	pbw_begin_nested(w, CS_SWITCH_TIMESTAMP);
	for (unsigned i = 0; i < 300; i++)
		pbw_append_varint(w, (uint64_t)i * 977);
	pbw_end_nested(w);
	pbw_begin_nested(w, CS_SWITCH_PREV_STATE);
	pbw_append_varint(w, (uint64_t)(int64_t)-5);
	pbw_append_varint(w, 2);
	pbw_end_nested(w);
	pbw_begin_nested(w, CS_SWITCH_NEXT_PID);
	pbw_append_varint(w, 42);
	pbw_end_nested(w);
	pbw_string(w, CS_INTERN_TABLE, "comm0");
	pbw_string(w, CS_INTERN_TABLE, "");
	pbw_end_nested(w);
	pbw_bytes(w, FB_BROKEN_ABI_TRACE_PAGE, blob, blob_len);
	pbw_end_nested(w);
	ck_assert_uint_eq(w->depth, 0);
}

static void check_packet(const uint8_t *data, size_t len, const uint8_t *blob, size_t blob_len,
			 unsigned n_events)
{
	Perfetto__Protos__TracePacket *tp;
	Perfetto__Protos__FtraceEventBundle *b;
	Perfetto__Protos__FtraceEventBundle__CompactSched *cs;

	tp = perfetto__protos__trace_packet__unpack(NULL, len, data);
	ck_assert_ptr_nonnull(tp);
	ck_assert(tp->has_previous_packet_dropped);
	ck_assert_uint_eq(tp->previous_packet_dropped, 257);
	ck_assert(tp->has_first_packet_on_sequence && tp->first_packet_on_sequence);
	ck_assert(tp->has_timestamp);
	ck_assert_uint_eq(tp->timestamp, 123456789012345ull);
	ck_assert_int_eq(tp->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS);
	b = tp->ftrace_events;
	ck_assert(b->has_cpu);
	ck_assert_uint_eq(b->cpu, 3);
	ck_assert_uint_eq(b->n_event, n_events);
	for (unsigned i = 0; i < n_events; i++) {
		Perfetto__Protos__FtraceEvent *e = b->event[i];

		ck_assert_uint_eq(e->timestamp, 1000000ull + i);
		ck_assert_uint_eq(e->pid, 100 + i);
		if (i % 2 == 0) {
			ck_assert_int_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH);
			ck_assert_str_eq(e->sched_switch->prev_comm, "swapper/0");
			ck_assert_int_eq(e->sched_switch->prev_pid, (int)i);
			ck_assert_int_eq(e->sched_switch->prev_state, -1);
			ck_assert_str_eq(e->sched_switch->next_comm, "kworker/u8:1");
			ck_assert_int_eq(e->sched_switch->next_pid, -(int)i);
		} else {
			ck_assert_int_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT);
			ck_assert_str_eq(e->print->buf, "hello world");
		}
	}
	cs = b->compact_sched;
	ck_assert_ptr_nonnull(cs);
	ck_assert_uint_eq(cs->n_switch_timestamp, 300);
	for (unsigned i = 0; i < 300; i++)
		ck_assert_uint_eq(cs->switch_timestamp[i], (uint64_t)i * 977);
	ck_assert_uint_eq(cs->n_switch_prev_state, 2);
	ck_assert_int_eq(cs->switch_prev_state[0], -5);
	ck_assert_int_eq(cs->switch_prev_state[1], 2);
	ck_assert_uint_eq(cs->n_switch_next_pid, 1);
	ck_assert_int_eq(cs->switch_next_pid[0], 42);
	ck_assert_uint_eq(cs->n_intern_table, 2);
	ck_assert_str_eq(cs->intern_table[0], "comm0");
	ck_assert_str_eq(cs->intern_table[1], "");
	ck_assert(b->has_broken_abi_trace_page);
	ck_assert_uint_eq(b->broken_abi_trace_page.len, blob_len);
	ck_assert(memcmp(b->broken_abi_trace_page.data, blob, blob_len) == 0);
	perfetto__protos__trace_packet__free_unpacked(tp, NULL);
}

static uint8_t *make_blob(size_t len, uint32_t seed)
{
	uint8_t *b = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (uint8_t)(seed >> 16);
	}
	return b;
}

START_TEST(test_packet_flat)
{
	size_t cap = 1 << 20, blob_len = 70000;
	_cleanup_free_ uint8_t *buf = malloc(cap);
	_cleanup_free_ uint8_t *blob = make_blob(blob_len, 7);
	struct pbw w;

	pbw_init(&w, buf, cap, NULL, NULL);
	write_packet(&w, blob, blob_len, 50);
	ck_assert(!pbw_overflowed(&w));
	check_packet(buf, written(&w), blob, blob_len, 50);
}
END_TEST

/*
 * An owner that hands out small ranges of one big backing store and keeps
 * the written part of each, so the stream can be stitched back together.
 */
struct ranges {
	uint8_t *store;
	size_t store_len;
	size_t next;              /* next free byte of the store */
	uint32_t seed;
	struct { uint8_t *start; uint8_t *end; } seg[100000];
	size_t n_seg;
	size_t refills;
	size_t fail_after;        /* refills before running out (0: never) */
};

static int small_refill(struct pbw *w, size_t min_bytes)
{
	struct ranges *r = w->owner;
	size_t len;

	ck_assert_uint_le(min_bytes, PBW_MAX_CONTIGUOUS);
	ck_assert(!w->discarding);
	r->seg[r->n_seg - 1].end = w->cur;
	r->refills++;
	r->seed = r->seed * 1103515245u + 12345u;
	len = min_bytes + (r->seed >> 16) % 40;
	if ((r->fail_after && r->refills > r->fail_after) || r->next + len > r->store_len) {
		pbw_enter_discard(w);
		return -ENOSPC;
	}
	/* leave a gap: a write past the range end would land in it */
	r->next += 3;
	memset(r->store + r->next, 0xee, len + 3);
	pbw_reset_range(w, r->store + r->next, len);
	r->seg[r->n_seg].start = r->store + r->next;
	r->seg[r->n_seg].end = r->store + r->next;
	r->n_seg++;
	ck_assert_uint_lt(r->n_seg, ARRAY_SIZE(r->seg));
	r->next += len;
	return 0;
}

static size_t ranges_stitch(struct ranges *r, struct pbw *w, uint8_t *out)
{
	size_t n = 0;

	r->seg[r->n_seg - 1].end = w->cur;
	for (size_t i = 0; i < r->n_seg; i++) {
		size_t len = (size_t)(r->seg[i].end - r->seg[i].start);

		memcpy(out + n, r->seg[i].start, len);
		n += len;
	}
	return n;
}

START_TEST(test_packet_small_ranges)
{
	size_t blob_len = 100000;
	_cleanup_free_ struct ranges *r = calloc(1, sizeof(*r));
	_cleanup_free_ uint8_t *blob = make_blob(blob_len, 99);
	_cleanup_free_ uint8_t *out = NULL;
	struct pbw w;
	size_t n;

	ck_assert_ptr_nonnull(r);
	r->store_len = 8 << 20;
	r->store = malloc(r->store_len);
	out = malloc(r->store_len);
	ck_assert_ptr_nonnull(r->store);
	r->seed = 1;
	r->next = 3;
	r->seg[0].start = r->seg[0].end = r->store + r->next;
	r->n_seg = 1;
	memset(r->store, 0xee, r->store_len);
	pbw_init(&w, r->store + r->next, 5, small_refill, r);
	r->next += 5;

	write_packet(&w, blob, blob_len, 200);
	ck_assert(!pbw_overflowed(&w));
	ck_assert_uint_gt(r->refills, 2000);
	n = ranges_stitch(r, &w, out);
	ck_assert_uint_eq(n, written(&w));
	/* every gap byte between ranges is still the fill pattern */
	for (size_t i = 0; i + 1 < r->n_seg; i++) {
		const uint8_t *gap = r->seg[i + 1].start - 3;

		for (int k = 0; k < 3; k++)
			ck_assert_uint_eq(gap[k], 0xee);
	}
	check_packet(out, n, blob, blob_len, 200);
	free(r->store);
}
END_TEST

/* No refill: overflow goes to the sink, nothing past the buffer is touched. */
START_TEST(test_discard_flat)
{
	uint8_t mem[64 + 32];
	_cleanup_free_ uint8_t *blob = make_blob(5000, 3);
	struct pbw w;
	uint64_t before;

	memset(mem, 0xcc, sizeof(mem));
	pbw_init(&w, mem, 64, NULL, NULL);
	pbw_varint(&w, 1, 1);
	ck_assert(!pbw_overflowed(&w));
	before = pbw_position(&w);
	pbw_begin_nested(&w, 2);
	for (int i = 0; i < 100; i++)
		pbw_varint(&w, 3, UINT64_MAX);
	pbw_bytes(&w, 4, blob, 5000);
	pbw_begin_nested(&w, 5);
	pbw_bytes(&w, 4, blob, 300);
	pbw_end_nested(&w);
	pbw_end_nested(&w);
	ck_assert(pbw_overflowed(&w));
	ck_assert_uint_eq(w.depth, 0);
	/* the position still counts every byte of the stream */
	ck_assert_uint_eq(pbw_position(&w) - before,
			  1 + 4 + 100 * 11 + 3 + 5000 + 1 + 4 + 3 + 300);
	ck_assert_uint_gt(w.discarded, 0);
	for (size_t i = 64; i < sizeof(mem); i++)
		ck_assert_uint_eq(mem[i], 0xcc);
	ck_assert_uint_eq(mem[0], 0x08);
	ck_assert_uint_eq(mem[1], 0x01);
}
END_TEST

/* A refill that gives up mid-stream: the rest is discarded, the ranges given stay intact. */
START_TEST(test_discard_refill)
{
	_cleanup_free_ struct ranges *r = calloc(1, sizeof(*r));
	_cleanup_free_ uint8_t *blob = make_blob(20000, 5);
	struct pbw w;
	uint8_t again[16];

	ck_assert_ptr_nonnull(r);
	r->store_len = 1 << 20;
	r->store = malloc(r->store_len);
	ck_assert_ptr_nonnull(r->store);
	memset(r->store, 0xee, r->store_len);
	r->seed = 2;
	r->next = 3;
	r->seg[0].start = r->seg[0].end = r->store + r->next;
	r->n_seg = 1;
	r->fail_after = 10;
	pbw_init(&w, r->store + r->next, 20, small_refill, r);
	r->next += 20;

	write_packet(&w, blob, 20000, 20);
	ck_assert(pbw_overflowed(&w));
	ck_assert_uint_eq(r->refills, 11); /* not called again once discarding */
	ck_assert_uint_eq(w.depth, 0);
	/* nothing was written past the last range handed out */
	for (size_t i = r->next; i < r->next + 64; i++)
		ck_assert_uint_eq(r->store[i], 0xee);

	/* the owner can resume writing somewhere else */
	pbw_leave_discard(&w, again, sizeof(again));
	ck_assert(!pbw_overflowed(&w));
	pbw_varint(&w, 1, 5);
	ck_assert_uint_eq(again[0], 0x08);
	ck_assert_uint_eq(again[1], 0x05);
	free(r->store);
}
END_TEST

static Suite *pbw_suite(void)
{
	Suite *s = suite_create("pbw");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_varints);
	tcase_add_test(tc, test_redundant_varint);
	tcase_add_test(tc, test_nested_compaction);
	tcase_add_test(tc, test_packet_flat);
	tcase_add_test(tc, test_packet_small_ranges);
	tcase_add_test(tc, test_discard_flat);
	tcase_add_test(tc, test_discard_refill);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pbw_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
