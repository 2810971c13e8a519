/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One non-blocking stream connection on an event loop (event/).
 *
 * Sending writes straight to the socket while nothing is queued; what the
 * kernel does not take waits in a bounded FIFO of whole allocations until
 * EPOLLOUT.  An fd rides on the first sendmsg() of its frame.  Receiving
 * reads into the frame decoder's buffer and dispatches every complete
 * frame with the fd that arrived with it.
 *
 * Failures never call back into the owner from inside a call the owner
 * made: ipc_channel_abort() (also used for send errors) records the error,
 * shuts the socket down and lets the event loop deliver the disconnect.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "util/util.h"

/* recvmsg() calls per wakeup, so one busy peer cannot starve the loop. */
#define RECV_BATCH 8
/* Control buffer for recvmsg(): room for one SCM_RIGHTS and then some. */
#define RECV_CONTROL_SIZE 256

struct send_item {
	struct send_item *next;
	uint8_t *data;
	size_t len;
	size_t off;
	int fd; /* goes out with the first byte; only while off == 0 */
};

enum channel_state {
	CHANNEL_CONNECTING,
	CHANNEL_CONNECTED,
	CHANNEL_CLOSED,
};

struct ipc_channel {
	unsigned n_ref;
	int fd;
	enum channel_state state;
	bool can_pass_fds;
	int pending_error;

	struct ipc_frame_decoder *dec;

	struct send_item *sq_head;
	struct send_item *sq_tail;
	size_t sq_bytes;
	size_t sq_max;

	struct loop *event;
	struct loop_source *io;
	struct loop_source *defer;

	ipc_channel_frame_cb on_frame;
	ipc_channel_disconnect_cb on_disconnect;
	void *userdata;
};

static struct send_item *send_item_free(struct send_item *it)
{
	if (!it)
		return NULL;
	closep(&it->fd);
	free(it->data);
	free(it);
	return NULL;
}

static void channel_clear_queue(struct ipc_channel *ch)
{
	while (ch->sq_head) {
		struct send_item *it = ch->sq_head;

		ch->sq_head = it->next;
		send_item_free(it);
	}
	ch->sq_tail = NULL;
	ch->sq_bytes = 0;
}

static void channel_close(struct ipc_channel *ch)
{
	ch->io = loop_source_disable_unref(ch->io);
	ch->defer = loop_source_disable_unref(ch->defer);
	ch->event = loop_unref(ch->event);
	closep(&ch->fd);
	ch->fd = -EBADF;
	channel_clear_queue(ch);
	ch->state = CHANNEL_CLOSED;
}

static struct ipc_channel *channel_ref(struct ipc_channel *ch)
{
	ch->n_ref++;
	return ch;
}

static struct ipc_channel *channel_unref(struct ipc_channel *ch)
{
	if (!ch || --ch->n_ref > 0)
		return NULL;
	channel_close(ch);
	ipc_frame_decoder_free(ch->dec);
	free(ch);
	return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ipc_channel *, channel_unref);

static int channel_new(int fd, enum channel_state state, struct ipc_channel **ret)
{
	_cleanup_close_ int sock = fd;
	struct ipc_channel *ch;
	int domain, type, flags, r;
	socklen_t sl = sizeof(domain);

	if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &sl) < 0)
		return -errno;
	sl = sizeof(type);
	if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &sl) < 0)
		return -errno;
	if (type != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;

	flags = fcntl(sock, F_GETFL);
	if (flags < 0)
		return -errno;
	if (!(flags & O_NONBLOCK) && fcntl(sock, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	if (fcntl(sock, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->n_ref = 1;
	ch->fd = -EBADF;
	ch->sq_max = IPC_SEND_QUEUE_MAX_DEFAULT;
	r = ipc_frame_decoder_new(&ch->dec);
	if (r < 0) {
		free(ch);
		return r;
	}
	ch->fd = TAKE_FD(sock);
	ch->state = state;
	ch->can_pass_fds = domain == AF_UNIX;

	*ret = ch;
	return 0;
}

int ipc_channel_new_from_fd(int fd, struct ipc_channel **ret)
{
	if (fd < 0 || !ret) {
		closep(&fd);
		return -EINVAL;
	}
	return channel_new(fd, CHANNEL_CONNECTED, ret);
}

int ipc_channel_connect(const char *addr, struct ipc_channel **ret)
{
	int fd = -EBADF, r;

	if (!addr || !ret)
		return -EINVAL;

	r = ipc_addr_connect(addr, &fd);
	if (r < 0)
		return r;
	return channel_new(fd, r > 0 ? CHANNEL_CONNECTING : CHANNEL_CONNECTED, ret);
}

struct ipc_channel *ipc_channel_free(struct ipc_channel *ch)
{
	if (!ch)
		return NULL;
	ch->on_frame = NULL;
	ch->on_disconnect = NULL;
	ch->userdata = NULL;
	channel_close(ch);
	return channel_unref(ch);
}

void ipc_channel_set_callbacks(struct ipc_channel *ch, ipc_channel_frame_cb on_frame,
			       ipc_channel_disconnect_cb on_disconnect, void *userdata)
{
	if (!ch)
		return;
	ch->on_frame = on_frame;
	ch->on_disconnect = on_disconnect;
	ch->userdata = userdata;
}

static int channel_update_events(struct ipc_channel *ch)
{
	uint32_t events = EPOLLIN;

	if (!ch->io)
		return 0;
	if (ch->state == CHANNEL_CONNECTING || ch->sq_head)
		events |= EPOLLOUT;
	return loop_source_set_io_events(ch->io, events);
}

/* The owner hears of a failure here, from the loop; called once. */
static void channel_disconnect(struct ipc_channel *ch, int error)
{
	ipc_channel_disconnect_cb cb;

	if (ch->state == CHANNEL_CLOSED)
		return;
	channel_close(ch);
	cb = ch->on_disconnect;
	if (cb)
		cb(ch, error < 0 ? error : -ECONNRESET, ch->userdata);
}

static int channel_on_defer(struct loop_source *s, void *userdata)
{
	_cleanup_(channel_unrefp) struct ipc_channel *ch = channel_ref(userdata);

	channel_disconnect(ch, ch->pending_error);
	return 0;
}

static int channel_arm_defer(struct ipc_channel *ch)
{
	int r;

	if (!ch->event || ch->defer)
		return 0;
	r = loop_add_defer(ch->event, &ch->defer, channel_on_defer, ch);
	if (r < 0)
		return r;
	return loop_source_set_enabled(ch->defer, LOOP_ONESHOT);
}

void ipc_channel_abort(struct ipc_channel *ch, int error)
{
	if (!ch || ch->state == CHANNEL_CLOSED || ch->pending_error)
		return;
	ch->pending_error = error < 0 ? error : -ECONNABORTED;
	channel_clear_queue(ch);
	/* Tell the peer now, and make the socket readable (EOF) for our loop. */
	(void)shutdown(ch->fd, SHUT_RDWR);
	/* Without a defer source the io source still sees the shutdown. */
	(void)channel_arm_defer(ch);
	(void)channel_update_events(ch);
}

/* Returns bytes written (0 if the socket is full) or -errno. */
static ssize_t send_some(int sock, const uint8_t *p, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		uint8_t buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *cmsg;

		memset(&control, 0, sizeof(control));
		mh.msg_control = &control;
		mh.msg_controllen = sizeof(control.buf);
		cmsg = CMSG_FIRSTHDR(&mh);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	}

	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	return n;
}

static int channel_flush(struct ipc_channel *ch)
{
	while (ch->sq_head) {
		struct send_item *it = ch->sq_head;
		ssize_t n;

		n = send_some(ch->fd, it->data + it->off, it->len - it->off, it->off == 0 ? it->fd : -EBADF);
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		if (it->off == 0) {
			closep(&it->fd);
			it->fd = -EBADF;
		}
		it->off += n;
		if (it->off < it->len)
			break;
		ch->sq_head = it->next;
		if (!ch->sq_head)
			ch->sq_tail = NULL;
		ch->sq_bytes -= it->len;
		send_item_free(it);
	}
	return channel_update_events(ch);
}

/*
 * @owned, when non-NULL, is a malloc()ed buffer holding @data; it is
 * adopted by the queue instead of copying.
 */
static int channel_send_internal(struct ipc_channel *ch, const uint8_t *data, size_t len, uint8_t **owned, int fd)
{
	_cleanup_free_ struct send_item *it = NULL;
	size_t off = 0, alloc;
	int r;

	if (!ch || (!data && len > 0))
		return -EINVAL;
	if (ch->state == CHANNEL_CLOSED || ch->pending_error)
		return -ENOTCONN;
	if (fd >= 0 && !ch->can_pass_fds)
		return -EOPNOTSUPP;
	if (len == 0)
		return 0;

	if (ch->state == CHANNEL_CONNECTED && !ch->sq_head) {
		ssize_t n = send_some(ch->fd, data, len, fd);

		if (n < 0) {
			ipc_channel_abort(ch, (int)n);
			return (int)n;
		}
		off = n;
		if (off == len)
			return 0;
	}

	alloc = owned ? len : len - off;
	if (ch->sq_bytes + alloc > ch->sq_max) {
		/* The peer is not reading: drop it rather than grow without bound. */
		ipc_channel_abort(ch, -ENOBUFS);
		return -ENOBUFS;
	}

	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->fd = -EBADF;
	if (owned) {
		it->data = TAKE_PTR(*owned);
		it->len = len;
		it->off = off;
	} else {
		it->data = malloc(len - off);
		if (!it->data)
			return -ENOMEM;
		memcpy(it->data, data + off, len - off);
		it->len = len - off;
	}
	if (off == 0 && fd >= 0) {
		it->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (it->fd < 0) {
			r = -errno;
			free(it->data);
			return r;
		}
	}

	if (ch->sq_tail)
		ch->sq_tail->next = it;
	else
		ch->sq_head = it;
	ch->sq_tail = TAKE_PTR(it);
	ch->sq_bytes += alloc;
	return channel_update_events(ch);
}

int ipc_channel_send(struct ipc_channel *ch, const void *buf, size_t len, int fd)
{
	return channel_send_internal(ch, buf, len, NULL, fd);
}

int ipc_channel_send_frame(struct ipc_channel *ch, const Perfetto__Protos__IPCFrame *frame, int fd)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len;
	int r;

	if (!ch || !frame)
		return -EINVAL;
	if (ch->state == CHANNEL_CLOSED || ch->pending_error)
		return -ENOTCONN;

	r = ipc_frame_encode(frame, &buf, &len);
	if (r < 0)
		return r;
	return channel_send_internal(ch, buf, len, &buf, fd);
}

/* Keep the first passed fd, close any other: one fd per frame at most. */
static int collect_fds(struct msghdr *mh)
{
	int kept = -EBADF;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (kept < 0)
				kept = fd;
			else
				closep(&fd);
		}
	}
	return kept;
}

static int channel_dispatch_frames(struct ipc_channel *ch)
{
	while (ch->state == CHANNEL_CONNECTED && !ch->pending_error) {
		Perfetto__Protos__IPCFrame *f = NULL;
		_cleanup_close_ int fd = -EBADF;
		int r;

		r = ipc_frame_decoder_next(ch->dec, &f, &fd);
		if (r <= 0)
			return r;
		if (ch->on_frame)
			ch->on_frame(ch, f, &fd, ch->userdata);
		ipc_frame_free(f);
	}
	return 0;
}

static int channel_receive(struct ipc_channel *ch)
{
	for (unsigned i = 0; i < RECV_BATCH; i++) {
		union {
			struct cmsghdr h;
			uint8_t buf[RECV_CONTROL_SIZE];
		} control;
		_cleanup_close_ int fd = -EBADF;
		struct iovec iov;
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = &control,
			.msg_controllen = sizeof(control.buf),
		};
		uint8_t *buf;
		size_t size;
		ssize_t n;
		int r;

		if (ch->state != CHANNEL_CONNECTED || ch->pending_error)
			return 0;

		r = ipc_frame_decoder_begin_receive(ch->dec, &buf, &size);
		if (r < 0)
			return r;
		iov.iov_base = buf;
		iov.iov_len = size;

		n = recvmsg(ch->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		fd = collect_fds(&mh);
		if (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC))
			return -EPROTO;
		if (n == 0)
			return -ECONNRESET;

		ipc_frame_decoder_end_receive(ch->dec, (size_t)n, TAKE_FD(fd));
		r = channel_dispatch_frames(ch);
		if (r < 0)
			return r;
	}
	return 0;
}

static int channel_finish_connect(struct ipc_channel *ch, uint32_t revents)
{
	socklen_t sl = sizeof(int);
	int err = 0;

	if (!(revents & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
		return 0;
	if (getsockopt(ch->fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
		return -errno;
	if (err != 0)
		return -err;
	ch->state = CHANNEL_CONNECTED;
	return channel_update_events(ch);
}

static int channel_on_io(struct loop_source *s, int fd, uint32_t revents, void *userdata)
{
	_cleanup_(channel_unrefp) struct ipc_channel *ch = channel_ref(userdata);
	int r;

	if (ch->pending_error) {
		channel_disconnect(ch, ch->pending_error);
		return 0;
	}

	if (ch->state == CHANNEL_CONNECTING) {
		r = channel_finish_connect(ch, revents);
		if (r < 0)
			goto fail;
		if (ch->state == CHANNEL_CONNECTING)
			return 0;
		revents |= EPOLLOUT;
	}

	/* Read first: frames the peer sent before hanging up still count. */
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		r = channel_receive(ch);
		if (r < 0)
			goto fail;
	}
	if (ch->state == CHANNEL_CONNECTED && !ch->pending_error && (revents & EPOLLOUT)) {
		r = channel_flush(ch);
		if (r < 0)
			goto fail;
	}
	if (ch->pending_error)
		channel_disconnect(ch, ch->pending_error);
	return 0;

fail:
	channel_disconnect(ch, r);
	return 0;
}

int ipc_channel_attach_event(struct ipc_channel *ch, struct loop *e)
{
	int r;

	if (!ch || !e)
		return -EINVAL;
	if (ch->io)
		return -EBUSY;
	if (ch->state == CHANNEL_CLOSED)
		return -ENOTCONN;

	r = loop_add_io(e, &ch->io, ch->fd, EPOLLIN, channel_on_io, ch);
	if (r < 0)
		return r;
	ch->event = loop_ref(e);
	r = channel_update_events(ch);
	if (r >= 0 && ch->pending_error)
		r = channel_arm_defer(ch);
	if (r < 0) {
		ch->io = loop_source_disable_unref(ch->io);
		ch->event = loop_unref(ch->event);
		return r;
	}
	return 0;
}

bool ipc_channel_is_connected(const struct ipc_channel *ch)
{
	return ch && ch->state == CHANNEL_CONNECTED && !ch->pending_error;
}

bool ipc_channel_can_pass_fds(const struct ipc_channel *ch)
{
	return ch && ch->can_pass_fds;
}

int ipc_channel_get_fd(const struct ipc_channel *ch)
{
	return ch && ch->state != CHANNEL_CLOSED ? ch->fd : -EBADF;
}

int ipc_channel_get_peer(const struct ipc_channel *ch, struct ipc_peer *ret)
{
	struct ucred uc;
	socklen_t sl = sizeof(uc);

	if (!ch || !ret)
		return -EINVAL;
	if (ch->state == CHANNEL_CLOSED)
		return -ENOTCONN;
	if (!ch->can_pass_fds)
		return -EOPNOTSUPP;
	if (getsockopt(ch->fd, SOL_SOCKET, SO_PEERCRED, &uc, &sl) < 0)
		return -errno;
	*ret = (struct ipc_peer){ .pid = uc.pid, .uid = uc.uid, .gid = uc.gid };
	return 0;
}

void ipc_channel_set_send_queue_max(struct ipc_channel *ch, size_t bytes)
{
	if (ch)
		ch->sq_max = MAX(bytes, (size_t)IPC_SEND_QUEUE_MIN);
}

size_t ipc_channel_get_send_queue_size(const struct ipc_channel *ch)
{
	return ch ? ch->sq_bytes : 0;
}

uint64_t ipc_channel_get_dropped_frames(const struct ipc_channel *ch)
{
	return ch ? ipc_frame_decoder_get_dropped(ch->dec) : 0;
}
