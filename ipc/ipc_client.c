/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RPC client: BindService by name, InvokeMethod by ids taken from the
 * host's method table, replies routed by request_id (streams keep their
 * request open while has_more is set).  Generic over services.
 */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc.h"
#include "util/util.h"

/* A producer has a handful of requests in flight; this only stops runaways. */
#define CLIENT_MAX_PENDING 4096
#define CLIENT_MAX_SERVICES 64

enum pending_kind {
	PENDING_BIND,
	PENDING_INVOKE,
};

struct pending {
	uint64_t id;
	enum pending_kind kind;
	ipc_client_bind_cb bind_cb;
	ipc_client_reply_cb reply_cb;
	void *userdata;
};

struct bound_method {
	uint32_t id;
	char *name;
};

struct bound_service {
	uint32_t id;
	size_t n_methods;
	struct bound_method *methods;
};

struct ipc_client {
	unsigned n_ref;
	bool closed; /* ipc_client_free() was called */
	struct ipc_channel *ch;
	uint64_t last_request_id;

	struct pending *pending;
	size_t n_pending;
	size_t cap_pending;

	struct bound_service *services;
	size_t n_services;

	int *frame_fd; /* the fd of the frame being dispatched */

	ipc_client_disconnect_cb on_disconnect;
	void *userdata;
};

static void bound_service_done(struct bound_service *s)
{
	for (size_t i = 0; i < s->n_methods; i++)
		free(s->methods[i].name);
	free(s->methods);
	s->methods = NULL;
	s->n_methods = 0;
}

static void client_release_state(struct ipc_client *c)
{
	for (size_t i = 0; i < c->n_services; i++)
		bound_service_done(&c->services[i]);
	free(c->services);
	c->services = NULL;
	c->n_services = 0;
	free(c->pending);
	c->pending = NULL;
	c->n_pending = c->cap_pending = 0;
}

static struct ipc_client *client_ref(struct ipc_client *c)
{
	c->n_ref++;
	return c;
}

static struct ipc_client *client_unref(struct ipc_client *c)
{
	if (!c || --c->n_ref > 0)
		return NULL;
	ipc_channel_free(c->ch);
	client_release_state(c);
	free(c);
	return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ipc_client *, client_unref);

static ssize_t pending_find(const struct ipc_client *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_pending; i++)
		if (c->pending[i].id == id)
			return (ssize_t)i;
	return -1;
}

static void pending_remove(struct ipc_client *c, size_t i)
{
	memmove(c->pending + i, c->pending + i + 1, (c->n_pending - i - 1) * sizeof(*c->pending));
	c->n_pending--;
}

/* Make room for one more entry before sending, so a sent request is always tracked. */
static int pending_reserve(struct ipc_client *c)
{
	struct pending *p;
	size_t cap;

	if (c->n_pending >= CLIENT_MAX_PENDING)
		return -EBUSY;
	if (c->n_pending < c->cap_pending)
		return 0;
	cap = MAX(c->cap_pending * 2, (size_t)8);
	p = realloc(c->pending, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	c->pending = p;
	c->cap_pending = cap;
	return 0;
}

static void pending_fail(struct ipc_client *c, const struct pending *p, int error)
{
	if (p->kind == PENDING_BIND) {
		if (p->bind_cb)
			p->bind_cb(c, error, 0, p->userdata);
	} else if (p->reply_cb)
		p->reply_cb(c, error, NULL, 0, /* has_more= */ false, -EBADF, p->userdata);
}

static struct bound_service *service_find(const struct ipc_client *c, uint32_t id)
{
	for (size_t i = 0; i < c->n_services; i++)
		if (c->services[i].id == id)
			return &c->services[i];
	return NULL;
}

static int client_store_binding(struct ipc_client *c, const Perfetto__Protos__IPCFrame__BindServiceReply *reply,
				uint32_t *ret_service_id)
{
	struct bound_service s = {}, *slot;
	int r;

	if (!reply->success)
		return -ENOENT;
	if (!reply->has_service_id || reply->service_id == 0)
		return -EPROTO;

	s.id = reply->service_id;
	s.methods = calloc(reply->n_methods ? reply->n_methods : 1, sizeof(*s.methods));
	if (!s.methods)
		return -ENOMEM;
	for (size_t i = 0; i < reply->n_methods; i++) {
		const Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *m = reply->methods[i];

		/* Entries without an id or a name cannot be invoked: skip them. */
		if (!m || !m->has_id || m->id == 0 || !m->name || m->name[0] == '\0')
			continue;
		s.methods[s.n_methods].id = m->id;
		s.methods[s.n_methods].name = strdup(m->name);
		if (!s.methods[s.n_methods].name) {
			r = -ENOMEM;
			goto fail;
		}
		s.n_methods++;
	}

	slot = service_find(c, s.id);
	if (slot)
		bound_service_done(slot);
	else {
		struct bound_service *n;

		if (c->n_services >= CLIENT_MAX_SERVICES) {
			r = -E2BIG;
			goto fail;
		}
		n = realloc(c->services, (c->n_services + 1) * sizeof(*n));
		if (!n) {
			r = -ENOMEM;
			goto fail;
		}
		c->services = n;
		slot = &c->services[c->n_services++];
	}
	*slot = s;
	*ret_service_id = s.id;
	return 0;

fail:
	bound_service_done(&s);
	return r;
}

static void client_on_frame(struct ipc_channel *ch, const Perfetto__Protos__IPCFrame *f, int *fd, void *userdata)
{
	_cleanup_(client_unrefp) struct ipc_client *c = client_ref(userdata);
	struct pending p;
	ssize_t i;

	if (c->closed)
		return;
	i = pending_find(c, f->request_id);
	if (i < 0)
		return; /* a reply nobody waits for (cancelled, drop_reply, bogus) */
	p = c->pending[i];

	/* Callbacks may add or cancel requests: work on the copy from now on. */
	c->frame_fd = fd;
	switch (f->msg_case) {
	case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY: {
		uint32_t sid = 0;
		int r;

		pending_remove(c, i);
		if (p.kind != PENDING_BIND) {
			pending_fail(c, &p, -EPROTO);
			break;
		}
		r = client_store_binding(c, f->msg_bind_service_reply, &sid);
		if (p.bind_cb)
			p.bind_cb(c, r, r < 0 ? 0 : sid, p.userdata);
		break;
	}
	case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY: {
		const Perfetto__Protos__IPCFrame__InvokeMethodReply *rep = f->msg_invoke_method_reply;
		bool more = rep->has_more;

		if (p.kind != PENDING_INVOKE) {
			pending_remove(c, i);
			pending_fail(c, &p, -EPROTO);
			break;
		}
		/* As in Perfetto, has_more alone decides whether the request stays open. */
		if (!more)
			pending_remove(c, i);
		if (p.reply_cb)
			p.reply_cb(c, rep->success ? 0 : -EREMOTEIO, rep->reply_proto.data, rep->reply_proto.len, more,
				   *fd, p.userdata);
		break;
	}
	default:
		/* RequestError, or a frame that makes no sense as a reply. */
		pending_remove(c, i);
		pending_fail(c, &p, -EPROTO);
		break;
	}
	c->frame_fd = NULL;
}

static void client_on_disconnect(struct ipc_channel *ch, int error, void *userdata)
{
	_cleanup_(client_unrefp) struct ipc_client *c = client_ref(userdata);
	_cleanup_free_ struct pending *pending = NULL;
	size_t n;

	if (c->closed)
		return;

	pending = TAKE_PTR(c->pending);
	n = c->n_pending;
	c->n_pending = c->cap_pending = 0;
	for (size_t i = 0; i < n && !c->closed; i++)
		pending_fail(c, &pending[i], error);

	if (!c->closed && c->on_disconnect)
		c->on_disconnect(c, error, c->userdata);
}

static int client_new(struct ipc_channel *ch, struct ipc_client **ret)
{
	struct ipc_client *c;

	c = calloc(1, sizeof(*c));
	if (!c) {
		ipc_channel_free(ch);
		return -ENOMEM;
	}
	c->n_ref = 1;
	c->ch = ch;
	ipc_channel_set_callbacks(ch, client_on_frame, client_on_disconnect, c);
	*ret = c;
	return 0;
}

int ipc_client_new(const char *addr, struct ipc_client **ret)
{
	struct ipc_channel *ch = NULL;
	int r;

	if (!addr || !ret)
		return -EINVAL;
	r = ipc_channel_connect(addr, &ch);
	if (r < 0)
		return r;
	return client_new(ch, ret);
}

int ipc_client_new_from_fd(int fd, struct ipc_client **ret)
{
	struct ipc_channel *ch = NULL;
	int r;

	if (!ret) {
		closep(&fd);
		return -EINVAL;
	}
	r = ipc_channel_new_from_fd(fd, &ch);
	if (r < 0)
		return r;
	return client_new(ch, ret);
}

struct ipc_client *ipc_client_free(struct ipc_client *c)
{
	if (!c)
		return NULL;
	c->closed = true;
	c->on_disconnect = NULL;
	c->ch = ipc_channel_free(c->ch);
	client_release_state(c);
	return client_unref(c);
}

int ipc_client_attach_event(struct ipc_client *c, struct loop *e)
{
	if (!c || c->closed)
		return -EINVAL;
	return ipc_channel_attach_event(c->ch, e);
}

void ipc_client_set_disconnect_callback(struct ipc_client *c, ipc_client_disconnect_cb cb, void *userdata)
{
	if (!c)
		return;
	c->on_disconnect = cb;
	c->userdata = userdata;
}

static int client_send(struct ipc_client *c, Perfetto__Protos__IPCFrame *f, int fd, const struct pending *p,
		       uint64_t *ret_request_id)
{
	int r;

	if (p) {
		r = pending_reserve(c);
		if (r < 0)
			return r;
	}

	f->has_request_id = true;
	f->request_id = ++c->last_request_id;
	r = ipc_channel_send_frame(c->ch, f, fd);
	if (r < 0)
		return r;

	if (p) {
		c->pending[c->n_pending] = *p;
		c->pending[c->n_pending].id = f->request_id;
		c->n_pending++;
	}
	if (ret_request_id)
		*ret_request_id = f->request_id;
	return 0;
}

int ipc_client_bind_service(struct ipc_client *c, const char *service_name, ipc_client_bind_cb cb,
			    void *userdata, uint64_t *ret_request_id)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__BindService b = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
	struct pending p = { .kind = PENDING_BIND, .bind_cb = cb, .userdata = userdata };

	if (!c || c->closed || !service_name)
		return -EINVAL;

	b.service_name = (char *)service_name;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
	f.msg_bind_service = &b;
	/* Tracked even without a callback: the reply carries the method table. */
	return client_send(c, &f, -EBADF, &p, ret_request_id);
}

int ipc_client_send_identity(struct ipc_client *c, const struct ipc_identity *id)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__SetPeerIdentity spi = PERFETTO__PROTOS__IPCFRAME__SET_PEER_IDENTITY__INIT;

	if (!c || c->closed || !id)
		return -EINVAL;
	spi.has_pid = true;
	spi.pid = id->pid;
	spi.has_uid = true;
	spi.uid = id->uid;
	spi.machine_id_hint = (char *)id->machine_id_hint;
	spi.machine_name = (char *)id->machine_name;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY;
	f.set_peer_identity = &spi;
	/* no reply comes: no request id, nothing pending */
	return ipc_channel_send_frame(c->ch, &f, -EBADF);
}

int ipc_client_get_method_id(const struct ipc_client *c, uint32_t service_id, const char *method_name)
{
	const struct bound_service *s;

	if (!c || !method_name)
		return -EINVAL;
	s = service_find(c, service_id);
	if (!s)
		return -ESRCH;
	for (size_t i = 0; i < s->n_methods; i++)
		if (strcmp(s->methods[i].name, method_name) == 0)
			return s->methods[i].id > INT_MAX ? -ERANGE : (int)s->methods[i].id;
	return -ENOENT;
}

int ipc_client_invoke(struct ipc_client *c, uint32_t service_id, uint32_t method_id, const void *args,
		      size_t len, int fd, ipc_client_reply_cb cb, void *userdata, uint64_t *ret_request_id)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__InvokeMethod m = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
	struct pending p = { .kind = PENDING_INVOKE, .reply_cb = cb, .userdata = userdata };

	if (!c || c->closed || (!args && len > 0))
		return -EINVAL;

	/* Same fields as Perfetto's client: args and drop_reply always present. */
	m.has_service_id = true;
	m.service_id = service_id;
	m.has_method_id = true;
	m.method_id = method_id;
	m.has_args_proto = true;
	m.args_proto.len = len;
	m.args_proto.data = (uint8_t *)args;
	m.has_drop_reply = true;
	m.drop_reply = !cb;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
	f.msg_invoke_method = &m;
	return client_send(c, &f, fd, cb ? &p : NULL, ret_request_id);
}

int ipc_client_cancel(struct ipc_client *c, uint64_t request_id)
{
	ssize_t i;

	if (!c)
		return -EINVAL;
	i = pending_find(c, request_id);
	if (i < 0)
		return -ENOENT;
	pending_remove(c, (size_t)i);
	return 0;
}

int ipc_client_take_fd(struct ipc_client *c)
{
	if (!c || !c->frame_fd)
		return -EBADF;
	return TAKE_FD(*c->frame_fd);
}

bool ipc_client_can_pass_fds(const struct ipc_client *c)
{
	return c && ipc_channel_can_pass_fds(c->ch);
}

bool ipc_client_is_connected(const struct ipc_client *c)
{
	return c && !c->closed && ipc_channel_is_connected(c->ch);
}

struct ipc_channel *ipc_client_get_channel(struct ipc_client *c)
{
	return c ? c->ch : NULL;
}
