/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RPC host (service side): listening sockets or adopted connected sockets,
 * BindService answered from a table of registered services, InvokeMethod
 * dispatched to the service's callback with a reply handle that can answer
 * once or stream.  Generic over services: a service is a name, its method
 * names in declaration order and a dispatch callback.  A connection and a
 * reply handle are ipc_conn.c's.
 *
 * Lifetimes: the host holds one reference on each of its connections and
 * drops it at disconnect or in ipc_host_free(); reply handles may keep a
 * connection alive longer (see ipc_conn.c).
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc_internal.h"
#include "util/util.h"

#define HOST_MAX_SERVICES 64
#define HOST_MAX_METHODS 1024
#define HOST_MAX_CONNECTIONS_DEFAULT 256
/* accept() calls per wakeup. */
#define ACCEPT_BATCH 16

struct host_service {
	char *name;
	char **methods;
	size_t n_methods;
	ipc_method_cb invoke;
	ipc_conn_cb on_disconnect;
	void *userdata;
};

struct host_listener {
	int fd;
	struct loop_source *src;
	char *unlink_path; /* filesystem sockets we created */
};

struct ipc_host {
	unsigned n_ref;
	bool closed;
	struct loop *event;

	struct host_service *services;
	size_t n_services;

	struct host_listener *listeners;
	size_t n_listeners;

	struct ipc_conn *conns;
	unsigned n_conns;
	unsigned max_conns;
	uint64_t last_conn_id;
	size_t send_queue_max;

	struct ipc_host_stats stats;
	uint64_t frames_dropped_closed; /* by connections already gone */

	ipc_conn_cb on_connect;
	void *connect_userdata;
};

/* ---- references ------------------------------------------------------------ */

static struct ipc_host *host_ref(struct ipc_host *h)
{
	h->n_ref++;
	return h;
}

static void host_service_done(struct host_service *s)
{
	free(s->name);
	for (size_t i = 0; i < s->n_methods; i++)
		free(s->methods[i]);
	free(s->methods);
}

static struct ipc_host *host_unref(struct ipc_host *h)
{
	if (!h || --h->n_ref > 0)
		return NULL;
	for (size_t i = 0; i < h->n_services; i++)
		host_service_done(&h->services[i]);
	free(h->services);
	free(h->listeners);
	loop_unref(h->event);
	free(h);
	return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ipc_host *, host_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ipc_conn *, ipc_conn_unref);

/* ---- connections ------------------------------------------------------------- */

/* Unlink @conn from its host without telling anyone; drops the host's reference. */
static void host_detach_conn(struct ipc_conn *conn)
{
	struct ipc_host *h = conn->host;

	if (!h)
		return;
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		h->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	conn->prev = conn->next = NULL;
	h->n_conns--;
	h->stats.connections_open--;
	h->frames_dropped_closed += ipc_channel_get_dropped_frames(conn->ch);
	conn->host = NULL;
	conn->ch = ipc_channel_free(conn->ch);
	ipc_conn_unref(conn);
}

static void host_on_disconnect(struct ipc_channel *ch, int error, void *userdata)
{
	_cleanup_(ipc_conn_unrefp) struct ipc_conn *conn = ipc_conn_ref(userdata);
	_cleanup_(host_unrefp) struct ipc_host *h = NULL;

	if (!conn->host)
		return;
	h = host_ref(conn->host);

	if (error == -EMSGSIZE) {
		h->stats.disconnects_frame_too_large++;
		log_debug("IPC frame too large on connection %" PRIu64 ", dropping it", conn->id);
	} else if (error == -ENOBUFS) {
		h->stats.disconnects_send_overflow++;
		log_debug("Connection %" PRIu64 " does not read its replies, dropping it", conn->id);
	}

	host_detach_conn(conn);
	for (size_t i = 0; i < h->n_services && !h->closed; i++)
		if (h->services[i].on_disconnect)
			h->services[i].on_disconnect(conn, h->services[i].userdata);
}

static void host_on_bind(struct ipc_host *h, struct ipc_conn *conn, const Perfetto__Protos__IPCFrame *req)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__BindServiceReply rep = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
	_cleanup_free_ Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *infos = NULL;
	_cleanup_free_ Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo **ptrs = NULL;
	const char *name = req->msg_bind_service->service_name;

	f.has_request_id = true;
	f.request_id = req->request_id;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
	f.msg_bind_service_reply = &rep;
	rep.has_success = true;
	rep.success = false;

	for (size_t i = 0; name && i < h->n_services; i++) {
		const struct host_service *s = &h->services[i];

		if (strcmp(s->name, name) != 0)
			continue;

		infos = calloc(s->n_methods ? s->n_methods : 1, sizeof(*infos));
		ptrs = calloc(s->n_methods ? s->n_methods : 1, sizeof(*ptrs));
		if (!infos || !ptrs)
			break; /* answered as unknown: the client may retry */
		for (size_t m = 0; m < s->n_methods; m++) {
			perfetto__protos__ipcframe__bind_service_reply__method_info__init(&infos[m]);
			infos[m].has_id = true;
			infos[m].id = (uint32_t)(m + 1);
			infos[m].name = s->methods[m];
			ptrs[m] = &infos[m];
		}
		rep.success = true;
		rep.has_service_id = true;
		rep.service_id = (uint32_t)(i + 1);
		rep.n_methods = s->n_methods;
		rep.methods = ptrs;
		break;
	}
	(void)ipc_conn_send_frame(conn, &f, -EBADF);
}

static void host_on_invoke(struct ipc_host *h, struct ipc_conn *conn, const Perfetto__Protos__IPCFrame *req, int *fd)
{
	const Perfetto__Protos__IPCFrame__InvokeMethod *m = req->msg_invoke_method;
	const struct host_service *s;
	struct ipc_reply *reply;
	int r;

	if (m->service_id == 0 || m->service_id > h->n_services)
		goto reject;
	s = &h->services[m->service_id - 1];
	if (m->method_id == 0 || m->method_id > s->n_methods)
		goto reject;

	/* One reference for the handler, one held by us across the call. */
	reply = ipc_reply_new(conn, req->request_id, !m->drop_reply);
	if (!reply)
		goto reject;

	conn->frame_fd = fd;
	r = s->invoke(conn, m->method_id, m->args_proto.data, m->args_proto.len, reply, s->userdata);
	conn->frame_fd = NULL;

	if (r < 0) {
		/* Like a decoding failure in Perfetto's stubs: answered even with drop_reply. */
		if (!reply->done) {
			reply->done = true;
			(void)ipc_conn_send_invoke_reply(conn, req->request_id, false, false, NULL, 0, -EBADF);
		}
		if (reply->n_ref > 1)
			ipc_reply_unref(reply);
	}
	ipc_reply_unref(reply);
	return;

reject:
	/* Bad ids are answered even when the client asked for drop_reply. */
	(void)ipc_conn_send_invoke_reply(conn, req->request_id, false, false, NULL, 0, -EBADF);
}

static void host_on_unknown(struct ipc_host *h, struct ipc_conn *conn, const Perfetto__Protos__IPCFrame *req)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__RequestError err = PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;

	h->stats.unknown_requests++;
	f.has_request_id = true;
	f.request_id = req->request_id;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
	f.msg_request_error = &err;
	err.error = (char *)"unknown request";
	(void)ipc_conn_send_frame(conn, &f, -EBADF);
}

static void host_on_frame(struct ipc_channel *ch, const Perfetto__Protos__IPCFrame *f, int *fd, void *userdata)
{
	_cleanup_(ipc_conn_unrefp) struct ipc_conn *conn = ipc_conn_ref(userdata);
	_cleanup_(host_unrefp) struct ipc_host *h = NULL;

	if (!conn->host)
		return;
	h = host_ref(conn->host);

	switch (f->msg_case) {
	case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE:
		host_on_bind(h, conn, f);
		break;
	case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD:
		host_on_invoke(h, conn, f, fd);
		break;
#ifdef PERFETTO__PROTOS__IPCFRAME__SET_PEER_IDENTITY__INIT
	case PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY:
		/* Only meaningful where the kernel cannot tell (TCP/vsock relays); first one wins. */
		if (!ipc_channel_can_pass_fds(ch) && !conn->peer_from_identity) {
			conn->peer = (struct ipc_peer){
				.pid = f->set_peer_identity->has_pid ? f->set_peer_identity->pid : 0,
				.uid = f->set_peer_identity->has_uid ? (uid_t)f->set_peer_identity->uid : 0,
			};
			conn->have_peer = true;
			conn->peer_from_identity = true;
			conn->machine_id = ipc_machine_id(f->set_peer_identity->machine_id_hint, ch);
			if (f->set_peer_identity->machine_name && f->set_peer_identity->machine_name[0])
				conn->machine_name = str_printable_dup(f->set_peer_identity->machine_name,
								       IPC_MACHINE_NAME_MAX);
		}
		break;
#endif
	default:
		host_on_unknown(h, conn, f);
		break;
	}
}

static int host_add_conn(struct ipc_host *h, int fd, struct ipc_conn **ret)
{
	_cleanup_(host_unrefp) struct ipc_host *href = host_ref(h);
	struct ipc_channel *ch = NULL;
	struct ipc_conn *conn;
	int r;

	(void)href; /* only keeps the host alive until we return */

	if (h->n_conns >= h->max_conns) {
		closep(&fd);
		h->stats.connections_refused++;
		return -EUSERS;
	}

	r = ipc_channel_new_from_fd(fd, &ch);
	if (r < 0)
		return r;
	ipc_channel_set_send_queue_max(ch, h->send_queue_max);

	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		ipc_channel_free(ch);
		return -ENOMEM;
	}
	conn->n_ref = 1; /* the host's */
	conn->ch = ch;
	conn->id = ++h->last_conn_id;
	if (ipc_channel_get_peer(ch, &conn->peer) >= 0)
		conn->have_peer = true;
	ipc_channel_set_callbacks(ch, host_on_frame, host_on_disconnect, conn);

	if (h->event) {
		r = ipc_channel_attach_event(ch, h->event);
		if (r < 0) {
			ipc_conn_unref(conn);
			return r;
		}
	}

	conn->host = h;
	conn->next = h->conns;
	if (h->conns)
		h->conns->prev = conn;
	h->conns = conn;
	h->n_conns++;
	h->stats.connections_open++;
	h->stats.connections_accepted++;

	if (ret)
		*ret = conn;
	if (h->on_connect)
		h->on_connect(conn, h->connect_userdata);
	return 0;
}

static int host_on_accept(struct loop_source *s, int fd, uint32_t revents, void *userdata)
{
	_cleanup_(host_unrefp) struct ipc_host *h = host_ref(userdata);

	for (unsigned i = 0; i < ACCEPT_BATCH && !h->closed; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_debug_errno(-errno, "accept() failed, ignoring: %m");
			break;
		}
		(void)host_add_conn(h, cfd, NULL);
	}
	return 0;
}

/* ---- host -------------------------------------------------------------------- */

int ipc_host_new(struct ipc_host **ret)
{
	struct ipc_host *h;

	if (!ret)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->n_ref = 1;
	h->max_conns = HOST_MAX_CONNECTIONS_DEFAULT;
	h->send_queue_max = IPC_SEND_QUEUE_MAX_DEFAULT;
	*ret = h;
	return 0;
}

static void listener_close(struct host_listener *l)
{
	l->src = loop_source_disable_unref(l->src);
	closep(&l->fd);
	l->fd = -EBADF;
	if (l->unlink_path) {
		(void)unlink(l->unlink_path);
		free(l->unlink_path);
		l->unlink_path = NULL;
	}
}

struct ipc_host *ipc_host_free(struct ipc_host *h)
{
	if (!h)
		return NULL;
	h->closed = true;
	h->on_connect = NULL;
	for (size_t i = 0; i < h->n_listeners; i++)
		listener_close(&h->listeners[i]);
	h->n_listeners = 0;
	while (h->conns)
		host_detach_conn(h->conns);
	return host_unref(h);
}

static int listener_attach(struct ipc_host *h, struct host_listener *l)
{
	return loop_add_io(h->event, &l->src, l->fd, EPOLLIN, host_on_accept, h);
}

int ipc_host_attach_event(struct ipc_host *h, struct loop *e)
{
	int r;

	if (!h || !e || h->closed)
		return -EINVAL;
	if (h->event)
		return -EBUSY;
	h->event = loop_ref(e);

	for (size_t i = 0; i < h->n_listeners; i++) {
		r = listener_attach(h, &h->listeners[i]);
		if (r < 0)
			return r;
	}
	for (struct ipc_conn *c = h->conns; c; c = c->next) {
		r = ipc_channel_attach_event(c->ch, e);
		if (r < 0)
			return r;
	}
	return 0;
}

static int host_add_listener(struct ipc_host *h, int fd, const char *unlink_path)
{
	_cleanup_close_ int sock = fd;
	_cleanup_free_ char *path = NULL;
	struct host_listener *n, *l;
	int r;

	if (unlink_path) {
		path = strdup(unlink_path);
		if (!path)
			return -ENOMEM;
	}
	n = realloc(h->listeners, (h->n_listeners + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	h->listeners = n;
	l = &h->listeners[h->n_listeners];
	*l = (struct host_listener){ .fd = sock, .unlink_path = path };
	if (h->event) {
		r = listener_attach(h, l);
		if (r < 0)
			return r;
	}
	sock = -EBADF;
	path = NULL;
	h->n_listeners++;
	return 0;
}

int ipc_host_listen(struct ipc_host *h, const char *addr, mode_t mode)
{
	int fd = -EBADF, r;

	if (!h || !addr || h->closed)
		return -EINVAL;
	r = ipc_addr_listen(addr, mode, &fd);
	if (r < 0)
		return r;
	r = host_add_listener(h, fd, ipc_addr_kind_from_string(addr) == IPC_ADDR_UNIX ? addr : NULL);
	if (r < 0 && ipc_addr_kind_from_string(addr) == IPC_ADDR_UNIX)
		(void)unlink(addr);
	return r;
}

int ipc_host_listen_fd(struct ipc_host *h, int fd)
{
	int flags;

	if (!h || fd < 0 || h->closed) {
		closep(&fd);
		return -EINVAL;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		int r = -errno;

		closep(&fd);
		return r;
	}
	return host_add_listener(h, fd, NULL);
}

int ipc_host_adopt(struct ipc_host *h, int fd, struct ipc_conn **ret_conn)
{
	if (!h || fd < 0 || h->closed) {
		closep(&fd);
		return -EINVAL;
	}
	return host_add_conn(h, fd, ret_conn);
}

int ipc_host_register_service(struct ipc_host *h, const char *name, const char *const *methods,
			      size_t n_methods, ipc_method_cb invoke, ipc_conn_cb on_disconnect, void *userdata,
			      uint32_t *ret_service_id)
{
	struct host_service s = {}, *n;

	if (!h || !name || name[0] == '\0' || !invoke || (!methods && n_methods > 0) || n_methods > HOST_MAX_METHODS)
		return -EINVAL;
	for (size_t i = 0; i < h->n_services; i++)
		if (strcmp(h->services[i].name, name) == 0)
			return -EEXIST;
	if (h->n_services >= HOST_MAX_SERVICES)
		return -E2BIG;

	s.name = strdup(name);
	s.methods = calloc(n_methods ? n_methods : 1, sizeof(char *));
	if (!s.name || !s.methods)
		goto nomem;
	for (size_t i = 0; i < n_methods; i++) {
		if (!methods[i]) {
			host_service_done(&s);
			return -EINVAL;
		}
		s.methods[i] = strdup(methods[i]);
		if (!s.methods[i])
			goto nomem;
		s.n_methods++;
	}
	s.invoke = invoke;
	s.on_disconnect = on_disconnect;
	s.userdata = userdata;

	n = realloc(h->services, (h->n_services + 1) * sizeof(*n));
	if (!n)
		goto nomem;
	h->services = n;
	h->services[h->n_services++] = s;
	if (ret_service_id)
		*ret_service_id = (uint32_t)h->n_services;
	return 0;

nomem:
	host_service_done(&s);
	return -ENOMEM;
}

void ipc_host_set_connect_callback(struct ipc_host *h, ipc_conn_cb cb, void *userdata)
{
	if (!h)
		return;
	h->on_connect = cb;
	h->connect_userdata = userdata;
}

void ipc_host_set_send_queue_max(struct ipc_host *h, size_t bytes)
{
	if (h)
		h->send_queue_max = MAX(bytes, (size_t)IPC_SEND_QUEUE_MIN);
}

void ipc_host_set_max_connections(struct ipc_host *h, unsigned max)
{
	if (h)
		h->max_conns = max;
}

void ipc_host_get_stats(const struct ipc_host *h, struct ipc_host_stats *ret)
{
	if (!h || !ret)
		return;
	*ret = h->stats;
	ret->frames_dropped = h->frames_dropped_closed;
	for (const struct ipc_conn *c = h->conns; c; c = c->next)
		ret->frames_dropped += ipc_channel_get_dropped_frames(c->ch);
}

/* ---- machine ids of remote peers ---------------------------------------------- */

static uint64_t fnv1a64(uint64_t h, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* The peer's address without its port, as traced names a host it has no hint for. */
static int peer_host(int fd, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	switch (ss.ss_family) {
	case AF_INET:
		return inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf, (socklen_t)size) ? 0 : -errno;
	case AF_INET6:
		return inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, buf, (socklen_t)size) ? 0
														: -errno;
	case AF_VSOCK:
		(void)snprintf(buf, size, "vsock://%u", ((struct sockaddr_vm *)&ss)->svm_cid);
		return 0;
	default:
		return -EAFNOSUPPORT;
	}
}

uint32_t ipc_machine_id(const char *hint, const struct ipc_channel *ch)
{
	uint64_t h = 14695981039346656037ull;
	char host[INET6_ADDRSTRLEN + 16];
	uint32_t id;

	if (hint && hint[0])
		h = fnv1a64(h, hint, strlen(hint));
	else if (peer_host(ipc_channel_get_fd(ch), host, sizeof(host)) == 0)
		h = fnv1a64(h, host, strlen(host));
	id = (uint32_t)h;
	return id == 0 ? 1 : id;
}
