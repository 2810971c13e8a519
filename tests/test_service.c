/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process service against a fake producer built from the project's
 * own IPC client and SMB writer, over a real AF_UNIX socket: the startup
 * handshake, SetupTracing with the memfd, Setup/Start, packets (some larger
 * than a chunk) committed and written to the file byte for byte with the
 * trusted fields appended, the Flush / ack / Stop / stopped sequence, and
 * the failure paths (calls before InitializeConnection, bad CommitData
 * entries, unacked flushes, a producer that goes away).
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
#include "smb/pbw.h"
#include "smb/smb.h"
#include "util/util.h"
#include "util/util_varint.h"

#define DS_NAME "test.ds"
#define TIMEOUT_MS 5000
/* The payload field of the test packets: any id not reserved for the service. */
#define PAYLOAD_FIELD 1001u

static uint64_t mono_ms(void)
{
	return now_ns(CLOCK_MONOTONIC) / 1000000;
}

#define RUN_UNTIL(e, cond, ms)                                                  \
	({                                                                      \
		uint64_t _dl = mono_ms() + (ms);                                \
		while (!(cond) && mono_ms() < _dl)                              \
			ck_assert_int_ge(event_run((e), 20 * 1000), 0);      \
		(bool)(cond);                                                   \
	})

/* ---- fixture: a service listening on a socket in a temp dir -------------- */

struct fx {
	struct event *e;
	struct svc *svc;
	char dir[64];
	char sock[96];
	char out[96];
	int out_fd;
	struct svc_session *ss;
	bool done;
	int done_error;
	bool all_started;
};

static void fx_init(struct fx *fx, const struct svc_options *o)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/tp-svc-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fx->dir));
	snprintf(fx->sock, sizeof(fx->sock), "%s/producer.sock", fx->dir);
	snprintf(fx->out, sizeof(fx->out), "%s/out.pftrace", fx->dir);
	ck_assert_int_ge(event_new(&fx->e), 0);
	ck_assert_int_eq(svc_new(fx->e, o, &fx->svc), 0);
	ck_assert_int_eq(svc_listen(fx->svc, fx->sock), 0);
	fx->out_fd = open(fx->out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fx->out_fd, 0);
}

static void fx_done(struct fx *fx)
{
	fx->ss = svc_session_free(fx->ss);
	fx->svc = svc_free(fx->svc);
	closep(&fx->out_fd);
	(void)unlink(fx->out);
	(void)unlink(fx->sock);
	(void)rmdir(fx->dir);
	event_unref(fx->e);
}

static void on_done(struct svc_session *ss, int error, void *userdata)
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

static void on_done_free(struct svc_session *ss, int error, void *userdata)
{
	struct fx *fx = userdata;

	ck_assert_ptr_eq(ss, fx->ss);
	fx->ss = svc_session_free(ss);
	fx->done = true;
	fx->done_error = error;
}

static Perfetto__Protos__TraceConfig *make_config(uint32_t flush_timeout_ms, uint32_t stop_timeout_ms)
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

static void free_config(Perfetto__Protos__TraceConfig *cfg)
{
	free(cfg->data_sources[0]->config->name);
	free(cfg->data_sources[0]->config);
	free(cfg->data_sources[0]);
	free(cfg->data_sources);
	free(cfg->buffers[0]);
	free(cfg->buffers);
	free(cfg);
}

static void fx_start(struct fx *fx, uint32_t flush_timeout_ms, uint32_t stop_timeout_ms)
{
	Perfetto__Protos__TraceConfig *cfg = make_config(flush_timeout_ms, stop_timeout_ms);
	struct svc_session_hooks h = { .done = on_done, .all_started = on_all_started };

	ck_assert_int_eq(svc_session_start(fx->svc, cfg, fx->out_fd, &h, fx, &fx->ss), 0);
	ck_assert_uint_gt(svc_session_id(fx->ss), 0);
	free_config(cfg);
}

/* ---- the fake producer -------------------------------------------------- */

enum {
	M_INIT = 1, M_REGISTER, M_UNREGISTER, M_COMMIT, M_GET_ASYNC, M_REG_WRITER, M_UNREG_WRITER,
	M_STARTED, M_STOPPED, M_TRIGGERS, M_SYNC, M_UPDATE, _M_MAX,
};
static const char *const method_names[_M_MAX] = {
	[M_INIT] = "InitializeConnection", [M_REGISTER] = "RegisterDataSource",
	[M_UNREGISTER] = "UnregisterDataSource", [M_COMMIT] = "CommitData",
	[M_GET_ASYNC] = "GetAsyncCommand", [M_REG_WRITER] = "RegisterTraceWriter",
	[M_UNREG_WRITER] = "UnregisterTraceWriter", [M_STARTED] = "NotifyDataSourceStarted",
	[M_STOPPED] = "NotifyDataSourceStopped", [M_TRIGGERS] = "ActivateTriggers",
	[M_SYNC] = "Sync", [M_UPDATE] = "UpdateDataSource",
};

struct fp {
	struct ipc_client *c;
	uint32_t sid;
	bool bound;
	uint32_t mid[_M_MAX];

	/* InitializeConnection */
	bool init_replied;
	int init_error;
	bool init_had_fd;
	bool use_emulation;
	bool direct_patching;

	/* commands, in arrival order: T setup tracing, S setup ds, s start,
	 * F flush, P stop, C clear incremental state; Y a Sync reply */
	char log[64];
	size_t n_log;
	bool stream_ended;
	int stream_error;
	int smb_fd;
	bool setup_tracing_had_fd;
	uint32_t page_kb;
	uint64_t ds_id;
	uint32_t target_buffer;
	uint64_t session_id;
	uint32_t duration_ms;
	uint32_t stop_timeout_ms;
	uint64_t start_id;
	uint64_t flush_id;
	uint64_t flush_flags;
	uint64_t flush_ds;
	uint64_t stop_id;

	/* behaviour */
	bool ack_flush;
	bool ack_stop;

	struct smb *smb;
	struct smb_writer *w;
	void *local;            /* shmem emulation: the producer's own buffer */
	size_t local_size;
	int rejected;
	int replies;
	bool incremental;       /* descriptor: handles_incremental_state_clear */
	int n_flush;
	int n_clear;
	/* every instance set up, each with its own writer (id = index + 1) */
	struct {
		uint64_t id;
		uint32_t target_buffer;
		struct smb_writer *w;
	} ds[4];
	size_t n_ds;
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

static void on_generic_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
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

static void on_sync_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
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

static void on_init_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
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

static void fp_invoke(struct fp *f, int method, const ProtobufCMessage *m, ipc_client_reply_cb cb)
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
static void fp_commit(struct fp *f, uint64_t flush_id)
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

static void fp_open(struct fp *f, struct fx *fx)
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
static void fp_connect(struct fp *f, struct fx *fx, uint32_t page_hint, uint32_t size_hint)
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

static void fp_register_name(struct fp *f, const char *name, bool notify, bool log_reply)
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

static void fp_register(struct fp *f, bool notify)
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

static void fp_close(struct fp *f)
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
static bool nested_mode;
#define NESTED_FIELD 1002u

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

static void writer_write(struct smb_writer *sw, unsigned i, size_t size)
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

static void fp_write(struct fp *f, unsigned i, size_t size)
{
	writer_write(f->w, i, size);
}

/* ---- reading the output --------------------------------------------------- */

struct rec {
	const uint8_t *data;
	size_t len;
	Perfetto__Protos__TracePacket *tp;
};

struct trace_file {
	char *buf;
	size_t len;
	struct rec *recs;
	size_t n;
};

static void trace_load(struct trace_file *t, const char *path)
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

static void trace_free(struct trace_file *t)
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

static size_t count_event(const struct trace_file *t, Perfetto__Protos__TracingServiceEvent__EventTypeCase c)
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
static void check_producer_packets(const struct trace_file *t, const size_t *sizes, unsigned n)
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

static void check_head(const struct trace_file *t)
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

/* ---- tests ------------------------------------------------------------ */

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
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_session_roundtrip);
	tcase_add_test(tc, test_reject_before_initialize);
	tcase_add_test(tc, test_bad_commit_entries);
	tcase_add_test(tc, test_flush_timeout);
	tcase_add_test(tc, test_producer_disconnect);
	tcase_add_test(tc, test_late_registration_and_sync);
	tcase_add_test(tc, test_duration_and_config_errors);
	tcase_add_test(tc, test_shmem_emulation);
	tcase_add_test(tc, test_periodic_flush_and_clear);
	tcase_add_test(tc, test_write_errors);
	tcase_add_test(tc, test_max_file_size);
	tcase_add_test(tc, test_two_sessions);
	tcase_add_test(tc, test_patched_packets);
	tcase_add_test(tc, test_malformed_chunks);
	tcase_add_test(tc, test_producer_config_and_teardown);
	tcase_add_test(tc, test_hostile_producer);
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
