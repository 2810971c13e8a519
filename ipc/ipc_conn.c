/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One connection of an RPC host (ipc_host.c) and a pending reply on it: the
 * references, what a service may ask of a connection during or after a
 * call, and the InvokeMethodReply frames a reply handle sends.
 *
 * Lifetimes: the host holds one reference on each of its connections; reply
 * handles hold a reference on their connection, so a service may keep a
 * stream open across a disconnect and only learns from ipc_reply_send()
 * (-ENOTCONN) or from its disconnect callback that the peer is gone.
 */

#include <errno.h>
#include <stdlib.h>

#include "ipc/ipc_internal.h"
#include "util/util.h"

/* ---- references ------------------------------------------------------------ */

struct ipc_conn *ipc_conn_ref(struct ipc_conn *conn)
{
	if (conn)
		conn->n_ref++;
	return conn;
}

struct ipc_conn *ipc_conn_unref(struct ipc_conn *conn)
{
	if (!conn || --conn->n_ref > 0)
		return NULL;
	ipc_channel_free(conn->ch);
	free(conn->machine_name);
	free(conn);
	return NULL;
}

struct ipc_reply *ipc_reply_new(struct ipc_conn *conn, uint64_t request_id, bool wanted)
{
	struct ipc_reply *reply = calloc(1, sizeof(*reply));

	if (!reply)
		return NULL;
	reply->n_ref = 2;
	reply->conn = ipc_conn_ref(conn);
	reply->request_id = request_id;
	reply->wanted = wanted;
	return reply;
}

struct ipc_reply *ipc_reply_unref(struct ipc_reply *reply)
{
	if (!reply || --reply->n_ref > 0)
		return NULL;
	ipc_conn_unref(reply->conn);
	free(reply);
	return NULL;
}

/* ---- sending ------------------------------------------------------------------- */

int ipc_conn_send_frame(struct ipc_conn *conn, const Perfetto__Protos__IPCFrame *f, int fd)
{
	if (!conn->ch || !conn->host)
		return -ENOTCONN;
	/* A failing send aborts the channel; the disconnect follows from the loop. */
	return ipc_channel_send_frame(conn->ch, f, fd);
}

int ipc_conn_send_invoke_reply(struct ipc_conn *conn, uint64_t request_id, bool success, bool has_more,
			       const void *data, size_t len, int fd)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__InvokeMethodReply rep = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;

	f.has_request_id = true;
	f.request_id = request_id;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
	f.msg_invoke_method_reply = &rep;
	rep.has_success = true;
	rep.success = success;
	rep.has_has_more = true;
	rep.has_more = has_more;
	if (success) {
		rep.has_reply_proto = true;
		rep.reply_proto.len = len;
		rep.reply_proto.data = (uint8_t *)data;
	}
	return ipc_conn_send_frame(conn, &f, fd);
}

int ipc_conn_send_reply(struct ipc_conn *conn, uint64_t request_id, bool success, bool has_more,
			const void *reply_proto, size_t len, int fd)
{
	if (!conn || (!reply_proto && len > 0))
		return -EINVAL;
	return ipc_conn_send_invoke_reply(conn, request_id, success, success && has_more, reply_proto, len, fd);
}

/* ---- connection accessors ------------------------------------------------- */

uint64_t ipc_conn_get_id(const struct ipc_conn *conn)
{
	return conn ? conn->id : 0;
}

int ipc_conn_get_peer(const struct ipc_conn *conn, struct ipc_peer *ret)
{
	if (!conn || !ret)
		return -EINVAL;
	if (!conn->have_peer) {
		if (!conn->ch)
			return -ENOTCONN;
		/* TCP/vsock without SetPeerIdentity: traced assumes uid 0 too. */
		*ret = (struct ipc_peer){ .pid = 0, .uid = 0, .gid = 0 };
		return 0;
	}
	*ret = conn->peer;
	return 0;
}

uint32_t ipc_conn_get_machine_id(const struct ipc_conn *conn)
{
	return conn ? conn->machine_id : 0;
}

const char *ipc_conn_get_machine_name(const struct ipc_conn *conn)
{
	return conn ? conn->machine_name : NULL;
}

bool ipc_conn_can_pass_fds(const struct ipc_conn *conn)
{
	return conn && ipc_channel_can_pass_fds(conn->ch);
}

bool ipc_conn_is_connected(const struct ipc_conn *conn)
{
	return conn && conn->host && ipc_channel_is_connected(conn->ch);
}

int ipc_conn_take_fd(struct ipc_conn *conn)
{
	if (!conn || !conn->frame_fd)
		return -EBADF;
	return TAKE_FD(*conn->frame_fd);
}

void ipc_conn_set_userdata(struct ipc_conn *conn, void *userdata)
{
	if (conn)
		conn->userdata = userdata;
}

void *ipc_conn_get_userdata(const struct ipc_conn *conn)
{
	return conn ? conn->userdata : NULL;
}

void ipc_conn_disconnect(struct ipc_conn *conn)
{
	if (conn && conn->ch)
		ipc_channel_abort(conn->ch, -ECONNABORTED);
}

struct ipc_channel *ipc_conn_get_channel(struct ipc_conn *conn)
{
	return conn ? conn->ch : NULL;
}

/* ---- replies ------------------------------------------------------------------ */

struct ipc_conn *ipc_reply_get_conn(const struct ipc_reply *reply)
{
	return reply ? reply->conn : NULL;
}

uint64_t ipc_reply_get_request_id(const struct ipc_reply *reply)
{
	return reply ? reply->request_id : 0;
}

bool ipc_reply_is_wanted(const struct ipc_reply *reply)
{
	return reply && reply->wanted;
}

int ipc_reply_send(struct ipc_reply *reply, const void *reply_proto, size_t len, bool has_more, int fd)
{
	int r = 0;

	if (!reply || (!reply_proto && len > 0))
		return -EINVAL;
	if (reply->done)
		return -EALREADY;

	if (!has_more)
		reply->done = true;
	if (reply->wanted)
		r = ipc_conn_send_invoke_reply(reply->conn, reply->request_id, true, has_more, reply_proto, len, fd);
	if (!has_more)
		ipc_reply_unref(reply);
	return r;
}

int ipc_reply_reject(struct ipc_reply *reply)
{
	int r = 0;

	if (!reply)
		return -EINVAL;
	if (reply->done)
		return -EALREADY;

	reply->done = true;
	if (reply->wanted)
		r = ipc_conn_send_invoke_reply(reply->conn, reply->request_id, false, false, NULL, 0, -EBADF);
	ipc_reply_unref(reply);
	return r;
}

struct ipc_reply *ipc_reply_forget(struct ipc_reply *reply)
{
	if (!reply)
		return NULL;
	reply->done = true;
	return ipc_reply_unref(reply);
}

struct ipc_reply *ipc_reply_free(struct ipc_reply *reply)
{
	if (!reply)
		return NULL;
	if (!reply->done) {
		reply->done = true;
		/* Never leave the client's request hanging. */
		if (reply->wanted)
			(void)ipc_conn_send_invoke_reply(reply->conn, reply->request_id, false, false, NULL, 0, -EBADF);
	}
	return ipc_reply_unref(reply);
}
