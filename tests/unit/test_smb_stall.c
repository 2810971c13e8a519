/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stall-then-drop: with a full buffer, a writer allowed to wait gives the
 * service a moment to free chunks and loses nothing; one that may not wait
 * drops; and once a wait found nothing, the next packets drop at once
 * instead of waiting again.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smb/smb.h"
#include "util/util.h"

#define PAGE 4096u
#define PAGES 4u

struct svc {
	void *base;
	struct smb *smb;
	struct smb_reader *reader;
	pthread_mutex_t lock;
	pthread_cond_t changed;         /* moves queued, or stop or hold changed */
	struct smb_chunk_move moves[64];
	size_t n_moves;
	bool stop;                      /* copy what is queued, then end */
	bool hold;                      /* copy nothing until stop */
	uint64_t packets;
};

/* the commit hook: what a producer sends in CommitData */
static void hook(void *userdata)
{
	struct svc *s = userdata;
	struct smb_commit c;

	pthread_mutex_lock(&s->lock);
	if (smb_take_commit(s->smb, &c))
		for (size_t i = 0; i < c.n_moves && s->n_moves < ARRAY_SIZE(s->moves); i++)
			s->moves[s->n_moves++] = c.moves[i];
	pthread_cond_signal(&s->changed);
	pthread_mutex_unlock(&s->lock);
}

static int count_packet(const struct smb_packet *p, void *userdata)
{
	((struct svc *)userdata)->packets++;
	return 0;
}

/*
 * The service: copies committed chunks out in another thread, woken by each
 * commit, so it always lags the writer a little (a thread wakeup), as a
 * real service does.  On stop it copies what is still queued, then ends.
 */
static void *service(void *arg)
{
	struct svc *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct smb_chunk_move m[64];
		size_t n;

		while (!s->stop && (s->hold || s->n_moves == 0))
			pthread_cond_wait(&s->changed, &s->lock);
		if (s->n_moves == 0)
			break; /* stopped, nothing left */
		n = s->n_moves;
		memcpy(m, s->moves, n * sizeof(m[0]));
		s->n_moves = 0;
		pthread_mutex_unlock(&s->lock);
		for (size_t i = 0; i < n; i++)
			(void)smb_reader_move(s->reader, &m[i]);
		(void)smb_reader_read_packets(s->reader, false, count_packet, s);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void setup(struct svc *s, uint32_t stall_us)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->changed, NULL);
	ck_assert_int_eq(posix_memalign(&s->base, 4096, PAGE * PAGES), 0);
	memset(s->base, 0, PAGE * PAGES);
	ck_assert_int_eq(smb_new(s->base, PAGE * PAGES, PAGE, &s->smb), 0);
	ck_assert_int_eq(smb_reader_new(s->base, PAGE * PAGES, PAGE, 1 << 20, &s->reader), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(s->reader, 1), 0);
	smb_set_commit_hook(s->smb, hook, s);
	smb_set_stall(s->smb, stall_us);
}

static void teardown(struct svc *s)
{
	s->smb = smb_free(s->smb);
	s->reader = smb_reader_free(s->reader);
	free(s->base);
	pthread_cond_destroy(&s->changed);
	pthread_mutex_destroy(&s->lock);
}

/* 40 packets of 3000 bytes through a 4-page buffer: it fills ten times over */
static uint64_t write_packets(struct svc *s, bool with_service)
{
	static uint8_t payload[3000];
	struct smb_writer *w = NULL;
	struct smb_writer_stats st;
	pthread_t th;

	if (with_service)
		ck_assert_int_eq(pthread_create(&th, NULL, service, s), 0);
	ck_assert_int_eq(smb_writer_new(s->smb, 1, 1, &w), 0);
	for (int i = 0; i < 40; i++) {
		struct pbw *p = smb_writer_begin_packet(w);

		pbw_bytes(p, 1, payload, sizeof(payload));
		(void)smb_writer_end_packet(w);
	}
	smb_writer_flush(w);
	smb_writer_get_stats(w, &st);
	w = smb_writer_free(w);
	if (with_service) {
		/* the last chunk too; the service copies everything, then ends */
		hook(s);
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		s->hold = false;
		pthread_cond_signal(&s->changed);
		pthread_mutex_unlock(&s->lock);
		pthread_join(th, NULL);
	}
	return st.packets_dropped;
}

START_TEST(test_stall_loses_nothing)
{
	struct svc s;
	struct smb_stats st;

	setup(&s, 200000);
	/*
	 * Commit only when the buffer is full, so that the writer always has to
	 * wait for the service: with the default (half the buffer) a service
	 * thread that keeps up frees chunks before the buffer ever fills, and
	 * whether the writer stalls was a race.
	 */
	smb_set_commit_threshold(s.smb, PAGES + 1);
	ck_assert_uint_eq(write_packets(&s, true), 0);
	smb_get_stats(s.smb, &st);
	ck_assert_uint_gt(st.stalls, 0);
	(void)smb_reader_read_packets(s.reader, true, count_packet, &s);
	ck_assert_uint_eq(s.packets, 40);
	teardown(&s);
}
END_TEST

START_TEST(test_no_stall_drops)
{
	struct svc s;
	uint64_t dropped;

	/* a service that copies nothing until the writer is done: the buffer is
	 * full while it writes, and a writer that may not wait drops */
	setup(&s, 0);
	s.hold = true;
	dropped = write_packets(&s, true);
	ck_assert_uint_gt(dropped, 0);
	(void)smb_reader_read_packets(s.reader, true, count_packet, &s);
	/* what fit in the buffer got through */
	ck_assert_uint_gt(s.packets, 0);
	ck_assert_uint_le(s.packets + dropped, 40);
	teardown(&s);
}
END_TEST

START_TEST(test_dead_service_waits_once)
{
	struct svc s;
	struct timespec a, b;
	double ms;

	/* nobody frees anything: one 50 ms wait, then drops without waiting */
	setup(&s, 50000);
	clock_gettime(CLOCK_MONOTONIC, &a);
	ck_assert_uint_gt(write_packets(&s, false), 30);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	ck_assert_msg(ms < 500, "writing took %.0f ms: the writer waited more than once", ms);
	teardown(&s);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("smb_stall");
	TCase *tc = tcase_create("stall");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_stall_loses_nothing);
	tcase_add_test(tc, test_no_stall_drops);
	tcase_add_test(tc, test_dead_service_waits_once);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
