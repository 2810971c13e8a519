/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared between the producer's files; nothing outside probes/ includes it. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "probes/producer.h"
#include "smb/smb.h"

#define PRODUCER_DS_FTRACE "linux.ftrace"
#define PRODUCER_DS_PROCESS_STATS "linux.process_stats"

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

enum producer_ds_kind {
	PRODUCER_DS_KIND_FTRACE,
	PRODUCER_DS_KIND_PROCFS,
	_PRODUCER_DS_KIND_MAX,
	_PRODUCER_DS_KIND_INVALID = -EINVAL,
};

struct ftrace_ds;
struct procfs_ds;

/* One data-source instance the service set up on this connection. */
struct producer_ds {
	struct producer_ds *next;
	struct producer *producer;
	enum producer_ds_kind kind;
	uint64_t id;
	uint64_t tracing_session_id;
	struct smb_writer *writer;
	struct ftrace_ds *ftrace;
	struct procfs_ds *procfs;
	bool started;
	bool failed;              /* setup failed: answer Start/Stop, record nothing */
};

struct producer {
	struct event *event;
	struct ftrace_host *ftrace;
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
	struct event_source *commit_source;   /* deferred commit after a burst of writes */
	uint64_t pending_flush_id;        /* highest flush to acknowledge */
	bool in_commit;

	struct producer_ds *instances;
	uint16_t last_writer_id;
	int32_t *pid_scratch;             /* pid list handed to /proc lookups */
	size_t pid_scratch_cap;
};

int producer_invoke(struct producer *p, enum producer_method method, const ProtobufCMessage *m,
		    ipc_client_reply_cb cb);
void producer_on_async_command(struct ipc_client *c, int error, const uint8_t *reply, size_t len,
			       bool has_more, int fd, void *userdata);
void producer_fail(struct producer *p, int error);
int producer_setup_smb(struct producer *p, uint32_t page_size_kb, int fd);
void producer_set_smb_size_hint(struct producer *p, uint32_t bytes);

/* producer_ds.c */
void producer_ds_destroy(struct producer *p, struct producer_ds *ds, bool notify);

/* producer_commit.c */
/**
 * producer_commit - send one CommitData with every chunk released and every
 * patch completed so far, acknowledging flush @flush_id if non-zero.
 */
int producer_commit(struct producer *p, uint64_t flush_id);
/* Schedule a commit at the next turn of the loop (coalesces bursts). */
void producer_commit_soon(struct producer *p);
void producer_commit_hook(void *userdata);
struct Perfetto__Protos__CommitDataRequest;
int producer_commit_patches_and_ack(struct producer *p, const struct smb_commit *c,
				    uint64_t flush_id, struct Perfetto__Protos__CommitDataRequest *req);
