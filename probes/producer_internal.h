/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared between the producer's files; nothing outside probes/ includes it.
 * The files form layers, each calling only the ones below it:
 *
 *   producer.c         public API, handshake, registration, the command stream
 *   producer_ds.c      data-source instances: setup, start, stop, flush, notices
 *   producer_commit.c  CommitData
 *   producer_rpc.c     ProducerPort method calls
 *   producer_relay.c   the RelayPort connection of a remote machine (clock sync)
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "probes/ds/ds.h"
#include "probes/producer.h"
#include "smb/smb.h"

enum producer_method {
	PRODUCER_METHOD_INITIALIZE_CONNECTION,
	PRODUCER_METHOD_REGISTER_DATA_SOURCE,
	PRODUCER_METHOD_UNREGISTER_DATA_SOURCE,
	PRODUCER_METHOD_COMMIT_DATA,
	PRODUCER_METHOD_GET_ASYNC_COMMAND,
	PRODUCER_METHOD_REGISTER_TRACE_WRITER,
	PRODUCER_METHOD_UNREGISTER_TRACE_WRITER,
	PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STARTED,
	PRODUCER_METHOD_NOTIFY_DATA_SOURCE_STOPPED,
	_PRODUCER_METHOD_MAX,
	_PRODUCER_METHOD_INVALID = -EINVAL,
};

/* One data-source instance the service set up on this connection. */
struct producer_ds {
	struct producer_ds *next;
	struct producer *producer;
	const struct ds_ops *ops;
	void *inst;               /* what ops->setup() made; NULL if it failed */
	uint64_t id;
	uint64_t tracing_session_id;
	struct smb_writer *writer;
	bool started;
	bool starting;            /* its start returned DS_START_LATER: acked when it reports */
	uint64_t start_asked_ns;  /* CLOCK_MONOTONIC of StartDataSource */
	bool failed;              /* setup failed: answer Start/Stop, record nothing */
};

struct producer {
	struct loop *event;
	const struct ds_ops *const *kinds;    /* NULL-terminated */
	void *const *shared;                  /* indexed like kinds, or NULL */
	struct producer_hooks hooks;
	void *userdata;

	struct ipc_client *client;
	uint32_t service_id;
	int method_ids[_PRODUCER_METHOD_MAX];
	unsigned registered_sent, registered_replies;
	bool emulation;
	bool dead;
	uint32_t smb_size_hint;

	struct smb *smb;
	void *emulation_buf;
	struct loop_source *commit_source;   /* deferred commit after a burst of writes */
	uint64_t pending_flush_id;        /* highest flush to acknowledge */
	bool in_commit;
	bool final_flush;                 /* producer_set_final_flush() */
	/*
	 * Shared memory emulation (producer_commit.c): chunks taken from the
	 * SMB and not sent yet, because the socket's send queue was at its
	 * mark, and the patches and flush acks that must follow them.  The
	 * chunks stay Complete in the SMB until sent, so a service slower than
	 * the data fills the SMB (writers drop and count) instead of the
	 * queue overflowing and the connection being dropped.
	 */
	struct smb_chunk_move *em_moves;
	size_t em_n_moves, em_cap_moves;
	struct smb_patch *em_patches;
	size_t em_n_patches, em_cap_patches;
	struct loop_source *em_retry;     /* send the rest once the queue went down */
	uint64_t em_waits;                /* times the queue was at its mark */

	struct producer_ds *instances;
	uint16_t last_writer_id;

	/* producer_set_machine(): said on TCP/vsock, with a relay connection */
	bool has_identity;
	char *machine_id_hint, *machine_name;
	char *relay_address;              /* NULL: the producer's */
	struct producer_relay *relay;
};

/* ---- producer_relay.c --------------------------------------------------- */

struct producer_relay;
struct loop;

/*
 * producer_relay_new - a second connection to @address that identifies as
 * @id, binds RelayPort, sends this machine's SystemInfo and keeps the
 * clocks in step.  Failures after the connect are logged, never fatal.
 */
int producer_relay_new(struct loop *e, const char *address, const struct ipc_identity *id,
		       struct producer_relay **ret);
struct producer_relay *producer_relay_free(struct producer_relay *r);
/* Clock-sync rounds (PING + UPDATE) completed. */
uint64_t producer_relay_rounds(const struct producer_relay *r);

/* ---- producer_ds.c ------------------------------------------------------ */

struct Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource;
struct Perfetto__Protos__GetAsyncCommandResponse__Flush;
struct Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState;

/*
 * SetupDataSource: a new instance; a failed setup is kept (failed) to answer
 * Start/Stop.  @refusal, when not NULL, says why the command's config is
 * refused (a string with a NUL inside): the instance is kept failed.
 */
int producer_ds_setup(struct producer *p,
		      const struct Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource *cmd,
		      const char *refusal);
/* StartDataSource; a @refusal as above fails an instance not yet started. */
void producer_ds_start(struct producer *p, uint64_t id, const char *refusal);
/* StopDataSource: report, free, then tell the service. */
void producer_ds_stop(struct producer *p, uint64_t id);
/* Flush the named instances, then one CommitData carrying the ack. */
void producer_ds_flush(struct producer *p,
		       const struct Perfetto__Protos__GetAsyncCommandResponse__Flush *f);
void producer_ds_clear_incremental(
	struct producer *p,
	const struct Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState *c);
/* Tear every instance down without a word to the service (producer_free). */
void producer_ds_destroy_all(struct producer *p);
/*
 * The per-CPU counts of @r added into its totals, over all r->n_cpus CPUs
 * (what the data source left in the totals is kept).
 */
void producer_ds_report_sum(struct ds_report *r);

/* ---- producer_commit.c -------------------------------------------------- */

/**
 * producer_commit - send one CommitData with every chunk released and every
 * patch completed so far, acknowledging flush @flush_id if non-zero.
 */
int producer_commit(struct producer *p, uint64_t flush_id);
/* Schedule a commit at the next turn of the loop (coalesces bursts). */
void producer_commit_soon(struct producer *p);
/* The SMB's commit hook: enough chunks are waiting, commit now. */
void producer_commit_hook(void *userdata);

/* ---- producer_rpc.c ----------------------------------------------------- */

const char *producer_method_name(enum producer_method method);
/* Packs @m and invokes @method; @cb NULL drops the reply. */
int producer_invoke(struct producer *p, enum producer_method method, const ProtobufCMessage *m,
		    ipc_client_reply_cb cb);
