/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/util.h"

int read_full_fd(int fd, size_t max, char **ret_buf, size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	for (;;) {
		ssize_t n;

		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			char *nbuf;

			if (cap > max)
				return -EFBIG;
			if (ncap > max + 1)
				ncap = max + 1;
			nbuf = realloc(buf, ncap + 1);
			if (!nbuf)
				return -ENOMEM;
			buf = nbuf;
			cap = ncap;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max)
			return -EFBIG;
	}
	if (!buf) {
		buf = malloc(1);
		if (!buf)
			return -ENOMEM;
	}
	buf[len] = '\0';
	*ret_buf = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}

int read_full_file_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len)
{
	_cleanup_close_ int fd = -EBADF;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	return read_full_fd(fd, max, ret_buf, ret_len);
}

int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

uint64_t now_ns(int clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int open_output_in_place(const char *path)
{
	struct stat st;
	int fd;

	if (stat(path, &st) < 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
		return -ENOTSUP;
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}
