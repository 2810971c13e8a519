/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SMB's bytes and rules, packet by packet: the exact chunk header and
 * fragment layout the writer produces, its limits (fragments per chunk,
 * patch slots), nested messages across chunks, the emulated (inline chunk)
 * path, and the reader's rejection of what traced rejects: bad indices and
 * states, malformed chunks, reserved fields, sequences, reassembly, patches
 * and its memory bound.
 */

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "protos/perfetto/trace/ftrace/ftrace_event.pb-c.h"
#include "protos/perfetto/trace/ftrace/ftrace_event_bundle.pb-c.h"
#include "protos/perfetto/trace/trace_packet.pb-c.h"
#include "smb/smb.h"
#include "tests/lib/smb_fixtures.h"
#include "util/util.h"

/* ---- ABI bytes ------------------------------------------------------------ */

START_TEST(test_chunk_header_bytes)
{
	struct shm m;
	struct smb_writer *w;
	struct smb_commit cm;
	_cleanup_free_ uint8_t *blob = malloc(10000);
	const uint8_t *c0, *c1, *c2;
	struct pbw *p;

	ck_assert_ptr_nonnull(blob);
	memset(blob, 0xab, 10000);
	shm_setup(&m, 64 * KIB, 4 * KIB);
	ck_assert_int_eq(smb_writer_new(m.smb, 0x1234, TARGET_BUFFER, &w), 0);
	ck_assert_int_eq(smb_writer_new(m.smb, 0x1234, TARGET_BUFFER, &(struct smb_writer *){ NULL }),
			 -EEXIST);
	ck_assert_int_eq(smb_writer_new(m.smb, 0, TARGET_BUFFER, &(struct smb_writer *){ NULL }),
			 -EINVAL);
	ck_assert_int_eq(smb_writer_new(m.smb, 32768, TARGET_BUFFER, &(struct smb_writer *){ NULL }),
			 -EINVAL);

	p = smb_writer_begin_packet(w);
	pbw_bytes(p, 1000, blob, 10000);
	ck_assert_int_eq(smb_writer_end_packet(w), 0);
	p = smb_writer_begin_packet(w);
	pbw_varint(p, 8, 5);
	ck_assert_int_eq(smb_writer_end_packet(w), 0);
	smb_writer_flush(w);
	ck_assert(smb_take_commit(m.smb, &cm));
	ck_assert_uint_eq(cm.n_moves, 3);
	ck_assert_uint_eq(cm.n_patches, 0);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(cm.moves[i].page, i);
		ck_assert_uint_eq(cm.moves[i].chunk, 0);
		ck_assert_uint_eq(cm.moves[i].target_buffer, TARGET_BUFFER);
		/* Div1, chunk 0 Complete */
		ck_assert_uint_eq(page_word(&m, i), 0x10000003u);
	}
	c0 = m.svc + 8;
	c1 = m.svc + 4 * KIB + 8;
	c2 = m.svc + 8 * KIB + 8;
	{
		/* chunk 0: id 0, writer 0x1234, count 1, LastContinuesOnNext (bit 11) */
		const uint8_t h0[] = { 0, 0, 0, 0, 0x34, 0x12, 0x01, 0x08 };
		/* chunk 1: id 1, count 1, both continuation flags */
		const uint8_t h1[] = { 1, 0, 0, 0, 0x34, 0x12, 0x01, 0x0c };
		/* chunk 2: id 2, count 2: the rest of packet 1, then packet 2 */
		const uint8_t h2[] = { 2, 0, 0, 0, 0x34, 0x12, 0x02, 0x04 };
		/* first fragment: 4088 - 8 - 4 = 4076 bytes, redundant varint; B8 05 01 first */
		const uint8_t f0[] = { 0xec, 0x9f, 0x80, 0x00, 0xb8, 0x05, 0x01, 0xc2, 0x3e, 0x90, 0x4e };

		ck_assert(memcmp(c0, h0, 8) == 0);
		ck_assert(memcmp(c1, h1, 8) == 0);
		ck_assert(memcmp(c2, h2, 8) == 0);
		ck_assert(memcmp(c0 + 8, f0, sizeof(f0)) == 0);
	}
	{
		/* chunk 2: last fragment of packet 1, then a 2-byte packet compacted to a 1-byte prefix */
		uint32_t first = 3 + 2 + 2 + 10000 - 4076 - 4076;
		const uint8_t *f = c2 + 8;

		ck_assert_uint_eq(f[0], (first & 0x7f) | 0x80);
		ck_assert_uint_eq(f[1], ((first >> 7) & 0x7f) | 0x80);
		ck_assert_uint_eq(f[2], 0x80);
		ck_assert_uint_eq(f[3], 0x00);
		ck_assert_uint_eq(f[4 + first], 0x02);
		ck_assert_uint_eq(f[5 + first], 0x40);
		ck_assert_uint_eq(f[6 + first], 0x05);
	}
	w = smb_writer_free(w);
	shm_teardown(&m);
}
END_TEST

struct copy {
	uint8_t *data;
	size_t len;
	int n;
};

static int copy_cb(const struct smb_packet *pk, void *userdata)
{
	struct copy *g = userdata;

	free(g->data);
	g->data = malloc(pk->len);
	ck_assert_ptr_nonnull(g->data);
	memcpy(g->data, pk->data, pk->len);
	g->len = pk->len;
	g->n++;
	return 0;
}

/* A chunk never holds more than 1022 fragments, even when there is room. */
START_TEST(test_fragment_count_limit)
{
	struct shm m;
	struct smb_writer *w;
	struct smb_commit cm;
	struct smb_writer_stats ws;
	uint16_t packets;

	shm_setup(&m, 256 * KIB, 32 * KIB);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	for (uint32_t i = 0; i < 1500; i++) {
		struct pbw *p = smb_writer_begin_packet(w);

		pbw_varint(p, 8, 1);
		ck_assert_int_eq(smb_writer_end_packet(w), 0);
	}
	smb_writer_flush(w);
	smb_writer_get_stats(w, &ws);
	ck_assert_uint_eq(ws.chunks_acquired, 2);
	ck_assert(smb_take_commit(m.smb, &cm));
	ck_assert_uint_eq(cm.n_moves, 2);
	memcpy(&packets, m.svc + 8 + 6, 2);
	ck_assert_uint_eq(packets, 1022);
	memcpy(&packets, m.svc + 32 * KIB + 8 + 6, 2);
	ck_assert_uint_eq(packets, 1500 - 1022);
	w = smb_writer_free(w);
	shm_teardown(&m);
}
END_TEST

/*
 * Patch slots are bounded (chunks x nesting).  A service that frees chunks
 * without ever being told about them lets a writer cross chunks without
 * end; when the slots run out the packet is dropped, never overrun.
 */
START_TEST(test_patch_slots_bounded)
{
	struct shm m;
	struct smb_writer *w;
	struct smb_commit cm;
	struct smb_stats st;
	struct smb_writer_stats ws;
	uint8_t blob[200];
	struct pbw *p;

	memset(blob, 0x33, sizeof(blob));
	shm_setup(&m, 16 * KIB, 4 * KIB);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	p = smb_writer_begin_packet(w);
	for (int i = 0; i < 3000; i++) {
		pbw_begin_nested(p, 1);
		pbw_bytes(p, 2, blob, sizeof(blob));
		pbw_end_nested(p);
		for (size_t k = 0; k < 4; k++)
			__atomic_store_n((uint32_t *)(m.svc + k * 4 * KIB), 0, __ATOMIC_RELEASE);
	}
	ck_assert_int_eq(smb_writer_end_packet(w), -ENOSPC);
	smb_get_stats(m.smb, &st);
	ck_assert_uint_eq(st.patch_slots_full, 1);
	ck_assert_uint_gt(st.chunks_lost, 0); /* more releases than the commit list holds */
	smb_writer_get_stats(w, &ws);
	ck_assert_uint_eq(ws.patches, 4 * PBW_MAX_NESTING);
	ck_assert_uint_eq(ws.packets_dropped, 1);

	/* taking the commit frees the slots; the next packet says what was lost */
	ck_assert(smb_take_commit(m.smb, &cm));
	ck_assert_uint_eq(cm.n_patches, 4 * PBW_MAX_NESTING);
	for (size_t i = 0; i < cm.n_patches; i++)
		ck_assert(!cm.patches[i].has_more);
	for (size_t k = 0; k < 4; k++)
		__atomic_store_n((uint32_t *)(m.svc + k * 4 * KIB), 0, __ATOMIC_RELEASE);
	p = smb_writer_begin_packet(w);
	pbw_varint(p, 8, 1);
	ck_assert_int_eq(smb_writer_end_packet(w), 0);
	{
		struct prefix x;
		const uint8_t *c = NULL;

		smb_writer_flush(w);
		ck_assert(smb_take_commit(m.smb, &cm));
		ck_assert_uint_eq(cm.n_moves, 1);
		c = m.svc + cm.moves[0].page * 4 * KIB + 16;
		x = parse_prefix(c + 1, c[0]);
		ck_assert(x.has_dropped);
		ck_assert_uint_eq(x.dropped, 257);
		ck_assert(!x.has_first);
		ck_assert_uint_eq(x.idx, 1);
	}
	w = smb_writer_free(w);
	shm_teardown(&m);
}
END_TEST

/* Patches of one chunk come together; has_more is set while one is still open. */
START_TEST(test_patch_has_more)
{
	struct shm m;
	struct smb_writer *w;
	struct smb_commit cm;
	uint8_t blob[3000];
	struct pbw *p;

	memset(blob, 0x44, sizeof(blob));
	shm_setup(&m, 64 * KIB, 4 * KIB);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	p = smb_writer_begin_packet(w);
	pbw_begin_nested(p, 1);             /* A: opened in chunk 0 */
	pbw_begin_nested(p, 2);             /* B: opened in chunk 0 */
	pbw_bytes(p, 3, blob, sizeof(blob));
	pbw_bytes(p, 3, blob, sizeof(blob)); /* crosses into chunk 1 */
	pbw_end_nested(p);                  /* B done, A still open */
	ck_assert(smb_take_commit(m.smb, &cm));
	ck_assert_uint_eq(cm.n_moves, 1);
	ck_assert_uint_eq(cm.n_patches, 1);
	ck_assert_uint_eq(cm.patches[0].chunk_id, 0);
	ck_assert(cm.patches[0].has_more); /* A's patch is still pending */
	ck_assert_uint_eq(cm.patches[0].writer_id, 1);
	ck_assert_uint_eq(cm.patches[0].target_buffer, TARGET_BUFFER);
	/* prefix, field 87, A's tag, A's length, B's tag: then B's length */
	ck_assert_uint_eq(cm.patches[0].offset, 4 + 3 + 1 + 4 + 1);
	ck_assert_uint_eq(cm.patches[0].data[0], ((3000 + 3) * 2) % 128 | 0x80);
	pbw_end_nested(p);
	ck_assert_int_eq(smb_writer_end_packet(w), 0);
	ck_assert(smb_take_commit(m.smb, &cm));
	ck_assert_uint_eq(cm.n_moves, 0);
	ck_assert_uint_eq(cm.n_patches, 1);
	ck_assert_uint_eq(cm.patches[0].offset, 4 + 3 + 1);
	ck_assert(!cm.patches[0].has_more);
	/* the chunk was flagged before it was handed over */
	ck_assert_uint_eq(m.svc[8 + 7] & 0x10, 0x10);
	ck_assert(!smb_take_commit(m.smb, &cm));
	w = smb_writer_free(w);
	shm_teardown(&m);
}
END_TEST

/* Freeing a writer in the middle of a packet finishes and hands it over. */
START_TEST(test_writer_free_mid_packet)
{
	struct shm m;
	struct smb_writer *w;
	struct smb_commit cm;
	struct smb_reader *r;
	struct copy got = {};
	struct pbw *p;

	shm_setup(&m, 64 * KIB, 4 * KIB);
	r = reader_for(&m, MIB);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	p = smb_writer_begin_packet(w);
	pbw_varint(p, 8, 77);
	pbw_begin_nested(p, 1);
	pbw_varint(p, 1, 1);
	w = smb_writer_free(w);
	ck_assert_ptr_null(w);
	ck_assert(smb_take_commit(m.smb, &cm));
	ck_assert_uint_eq(cm.n_moves, 1);
	ck_assert_int_eq(smb_reader_move(r, &cm.moves[0]), 0);
	ck_assert_int_eq(smb_reader_read_packets(r, true, copy_cb, &got), 1);
	{
		const uint8_t want[] = { 0xb8, 0x05, 0x01, 0x40, 77, 0x0a, 0x02, 0x08, 0x01 };

		ck_assert_uint_eq(got.len, sizeof(want));
		ck_assert(memcmp(got.data, want, sizeof(want)) == 0);
	}
	/* the id is free again */
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	w = smb_writer_free(w);
	free(got.data);
	r = smb_reader_free(r);
	shm_teardown(&m);
}
END_TEST

/* Small nested messages cut by chunk boundaries still decode (protobuf-c). */
START_TEST(test_small_nested_across_chunks)
{
	struct shm m;
	struct smb_reader *r;
	struct smb_writer *w;
	struct smb_commit cm;
	struct smb_writer_stats ws;
	struct pbw *p;
	struct copy got = {};
	const unsigned n_events = 3000;

	shm_setup(&m, 512 * KIB, 4 * KIB);
	r = reader_for(&m, 16 * MIB);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	p = smb_writer_begin_packet(w);
	pbw_begin_nested(p, 1); /* ftrace_events */
	pbw_varint(p, 1, 2);    /* cpu */
	for (unsigned i = 0; i < n_events; i++) {
		pbw_begin_nested(p, 2); /* event */
		pbw_varint(p, 1, 1000000000ull + i);
		pbw_varint(p, 2, i);
		pbw_begin_nested(p, 4); /* sched_switch */
		pbw_string(p, 1, "prev");
		pbw_int(p, 2, (int64_t)i);
		pbw_string(p, 5, "next-comm");
		pbw_int(p, 6, (int64_t)i + 1);
		pbw_end_nested(p);
		pbw_end_nested(p);
	}
	pbw_end_nested(p);
	ck_assert_int_eq(smb_writer_end_packet(w), 0);
	smb_writer_flush(w);
	smb_writer_get_stats(w, &ws);
	ck_assert_uint_gt(ws.chunks_acquired, 20);
	ck_assert_uint_gt(ws.patches, 10); /* the bundle and the events that were cut */

	ck_assert(smb_take_commit(m.smb, &cm));
	for (size_t i = 0; i < cm.n_moves; i++)
		ck_assert_int_eq(smb_reader_move(r, &cm.moves[i]), 0);
	/* before the patches nothing can be read: the first chunk waits for them */
	ck_assert_int_eq(smb_reader_read_packets(r, false, collect, &(struct lossy_check){}), 0);
	for (size_t i = 0; i < cm.n_patches; i++)
		ck_assert_int_eq(smb_reader_patch(r, &cm.patches[i]), 0);
	ck_assert_int_eq(smb_reader_read_packets(r, true, copy_cb, &got), 1);
	{
		Perfetto__Protos__TracePacket *tp =
			perfetto__protos__trace_packet__unpack(NULL, got.len, got.data);

		ck_assert_ptr_nonnull(tp);
		ck_assert(tp->first_packet_on_sequence);
		ck_assert_int_eq(tp->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS);
		ck_assert_uint_eq(tp->ftrace_events->cpu, 2);
		ck_assert_uint_eq(tp->ftrace_events->n_event, n_events);
		for (unsigned i = 0; i < n_events; i++) {
			Perfetto__Protos__FtraceEvent *e = tp->ftrace_events->event[i];

			ck_assert_uint_eq(e->timestamp, 1000000000ull + i);
			ck_assert_uint_eq(e->pid, i);
			ck_assert_int_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH);
			ck_assert_str_eq(e->sched_switch->prev_comm, "prev");
			ck_assert_int_eq(e->sched_switch->prev_pid, (int)i);
			ck_assert_str_eq(e->sched_switch->next_comm, "next-comm");
			ck_assert_int_eq(e->sched_switch->next_pid, (int)i + 1);
		}
		perfetto__protos__trace_packet__free_unpacked(tp, NULL);
	}
	free(got.data);
	w = smb_writer_free(w);
	r = smb_reader_free(r);
	shm_teardown(&m);
}
END_TEST

/* The shmem emulation path: whole chunks carried inline, freed locally. */
START_TEST(test_emulation_path)
{
	struct shm m;
	struct smb_reader *r;
	struct smb_writer *w;
	struct smb_commit cm;
	struct lossy_check l = {};
	uint32_t got[64];
	bool f1[64];
	uint32_t f2[64], f3[64];
	const void *data;
	size_t len;
	uint8_t blob[1500];

	memset(blob, 0x11, sizeof(blob));
	l.got = got;
	l.has_dropped_field = f1;
	l.reader_flag = f2;
	l.dropped_value = f3;
	shm_setup(&m, 64 * KIB, 8 * KIB);
	ck_assert_int_eq(smb_reader_new(NULL, 0, 0, MIB, &r), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(r, TARGET_BUFFER), 0);
	ck_assert_int_eq(smb_writer_new(m.smb, 9, TARGET_BUFFER, &w), 0);
	for (uint32_t i = 0; i < 20; i++) {
		struct pbw *p = smb_writer_begin_packet(w);

		pbw_varint(p, 8, i);
		pbw_bytes(p, 1000, blob, sizeof(blob));
		ck_assert_int_eq(smb_writer_end_packet(w), 0);
	}
	smb_writer_flush(w);
	ck_assert(smb_take_commit(m.smb, &cm));
	ck_assert_int_eq(smb_chunk_bytes(m.smb, 100, 0, &data, &len), -EINVAL);
	ck_assert_int_eq(smb_chunk_bytes(m.smb, 0, 1, &data, &len), -EINVAL);
	for (size_t i = 0; i < cm.n_moves; i++) {
		ck_assert_int_eq(smb_chunk_bytes(m.smb, cm.moves[i].page, 0, &data, &len), 0);
		ck_assert_uint_eq(len, 8 * KIB - 8);
		ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, data, len), 0);
		smb_chunk_release_local(m.smb, cm.moves[i].page, 0);
		ck_assert_uint_eq(page_word(&m, cm.moves[i].page), 0);
		ck_assert_int_eq(smb_chunk_bytes(m.smb, cm.moves[i].page, 0, &data, &len), -EBUSY);
	}
	ck_assert_int_eq(smb_reader_read_packets(r, true, collect, &l), 20);
	for (uint32_t i = 0; i < 20; i++)
		ck_assert_uint_eq(got[i], i);
	w = smb_writer_free(w);
	r = smb_reader_free(r);
	shm_teardown(&m);
}
END_TEST

/* ---- (5) the reader rejects what traced rejects -------------------------- */

struct built {
	uint8_t b[4096];
	size_t len;
};

/* A chunk: header + fragments given as (prefix bytes, body) pairs. */
static void chunk_begin(struct built *c, uint32_t chunk_id, uint16_t writer_id, unsigned count,
			unsigned flags)
{
	uint16_t packets = (uint16_t)(count | (flags << 10));

	memset(c, 0, sizeof(*c));
	memcpy(c->b, &chunk_id, 4);
	memcpy(c->b + 4, &writer_id, 2);
	memcpy(c->b + 6, &packets, 2);
	c->len = 8;
}

static void chunk_raw(struct built *c, const void *p, size_t n)
{
	memcpy(c->b + c->len, p, n);
	c->len += n;
}

static void chunk_frag(struct built *c, const void *p, size_t n)
{
	uint8_t pre = (uint8_t)n;

	ck_assert_uint_lt(n, 128);
	chunk_raw(c, &pre, 1);
	chunk_raw(c, p, n);
}

/* A packet "08 <idx>" (timestamp = idx). */
static void chunk_pkt(struct built *c, uint8_t idx)
{
	const uint8_t pk[] = { 0x40, idx };

	chunk_frag(c, pk, 2);
}

struct rec {
	int n;
	uint32_t idx[64];
	uint32_t flag[64];
	uint32_t seq[64];
	uint16_t writer[64];
};

static int rec_cb(const struct smb_packet *p, void *userdata)
{
	struct rec *r = userdata;
	struct prefix x = parse_prefix(p->data, p->len);

	ck_assert(x.has_idx);
	ck_assert_int_lt(r->n, 64);
	r->idx[r->n] = (uint32_t)x.idx;
	r->flag[r->n] = p->previous_packet_dropped;
	r->seq[r->n] = p->sequence_id;
	r->writer[r->n] = p->writer_id;
	r->n++;
	return 0;
}

static struct smb_reader *bytes_reader(size_t max)
{
	struct smb_reader *r;

	ck_assert_int_eq(smb_reader_new(NULL, 0, 0, max, &r), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(r, TARGET_BUFFER), 0);
	return r;
}

START_TEST(test_reject_indices_and_states)
{
	struct shm m;
	struct smb_reader *r;
	struct smb_reader_stats rs;
	struct smb_writer *w;
	struct pbw *p;
	uint32_t word;

	shm_setup(&m, 64 * KIB, 4 * KIB);
	r = reader_for(&m, MIB);
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 16, .target_buffer = TARGET_BUFFER }),
			 -EINVAL);
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 0, .chunk = 14 }), -EINVAL);
	/* not partitioned: no chunk 0 either */
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 0, .chunk = 0 }), -EINVAL);

	/* a chunk still being written */
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	p = smb_writer_begin_packet(w);
	pbw_varint(p, 8, 1);
	ck_assert_int_eq(smb_writer_end_packet(w), 0);
	ck_assert_uint_eq(page_word(&m, 0), 0x10000001u);
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 0, .target_buffer = TARGET_BUFFER }),
			 -EAGAIN);
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 0, .chunk = 1, .target_buffer = TARGET_BUFFER }),
			 -EINVAL);
	ck_assert_uint_eq(page_word(&m, 0), 0x10000001u);
	w = smb_writer_free(w); /* flushes: now Complete */
	ck_assert_uint_eq(page_word(&m, 0), 0x10000003u);
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 0, .target_buffer = TARGET_BUFFER }),
			 0);
	ck_assert_uint_eq(page_word(&m, 0), 0);
	/* the service cleared the header before freeing */
	ck_assert_uint_eq(m.svc[8 + 4], 0);
	ck_assert_uint_eq(m.svc[8 + 6], 0);

	/* a Complete chunk whose header names writer 0: freed, but rejected */
	word = 0x10000003u;
	memcpy(m.svc + 4 * KIB, &word, 4);
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 1, .target_buffer = TARGET_BUFFER }),
			 -EBADMSG);
	ck_assert_uint_eq(page_word(&m, 1), 0);

	/* a target buffer this producer may not write to */
	{
		struct built c;

		chunk_begin(&c, 0, 5, 1, 0);
		chunk_pkt(&c, 3);
		memcpy(m.svc + 3 * 4 * KIB + 8, c.b, c.len);
		memcpy(m.svc + 3 * 4 * KIB, &word, 4);
	}
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 3, .target_buffer = 99 }), -EBADMSG);
	ck_assert_uint_eq(page_word(&m, 3), 0);

	/* a Div4 page: chunk 3 exists, chunk 4 does not; chunk geometry from the layout */
	word = 0x30000000u | (3u << 6);
	memcpy(m.svc + 2 * 4 * KIB, &word, 4);
	{
		struct built c;

		chunk_begin(&c, 0, 77, 1, 0);
		chunk_pkt(&c, 9);
		/* Div4 chunk size for 4 KiB pages: (4096 - 8) / 4 = 1020 */
		memcpy(m.svc + 2 * 4 * KIB + 8 + 3 * 1020, c.b, c.len);
	}
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 2, .chunk = 4, .target_buffer = TARGET_BUFFER }),
			 -EINVAL);
	ck_assert_int_eq(smb_reader_move(r, &(struct smb_chunk_move){ .page = 2, .chunk = 3, .target_buffer = TARGET_BUFFER }),
			 0);
	ck_assert_uint_eq(page_word(&m, 2), 0); /* last chunk freed: page reset */
	{
		struct rec rc = {};

		ck_assert_int_eq(smb_reader_read_packets(r, true, rec_cb, &rc), 2);
		ck_assert_uint_eq(rc.idx[0], 1);
		ck_assert_uint_eq(rc.writer[1], 77);
		ck_assert_uint_eq(rc.idx[1], 9);
	}

	smb_reader_get_stats(r, &rs);
	ck_assert_uint_eq(rs.chunks_read, 2);
	ck_assert_uint_eq(rs.chunks_discarded, 8);
	r = smb_reader_free(r);
	shm_teardown(&m);
}
END_TEST

START_TEST(test_reject_bad_chunks)
{
	struct smb_reader *r = bytes_reader(MIB);
	struct smb_reader_stats rs;
	struct built c;
	struct rec rc = {};

	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, 7), -EBADMSG);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, 65537), -EBADMSG);
	chunk_begin(&c, 0, 40000, 1, 0);
	chunk_pkt(&c, 1);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), -EBADMSG);

	/* writer 1, chunk 0: a good packet, then a fragment longer than the chunk */
	chunk_begin(&c, 0, 1, 3, 0);
	chunk_pkt(&c, 1);
	chunk_raw(&c, "\x7f\x40\x02", 3);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	/* chunk 1: a size prefix longer than 4 bytes */
	chunk_begin(&c, 1, 1, 1, 0);
	chunk_raw(&c, "\x80\x80\x80\x80\x01\x40\x02", 7);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	/* chunk 2: more fragments than bytes */
	chunk_begin(&c, 2, 1, 3, 0);
	chunk_pkt(&c, 3);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	/* chunk 3: fine, after all that loss */
	chunk_begin(&c, 3, 1, 1, 0);
	chunk_pkt(&c, 4);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	/* a duplicate and a stale chunk */
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), -EBADMSG);

	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 3);
	ck_assert_uint_eq(rc.idx[0], 1);
	ck_assert_uint_eq(rc.flag[0], SMB_DATA_LOSS_PRESENT); /* first of the sequence */
	ck_assert_uint_eq(rc.idx[1], 3);
	ck_assert_uint_eq(rc.flag[1], SMB_DATA_LOSS_PRESENT);
	ck_assert_uint_eq(rc.idx[2], 4);
	ck_assert_uint_eq(rc.flag[2], SMB_DATA_LOSS_PRESENT);
	chunk_begin(&c, 2, 1, 1, 0);
	chunk_pkt(&c, 3);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), -EBADMSG);

	smb_reader_get_stats(r, &rs);
	ck_assert_uint_eq(rs.abi_violations, 3 + 3 + 2);
	ck_assert_uint_eq(rs.chunks_read, 4);
	ck_assert_uint_eq(rs.packets_delivered, 3);
	r = smb_reader_free(r);
}
END_TEST

START_TEST(test_reject_reserved_fields)
{
	static const uint32_t reserved[] = { 3, 10, 33, 35, 36, 50, 69, 79, 98, 124, 125, 133 };
	struct smb_reader *r = bytes_reader(MIB);
	struct smb_reader_stats rs;
	struct built c;
	struct rec rc = {};
	uint8_t pk[64];

	chunk_begin(&c, 0, 1, ARRAY_SIZE(reserved) + 7, 0);
	chunk_pkt(&c, 1);
	for (size_t i = 0; i < ARRAY_SIZE(reserved); i++) {
		struct pbw w;

		/* a valid field first, then the reserved one (as varint) */
		pbw_init(&w, pk, sizeof(pk), NULL, NULL);
		pbw_varint(&w, 8, 2);
		pbw_varint(&w, reserved[i], 1);
		ck_assert(!pbw_overflowed(&w));
		chunk_frag(&c, pk, (size_t)pbw_position(&w));
	}
	chunk_frag(&c, "\x40\x02\x0b\x0c", 4);     /* a group start (wire type 3) */
	chunk_frag(&c, "\x40\x02\x0e\x00", 4);     /* wire type 6 */
	chunk_frag(&c, "\x40\x02\x0a\x05\x01", 5); /* length past the end */
	chunk_frag(&c, "\x40\x02\x09\x01\x02", 5); /* truncated fixed64 */
	chunk_frag(&c, "\x40\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12); /* 11-byte varint */
	chunk_frag(&c, "\x40\x05\x22\x00\xf8\x08\x01", 7); /* field 4 (empty) and 143: fine */
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	ck_assert_int_eq(smb_reader_read_packets(r, true, rec_cb, &rc), 2);
	ck_assert_uint_eq(rc.idx[0], 1);
	ck_assert_uint_eq(rc.idx[1], 5);
	/* an invalid packet is not a loss of the sequence */
	ck_assert_uint_eq(rc.flag[1], 0);
	smb_reader_get_stats(r, &rs);
	ck_assert_uint_eq(rs.packets_invalid, ARRAY_SIZE(reserved) + 5);
	ck_assert_uint_eq(rs.abi_violations, 0);
	r = smb_reader_free(r);
}
END_TEST

START_TEST(test_reader_sequences)
{
	struct smb_reader *r = bytes_reader(MIB);
	struct smb_reader_stats rs;
	struct built c;
	struct rec rc = {};

	smb_reader_set_first_sequence_id(r, 10);
	/* writer 5: chunks 0 and 2 (gap), writer 3: chunk 7 */
	chunk_begin(&c, 0, 5, 2, 0);
	chunk_pkt(&c, 1);
	chunk_pkt(&c, 2);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	chunk_begin(&c, 2, 5, 1, 0);
	chunk_pkt(&c, 4);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	chunk_begin(&c, 7, 3, 1, 0);
	chunk_pkt(&c, 50);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);

	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 3);
	ck_assert_uint_eq(rc.idx[0], 1);
	ck_assert_uint_eq(rc.seq[0], 10);
	ck_assert_uint_eq(rc.idx[1], 2);
	ck_assert_uint_eq(rc.flag[1], 0);
	ck_assert_uint_eq(rc.idx[2], 50);
	ck_assert_uint_eq(rc.seq[2], 11);
	ck_assert_uint_eq(rc.flag[2], SMB_DATA_LOSS_PRESENT);

	/* the hole fills late: order is kept, no loss */
	chunk_begin(&c, 1, 5, 1, 0);
	chunk_pkt(&c, 3);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	/* a packet continued into chunk 4, which never comes */
	chunk_begin(&c, 3, 5, 2, 2);
	chunk_pkt(&c, 5);
	chunk_frag(&c, "\x40\x06\x0a", 3);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	/* chunk 5 starts with the tail of a packet whose start is gone */
	chunk_begin(&c, 5, 5, 2, 1);
	chunk_frag(&c, "\x01\x00", 2);
	chunk_pkt(&c, 7);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	/* writer 5 again, other buffer: same trusted sequence id */
	ck_assert_int_eq(smb_reader_allow_buffer(r, 8), 0);
	chunk_begin(&c, 0, 5, 1, 0);
	chunk_pkt(&c, 60);
	ck_assert_int_eq(smb_reader_move_bytes(r, 8, c.b, c.len), 0);

	rc = (struct rec){};
	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 4);
	ck_assert_uint_eq(rc.idx[0], 3);
	ck_assert_uint_eq(rc.flag[0], 0);
	ck_assert_uint_eq(rc.idx[1], 4);
	ck_assert_uint_eq(rc.idx[2], 5);
	ck_assert_uint_eq(rc.flag[2], 0);
	ck_assert_uint_eq(rc.idx[3], 60);
	ck_assert_uint_eq(rc.seq[3], 10);
	/* at the end the gap is given up on; the orphan tail is skipped */
	rc = (struct rec){};
	ck_assert_int_eq(smb_reader_read_packets(r, true, rec_cb, &rc), 1);
	ck_assert_uint_eq(rc.idx[0], 7);
	ck_assert_uint_eq(rc.flag[0], SMB_DATA_LOSS_PRESENT);
	smb_reader_get_stats(r, &rs);
	ck_assert_uint_eq(rs.packets_lost, 1);
	r = smb_reader_free(r);
}
END_TEST

START_TEST(test_reader_reassembly_and_drops)
{
	struct smb_reader *r = bytes_reader(MIB);
	struct smb_reader_stats rs;
	struct built c;
	struct rec rc = {};

	/* packet 1 split over three chunks: "40 01" + "0a 02 aa" + "bb" */
	chunk_begin(&c, 0, 1, 2, 2);
	chunk_pkt(&c, 0);
	chunk_frag(&c, "\x40\x01\x0a", 3);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	chunk_begin(&c, 1, 1, 1, 3);
	chunk_raw(&c, "\x82\x80\x80\x00\x02\xaa", 6); /* a redundant 4-byte prefix */
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 1);
	chunk_begin(&c, 2, 1, 3, 1);
	chunk_frag(&c, "\xbb", 1);
	chunk_frag(&c, "", 0); /* empty fragments are skipped */
	chunk_raw(&c, "\xff\xff\xff\x7f", 4); /* a packet the writer gave up on */
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	chunk_begin(&c, 3, 1, 1, 0);
	chunk_pkt(&c, 9);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 2);
	ck_assert_uint_eq(rc.n, 3);
	ck_assert_uint_eq(rc.idx[1], 1);
	ck_assert_uint_eq(rc.flag[1], 0);
	ck_assert_uint_eq(rc.idx[2], 9);
	ck_assert_uint_eq(rc.flag[2], SMB_DATA_LOSS_PRESENT);
	smb_reader_get_stats(r, &rs);
	ck_assert_uint_eq(rs.producer_dropped, 1);
	ck_assert_uint_eq(rs.abi_violations, 0);
	r = smb_reader_free(r);
}
END_TEST

START_TEST(test_reader_patches)
{
	struct smb_reader *r = bytes_reader(MIB);
	struct smb_reader_stats rs;
	struct built c;
	struct rec rc = {};
	/* "40 01 | 12 <len:4> 08 01" with the length still unwritten, continued */
	const uint8_t body[] = { 0x40, 0x01, 0x12, 0x00, 0x00, 0x00, 0x00, 0x08, 0x01 };
	struct smb_patch p = { .target_buffer = TARGET_BUFFER, .writer_id = 1, .chunk_id = 0,
			       .offset = 4, .data = { 0x83, 0x80, 0x80, 0x00 } };

	chunk_begin(&c, 0, 1, 1, 2 | 4);
	chunk_frag(&c, body, sizeof(body));
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	chunk_begin(&c, 1, 1, 2, 1);
	chunk_frag(&c, "\x01", 1);
	chunk_pkt(&c, 2);
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);

	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 0);
	ck_assert_int_eq(smb_reader_patch(r, &(struct smb_patch){ .writer_id = 0 }), -EINVAL);
	ck_assert_int_eq(smb_reader_patch(r, &(struct smb_patch){ .target_buffer = TARGET_BUFFER, .writer_id = 1, .chunk_id = 9 }),
			 -ENOENT);
	ck_assert_int_eq(smb_reader_patch(r, &(struct smb_patch){ .target_buffer = TARGET_BUFFER, .writer_id = 1, .offset = 4093 }),
			 -EINVAL);
	p.has_more = true;
	ck_assert_int_eq(smb_reader_patch(r, &p), 0);
	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 0);
	p.has_more = false;
	ck_assert_int_eq(smb_reader_patch(r, &p), 0);
	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 2);
	ck_assert_uint_eq(rc.idx[0], 1);
	ck_assert_uint_eq(rc.idx[1], 2);
	/* too late once read */
	ck_assert_int_eq(smb_reader_patch(r, &p), -ENOENT);
	smb_reader_get_stats(r, &rs);
	ck_assert_uint_eq(rs.patches_applied, 2);
	ck_assert_uint_eq(rs.patches_failed, 4);
	r = smb_reader_free(r);
}
END_TEST

START_TEST(test_reader_memory_bound)
{
	/* room for about three 1 KiB chunks */
	struct smb_reader *r = bytes_reader(3 * 1200);
	struct smb_reader_stats rs;
	struct built c;
	struct rec rc = {};

	for (uint32_t id = 1; id < 8; id++) {
		chunk_begin(&c, id, 1, 1, 0);
		chunk_pkt(&c, (uint8_t)id);
		c.len = 1024;
		ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, c.b, c.len), 0);
	}
	smb_reader_get_stats(r, &rs);
	ck_assert_uint_eq(rs.chunks_evicted, 4);
	/* chunks 1..4 are gone for good: no waiting for them */
	ck_assert_int_eq(smb_reader_read_packets(r, false, rec_cb, &rc), 3);
	ck_assert_uint_eq(rc.idx[0], 5);
	ck_assert_uint_eq(rc.flag[0], SMB_DATA_LOSS_PRESENT);
	ck_assert_uint_eq(rc.idx[2], 7);
	ck_assert_uint_eq(rc.flag[2], 0);
	/* a chunk bigger than the whole budget */
	ck_assert_int_eq(smb_reader_move_bytes(r, TARGET_BUFFER, (uint8_t[4096]){ 8, 0, 0, 0, 1 }, 4096),
			 -ENOBUFS);
	r = smb_reader_free(r);
}
END_TEST

static Suite *smb_abi_suite(void)
{
	Suite *s = suite_create("smb_abi");
	TCase *tc;

	tc = tcase_create("writer");
	tcase_add_test(tc, test_chunk_header_bytes);
	tcase_add_test(tc, test_fragment_count_limit);
	tcase_add_test(tc, test_patch_slots_bounded);
	tcase_add_test(tc, test_patch_has_more);
	tcase_add_test(tc, test_writer_free_mid_packet);
	tcase_add_test(tc, test_small_nested_across_chunks);
	tcase_add_test(tc, test_emulation_path);
	suite_add_tcase(s, tc);

	tc = tcase_create("reader");
	tcase_add_test(tc, test_reject_indices_and_states);
	tcase_add_test(tc, test_reject_bad_chunks);
	tcase_add_test(tc, test_reject_reserved_fields);
	tcase_add_test(tc, test_reader_sequences);
	tcase_add_test(tc, test_reader_reassembly_and_drops);
	tcase_add_test(tc, test_reader_patches);
	tcase_add_test(tc, test_reader_memory_bound);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(smb_abi_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
