/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Shared by the two files of the RPC host, bottom up: ipc_conn.c (one
 * connection of the host and a pending reply on it: references, accessors,
 * sending InvokeMethodReply) and ipc_host.c (listening, accepting, the
 * table of services and the dispatch of a connection's frames to them).
 * ipc_host.c calls ipc_conn.c only; ipc_conn.c never looks into the host,
 * it only tests whether a connection still has one.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/ipc.h"

struct ipc_conn {
	unsigned n_ref;
	struct ipc_host *host; /* NULL once detached from the host */
	struct ipc_conn *prev;
	struct ipc_conn *next;
	struct ipc_channel *ch; /* NULL once disconnected */
	uint64_t id;
	int *frame_fd;

	struct ipc_peer peer;
	bool have_peer;
	bool peer_from_identity;
	/* SetPeerIdentity's machine (TCP/vsock): 0 is this machine's */
	uint32_t machine_id;
	char *machine_name;

	void *userdata;
};

struct ipc_reply {
	unsigned n_ref;
	struct ipc_conn *conn;
	uint64_t request_id;
	bool wanted;
	bool done;
};

/* ---- ipc_conn.c -------------------------------------------------------- */
/* Send @f (and @fd, or -EBADF) on @conn; -ENOTCONN once it left its host. */
int ipc_conn_send_frame(struct ipc_conn *conn, const Perfetto__Protos__IPCFrame *f, int fd);
/* InvokeMethodReply for @request_id; the payload only goes out on @success. */
int ipc_conn_send_invoke_reply(struct ipc_conn *conn, uint64_t request_id, bool success, bool has_more,
			       const void *data, size_t len, int fd);
/* A reply for @request_id holding a reference on @conn, with two references
 * of its own: one for the method's handler, one for the dispatcher across
 * the call.  NULL when out of memory. */
struct ipc_reply *ipc_reply_new(struct ipc_conn *conn, uint64_t request_id, bool wanted);
struct ipc_reply *ipc_reply_unref(struct ipc_reply *reply);
