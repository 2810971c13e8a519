/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util/: bounded number parsing, whole-file I/O, log levels and the line
 * format (the journal's priority prefixes are in test_util_log), the
 * service manager notifications (over a real AF_UNIX datagram socket) and
 * the varint codec (every length boundary, the redundant form, truncated
 * and overlong input) and the name character classes.  Runs as any user.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/notify.h"
#include "util/util.h"
#include "util/util_varint.h"

/* ---- parsing --------------------------------------------------------------- */

START_TEST(test_atou64)
{
	uint64_t v;

	ck_assert_int_eq(safe_atou64("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(safe_atou64("42", &v), 0);
	ck_assert_uint_eq(v, 42);
	/* leading blanks and one trailing newline, as in sysfs and procfs files */
	ck_assert_int_eq(safe_atou64(" \t 17\n", &v), 0);
	ck_assert_uint_eq(v, 17);
	ck_assert_int_eq(safe_atou64("007", &v), 0);
	ck_assert_uint_eq(v, 7);
	ck_assert_int_eq(safe_atou64("18446744073709551615", &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);

	/* failures leave the output alone */
	v = 99;
	ck_assert_int_eq(safe_atou64("18446744073709551616", &v), -ERANGE);
	ck_assert_int_eq(safe_atou64("99999999999999999999999", &v), -ERANGE);
	ck_assert_int_eq(safe_atou64("", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("  ", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("\n", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("-1", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("+1", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("12a", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("12 ", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("12\n\n", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64("0x10", &v), -EINVAL);
	ck_assert_int_eq(safe_atou64(NULL, &v), -EINVAL);
	ck_assert_uint_eq(v, 99);
}
END_TEST

START_TEST(test_atoi64)
{
	int64_t v;

	ck_assert_int_eq(safe_atoi64("-5", &v), 0);
	ck_assert_int_eq(v, -5);
	ck_assert_int_eq(safe_atoi64("+5", &v), 0);
	ck_assert_int_eq(v, 5);
	ck_assert_int_eq(safe_atoi64("  -0\n", &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(safe_atoi64("9223372036854775807", &v), 0);
	ck_assert_int_eq(v, INT64_MAX);
	ck_assert_int_eq(safe_atoi64("-9223372036854775808", &v), 0);
	ck_assert_int_eq(v, INT64_MIN);

	v = 99;
	ck_assert_int_eq(safe_atoi64("9223372036854775808", &v), -ERANGE);
	ck_assert_int_eq(safe_atoi64("-9223372036854775809", &v), -ERANGE);
	ck_assert_int_eq(safe_atoi64("-", &v), -EINVAL);
	ck_assert_int_eq(safe_atoi64("- 1", &v), -EINVAL);
	ck_assert_int_eq(safe_atoi64("--1", &v), -EINVAL);
	ck_assert_int_eq(safe_atoi64("-\n", &v), -EINVAL);
	ck_assert_int_eq(safe_atoi64("1-", &v), -EINVAL);
	ck_assert_int_eq(safe_atoi64(NULL, &v), -EINVAL);
	ck_assert_int_eq(v, 99);
}
END_TEST

START_TEST(test_ato32)
{
	uint32_t u = 7;
	int32_t i = 7;

	ck_assert_int_eq(safe_atou32("4294967295", &u), 0);
	ck_assert_uint_eq(u, UINT32_MAX);
	ck_assert_int_eq(safe_atou32("4294967296", &u), -ERANGE);
	ck_assert_int_eq(safe_atou32("x", &u), -EINVAL);
	ck_assert_uint_eq(u, UINT32_MAX);

	ck_assert_int_eq(safe_atoi32("2147483647", &i), 0);
	ck_assert_int_eq(i, INT32_MAX);
	ck_assert_int_eq(safe_atoi32("-2147483648", &i), 0);
	ck_assert_int_eq(i, INT32_MIN);
	ck_assert_int_eq(safe_atoi32("2147483648", &i), -ERANGE);
	ck_assert_int_eq(safe_atoi32("-2147483649", &i), -ERANGE);
	ck_assert_int_eq(safe_atoi32("", &i), -EINVAL);
	ck_assert_int_eq(i, INT32_MIN);
}
END_TEST

/* ---- whole-file I/O ---------------------------------------------------------- */

static char tmpdir[] = "/tmp/tp-util-XXXXXX";

static void tmpdir_setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

/* The files the tests may leave behind. */
static void tmpdir_teardown(void)
{
	static const char *const names[] = { "f", "stderr", "notify" };
	int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	ck_assert_int_ge(dfd, 0);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		ck_assert(unlinkat(dfd, names[i], 0) == 0 || errno == ENOENT);
	close(dfd);
	ck_assert_int_eq(rmdir(tmpdir), 0);
	memcpy(tmpdir + strlen(tmpdir) - 6, "XXXXXX", 6);
}

static int open_tmp(const char *name, int flags)
{
	char path[128];
	int fd;

	(void)snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fd = open(path, flags | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 8));
}

START_TEST(test_read_full)
{
	static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 65536, 300000 };
	int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	ck_assert_int_ge(dfd, 0);
	for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
		size_t n = sizes[k], len = 12345;
		uint8_t *want = malloc(n + 1);
		char *buf = NULL;
		int fd;

		ck_assert_ptr_nonnull(want);
		fill(want, n, (unsigned)k);
		fd = open_tmp("f", O_WRONLY | O_CREAT | O_TRUNC);
		ck_assert_int_eq(write_all(fd, want, n), 0);
		close(fd);

		/* exactly @max bytes fit; one byte less is too big, never cut */
		ck_assert_int_eq(read_full_file_at(dfd, "f", n, &buf, &len), 0);
		ck_assert_uint_eq(len, n);
		ck_assert_int_eq(memcmp(buf, want, n), 0);
		ck_assert_int_eq(buf[n], '\0');
		free(buf);
		buf = NULL;
		if (n > 0) {
			len = 12345;
			ck_assert_int_eq(read_full_file_at(dfd, "f", n - 1, &buf, &len), -EFBIG);
			ck_assert_ptr_null(buf);
			ck_assert_uint_eq(len, 12345);
		}
		/* through an fd, length not asked for */
		fd = open_tmp("f", O_RDONLY);
		ck_assert_int_eq(read_full_fd(fd, n + 100, &buf, NULL), 0);
		ck_assert_int_eq(memcmp(buf, want, n), 0);
		close(fd);
		free(buf);
		free(want);
	}
	{
		char *buf = NULL;

		ck_assert_int_eq(read_full_file_at(dfd, "missing", 10, &buf, NULL), -ENOENT);
		ck_assert_int_eq(read_full_file_at(dfd, ".", 10, &buf, NULL), -EISDIR);
		ck_assert_int_eq(read_full_fd(-1, 10, &buf, NULL), -EBADF);
		ck_assert_ptr_null(buf);
	}
	close(dfd);
}
END_TEST

/* A pipe delivers what it holds so far, in pieces: read_full_fd() must keep going to EOF. */
struct pipe_writer {
	int fd;
	const uint8_t *data;
	size_t len;
	int ret;
};

static void *pipe_writer_run(void *arg)
{
	struct pipe_writer *w = arg;

	w->ret = write_all(w->fd, w->data, w->len);
	close(w->fd);
	return NULL;
}

START_TEST(test_pipe_round_trip)
{
	const size_t n = 1u << 20; /* 16 pipe buffers: the writer blocks and resumes */
	uint8_t *want = malloc(n);
	struct pipe_writer w = { .data = want, .len = n, .ret = 1 };
	pthread_t th;
	char *buf = NULL;
	size_t len = 0;
	int p[2];

	ck_assert_ptr_nonnull(want);
	fill(want, n, 3);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	w.fd = p[1];
	ck_assert_int_eq(pthread_create(&th, NULL, pipe_writer_run, &w), 0);
	ck_assert_int_eq(read_full_fd(p[0], n, &buf, &len), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(w.ret, 0);
	ck_assert_uint_eq(len, n);
	ck_assert_int_eq(memcmp(buf, want, n), 0);
	close(p[0]);
	free(buf);
	free(want);
}
END_TEST

START_TEST(test_write_all_errors)
{
	uint8_t b[16] = { 0 };
	int p[2];

	ck_assert_int_eq(write_all(-1, b, sizeof(b)), -EBADF);
	/* nothing to write: no syscall, so even a bad fd is fine */
	ck_assert_int_eq(write_all(-1, b, 0), 0);

	ck_assert_ptr_ne(signal(SIGPIPE, SIG_IGN), SIG_ERR);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	ck_assert_int_eq(write_all(p[1], b, sizeof(b)), -EPIPE);
	close(p[1]);

	/* a full non-blocking pipe: the error comes back, not a short count */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	{
		size_t n = 1u << 20;
		uint8_t *big = calloc(1, n);

		ck_assert_ptr_nonnull(big);
		ck_assert_int_eq(write_all(p[1], big, n), -EAGAIN);
		free(big);
	}
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_now_ns)
{
	struct timespec ts;
	uint64_t a, b, c;

	a = now_ns(CLOCK_MONOTONIC);
	ck_assert_int_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	b = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	c = now_ns(CLOCK_MONOTONIC);
	ck_assert_uint_gt(a, 0);
	ck_assert_uint_le(a, b);
	ck_assert_uint_le(b, c);
	ck_assert_uint_eq(now_ns(-12345), 0); /* no such clock */
}
END_TEST

/* ---- logging ------------------------------------------------------------------ */

START_TEST(test_log_levels)
{
	static const char *const names[] = { "error", "warning", "notice", "info", "debug" };
	enum log_level saved = log_get_max_level();

	for (int i = 0; i < (int)ARRAY_SIZE(names); i++)
		ck_assert_int_eq(log_level_from_string(names[i]), i);
	ck_assert_int_eq(log_level_from_string("Error"), -EINVAL);
	ck_assert_int_eq(log_level_from_string("warn"), -EINVAL);
	ck_assert_int_eq(log_level_from_string(""), -EINVAL);
	ck_assert_int_eq(log_level_from_string(NULL), -EINVAL);

	log_set_max_level(LOG_LEVEL_DEBUG);
	ck_assert_int_eq(log_get_max_level(), LOG_LEVEL_DEBUG);
	/* out of range: ignored */
	log_set_max_level(_LOG_LEVEL_MAX);
	ck_assert_int_eq(log_get_max_level(), LOG_LEVEL_DEBUG);
	log_set_max_level((enum log_level)-1);
	ck_assert_int_eq(log_get_max_level(), LOG_LEVEL_DEBUG);
	log_set_max_level(saved);
}
END_TEST

/*
 * Runs @fn with stderr sent to a file and returns what it printed.  Not
 * the journal, so lines carry no "<N>" priority (test_util_log covers that).
 */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
	int fd = open_tmp("stderr", O_RDWR | O_CREAT | O_TRUNC);
	int saved = dup(STDERR_FILENO);
	char *out = NULL;

	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(unsetenv("JOURNAL_STREAM"), 0);
	fflush(stderr);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	fn(arg);
	fflush(stderr);
	ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
	close(saved);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	ck_assert_int_eq(read_full_fd(fd, 1 << 16, &out, NULL), 0);
	close(fd);
	return out;
}

struct log_results {
	int r[6];
	int errno_after;
};

static void log_some(void *arg)
{
	struct log_results *x = arg;

	log_set_max_level(LOG_LEVEL_NOTICE);
	errno = ENOTTY;
	x->r[0] = log_error_errno(-ENOENT, "open %s: %m", "a");
	x->r[1] = log_warning_errno(EPERM, "w %d", 1);
	x->r[2] = log_notice_errno(0, "plain");
	/* above the maximum level: nothing printed, the error still returned */
	x->r[3] = log_info_errno(-EIO, "hidden");
	x->r[4] = log_debug_errno(-EBUSY, "hidden too");
	log_info("hidden as well");
	/* an out-of-range level prints as an error */
	x->r[5] = log_internal((enum log_level)42, -EINVAL, "odd");
	x->errno_after = errno;
}

START_TEST(test_log_format)
{
	enum log_level saved = log_get_max_level();
	struct log_results x = {};
	char *out = capture_stderr(log_some, &x);
	char want[512];

	log_set_max_level(saved);
	(void)snprintf(want, sizeof(want),
		       "traced-probes: error: open a: %s\n"
		       "traced-probes: warning: w 1\n"
		       "traced-probes: plain\n"
		       "traced-probes: error: odd\n",
		       strerror(ENOENT));
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(x.r[0], -ENOENT);
	ck_assert_int_eq(x.r[1], -EPERM);
	ck_assert_int_eq(x.r[2], 0);
	ck_assert_int_eq(x.r[3], -EIO);
	ck_assert_int_eq(x.r[4], -EBUSY);
	ck_assert_int_eq(x.r[5], -EINVAL);
	/* logging keeps errno */
	ck_assert_int_eq(x.errno_after, ENOTTY);
	free(out);
}
END_TEST

static void log_long(void *arg)
{
	char *s = arg;

	log_error("%s", s);
}

/* A line longer than the buffer is cut, still one line. */
START_TEST(test_log_long_line)
{
	size_t n = 10000;
	char *s = malloc(n + 1), *out;

	ck_assert_ptr_nonnull(s);
	memset(s, 'x', n);
	s[n] = '\0';
	out = capture_stderr(log_long, s);
	ck_assert(strncmp(out, "traced-probes: error: xxx", 25) == 0);
	ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
	ck_assert_uint_lt(strlen(out), n);
	free(out);
	free(s);
}
END_TEST

/* ---- notify ------------------------------------------------------------------- */

static int bind_dgram(const struct sockaddr_un *sa, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (const struct sockaddr *)sa, len), 0);
	return fd;
}

/* The datagram the service manager would read: one, whole, nothing after it. */
static void expect_datagram(int fd, const char *want)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	ck_assert_uint_eq((size_t)n, strlen(want));
	ck_assert_str_eq(buf, want);
	ck_assert_int_eq(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), -1);
	ck_assert_int_eq(errno, EAGAIN);
}

START_TEST(test_notify_path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[96];
	int fd;

	ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
	ck_assert_int_eq(notify_send("READY=1"), 0);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", "", 1), 0);
	ck_assert_int_eq(notify_send("READY=1"), 0);

	(void)snprintf(path, sizeof(path), "%s/notify", tmpdir);
	strcpy(sa.sun_path, path);
	fd = bind_dgram(&sa, sizeof(sa));
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
	ck_assert_int_eq(notify_send("READY=1"), 1);
	expect_datagram(fd, "READY=1");
	ck_assert_int_eq(notify_sendf("READY=1\nSTATUS=%s %d", "up", 3), 1);
	expect_datagram(fd, "READY=1\nSTATUS=up 3");
	ck_assert_int_eq(notify_send(NULL), -EINVAL);
	close(fd);

	/* nobody listening any more */
	ck_assert_int_eq(notify_send("READY=1"), -ECONNREFUSED);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(notify_send("READY=1"), -ENOENT);
	ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
}
END_TEST

START_TEST(test_notify_abstract)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char name[64];
	int fd;

	(void)snprintf(name, sizeof(name), "@tp-util-notify-%d", (int)getpid());
	memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
	fd = bind_dgram(&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name)));
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", name, 1), 0);
	ck_assert_int_eq(notify_send("STOPPING=1"), 1);
	expect_datagram(fd, "STOPPING=1");
	close(fd);
	ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
}
END_TEST

START_TEST(test_notify_bad_address)
{
	char longpath[200];

	ck_assert_int_eq(setenv("NOTIFY_SOCKET", "relative/path", 1), 0);
	ck_assert_int_eq(notify_send("READY=1"), -EAFNOSUPPORT);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", "@", 1), 0);
	ck_assert_int_eq(notify_send("READY=1"), -EAFNOSUPPORT);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", longpath, 1), 0);
	ck_assert_int_eq(notify_send("READY=1"), -EAFNOSUPPORT);
	ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
}
END_TEST

START_TEST(test_notify_watchdog)
{
	uint64_t usec = 0;
	char buf[32];

	ck_assert_int_eq(unsetenv("WATCHDOG_PID"), 0);
	ck_assert_int_eq(unsetenv("WATCHDOG_USEC"), 0);
	ck_assert_int_eq(notify_watchdog_usec(&usec), 0);
	ck_assert_int_eq(notify_watchdog_usec(NULL), -EINVAL);
	ck_assert_int_eq(setenv("WATCHDOG_USEC", "3000000", 1), 0);
	ck_assert_int_eq(notify_watchdog_usec(&usec), 1);
	ck_assert_uint_eq(usec, 3000000);

	/* for this pid only */
	(void)snprintf(buf, sizeof(buf), "%d", (int)getpid() + 1);
	ck_assert_int_eq(setenv("WATCHDOG_PID", buf, 1), 0);
	usec = 7;
	ck_assert_int_eq(notify_watchdog_usec(&usec), 0);
	ck_assert_uint_eq(usec, 7);
	(void)snprintf(buf, sizeof(buf), "%d", (int)getpid());
	ck_assert_int_eq(setenv("WATCHDOG_PID", buf, 1), 0);
	ck_assert_int_eq(notify_watchdog_usec(&usec), 1);
	ck_assert_uint_eq(usec, 3000000);

	/* malformed */
	ck_assert_int_eq(setenv("WATCHDOG_PID", "me", 1), 0);
	ck_assert_int_eq(notify_watchdog_usec(&usec), -EINVAL);
	ck_assert_int_eq(unsetenv("WATCHDOG_PID"), 0);
	ck_assert_int_eq(setenv("WATCHDOG_USEC", "soon", 1), 0);
	ck_assert_int_eq(notify_watchdog_usec(&usec), -EINVAL);
	ck_assert_int_eq(setenv("WATCHDOG_USEC", "0", 1), 0);
	ck_assert_int_eq(notify_watchdog_usec(&usec), -EINVAL);
	ck_assert_int_eq(setenv("WATCHDOG_USEC", "99999999999999999999", 1), 0);
	ck_assert_int_eq(notify_watchdog_usec(&usec), -ERANGE);
	ck_assert_uint_eq(usec, 3000000);
	ck_assert_int_eq(unsetenv("WATCHDOG_USEC"), 0);
}
END_TEST

/* ---- varint ------------------------------------------------------------------- */

/* The definition, one digit per byte: the oracle for varint_put(). */
static size_t ref_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	do {
		p[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			p[n] |= 0x80;
		n++;
	} while (v);
	return n;
}

/*
 * Put @v into a canary-filled buffer, compare with the oracle, read it back.
 * Plain comparisons, then one assertion: this runs a few hundred thousand
 * times, and every Check assertion costs a message to the parent.
 */
static void check_round_trip(uint64_t v)
{
	uint8_t buf[VARINT_MAX_LEN + 8], want[VARINT_MAX_LEN];
	const uint8_t *p = buf;
	size_t n = ref_varint(want, v), wrote;
	uint64_t got = ~v;
	bool canary = true, read;

	memset(buf, 0xa5, sizeof(buf));
	wrote = (size_t)(varint_put(buf, v) - buf);
	/* nothing past the room it is allowed */
	for (size_t i = VARINT_PUT_ROOM; i < sizeof(buf); i++)
		canary &= buf[i] == 0xa5;
	read = varint_get(&p, buf + n, &got);
	if (wrote != n || varint_len(v) != n || memcmp(buf, want, n) != 0 || !canary || !read ||
	    got != v || p != buf + n)
		ck_abort_msg("%" PRIu64 ": wrote %zu bytes (want %zu, varint_len %zu), bytes %s, "
			     "canary %s, read back %s %" PRIu64 " over %td bytes",
			     v, wrote, n, varint_len(v), memcmp(buf, want, n) ? "differ" : "match",
			     canary ? "intact" : "overwritten", read ? "ok" : "failed", got, p - buf);
}

START_TEST(test_varint_boundaries)
{
	check_round_trip(0);
	check_round_trip(1);
	/* the last value of each length and the first of the next */
	for (unsigned k = 1; k <= 9; k++) {
		uint64_t first = 1ull << (7 * k);

		ck_assert_uint_eq(varint_len(first - 1), k);
		ck_assert_uint_eq(varint_len(first), k + 1);
		check_round_trip(first - 1);
		check_round_trip(first);
		check_round_trip(first + 1);
	}
	check_round_trip(UINT64_MAX);
	check_round_trip(UINT64_MAX - 1);
	check_round_trip(1ull << 63);
	ck_assert_uint_eq(varint_len(UINT64_MAX), VARINT_MAX_LEN);
}
END_TEST

START_TEST(test_varint_random)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (unsigned i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* spread over every length, not only the 10-byte ones */
		check_round_trip(x >> (x % 64));
	}
}
END_TEST

/* Values written one after the other decode in order: the spare byte is overwritten. */
START_TEST(test_varint_sequence)
{
	static const uint64_t vals[] = { 0x1fffff, 1, 0x4000, 0x200000, 0, 0xfffffff, 127, UINT64_MAX, 300 };
	uint8_t buf[ARRAY_SIZE(vals) * VARINT_MAX_LEN + VARINT_PUT_ROOM], *w = buf;
	const uint8_t *p = buf;
	uint64_t v;

	for (size_t i = 0; i < ARRAY_SIZE(vals); i++)
		w = varint_put(w, vals[i]);
	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		ck_assert(varint_get(&p, w, &v));
		ck_assert_uint_eq(v, vals[i]);
	}
	ck_assert_ptr_eq(p, w);
	ck_assert(!varint_get(&p, w, &v));
}
END_TEST

START_TEST(test_varint_redundant)
{
	static const uint32_t vals[] = { 0, 1, 127, 128, 300, 0x3fff, 0x4000, 0x1fffff, 0x200000,
					 0xfffffff };
	const uint8_t v300[] = { 0xac, 0x82, 0x80, 0x00 };

	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		uint8_t b[4];
		const uint8_t *p = b;
		uint64_t v = 1ull << 40;

		varint_put_redundant4(b, vals[i]);
		ck_assert_uint_eq(b[0] & 0x80, 0x80);
		ck_assert_uint_eq(b[1] & 0x80, 0x80);
		ck_assert_uint_eq(b[2] & 0x80, 0x80);
		ck_assert_uint_eq(b[3] & 0x80, 0);
		/* a non-minimal encoding still decodes, and takes all four bytes */
		ck_assert(varint_get(&p, b + 4, &v));
		ck_assert_uint_eq(v, vals[i]);
		ck_assert_ptr_eq(p, b + 4);
	}
	{
		uint8_t b[4];

		varint_put_redundant4(b, 300);
		ck_assert_int_eq(memcmp(b, v300, 4), 0);
	}
}
END_TEST

START_TEST(test_varint_truncated)
{
	static const uint64_t vals[] = { 128, 0x4000, 0x200000, 1ull << 35, UINT64_MAX };

	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		uint8_t buf[VARINT_PUT_ROOM];
		size_t n = (size_t)(varint_put(buf, vals[i]) - buf);

		/* every proper prefix: nothing consumed, nothing stored */
		for (size_t cut = 0; cut < n; cut++) {
			const uint8_t *p = buf;
			uint64_t v = 42;

			ck_assert(!varint_get(&p, buf + cut, &v));
			ck_assert_ptr_eq(p, buf);
			ck_assert_uint_eq(v, 42);
		}
	}
}
END_TEST

START_TEST(test_varint_overlong)
{
	uint8_t buf[16];
	const uint8_t *p;
	uint64_t v = 42;

	/* ten continuation bytes: the varint would run past 64 bits */
	memset(buf, 0x80, sizeof(buf));
	buf[10] = 0x01;
	p = buf;
	ck_assert(!varint_get(&p, buf + 11, &v));
	ck_assert_ptr_eq(p, buf);
	ck_assert_uint_eq(v, 42);
	p = buf;
	ck_assert(!varint_get(&p, buf + sizeof(buf), &v));
	ck_assert_ptr_eq(p, buf);

	/* the longest valid form: nine continuation bytes, then the top bit */
	memset(buf, 0xff, 9);
	buf[9] = 0x01;
	p = buf;
	ck_assert(varint_get(&p, buf + 10, &v));
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert_ptr_eq(p, buf + 10);

	/* a zero padded out to ten bytes is still a zero */
	memset(buf, 0x80, 9);
	buf[9] = 0x00;
	p = buf;
	ck_assert(varint_get(&p, buf + 10, &v));
	ck_assert_uint_eq(v, 0);
}
END_TEST

START_TEST(test_zigzag)
{
	static const struct {
		int64_t s;
		uint64_t u;
	} cases[] = {
		{ 0, 0 }, { -1, 1 }, { 1, 2 }, { -2, 3 }, { 2, 4 },
		{ INT32_MAX, 0xfffffffeull }, { INT32_MIN, 0xffffffffull },
		{ INT64_MAX, UINT64_MAX - 1 }, { INT64_MIN, UINT64_MAX },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		ck_assert_uint_eq(varint_zigzag(cases[i].s), cases[i].u);
		ck_assert_int_eq(varint_unzigzag(cases[i].u), cases[i].s);
	}
	for (int64_t v = -70000; v <= 70000; v += 7)
		ck_assert_int_eq(varint_unzigzag(varint_zigzag(v)), v);
}
END_TEST

/* ---- names ----------------------------------------------------------------- */

START_TEST(test_name_valid)
{
	char big[130];

	/* the base class, and each extra only when asked for */
	ck_assert(name_valid("sched_switch09AZ", 127, 0));
	for (const char *c = "-./*,"; *c; c++) {
		char w[] = { 'a', *c, 'b', 0 };

		ck_assert_msg(!name_valid(w, 127, 0), "%s", w);
		ck_assert(!name_char_ok(*c, 0));
	}
	ck_assert(name_valid("a-b", 127, NAME_DASH));
	ck_assert(name_valid("a.b", 127, NAME_DOT));
	ck_assert(name_valid("a/b", 127, NAME_SLASH));
	ck_assert(name_valid("a*", 127, NAME_STAR));
	ck_assert(name_valid("0,1", 127, NAME_COMMA));
	ck_assert(!name_valid("a.b", 127, NAME_DASH));
	ck_assert(!name_char_ok('?', ~0u));
	ck_assert(!name_char_ok(' ', ~0u));
	ck_assert(!name_char_ok('\n', ~0u));
	ck_assert(!name_char_ok((char)0xc3, ~0u));

	/* empty, NULL, and the bound: @max bytes pass, one more does not */
	ck_assert(!name_valid("", 127, 0));
	ck_assert(!name_valid(NULL, 127, 0));
	memset(big, 'x', sizeof(big));
	big[127] = 0;
	ck_assert(name_valid(big, 127, 0));
	big[127] = 'x';
	big[128] = 0;
	ck_assert(!name_valid(big, 127, 0));
	ck_assert(name_valid(big, SIZE_MAX, 0));

	/* "." and ".." only as path components */
	ck_assert(name_valid(".", 127, NAME_DOT));
	ck_assert(name_valid("..", 127, NAME_DOT));
	ck_assert(!name_valid(".", 127, NAME_DOT | NAME_NOT_DOTS));
	ck_assert(!name_valid("..", 127, NAME_DOT | NAME_NOT_DOTS));
	ck_assert(name_valid("...", 127, NAME_DOT | NAME_NOT_DOTS));
	ck_assert(name_valid(".a", 127, NAME_DOT | NAME_NOT_DOTS));
}
END_TEST

/* This boot's id reads in the kernel's form; anything else is not one. */
START_TEST(test_boot_id)
{
	char id[BOOT_ID_LEN + 1];

	boot_id_read(id);
	ck_assert_uint_eq(strlen(id), BOOT_ID_LEN);
	ck_assert(boot_id_valid(id));
	ck_assert(boot_id_valid("01234567-89ab-cdef-0123-456789abcdef"));
	ck_assert(!boot_id_valid("01234567-89AB-cdef-0123-456789abcdef"));
	ck_assert(!boot_id_valid("0123456789ab-cdef-0123-456789abcdef0"));
	ck_assert(!boot_id_valid("01234567-89ab-cdef-0123-456789abcdef0"));
	ck_assert(!boot_id_valid("01234567-89ab-cdef-0123-456789abcde"));
	ck_assert(!boot_id_valid(""));
}
END_TEST

static Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_test(tc, test_atou64);
	tcase_add_test(tc, test_atoi64);
	tcase_add_test(tc, test_ato32);
	tcase_add_test(tc, test_name_valid);
	suite_add_tcase(s, tc);

	tc = tcase_create("io");
	tcase_add_checked_fixture(tc, tmpdir_setup, tmpdir_teardown);
	tcase_add_test(tc, test_read_full);
	tcase_add_test(tc, test_pipe_round_trip);
	tcase_add_test(tc, test_write_all_errors);
	tcase_add_test(tc, test_now_ns);
	tcase_add_test(tc, test_boot_id);
	suite_add_tcase(s, tc);

	tc = tcase_create("log");
	tcase_add_checked_fixture(tc, tmpdir_setup, tmpdir_teardown);
	tcase_add_test(tc, test_log_levels);
	tcase_add_test(tc, test_log_format);
	tcase_add_test(tc, test_log_long_line);
	suite_add_tcase(s, tc);

	tc = tcase_create("notify");
	tcase_add_checked_fixture(tc, tmpdir_setup, tmpdir_teardown);
	tcase_add_test(tc, test_notify_path);
	tcase_add_test(tc, test_notify_abstract);
	tcase_add_test(tc, test_notify_bad_address);
	tcase_add_test(tc, test_notify_watchdog);
	suite_add_tcase(s, tc);

	tc = tcase_create("varint");
	tcase_add_test(tc, test_varint_boundaries);
	tcase_add_test(tc, test_varint_random);
	tcase_add_test(tc, test_varint_sequence);
	tcase_add_test(tc, test_varint_redundant);
	tcase_add_test(tc, test_varint_truncated);
	tcase_add_test(tc, test_varint_overlong);
	tcase_add_test(tc, test_zigzag);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(util_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
