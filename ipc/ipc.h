/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Perfetto's IPC layer: length-prefixed IPCFrame messages over a stream
 * socket, with optional SCM_RIGHTS fd passing, a generic RPC client
 * (BindService / InvokeMethod, streamed replies) and a generic RPC host.
 * Nothing here knows about tracing: services are a name, a table of
 * method names and a dispatch callback.
 *
 * Layers, bottom up:
 *   ipc_frame_*    pure codec: [u32 LE length][IPCFrame] and a bounded
 *                  128 KiB receive buffer (fuzzable, no I/O).
 *   ipc_addr_*     address strings: "/path", "@abstract", "host:port",
 *                  "[v6]:port", "vsock://cid:port".
 *   ipc_channel_*  one non-blocking connection on an event loop (event/): bounded
 *                  send queue, fd passing, frame dispatch.
 *   ipc_client_*   producer side RPC.
 *   ipc_host_*, ipc_conn_*, ipc_reply_*   service side RPC.
 *
 * Everything is single-threaded per struct loop; there are no internal
 * threads.  Functions return >= 0 on success and -errno on failure.
 * Callbacks may free the object that invoked them (the object stays valid
 * until the callback returns, then it is released).
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop/loop.h"

#include "protos/perfetto/ipc/wire_protocol.pb-c.h"

/* Receive buffer per connection; a frame (header + payload) must fit. */
#define IPC_BUFFER_SIZE 131072u
#define IPC_FRAME_HEADER_SIZE 4u
#define IPC_FRAME_MAX_PAYLOAD (IPC_BUFFER_SIZE - IPC_FRAME_HEADER_SIZE)
/*
 * Cap on what protobuf-c may allocate while unpacking one frame.  A legal
 * frame needs about its own size; hostile repeated empty sub-messages can
 * ask for ~30x their size, which this cap refuses.
 */
#define IPC_FRAME_MAX_DECODE_ALLOC (512u * 1024u)
/* Default bound of a connection's send queue (bytes not yet in the kernel). */
#define IPC_SEND_QUEUE_MAX_DEFAULT (1024u * 1024u)
/* Smallest accepted send queue bound: one whole frame must always fit. */
#define IPC_SEND_QUEUE_MIN IPC_BUFFER_SIZE

/* ======================================================================
 * Frame codec (ipc_frame.c)
 * ==================================================================== */

struct ipc_frame_decoder;

/**
 * ipc_frame_encode - serialize @frame as [u32 LE payload length][payload].
 * @frame: the frame to pack.
 * @ret_buf: on success, a new malloc()ed buffer holding the whole frame.
 * @ret_len: on success, its length (4 + payload).
 *
 * Frames whose payload exceeds IPC_FRAME_MAX_PAYLOAD are refused: the
 * receiver would drop the connection.
 *
 * Returns: 0, -EMSGSIZE if too large, -ENOMEM.
 */
int ipc_frame_encode(const Perfetto__Protos__IPCFrame *frame, uint8_t **ret_buf, size_t *ret_len);

/**
 * ipc_frame_unpack - decode one IPCFrame payload (without the length header)
 * with an allocator capped at IPC_FRAME_MAX_DECODE_ALLOC bytes.
 * @payload: serialized IPCFrame.
 * @len: its length.
 * @ret: on success, the decoded frame; release it with ipc_frame_free().
 *
 * Returns: 0, -EMSGSIZE if @len > IPC_FRAME_MAX_PAYLOAD, -EBADMSG if the
 * bytes do not decode (or would need more memory than the cap).
 */
int ipc_frame_unpack(const uint8_t *payload, size_t len, Perfetto__Protos__IPCFrame **ret);

/**
 * ipc_message_unpack - decode any protobuf-c message (RPC arguments,
 * replies, commands) with the same capped allocator as ipc_frame_unpack():
 * what arrives over IPC is untrusted.
 * @desc: message descriptor, e.g. &perfetto__protos__commit_data_request__descriptor.
 * @data: serialized message.
 * @len: its length.
 * @ret: on success, the message; release it with
 *       protobuf_c_message_free_unpacked(msg, NULL).
 *
 * Returns: 0, -EMSGSIZE if @len > IPC_FRAME_MAX_PAYLOAD, -EBADMSG.
 */
int ipc_message_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
		       ProtobufCMessage **ret);

/**
 * ipc_frame_free - release a frame from ipc_frame_unpack() or
 * ipc_frame_decoder_next().  Accepts NULL.
 *
 * Returns: NULL.
 */
Perfetto__Protos__IPCFrame *ipc_frame_free(Perfetto__Protos__IPCFrame *frame);

/**
 * ipc_frame_decoder_new - allocate a frame deserializer with a linear
 * receive buffer of IPC_BUFFER_SIZE bytes.
 * @ret: the new decoder.
 *
 * Returns: 0 or -ENOMEM.
 */
int ipc_frame_decoder_new(struct ipc_frame_decoder **ret);

/**
 * ipc_frame_decoder_free - release a decoder and any fd it still holds.
 * Accepts NULL.
 *
 * Returns: NULL.
 */
struct ipc_frame_decoder *ipc_frame_decoder_free(struct ipc_frame_decoder *d);

/**
 * ipc_frame_decoder_begin_receive - space to receive into.
 * @d: decoder.
 * @ret_buf: where the next bytes of the stream go.
 * @ret_size: how many bytes fit there (> 0 on success).
 *
 * Returns: 0; -EMSGSIZE once an oversized length header was seen (the
 * stream cannot be resynchronised: drop the connection); -ENOBUFS if the
 * buffer holds a complete frame that was not popped yet.
 */
int ipc_frame_decoder_begin_receive(struct ipc_frame_decoder *d, uint8_t **ret_buf, size_t *ret_size);

/**
 * ipc_frame_decoder_end_receive - account for @n bytes written into the
 * space from ipc_frame_decoder_begin_receive().
 * @d: decoder.
 * @n: bytes received (<= the size returned by begin_receive).
 * @fd: an fd that arrived with these bytes, or -EBADF.  The decoder takes
 *      ownership and hands it out with the frame containing the last of
 *      these @n bytes (the sender attaches the fd to the first write of a
 *      frame, and the kernel ends a read at a message carrying fds).  A
 *      still-unclaimed earlier fd is closed and counted as dropped.
 */
void ipc_frame_decoder_end_receive(struct ipc_frame_decoder *d, size_t n, int fd);

/**
 * ipc_frame_decoder_feed - copy bytes into the decoder (for callers that do
 * not receive straight into its buffer: tests, fuzzing).
 * @d: decoder.
 * @data: stream bytes.
 * @len: their count.
 * @fd: as for ipc_frame_decoder_end_receive(), attached to the bytes
 *      accepted by this call (closed if none are accepted).
 *
 * Returns: bytes accepted (may be < @len when the buffer is full: pop frames
 * and feed the rest), or the error of ipc_frame_decoder_begin_receive().
 */
int ipc_frame_decoder_feed(struct ipc_frame_decoder *d, const void *data, size_t len, int fd);

/**
 * ipc_frame_decoder_next - pop the next complete, decodable frame.
 * @d: decoder.
 * @ret_frame: on 1, the frame; release with ipc_frame_free().
 * @ret_fd: on 1, the fd that arrived with this frame (caller owns it) or
 *          -EBADF.  May be NULL, then such an fd is closed.
 *
 * Zero-length frames are skipped.  Payloads that fail to decode are
 * dropped and counted (ipc_frame_decoder_get_dropped()); the stream goes on.
 *
 * Returns: 1 with a frame, 0 when more bytes are needed, -EMSGSIZE if a
 * length header exceeds IPC_FRAME_MAX_PAYLOAD (the connection must be
 * dropped; every later call fails the same way).
 */
int ipc_frame_decoder_next(struct ipc_frame_decoder *d, Perfetto__Protos__IPCFrame **ret_frame, int *ret_fd);

/**
 * ipc_frame_decoder_get_dropped - frames dropped because their payload did
 * not decode, plus fds dropped because no frame claimed them.
 */
uint64_t ipc_frame_decoder_get_dropped(const struct ipc_frame_decoder *d);

/**
 * ipc_frame_decoder_get_buffered - bytes received but not yet popped.
 */
size_t ipc_frame_decoder_get_buffered(const struct ipc_frame_decoder *d);

/* ======================================================================
 * Addresses (ipc_addr.c)
 * ==================================================================== */

enum ipc_addr_kind {
	IPC_ADDR_UNIX,          /* filesystem path */
	IPC_ADDR_UNIX_ABSTRACT, /* "@name" */
	IPC_ADDR_INET,          /* "host:port" */
	IPC_ADDR_INET6,         /* "[addr]:port" */
	IPC_ADDR_VSOCK,         /* "vsock://cid:port" */
	_IPC_ADDR_KIND_MAX,
	_IPC_ADDR_KIND_INVALID = -EINVAL,
};

/**
 * ipc_addr_kind_from_string - classify a socket address string the way
 * Perfetto does (see the enum).
 * @addr: address string.
 *
 * Returns: an enum ipc_addr_kind or -EINVAL for an empty/NULL string.
 */
int ipc_addr_kind_from_string(const char *addr);

/**
 * ipc_addr_kind_can_pass_fds - only AF_UNIX carries SCM_RIGHTS; on the
 * others the upper layers must use shared-memory emulation.
 */
bool ipc_addr_kind_can_pass_fds(enum ipc_addr_kind kind);

/**
 * ipc_addr_connect - create a non-blocking, close-on-exec stream socket and
 * start connecting it to @addr.
 * @addr: address string.
 * @ret_fd: the socket.
 *
 * "host:port" is resolved with getaddrinfo() (this may block on DNS).
 *
 * Returns: 0 when connected, 1 when the connection is still in progress
 * (wait for POLLOUT, then check SO_ERROR), -ENAMETOOLONG, -EINVAL for a
 * malformed address, or the connect() error (-ENOENT, -ECONNREFUSED, ...).
 */
int ipc_addr_connect(const char *addr, int *ret_fd);

/**
 * ipc_addr_listen - create a non-blocking, close-on-exec listening socket.
 * @addr: address string.
 * @mode: for filesystem sockets, chmod() the socket to @mode; 0666 lets
 *        producers of any uid connect (what a system-wide producer socket
 *        needs), 0 keeps what the umask gave.
 * @ret_fd: the socket.
 *
 * A stale filesystem socket at @addr is unlinked first; anything else that
 * is not a socket is left alone (-EEXIST).
 *
 * Returns: 0 or -errno.
 */
int ipc_addr_listen(const char *addr, mode_t mode, int *ret_fd);

/* ======================================================================
 * Channel: one connection (ipc_channel.c)
 * ==================================================================== */

struct ipc_channel;

struct ipc_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/**
 * typedef ipc_channel_frame_cb - a frame arrived.
 * @ch: channel.
 * @frame: decoded frame, valid during the call.
 * @fd: points at the fd that arrived with this frame (or -EBADF).  Take it
 *      with TAKE_FD(*fd) to keep it; otherwise it is closed on return.
 * @userdata: from ipc_channel_set_callbacks().
 */
typedef void (*ipc_channel_frame_cb)(struct ipc_channel *ch, const Perfetto__Protos__IPCFrame *frame, int *fd, void *userdata);

/**
 * typedef ipc_channel_disconnect_cb - the connection is gone; called once.
 * @error: -ECONNRESET (peer closed), -EMSGSIZE (peer sent a frame larger
 *         than IPC_FRAME_MAX_PAYLOAD), -ENOBUFS (send queue overflow),
 *         -EPROTO (truncated control data), the error given to
 *         ipc_channel_abort(), or a socket error.
 */
typedef void (*ipc_channel_disconnect_cb)(struct ipc_channel *ch, int error, void *userdata);

/**
 * ipc_channel_connect - connect to @addr (see ipc_addr_connect()).
 * @addr: address string.
 * @ret: the channel; it may still be connecting, sends are queued meanwhile
 *       and a failure is reported through the disconnect callback.
 *
 * Returns: 0 or -errno (synchronous connect failures such as -ENOENT,
 * -ECONNREFUSED).
 */
int ipc_channel_connect(const char *addr, struct ipc_channel **ret);

/**
 * ipc_channel_new_from_fd - wrap an already-connected stream socket (e.g. one
 * end of a socketpair()).
 * @fd: the socket; ownership passes to the channel, even on failure.  It is
 *      switched to non-blocking mode.
 * @ret: the channel.
 *
 * Returns: 0, -ENOTSOCK, -ENOMEM.
 */
int ipc_channel_new_from_fd(int fd, struct ipc_channel **ret);

/**
 * ipc_channel_free - close the connection now, drop queued data, release
 * the channel.  No callback is called.  Accepts NULL.
 *
 * Returns: NULL.
 */
struct ipc_channel *ipc_channel_free(struct ipc_channel *ch);

/**
 * ipc_channel_set_callbacks - set the frame and disconnect callbacks.
 */
void ipc_channel_set_callbacks(struct ipc_channel *ch, ipc_channel_frame_cb on_frame,
			       ipc_channel_disconnect_cb on_disconnect, void *userdata);

/**
 * ipc_channel_attach_event - watch the socket on @e (loop_add_io).
 * @ch: channel.
 * @e: event loop.
 *
 * Returns: 0, -EBUSY if already attached, -ENOTCONN if closed, or the
 * event loop error.
 */
int ipc_channel_attach_event(struct ipc_channel *ch, struct loop *e);

/**
 * ipc_channel_send - send raw stream bytes (normally one whole frame).
 * @ch: channel.
 * @buf: bytes.
 * @len: their count.
 * @fd: fd to pass with the first byte (SCM_RIGHTS), or -EBADF.  Borrowed:
 *      it is duplicated if it has to wait in the queue.
 *
 * Bytes the kernel does not take at once are queued and written when the
 * socket becomes writable.  If the queue would exceed its bound, nothing is
 * queued, -ENOBUFS is returned and the channel is aborted (the disconnect
 * callback follows from the event loop): a peer that stops reading never
 * costs unbounded memory.  Other send errors abort the channel the same way.
 *
 * Returns: 0, -ENOTCONN, -EOPNOTSUPP (fd on a non-unix socket), -ENOBUFS,
 * -ENOMEM, or the send error.
 */
int ipc_channel_send(struct ipc_channel *ch, const void *buf, size_t len, int fd);

/**
 * ipc_channel_send_frame - encode @frame (ipc_frame_encode()) and send it as
 * ipc_channel_send() does.
 *
 * Returns: as ipc_channel_send(), plus -EMSGSIZE for an oversized frame
 * (then the channel stays up).
 */
int ipc_channel_send_frame(struct ipc_channel *ch, const Perfetto__Protos__IPCFrame *frame, int fd);

/**
 * ipc_channel_abort - fail the channel with @error: nothing more is sent or
 * dispatched, and the disconnect callback is called with @error from the
 * event loop (not from inside this call).
 */
void ipc_channel_abort(struct ipc_channel *ch, int error);

/**
 * ipc_channel_is_connected - true once connected and until it fails or is
 * aborted.
 */
bool ipc_channel_is_connected(const struct ipc_channel *ch);

/**
 * ipc_channel_can_pass_fds - true on AF_UNIX sockets.  When false, upper
 * layers must use shared-memory emulation (no SCM_RIGHTS).
 */
bool ipc_channel_can_pass_fds(const struct ipc_channel *ch);

/**
 * ipc_channel_get_fd - the socket fd (still owned by the channel), or -EBADF.
 */
int ipc_channel_get_fd(const struct ipc_channel *ch);

/**
 * ipc_channel_get_peer - peer credentials (SO_PEERCRED).
 *
 * Returns: 0, -EOPNOTSUPP on non-unix sockets, -ENOTCONN, -errno.
 */
int ipc_channel_get_peer(const struct ipc_channel *ch, struct ipc_peer *ret);

/**
 * ipc_channel_set_send_queue_max - bound the send queue (bytes).  Values
 * below IPC_SEND_QUEUE_MIN are raised to it.
 */
void ipc_channel_set_send_queue_max(struct ipc_channel *ch, size_t bytes);

/**
 * ipc_channel_get_send_queue_size - bytes waiting for the socket.
 */
size_t ipc_channel_get_send_queue_size(const struct ipc_channel *ch);

/**
 * ipc_channel_get_dropped_frames - see ipc_frame_decoder_get_dropped().
 */
uint64_t ipc_channel_get_dropped_frames(const struct ipc_channel *ch);

/* ======================================================================
 * RPC client (ipc_client.c)
 * ==================================================================== */

struct ipc_client;

/**
 * typedef ipc_client_bind_cb - outcome of ipc_client_bind_service().
 * @error: 0; -ENOENT if the host does not know the service; -EPROTO for a
 *         RequestError or a malformed reply; -ECONNRESET (or the
 *         disconnect error) if the connection went away first.
 * @service_id: the host's id for the service (valid when @error is 0).
 */
typedef void (*ipc_client_bind_cb)(struct ipc_client *c, int error, uint32_t service_id, void *userdata);

/**
 * typedef ipc_client_reply_cb - one reply to ipc_client_invoke().
 * @error: 0 for success=true; -EREMOTEIO for success=false (rejected, bad
 *         method, undecodable args); -EPROTO for a RequestError; the
 *         disconnect error if the connection went away first.
 * @reply_proto: serialized response message (may be NULL when @len is 0).
 * @has_more: true for a streamed message: more replies will come for the
 *            same request.  The last call for a request has it false.
 * @fd: fd that arrived with this reply, or -EBADF.  Borrowed: it is closed
 *      after the callback unless taken with ipc_client_take_fd().
 */
typedef void (*ipc_client_reply_cb)(struct ipc_client *c, int error, const uint8_t *reply_proto, size_t len,
				    bool has_more, int fd, void *userdata);

/**
 * typedef ipc_client_disconnect_cb - the connection is gone (called once,
 * after every pending request got its final callback with the same error).
 * Not called by ipc_client_free().
 */
typedef void (*ipc_client_disconnect_cb)(struct ipc_client *c, int error, void *userdata);

/**
 * ipc_client_new - connect to @addr (see ipc_addr_connect()).
 * @addr: address string, e.g. "/run/perfetto/traced-producer.sock".
 * @ret: the client.  Requests may be issued at once; they wait in the send
 *       queue while a TCP/vsock connect is in progress.
 *
 * Returns: 0 or -errno (-ENOENT, -ECONNREFUSED, ...: retry with backoff).
 */
int ipc_client_new(const char *addr, struct ipc_client **ret);

/**
 * ipc_client_new_from_fd - client over an already-connected socket.
 * @fd: ownership passes to the client, even on failure.
 * @ret: the client.
 *
 * Returns: 0 or -errno.
 */
int ipc_client_new_from_fd(int fd, struct ipc_client **ret);

/**
 * ipc_client_free - disconnect and release.  Pending callbacks are not
 * called.  Accepts NULL; may be called from a callback.
 *
 * Returns: NULL.
 */
struct ipc_client *ipc_client_free(struct ipc_client *c);

/**
 * ipc_client_attach_event - run the connection on @e.
 *
 * Returns: as ipc_channel_attach_event().
 */
int ipc_client_attach_event(struct ipc_client *c, struct loop *e);

/**
 * ipc_client_set_disconnect_callback - see ipc_client_disconnect_cb.
 */
void ipc_client_set_disconnect_callback(struct ipc_client *c, ipc_client_disconnect_cb cb, void *userdata);

/**
 * ipc_client_bind_service - send BindService{@service_name}.
 * @c: client.
 * @service_name: bare proto service name, e.g. "ProducerPort".
 * @cb: called once with the outcome (may be NULL).
 * @userdata: for @cb.
 * @ret_request_id: optional, the request id used.
 *
 * Returns: 0, -ENOTCONN, -EBUSY (too many pending requests), or a send error.
 */
int ipc_client_bind_service(struct ipc_client *c, const char *service_name, ipc_client_bind_cb cb,
			    void *userdata, uint64_t *ret_request_id);

/**
 * ipc_client_get_method_id - look a method up by name in the table the host
 * sent for @service_id.  Do this once per method, not per call.
 *
 * Returns: the method id (> 0), -ENOENT, or -ESRCH if @service_id is not
 * bound.
 */
int ipc_client_get_method_id(const struct ipc_client *c, uint32_t service_id, const char *method_name);

/**
 * ipc_client_invoke - send InvokeMethod.
 * @c: client.
 * @service_id: from the bind callback.
 * @method_id: from ipc_client_get_method_id().
 * @args: serialized request message (may be NULL when @len is 0).
 * @len: its length.
 * @fd: fd to pass along (SCM_RIGHTS), or -EBADF.  Borrowed.
 * @cb: reply callback.  NULL sets drop_reply=true: the host sends no reply
 *      on success.
 * @userdata: for @cb.
 * @ret_request_id: optional, the request id (ids start at 1 and increase
 *                  for every bind and invoke, drop_reply ones included).
 *
 * Returns: 0, -ENOTCONN, -EOPNOTSUPP (fd on TCP/vsock), -EMSGSIZE (args too
 * large for one frame), -EBUSY (too many pending requests), or a send error.
 */
int ipc_client_invoke(struct ipc_client *c, uint32_t service_id, uint32_t method_id, const void *args,
		      size_t len, int fd, ipc_client_reply_cb cb, void *userdata, uint64_t *ret_request_id);

/**
 * ipc_client_cancel - forget a pending request: its callback is not called
 * again and later replies for it are ignored.
 *
 * Returns: 0 or -ENOENT.
 */
int ipc_client_cancel(struct ipc_client *c, uint64_t request_id);

/**
 * ipc_client_take_fd - from inside a reply callback, take ownership of the
 * fd that arrived with that reply.
 *
 * Returns: the fd, or -EBADF if there is none (or outside a callback).
 */
int ipc_client_take_fd(struct ipc_client *c);

/**
 * ipc_client_can_pass_fds - false on TCP/vsock (use shmem emulation).
 */
bool ipc_client_can_pass_fds(const struct ipc_client *c);

/**
 * ipc_client_is_connected - true until the connection fails.
 */
bool ipc_client_is_connected(const struct ipc_client *c);

/**
 * ipc_client_get_channel - the underlying channel (send-queue bound, stats).
 */
struct ipc_channel *ipc_client_get_channel(struct ipc_client *c);

/* ======================================================================
 * RPC host (ipc_host.c, a connection and a reply: ipc_conn.c)
 * ==================================================================== */

struct ipc_host;
struct ipc_conn;
struct ipc_reply;

/**
 * typedef ipc_method_cb - an InvokeMethod for a registered service.
 * @conn: the connection (valid during the call; ipc_conn_ref() to keep it).
 * @method_id: 1-based index into the service's method name array.
 * @args: serialized request message (valid during the call).
 * @len: its length.
 * @reply: reply handle, owned by the handler from now on: finish it with
 *         ipc_reply_send(has_more=false) or ipc_reply_reject(), or release
 *         it with ipc_reply_free(); it may be kept to stream replies later.
 * @userdata: from ipc_host_register_service().
 *
 * The fd that arrived with the request, if any, can be taken with
 * ipc_conn_take_fd() during the call; it is closed afterwards.
 *
 * Returns: >= 0 when the call was accepted (whether or not @reply was
 * finished yet); < 0 (e.g. -EBADMSG for undecodable args) to make the host
 * send InvokeMethodReply{success=false} -- even when the client asked for
 * drop_reply -- and release @reply if the handler did not.
 */
typedef int (*ipc_method_cb)(struct ipc_conn *conn, uint32_t method_id, const uint8_t *args, size_t len,
			     struct ipc_reply *reply, void *userdata);

/**
 * typedef ipc_conn_cb - connection event (connect or disconnect).
 */
typedef void (*ipc_conn_cb)(struct ipc_conn *conn, void *userdata);

struct ipc_host_stats {
	uint64_t connections_accepted; /* listeners and ipc_host_adopt() */
	uint64_t connections_refused;  /* over the connection limit */
	uint64_t connections_open;
	uint64_t disconnects_frame_too_large;
	uint64_t disconnects_send_overflow;
	uint64_t frames_dropped; /* undecodable payloads (connection kept) */
	uint64_t unknown_requests; /* answered with RequestError */
};

/**
 * ipc_host_new - a host with no services and no sockets.
 *
 * Returns: 0 or -ENOMEM.
 */
int ipc_host_new(struct ipc_host **ret);

/**
 * ipc_host_free - close every listener and connection (no callbacks are
 * called), unlink the filesystem sockets it created.  Outstanding reply
 * handles stay valid (sending on them fails with -ENOTCONN).  Accepts NULL.
 *
 * Returns: NULL.
 */
struct ipc_host *ipc_host_free(struct ipc_host *h);

/**
 * ipc_host_attach_event - run listeners and connections on @e.
 *
 * Returns: 0, -EBUSY if already attached, or the event loop error.
 */
int ipc_host_attach_event(struct ipc_host *h, struct loop *e);

/**
 * ipc_host_register_service - expose a service.
 * @h: host.
 * @name: bare service name, e.g. "ProducerPort" (copied).
 * @methods: method names in declaration order (copied); method ids are
 *           their 1-based index.
 * @n_methods: count.
 * @invoke: dispatch callback.
 * @on_disconnect: called for every connection that goes away (may be NULL):
 *                 release the reply handles kept for it there.
 * @userdata: for both callbacks.
 * @ret_service_id: optional; ids start at 1 in registration order.
 *
 * Returns: 0, -EEXIST for a duplicate name, -EINVAL, -E2BIG (too many
 * services), -ENOMEM.
 */
int ipc_host_register_service(struct ipc_host *h, const char *name, const char *const *methods,
			      size_t n_methods, ipc_method_cb invoke, ipc_conn_cb on_disconnect, void *userdata,
			      uint32_t *ret_service_id);

/**
 * ipc_host_listen - listen on @addr (see ipc_addr_listen() for @mode and
 * stale sockets).
 *
 * Returns: 0 or -errno.
 */
int ipc_host_listen(struct ipc_host *h, const char *addr, mode_t mode);

/**
 * ipc_host_listen_fd - accept connections on an already listening socket
 * (e.g. socket activation).  @fd passes to the host, even on failure.
 *
 * Returns: 0 or -errno.
 */
int ipc_host_listen_fd(struct ipc_host *h, int fd);

/**
 * ipc_host_adopt - serve an already-connected socket (e.g. the service end
 * of a socketpair for the in-process service).
 * @h: host.
 * @fd: ownership passes to the host, even on failure.
 * @ret_conn: optional, the connection (borrowed).
 *
 * Returns: 0, -EUSERS over the connection limit, -errno.
 */
int ipc_host_adopt(struct ipc_host *h, int fd, struct ipc_conn **ret_conn);

/**
 * ipc_host_set_connect_callback - called for every new connection.
 */
void ipc_host_set_connect_callback(struct ipc_host *h, ipc_conn_cb cb, void *userdata);

/**
 * ipc_host_set_send_queue_max - send queue bound for connections created
 * from now on (default IPC_SEND_QUEUE_MAX_DEFAULT).
 */
void ipc_host_set_send_queue_max(struct ipc_host *h, size_t bytes);

/**
 * ipc_host_set_max_connections - connection limit (default 256).
 */
void ipc_host_set_max_connections(struct ipc_host *h, unsigned max);

/**
 * ipc_host_get_stats - counters, see struct ipc_host_stats.
 */
void ipc_host_get_stats(const struct ipc_host *h, struct ipc_host_stats *ret);

/**
 * ipc_conn_ref - keep @conn allocated beyond its disconnect callback.
 *
 * Returns: @conn.
 */
struct ipc_conn *ipc_conn_ref(struct ipc_conn *conn);

/**
 * ipc_conn_unref - drop a reference.  Accepts NULL.
 *
 * Returns: NULL.
 */
struct ipc_conn *ipc_conn_unref(struct ipc_conn *conn);

/**
 * ipc_conn_get_id - a host-unique id (from 1).
 */
uint64_t ipc_conn_get_id(const struct ipc_conn *conn);

/**
 * ipc_conn_get_peer - peer pid/uid/gid: SO_PEERCRED on AF_UNIX.  On
 * TCP/vsock, the first SetPeerIdentity frame's pid/uid (uid 0 without one,
 * as traced does).
 *
 * Returns: 0, -ENOTCONN, -errno.
 */
int ipc_conn_get_peer(const struct ipc_conn *conn, struct ipc_peer *ret);

/* Longest machine name kept from a SetPeerIdentity frame. */
#define IPC_MACHINE_NAME_MAX 255u

/**
 * ipc_conn_get_machine_id - the machine of the peer: 0 for this one (a
 * UNIX socket, or TCP/vsock without SetPeerIdentity), else what traced
 * makes of the frame's machine_id_hint (ipc_machine_id()).
 */
uint32_t ipc_conn_get_machine_id(const struct ipc_conn *conn);

/** ipc_conn_get_machine_name - SetPeerIdentity's machine_name, or NULL. */
const char *ipc_conn_get_machine_name(const struct ipc_conn *conn);

/**
 * ipc_machine_id - a remote machine's id as traced makes it: the low 32
 * bits of the FNV-1a 64 hash of @hint (a boot id), or, with no hint, of
 * @ch's peer address without its port; never 0 (this machine's).
 */
uint32_t ipc_machine_id(const char *hint, const struct ipc_channel *ch);

/* What a producer or relay client says of itself on TCP/vsock. */
struct ipc_identity {
	int32_t pid;
	int32_t uid;
	const char *machine_id_hint;  /* the boot id */
	const char *machine_name;
};

/**
 * ipc_client_send_identity - send an IPCFrame.set_peer_identity with @id
 * (before binding anything: the service honours the first one only, and
 * ignores it on a UNIX socket).
 * Returns: 0 or -errno.
 */
int ipc_client_send_identity(struct ipc_client *c, const struct ipc_identity *id);

/**
 * ipc_conn_can_pass_fds - false on TCP/vsock.
 */
bool ipc_conn_can_pass_fds(const struct ipc_conn *conn);

/**
 * ipc_conn_is_connected - false once the connection went away.
 */
bool ipc_conn_is_connected(const struct ipc_conn *conn);

/**
 * ipc_conn_take_fd - from inside ipc_method_cb, take ownership of the fd that
 * arrived with the request.
 *
 * Returns: the fd, or -EBADF.
 */
int ipc_conn_take_fd(struct ipc_conn *conn);

/**
 * ipc_conn_set_userdata - per-connection pointer for the service.
 */
void ipc_conn_set_userdata(struct ipc_conn *conn, void *userdata);

/**
 * ipc_conn_get_userdata - see ipc_conn_set_userdata().
 */
void *ipc_conn_get_userdata(const struct ipc_conn *conn);

/**
 * ipc_conn_disconnect - drop the connection; the disconnect callbacks are
 * called from the event loop, not from inside this call.
 */
void ipc_conn_disconnect(struct ipc_conn *conn);

/**
 * ipc_conn_get_channel - the underlying channel, or NULL once disconnected.
 */
struct ipc_channel *ipc_conn_get_channel(struct ipc_conn *conn);

/**
 * ipc_conn_send_reply - send one InvokeMethodReply without a reply handle,
 * for services that track requests by id themselves.
 * @conn: connection.
 * @request_id: the id of the InvokeMethod being answered.
 * @success: false sends a rejection (@reply_proto is then ignored).
 * @has_more: true for one message of a stream.
 * @reply_proto: serialized response message (may be NULL when @len is 0).
 * @len: its length.
 * @fd: fd to pass along (SCM_RIGHTS) or -EBADF.  Borrowed.
 *
 * The caller honours drop_reply (ipc_reply_is_wanted()) itself.  A handle
 * received in ipc_method_cb must still be released (ipc_reply_free() would
 * send a rejection: use it only if no final reply was sent this way; after
 * one, finish the handle with ipc_reply_forget()).
 *
 * Returns: as ipc_reply_send().
 */
int ipc_conn_send_reply(struct ipc_conn *conn, uint64_t request_id, bool success, bool has_more,
			const void *reply_proto, size_t len, int fd);

/**
 * ipc_reply_get_conn - the connection the request came from (borrowed).
 */
struct ipc_conn *ipc_reply_get_conn(const struct ipc_reply *reply);

/**
 * ipc_reply_get_request_id - the request id the replies echo.
 */
uint64_t ipc_reply_get_request_id(const struct ipc_reply *reply);

/**
 * ipc_reply_is_wanted - false when the client sent drop_reply=true (then
 * successful replies are not sent).
 */
bool ipc_reply_is_wanted(const struct ipc_reply *reply);

/**
 * ipc_reply_send - send InvokeMethodReply{success=true}.
 * @reply: handle from ipc_method_cb.
 * @reply_proto: serialized response message (may be NULL when @len is 0).
 * @len: its length.
 * @has_more: true for one message of a stream; false ends the request and
 *            releases @reply (whatever the result).
 * @fd: fd to pass with this reply (SCM_RIGHTS) or -EBADF.  Borrowed.
 *
 * Returns: 0 (also when the reply is not wanted), -ENOTCONN if the
 * connection is gone, -EOPNOTSUPP (fd on TCP/vsock), -EMSGSIZE, -ENOBUFS
 * (peer not reading: the connection is being dropped), -errno.
 */
int ipc_reply_send(struct ipc_reply *reply, const void *reply_proto, size_t len, bool has_more, int fd);

/**
 * ipc_reply_reject - send InvokeMethodReply{success=false} (unless the reply
 * is not wanted) and release @reply.
 *
 * Returns: 0, -ENOTCONN, -errno.
 */
int ipc_reply_reject(struct ipc_reply *reply);

/**
 * ipc_reply_forget - release @reply without sending anything, for a
 * request that was answered by other means (ipc_conn_send_reply()) or whose
 * connection is gone.  Accepts NULL.
 *
 * Returns: NULL.
 */
struct ipc_reply *ipc_reply_forget(struct ipc_reply *reply);

/**
 * ipc_reply_free - release @reply; if it was not finished, reject it first
 * so that the client's request does not stay pending.  Accepts NULL.
 *
 * Returns: NULL.
 */
struct ipc_reply *ipc_reply_free(struct ipc_reply *reply);
