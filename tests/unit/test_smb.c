/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SMB writer -> shared memory -> reader, end to end, with generated
 * packets: byte-identical packets in order (single-threaded and with the
 * reader in another thread), a service that stops draining, and a hostile
 * service scribbling over the page words.  Exact chunk bytes and the
 * reader's rejections are in test_smb_abi; the cost of the writer alone is
 * measured by bench/bench_smb.
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

/* ---- the packet generator ------------------------------------------------ */

enum profile {
	PROFILE_MIXED,    /* mostly small, some up to 1 MiB */
	PROFILE_MEDIUM,   /* 10 B .. 20 KiB */
};

/*
 * Deterministic TracePacket content for (@seed, @idx).  Every nested message
 * is longer than 127 bytes so its length is never compacted: the bytes do not
 * depend on where chunk boundaries fall, and a flat re-encoding can be
 * compared byte for byte.
 */
static void gen_packet(struct pbw *w, uint64_t seed, uint32_t idx, uint8_t *scratch,
		       enum profile prof)
{
	struct rng r = { (seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)idx + 7) * 0xD1B54A32D192ED03ull };
	uint64_t start = pbw_position(w), cls, total;

	(void)rng_next(&r);
	pbw_varint(w, 8, idx);
	cls = rng_next(&r) % 1000;
	if (prof == PROFILE_MIXED) {
		if (cls < 900)
			total = rng_next(&r) % 257;
		else if (cls < 997)
			total = 256 + rng_next(&r) % (16 * KIB);
		else
			total = 16 * KIB + rng_next(&r) % (MIB - 16 * KIB);
	} else {
		total = 10 + rng_next(&r) % (20 * KIB);
	}
	if (total < 300) {
		size_t n = total;

		rng_fill(&r, scratch, n);
		pbw_bytes(w, 1000, scratch, n);
		return;
	}
	while (pbw_position(w) - start < total) {
		size_t left = total - (size_t)(pbw_position(w) - start), n;

		switch (rng_next(&r) % 5) {
		case 0:
			n = 1 + rng_next(&r) % MIN(left, (size_t)8192);
			rng_fill(&r, scratch, n);
			pbw_bytes(w, 1000, scratch, n);
			break;
		case 1:
			pbw_begin_nested(w, 2000);
			for (uint64_t k = 1 + rng_next(&r) % 3; k > 0; k--) {
				n = 128 + rng_next(&r) % 4096;
				rng_fill(&r, scratch, n);
				pbw_bytes(w, 1, scratch, n);
			}
			pbw_begin_nested(w, 2001);
			n = 200 + rng_next(&r) % 3000;
			rng_fill(&r, scratch, n);
			pbw_bytes(w, 2, scratch, n);
			pbw_varint(w, 3, rng_next(&r));
			pbw_end_nested(w);
			pbw_end_nested(w);
			break;
		case 2:
			pbw_begin_nested(w, 2002);
			for (uint64_t k = 64 + rng_next(&r) % 512; k > 0; k--)
				pbw_append_varint(w, (1u << 14) + rng_next(&r) % (1ull << 40));
			pbw_end_nested(w);
			break;
		case 3:
			for (int k = 0; k < 50; k++)
				pbw_varint(w, 3000, rng_next(&r));
			break;
		default:
			/* one long two-level message: its lengths end up in patches */
			pbw_begin_nested(w, 2003);
			pbw_varint(w, 1, idx);
			pbw_begin_nested(w, 2004);
			n = 200 + rng_next(&r) % MIN(left + 1, (size_t)(64 * KIB));
			rng_fill(&r, scratch, n);
			pbw_bytes(w, 5, scratch, n);
			pbw_end_nested(w);
			pbw_fixed64(w, 2, rng_next(&r));
			pbw_end_nested(w);
			break;
		}
	}
}

/* ---- checking what the reader delivers ------------------------------------ */

struct checker {
	uint64_t seed;
	enum profile prof;
	uint32_t next_idx;
	uint32_t n_expected;
	uint8_t *flat;
	size_t flat_cap;
	uint8_t *scratch;
	uint64_t delivered;
	uint32_t sequence_id;
	bool failed;
	char why[256];
};

static void checker_init(struct checker *c, uint64_t seed, enum profile prof, uint32_t n)
{
	*c = (struct checker){ .seed = seed, .prof = prof, .n_expected = n };
	c->flat_cap = 2 * MIB;
	c->flat = malloc(c->flat_cap);
	c->scratch = malloc(MIB);
	ck_assert_ptr_nonnull(c->flat);
	ck_assert_ptr_nonnull(c->scratch);
}

static void checker_done(struct checker *c)
{
	free(c->flat);
	free(c->scratch);
}

#define CHECK_FAIL(c, ...)                                                   \
	do {                                                                 \
		if (!(c)->failed)                                            \
			snprintf((c)->why, sizeof((c)->why), __VA_ARGS__);   \
		(c)->failed = true;                                          \
		return -EBADMSG;                                             \
	} while (0)

/* In order, nothing lost, byte-identical to a flat re-encoding. */
static int check_in_order(const struct smb_packet *p, void *userdata)
{
	struct checker *c = userdata;
	struct prefix x = parse_prefix(p->data, p->len);
	struct pbw w;
	size_t n;

	if (c->failed)
		return -EBADMSG;
	if (!x.has_idx || x.idx != c->next_idx)
		CHECK_FAIL(c, "packet %u: got idx %llu (has %d)", c->next_idx,
			   (unsigned long long)x.idx, x.has_idx);
	if (x.has_first != (c->next_idx == 0) || x.has_dropped)
		CHECK_FAIL(c, "packet %u: unexpected prefix (first %d dropped %d)", c->next_idx,
			   x.has_first, x.has_dropped);
	if (p->previous_packet_dropped != (c->next_idx == 0 ? SMB_DATA_LOSS_PRESENT : 0))
		CHECK_FAIL(c, "packet %u: previous_packet_dropped %u", c->next_idx,
			   p->previous_packet_dropped);
	if (p->writer_id != 1 || p->target_buffer != TARGET_BUFFER || p->sequence_id != c->sequence_id)
		CHECK_FAIL(c, "packet %u: bad writer/buffer/sequence %u/%u/%u", c->next_idx,
			   p->writer_id, p->target_buffer, p->sequence_id);

	pbw_init(&w, c->flat, c->flat_cap, NULL, NULL);
	gen_packet(&w, c->seed, c->next_idx, c->scratch, c->prof);
	if (pbw_overflowed(&w))
		CHECK_FAIL(c, "flat buffer too small");
	n = (size_t)pbw_position(&w);
	if (p->len - x.len != n || memcmp(p->data + x.len, c->flat, n) != 0) {
		size_t at = 0;

		while (at < n && at < p->len - x.len && p->data[x.len + at] == c->flat[at])
			at++;
		CHECK_FAIL(c, "packet %u: content differs (len %zu vs %zu) at %zu: %02x%02x%02x%02x%02x vs %02x%02x%02x%02x%02x",
			   c->next_idx, p->len - x.len, n, at, p->data[x.len + at], p->data[x.len + at + 1],
			   p->data[x.len + at + 2], p->data[x.len + at + 3], p->data[x.len + at + 4],
			   c->flat[at], c->flat[at + 1], c->flat[at + 2], c->flat[at + 3], c->flat[at + 4]);
	}
	c->next_idx++;
	c->delivered++;
	return 0;
}

/* ---- (1) single-threaded round trip ------------------------------------ */

struct direct {
	struct shm *m;
	struct smb_reader *r;
	struct checker *c;
	bool final;
	uint64_t hooks;
};

static void direct_drain(struct direct *d)
{
	struct smb_commit cm;

	if (smb_take_commit(d->m->smb, &cm)) {
		for (size_t i = 0; i < cm.n_moves; i++)
			ck_assert_int_eq(smb_reader_move(d->r, &cm.moves[i]), 0);
		for (size_t i = 0; i < cm.n_patches; i++)
			ck_assert_int_eq(smb_reader_patch(d->r, &cm.patches[i]), 0);
	}
	ck_assert_msg(smb_reader_read_packets(d->r, d->final, check_in_order, d->c) >= 0, "%s",
		      d->c->why);
}

static void direct_hook(void *userdata)
{
	struct direct *d = userdata;

	d->hooks++;
	direct_drain(d);
}

static void roundtrip(size_t size, size_t page_size, uint32_t n, uint64_t seed)
{
	struct shm m;
	struct checker c;
	struct direct d;
	struct smb_writer *w;
	struct smb_writer_stats ws;
	struct smb_reader_stats rs;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	/* the hook runs the checker in the middle of a write: it needs its own scratch */
	_cleanup_free_ uint8_t *scratch = malloc(MIB);

	shm_setup(&m, size, page_size);
	checker_init(&c, seed, PROFILE_MIXED, n);
	c.sequence_id = 1;
	d = (struct direct){ .m = &m, .r = reader_for(&m, 64 * MIB), .c = &c };
	smb_set_commit_hook(m.smb, direct_hook, &d);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);

	for (uint32_t i = 0; i < n && !c.failed; i++) {
		struct pbw *p = smb_writer_begin_packet(w);

		gen_packet(p, seed, i, scratch, PROFILE_MIXED);
		ck_assert_int_eq(smb_writer_end_packet(w), 0);
		if (i % 1000 == 999)
			direct_drain(&d);
	}
	smb_writer_flush(w);
	d.final = true;
	direct_drain(&d);
	ck_assert_msg(!c.failed, "%s", c.why);
	ck_assert_uint_eq(c.delivered, n);

	smb_writer_get_stats(w, &ws);
	smb_reader_get_stats(d.r, &rs);
	ck_assert_uint_eq(ws.packets_written, n);
	ck_assert_uint_eq(ws.packets_dropped, 0);
	ck_assert_uint_gt(ws.patches, 0);
	ck_assert_uint_gt(d.hooks, 0);
	ck_assert_uint_eq(rs.chunks_read, ws.chunks_acquired);
	ck_assert_uint_eq(rs.packets_delivered, n);
	ck_assert_uint_eq(rs.patches_applied, ws.patches);
	ck_assert_uint_eq(rs.patches_failed + rs.abi_violations + rs.packets_lost +
				  rs.packets_invalid + rs.producer_dropped + rs.chunks_evicted +
				  rs.chunks_discarded,
			  0);
	/* every page went back to free once the service read it */
	for (size_t i = 0; i < size / page_size; i++)
		ck_assert_uint_eq(page_word(&m, i), 0);
	printf("roundtrip %zu KiB pages: %u packets, %llu bytes, %llu chunks, %llu patches, %.2f s\n",
	       page_size / KIB, n, (unsigned long long)ws.bytes_written,
	       (unsigned long long)ws.chunks_acquired, (unsigned long long)ws.patches,
	       (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9);

	w = smb_writer_free(w);
	d.r = smb_reader_free(d.r);
	checker_done(&c);
	shm_teardown(&m);
}

START_TEST(test_roundtrip_32k_pages)
{
	roundtrip(2 * MIB, 32 * KIB, 100000, 1);
}
END_TEST

START_TEST(test_roundtrip_4k_pages)
{
	roundtrip(2 * MIB, 4 * KIB, 100000, 2);
}
END_TEST

/* ---- (2) the reader in another thread ----------------------------------- */

struct commit_msg {
	struct commit_msg *next;
	struct smb_chunk_move *moves;
	size_t n_moves;
	struct smb_patch *patches;
	size_t n_patches;
	bool end;
};

struct queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct commit_msg *head, *tail;
	size_t inflight;          /* chunks named but not yet moved */
	uint64_t pushed, processed;
	struct shm *m;
	struct smb_reader *r;
	struct checker *c;
	int move_errors;
};

static void queue_push_msg(struct queue *q, struct commit_msg *msg)
{
	pthread_mutex_lock(&q->mu);
	if (q->tail)
		q->tail->next = msg;
	else
		q->head = msg;
	q->tail = msg;
	q->inflight += msg->n_moves;
	q->pushed++;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static void queue_push_commit(struct queue *q)
{
	struct smb_commit cm;
	struct commit_msg *msg;

	if (!smb_take_commit(q->m->smb, &cm))
		return;
	msg = calloc(1, sizeof(*msg));
	ck_assert_ptr_nonnull(msg);
	msg->moves = malloc((cm.n_moves + 1) * sizeof(*msg->moves));
	msg->patches = malloc((cm.n_patches + 1) * sizeof(*msg->patches));
	ck_assert_ptr_nonnull(msg->moves);
	ck_assert_ptr_nonnull(msg->patches);
	memcpy(msg->moves, cm.moves, cm.n_moves * sizeof(*msg->moves));
	memcpy(msg->patches, cm.patches, cm.n_patches * sizeof(*msg->patches));
	msg->n_moves = cm.n_moves;
	msg->n_patches = cm.n_patches;
	queue_push_msg(q, msg);
}

static void queue_wait(struct queue *q, size_t max_inflight, bool all)
{
	pthread_mutex_lock(&q->mu);
	while (q->inflight > max_inflight || (all && q->processed < q->pushed))
		pthread_cond_wait(&q->cv, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

static void *reader_thread(void *userdata)
{
	struct queue *q = userdata;

	for (;;) {
		struct commit_msg *msg;
		bool end;

		pthread_mutex_lock(&q->mu);
		while (!q->head)
			pthread_cond_wait(&q->cv, &q->mu);
		msg = q->head;
		q->head = msg->next;
		if (!q->head)
			q->tail = NULL;
		pthread_mutex_unlock(&q->mu);

		for (size_t i = 0; i < msg->n_moves; i++)
			if (smb_reader_move(q->r, &msg->moves[i]) < 0)
				q->move_errors++;
		for (size_t i = 0; i < msg->n_patches; i++)
			if (smb_reader_patch(q->r, &msg->patches[i]) < 0)
				q->move_errors++;
		end = msg->end;
		(void)smb_reader_read_packets(q->r, end, check_in_order, q->c);

		pthread_mutex_lock(&q->mu);
		q->inflight -= msg->n_moves;
		q->processed++;
		pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->mu);
		free(msg->moves);
		free(msg->patches);
		free(msg);
		if (end)
			return NULL;
	}
}

/* Inside a chunk switch: hand the batch over and wait until it is read. */
static void threaded_hook(void *userdata)
{
	struct queue *q = userdata;

	queue_push_commit(q);
	queue_wait(q, 0, true);
}

static void roundtrip_threaded(size_t page_size, uint32_t n, uint64_t seed)
{
	struct shm m;
	struct checker c;
	struct queue q = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	struct smb_writer *w;
	struct smb_writer_stats ws;
	struct smb_reader_stats rs;
	struct commit_msg *end;
	pthread_t t;
	size_t quarter;
	/* the writer must not share the checker's scratch with the reader thread */
	_cleanup_free_ uint8_t *scratch = malloc(MIB);

	shm_setup(&m, 2 * MIB, page_size);
	quarter = smb_num_chunks(m.smb) / 4;
	checker_init(&c, seed, PROFILE_MIXED, n);
	c.sequence_id = 1;
	q.m = &m;
	q.r = reader_for(&m, 64 * MIB);
	q.c = &c;
	smb_set_commit_hook(m.smb, threaded_hook, &q);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, reader_thread, &q), 0);

	for (uint32_t i = 0; i < n; i++) {
		struct pbw *p = smb_writer_begin_packet(w);

		gen_packet(p, seed, i, scratch, PROFILE_MIXED);
		ck_assert_int_eq(smb_writer_end_packet(w), 0);
		/*
		 * Back-pressure lives in the test, not in the writer: keep what
		 * the reader has not moved yet under a quarter of the buffer, so
		 * with the hook at half the writer never runs out.
		 */
		if (smb_pending_moves(m.smb) > 0) {
			queue_push_commit(&q);
			queue_wait(&q, quarter, false);
		}
	}
	smb_writer_flush(w);
	queue_push_commit(&q);
	end = calloc(1, sizeof(*end));
	ck_assert_ptr_nonnull(end);
	end->end = true;
	queue_push_msg(&q, end);
	ck_assert_int_eq(pthread_join(t, NULL), 0);

	ck_assert_msg(!c.failed, "%s", c.why);
	ck_assert_int_eq(q.move_errors, 0);
	ck_assert_uint_eq(c.delivered, n);
	smb_writer_get_stats(w, &ws);
	smb_reader_get_stats(q.r, &rs);
	ck_assert_uint_eq(ws.packets_dropped, 0);
	ck_assert_uint_gt(ws.patches, 0);
	ck_assert_uint_eq(rs.patches_applied, ws.patches);
	ck_assert_uint_eq(rs.chunks_read, ws.chunks_acquired);
	ck_assert_uint_eq(rs.abi_violations + rs.packets_lost + rs.packets_invalid, 0);

	w = smb_writer_free(w);
	q.r = smb_reader_free(q.r);
	checker_done(&c);
	shm_teardown(&m);
}

START_TEST(test_roundtrip_threaded)
{
	roundtrip_threaded(32 * KIB, 100000, 3);
}
END_TEST

START_TEST(test_roundtrip_threaded_4k)
{
	roundtrip_threaded(4 * KIB, 30000, 4);
}
END_TEST

/* ---- (3) a service that stops draining ------------------------------------ */

static void drain_all(struct shm *m, struct smb_reader *r, struct lossy_check *l, bool final)
{
	struct smb_commit cm;

	if (smb_take_commit(m->smb, &cm)) {
		for (size_t i = 0; i < cm.n_moves; i++)
			ck_assert_int_eq(smb_reader_move(r, &cm.moves[i]), 0);
		for (size_t i = 0; i < cm.n_patches; i++)
			(void)smb_reader_patch(r, &cm.patches[i]);
	}
	ck_assert_int_ge(smb_reader_read_packets(r, final, collect, l), 0);
}

START_TEST(test_reader_stops_draining)
{
	const uint32_t n = 6000;
	struct shm m;
	struct smb_reader *r;
	struct smb_writer *w;
	struct smb_writer_stats ws;
	struct smb_reader_stats rs;
	struct lossy_check l = {};
	_cleanup_free_ bool *dropped = calloc(n, sizeof(bool));
	_cleanup_free_ uint8_t *scratch = malloc(MIB);
	uint32_t n_dropped = 0, stalls = 0;
	uint64_t t0;

	l.got = calloc(n, sizeof(*l.got));
	l.has_dropped_field = calloc(n, sizeof(bool));
	l.reader_flag = calloc(n, sizeof(uint32_t));
	l.dropped_value = calloc(n, sizeof(uint32_t));
	ck_assert(dropped && scratch && l.got && l.has_dropped_field && l.reader_flag && l.dropped_value);

	shm_setup(&m, 256 * KIB, 4 * KIB);
	r = reader_for(&m, 64 * MIB);
	ck_assert_int_eq(smb_writer_new(m.smb, 1, TARGET_BUFFER, &w), 0);

	/*
	 * Phases of 500 packets: the service drains after every packet in even
	 * phases and not at all in odd ones, so the buffer fills up and stays full.
	 */
	t0 = now_ns(CLOCK_MONOTONIC);
	for (uint32_t i = 0; i < n; i++) {
		bool draining = (i / 500) % 2 == 0;
		struct pbw *p = smb_writer_begin_packet(w);
		int k;

		gen_packet(p, 11, i, scratch, PROFILE_MEDIUM);
		k = smb_writer_end_packet(w);
		ck_assert(k == 0 || k == -ENOSPC);
		if (k < 0) {
			dropped[i] = true;
			n_dropped++;
			if (i == 0 || !dropped[i - 1])
				stalls++;
		}
		if (draining)
			drain_all(&m, r, &l, false);
	}
	/* never blocked: 6000 packets with the buffer full half the time */
	ck_assert_uint_lt(now_ns(CLOCK_MONOTONIC) - t0, 20ull * 1000 * 1000 * 1000);
	smb_writer_flush(w);
	drain_all(&m, r, &l, true);

	smb_writer_get_stats(w, &ws);
	smb_reader_get_stats(r, &rs);
	ck_assert(!l.bad);
	ck_assert_uint_ge(stalls, 3);
	ck_assert_uint_eq(ws.packets_dropped, n_dropped);
	ck_assert_uint_eq(ws.packets_written, n - n_dropped);
	/* every written packet arrives, in order, and nothing else */
	ck_assert_uint_eq(l.n_got, n - n_dropped);
	/* the in-flight fragment of a packet was abandoned at least once */
	ck_assert_uint_gt(rs.producer_dropped, 0);
	ck_assert_uint_eq(rs.abi_violations + rs.packets_invalid, 0);

	for (size_t j = 0, i = 0; j < l.n_got; j++, i++) {
		bool gap = false;

		while (i < n && dropped[i]) {
			gap = true;
			i++;
		}
		ck_assert_uint_lt(i, n);
		ck_assert_uint_eq(l.got[j], i);
		/* the writer marks exactly the first packet after lost ones ... */
		ck_assert_msg(l.has_dropped_field[j] == gap, "packet %u: field 42 %d, gap %d",
			      l.got[j], l.has_dropped_field[j], gap);
		if (gap)
			ck_assert_uint_eq(l.dropped_value[j], SMB_DATA_LOSS_PRESENT | SMB_DATA_LOSS_SMB_FULL);
		/* ... and the reader only flags the sequence start and real losses */
		if (l.reader_flag[j])
			ck_assert(j == 0 || gap);
		else
			ck_assert(j != 0);
	}

	w = smb_writer_free(w);
	r = smb_reader_free(r);
	free(l.got);
	free(l.has_dropped_field);
	free(l.reader_flag);
	free(l.dropped_value);
	shm_teardown(&m);
}
END_TEST

/* ---- (4) a hostile service ---------------------------------------------- */

struct guarded {
	uint8_t *map;
	size_t map_len;
	uint8_t *base;
	size_t size;
};

/* The SMB between two PROT_NONE pages: any write out of bounds faults. */
static void guarded_setup(struct guarded *g, size_t size)
{
	g->map_len = size + 2 * 4096;
	g->map = mmap(NULL, g->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(g->map, MAP_FAILED);
	g->base = g->map + 4096;
	g->size = size;
	ck_assert_int_eq(mprotect(g->base, size, PROT_READ | PROT_WRITE), 0);
}

START_TEST(test_hostile_page_words)
{
	static const uint32_t words[] = {
		0xFFFFFFFFu,          /* everything set */
		0x50000000u,          /* Div14, all chunks free: not a layout we use */
		0x10000002u,          /* Div1, chunk being read */
		0x10000001u,          /* Div1, chunk being written (by "someone") */
		0x60000000u,          /* reserved layout */
		0x1FFFFFFCu,          /* Div1 with junk in the other chunk bits, chunk 0 free */
	};
	const size_t size = 64 * KIB, page = 4 * KIB;
	struct guarded g;
	struct smb *smb;
	struct smb_writer *w;
	struct smb_writer_stats ws;
	_cleanup_free_ uint8_t *scratch = malloc(MIB);
	uint64_t t0;

	guarded_setup(&g, size);
	for (size_t i = 0; i < size / page; i++)
		memcpy(g.base + i * page, &words[i % (ARRAY_SIZE(words) - 1)], 4);
	ck_assert_int_eq(smb_new(g.base, size, page, &smb), 0);
	ck_assert_int_eq(smb_writer_new(smb, 3, TARGET_BUFFER, &w), 0);

	t0 = now_ns(CLOCK_MONOTONIC);
	for (uint32_t i = 0; i < 2000; i++) {
		struct pbw *p = smb_writer_begin_packet(w);

		gen_packet(p, 5, i, scratch, PROFILE_MEDIUM);
		ck_assert_int_eq(smb_writer_end_packet(w), -ENOSPC);
	}
	smb_writer_get_stats(w, &ws);
	ck_assert_uint_eq(ws.packets_dropped, 2000);
	ck_assert_uint_eq(ws.chunks_acquired, 0);
	/* nothing was taken over: the words are as the "service" left them */
	for (size_t i = 0; i < size / page; i++) {
		uint32_t v;

		memcpy(&v, g.base + i * page, 4);
		ck_assert_uint_eq(v, words[i % (ARRAY_SIZE(words) - 1)]);
	}

	/* a page with junk around a free Div1 chunk is usable: chunk 0 bits are what count */
	memcpy(g.base, &words[5], 4);
	(void)smb_writer_begin_packet(w);
	ck_assert_int_eq(smb_writer_end_packet(w), 0);
	smb_writer_get_stats(w, &ws);
	ck_assert_uint_eq(ws.chunks_acquired, 1);
	ck_assert_uint_lt(now_ns(CLOCK_MONOTONIC) - t0, 10ull * 1000 * 1000 * 1000);

	w = smb_writer_free(w);
	smb = smb_free(smb);
	ck_assert_int_eq(munmap(g.map, g.map_len), 0);
}
END_TEST

struct chaos {
	struct guarded *g;
	size_t page_size;
	_Atomic bool stop;
	uint64_t writes;
};

/* Flip page words and chunk headers at random, as fast as possible. */
static void *chaos_thread(void *userdata)
{
	struct chaos *c = userdata;
	struct rng r = { 0x1234567 };
	size_t pages = c->g->size / c->page_size;

	while (!atomic_load(&c->stop)) {
		uint64_t v = rng_next(&r);
		uint8_t *page = c->g->base + (v % pages) * c->page_size;
		uint32_t word;

		switch ((v >> 20) % 4) {
		case 0:
			word = (uint32_t)(v >> 32);
			break;
		case 1:
			word = 0; /* "free" a page under the writer */
			break;
		case 2:
			word = 0x10000000u | (uint32_t)((v >> 32) & 3);
			break;
		default:
			/* scribble over the chunk header the writer may be using */
			memcpy(page + 8 + (v >> 40) % 8, &v, 1);
			continue;
		}
		__atomic_store_n((uint32_t *)page, word, __ATOMIC_RELEASE);
		c->writes++;
	}
	return NULL;
}

START_TEST(test_hostile_concurrent)
{
	const size_t size = 256 * KIB, page = 4 * KIB;
	struct guarded g;
	struct chaos ch = { .g = &g, .page_size = page };
	struct smb *smb;
	struct smb_writer *w[2];
	struct smb_writer_stats ws;
	struct smb_commit cm;
	_cleanup_free_ uint8_t *scratch = malloc(MIB);
	pthread_t t;
	uint64_t t0, total = 0;

	guarded_setup(&g, size);
	ck_assert_int_eq(smb_new(g.base, size, page, &smb), 0);
	ck_assert_int_eq(smb_writer_new(smb, 1, TARGET_BUFFER, &w[0]), 0);
	ck_assert_int_eq(smb_writer_new(smb, 2, TARGET_BUFFER, &w[1]), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, chaos_thread, &ch), 0);

	t0 = now_ns(CLOCK_MONOTONIC);
	for (uint32_t i = 0; i < 20000; i++) {
		struct smb_writer *cur = w[i % 2];
		struct pbw *p = smb_writer_begin_packet(cur);
		int k;

		gen_packet(p, 9, i, scratch, PROFILE_MEDIUM);
		k = smb_writer_end_packet(cur);
		ck_assert(k == 0 || k == -ENOSPC);
		if (i % 16 == 0)
			(void)smb_take_commit(smb, &cm);
	}
	atomic_store(&ch.stop, true);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_lt(now_ns(CLOCK_MONOTONIC) - t0, 30ull * 1000 * 1000 * 1000);
	ck_assert_uint_gt(ch.writes, 0);

	for (int k = 0; k < 2; k++) {
		smb_writer_get_stats(w[k], &ws);
		total += ws.packets_written + ws.packets_dropped;
	}
	ck_assert_uint_eq(total, 20000);
	/* the moves named are real chunk positions */
	(void)smb_take_commit(smb, &cm);
	for (size_t i = 0; i < cm.n_moves; i++) {
		ck_assert_uint_lt(cm.moves[i].page, size / page);
		ck_assert_uint_eq(cm.moves[i].chunk, 0);
	}
	w[0] = smb_writer_free(w[0]);
	w[1] = smb_writer_free(w[1]);
	smb = smb_free(smb);
	ck_assert_int_eq(munmap(g.map, g.map_len), 0);
}
END_TEST

static Suite *smb_suite(void)
{
	Suite *s = suite_create("smb");
	TCase *tc;

	tc = tcase_create("roundtrip");
	tcase_add_test(tc, test_roundtrip_32k_pages);
	tcase_add_test(tc, test_roundtrip_4k_pages);
	tcase_add_test(tc, test_roundtrip_threaded);
	tcase_add_test(tc, test_roundtrip_threaded_4k);
	suite_add_tcase(s, tc);

	tc = tcase_create("loss");
	tcase_add_test(tc, test_reader_stops_draining);
	tcase_add_test(tc, test_hostile_page_words);
	tcase_add_test(tc, test_hostile_concurrent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(smb_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
