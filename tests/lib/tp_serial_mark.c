/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tp-serial-mark - the two ends of tests/vm/machines.sh's marker round
 * trips over a QEMU serial port:
 *
 *   tp-serial-mark host SOCKET MARKER
 *   tp-serial-mark guest PORT MARKER
 *   tp-serial-mark quit SOCKET
 *
 * host connects to the UNIX SOCKET QEMU serves for the port and, for round
 * K = 1, 2...: writes the counter "tp-host-send" = K into MARKER (a trace_marker file),
 * the byte K to the guest, waits for it back, and writes "tp-host-recv" = K.
 * It stops once FAST_WANTED rounds took less than FAST_NS, or after
 * MAX_ROUNDS.  guest reads the PORT (/dev/virtio-ports/NAME) a byte at a
 * time, writes "tp-guest-mark" = K into its MARKER and sends the byte back,
 * until quit sends it the byte 0 (after the session: the guest's daemon
 * records until then).
 *
 * Why fast rounds: the guest's mark happened between the host's two marks
 * (causality, whatever the two ways took), so a converted mark that lands
 * between them is off by less than that round trip.  One round under 1 ms
 * bounds the conversion's error below 1 ms; a loaded TCG guest has slow
 * rounds too, so rounds go on until there are a few fast ones.
 *
 * In C rather than shell so that nothing but the link itself sits between
 * a marker and its byte: a shell and a socat in the path add their own
 * scheduling to every trip, on both sides, and the mark's place in its round
 * trip is what the clock conversion is judged by.  The host says how many
 * rounds it took.  Exit status 0 when every round came back.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 250u
#define FAST_WANTED 5u
#define FAST_NS 1000000ull
#define QUIT 0
/* a round that takes longer is the link's failure, not a slow trip */
#define ROUND_TIMEOUT_MS 120000

static int mark(int fd, const char *what, unsigned k)
{
	char buf[64];
	/*
	 * An atrace counter line ("C|pid|name|value"): trace_processor reads
	 * every trace_marker line as atrace, and counts any other form as a
	 * systrace_parse_failure.
	 */
	int n = snprintf(buf, sizeof(buf), "C|%d|%s|%u\n", (int)getpid(), what, k);

	return write(fd, buf, (size_t)n) == n ? 0 : -errno;
}

static uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(s);
		fprintf(stderr, "tp-serial-mark: connect %s: %s\n", path, strerror(-r));
		return r;
	}
	return s;
}

static int run_quit(const char *socket_path)
{
	unsigned char q = QUIT;
	int s = connect_unix(socket_path), r = 0;

	if (s < 0)
		return s;
	if (write(s, &q, 1) != 1)
		r = -errno;
	close(s);
	return r;
}

static int run_host(const char *socket_path, const char *marker)
{
	int s = -1, m = -1, r = 0;
	unsigned fast = 0, k;

	s = connect_unix(socket_path);
	if (s < 0)
		return s;
	m = open(marker, O_WRONLY | O_CLOEXEC);
	if (m < 0) {
		r = -errno;
		goto out;
	}
	for (k = 1; k <= MAX_ROUNDS && fast < FAST_WANTED; k++) {
		unsigned char out = (unsigned char)k, in = 0;
		struct pollfd p = { .fd = s, .events = POLLIN };
		uint64_t t0, t1;

		t0 = boot_ns();
		r = mark(m, "tp-host-send", k);
		if (r >= 0 && write(s, &out, 1) != 1)
			r = -errno;
		if (r < 0)
			goto out;
		if (poll(&p, 1, ROUND_TIMEOUT_MS) != 1 || read(s, &in, 1) != 1 || in != out) {
			fprintf(stderr, "tp-serial-mark: no echo of round %u\n", k);
			r = -EIO;
			goto out;
		}
		r = mark(m, "tp-host-recv", k);
		t1 = boot_ns();
		if (r < 0)
			goto out;
		if (t1 - t0 < FAST_NS)
			fast++;
	}
	printf("tp-serial-mark: %u rounds, %u of them under %.1f ms\n", k - 1, fast, FAST_NS / 1e6);
out:
	if (m >= 0)
		close(m);
	if (s >= 0)
		close(s);
	return r;
}

static int run_guest(const char *port, const char *marker)
{
	int p = -1, m = -1, r = 0;

	p = open(port, O_RDWR | O_CLOEXEC);
	m = open(marker, O_WRONLY | O_CLOEXEC);
	if (p < 0 || m < 0) {
		r = -errno;
		goto out;
	}
	for (;;) {
		unsigned char c;
		ssize_t n = read(p, &c, 1);

		if (n == 0 || (n < 0 && errno == EAGAIN)) {
			/* nobody on the host's end yet: a port reads as at its end until then */
			struct timespec ts = { .tv_nsec = 50 * 1000 * 1000 };

			nanosleep(&ts, NULL);
			continue;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out;
		}
		if (c == QUIT)
			break;
		r = mark(m, "tp-guest-mark", c);
		if (r >= 0 && write(p, &c, 1) != 1)
			r = -errno;
		if (r < 0)
			goto out;
	}
out:
	if (m >= 0)
		close(m);
	if (p >= 0)
		close(p);
	return r;
}

/*
 * Best effort: a real-time priority, so that a loaded machine (or guest)
 * runs each end as soon as its byte arrives rather than after whatever
 * else is runnable; the bound it proves is only as tight as the fastest
 * round.  Without it (refused) the rounds are slower, not wrong.
 */
static void go_realtime(void)
{
	struct sched_param sp = { .sched_priority = 10 };

	(void)sched_setscheduler(0, SCHED_FIFO, &sp);
}

int main(int argc, char **argv)
{
	int r;

	go_realtime();

	if (argc == 4 && strcmp(argv[1], "host") == 0)
		r = run_host(argv[2], argv[3]);
	else if (argc == 4 && strcmp(argv[1], "guest") == 0)
		r = run_guest(argv[2], argv[3]);
	else if (argc == 3 && strcmp(argv[1], "quit") == 0)
		r = run_quit(argv[2]);
	else {
		fprintf(stderr, "usage: tp-serial-mark host SOCKET MARKER\n"
				"       tp-serial-mark guest PORT MARKER\n"
				"       tp-serial-mark quit SOCKET\n");
		return 2;
	}
	if (r < 0)
		fprintf(stderr, "tp-serial-mark: %s\n", strerror(-r));
	return r < 0 ? 1 : 0;
}
