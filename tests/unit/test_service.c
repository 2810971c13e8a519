/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process service against a fake producer built from the project's
 * own IPC client and SMB writer, over a real AF_UNIX socket: the startup
 * handshake, SetupTracing with the memfd, Setup/Start, packets (some larger
 * than a chunk) committed and written to the file byte for byte with the
 * trusted fields appended, the Flush / ack / Stop / stopped sequence,
 * durations, periodic flushes, write errors and size limits, two sessions,
 * patched packets and explicit flushes.  A producer that misbehaves is in
 * test_service_faults.
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

START_TEST(test_session_roundtrip)
{
	struct fx fx;
	struct fp f;
	struct trace_file t;
	struct svc_session_stats st;
	struct stat sb;
	/* 4 KiB pages: the 9000 and 20000 byte packets span several chunks. */
	static const size_t sizes[] = { 10, 200, 9000, 1, 4000, 20000, 50, 3000 };
	const unsigned n = ARRAY_SIZE(sizes);
	const struct rec *stats;

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	ck_assert_uint_eq(svc_producer_count(fx.svc), 1);
	/* No SMB before a session needs one. */
	ck_assert_str_eq(f.log, "");

	fx_start(&fx, 0, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3 && fx.all_started, TIMEOUT_MS));
	ck_assert_str_eq(f.log, "TSs");
	ck_assert(f.setup_tracing_had_fd);
	ck_assert_uint_eq(f.page_kb, 4);
	ck_assert_int_eq(fstat(f.smb_fd, &sb), 0);
	ck_assert_int_eq(sb.st_size, 64 * 1024);
	/* Sealed against resizing, as traced's memfd. */
	ck_assert_int_eq(fcntl(f.smb_fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
			 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	ck_assert_uint_eq(f.start_id, f.ds_id);
	ck_assert_uint_ge(f.target_buffer, 1);
	ck_assert_uint_eq(f.session_id, svc_session_id(fx.ss));
	ck_assert_uint_eq(f.stop_timeout_ms, 5000);

	for (unsigned i = 0; i < n; i++) {
		fp_write(&f, i, sizes[i]);
		if (i == 3)
			fp_commit(&f, 0); /* some chunks before the stop */
	}
	fp_commit(&f, 0);
	ck_assert(RUN_UNTIL(fx.e, f.replies >= 3, TIMEOUT_MS));

	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(fx.done_error, 0);
	ck_assert_str_eq(f.log, "TSsFP");
	/* reason trace-stop (2) | initiator traced (1 << 4) */
	ck_assert_uint_eq(f.flush_flags, 0x12);
	ck_assert_uint_eq(f.flush_ds, f.ds_id);
	ck_assert_uint_eq(f.stop_id, f.ds_id);
	ck_assert_int_eq(svc_session_stop(fx.ss), -EALREADY);

	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_eq(st.packets, n);
	ck_assert_uint_eq(st.flushes_requested, 1);
	ck_assert_uint_eq(st.flushes_acked, 1);
	ck_assert_uint_eq(st.flushes_timed_out, 0);
	ck_assert_uint_eq(st.chunks_discarded, 0);
	ck_assert_uint_eq(st.packets_lost, 0);

	trace_load(&t, fx.out);
	check_head(&t);
	check_producer_packets(&t, sizes, n);
	stats = &t.recs[t.n - 1];
	ck_assert_int_eq(stats->tp->trace_stats->final_flush_outcome,
			 PERFETTO__PROTOS__TRACE_STATS__FINAL_FLUSH_OUTCOME__FINAL_FLUSH_SUCCEEDED);
	ck_assert_uint_eq(stats->tp->trace_stats->flushes_succeeded, 1);
	ck_assert_uint_eq(stats->tp->trace_stats->n_buffer_stats, 1);
	ck_assert_uint_eq(stats->tp->trace_stats->buffer_stats[0]->buffer_size, 1024 * 1024);
	ck_assert_uint_ge(count_event(&t, PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_ALL_DATA_SOURCES_STARTED),
			  1);
	ck_assert_uint_eq(count_event(&t, PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_ALL_DATA_SOURCES_FLUSHED),
			  1);
	trace_free(&t);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_flush_timeout)
{
	struct fx fx;
	struct fp f;
	struct trace_file t;
	struct svc_session_stats st;
	static const size_t sizes[] = { 300 };
	uint64_t t0;

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	f.ack_flush = false; /* never acks the flush */
	f.ack_stop = false;  /* nor the stop */
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	fx_start(&fx, 300, 300);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	fp_write(&f, 0, sizes[0]);
	smb_writer_flush(f.w);
	fp_commit(&f, 0);
	ck_assert(RUN_UNTIL(fx.e, f.replies == 2, TIMEOUT_MS));

	t0 = mono_ms();
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	/* flush timeout, then stop timeout */
	ck_assert_uint_ge(mono_ms() - t0, 550);
	ck_assert_int_eq(fx.done_error, 0);
	ck_assert_str_eq(f.log, "TSsFP");
	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_eq(st.flushes_timed_out, 1);
	ck_assert_uint_eq(st.flushes_acked, 0);
	ck_assert_uint_eq(st.data_sources_stop_timed_out, 1);

	trace_load(&t, fx.out);
	check_head(&t);
	check_producer_packets(&t, sizes, 1);
	ck_assert_int_eq(t.recs[t.n - 1].tp->trace_stats->final_flush_outcome,
			 PERFETTO__PROTOS__TRACE_STATS__FINAL_FLUSH_OUTCOME__FINAL_FLUSH_FAILED);
	ck_assert_uint_eq(t.recs[t.n - 1].tp->trace_stats->flushes_failed, 1);
	ck_assert_uint_eq(count_event(&t, PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_LAST_FLUSH_SLOW_DATA_SOURCES),
			  1);
	trace_free(&t);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_late_registration_and_sync)
{
	struct fx fx;
	struct fp f;
	Perfetto__Protos__SyncRequest sy = PERFETTO__PROTOS__SYNC_REQUEST__INIT;

	fx_init(&fx, NULL);
	/* Hints beyond traced's limits: page clamped to 32 KiB, size to 32 MiB;
	 * then 3 pages of 4 KiB is not a power of two: defaults. */
	fp_connect(&f, &fx, 12288, 1 << 20);
	fx_start(&fx, 0, 0);
	/* The session runs with nobody to trace: all (zero) sources started. */
	ck_assert(RUN_UNTIL(fx.e, fx.all_started, TIMEOUT_MS));

	/* A producer registering now gets Setup and Start at once, before the
	 * reply to a Sync sent right after the registration. */
	fp_register_name(&f, DS_NAME, true, /* log_reply= */ true);
	fp_invoke(&f, M_SYNC, &sy.base, on_sync_reply);
	ck_assert_msg(RUN_UNTIL(fx.e, f.n_log >= 5, TIMEOUT_MS), "log %s", f.log);
	/* the reply first, then the commands it caused, then the Sync reply */
	ck_assert_str_eq(f.log, "RTSsY");
	ck_assert_uint_eq(f.page_kb, 4);
	{
		struct stat sb;

		ck_assert_int_eq(fstat(f.smb_fd, &sb), 0);
		ck_assert_int_eq(sb.st_size, 256 * 1024);
	}
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_str_eq(f.log, "RTSsYFP");
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_duration_and_config_errors)
{
	struct fx fx;
	struct fp f;
	Perfetto__Protos__TraceConfig *cfg;
	struct svc_session *bad = NULL;
	struct svc_session_hooks h = { .done = on_done_free };
	uint64_t t0;

	fx_init(&fx, NULL);
	cfg = make_config(0, 0);
	/* target_buffer out of range is refused, like traced */
	cfg->data_sources[0]->config->has_target_buffer = true;
	cfg->data_sources[0]->config->target_buffer = 1;
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, fx.out_fd, &h, &fx, &bad), -EINVAL);
	cfg->data_sources[0]->config->target_buffer = 0;
	cfg->buffers[0]->size_kb = 0;
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, fx.out_fd, &h, &fx, &bad), -EINVAL);
	cfg->buffers[0]->size_kb = 64;

	fp_connect(&f, &fx, 8192, 128 * 1024);
	fp_register(&f, false);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	cfg->has_duration_ms = true;
	cfg->duration_ms = 200;
	t0 = mono_ms();
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, fx.out_fd, &h, &fx, &fx.ss), 0);
	/* The stop needs no ack here: the producer may read it after the session ends. */
	ck_assert(RUN_UNTIL(fx.e, fx.done && strchr(f.log, 'P'), TIMEOUT_MS));
	ck_assert_uint_ge(mono_ms() - t0, 200);
	ck_assert_ptr_null(fx.ss); /* freed by its own done hook */
	ck_assert_str_eq(f.log, "TSsFP");
	ck_assert_uint_eq(f.page_kb, 8);
	ck_assert_uint_eq(f.duration_ms, 200);
	free_config(cfg);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_shmem_emulation)
{
	struct svc_options o = { .force_shmem_emulation = true };
	struct fx fx;
	struct fp f;
	struct trace_file t;
	static const size_t sizes[] = { 10, 7000, 30 };

	fx_init(&fx, &o);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	ck_assert(f.use_emulation);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	fx_start(&fx, 0, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	ck_assert_str_eq(f.log, "TSs");
	/* No fd: the producer keeps its own buffer and sends chunk bytes. */
	ck_assert(!f.setup_tracing_had_fd);
	ck_assert_uint_eq(f.page_kb, 4);
	for (unsigned i = 0; i < ARRAY_SIZE(sizes); i++)
		fp_write(&f, i, sizes[i]);
	smb_writer_flush(f.w);
	fp_commit(&f, 0);
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(fx.done_error, 0);
	trace_load(&t, fx.out);
	check_head(&t);
	check_producer_packets(&t, sizes, ARRAY_SIZE(sizes));
	trace_free(&t);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_periodic_flush_and_clear)
{
	struct fx fx;
	struct fp f;
	Perfetto__Protos__TraceConfig *cfg = make_config(0, 0);
	Perfetto__Protos__TraceConfig__IncrementalStateConfig isc =
		PERFETTO__PROTOS__TRACE_CONFIG__INCREMENTAL_STATE_CONFIG__INIT;
	struct svc_session_hooks h = { .done = on_done };

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	f.incremental = true;
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	cfg->has_flush_period_ms = true;
	cfg->flush_period_ms = 100;
	isc.has_clear_period_ms = true;
	isc.clear_period_ms = 100;
	cfg->incremental_state_config = &isc;
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, fx.out_fd, &h, &fx, &fx.ss), 0);
	cfg->incremental_state_config = NULL;
	free_config(cfg);
	ck_assert(RUN_UNTIL(fx.e, f.n_flush >= 2 && f.n_clear >= 2, TIMEOUT_MS));
	/* reason periodic (1) | initiator traced (1 << 4) */
	ck_assert_uint_eq(f.flush_flags, 0x11);
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_uint_eq(f.flush_flags, 0x12);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_write_errors)
{
	struct fx fx;
	struct fp f;
	Perfetto__Protos__TraceConfig *cfg = make_config(0, 0);
	struct svc_session_hooks h = { .done = on_done };
	struct svc_session *ss = NULL;
	struct rlimit rl, old;
	struct stat sb;
	int full;

	fx_init(&fx, NULL);
	/* A disk that is full from the start: the session does not start. */
	full = open("/dev/full", O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(full, 0);
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, full, &h, &fx, &ss), -ENOSPC);
	ck_assert_ptr_null(ss);
	close(full);

	/* A file that cannot grow past 64 KiB while data comes in: the session
	 * ends with the error instead of pretending the file is complete. */
	fp_connect(&f, &fx, 4096, 256 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, fx.out_fd, &h, &fx, &fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	rl.rlim_cur = 64 * 1024;
	rl.rlim_max = old.rlim_max;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	for (unsigned i = 0; i < 10; i++)
		fp_write(&f, i, 10000);
	smb_writer_flush(f.w);
	fp_commit(&f, 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_int_eq(fx.done_error, -EFBIG);
	/* The producer was told to stop. */
	ck_assert(RUN_UNTIL(fx.e, strchr(f.log, 'P') != NULL, TIMEOUT_MS));
	ck_assert_int_eq(fstat(fx.out_fd, &sb), 0);
	ck_assert_int_le(sb.st_size, 64 * 1024);
	free_config(cfg);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_max_file_size)
{
	struct fx fx;
	struct fp f;
	Perfetto__Protos__TraceConfig *cfg = make_config(0, 0);
	struct svc_session_hooks h = { .done = on_done };
	struct trace_file t;
	struct stat sb;

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 256 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	cfg->has_max_file_size_bytes = true;
	cfg->max_file_size_bytes = 30000;
	ck_assert_int_eq(svc_session_start(fx.svc, cfg, fx.out_fd, &h, &fx, &fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	for (unsigned i = 0; i < 10; i++)
		fp_write(&f, i, 5000);
	smb_writer_flush(f.w);
	fp_commit(&f, 0);
	/* traced stops writing before the limit and disables tracing. */
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(fx.done_error, 0);
	ck_assert(strchr(f.log, 'P') != NULL);
	ck_assert_int_eq(fstat(fx.out_fd, &sb), 0);
	ck_assert_int_lt(sb.st_size, 30000);
	trace_load(&t, fx.out);
	ck_assert_uint_ge(t.n, 8);
	trace_free(&t);
	free_config(cfg);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_two_sessions)
{
	struct fx fx, fx2;
	struct fp f;
	struct trace_file t;
	Perfetto__Protos__TraceConfig *cfg2 = make_config(0, 0);
	struct svc_session_hooks h2 = { .done = on_done };
	static const size_t sizes1[] = { 100, 6000, 7 };
	static const size_t sizes2[] = { 9, 300 };

	fx_init(&fx, NULL);
	/* a second output file, same service */
	memset(&fx2, 0, sizeof(fx2));
	snprintf(fx2.out, sizeof(fx2.out), "%s/out2.pftrace", fx.dir);
	fx2.out_fd = open(fx2.out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fx2.out_fd, 0);

	fp_connect(&f, &fx, 4096, 128 * 1024);
	fp_register(&f, true);
	fp_register_name(&f, DS_NAME "2", true, false);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME "2"), TIMEOUT_MS));
	fx_start(&fx, 0, 0);
	free(cfg2->data_sources[0]->config->name);
	cfg2->data_sources[0]->config->name = strdup(DS_NAME "2");
	ck_assert_int_eq(svc_session_start(fx.svc, cfg2, fx2.out_fd, &h2, &fx2, &fx2.ss), 0);
	free_config(cfg2);
	ck_assert(RUN_UNTIL(fx.e, f.n_ds == 2 && f.n_log >= 5, TIMEOUT_MS));
	/* one SMB for the connection: SetupTracing only once */
	ck_assert_str_eq(f.log, "TSsSs");
	ck_assert_uint_ne(svc_session_id(fx.ss), svc_session_id(fx2.ss));
	ck_assert_uint_ne(f.ds[0].target_buffer, f.ds[1].target_buffer);

	for (unsigned i = 0; i < ARRAY_SIZE(sizes1); i++)
		writer_write(f.ds[0].w, i, sizes1[i]);
	for (unsigned i = 0; i < ARRAY_SIZE(sizes2); i++)
		writer_write(f.ds[1].w, i, sizes2[i]);
	fp_commit(&f, 0);

	/* Stopping the second session leaves the first one running. */
	ck_assert_int_eq(svc_session_stop(fx2.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx2.done, TIMEOUT_MS));
	ck_assert_int_eq(fx2.done_error, 0);
	ck_assert(!fx.done);
	ck_assert_uint_eq(f.flush_ds, f.ds[1].id);
	ck_assert_uint_eq(f.stop_id, f.ds[1].id);
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(fx.done_error, 0);
	ck_assert_str_eq(f.log, "TSsSsFPFP");

	trace_load(&t, fx.out);
	check_head(&t);
	check_producer_packets(&t, sizes1, ARRAY_SIZE(sizes1));
	trace_free(&t);
	trace_load(&t, fx2.out);
	check_head(&t);
	check_producer_packets(&t, sizes2, ARRAY_SIZE(sizes2));
	trace_free(&t);

	fx2.ss = svc_session_free(fx2.ss);
	closep(&fx2.out_fd);
	(void)unlink(fx2.out);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

START_TEST(test_patched_packets)
{
	struct fx fx;
	struct fp f;
	struct trace_file t;
	struct svc_session_stats st;
	/* nested payloads longer than a 4 KiB chunk: their lengths are patched */
	static const size_t sizes[] = { 9000, 50, 12000 };

	nested_mode = true;
	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	fx_start(&fx, 0, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));
	for (unsigned i = 0; i < ARRAY_SIZE(sizes); i++) {
		fp_write(&f, i, sizes[i]);
		fp_commit(&f, 0);
	}
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_ge(st.patches_applied, 2);
	ck_assert_uint_eq(st.patches_failed, 0);
	trace_load(&t, fx.out);
	check_producer_packets(&t, sizes, ARRAY_SIZE(sizes));
	trace_free(&t);
	fp_close(&f);
	fx_done(&fx);
	nested_mode = false;
}
END_TEST

struct flush_result {
	int calls;
	bool ok;
};

static void on_flushed(struct svc_session *ss, bool ok, void *userdata)
{
	struct flush_result *fr = userdata;

	(void)ss;
	fr->calls++;
	fr->ok = ok;
}

START_TEST(test_explicit_flush)
{
	struct fx fx;
	struct fp f;
	struct flush_result a = { 0 }, b = { 0 };
	struct svc_session_stats st;

	fx_init(&fx, NULL);
	fp_connect(&f, &fx, 4096, 64 * 1024);
	fp_register(&f, true);
	ck_assert(RUN_UNTIL(fx.e, svc_data_source_registered(fx.svc, DS_NAME), TIMEOUT_MS));
	fx_start(&fx, 1000, 0);
	ck_assert(RUN_UNTIL(fx.e, f.n_log >= 3, TIMEOUT_MS));

	ck_assert_int_eq(svc_session_flush(fx.ss, on_flushed, &a), 0);
	ck_assert(RUN_UNTIL(fx.e, a.calls == 1, TIMEOUT_MS));
	ck_assert(a.ok);
	/* reason explicit (4) | initiator traced (1 << 4) */
	ck_assert_uint_eq(f.flush_flags, 0x14);
	ck_assert_uint_eq(f.flush_ds, f.ds_id);

	f.ack_flush = false;
	ck_assert_int_eq(svc_session_flush(fx.ss, on_flushed, &b), 0);
	ck_assert(RUN_UNTIL(fx.e, b.calls == 1, TIMEOUT_MS));
	ck_assert(!b.ok);
	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_eq(st.flushes_acked, 1);
	ck_assert_uint_eq(st.flushes_timed_out, 1);

	/* An ack of a higher id also acks every lower pending one. */
	{
		struct flush_result c = { 0 }, d = { 0 };
		int n = f.n_flush;

		ck_assert_int_eq(svc_session_flush(fx.ss, on_flushed, &c), 0);
		ck_assert(RUN_UNTIL(fx.e, f.n_flush == n + 1, TIMEOUT_MS));
		f.ack_flush = true;
		ck_assert_int_eq(svc_session_flush(fx.ss, on_flushed, &d), 0);
		ck_assert(RUN_UNTIL(fx.e, c.calls == 1 && d.calls == 1, TIMEOUT_MS));
		ck_assert(c.ok);
		ck_assert(d.ok);
	}
	ck_assert_int_eq(svc_session_stop(fx.ss), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.done, TIMEOUT_MS));
	ck_assert_int_eq(svc_session_flush(fx.ss, on_flushed, &a), -ESHUTDOWN);
	ck_assert_int_eq(svc_session_get_stats(fx.ss, &st), 0);
	ck_assert_uint_eq(st.flushes_acked, 4);
	fp_close(&f);
	fx_done(&fx);
}
END_TEST

static Suite *service_suite(void)
{
	Suite *s = suite_create("service");
	TCase *tc = tcase_create("sessions");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_session_roundtrip);
	tcase_add_test(tc, test_flush_timeout);
	tcase_add_test(tc, test_late_registration_and_sync);
	tcase_add_test(tc, test_duration_and_config_errors);
	tcase_add_test(tc, test_shmem_emulation);
	tcase_add_test(tc, test_periodic_flush_and_clear);
	tcase_add_test(tc, test_write_errors);
	tcase_add_test(tc, test_max_file_size);
	tcase_add_test(tc, test_two_sessions);
	tcase_add_test(tc, test_patched_packets);
	tcase_add_test(tc, test_explicit_flush);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(service_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
