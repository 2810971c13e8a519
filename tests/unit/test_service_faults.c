/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process service against a producer that misbehaves, over a real
 * AF_UNIX socket: calls before InitializeConnection, bad CommitData
 * entries, a producer that goes away, malformed chunks crafted by hand in
 * its SMB, a producer torn down mid-configuration, and random garbage to
 * every method.  None of it may take the service down or reach the trace.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "protos/perfetto/trace/trace_packet.pb-c.h"
#include "service/service.h"
#include "protos/pbw.h"
#include "smb/smb.h"
#include "tests/lib/svc_harness.h"
#include "util/util.h"

START_TEST(test_reject_before_initialize)
{
	struct fx fx;
	struct fp f;
	Perfetto__Protos__RegisterDataSourceRequest rq = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
	Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
	Perfetto__Protos__InitializeConnectionRequest ic = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
	Perfetto__Protos__SyncRequest sy = PERFETTO__PROTOS__SYNC_REQUEST__INIT;

	fx_init(&fx, NULL);
	fp_open(&f, &fx);
	d.name = (char *)DS_NAME;
	rq.data_source_descriptor = &d;
	fp_invoke(&f, M_REGISTER, &rq.base, on_generic_reply);
	fp_invoke(&f, M_SYNC, &sy.base, on_generic_reply);
	ck_assert(RUN_UNTIL(fx.e, f.rejected == 2, TIMEOUT_MS));
	ck_assert_int_eq(f.replies, 0);
	ck_assert(!svc_data_source_registered(fx.svc, DS_NAME));
	ck_assert_uint_eq(svc_producer_count(fx.svc), 0);

	/* Then a proper InitializeConnection, and a second one is refused. */
	ic.producer_name = (char *)"p";
	fp_invoke(&f, M_INIT, &ic.base, on_init_reply);
	ck_assert(RUN_UNTIL(fx.e, f.init_replied, TIMEOUT_MS));
	ck_assert_int_eq(f.init_error, 0);
	ck_assert_uint_eq(svc_producer_count(fx.svc), 1);
	f.init_replied = false;
	fp_invoke(&f, M_INIT, &ic.base, on_init_reply);
	ck_assert(RUN_UNTIL(fx.e, f.init_replied, TIMEOUT_MS));
	ck_assert_int_eq(f.init_error, -EREMOTEIO);
	ck_assert_uint_eq(svc_producer_count(fx.svc), 1);

	/* Undecodable arguments are rejected. */
	ck_assert_int_eq(ipc_client_invoke(f.c, f.sid, f.mid[M_REGISTER], "\xff\xff\xff", 3, -EBADF, on_generic_reply,
					   &f, NULL),
			 0);
	ck_assert(RUN_UNTIL(fx.e, f.rejected == 3, TIMEOUT_MS));

	/* Now registration works. */
	fp_invoke(&f, M_REGISTER, &rq.base, on_generic_reply);
	ck_assert(RUN_UNTIL(fx.e, f.replies == 1, TIMEOUT_MS));
	ck_assert(svc_data_source_registered(fx.svc, DS_NAME));
	fp_close(&f);
	ck_assert(RUN_UNTIL(fx.e, svc_producer_count(fx.svc) == 0, TIMEOUT_MS));
	ck_assert(!svc_data_source_registered(fx.svc, DS_NAME));
	fx_done(&fx);
}
END_TEST

/* Write one raw CommitData with a single chunk entry. */
static void fp_commit_raw(struct fp *f, uint32_t page, uint32_t chunk, uint32_t target)
{
	Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove mv = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove *mvp = &mv;

	mv.has_page = mv.has_chunk = mv.has_target_buffer = true;
	mv.page = page;
	mv.chunk = chunk;
	mv.target_buffer = target;
	req.n_chunks_to_move = 1;
	req.chunks_to_move = &mvp;
	fp_invoke(f, M_COMMIT, &req.base, on_generic_reply);
}

START_TEST(test_bad_commit_entries)
{
	struct fx fx;
	struct fp f;
	struct trace_file t;
	struct svc_session_stats st;
	static const size_t sizes[] = { 100, 100 };

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	/* A commit before any SMB exists is dropped and refused. */
	fp_commit(&f, 0);
	ck_assert(RUN_UNTIL(fx.e, f.rejected == 1, TIMEOUT_MS));
	fp_register(&f, false);
	fx_start(&fx, 0, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	ck_assert_str_eq(f.log, "TSs");

	fp_write(&f, 0, sizes[0]);
	/* Page 100 does not exist (16 pages); page 5 was never written (Free,
	 * not Complete); page 0 is still being written (not Complete). */
	fp_commit_raw(&f, 100, 0, f.target_buffer);
	fp_commit_raw(&f, 5, 0, f.target_buffer);
	fp_commit_raw(&f, 0, 0, f.target_buffer);
	fp_commit_raw(&f, 0, 14, f.target_buffer);
	ck_assert(RUN_UNTIL(fx.e, f.replies == 5, TIMEOUT_MS));
	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_eq(st.chunks_discarded, 4);
	ck_assert_uint_eq(st.packets, 0);

	/* The session carries on: proper commits still land. */
	fp_write(&f, 1, sizes[1]);
	smb_writer_flush(f.w);
	fp_commit(&f, 0);
	ck_assert(RUN_UNTIL(fx.e, f.replies == 6, TIMEOUT_MS));
	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_eq(st.packets, 2);
	ck_assert_uint_eq(st.chunks_discarded, 4);

	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(fx.done_error, 0);
	trace_load(&t, fx.out);
	check_head(&t);
	check_producer_packets(&t, sizes, 2);
	trace_free(&t);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_producer_disconnect)
{
	struct fx fx;
	struct fp f;
	struct trace_file t;
	static const size_t sizes[] = { 10, 5000, 20 };

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	fx_start(&fx, 0, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	for (unsigned i = 0; i < ARRAY_SIZE(sizes); i++)
		fp_write(&f, i, sizes[i]);
	smb_writer_flush(f.w);
	fp_commit(&f, 0);
	ck_assert(RUN_UNTIL(fx.e, f.replies == 2, TIMEOUT_MS));

	fp_close(&f);
	ck_assert(RUN_UNTIL(fx.e, svc_producer_count(fx.svc) == 0, TIMEOUT_MS));
	ck_assert(!svc_data_source_registered(fx.svc, DS_NAME));
	ck_assert(!fx.done);

	/* Nothing to flush or stop any more: the session ends promptly. */
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, 1000));
	ck_assert_int_eq(fx.done_error, 0);
	trace_load(&t, fx.out);
	check_head(&t);
	check_producer_packets(&t, sizes, ARRAY_SIZE(sizes));
	trace_free(&t);
	fx_done(&fx);
}
END_TEST

/* Lay out one Complete Div1 chunk by hand in the producer's SMB. */
static void craft_chunk(struct fp *f, unsigned page, uint16_t writer_id, uint32_t chunk_id, uint16_t count,
			const uint8_t *payload, size_t len)
{
	uint8_t *pg = (uint8_t *)smb_base(f->smb) + (size_t)page * smb_page_size(f->smb);

	ck_assert_uint_le(len, smb_page_size(f->smb) - 16);
	memcpy(pg + 8, &chunk_id, 4);
	memcpy(pg + 12, &writer_id, 2);
	memcpy(pg + 14, &count, 2);
	memcpy(pg + 16, payload, len);
	/* layout Div1 (1 << 28), chunk 0 Complete (3) */
	__atomic_store_n((uint32_t *)pg, (1u << 28) | 3u, __ATOMIC_RELEASE);
}

START_TEST(test_malformed_chunks)
{
	struct fx fx;
	struct fp f;
	struct trace_file t;
	struct svc_session_stats st;
	static const size_t sizes[] = { 40, 41 };
	/* a fragment claiming 5000 bytes in a 4080-byte payload */
	static const uint8_t too_long[] = { 0x88, 0x27, 0x08, 0x01 };
	static const uint8_t ok[] = { 0x02, 0x40, 0x07 };
	struct pbw *w;

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	fx_start(&fx, 0, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));

	/* writer id 0 is invalid */
	craft_chunk(&f, 15, 0, 0, 1, ok, sizeof(ok));
	fp_commit_raw(&f, 15, 0, f.target_buffer);
	/* a fragment running past the end of its chunk */
	craft_chunk(&f, 14, 9, 0, 1, too_long, sizeof(too_long));
	fp_commit_raw(&f, 14, 0, f.target_buffer);
	/* a chunk naming a buffer this producer may not write into */
	craft_chunk(&f, 13, 10, 0, 1, ok, sizeof(ok));
	fp_commit_raw(&f, 13, 0, f.target_buffer + 100);
	/* a packet setting a field only the service may write (trusted_uid) */
	fp_write(&f, 0, sizes[0]);
	w = smb_writer_begin_packet(f.w);
	pbw_varint(w, 3, 12345);
	ck_assert_int_eq(smb_writer_end_packet(f.w), 0);
	writer_write(f.w, 1, sizes[1]);
	smb_writer_flush(f.w);
	fp_commit(&f, 0);
	ck_assert(RUN_UNTIL(fx.e, f.replies == 5, TIMEOUT_MS));

	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_ge(st.chunks_discarded, 2);
	ck_assert_uint_ge(st.abi_violations, 2);
	ck_assert_uint_eq(st.invalid_packets, 1);
	ck_assert_uint_eq(st.packets, 2);
	/* the chunks were handed back to the producer */
	for (unsigned pg = 13; pg <= 15; pg++)
		ck_assert_uint_eq(*(uint32_t *)((uint8_t *)smb_base(f.smb) + pg * 4096), 0);

	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(fx.done_error, 0);
	trace_load(&t, fx.out);
	check_head(&t);
	check_producer_packets(&t, sizes, ARRAY_SIZE(sizes));
	ck_assert_uint_eq(t.recs[t.n - 1].tp->trace_stats->invalid_packets, 1);
	trace_free(&t);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_producer_config_and_teardown)
{
	struct fx fx;
	struct fp f;
	Perfetto__Protos__TraceConfig *cfg = make_config(0, 0);
	Perfetto__Protos__TraceConfig__ProducerConfig pc = PERFETTO__PROTOS__TRACE_CONFIG__PRODUCER_CONFIG__INIT;
	Perfetto__Protos__TraceConfig__ProducerConfig *pcp = &pc;
	struct svc_session_hooks h = { .done = on_done_free };
	struct stat sb;

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	/* TraceConfig.producers overrides the producer's hints. */
	pc.producer_name = (char *)"test.producer";
	pc.has_page_size_kb = pc.has_shm_size_kb = true;
	pc.page_size_kb = 16;
	pc.shm_size_kb = 512;
	cfg->n_producers = 1;
	cfg->producers = &pcp;
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, fx.out_fd, &h, &fx, &fx.ss), 0);
	cfg->n_producers = 0;
	cfg->producers = NULL;
	free_config(cfg);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	ck_assert_uint_eq(f.page_kb, 16);
	ck_assert_int_eq(fstat(f.smb_fd, &sb), 0);
	ck_assert_int_eq(sb.st_size, 512 * 1024);

	/* Freeing the service aborts the running session; its done hook
	 * (which frees the session here) runs from svc_free(). */
	fx.svc = svc_free(fx.svc);
	ck_assert(fx.done);
	ck_assert_int_eq(fx.done_error, -ECANCELED);
	ck_assert_ptr_null(fx.ss);
	/* The producer sees its connection go away, not a rejected stream. */
	ck_assert(RUN_UNTIL(fx.e, f.stream_ended, TIMEOUT_MS));
	ck_assert_int_ne(f.stream_error, -EREMOTEIO);
	ck_assert(!ipc_client_is_connected(f.c));
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so a failure reproduces */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void on_any_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more, int fd,
			 void *userdata)
{
	int *n = userdata;

	(void)c;
	(void)error;
	(void)p;
	(void)len;
	(void)has_more;
	(void)fd;
	(*n)++;
}

/* Garbage from an untrusted producer: random arguments to every method but
 * the two that would end the connection's state, random CommitData entries
 * and patches, and random bytes in its SMB pages marked Complete.  The
 * service must survive and still write a valid trace. */
START_TEST(test_hostile_producer)
{
	struct fx fx;
	struct fp f;
	struct trace_file t;
	uint8_t buf[2048];
	int answered = 0, sent = 0;
	size_t pages;

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	fx_start(&fx, 0, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	pages = smb_size(f.smb) / smb_page_size(f.smb);

	for (int round = 0; round < 3000; round++) {
		uint64_t m = rng() % 12 + 1;
		size_t len = rng() % 64;

		if (m == M_INIT || m == M_GET_ASYNC)
			m = M_COMMIT;
		if (round % 3 == 0) {
			/* random bytes in a random page, marked Complete */
			uint8_t *pg = (uint8_t *)smb_base(f.smb) + (rng() % pages) * smb_page_size(f.smb);
			uint32_t word = (uint32_t)rng() & 0x7fffffff;

			for (size_t i = 8; i < smb_page_size(f.smb); i += 8) {
				uint64_t v = rng();

				memcpy(pg + i, &v, 8);
			}
			__atomic_store_n((uint32_t *)pg, word | 3u, __ATOMIC_RELEASE);
		}
		if (m == M_COMMIT && rng() % 2) {
			/* a decodable CommitData with nonsense in it */
			Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
			Perfetto__Protos__CommitDataRequest__ChunksToMove mv[4], *mvp[4];
			Perfetto__Protos__CommitDataRequest__ChunkToPatch cp = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNK_TO_PATCH__INIT;
			Perfetto__Protos__CommitDataRequest__ChunkToPatch *cpp = &cp;
			Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch pt = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNK_TO_PATCH__PATCH__INIT;
			Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *ptp = &pt;
			uint8_t pdata[6];

			for (int i = 0; i < 4; i++) {
				perfetto__protos__commit_data_request__chunks_to_move__init(&mv[i]);
				mv[i].has_page = mv[i].has_chunk = mv[i].has_target_buffer = true;
				mv[i].page = (uint32_t)(rng() % (pages + 2));
				mv[i].chunk = (uint32_t)(rng() % 16);
				mv[i].target_buffer = rng() % 4 ? f.target_buffer : (uint32_t)rng();
				if (rng() % 8 == 0) {
					mv[i].has_data = true;
					mv[i].data.data = buf;
					mv[i].data.len = rng() % 1024;
				}
				mvp[i] = &mv[i];
			}
			for (size_t i = 0; i < sizeof(buf); i++)
				buf[i] = (uint8_t)rng();
			cp.has_target_buffer = cp.has_writer_id = cp.has_chunk_id = cp.has_has_more_patches = true;
			cp.target_buffer = f.target_buffer;
			cp.writer_id = (uint32_t)(rng() % 40000);
			cp.chunk_id = (uint32_t)(rng() % 8);
			cp.has_more_patches = rng() % 2;
			pt.has_offset = pt.has_data = true;
			pt.offset = (uint32_t)rng() % 5000;
			pt.data.data = pdata;
			pt.data.len = rng() % 2 ? 4 : rng() % 7;
			cp.n_patches = 1;
			cp.patches = &ptp;
			req.n_chunks_to_move = 4;
			req.chunks_to_move = mvp;
			req.n_chunks_to_patch = 1;
			req.chunks_to_patch = &cpp;
			if (rng() % 4 == 0) {
				req.has_flush_request_id = true;
				req.flush_request_id = rng();
			}
			len = perfetto__protos__commit_data_request__get_packed_size(&req);
			{
				uint8_t out[8192];

				ck_assert_uint_le(len, sizeof(out));
				perfetto__protos__commit_data_request__pack(&req, out);
				ck_assert_int_eq(ipc_client_invoke(f.c, f.sid, f.mid[M_COMMIT], out, len, -EBADF,
								   on_any_reply, &answered, NULL), 0);
			}
		} else {
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rng();
			ck_assert_int_eq(ipc_client_invoke(f.c, f.sid, f.mid[m], buf, len, -EBADF, on_any_reply,
							   &answered, NULL), 0);
		}
		sent++;
		if (round % 50 == 0)
			ck_assert(RUN_UNTIL(fx.e, answered >= sent - 40, TIMEOUT_MS));
	}
	/* every call is answered one way or the other (none drops the reply) */
	ck_assert(RUN_UNTIL(fx.e, answered == sent, TIMEOUT_MS));
	ck_assert(ipc_client_is_connected(f.c));
	{
		struct svc_session_stats st;

		ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
		ck_assert_uint_gt(st.chunks_discarded, 100);
		ck_assert_uint_gt(st.abi_violations, 10);
		ck_assert_uint_gt(st.patches_failed, 0);
	}

	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, 3 * TIMEOUT_MS));
	ck_assert_int_eq(fx.done_error, 0);
	trace_load(&t, fx.out);
	check_head(&t);
	trace_free(&t);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

static Suite *service_faults_suite(void)
{
	Suite *s = suite_create("service_faults");
	TCase *tc = tcase_create("faults");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_reject_before_initialize);
	tcase_add_test(tc, test_bad_commit_entries);
	tcase_add_test(tc, test_producer_disconnect);
	tcase_add_test(tc, test_malformed_chunks);
	tcase_add_test(tc, test_producer_config_and_teardown);
	tcase_add_test(tc, test_hostile_producer);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(service_faults_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
