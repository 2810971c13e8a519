/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared by the files of service/ only.  The service mirrors traced's
 * objects: producers (one per connection), registered data sources,
 * tracing sessions with their buffers, data source instances and pending
 * flushes.  Ids follow traced: producer, data source instance, flush
 * request and session ids count from 1; buffer ids are global, from 1,
 * handed out round-robin.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "loop/loop.h"

#include <string.h>

#include "protos/perfetto/common/commit_data_request.pb-c.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "service/service.h"
#include "util/util.h"

struct ipc_conn;
struct ipc_host;
struct ipc_reply;
struct smb_reader;
struct svc_trace;

static inline bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* ---- tiny intrusive doubly linked list ---------------------------------- */

#define SVC_LIST_FIELDS(type, name) type *name##_next, *name##_prev
#define SVC_LIST_HEAD(type, name) type *name##_head, *name##_tail

#define SVC_LIST_APPEND(name, owner, item)                         \
	do {                                                       \
		(item)->name##_next = NULL;                        \
		(item)->name##_prev = (owner)->name##_tail;        \
		if ((owner)->name##_tail)                          \
			(owner)->name##_tail->name##_next = (item); \
		else                                               \
			(owner)->name##_head = (item);             \
		(owner)->name##_tail = (item);                     \
	} while (0)

#define SVC_LIST_INSERT_BEFORE(name, owner, before, item)          \
	do {                                                       \
		(item)->name##_next = (before);                    \
		(item)->name##_prev = (before)->name##_prev;       \
		if ((before)->name##_prev)                         \
			(before)->name##_prev->name##_next = (item); \
		else                                               \
			(owner)->name##_head = (item);             \
		(before)->name##_prev = (item);                    \
	} while (0)

#define SVC_LIST_REMOVE(name, owner, item)                                  \
	do {                                                                \
		if ((item)->name##_prev)                                    \
			(item)->name##_prev->name##_next = (item)->name##_next; \
		else                                                        \
			(owner)->name##_head = (item)->name##_next;         \
		if ((item)->name##_next)                                    \
			(item)->name##_next->name##_prev = (item)->name##_prev; \
		else                                                        \
			(owner)->name##_tail = (item)->name##_prev;         \
		(item)->name##_next = (item)->name##_prev = NULL;           \
	} while (0)

/* ---- constants mirrored from traced v58.2 ------------------------------- */

#define SVC_MAX_PRODUCER_ID 65535u
#define SVC_MAX_BUFFER_ID 65535u
#define SVC_MAX_BUFFERS_PER_SESSION 128u
#define SVC_MAX_WRITER_ID 32767u
/* svc_producer.writers[]: registered, target buffer in the low 16 bits. */
#define SVC_WRITER_REGISTERED (1u << 16)
#define SVC_DEFAULT_SHM_PAGE (4u * 1024)
#define SVC_DEFAULT_SHM_SIZE (256u * 1024)
#define SVC_MAX_SHM_PAGE (32u * 1024)
#define SVC_MAX_SHM_SIZE (32u * 1024 * 1024)
#define SVC_DEFAULT_FLUSH_TIMEOUT_MS 5000u
#define SVC_DEFAULT_STOP_TIMEOUT_MS 5000u
#define SVC_DEFAULT_SNAPSHOT_MS 10000u
#define SVC_ALL_STARTED_TIMEOUT_MS 20000u
#define SVC_MAX_DURATION_MS (7u * 24 * 3600 * 1000)
#define SVC_MAX_PENDING_FLUSHES 1000u
#define SVC_MAX_PATCHES_PER_CHUNK 1024u
/* SharedMemoryABI::Chunk::kMaxSize: an inline chunk larger is dropped. */
#define SVC_MAX_INLINE_CHUNK 65536u
#define SVC_SERVICE_SEQUENCE_ID 1u
#define SVC_MAX_LISTED_SLOW_DS 32u
/* Not a traced limit: bounds what one producer can make us keep. */
#define SVC_MAX_DS_PER_PRODUCER 1024u

/* FlushFlags (include/perfetto/tracing/core/flush_flags.h). */
#define SVC_FLUSH_REASON_PERIODIC 1u
#define SVC_FLUSH_REASON_TRACE_STOP 2u
#define SVC_FLUSH_REASON_EXPLICIT 4u
#define SVC_FLUSH_INITIATOR_TRACED (1u << 4)

/* TracingServiceEvent field numbers (the lifecycle markers). */
enum svc_event {
	SVC_EVENT_ALL_DATA_SOURCES_STARTED = 1,
	SVC_EVENT_TRACING_STARTED = 2,
	SVC_EVENT_ALL_DATA_SOURCES_FLUSHED = 3,
	SVC_EVENT_READ_TRACING_BUFFERS_COMPLETED = 4,
	SVC_EVENT_TRACING_DISABLED = 5,
	SVC_EVENT_SLOW_STARTING_DATA_SOURCES = 7,
	SVC_EVENT_LAST_FLUSH_SLOW_DATA_SOURCES = 8,
	SVC_EVENT_FLUSH_STARTED = 9,
};

/* ---- objects ----------------------------------------------------------- */

struct svc_producer;
struct svc_session;

/* A data source a producer registered (traced's RegisteredDataSource). */
struct svc_ds_reg {
	struct svc_producer *producer;
	char *name;
	uint64_t id;
	bool will_notify_on_start;
	bool will_notify_on_stop;
	bool handles_incremental_state_clear;
	bool no_flush;
	SVC_LIST_FIELDS(struct svc_ds_reg, regs);  /* svc-wide, registration order */
};

enum svc_ds_state {
	SVC_DS_CONFIGURED,
	SVC_DS_STARTING,
	SVC_DS_STARTED,
	SVC_DS_STOPPING,
	SVC_DS_STOPPED,
};

/* One data source instance of a session on one producer. */
struct svc_ds_inst {
	struct svc_session *session;
	struct svc_producer *producer;
	uint64_t id;
	char *name;
	Perfetto__Protos__DataSourceConfig *config; /* as sent to the producer */
	enum svc_ds_state state;
	bool will_notify_on_start;
	bool will_notify_on_stop;
	bool handles_incremental_state_clear;
	bool no_flush;
	/* session list, ordered by producer id like traced's multimap */
	SVC_LIST_FIELDS(struct svc_ds_inst, insts);
};

/* One trace buffer of a session: a global BufferID and traced's stats. */
struct svc_buffer {
	uint16_t id;
	uint64_t size;
	bool discard;
	uint64_t bytes_written;
	uint64_t chunks_written;
	uint64_t chunks_discarded;
	uint64_t abi_violations;
	uint64_t patches_succeeded;
	uint64_t patches_failed;
	uint64_t bytes_read;
	uint64_t packets_read;
	uint64_t trace_writer_packet_loss;
};

/* (producer, writer) -> trusted_packet_sequence_id within a session. */
struct svc_seq {
	uint16_t producer_id;
	uint16_t writer_id;
	uint32_t seq_id;
	uint32_t buffer_index;
	uint64_t chunks;
};

struct svc_flush {
	struct svc_session *session;
	uint64_t id;
	uint64_t flags;
	bool completed;             /* waiting for the completion turn */
	bool success;
	uint16_t *producers;        /* still to ack */
	size_t n_producers;
	struct loop_source *timer;
	void (*cb)(struct svc_session *ss, bool ok, void *userdata);
	void *userdata;
	bool final;                 /* the flush before stopping */
	SVC_LIST_FIELDS(struct svc_flush, flushes);
};

enum svc_session_state {
	SVC_SESSION_STARTED,
	SVC_SESSION_DISABLING,   /* waiting for NotifyDataSourceStopped */
	SVC_SESSION_DISABLED,
};

struct svc_session {
	struct svc *svc;
	uint64_t id;
	Perfetto__Protos__TraceConfig *config;   /* a copy, uuid filled in */
	enum svc_session_state state;
	bool stop_requested;     /* the final flush is under way */
	bool started;            /* svc_session_start() went through */
	bool done;
	bool done_notified;
	bool all_started_notified;
	int error;
	struct svc_session_hooks hooks;
	void *userdata;

	struct svc_buffer *buffers;
	size_t n_buffers;

	SVC_LIST_HEAD(struct svc_ds_inst, insts);
	SVC_LIST_HEAD(struct svc_flush, flushes);

	struct svc_seq *seqs;
	size_t n_seqs, cap_seqs;
	uint32_t last_seq_id;
	size_t last_seq_hit;

	struct svc_trace *trace;

	uint64_t uuid_msb, uuid_lsb;
	bool remote_machines_written;   /* svc_packets_remote_machines() ran */
	uint32_t flush_timeout_ms;
	uint32_t stop_timeout_ms;
	uint32_t flush_period_ms;
	uint32_t clear_period_ms;
	uint64_t max_file_size;
	int final_flush_outcome;  /* 0 unspecified, 1 ok, 2 failed */

	struct loop_source *duration_timer;
	struct loop_source *stop_timer;
	struct loop_source *flush_period_timer;
	struct loop_source *clear_timer;
	struct loop_source *snapshot_timer;
	struct loop_source *all_started_timer;
	struct loop_source *flush_defer;   /* completes acked / timed out flushes */
	struct loop_source *end_defer;     /* disables after a write error / size cap */
	loop_handler_t end_handler;        /* end_defer's, installed by svc_session.c */
	struct loop_source *done_defer;    /* runs the done hook */
	bool write_stopped;
	bool end_immediately;
	bool released;                  /* buffers handed back */

	struct svc_session_stats stats;

	SVC_LIST_FIELDS(struct svc_session, sessions);
};

/*
 * Something to send on the next loop turn, like traced's posted tasks: a
 * command on the GetAsyncCommand stream (@reply NULL) or the reply to a
 * Sync.  Keeping them in one queue per producer keeps traced's order: the
 * reply to a request goes out before the commands it caused, and a Sync
 * reply after every command caused by what came before it.
 */
struct svc_out {
	struct ipc_reply *reply;
	uint8_t *data;
	size_t len;
	bool with_smb_fd;
	SVC_LIST_FIELDS(struct svc_out, outs);
};

struct svc_producer {
	struct svc *svc;
	struct ipc_conn *conn;
	uint16_t id;                /* 0 until InitializeConnection */
	bool initialized;
	bool disconnected;
	char *name;
	char *sdk_version;
	uid_t uid;
	pid_t pid;
	bool have_pid;
	uint32_t shm_size_hint;
	uint32_t page_size_hint;
	bool emulation;             /* no fd passing: chunks come inline */
	size_t n_regs;              /* data sources registered */
	/* its machine (SetPeerIdentity over TCP/vsock), taken at InitializeConnection
	 * (producers) or at the first RelayPort call; 0 is this machine */
	uint32_t machine_id;
	char *machine_name;
	struct svc_relay *relay;    /* what its RelayPort calls said; NULL if none */

	/* the SMB, created at the first SetupDataSource */
	int smb_fd;
	void *smb_base;
	size_t smb_size;
	size_t page_size;
	struct smb_reader *reader;
	uint64_t reader_budget;

	/* the GetAsyncCommand stream */
	struct ipc_reply *async;
	bool setup_tracing_pending;

	/* RegisterTraceWriter: writer id -> (1 << 16) | buffer id, lazily */
	uint32_t *writers;
	uint16_t *allowed_buffers;
	size_t n_allowed;

	SVC_LIST_HEAD(struct svc_out, outs);
	SVC_LIST_FIELDS(struct svc_producer, producers);
};

struct svc {
	struct loop *event;
	struct svc_options opts;
	struct ipc_host *host;
	struct loop_source *out_defer;

	SVC_LIST_HEAD(struct svc_producer, producers);
	SVC_LIST_HEAD(struct svc_ds_reg, regs);
	SVC_LIST_HEAD(struct svc_session, sessions);
	size_t n_producers;         /* initialized ones */
	size_t n_connections;
	size_t n_regs;

	uint16_t last_producer_id;
	uint16_t last_buffer_id;
	uint64_t last_ds_instance_id;
	uint64_t last_flush_id;
	uint64_t last_session_id;
	uint64_t chunks_discarded;
	uint64_t patches_discarded;
	size_t n_buffers;

	void (*producer_hook)(struct svc *s, void *userdata);
	void *producer_hook_userdata;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(struct svc *, svc_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct svc_session *, svc_session_free);

/*
 * The files of service/, bottom up; each calls only files listed above it
 * (tests/check_file_graph.py checks it):
 *   svc_shm.c, svc_validate.c, svc_trace.c   leaves
 *   svc_output.c    a session's file: records, producer packets, end of writing
 *   svc_packets.c   the service's own packets (sequence 1)
 *   svc_producer.c  one connection: command queue, SMB and reader, read pass
 *   svc_commit.c    CommitData: chunks moved into the reader, patches
 *   svc_session_disable.c  the end of a session: stop commands, the file finished
 *   svc_session_ds.c       data source instances: setup, start, producers' reports
 *   svc_session_flush.c    flushes: commands, acks, timeouts, completion
 *   svc_session.c   sessions: start, stop, periodic tasks, free
 *   svc_port.c      the ProducerPort methods, data source registry, disconnects
 *   svc_core.c      the service object: IPC host, the send turn, queries
 * Where a lower file must reach up it goes through a handler the upper one
 * installed (svc_session.end_handler).
 */

/* traced's clock for service events and packet timestamps. */
static inline uint64_t svc_now_boot_ns(void)
{
	return now_ns(CLOCK_BOOTTIME);
}

/* Arm a defer source of @ss's loop with @cb(@ss), creating it on first use.
 * Returns -ESHUTDOWN once the service is gone. */
static inline int svc_session_arm_defer(struct svc_session *ss, struct loop_source **src,
					loop_handler_t cb)
{
	int r;

	if (!ss->svc)
		return -ESHUTDOWN;
	if (!*src) {
		r = loop_add_defer(ss->svc->event, src, cb, ss);
		if (r < 0)
			return r;
	}
	return loop_source_set_enabled(*src, LOOP_ONESHOT);
}

/* ---- svc_shm.c --------------------------------------------------------- */
/* traced's EnsureValidShmSizes. */
void svc_shm_valid_sizes(size_t shm_size, size_t page_size, size_t *ret_shm, size_t *ret_page);
int svc_shm_create(size_t size, int *ret_fd, void **ret_base);

/* ---- svc_validate.c ---------------------------------------------------- */
/* traced's PacketStreamValidator: false if the packet must be dropped. */
bool svc_validate_packet(const uint8_t *data, size_t len);

/* ---- svc_trace.c: the output file -------------------------------------- */
int svc_trace_new(int fd, uint64_t max_size, struct svc_trace **ret);
struct svc_trace *svc_trace_free(struct svc_trace *t);
/* Append one record: @data then @trailer as one TracePacket.  Returns 0,
 * 1 when it would reach max_size (nothing written), -errno. */
int svc_trace_append(struct svc_trace *t, const uint8_t *data, size_t len, const uint8_t *trailer,
		     size_t tlen);
int svc_trace_flush(struct svc_trace *t);
uint64_t svc_trace_bytes(const struct svc_trace *t);

/* ---- svc_output.c: what goes into a session's file ---------------------- */
/* Append one record to the session file.  Reaching max_file_size_bytes
 * disables tracing as traced does; a write error fails the session (both
 * through ss->end_handler, on a loop turn of its own).
 * Returns 0 or the write error. */
int svc_output_write(struct svc_session *ss, const uint8_t *data, size_t len, const uint8_t *trailer,
		     size_t tlen);
/* After a read pass or a service packet: push the buffered records out. */
void svc_output_flush(struct svc_session *ss);
/* Write one reassembled producer packet, validated, with the trusted
 * fields appended (@buffer_index: into ss->buffers). */
int svc_output_packet(struct svc_session *ss, struct svc_producer *p, const uint8_t *data, size_t len,
		      uint16_t writer_id, uint32_t buffer_index, uint32_t previous_packet_dropped);

/* ---- svc_packets.c: the service's own packets (sequence 1) ------------- */
/* Each writes one packet to @ss's file now; returns 0 or the write error. */
int svc_packets_clock_snapshot(struct svc_session *ss);
int svc_packets_sync_marker(struct svc_session *ss);
int svc_packets_trace_config(struct svc_session *ss);
int svc_packets_uuid(struct svc_session *ss);
int svc_packets_provenance(struct svc_session *ss);
int svc_packets_system_info(struct svc_session *ss);
/* A TracingServiceEvent with a bool set at @field, stamped with @ts. */
int svc_packets_event(struct svc_session *ss, uint32_t field, uint64_t ts);
/* A TracingServiceEvent now (after a clock snapshot, with @snapshot_clocks,
 * so that it covers the event's timestamp), pushed out at once. */
void svc_packets_event_now(struct svc_session *ss, uint32_t field, bool snapshot_clocks);
/* slow_starting_data_sources / last_flush_slow_data_sources. */
int svc_packets_slow_data_sources(struct svc_session *ss, uint32_t field, bool (*pick)(const struct svc_ds_inst *i, const void *arg), const void *arg);
int svc_packets_trace_stats(struct svc_session *ss);
/* Each remote machine's SystemInfo and RemoteClockSync, once per session. */
int svc_packets_remote_machines(struct svc_session *ss);

/* ---- svc_relay.c: the RelayPort (svc_options.relay_endpoint) -------------- */

/* Clock readings of one side of a SyncClock call. */
#define SVC_RELAY_MAX_CLOCKS 16u
_Static_assert(SVC_RELAY_MAX_CLOCKS >= BUILTIN_CLOCKS_MAX, "the service's own clocks fit");
struct svc_clocks {
	uint32_t n;
	uint32_t id[SVC_RELAY_MAX_CLOCKS];
	uint64_t ts[SVC_RELAY_MAX_CLOCKS];
};

/*
 * Every builtin clock, read back to back in traced's order (TSC added on
 * x86-64 as traced does): the service's ClockSnapshot packets and its side
 * of a SyncClock.
 */
void svc_clocks_now(struct svc_clocks *c);

/* The last SyncClock exchanges kept, as traced keeps them. */
#define SVC_RELAY_SYNCS 5u

struct svc_relay {
	uint8_t *system_info;       /* InitRelay's SystemInfo, serialized */
	size_t system_info_len;
	struct {
		struct svc_clocks client, host;
	} sync[SVC_RELAY_SYNCS];
	unsigned n_sync;            /* the oldest first */
};

extern const char *const svc_relay_methods[];
extern const size_t svc_relay_n_methods;
/* A RelayPort call from @p's connection. */
int svc_relay_call(struct svc_producer *p, uint32_t method_id, const uint8_t *args, size_t len,
		   struct ipc_reply *reply);
struct svc_relay *svc_relay_free(struct svc_relay *r);
/* Take @p's machine identity from its connection (after SetPeerIdentity). */
void svc_producer_take_identity(struct svc_producer *p);

/* ---- svc_producer.c ---------------------------------------------------- */
int svc_producer_new(struct svc *s, struct ipc_conn *conn, struct svc_producer **ret);
/* Free @p (after svc_port_disconnected()).  Returns NULL. */
struct svc_producer *svc_producer_free(struct svc_producer *p);
/* Queue @out (taking it) and arm the loop turn that sends it. */
void svc_producer_queue(struct svc_producer *p, struct svc_out *out);
int svc_producer_send_command(struct svc_producer *p, const Perfetto__Protos__GetAsyncCommandResponse *cmd,
			      bool with_smb_fd);
/* Queue a command without the SMB fd; a failure is the connection's, logged
 * at debug. */
int svc_producer_send(struct svc_producer *p, Perfetto__Protos__GetAsyncCommandResponse *cmd);
/* Send everything queued (from the service's send turn). */
void svc_producer_flush_outbox(struct svc_producer *p);
/* GetAsyncCommand: @reply becomes the command stream (a held SetupTracing
 * goes out on it now). */
void svc_producer_bind_async(struct svc_producer *p, struct ipc_reply *reply);
/* Disconnected: drop what is queued and the command stream. */
void svc_producer_close(struct svc_producer *p);
int svc_producer_ensure_smb(struct svc_producer *p, const Perfetto__Protos__TraceConfig *cfg,
			    uint64_t budget);
bool svc_producer_buffer_allowed(const struct svc_producer *p, uint16_t buffer_id);
int svc_producer_allow_buffer(struct svc_producer *p, uint16_t buffer_id);
void svc_producer_disallow_buffer(struct svc_producer *p, uint16_t buffer_id);
bool svc_producer_in_session(const struct svc_producer *p, const struct svc_session *ss);
/* The buffer @id names in a running session, and that session. */
struct svc_buffer *svc_producer_buffer_by_id(const struct svc *s, uint16_t id,
					     struct svc_session **ret_session);
/* Read every complete packet out of the producer's reader into the sessions. */
void svc_producer_read(struct svc_producer *p, bool final);

/* ---- svc_commit.c ------------------------------------------------------ */
/* Move and patch the chunks of one CommitData (the reader must exist). */
void svc_commit_apply(struct svc_producer *p, const Perfetto__Protos__CommitDataRequest *req);

/* ---- what the svc_session*.c files share ------------------------------- */
/* (Re)arm *@src as a one-shot timer @ms from now. */
static inline int svc_session_arm_timer(struct svc_session *ss, struct loop_source **src, uint64_t ms,
					loop_time_handler_t cb, void *userdata)
{
	*src = loop_source_disable_unref(*src);
	return loop_add_time_relative(ss->svc->event, src, CLOCK_MONOTONIC, ms * 1000, 1000, cb,
				      userdata);
}

/* A deep copy of @m (through its wire form), or NULL when out of memory. */
static inline void *svc_copy_message(const ProtobufCMessage *m)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len = protobuf_c_message_get_packed_size(m);

	buf = malloc(len ? len : 1);
	if (!buf)
		return NULL;
	protobuf_c_message_pack(m, buf);
	return protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
}

/* ---- svc_session_disable.c: the end of a session ----------------------- */
/* traced's DisableTracing: stop every instance, finish at once when none
 * has to ack (or @immediately), else after the acks or the stop timeout. */
void svc_session_disable(struct svc_session *ss, bool immediately);
/* StopDataSource to @inst (STOPPING when it will ack, else STOPPED). */
void svc_session_disable_ds(struct svc_ds_inst *inst, bool immediately);
/* @inst is stopped; the last one of a disabling session finishes it. */
void svc_session_disable_ds_done(struct svc_session *ss, struct svc_ds_inst *inst);
/* traced's DisableTracingNotifyConsumerAndFlushFile, plus the final read. */
void svc_session_disable_finish(struct svc_session *ss);
/* The final flush of a stop completed (@ok: acked): disable. */
void svc_session_disable_after_flush(struct svc_session *ss, bool ok);
void svc_session_disable_timers(struct svc_session *ss);
/* Give the session's buffer ids back and take them from the producers. */
void svc_session_disable_buffers(struct svc_session *ss);

/* ---- svc_session_ds.c: data source instances --------------------------- */
/* The index into @cfg's buffers that @dc writes to: 0 or -errno. */
int svc_session_ds_target_buffer(const Perfetto__Protos__TraceConfig *cfg,
				 const Perfetto__Protos__DataSourceConfig *dc, uint32_t *ret);
/* A new instance of @reg for @cds in @ss, SetupDataSource sent.  Returns
 * it, or NULL when the filters do not match or on failure. */
struct svc_ds_inst *svc_session_ds_setup(struct svc_session *ss,
					 const Perfetto__Protos__TraceConfig__DataSource *cds,
					 struct svc_ds_reg *reg);
void svc_session_ds_start(struct svc_session *ss, struct svc_ds_inst *inst);
/* all_data_sources_started, once, when every instance is started. */
void svc_session_ds_all_started(struct svc_session *ss);
struct svc_ds_inst *svc_session_ds_free(struct svc_ds_inst *i);
/* A producer registered @reg: set it up (and start it) in running sessions. */
void svc_session_on_register(struct svc *s, struct svc_ds_reg *reg);
/* @reg goes away (unregister or disconnect): stop and forget its instances. */
void svc_session_on_unregister(struct svc *s, struct svc_ds_reg *reg);
void svc_session_on_ds_started(struct svc *s, struct svc_producer *p, uint64_t inst_id);
void svc_session_on_ds_stopped(struct svc *s, struct svc_producer *p, uint64_t inst_id);

/* ---- svc_session_flush.c: flushes -------------------------------------- */
/* Send Flush to every producer with instances (@final: the flush of a
 * stop).  Returns 0, -EBUSY, -ESHUTDOWN or -ENOMEM. */
int svc_session_flush_start(struct svc_session *ss, uint64_t flags, bool final,
			    void (*cb)(struct svc_session *, bool, void *), void *userdata);
struct svc_flush *svc_session_flush_free(struct svc_flush *f);
void svc_session_on_flush_ack(struct svc *s, struct svc_producer *p, uint64_t flush_id);

/* ---- svc_session.c ----------------------------------------------------- */
void svc_session_abort_all(struct svc *s);

/* ---- svc_port.c -------------------------------------------------------- */
/* The ProducerPort method names, in declaration order (ids: index + 1). */
extern const char *const svc_port_methods[];
extern const size_t svc_port_n_methods;
/* Dispatch one ProducerPort call (@method_id: 1-based, declaration order).
 * Returns < 0 for undecodable arguments (the host then rejects the call). */
int svc_port_call(struct svc_producer *p, uint32_t method_id, const uint8_t *args, size_t len,
		  struct ipc_reply *reply);
/* The connection is gone: undo the producer's registrations (idempotent). */
void svc_port_disconnected(struct svc_producer *p);
