/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IPC frame codec: [u32 LE payload length][serialized IPCFrame].
 *
 * The decoder owns one linear buffer of IPC_BUFFER_SIZE bytes.  The socket
 * reads straight into its free tail; complete frames are popped from the
 * head; the unread rest is moved to the front before the next read.  Since
 * a frame may not exceed the buffer, a well-formed stream always leaves room
 * to read once the complete frames have been popped.  No I/O happens here.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "util/util.h"

struct ipc_frame_decoder {
	uint8_t *buf;
	size_t rpos;   /* first byte not yet popped */
	size_t wpos;   /* end of received bytes */
	uint64_t base; /* stream offset of buf[0] */

	/* An fd and the stream offset of the last byte read together with it. */
	int fd;
	uint64_t fd_pos;

	uint64_t n_dropped;
	bool broken; /* an oversized length header was seen */
};

/* ---- bounded allocator for unpacking -------------------------------------- */

struct alloc_budget {
	size_t left;
};

static void *budget_alloc(void *allocator_data, size_t size)
{
	struct alloc_budget *b = allocator_data;

	if (size > b->left)
		return NULL;
	b->left -= size;
	/* malloc(0) may return NULL, which protobuf-c would take as failure. */
	return malloc(size ? size : 1);
}

static void budget_free(void *allocator_data, void *p)
{
	/* The budget is per frame and only ever shrinks: nothing to return. */
	free(p);
}

int ipc_message_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
		       ProtobufCMessage **ret)
{
	struct alloc_budget budget = { .left = IPC_FRAME_MAX_DECODE_ALLOC };
	ProtobufCAllocator allocator = {
		.alloc = budget_alloc,
		.free = budget_free,
		.allocator_data = &budget,
	};
	ProtobufCMessage *m;

	if (!desc || !ret || (!data && len > 0))
		return -EINVAL;
	if (len > IPC_FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;

	/* protobuf-c reports malformed input and allocation failure alike. */
	m = protobuf_c_message_unpack(desc, &allocator, len, data);
	if (!m)
		return -EBADMSG;

	*ret = m;
	return 0;
}

int ipc_frame_unpack(const uint8_t *payload, size_t len, Perfetto__Protos__IPCFrame **ret)
{
	ProtobufCMessage *m = NULL;
	int r;

	if (!ret)
		return -EINVAL;
	r = ipc_message_unpack(&perfetto__protos__ipcframe__descriptor, payload, len, &m);
	if (r < 0)
		return r;
	*ret = (Perfetto__Protos__IPCFrame *)m;
	return 0;
}

Perfetto__Protos__IPCFrame *ipc_frame_free(Perfetto__Protos__IPCFrame *frame)
{
	/*
	 * The bounded allocator is malloc()/free() underneath, so the default
	 * allocator can release what it produced.
	 */
	if (frame)
		perfetto__protos__ipcframe__free_unpacked(frame, NULL);
	return NULL;
}

int ipc_frame_encode(const Perfetto__Protos__IPCFrame *frame, uint8_t **ret_buf, size_t *ret_len)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t size, packed;

	if (!frame || !ret_buf || !ret_len)
		return -EINVAL;

	size = perfetto__protos__ipcframe__get_packed_size(frame);
	if (size > IPC_FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;

	buf = malloc(IPC_FRAME_HEADER_SIZE + size);
	if (!buf)
		return -ENOMEM;

	buf[0] = size & 0xff;
	buf[1] = (size >> 8) & 0xff;
	buf[2] = (size >> 16) & 0xff;
	buf[3] = (size >> 24) & 0xff;
	packed = perfetto__protos__ipcframe__pack(frame, buf + IPC_FRAME_HEADER_SIZE);
	if (packed != size)
		return -EIO;

	*ret_buf = TAKE_PTR(buf);
	*ret_len = IPC_FRAME_HEADER_SIZE + size;
	return 0;
}

/* ---- decoder ----------------------------------------------------------------- */

int ipc_frame_decoder_new(struct ipc_frame_decoder **ret)
{
	_cleanup_free_ struct ipc_frame_decoder *d = NULL;

	if (!ret)
		return -EINVAL;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->buf = malloc(IPC_BUFFER_SIZE);
	if (!d->buf)
		return -ENOMEM;
	d->fd = -EBADF;

	*ret = TAKE_PTR(d);
	return 0;
}

struct ipc_frame_decoder *ipc_frame_decoder_free(struct ipc_frame_decoder *d)
{
	if (!d)
		return NULL;
	closep(&d->fd);
	free(d->buf);
	free(d);
	return NULL;
}

int ipc_frame_decoder_begin_receive(struct ipc_frame_decoder *d, uint8_t **ret_buf, size_t *ret_size)
{
	if (!d || !ret_buf || !ret_size)
		return -EINVAL;
	if (d->broken)
		return -EMSGSIZE;

	if (d->rpos > 0) {
		/* Only the tail of a partial frame is ever moved. */
		memmove(d->buf, d->buf + d->rpos, d->wpos - d->rpos);
		d->base += d->rpos;
		d->wpos -= d->rpos;
		d->rpos = 0;
	}
	if (d->wpos >= IPC_BUFFER_SIZE)
		return -ENOBUFS;

	*ret_buf = d->buf + d->wpos;
	*ret_size = IPC_BUFFER_SIZE - d->wpos;
	return 0;
}

void ipc_frame_decoder_end_receive(struct ipc_frame_decoder *d, size_t n, int fd)
{
	if (!d) {
		closep(&fd);
		return;
	}

	n = MIN(n, IPC_BUFFER_SIZE - d->wpos);
	d->wpos += n;

	if (fd < 0)
		return;
	if (n == 0) {
		/* No byte to tie the fd to. */
		closep(&fd);
		d->n_dropped++;
		return;
	}
	if (d->fd >= 0) {
		/* The frame of the earlier fd was never completed and popped. */
		closep(&d->fd);
		d->n_dropped++;
	}
	d->fd = fd;
	d->fd_pos = d->base + d->wpos - 1;
}

int ipc_frame_decoder_feed(struct ipc_frame_decoder *d, const void *data, size_t len, int fd)
{
	uint8_t *dst;
	size_t room, n;
	int r;

	if (!d || (!data && len > 0)) {
		closep(&fd);
		return -EINVAL;
	}

	r = ipc_frame_decoder_begin_receive(d, &dst, &room);
	if (r == -ENOBUFS)
		room = 0;
	else if (r < 0) {
		closep(&fd);
		return r;
	}

	n = MIN(len, room);
	n = MIN(n, (size_t)INT32_MAX);
	if (n > 0)
		memcpy(dst, data, n);
	ipc_frame_decoder_end_receive(d, n, fd);
	return (int)n;
}

static uint32_t read_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int ipc_frame_decoder_next(struct ipc_frame_decoder *d, Perfetto__Protos__IPCFrame **ret_frame, int *ret_fd)
{
	if (!d || !ret_frame)
		return -EINVAL;
	if (d->broken)
		return -EMSGSIZE;

	for (;;) {
		_cleanup_close_ int frame_fd = -EBADF;
		Perfetto__Protos__IPCFrame *f;
		size_t avail = d->wpos - d->rpos;
		uint64_t frame_end;
		const uint8_t *payload;
		uint32_t len;
		int r;

		if (avail < IPC_FRAME_HEADER_SIZE)
			return 0;

		len = read_le32(d->buf + d->rpos);
		if (len > IPC_FRAME_MAX_PAYLOAD) {
			/* Nothing after this header can be trusted to be a frame boundary. */
			d->broken = true;
			return -EMSGSIZE;
		}
		if (avail < IPC_FRAME_HEADER_SIZE + (size_t)len)
			return 0;

		payload = d->buf + d->rpos + IPC_FRAME_HEADER_SIZE;
		d->rpos += IPC_FRAME_HEADER_SIZE + len;
		frame_end = d->base + d->rpos;

		if (d->fd >= 0 && d->fd_pos < frame_end)
			frame_fd = TAKE_FD(d->fd);

		if (len == 0)
			continue;

		r = ipc_frame_unpack(payload, len, &f);
		if (r < 0) {
			d->n_dropped++;
			continue;
		}

		*ret_frame = f;
		if (ret_fd)
			*ret_fd = TAKE_FD(frame_fd);
		return 1;
	}
}

uint64_t ipc_frame_decoder_get_dropped(const struct ipc_frame_decoder *d)
{
	return d ? d->n_dropped : 0;
}

size_t ipc_frame_decoder_get_buffered(const struct ipc_frame_decoder *d)
{
	return d ? d->wpos - d->rpos : 0;
}
