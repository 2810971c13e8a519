/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared by the service suites (test_service, test_service_faults): a
 * service listening on a socket in a temp dir (fx_*), a fake producer
 * built from the project's own IPC client and SMB writer (fp_*), the
 * packets it writes, and a reader of the output file (trace_*, check_*).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "protos/perfetto/trace/trace_packet.pb-c.h"
#include "protos/perfetto/trace/perfetto/tracing_service_event.pb-c.h"
#include "service/service.h"
#include "smb/smb.h"

#define DS_NAME "test.ds"
#define TIMEOUT_MS 5000
/* The payload field of the test packets: any id not reserved for the service. */
#define PAYLOAD_FIELD 1001u
/* When set, the payload sits inside a nested message (NESTED_FIELD), whose
 * 4-byte length the SMB writer has to patch when it spans chunks. */
#define NESTED_FIELD 1002u
extern bool nested_mode;

uint64_t mono_ms(void);

/* Runs @e until @cond holds or @ms pass; evaluates to @cond. */
#define RUN_UNTIL(e, cond, ms)                                                  \
	({                                                                      \
		uint64_t _dl = mono_ms() + (ms);                                \
		while (!(cond) && mono_ms() < _dl)                              \
			ck_assert_int_ge(loop_run_once((e), 20 * 1000), 0);      \
		(bool)(cond);                                                   \
	})

/* A service listening on a socket in a temp dir, and its one session. */
struct fx {
	struct loop *e;
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

/* ProducerPort methods, in the order the fake producer binds them. */
enum {
	M_INIT = 1, M_REGISTER, M_UNREGISTER, M_COMMIT, M_GET_ASYNC, M_REG_WRITER, M_UNREG_WRITER,
	M_STARTED, M_STOPPED, M_TRIGGERS, M_SYNC, M_UPDATE, _M_MAX,
};

/* The fake producer: the project's IPC client and SMB writer. */
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

/* The output file, packet by packet. */
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

void fx_init(struct fx *fx, const struct svc_options *o);
void fx_done(struct fx *fx);
void on_done(struct svc_session *ss, int error, void *userdata);
void on_done_free(struct svc_session *ss, int error, void *userdata);
Perfetto__Protos__TraceConfig *make_config(uint32_t flush_timeout_ms, uint32_t stop_timeout_ms);
void free_config(Perfetto__Protos__TraceConfig *cfg);
void fx_start(struct fx *fx, uint32_t flush_timeout_ms, uint32_t stop_timeout_ms);
void on_generic_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
		      int fd, void *userdata);
void on_sync_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
		   int fd, void *userdata);
void on_init_reply(struct ipc_client *c, int error, const uint8_t *p, size_t len, bool has_more,
		   int fd, void *userdata);
void fp_invoke(struct fp *f, int method, const ProtobufCMessage *m, ipc_client_reply_cb cb);
void fp_commit(struct fp *f, uint64_t flush_id);
void fp_open(struct fp *f, struct fx *fx);
void fp_connect(struct fp *f, struct fx *fx, uint32_t page_hint, uint32_t size_hint);
void fp_register_name(struct fp *f, const char *name, bool notify, bool log_reply);
void fp_register(struct fp *f, bool notify);
void fp_close(struct fp *f);
void writer_write(struct smb_writer *sw, unsigned i, size_t size);
void fp_write(struct fp *f, unsigned i, size_t size);
void trace_load(struct trace_file *t, const char *path);
void trace_free(struct trace_file *t);
size_t count_event(const struct trace_file *t, Perfetto__Protos__TracingServiceEvent__EventTypeCase c);
void check_producer_packets(const struct trace_file *t, const size_t *sizes, unsigned n);
void check_head(const struct trace_file *t);
