/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

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

size_t builtin_clocks_read(uint32_t *ids, uint64_t *ts)
{
	static const struct {
		clockid_t clock;
		uint32_t id;
	} clocks[] = {
		{ CLOCK_BOOTTIME, 6 },        { CLOCK_REALTIME_COARSE, 2 },
		{ CLOCK_MONOTONIC_COARSE, 4 }, { CLOCK_REALTIME, 1 },
		{ CLOCK_MONOTONIC, 3 },       { CLOCK_MONOTONIC_RAW, 5 },
	};
	struct timespec t[ARRAY_SIZE(clocks)];
	size_t n = 0;

	/* all of them first, as close together as possible */
	for (size_t i = 0; i < ARRAY_SIZE(clocks); i++)
		if (clock_gettime(clocks[i].clock, &t[i]) < 0)
			t[i] = (struct timespec){ 0, 0 };
	for (; n < ARRAY_SIZE(clocks); n++) {
		ids[n] = clocks[n].id;
		ts[n] = (uint64_t)t[n].tv_sec * 1000000000ull + (uint64_t)t[n].tv_nsec;
	}
#if defined(__x86_64__)
	ids[n] = 9; /* BUILTIN_CLOCK_TSC */
	ts[n++] = __rdtsc();
#endif
	return n;
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

bool boot_id_valid(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++) {
		bool dash = n == 8 || n == 13 || n == 18 || n == 23;

		if (dash ? s[n] != '-' : !((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	}
	return n == BOOT_ID_LEN;
}

void boot_id_read(char buf[static BOOT_ID_LEN + 1])
{
	_cleanup_free_ char *text = NULL;

	buf[0] = 0;
	if (read_full_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &text, NULL) < 0)
		return;
	text[strcspn(text, "\n")] = 0;
	if (boot_id_valid(text))
		memcpy(buf, text, BOOT_ID_LEN + 1);
}
