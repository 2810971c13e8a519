/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service test harness: a service on a socket in a temp dir, a fake
 * producer built from the project's own IPC client and SMB writer, and a
 * reader of the output file.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "protos/pbw.h"
#include "tests/lib/svc_harness.h"
#include "util/util.h"
#include "util/util_varint.h"

uint64_t mono_ms(void)
{
	return now_ns(CLOCK_MONOTONIC) / 1000000;
}

/* ---- fixture: a service listening on a socket in a temp dir -------------- */

void fx_init(struct fx *fx, const struct svc_options *o)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/tp-svc-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fx->dir));
	snprintf(fx->sock, sizeof(fx->sock), "%s/producer.sock", fx->dir);
	snprintf(fx->out, sizeof(fx->out), "%s/out.pftrace", fx->dir);
	ck_assert_int_ge(loop_new(&fx->e), 0);
	ck_assert_int_eq(svc_new(fx->e, o, &fx->svc), 0);
	ck_assert_int_eq(svc_listen(fx->svc, fx->sock), 0);
	fx->out_fd = open(fx->out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fx->out_fd, 0);
}

void fx_done(struct fx *fx)
{
	fx->ss = svc_session_free(fx->ss);
	fx->svc = svc_free(fx->svc);
	closep(&fx->out_fd);
	(void)unlink(fx->out);
	(void)unlink(fx->sock);
	(void)rmdir(fx->dir);
	loop_unref(fx->e);
}

void on_done(struct svc_session *ss, int error, void *userdata)
{
	struct fx *fx = userdata;

	(void)ss;
	fx->done = true;
	fx->done_error = error;
}

static void on_all_started(struct svc_session *ss, void *userdata)
{
	struct fx *fx = userdata;

	(void)ss;
	fx->all_started = true;
}

void on_done_free(struct svc_session *ss, int error, void *userdata)
{
	struct fx *fx = userdata;

	ck_assert_ptr_eq(ss, fx->ss);
	fx->ss = svc_session_free(ss);
	fx->done = true;
	fx->done_error = error;
}

Perfetto__Protos__TraceConfig *make_config(uint32_t flush_timeout_ms, uint32_t stop_timeout_ms)
{
	Perfetto__Protos__TraceConfig *cfg = calloc(1, sizeof(*cfg));
	Perfetto__Protos__TraceConfig__BufferConfig *b = calloc(1, sizeof(*b));
	Perfetto__Protos__TraceConfig__DataSource *d = calloc(1, sizeof(*d));
	Perfetto__Protos__DataSourceConfig *dc = calloc(1, sizeof(*dc));

	ck_assert(cfg && b && d && dc);
	perfetto__protos__trace_config__init(cfg);
	perfetto__protos__trace_config__buffer_config__init(b);
	perfetto__protos__trace_config__data_source__init(d);
	perfetto__protos__data_source_config__init(dc);
	b->has_size_kb = true;
	b->size_kb = 1024;
	dc->name = strdup(DS_NAME);
	d->config = dc;
	cfg->n_buffers = 1;
	cfg->buffers = calloc(1, sizeof(*cfg->buffers));
	cfg->buffers[0] = b;
	cfg->n_data_sources = 1;
	cfg->data_sources = calloc(1, sizeof(*cfg->data_sources));
	cfg->data_sources[0] = d;
	if (flush_timeout_ms) {
		cfg->has_flush_timeout_ms = true;
		cfg->flush_timeout_ms = flush_timeout_ms;
	}
	if (stop_timeout_ms) {
		cfg->has_data_source_stop_timeout_ms = true;
		cfg->data_source_stop_timeout_ms = stop_timeout_ms;
	}
	return cfg;
}

void free_config(Perfetto__Protos__TraceConfig *cfg)
{
	free(cfg->data_sources[0]->config->name);
	free(cfg->data_sources[0]->config);
	free(cfg->data_sources[0]);
	free(cfg->data_sources);
	free(cfg->buffers[0]);
	free(cfg->buffers);
	free(cfg);
}

void fx_start(struct fx *fx, uint32_t flush_timeout_ms, uint32_t stop_timeout_ms)
{
	Perfetto__Protos__TraceConfig *cfg = make_config(flush_timeout_ms, stop_timeout_ms);
	struct svc_session_hooks h = { .done = on_done, .all_started = on_all_started };

	ck_assert_int_eq(svc_session_start(fx->svc, cfg, fx->out_fd, &h, fx, &fx->ss), 0);
	ck_assert_uint_gt(svc_session_id(fx->ss), 0);
	free_config(cfg);
}

/* ---- the fake producer -------------------------------------------------- */

static const char *const method_names[_M_MAX] = {
	[M_INIT] = "InitializeConnection", [M_REGISTER] = "RegisterDataSource",
	[M_UNREGISTER] = "UnregisterDataSource", [M_COMMIT] = "CommitData",
	[M_GET_ASYNC] = "GetAsyncCommand", [M_REG_WRITER] = "RegisterTraceWriter",
	[M_UNREG_WRITER] = "UnregisterTraceWriter", [M_STARTED] = "NotifyDataSourceStarted",
	[M_STOPPED] = "NotifyDataSourceStopped", [M_TRIGGERS] = "ActivateTriggers",
	[M_SYNC] = "Sync", [M_UPDATE] = "UpdateDataSource",
};

static void fp_log(struct fp *f, char c)
{
	if (f->n_log + 1 < sizeof(f->log))
		f->log[f->n_log++] = c;
}

static void on_bind(struct ipc_client *c, int error, uint32_t sid, void *userdata)
{
	struct fp *f = userdata;

	ck_assert_int_eq(error, 0);
	f->sid = sid;
	f->bound = true;
	for (int m = 1; m < _M_MAX; m++) {
		int id = ipc_client_get_method_id(c, sid, method_names[m]);

		/* v58.2 declaration order */
		ck_assert_int_eq(id, m);
		f->mid[m] = (uint32_t)id;
	}
}

void on_generic_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
		      int fd, void *userdata)
{
	struct fp *f = userdata;

	(void)c;
	(void)p;
	(void)len;
	(void)has_more;
	(void)fd;
	if (error)
		f->rejected++;
	else
		f->replies++;
}

void on_sync_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
		   int fd, void *userdata)
{
	struct fp *f = userdata;

	(void)c;
	(void)p;
	(void)len;
	(void)has_more;
	(void)fd;
	if (!error)
		fp_log(f, 'Y');
}

void on_init_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
		   int fd, void *userdata)
{
	struct fp *f = userdata;
	Perfetto__Protos__InitializeConnectionResponse *r;

	(void)c;
	(void)has_more;
	f->init_replied = true;
	f->init_error = error;
	f->init_had_fd = fd >= 0;
	if (error)
		return;
	r = perfetto__protos__initialize_connection_response__unpack(NULL, len, p);
	ck_assert_ptr_nonnull(r);
	f->use_emulation = r->use_shmem_emulation;
	f->direct_patching = r->direct_smb_patching_supported;
	perfetto__protos__initialize_connection_response__free_unpacked(r, NULL);
}

void fp_invoke(struct fp *f, int method, const ProtobufCMessage *m, ipc_client_reply_cb cb)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len = m ? protobuf_c_message_get_packed_size(m) : 0;

	buf = malloc(len + 1);
	ck_assert_ptr_nonnull(buf);
	if (m)
		protobuf_c_message_pack(m, buf);
	ck_assert_int_eq(ipc_client_invoke(f->c, f->sid, f->mid[method], buf, len, -EBADF, cb, f, NULL), 0);
}

static void fp_notify(struct fp *f, int method, uint64_t id)
{
	Perfetto__Protos__NotifyDataSourceStartedRequest r = PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STARTED_REQUEST__INIT;

	/* Started and Stopped requests have the same shape. */
	r.has_data_source_id = true;
	r.data_source_id = id;
	fp_invoke(f, method, &r.base, NULL);
}

/* Send CommitData for every chunk released and patch completed.  With
 * shmem emulation the chunks travel inline (header included) and are freed
 * locally at once, as Perfetto's emulating producers do. */
void fp_commit(struct fp *f, uint64_t flush_id)
{
	Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove mv[256], *mvp[256];
	Perfetto__Protos__CommitDataRequest__ChunkToPatch cp[64], *cpp[64];
	Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch pt[64], *ptp[64];
	struct smb_commit cm = { 0 };

	if (f->smb && smb_take_commit(f->smb, &cm)) {
		size_t psize = smb_page_size(f->smb);

		ck_assert_uint_le(cm.n_moves, 256);
		ck_assert_uint_le(cm.n_patches, 64);
		for (size_t i = 0; i < cm.n_patches; i++) {
			perfetto__protos__commit_data_request__chunk_to_patch__init(&cp[i]);
			perfetto__protos__commit_data_request__chunk_to_patch__patch__init(&pt[i]);
			cp[i].has_target_buffer = cp[i].has_writer_id = cp[i].has_chunk_id = true;
			cp[i].target_buffer = cm.patches[i].target_buffer;
			cp[i].writer_id = cm.patches[i].writer_id;
			cp[i].chunk_id = cm.patches[i].chunk_id;
			cp[i].has_has_more_patches = true;
			cp[i].has_more_patches = cm.patches[i].has_more;
			pt[i].has_offset = pt[i].has_data = true;
			pt[i].offset = cm.patches[i].offset;
			pt[i].data.data = (uint8_t *)cm.patches[i].data;
			pt[i].data.len = 4;
			ptp[i] = &pt[i];
			cp[i].n_patches = 1;
			cp[i].patches = &ptp[i];
			cpp[i] = &cp[i];
		}
		req.n_chunks_to_patch = cm.n_patches;
		req.chunks_to_patch = cpp;
		for (size_t i = 0; i < cm.n_moves; i++) {
			perfetto__protos__commit_data_request__chunks_to_move__init(&mv[i]);
			mv[i].has_page = mv[i].has_chunk = mv[i].has_target_buffer = true;
			mv[i].page = cm.moves[i].page;
			mv[i].chunk = cm.moves[i].chunk;
			mv[i].target_buffer = cm.moves[i].target_buffer;
			if (f->local) {
				uint8_t *page = (uint8_t *)f->local + (size_t)cm.moves[i].page * psize;

				/* one chunk per page: it starts after the 8-byte page header */
				ck_assert_uint_eq(cm.moves[i].chunk, 0);
				mv[i].has_data = true;
				mv[i].data.data = page + 8;
				mv[i].data.len = psize - 8;
			}
			mvp[i] = &mv[i];
		}
		req.n_chunks_to_move = cm.n_moves;
		req.chunks_to_move = mvp;
	}
	if (flush_id) {
		req.has_flush_request_id = true;
		req.flush_request_id = flush_id;
	}
	fp_invoke(f, M_COMMIT, &req.base, on_generic_reply);
	for (size_t i = 0; f->local && i < req.n_chunks_to_move; i++)
		__atomic_store_n((uint32_t *)((uint8_t *)f->local + (size_t)mv[i].page * smb_page_size(f->smb)), 0,
				 __ATOMIC_RELEASE);
}

static void on_command(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more, int fd,
		       void *userdata)
{
	struct fp *f = userdata;
	Perfetto__Protos__GetAsyncCommandResponse *cmd;

	if (error || !has_more) {
		f->stream_ended = true;
		f->stream_error = error;
		return;
	}
	cmd = perfetto__protos__get_async_command_response__unpack(NULL, len, p);
	ck_assert_ptr_nonnull(cmd);
	switch (cmd->cmd_case) {
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING:
		fp_log(f, 'T');
		f->setup_tracing_had_fd = fd >= 0;
		f->page_kb = cmd->setup_tracing->shared_buffer_page_size_kb;
		if (fd >= 0) {
			f->smb_fd = ipc_client_take_fd(c);
			ck_assert_int_eq(smb_new_from_fd(f->smb_fd, (size_t)f->page_kb * 1024, &f->smb), 0);
		} else if (f->use_emulation) {
			f->local_size = 256 * 1024;
			f->local = mmap(NULL, f->local_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			ck_assert(f->local != MAP_FAILED);
			ck_assert_int_eq(smb_new(f->local, f->local_size, (size_t)f->page_kb * 1024, &f->smb), 0);
		}
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE: {
		const Perfetto__Protos__DataSourceConfig *dc = cmd->setup_data_source->config;
		Perfetto__Protos__RegisterTraceWriterRequest rw = PERFETTO__PROTOS__REGISTER_TRACE_WRITER_REQUEST__INIT;

		fp_log(f, 'S');
		ck_assert_ptr_nonnull(dc);
		ck_assert_int_eq(strncmp(dc->name, DS_NAME, strlen(DS_NAME)), 0);
		f->ds_id = cmd->setup_data_source->new_instance_id;
		f->target_buffer = dc->target_buffer;
		f->session_id = dc->tracing_session_id;
		f->duration_ms = dc->trace_duration_ms;
		f->stop_timeout_ms = dc->stop_timeout_ms;
		if (f->smb && f->n_ds < ARRAY_SIZE(f->ds)) {
			uint16_t wid = (uint16_t)(f->n_ds + 1);

			ck_assert_int_eq(smb_writer_new(f->smb, wid, dc->target_buffer, &f->ds[f->n_ds].w), 0);
			f->ds[f->n_ds].id = f->ds_id;
			f->ds[f->n_ds].target_buffer = dc->target_buffer;
			if (!f->w)
				f->w = f->ds[f->n_ds].w;
			f->n_ds++;
			rw.has_trace_writer_id = rw.has_target_buffer = true;
			rw.trace_writer_id = wid;
			rw.target_buffer = dc->target_buffer;
			fp_invoke(f, M_REG_WRITER, &rw.base, NULL);
		}
		break;
	}
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
		fp_log(f, 's');
		f->start_id = cmd->start_data_source->new_instance_id;
		fp_notify(f, M_STARTED, f->start_id);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
		fp_log(f, 'F');
		f->flush_id = cmd->flush->request_id;
		f->flush_flags = cmd->flush->flags;
		f->flush_ds = cmd->flush->n_data_source_ids == 1 ? cmd->flush->data_source_ids[0] : 0;
		f->n_flush++;
		if (f->ack_flush) {
			for (size_t i = 0; i < f->n_ds; i++)
				for (size_t k = 0; k < cmd->flush->n_data_source_ids; k++)
					if (cmd->flush->data_source_ids[k] == f->ds[i].id)
						smb_writer_flush(f->ds[i].w);
			fp_commit(f, f->flush_id);
		}
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE:
		fp_log(f, 'P');
		f->stop_id = cmd->stop_data_source->instance_id;
		if (f->ack_stop)
			fp_notify(f, M_STOPPED, f->stop_id);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE:
		fp_log(f, 'C');
		f->n_clear++;
		ck_assert_uint_eq(cmd->clear_incremental_state->n_data_source_ids, 1);
		ck_assert_uint_eq(cmd->clear_incremental_state->data_source_ids[0], f->ds_id);
		break;
	default:
		ck_abort_msg("unexpected command %d", cmd->cmd_case);
	}
	perfetto__protos__get_async_command_response__free_unpacked(cmd, NULL);
}

void fp_open(struct fp *f, struct fx *fx)
{
	memset(f, 0, sizeof(*f));
	f->smb_fd = -EBADF;
	f->ack_flush = f->ack_stop = true;
	ck_assert_int_eq(ipc_client_new(fx->sock, &f->c), 0);
	ck_assert_int_eq(ipc_client_attach_event(f->c, fx->e), 0);
	ck_assert_int_eq(ipc_client_bind_service(f->c, "ProducerPort", on_bind, f, NULL), 0);
	ck_assert(RUN_UNTIL(fx->e, f->bound, TIMEOUT_MS));
}

/* What traced_probes does: InitializeConnection, GetAsyncCommand without
 * waiting, then (after the reply) RegisterDataSource. */
void fp_connect(struct fp *f, struct fx *fx, uint32_t page_hint, uint32_t size_hint)
{
	Perfetto__Protos__InitializeConnectionRequest ic = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
	Perfetto__Protos__GetAsyncCommandRequest ga = PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;

	fp_open(f, fx);
	ic.producer_name = (char *)"test.producer";
	ic.has_shared_memory_page_size_hint_bytes = ic.has_shared_memory_size_hint_bytes = true;
	ic.shared_memory_page_size_hint_bytes = page_hint;
	ic.shared_memory_size_hint_bytes = size_hint;
	fp_invoke(f, M_INIT, &ic.base, on_init_reply);
	fp_invoke(f, M_GET_ASYNC, &ga.base, on_command);
	ck_assert(RUN_UNTIL(fx->e, f->init_replied, TIMEOUT_MS));
	ck_assert_int_eq(f->init_error, 0);
	/* The SMB fd never rides on the InitializeConnection reply. */
	ck_assert(!f->init_had_fd);
	ck_assert(f->direct_patching);
}

static void on_register_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
			      int fd, void *userdata)
{
	struct fp *f = userdata;

	on_generic_reply(c, error, p, len, has_more, fd, userdata);
	if (!error)
		fp_log(f, 'R');
}

void fp_register_name(struct fp *f, const char *name, bool notify, bool log_reply)
{
	Perfetto__Protos__RegisterDataSourceRequest rq = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
	Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;

	d.name = (char *)name;
	d.has_will_notify_on_start = d.has_will_notify_on_stop = true;
	d.will_notify_on_start = d.will_notify_on_stop = notify;
	d.has_handles_incremental_state_clear = f->incremental;
	d.handles_incremental_state_clear = f->incremental;
	rq.data_source_descriptor = &d;
	fp_invoke(f, M_REGISTER, &rq.base, log_reply ? on_register_reply : on_generic_reply);
}

void fp_register(struct fp *f, bool notify)
{
	Perfetto__Protos__RegisterDataSourceRequest rq = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
	Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;

	d.name = (char *)DS_NAME;
	d.has_will_notify_on_start = d.has_will_notify_on_stop = true;
	d.will_notify_on_start = d.will_notify_on_stop = notify;
	d.has_handles_incremental_state_clear = f->incremental;
	d.handles_incremental_state_clear = f->incremental;
	rq.data_source_descriptor = &d;
	fp_invoke(f, M_REGISTER, &rq.base, on_generic_reply);
}

void fp_close(struct fp *f)
{
	for (size_t i = 0; i < f->n_ds; i++)
		f->ds[i].w = smb_writer_free(f->ds[i].w);
	f->w = NULL;
	f->smb = smb_free(f->smb);
	if (f->local)
		(void)munmap(f->local, f->local_size);
	f->local = NULL;
	f->c = ipc_client_free(f->c);
	closep(&f->smb_fd);
}

/* When set, the payload sits inside a nested message (NESTED_FIELD), whose
 * 4-byte length the SMB writer has to patch when it spans chunks. */
bool nested_mode;

/* Packet i: timestamp (8) = i + 1 and a payload (PAYLOAD_FIELD) of @size
 * bytes derived from i. */
static size_t expected_packet(unsigned i, size_t size, uint8_t *buf, size_t cap)
{
	struct pbw w;
	uint8_t *payload = malloc(size + 1);

	ck_assert_ptr_nonnull(payload);
	for (size_t j = 0; j < size; j++)
		payload[j] = (uint8_t)(i * 31 + j);
	pbw_init(&w, buf, cap, NULL, NULL);
	pbw_varint(&w, 8, i + 1);
	if (nested_mode)
		pbw_begin_nested(&w, NESTED_FIELD);
	pbw_bytes(&w, PAYLOAD_FIELD, payload, size);
	if (nested_mode)
		(void)pbw_end_nested(&w);
	ck_assert(!pbw_overflowed(&w));
	free(payload);
	return (size_t)(w.cur - buf);
}

void writer_write(struct smb_writer *sw, unsigned i, size_t size)
{
	uint8_t *payload = malloc(size + 1);
	struct pbw *w = smb_writer_begin_packet(sw);

	ck_assert_ptr_nonnull(payload);
	ck_assert_ptr_nonnull(w);
	for (size_t j = 0; j < size; j++)
		payload[j] = (uint8_t)(i * 31 + j);
	pbw_varint(w, 8, i + 1);
	if (nested_mode)
		pbw_begin_nested(w, NESTED_FIELD);
	pbw_bytes(w, PAYLOAD_FIELD, payload, size);
	if (nested_mode)
		(void)pbw_end_nested(w);
	ck_assert_int_eq(smb_writer_end_packet(sw), 0);
	free(payload);
}

void fp_write(struct fp *f, unsigned i, size_t size)
{
	writer_write(f->w, i, size);
}

/* ---- reading the output --------------------------------------------------- */

void trace_load(struct trace_file *t, const char *path)
{
	const uint8_t *p, *end;
	Perfetto__Protos__Trace *whole;

	memset(t, 0, sizeof(*t));
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, path, 64u << 20, &t->buf, &t->len), 0);
	/* The whole file must also decode as one Trace message. */
	whole = perfetto__protos__trace__unpack(NULL, t->len, (const uint8_t *)t->buf);
	ck_assert_ptr_nonnull(whole);
	perfetto__protos__trace__free_unpacked(whole, NULL);

	p = (const uint8_t *)t->buf;
	end = p + t->len;
	while (p < end) {
		uint64_t len = 0;
		unsigned shift = 0;

		ck_assert_uint_eq(*p++, 0x0a);
		do {
			ck_assert(p < end);
			len |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
		} while (*p++ & 0x80);
		ck_assert_uint_le(len, (uint64_t)(end - p));
		t->recs = realloc(t->recs, (t->n + 1) * sizeof(*t->recs));
		ck_assert_ptr_nonnull(t->recs);
		t->recs[t->n].data = p;
		t->recs[t->n].len = len;
		t->recs[t->n].tp = perfetto__protos__trace_packet__unpack(NULL, len, p);
		ck_assert_ptr_nonnull(t->recs[t->n].tp);
		t->n++;
		p += len;
	}
}

void trace_free(struct trace_file *t)
{
	for (size_t i = 0; i < t->n; i++)
		perfetto__protos__trace_packet__free_unpacked(t->recs[i].tp, NULL);
	free(t->recs);
	free(t->buf);
}

static uint32_t seq_of(const struct rec *r)
{
	return r->tp->optional_trusted_packet_sequence_id_case ? r->tp->trusted_packet_sequence_id : 0;
}

static const struct rec *find_case(const struct trace_file *t, Perfetto__Protos__TracePacket__DataCase c)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->recs[i].tp->data_case == c)
			return &t->recs[i];
	return NULL;
}

size_t count_event(const struct trace_file *t, Perfetto__Protos__TracingServiceEvent__EventTypeCase c)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		if (t->recs[i].tp->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT &&
		    t->recs[i].tp->service_event->event_type_case == c)
			n++;
	return n;
}

/*
 * Check that the producer packets of @t are exactly packets 0..n-1 (sizes
 * from @sizes) in order: the bytes the producer wrote, then the trusted
 * trailer uid / sequence id / pid (and previous_packet_dropped on the
 * first packet), nothing else.
 */
void check_producer_packets(const struct trace_file *t, const size_t *sizes, unsigned n)
{
	unsigned k = 0;
	uint32_t seq = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct rec *r = &t->recs[i];
		uint8_t *exp, trailer[48], *tp;
		size_t elen, tlen;
		const uint8_t *at;

		if (seq_of(r) == 1)
			continue; /* the service's own packets */
		ck_assert_uint_lt(k, n);
		ck_assert_uint_ge(seq_of(r), 2);
		if (seq == 0)
			seq = seq_of(r);
		ck_assert_uint_eq(seq_of(r), seq);
		ck_assert(r->tp->has_timestamp);
		ck_assert_uint_eq(r->tp->timestamp, k + 1);

		exp = malloc(sizes[k] + 64);
		elen = expected_packet(k, sizes[k], exp, sizes[k] + 64);
		at = memmem(r->data, r->len, exp, elen);
		ck_assert_msg(at != NULL, "packet %u bytes differ", k);
		/* Only the writer's own header fields may precede our bytes. */
		ck_assert_uint_le((size_t)(at - r->data), 4);

		tp = trailer;
		tp = varint_put(tp, 3u << 3);
		tp = varint_put(tp, (uint64_t)(int64_t)(int32_t)getuid());
		tp = varint_put(tp, 10u << 3);
		tp = varint_put(tp, seq);
		tp = varint_put(tp, 79u << 3);
		tp = varint_put(tp, (uint64_t)getpid());
		if (k == 0) {
			/* traced flags the first packet it reads of a sequence */
			tp = varint_put(tp, 42u << 3);
			tp = varint_put(tp, 1);
		}
		tlen = (size_t)(tp - trailer);
		ck_assert_uint_eq(r->len, (size_t)(at - r->data) + elen + tlen);
		ck_assert_msg(memcmp(at + elen, trailer, tlen) == 0, "packet %u trailer differs", k);
		ck_assert_int_eq(r->tp->trusted_pid, getpid());
		free(exp);
		k++;
	}
	ck_assert_uint_eq(k, n);
}

void check_head(const struct trace_file *t)
{
	const struct rec *cfg, *si, *last;

	ck_assert_uint_ge(t->n, 6);
	/* A reader wants the clocks before anything else. */
	ck_assert_int_eq(t->recs[0].tp->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT);
	ck_assert_int_eq(t->recs[0].tp->clock_snapshot->primary_trace_clock,
			 PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_BOOTTIME);
	ck_assert_uint_ge(t->recs[0].tp->clock_snapshot->n_clocks, 6);
	ck_assert_uint_eq(t->recs[0].tp->clock_snapshot->clocks[0]->clock_id, 6);
	ck_assert_uint_eq(seq_of(&t->recs[0]), 1);
	cfg = find_case(t, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG);
	ck_assert_ptr_nonnull(cfg);
	ck_assert_uint_eq(cfg->tp->trace_config->n_data_sources, 1);
	ck_assert_int_eq(strncmp(cfg->tp->trace_config->data_sources[0]->config->name, DS_NAME, strlen(DS_NAME)), 0);
	ck_assert_ptr_nonnull(find_case(t, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_UUID));
	ck_assert_ptr_nonnull(find_case(t, PERFETTO__PROTOS__TRACE_PACKET__DATA_SYNCHRONIZATION_MARKER));
	si = find_case(t, PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO);
	ck_assert_ptr_nonnull(si);
	ck_assert_ptr_nonnull(si->tp->system_info->utsname);
	ck_assert_str_eq(si->tp->system_info->utsname->sysname, "Linux");
	ck_assert_uint_eq(count_event(t, PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_STARTED), 1);
	ck_assert_uint_eq(count_event(t, PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_DISABLED), 1);
	last = &t->recs[t->n - 1];
	ck_assert_int_eq(last->tp->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS);
}

