/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The output file: a stream of `0A <varint len> <TracePacket>` records, the
 * encoding of Trace.packet.  Records are gathered in a fixed buffer and
 * written when it fills or when a read pass ends; a packet bigger than the
 * buffer goes straight out with writev(), so memory use does not depend on
 * the trace size.  After the first write error nothing more is written and
 * every call returns that error.
 */
#include <sys/uio.h>

#include "service/svc_internal.h"
#include "util/util.h"
#include "util/util_varint.h"

#define TRACE_BUF_SIZE (256u * 1024)
#define TRACE_PACKET_TAG 0x0a /* Trace.packet = 1, length-delimited */

struct svc_trace {
	int fd;
	uint64_t max_size;
	uint64_t written;       /* bytes handed to the kernel */
	int error;
	size_t len;
	uint8_t buf[TRACE_BUF_SIZE];
};

int svc_trace_new(int fd, uint64_t max_size, struct svc_trace **ret)
{
	struct svc_trace *t;

	if (fd < 0)
		return -EBADF;
	t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = fd;
	t->max_size = max_size;
	t->written = 0;
	t->error = 0;
	t->len = 0;
	*ret = t;
	return 0;
}

struct svc_trace *svc_trace_free(struct svc_trace *t)
{
	free(t);
	return NULL;
}

static int writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int svc_trace_flush(struct svc_trace *t)
{
	int r;

	if (t->error)
		return t->error;
	if (t->len == 0)
		return 0;
	r = write_all(t->fd, t->buf, t->len);
	if (r < 0)
		return (t->error = r);
	t->written += t->len;
	t->len = 0;
	return 0;
}

int svc_trace_append(struct svc_trace *t, const uint8_t *data, size_t len, const uint8_t *trailer,
		     size_t tlen)
{
	uint8_t pre[1 + 10];
	size_t plen, total;
	int r;

	if (t->error)
		return t->error;
	pre[0] = TRACE_PACKET_TAG;
	plen = (size_t)(varint_put(pre + 1, (uint64_t)len + tlen) - pre);
	total = plen + len + tlen;

	/* traced stops before the record that would reach the limit. */
	if (t->max_size && t->written + t->len + total >= t->max_size)
		return 1;

	if (t->len + total > sizeof(t->buf)) {
		r = svc_trace_flush(t);
		if (r < 0)
			return r;
	}
	if (total > sizeof(t->buf)) {
		struct iovec iov[3] = {
			{ .iov_base = pre, .iov_len = plen },
			{ .iov_base = (void *)data, .iov_len = len },
			{ .iov_base = (void *)trailer, .iov_len = tlen },
		};

		r = writev_all(t->fd, iov, tlen ? 3 : 2);
		if (r < 0)
			return (t->error = r);
		t->written += total;
		return 0;
	}
	memcpy(t->buf + t->len, pre, plen);
	memcpy(t->buf + t->len + plen, data, len);
	if (tlen)
		memcpy(t->buf + t->len + plen + len, trailer, tlen);
	t->len += total;
	return 0;
}

uint64_t svc_trace_bytes(const struct svc_trace *t)
{
	return t->written + t->len;
}
