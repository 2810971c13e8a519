/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ipc/: the frame codec on fixed byte strings, then client and host talking
 * over real sockets (filesystem path, abstract, socketpair, TCP loopback)
 * on one event loop, including fd passing, streams, rejections and the
 * two ways a peer gets dropped (oversized frame, not reading).
 */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "util/util.h"

#define WAIT_NS (5ull * 1000000000ull)

/* Runs the loop until @expr holds or 5 s pass; evaluates to @expr. */
#define RUN_UNTIL(e, expr)                                                          \
	({                                                                          \
		uint64_t _deadline = now_ns(CLOCK_MONOTONIC) + WAIT_NS;             \
		bool _ok;                                                           \
		while (!(_ok = (expr)) && now_ns(CLOCK_MONOTONIC) < _deadline)      \
			ck_assert_int_ge(loop_run_once((e), 100 * 1000), 0);         \
		_ok;                                                                \
	})

static const uint8_t worked_example[] = {
	0x12, 0x00, 0x00, 0x00, 0x10, 0x01, 0x1A, 0x0E, 0x0A, 0x0C, 0x50,
	0x72, 0x6F, 0x64, 0x75, 0x63, 0x65, 0x72, 0x50, 0x6F, 0x72, 0x74,
};

/* ---- helpers --------------------------------------------------------------- */

static void encode_bind(uint64_t rid, const char *name, uint8_t **buf, size_t *len)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__BindService b = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;

	b.service_name = (char *)name;
	f.has_request_id = true;
	f.request_id = rid;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
	f.msg_bind_service = &b;
	ck_assert_int_eq(ipc_frame_encode(&f, buf, len), 0);
}

static void encode_invoke(uint64_t rid, uint32_t sid, uint32_t mid, const char *args, bool drop, uint8_t **buf,
			  size_t *len)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__InvokeMethod m = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;

	m.has_service_id = m.has_method_id = m.has_args_proto = m.has_drop_reply = true;
	m.service_id = sid;
	m.method_id = mid;
	m.args_proto.data = (uint8_t *)args;
	m.args_proto.len = strlen(args);
	m.drop_reply = drop;
	f.has_request_id = true;
	f.request_id = rid;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
	f.msg_invoke_method = &m;
	ck_assert_int_eq(ipc_frame_encode(&f, buf, len), 0);
}

/* A frame whose payload is exactly @payload bytes (one data_for_testing entry). */
static void encode_sized(size_t payload, uint8_t **buf, size_t *len)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	ProtobufCBinaryData blob;
	size_t n = payload - 1 - 3; /* tag + 3-byte varint length for 16 KiB..2 MiB */

	blob.len = n;
	blob.data = calloc(1, n);
	ck_assert_ptr_nonnull(blob.data);
	f.n_data_for_testing = 1;
	f.data_for_testing = &blob;
	ck_assert_uint_eq(perfetto__protos__ipcframe__get_packed_size(&f), payload);
	if (payload <= IPC_FRAME_MAX_PAYLOAD)
		ck_assert_int_eq(ipc_frame_encode(&f, buf, len), 0);
	else
		ck_assert_int_eq(ipc_frame_encode(&f, buf, len), -EMSGSIZE);
	free(blob.data);
}

static int make_memfd(const char *contents)
{
	int fd = memfd_create("ipc-test", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, contents, strlen(contents)), 0);
	return fd;
}

static char *read_fd_contents(int fd)
{
	static char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	return buf;
}

/* Collects frames a raw (non-ipc) peer reads from @fd. */
static int raw_read_frame(struct loop *e, int fd, struct ipc_frame_decoder *d, Perfetto__Protos__IPCFrame **ret)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint8_t *buf;
		size_t size;
		ssize_t n;
		int r;

		r = ipc_frame_decoder_next(d, ret, NULL);
		if (r != 0)
			return r;
		if (!RUN_UNTIL(e, poll(&p, 1, 0) > 0))
			return -ETIMEDOUT;
		ck_assert_int_eq(ipc_frame_decoder_begin_receive(d, &buf, &size), 0);
		n = recv(fd, buf, size, MSG_DONTWAIT);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		ipc_frame_decoder_end_receive(d, (size_t)n, -EBADF);
	}
}

/* ---- codec ------------------------------------------------------------------- */

START_TEST(test_encode_worked_example)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len = 0;

	encode_bind(1, "ProducerPort", &buf, &len);
	ck_assert_uint_eq(len, sizeof(worked_example));
	ck_assert_mem_eq(buf, worked_example, sizeof(worked_example));
}
END_TEST

START_TEST(test_decode_byte_by_byte)
{
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;

	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	for (size_t i = 0; i < sizeof(worked_example); i++) {
		ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 0);
		ck_assert_int_eq(ipc_frame_decoder_feed(d, worked_example + i, 1, -EBADF), 1);
	}
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ck_assert_uint_eq(f->request_id, 1);
	ck_assert_int_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
	ck_assert_str_eq(f->msg_bind_service->service_name, "ProducerPort");
	ipc_frame_free(f);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 0);
	ck_assert_uint_eq(ipc_frame_decoder_get_buffered(d), 0);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_decode_three_in_one)
{
	_cleanup_free_ uint8_t *a = NULL, *b = NULL, *c = NULL, *all = NULL;
	size_t la, lb, lc;
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;

	encode_bind(7, "A", &a, &la);
	encode_invoke(8, 1, 2, "args", false, &b, &lb);
	encode_bind(9, "ConsumerPort", &c, &lc);
	all = malloc(la + lb + lc);
	memcpy(all, a, la);
	memcpy(all + la, b, lb);
	memcpy(all + la + lb, c, lc);

	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, all, la + lb + lc, -EBADF), (int)(la + lb + lc));

	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ck_assert_uint_eq(f->request_id, 7);
	ck_assert_str_eq(f->msg_bind_service->service_name, "A");
	f = ipc_frame_free(f);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ck_assert_uint_eq(f->request_id, 8);
	ck_assert_int_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD);
	ck_assert_uint_eq(f->msg_invoke_method->method_id, 2);
	ck_assert_uint_eq(f->msg_invoke_method->args_proto.len, 4);
	ck_assert_mem_eq(f->msg_invoke_method->args_proto.data, "args", 4);
	f = ipc_frame_free(f);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ck_assert_uint_eq(f->request_id, 9);
	f = ipc_frame_free(f);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 0);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_decode_oversized)
{
	static const uint8_t hdr[] = { 0xFD, 0xFF, 0x01, 0x00, 0x0A, 0x00 }; /* 131069 */
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;
	uint8_t *buf;
	size_t size;

	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, hdr, sizeof(hdr), -EBADF), (int)sizeof(hdr));
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), -EMSGSIZE);
	/* Sticky: the stream cannot be resynchronised. */
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), -EMSGSIZE);
	ck_assert_int_eq(ipc_frame_decoder_begin_receive(d, &buf, &size), -EMSGSIZE);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_decode_max_size)
{
	_cleanup_free_ uint8_t *buf = NULL, *big = NULL;
	size_t len = 0;
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;

	/* One byte more than fits is refused at the sender. */
	encode_sized(IPC_FRAME_MAX_PAYLOAD + 1, &big, &len);
	ck_assert_ptr_null(big);

	/* The largest frame fills the 128 KiB buffer exactly and decodes. */
	encode_sized(IPC_FRAME_MAX_PAYLOAD, &buf, &len);
	ck_assert_uint_eq(len, IPC_BUFFER_SIZE);
	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, buf, len, -EBADF), (int)len);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ck_assert_uint_eq(f->n_data_for_testing, 1);
	ck_assert_uint_eq(f->data_for_testing[0].len, IPC_FRAME_MAX_PAYLOAD - 4);
	ipc_frame_free(f);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_decode_zero_length_skipped)
{
	static const uint8_t zero[] = { 0, 0, 0, 0 };
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;

	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, zero, sizeof(zero), -EBADF), 4);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 0);
	ck_assert_uint_eq(ipc_frame_decoder_get_buffered(d), 0);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, zero, sizeof(zero), -EBADF), 4);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, worked_example, sizeof(worked_example), -EBADF),
			 (int)sizeof(worked_example));
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ck_assert_str_eq(f->msg_bind_service->service_name, "ProducerPort");
	ipc_frame_free(f);
	ck_assert_uint_eq(ipc_frame_decoder_get_dropped(d), 0);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_decode_garbage_dropped)
{
	/* Field 2 as a length-delimited field with a length running past the end. */
	static const uint8_t garbage[] = { 3, 0, 0, 0, 0x12, 0x7F, 0xFF };
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;

	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, garbage, sizeof(garbage), -EBADF), (int)sizeof(garbage));
	ck_assert_int_eq(ipc_frame_decoder_feed(d, worked_example, sizeof(worked_example), -EBADF),
			 (int)sizeof(worked_example));
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ck_assert_uint_eq(f->request_id, 1);
	ipc_frame_free(f);
	ck_assert_uint_eq(ipc_frame_decoder_get_dropped(d), 1);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 0);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_decode_truncated_waits)
{
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;
	size_t n = sizeof(worked_example);

	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, worked_example, n - 1, -EBADF), (int)n - 1);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 0);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 0);
	ck_assert_uint_eq(ipc_frame_decoder_get_buffered(d), n - 1);
	ck_assert_int_eq(ipc_frame_decoder_feed(d, worked_example + n - 1, 1, -EBADF), 1);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
	ipc_frame_free(f);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_decode_fd_follows_its_frame)
{
	_cleanup_free_ uint8_t *a = NULL, *b = NULL;
	size_t la, lb;
	struct ipc_frame_decoder *d = NULL;
	Perfetto__Protos__IPCFrame *f = NULL;
	int fd = -EBADF, memfd = make_memfd("abc");

	encode_bind(1, "first", &a, &la);
	encode_bind(2, "second", &b, &lb);
	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
	/* First half of A, then the rest of A plus B with the fd (as a read would glue them). */
	ck_assert_int_eq(ipc_frame_decoder_feed(d, a, la / 2, -EBADF), (int)(la / 2));
	ck_assert_int_eq(ipc_frame_decoder_feed(d, a + la / 2, la - la / 2, -EBADF), (int)(la - la / 2));
	ck_assert_int_eq(ipc_frame_decoder_feed(d, b, lb, memfd), (int)lb);

	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, &fd), 1);
	ck_assert_uint_eq(f->request_id, 1);
	ck_assert_int_lt(fd, 0);
	f = ipc_frame_free(f);
	ck_assert_int_eq(ipc_frame_decoder_next(d, &f, &fd), 1);
	ck_assert_uint_eq(f->request_id, 2);
	ck_assert_int_eq(fd, memfd);
	ck_assert_str_eq(read_fd_contents(fd), "abc");
	ipc_frame_free(f);
	close(fd);
	ipc_frame_decoder_free(d);
}
END_TEST

START_TEST(test_unpack_bounded_alloc)
{
	/* n empty data_for_testing entries: 2 bytes each on the wire, 16+ in memory. */
	size_t n_small = 1000, n_big = 60000;
	_cleanup_free_ uint8_t *p = malloc(2 * n_big);
	Perfetto__Protos__IPCFrame *f = NULL;

	for (size_t i = 0; i < n_big; i++) {
		p[2 * i] = 0x0A;
		p[2 * i + 1] = 0x00;
	}
	ck_assert_int_eq(ipc_frame_unpack(p, 2 * n_small, &f), 0);
	ck_assert_uint_eq(f->n_data_for_testing, n_small);
	ipc_frame_free(f);
	ck_assert_int_eq(ipc_frame_unpack(p, 2 * n_big, &f), -EBADMSG);
	ck_assert_int_eq(ipc_frame_unpack(p, IPC_FRAME_MAX_PAYLOAD + 1, &f), -EMSGSIZE);

	/* Any message type goes through the same cap (e.g. RPC args). */
	{
		static const uint8_t bind[] = { 0x0A, 0x03, 'a', 'b', 'c' };
		static const uint8_t bad[] = { 0x0A, 0x09, 'a' };
		ProtobufCMessage *m = NULL;

		ck_assert_int_eq(ipc_message_unpack(&perfetto__protos__ipcframe__bind_service__descriptor, bind,
						    sizeof(bind), &m), 0);
		ck_assert_str_eq(((Perfetto__Protos__IPCFrame__BindService *)m)->service_name, "abc");
		protobuf_c_message_free_unpacked(m, NULL);
		ck_assert_int_eq(ipc_message_unpack(&perfetto__protos__ipcframe__bind_service__descriptor, bad,
						    sizeof(bad), &m), -EBADMSG);
		ck_assert_int_eq(ipc_message_unpack(&perfetto__protos__ipcframe__descriptor, p, 2 * n_big, &m),
				 -EBADMSG);
	}
}
END_TEST

START_TEST(test_fuzz_corpus_decodes)
{
	_cleanup_free_ char *dir = NULL;
	const char *root = getenv("TP_SOURCE_ROOT");
	unsigned n_files = 0;
	struct dirent *de;
	DIR *dp;

	ck_assert_ptr_nonnull(root);
	ck_assert_int_ge(asprintf(&dir, "%s/tests/fuzz/corpus/ipc_frame", root), 0);
	dp = opendir(dir);
	ck_assert_ptr_nonnull(dp);
	while ((de = readdir(dp))) {
		_cleanup_free_ char *data = NULL;
		struct ipc_frame_decoder *d = NULL;
		Perfetto__Protos__IPCFrame *f = NULL;
		size_t len;

		if (de->d_name[0] == '.')
			continue;
		ck_assert_int_eq(read_full_file_at(dirfd(dp), de->d_name, 1 << 20, &data, &len), 0);
		ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
		ck_assert_int_eq(ipc_frame_decoder_feed(d, data, len, -EBADF), (int)len);
		/* Every seed is a valid stream: at least one frame, nothing dropped. */
		ck_assert_int_eq(ipc_frame_decoder_next(d, &f, NULL), 1);
		ipc_frame_free(f);
		while (ipc_frame_decoder_next(d, &f, NULL) == 1)
			f = ipc_frame_free(f);
		ck_assert_uint_eq(ipc_frame_decoder_get_dropped(d), 0);
		ck_assert_uint_eq(ipc_frame_decoder_get_buffered(d), 0);
		ipc_frame_decoder_free(d);
		n_files++;
	}
	closedir(dp);
	ck_assert_uint_ge(n_files, 3);
}
END_TEST

START_TEST(test_addr_kinds)
{
	ck_assert_int_eq(ipc_addr_kind_from_string("/run/perfetto/traced-producer.sock"), IPC_ADDR_UNIX);
	ck_assert_int_eq(ipc_addr_kind_from_string("@traced"), IPC_ADDR_UNIX_ABSTRACT);
	ck_assert_int_eq(ipc_addr_kind_from_string("127.0.0.1:32278"), IPC_ADDR_INET);
	ck_assert_int_eq(ipc_addr_kind_from_string("localhost:1"), IPC_ADDR_INET);
	ck_assert_int_eq(ipc_addr_kind_from_string("[::1]:32278"), IPC_ADDR_INET6);
	ck_assert_int_eq(ipc_addr_kind_from_string("vsock://2:1234"), IPC_ADDR_VSOCK);
	ck_assert_int_eq(ipc_addr_kind_from_string("/tmp/a:b"), IPC_ADDR_UNIX);
	ck_assert_int_eq(ipc_addr_kind_from_string(""), -EINVAL);
	ck_assert(ipc_addr_kind_can_pass_fds(IPC_ADDR_UNIX_ABSTRACT));
	ck_assert(!ipc_addr_kind_can_pass_fds(IPC_ADDR_VSOCK));
	ck_assert(!ipc_addr_kind_can_pass_fds(IPC_ADDR_INET));
}
END_TEST

/* ---- loopback fixture -------------------------------------------------------- */

#define STREAM_FD_TEXT "hello from a memfd"
#define CLIENT_FD_TEXT "client says hi"

static const char *const test_methods[] = { "Echo", "Stream", "Fail" };

struct svc_state {
	unsigned n_calls;
	unsigned n_disconnects;
	bool last_wanted;
	uint64_t last_request_id;
	struct ipc_peer peer;
	int peer_r;
	struct ipc_reply *held;
	struct ipc_conn *last_conn;
};

static int svc_invoke(struct ipc_conn *conn, uint32_t method_id, const uint8_t *args, size_t len,
		      struct ipc_reply *reply, void *userdata)
{
	struct svc_state *st = userdata;
	_cleanup_close_ int in_fd = ipc_conn_take_fd(conn);
	int memfd;

	st->n_calls++;
	st->last_wanted = ipc_reply_is_wanted(reply);
	st->last_request_id = ipc_reply_get_request_id(reply);
	st->last_conn = conn;
	st->peer_r = ipc_conn_get_peer(conn, &st->peer);

	switch (method_id) {
	case 1: /* Echo: the args, or the contents of the fd sent along */
		if (in_fd >= 0) {
			const char *s = read_fd_contents(in_fd);

			(void)ipc_reply_send(reply, s, strlen(s), false, -EBADF);
		} else
			(void)ipc_reply_send(reply, args, len, false, -EBADF);
		return 0;
	case 2: /* Stream: three messages, the second with a memfd; "hold" keeps the handle */
		if (len == 4 && memcmp(args, "hold", 4) == 0) {
			st->held = reply;
			return 0;
		}
		/* Over TCP/vsock there is no fd passing (shmem emulation territory). */
		memfd = ipc_conn_can_pass_fds(conn) ? make_memfd(STREAM_FD_TEXT) : -EBADF;
		ck_assert_int_eq(ipc_reply_send(reply, "one", 3, true, -EBADF), 0);
		ck_assert_int_eq(ipc_reply_send(reply, "two", 3, true, memfd), 0);
		if (memfd >= 0)
			close(memfd);
		ck_assert_int_eq(ipc_reply_send(reply, "three", 5, false, -EBADF), 0);
		return 0;
	default: /* Fail: as if the args did not decode */
		return -EBADMSG;
	}
}

static void svc_disconnect(struct ipc_conn *conn, void *userdata)
{
	struct svc_state *st = userdata;

	st->n_disconnects++;
	if (st->held && ipc_reply_get_conn(st->held) == conn) {
		/* The stream outlives the connection until released here. */
		ck_assert_int_eq(ipc_reply_send(st->held, "x", 1, true, -EBADF), -ENOTCONN);
		st->held = ipc_reply_free(st->held);
	}
}

static int other_invoke(struct ipc_conn *conn, uint32_t method_id, const uint8_t *args, size_t len,
			struct ipc_reply *reply, void *userdata)
{
	return -ENOTSUP;
}

struct fixture {
	struct loop *e;
	struct ipc_host *h;
	struct svc_state st;
	uint32_t test_sid;
};

static void fixture_init(struct fixture *fx)
{
	static const char *const other_methods[] = { "Nop" };
	uint32_t sid = 0;

	memset(fx, 0, sizeof(*fx));
	ck_assert_int_eq(loop_new(&fx->e), 0);
	ck_assert_int_eq(ipc_host_new(&fx->h), 0);
	ck_assert_int_eq(ipc_host_attach_event(fx->h, fx->e), 0);
	/* Registered first, so the test service gets id 2. */
	ck_assert_int_eq(ipc_host_register_service(fx->h, "Other", other_methods, 1, other_invoke, NULL, NULL, &sid),
			 0);
	ck_assert_uint_eq(sid, 1);
	ck_assert_int_eq(ipc_host_register_service(fx->h, "TestService", test_methods, ARRAY_SIZE(test_methods),
						   svc_invoke, svc_disconnect, &fx->st, &fx->test_sid),
			 0);
	ck_assert_uint_eq(fx->test_sid, 2);
	ck_assert_int_eq(ipc_host_register_service(fx->h, "Other", other_methods, 1, other_invoke, NULL, NULL, NULL),
			 -EEXIST);
}

static void fixture_done(struct fixture *fx)
{
	if (fx->st.held)
		fx->st.held = ipc_reply_free(fx->st.held);
	fx->h = ipc_host_free(fx->h);
	fx->e = loop_unref(fx->e);
}

/* ---- client-side recorders ----------------------------------------------- */

struct bind_result {
	bool done;
	int error;
	uint32_t sid;
};

static void on_bind(struct ipc_client *c, int error, uint32_t sid, void *userdata)
{
	struct bind_result *b = userdata;

	b->done = true;
	b->error = error;
	b->sid = sid;
}

struct reply_log {
	unsigned n;
	bool finished;
	int error;
	bool more[8];
	char text[8][32];
	char fd_text[8][64];
};

static void on_reply(struct ipc_client *c, int error, const uint8_t *data, size_t len, bool has_more, int fd,
		     void *userdata)
{
	struct reply_log *l = userdata;

	ck_assert(!l->finished);
	if (l->n < ARRAY_SIZE(l->text)) {
		l->more[l->n] = has_more;
		snprintf(l->text[l->n], sizeof(l->text[0]), "%.*s", (int)len, data ? (const char *)data : "");
		if (fd >= 0) {
			_cleanup_close_ int owned = ipc_client_take_fd(c);

			ck_assert_int_eq(owned, fd);
			snprintf(l->fd_text[l->n], sizeof(l->fd_text[0]), "%s", read_fd_contents(owned));
		}
	}
	l->n++;
	l->error = error;
	if (!has_more)
		l->finished = true;
}

struct disc_result {
	bool done;
	int error;
};

static void on_client_disconnect(struct ipc_client *c, int error, void *userdata)
{
	struct disc_result *d = userdata;

	d->done = true;
	d->error = error;
}

/* The RPC checks shared by every transport. */
static void run_rpc_checks(struct fixture *fx, struct ipc_client *c, bool fds)
{
	struct bind_result b = {}, bad = {};
	struct reply_log echo1 = {}, echo2 = {}, stream = {}, fail = {}, badm = {}, with_fd = {};
	uint64_t rid = 0;
	int echo, stream_id, fail_id;

	ck_assert_int_eq(ipc_client_attach_event(c, fx->e), 0);
	ck_assert_int_eq(ipc_client_bind_service(c, "TestService", on_bind, &b, &rid), 0);
	ck_assert_uint_eq(rid, 1);
	ck_assert_int_eq(ipc_client_bind_service(c, "NoSuchService", on_bind, &bad, &rid), 0);
	ck_assert_uint_eq(rid, 2);
	ck_assert(RUN_UNTIL(fx->e, b.done && bad.done));
	ck_assert_int_eq(b.error, 0);
	ck_assert_uint_eq(b.sid, fx->test_sid);
	ck_assert_int_eq(bad.error, -ENOENT);
	ck_assert_int_eq(ipc_client_can_pass_fds(c), fds);

	/* Looked up by name: never assume ids. */
	echo = ipc_client_get_method_id(c, b.sid, "Echo");
	stream_id = ipc_client_get_method_id(c, b.sid, "Stream");
	fail_id = ipc_client_get_method_id(c, b.sid, "Fail");
	ck_assert_int_eq(echo, 1);
	ck_assert_int_eq(stream_id, 2);
	ck_assert_int_eq(fail_id, 3);
	ck_assert_int_eq(ipc_client_get_method_id(c, b.sid, "Nope"), -ENOENT);
	ck_assert_int_eq(ipc_client_get_method_id(c, 77, "Echo"), -ESRCH);

	/* Two calls in flight: each reply reaches its own callback. */
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, echo, "first", 5, -EBADF, on_reply, &echo1, &rid), 0);
	ck_assert_uint_eq(rid, 3);
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, echo, "second", 6, -EBADF, on_reply, &echo2, &rid), 0);
	ck_assert_uint_eq(rid, 4);
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, stream_id, NULL, 0, -EBADF, on_reply, &stream, NULL), 0);
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, fail_id, NULL, 0, -EBADF, on_reply, &fail, NULL), 0);
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, 99, NULL, 0, -EBADF, on_reply, &badm, NULL), 0);
	ck_assert(RUN_UNTIL(fx->e, echo1.finished && echo2.finished && stream.finished && fail.finished &&
					   badm.finished));

	ck_assert_uint_eq(echo1.n, 1);
	ck_assert_int_eq(echo1.error, 0);
	ck_assert_str_eq(echo1.text[0], "first");
	ck_assert_str_eq(echo2.text[0], "second");
	ck_assert_int_eq(fx->st.peer_r, 0);
	if (fds) {
		ck_assert_int_eq(fx->st.peer.pid, getpid());
		ck_assert_int_eq(fx->st.peer.uid, getuid());
	}

	ck_assert_uint_eq(stream.n, 3);
	ck_assert_int_eq(stream.error, 0);
	ck_assert_str_eq(stream.text[0], "one");
	ck_assert_str_eq(stream.text[1], "two");
	ck_assert_str_eq(stream.text[2], "three");
	ck_assert(stream.more[0] && stream.more[1] && !stream.more[2]);
	ck_assert_str_eq(stream.fd_text[0], "");
	ck_assert_str_eq(stream.fd_text[2], "");
	if (fds)
		ck_assert_str_eq(stream.fd_text[1], STREAM_FD_TEXT);

	ck_assert_uint_eq(fail.n, 1);
	ck_assert_int_eq(fail.error, -EREMOTEIO);
	ck_assert_uint_eq(badm.n, 1);
	ck_assert_int_eq(badm.error, -EREMOTEIO);

	/* drop_reply: the service sees it; the client gets nothing. */
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, echo, "quiet", 5, -EBADF, NULL, NULL, &rid), 0);
	ck_assert(RUN_UNTIL(fx->e, fx->st.last_request_id == rid));
	ck_assert(!fx->st.last_wanted);

	/* An fd from the client reaches the handler of its own request. */
	if (fds) {
		int memfd = make_memfd(CLIENT_FD_TEXT);

		ck_assert_int_eq(ipc_client_invoke(c, b.sid, echo, "x", 1, memfd, on_reply, &with_fd, NULL), 0);
		close(memfd);
		ck_assert(RUN_UNTIL(fx->e, with_fd.finished));
		ck_assert_str_eq(with_fd.text[0], CLIENT_FD_TEXT);
	} else {
		ck_assert_int_eq(ipc_client_invoke(c, b.sid, echo, "x", 1, STDIN_FILENO, on_reply, &with_fd, NULL),
				 -EOPNOTSUPP);
	}
}

START_TEST(test_loopback_path)
{
	char dir[] = "/tmp/test-ipc-XXXXXX";
	_cleanup_free_ char *path = NULL;
	struct fixture fx;
	struct ipc_client *c = NULL;
	struct ipc_host_stats stats;
	struct stat st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_ge(asprintf(&path, "%s/producer.sock", dir), 0);
	fixture_init(&fx);

	/* A stale socket from an earlier run is replaced; a regular file is not. */
	ck_assert_int_eq(ipc_host_listen(fx.h, path, 0666), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0666);

	ck_assert_int_eq(ipc_client_new(path, &c), 0);
	run_rpc_checks(&fx, c, true);
	ipc_host_get_stats(fx.h, &stats);
	ck_assert_uint_eq(stats.connections_accepted, 1);
	ck_assert_uint_eq(stats.connections_open, 1);

	c = ipc_client_free(c);
	ck_assert(RUN_UNTIL(fx.e, fx.st.n_disconnects == 1));
	ipc_host_get_stats(fx.h, &stats);
	ck_assert_uint_eq(stats.connections_open, 0);

	fixture_done(&fx);
	/* The host removes the socket it created. */
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_listen_stale_socket)
{
	char dir[] = "/tmp/test-ipc-XXXXXX";
	_cleanup_free_ char *path = NULL, *file = NULL;
	struct ipc_host *h1 = NULL, *h2 = NULL;
	int fd = -EBADF;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_ge(asprintf(&path, "%s/s.sock", dir), 0);
	ck_assert_int_ge(asprintf(&file, "%s/regular", dir), 0);
	ck_assert_int_eq(ipc_host_new(&h1), 0);
	ck_assert_int_eq(ipc_host_new(&h2), 0);

	/* A socket left behind (listener gone without unlinking) is replaced. */
	ck_assert_int_eq(ipc_addr_listen(path, 0, &fd), 0);
	close(fd);
	ck_assert_int_eq(ipc_host_listen(h1, path, 0), 0);
	/* A regular file is never removed. */
	fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(ipc_host_listen(h2, file, 0), -EEXIST);
	ck_assert_int_eq(access(file, F_OK), 0);

	ipc_host_free(h1);
	ipc_host_free(h2);
	unlink(file);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_loopback_abstract)
{
	_cleanup_free_ char *addr = NULL;
	struct fixture fx;
	struct ipc_client *c = NULL;

	ck_assert_int_ge(asprintf(&addr, "@test-ipc-%d-%llu", getpid(),
				  (unsigned long long)now_ns(CLOCK_MONOTONIC)), 0);
	fixture_init(&fx);
	ck_assert_int_eq(ipc_host_listen(fx.h, addr, 0), 0);
	ck_assert_int_eq(ipc_client_new(addr, &c), 0);
	run_rpc_checks(&fx, c, true);
	ipc_client_free(c);
	fixture_done(&fx);
}
END_TEST

START_TEST(test_loopback_socketpair)
{
	struct fixture fx;
	struct ipc_client *c = NULL;
	struct ipc_conn *conn = NULL;
	int sp[2];

	fixture_init(&fx);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_host_adopt(fx.h, sp[0], &conn), 0);
	ck_assert_ptr_nonnull(conn);
	ck_assert_uint_eq(ipc_conn_get_id(conn), 1);
	ck_assert(ipc_conn_can_pass_fds(conn));
	ck_assert_int_eq(ipc_client_new_from_fd(sp[1], &c), 0);
	run_rpc_checks(&fx, c, true);
	ck_assert_ptr_eq(fx.st.last_conn, conn);
	ipc_client_free(c);
	fixture_done(&fx);
}
END_TEST

START_TEST(test_loopback_tcp)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	_cleanup_free_ char *addr = NULL;
	struct fixture fx;
	struct ipc_client *c = NULL;
	int fd = -EBADF;

	fixture_init(&fx);
	if (ipc_addr_listen("127.0.0.1:0", 0, &fd) < 0) {
		/* No loopback networking in this sandbox: nothing to test here. */
		fixture_done(&fx);
		return;
	}
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	ck_assert_int_eq(ipc_host_listen_fd(fx.h, fd), 0);
	ck_assert_int_ge(asprintf(&addr, "127.0.0.1:%u", ntohs(sin.sin_port)), 0);
	ck_assert_int_eq(ipc_client_new(addr, &c), 0);
	run_rpc_checks(&fx, c, false);
	ipc_client_free(c);
	fixture_done(&fx);
}
END_TEST

START_TEST(test_connect_refused)
{
	struct ipc_client *c = NULL;

	ck_assert_int_eq(ipc_client_new("/nonexistent-dir-for-ipc-test/sock", &c), -ENOENT);
	ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_connect_tcp_refused)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	_cleanup_free_ char *addr = NULL;
	struct bind_result b = {};
	struct disc_result disc = {};
	struct ipc_client *c = NULL;
	struct loop *e = NULL;
	int fd, r;

	/* A port that was just free: bound, never listened on. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close(fd);
		return; /* no loopback networking here */
	}
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	ck_assert_int_ge(asprintf(&addr, "127.0.0.1:%u", ntohs(sin.sin_port)), 0);

	r = ipc_client_new(addr, &c);
	close(fd);
	if (r < 0) {
		ck_assert_int_eq(r, -ECONNREFUSED);
		return;
	}
	/* Asynchronous failure: the queued bind fails, then the disconnect. */
	ck_assert_int_eq(loop_new(&e), 0);
	ipc_client_set_disconnect_callback(c, on_client_disconnect, &disc);
	ck_assert_int_eq(ipc_client_attach_event(c, e), 0);
	ck_assert_int_eq(ipc_client_bind_service(c, "ProducerPort", on_bind, &b, NULL), 0);
	ck_assert(RUN_UNTIL(e, disc.done));
	ck_assert_int_eq(disc.error, -ECONNREFUSED);
	ck_assert(b.done);
	ck_assert_int_eq(b.error, -ECONNREFUSED);
	ipc_client_free(c);
	loop_unref(e);
}
END_TEST

START_TEST(test_unknown_request)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame *reply = NULL;
	_cleanup_free_ uint8_t *buf = NULL;
	struct ipc_frame_decoder *d = NULL;
	struct ipc_host_stats stats;
	struct fixture fx;
	size_t len;
	int sp[2];

	fixture_init(&fx);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_host_adopt(fx.h, sp[0], NULL), 0);
	ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);

	f.has_request_id = true;
	f.request_id = 42;
	ck_assert_int_eq(ipc_frame_encode(&f, &buf, &len), 0);
	ck_assert_int_eq(write_all(sp[1], buf, len), 0);
	ck_assert_int_eq(raw_read_frame(fx.e, sp[1], d, &reply), 1);
	ck_assert_uint_eq(reply->request_id, 42);
	ck_assert_int_eq(reply->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR);
	ck_assert_str_eq(reply->msg_request_error->error, "unknown request");
	reply = ipc_frame_free(reply);
	ipc_host_get_stats(fx.h, &stats);
	ck_assert_uint_eq(stats.unknown_requests, 1);

	/* A bad method id is answered even with drop_reply=true. */
	free(buf);
	buf = NULL;
	encode_invoke(43, fx.test_sid, 4, "", true, &buf, &len);
	ck_assert_int_eq(write_all(sp[1], buf, len), 0);
	ck_assert_int_eq(raw_read_frame(fx.e, sp[1], d, &reply), 1);
	ck_assert_uint_eq(reply->request_id, 43);
	ck_assert_int_eq(reply->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
	ck_assert(reply->msg_invoke_method_reply->has_success && !reply->msg_invoke_method_reply->success);
	reply = ipc_frame_free(reply);

	/* So is a handler failure (undecodable args), but not a successful drop_reply call. */
	free(buf);
	buf = NULL;
	encode_invoke(44, fx.test_sid, 1, "silent", true, &buf, &len);
	ck_assert_int_eq(write_all(sp[1], buf, len), 0);
	free(buf);
	buf = NULL;
	encode_invoke(45, fx.test_sid, 3, "", true, &buf, &len);
	ck_assert_int_eq(write_all(sp[1], buf, len), 0);
	ck_assert_int_eq(raw_read_frame(fx.e, sp[1], d, &reply), 1);
	ck_assert_uint_eq(reply->request_id, 45);
	ck_assert(!reply->msg_invoke_method_reply->success);
	reply = ipc_frame_free(reply);
	ck_assert_uint_eq(fx.st.n_calls, 2);

	/* Garbage payloads are dropped and counted; the connection stays. */
	{
		static const uint8_t garbage[] = { 3, 0, 0, 0, 0x12, 0x7F, 0xFF };

		ck_assert_int_eq(write_all(sp[1], garbage, sizeof(garbage)), 0);
		free(buf);
		buf = NULL;
		encode_bind(46, "TestService", &buf, &len);
		ck_assert_int_eq(write_all(sp[1], buf, len), 0);
		ck_assert_int_eq(raw_read_frame(fx.e, sp[1], d, &reply), 1);
		ck_assert_uint_eq(reply->request_id, 46);
		ck_assert(reply->msg_bind_service_reply->success);
		ck_assert_uint_eq(reply->msg_bind_service_reply->service_id, 2);
		ck_assert_uint_eq(reply->msg_bind_service_reply->n_methods, 3);
		ck_assert_uint_eq(reply->msg_bind_service_reply->methods[2]->id, 3);
		ck_assert_str_eq(reply->msg_bind_service_reply->methods[2]->name, "Fail");
		reply = ipc_frame_free(reply);
		ipc_host_get_stats(fx.h, &stats);
		ck_assert_uint_eq(stats.frames_dropped, 1);
		ck_assert_uint_eq(stats.connections_open, 1);
	}

	close(sp[1]);
	ipc_frame_decoder_free(d);
	fixture_done(&fx);
}
END_TEST

START_TEST(test_host_drops_oversized_frame)
{
	static const uint8_t hdr[] = { 0xFD, 0xFF, 0x01, 0x00, 0x0A, 0x00, 0x00, 0x00 };
	struct ipc_host_stats stats;
	struct fixture fx;
	char c;
	int sp[2];

	fixture_init(&fx);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_host_adopt(fx.h, sp[0], NULL), 0);
	ck_assert_int_eq(write_all(sp[1], worked_example, sizeof(worked_example)), 0);
	ck_assert_int_eq(write_all(sp[1], hdr, sizeof(hdr)), 0);

	ck_assert(RUN_UNTIL(fx.e, fx.st.n_disconnects == 1));
	ipc_host_get_stats(fx.h, &stats);
	ck_assert_uint_eq(stats.disconnects_frame_too_large, 1);
	ck_assert_uint_eq(stats.connections_open, 0);
	/* The BindService before it was still answered, then the socket closed. */
	{
		struct ipc_frame_decoder *d = NULL;
		Perfetto__Protos__IPCFrame *reply = NULL;

		ck_assert_int_eq(ipc_frame_decoder_new(&d), 0);
		ck_assert_int_eq(raw_read_frame(fx.e, sp[1], d, &reply), 1);
		ck_assert_int_eq(reply->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY);
		ck_assert(!reply->msg_bind_service_reply->success);
		ipc_frame_free(reply);
		ipc_frame_decoder_free(d);
	}
	ck_assert_int_eq(read(sp[1], &c, 1), 0);
	close(sp[1]);
	fixture_done(&fx);
}
END_TEST

START_TEST(test_client_drops_oversized_frame)
{
	static const uint8_t hdr[] = { 0x00, 0x00, 0x10, 0x00 }; /* 1 MiB */
	struct bind_result b = {};
	struct disc_result disc = {};
	struct ipc_client *c = NULL;
	struct loop *e = NULL;
	int sp[2];

	ck_assert_int_eq(loop_new(&e), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_client_new_from_fd(sp[0], &c), 0);
	ipc_client_set_disconnect_callback(c, on_client_disconnect, &disc);
	ck_assert_int_eq(ipc_client_attach_event(c, e), 0);
	ck_assert_int_eq(ipc_client_bind_service(c, "ProducerPort", on_bind, &b, NULL), 0);
	ck_assert_int_eq(write_all(sp[1], hdr, sizeof(hdr)), 0);

	ck_assert(RUN_UNTIL(e, disc.done));
	ck_assert_int_eq(disc.error, -EMSGSIZE);
	/* The pending bind got its final callback first, with the same error. */
	ck_assert(b.done);
	ck_assert_int_eq(b.error, -EMSGSIZE);
	ck_assert(!ipc_client_is_connected(c));
	ck_assert_int_eq(ipc_client_invoke(c, 1, 1, NULL, 0, -EBADF, NULL, NULL, NULL), -ENOTCONN);

	ipc_client_free(c);
	close(sp[1]);
	loop_unref(e);
}
END_TEST

START_TEST(test_client_ignores_unknown_request_ids)
{
	Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
	Perfetto__Protos__IPCFrame__InvokeMethodReply rep = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
	Perfetto__Protos__IPCFrame__RequestError err = PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
	_cleanup_free_ uint8_t *buf = NULL;
	struct bind_result b = {};
	struct ipc_client *c = NULL;
	struct loop *e = NULL;
	size_t len;
	int sp[2];

	ck_assert_int_eq(loop_new(&e), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_client_new_from_fd(sp[0], &c), 0);
	ck_assert_int_eq(ipc_client_attach_event(c, e), 0);
	ck_assert_int_eq(ipc_client_bind_service(c, "ProducerPort", on_bind, &b, NULL), 0);

	/* A reply for request 99, which was never sent: ignored. */
	f.has_request_id = true;
	f.request_id = 99;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
	f.msg_invoke_method_reply = &rep;
	rep.has_success = rep.success = true;
	ck_assert_int_eq(ipc_frame_encode(&f, &buf, &len), 0);
	ck_assert_int_eq(write_all(sp[1], buf, len), 0);
	free(buf);
	buf = NULL;
	/* Then a RequestError for the bind (request 1). */
	f.request_id = 1;
	f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
	f.msg_request_error = &err;
	err.error = (char *)"unknown request";
	ck_assert_int_eq(ipc_frame_encode(&f, &buf, &len), 0);
	ck_assert_int_eq(write_all(sp[1], buf, len), 0);

	ck_assert(RUN_UNTIL(e, b.done));
	ck_assert_int_eq(b.error, -EPROTO);
	ck_assert(ipc_client_is_connected(c));

	ipc_client_free(c);
	close(sp[1]);
	loop_unref(e);
}
END_TEST

START_TEST(test_host_drops_slow_reader)
{
	_cleanup_free_ uint8_t *buf = NULL;
	static uint8_t chunk[16384];
	struct ipc_host_stats stats;
	struct ipc_conn *conn = NULL;
	struct fixture fx;
	size_t len, max_seen = 0;
	unsigned i;
	int sp[2], r = 0;

	fixture_init(&fx);
	ipc_host_set_send_queue_max(fx.h, 256 * 1024);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_host_adopt(fx.h, sp[0], &conn), 0);
	encode_invoke(1, fx.test_sid, 2, "hold", false, &buf, &len);
	ck_assert_int_eq(write_all(sp[1], buf, len), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.st.held != NULL));

	/* The peer never reads: the kernel buffer fills, then the bounded queue. */
	for (i = 0; i < 100000; i++) {
		r = ipc_reply_send(fx.st.held, chunk, sizeof(chunk), true, -EBADF);
		if (r < 0)
			break;
		max_seen = MAX(max_seen, ipc_channel_get_send_queue_size(ipc_conn_get_channel(conn)));
	}
	ck_assert_int_eq(r, -ENOBUFS);
	ck_assert_uint_le(max_seen, 256 * 1024);
	ck_assert_uint_gt(max_seen, 0);

	/* The disconnect arrives from the loop; the service releases its stream there. */
	ck_assert_uint_eq(fx.st.n_disconnects, 0);
	ck_assert(RUN_UNTIL(fx.e, fx.st.n_disconnects == 1));
	ck_assert_ptr_null(fx.st.held);
	ipc_host_get_stats(fx.h, &stats);
	ck_assert_uint_eq(stats.disconnects_send_overflow, 1);
	ck_assert_uint_eq(stats.connections_open, 0);

	close(sp[1]);
	fixture_done(&fx);
}
END_TEST

START_TEST(test_client_sees_host_go_away)
{
	struct fixture fx;
	struct ipc_client *c = NULL;
	struct reply_log held = {};
	struct bind_result b = {};
	struct disc_result disc = {};
	int sp[2];

	fixture_init(&fx);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_host_adopt(fx.h, sp[0], NULL), 0);
	ck_assert_int_eq(ipc_client_new_from_fd(sp[1], &c), 0);
	ipc_client_set_disconnect_callback(c, on_client_disconnect, &disc);
	ck_assert_int_eq(ipc_client_attach_event(c, fx.e), 0);
	ck_assert_int_eq(ipc_client_bind_service(c, "TestService", on_bind, &b, NULL), 0);
	ck_assert(RUN_UNTIL(fx.e, b.done));
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, 2, "hold", 4, -EBADF, on_reply, &held, NULL), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.st.held != NULL));

	/* The service streams one message, then the whole host goes away. */
	ck_assert_int_eq(ipc_reply_send(fx.st.held, "cmd", 3, true, -EBADF), 0);
	fx.h = ipc_host_free(fx.h);
	ck_assert_int_eq(ipc_reply_send(fx.st.held, "late", 4, true, -EBADF), -ENOTCONN);

	ck_assert(RUN_UNTIL(fx.e, disc.done));
	ck_assert_int_eq(disc.error, -ECONNRESET);
	ck_assert_uint_eq(held.n, 2);
	ck_assert_str_eq(held.text[0], "cmd");
	ck_assert(held.more[0]);
	ck_assert(held.finished);
	ck_assert_int_eq(held.error, -ECONNRESET);

	ipc_client_free(c);
	fixture_done(&fx);
}
END_TEST

static void free_client_in_reply(struct ipc_client *c, int error, const uint8_t *data, size_t len, bool has_more,
				 int fd, void *userdata)
{
	unsigned *n = userdata;

	(*n)++;
	ipc_client_free(c);
}

START_TEST(test_client_freed_from_callback)
{
	struct fixture fx;
	struct ipc_client *c = NULL;
	struct bind_result b = {};
	unsigned n = 0;
	int sp[2];

	fixture_init(&fx);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(ipc_host_adopt(fx.h, sp[0], NULL), 0);
	ck_assert_int_eq(ipc_client_new_from_fd(sp[1], &c), 0);
	ck_assert_int_eq(ipc_client_attach_event(c, fx.e), 0);
	ck_assert_int_eq(ipc_client_bind_service(c, "TestService", on_bind, &b, NULL), 0);
	ck_assert(RUN_UNTIL(fx.e, b.done));
	/* Freed while the stream has two more messages in the same read. */
	ck_assert_int_eq(ipc_client_invoke(c, b.sid, 2, NULL, 0, -EBADF, free_client_in_reply, &n, NULL), 0);
	ck_assert(RUN_UNTIL(fx.e, fx.st.n_disconnects == 1));
	ck_assert_uint_eq(n, 1);
	fixture_done(&fx);
}
END_TEST

static Suite *ipc_suite(void)
{
	Suite *s = suite_create("ipc");
	TCase *tc;

	tc = tcase_create("codec");
	tcase_add_test(tc, test_encode_worked_example);
	tcase_add_test(tc, test_decode_byte_by_byte);
	tcase_add_test(tc, test_decode_three_in_one);
	tcase_add_test(tc, test_decode_oversized);
	tcase_add_test(tc, test_decode_max_size);
	tcase_add_test(tc, test_decode_zero_length_skipped);
	tcase_add_test(tc, test_decode_garbage_dropped);
	tcase_add_test(tc, test_decode_truncated_waits);
	tcase_add_test(tc, test_decode_fd_follows_its_frame);
	tcase_add_test(tc, test_unpack_bounded_alloc);
	tcase_add_test(tc, test_fuzz_corpus_decodes);
	tcase_add_test(tc, test_addr_kinds);
	suite_add_tcase(s, tc);

	tc = tcase_create("loopback");
	tcase_add_test(tc, test_loopback_path);
	tcase_add_test(tc, test_listen_stale_socket);
	tcase_add_test(tc, test_loopback_abstract);
	tcase_add_test(tc, test_loopback_socketpair);
	tcase_add_test(tc, test_loopback_tcp);
	tcase_add_test(tc, test_connect_refused);
	tcase_add_test(tc, test_connect_tcp_refused);
	tcase_add_test(tc, test_unknown_request);
	tcase_add_test(tc, test_host_drops_oversized_frame);
	tcase_add_test(tc, test_client_drops_oversized_frame);
	tcase_add_test(tc, test_client_ignores_unknown_request_ids);
	tcase_add_test(tc, test_host_drops_slow_reader);
	tcase_add_test(tc, test_client_sees_host_go_away);
	tcase_add_test(tc, test_client_freed_from_callback);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ipc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
