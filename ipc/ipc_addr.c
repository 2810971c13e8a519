/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket address strings as Perfetto spells them, and the connect/listen
 * calls for each family.  Every socket is non-blocking and close-on-exec.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/vm_sockets.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "util/util.h"

#define VSOCK_PREFIX "vsock://"

union sockaddr_any {
	struct sockaddr sa;
	struct sockaddr_un un;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_vm vm;
	struct sockaddr_storage storage;
};

/* Position of the ':' before a trailing decimal port, or NULL. */
static const char *find_port_colon(const char *addr)
{
	const char *colon = strrchr(addr, ':');
	const char *p;

	if (!colon || colon[1] == '\0')
		return NULL;
	for (p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return NULL;
	return colon;
}

int ipc_addr_kind_from_string(const char *addr)
{
	if (!addr || addr[0] == '\0')
		return -EINVAL;
	if (addr[0] == '@')
		return IPC_ADDR_UNIX_ABSTRACT;
	if (strncmp(addr, VSOCK_PREFIX, strlen(VSOCK_PREFIX)) == 0)
		return IPC_ADDR_VSOCK;
	if (find_port_colon(addr))
		return addr[0] == '[' ? IPC_ADDR_INET6 : IPC_ADDR_INET;
	return IPC_ADDR_UNIX;
}

bool ipc_addr_kind_can_pass_fds(enum ipc_addr_kind kind)
{
	return kind == IPC_ADDR_UNIX || kind == IPC_ADDR_UNIX_ABSTRACT;
}

static int parse_port(const char *s, uint32_t max, uint32_t *ret)
{
	uint32_t v;
	int r;

	r = safe_atou32(s, &v);
	if (r < 0)
		return r;
	if (v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

/* Fill @ret for @addr; @ret_len is the length to pass to connect()/bind(). */
static int addr_resolve(const char *addr, int *ret_family, union sockaddr_any *ret, socklen_t *ret_len)
{
	int kind = ipc_addr_kind_from_string(addr);
	const char *colon;
	uint32_t port;
	size_t n;
	int r;

	if (kind < 0)
		return kind;

	memset(ret, 0, sizeof(*ret));
	switch (kind) {
	case IPC_ADDR_UNIX:
		n = strlen(addr);
		if (n >= sizeof(ret->un.sun_path))
			return -ENAMETOOLONG;
		ret->un.sun_family = AF_UNIX;
		memcpy(ret->un.sun_path, addr, n + 1);
		*ret_len = offsetof(struct sockaddr_un, sun_path) + n + 1;
		*ret_family = AF_UNIX;
		return 0;

	case IPC_ADDR_UNIX_ABSTRACT:
		/* The '@' becomes the leading NUL; no trailing NUL is counted. */
		n = strlen(addr);
		if (n < 2)
			return -EINVAL;
		if (n >= sizeof(ret->un.sun_path))
			return -ENAMETOOLONG;
		ret->un.sun_family = AF_UNIX;
		ret->un.sun_path[0] = '\0';
		memcpy(ret->un.sun_path + 1, addr + 1, n - 1);
		*ret_len = offsetof(struct sockaddr_un, sun_path) + n;
		*ret_family = AF_UNIX;
		return 0;

	case IPC_ADDR_VSOCK: {
		const char *spec = addr + strlen(VSOCK_PREFIX);
		char cid_s[16];
		uint32_t cid;

		colon = strchr(spec, ':');
		if (!colon || (size_t)(colon - spec) >= sizeof(cid_s) || colon == spec)
			return -EINVAL;
		memcpy(cid_s, spec, colon - spec);
		cid_s[colon - spec] = '\0';
		r = safe_atou32(cid_s, &cid);
		if (r < 0)
			return -EINVAL;
		r = parse_port(colon + 1, UINT32_MAX, &port);
		if (r < 0)
			return -EINVAL;
		ret->vm.svm_family = AF_VSOCK;
		ret->vm.svm_cid = cid;
		ret->vm.svm_port = port;
		*ret_len = sizeof(ret->vm);
		*ret_family = AF_VSOCK;
		return 0;
	}

	case IPC_ADDR_INET6: {
		char host[INET6_ADDRSTRLEN + 1];

		colon = find_port_colon(addr);
		/* "[addr]:port": the ']' must sit right before the port colon. */
		if (colon - addr < 3 || colon[-1] != ']')
			return -EINVAL;
		n = (size_t)(colon - addr) - 2;
		if (n >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr + 1, n);
		host[n] = '\0';
		r = parse_port(colon + 1, UINT16_MAX, &port);
		if (r < 0)
			return -EINVAL;
		ret->in6.sin6_family = AF_INET6;
		ret->in6.sin6_port = htons(port);
		if (inet_pton(AF_INET6, host, &ret->in6.sin6_addr) != 1)
			return -EINVAL;
		*ret_len = sizeof(ret->in6);
		*ret_family = AF_INET6;
		return 0;
	}

	case IPC_ADDR_INET: {
		struct addrinfo hints = {
			.ai_family = AF_INET,
			.ai_socktype = SOCK_STREAM,
			.ai_flags = AI_NUMERICSERV,
		};
		struct addrinfo *res = NULL;
		char host[256];

		colon = find_port_colon(addr);
		n = colon - addr;
		if (n == 0 || n >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr, n);
		host[n] = '\0';
		r = parse_port(colon + 1, UINT16_MAX, &port);
		if (r < 0)
			return -EINVAL;
		r = getaddrinfo(host, colon + 1, &hints, &res);
		if (r != 0 || !res)
			return r == EAI_SYSTEM ? negative_errno() : -EADDRNOTAVAIL;
		if (res->ai_addrlen > sizeof(*ret)) {
			freeaddrinfo(res);
			return -EINVAL;
		}
		memcpy(ret, res->ai_addr, res->ai_addrlen);
		*ret_len = res->ai_addrlen;
		*ret_family = AF_INET;
		freeaddrinfo(res);
		return 0;
	}
	default:
		return -EINVAL;
	}
}

int ipc_addr_connect(const char *addr, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	union sockaddr_any sa;
	socklen_t len;
	int family, r;

	if (!ret_fd)
		return -EINVAL;

	r = addr_resolve(addr, &family, &sa, &len);
	if (r < 0)
		return r;

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (family == AF_INET || family == AF_INET6) {
		int one = 1;

		/* Small RPC frames: do not wait for Nagle. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}

	if (connect(fd, &sa.sa, len) < 0) {
		if (errno == EINPROGRESS) {
			*ret_fd = TAKE_FD(fd);
			return 1;
		}
		return -errno;
	}

	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Remove a socket left behind by a previous run; never anything else. */
static int unlink_stale_socket(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int ipc_addr_listen(const char *addr, mode_t mode, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	union sockaddr_any sa;
	socklen_t len;
	int family, kind, r;

	if (!ret_fd)
		return -EINVAL;

	r = addr_resolve(addr, &family, &sa, &len);
	if (r < 0)
		return r;
	kind = ipc_addr_kind_from_string(addr);

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;

	if (kind == IPC_ADDR_UNIX) {
		r = unlink_stale_socket(addr);
		if (r < 0)
			return r;
	} else if (family == AF_INET || family == AF_INET6) {
		int one = 1;

		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
			return -errno;
	}

	if (bind(fd, &sa.sa, len) < 0)
		return -errno;

	if (kind == IPC_ADDR_UNIX && mode != 0 && chmod(addr, mode) < 0) {
		r = -errno;
		(void)unlink(addr);
		return r;
	}

	if (listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		if (kind == IPC_ADDR_UNIX)
			(void)unlink(addr);
		return r;
	}

	*ret_fd = TAKE_FD(fd);
	return 0;
}
