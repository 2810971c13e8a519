/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util_notify - sd_notify(3)'s wire protocol, which is documented as
 * stable and meant to be spoken without libsystemd.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/notify.h"

int notify_send(const char *state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = getenv("NOTIFY_SOCKET");
	_cleanup_close_ int fd = -EBADF;
	size_t len, state_len;
	socklen_t sa_len;

	if (!state)
		return -EINVAL;
	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path) || len < 2)
		return -EAFNOSUPPORT;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract: no terminating NUL counted */
	sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	state_len = strlen(state);
	if (sendto(fd, state, state_len, MSG_NOSIGNAL, (struct sockaddr *)&sa, sa_len) < 0)
		return negative_errno();
	return 1;
}

int notify_sendf(const char *fmt, ...)
{
	_cleanup_free_ char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	return notify_send(s);
}

int notify_watchdog_usec(uint64_t *ret)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	uint64_t v;
	int r;

	if (!ret)
		return -EINVAL;
	if (!usec || !*usec)
		return 0;
	r = safe_atou64(usec, &v);
	if (r < 0)
		return r;
	if (v == 0)
		return -EINVAL;
	if (pid && *pid) {
		uint32_t p;

		r = safe_atou32(pid, &p);
		if (r < 0)
			return r;
		if ((pid_t)p != getpid())
			return 0; /* meant for another process of the service */
	}
	*ret = v;
	return 1;
}
