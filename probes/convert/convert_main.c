/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `traced-probes convert`: the command line around convert_file(): where
 * the bytes come from and go to, a progress line on a terminal, and the
 * per-CPU summary at the end.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <trace-cmd/trace-cmd.h>

#include "probes/convert/convert.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "util/util.h"

#define PROGRESS_INTERVAL_NS 100000000ull
#define PROGRESS_BAR 30

struct progress {
	uint64_t start_ns, last_ns;
	bool shown;
};

static void progress_cb(void *ctx, uint64_t done, uint64_t total, uint64_t events)
{
	struct progress *pr = ctx;
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	double secs = (double)(now - pr->start_ns) / 1e9;
	char bar[PROGRESS_BAR + 1];

	if (now - pr->last_ns < PROGRESS_INTERVAL_NS && done != total)
		return;
	pr->last_ns = now;
	pr->shown = true;
	if (total > 0) {
		unsigned fill = (unsigned)(MIN(done, total) * PROGRESS_BAR / total);

		memset(bar, '#', fill);
		memset(bar + fill, '.', PROGRESS_BAR - fill);
		bar[PROGRESS_BAR] = '\0';
		fprintf(stderr, "\r[%s] %3u%%  %.1f MiB  %.2f M events  %.1f s ", bar,
			(unsigned)(MIN(done, total) * 100 / total), (double)done / 1048576.0,
			(double)events / 1e6, secs);
	} else {
		/* Compressed files: their unpacked size is not known up front. */
		fprintf(stderr, "\r%.1f MiB of pages  %.2f M events  %.1f s ", (double)done / 1048576.0,
			(double)events / 1e6, secs);
	}
	fflush(stderr);
}

/* below: which pages did not parse */
static void pages_detail(const struct convert_summary *s);

static void print_summary(const struct convert_summary *s, const char *in, const char *out)
{
	uint64_t lost_pages = 0, lost_events = 0, skipped = 0;
	bool lost_unknown = false;

	fprintf(stderr, "%s: trace.dat v%u, clock %s, %u CPU(s), %u-byte pages, %u buffer(s)\n", in,
		s->file_version, s->trace_clock, s->n_cpus, s->page_size, s->n_buffers);
	fprintf(stderr, "  cpu      events     pages  lost pages  lost events  errors\n");
	for (unsigned i = 0; i < s->n_cpus; i++) {
		const struct convert_cpu_summary *c = &s->cpu[i];

		fprintf(stderr, "  %3u  %10llu  %8llu  %10llu  %11llu%s %6llu\n", i,
			(unsigned long long)c->events, (unsigned long long)c->pages,
			(unsigned long long)c->lost_pages, (unsigned long long)c->lost_events,
			c->lost_unknown ? "+" : " ", (unsigned long long)c->parse_errors);
		lost_pages += c->lost_pages;
		lost_events += c->lost_events;
		lost_unknown |= c->lost_unknown;
		skipped += c->skipped_pages;
	}
	fprintf(stderr, "  %llu events, %.1f MiB of pages -> %s: %.1f MiB, %llu packets, "
			"%llu thread names, %llu kernel symbols\n",
		(unsigned long long)s->events, (double)s->bytes_in / 1048576.0, out,
		(double)s->bytes_out / 1048576.0, (unsigned long long)s->packets,
		(unsigned long long)s->threads, (unsigned long long)s->symbols);
	if (lost_pages > 0)
		fprintf(stderr, "  the kernel lost events on %llu page(s): %llu counted%s\n",
			(unsigned long long)lost_pages, (unsigned long long)lost_events,
			lost_unknown ? ", more not counted (+)" : "");
	if (skipped > 0)
		fprintf(stderr, "  %llu page(s) held no event libtracecmd could read\n",
			(unsigned long long)skipped);
	if (s->bad_pages > 0)
		pages_detail(s);
	if (s->ts_shifted)
		fprintf(stderr, "  the file's time offsets were applied\n");
}

/* Which pages did not parse: CPU, place in its data, file offset. */
static void pages_detail(const struct convert_summary *s)
{
	uint64_t refused = 0, cut = 0;

	for (unsigned i = 0; i < s->n_cpus; i++) {
		refused += s->cpu[i].refused_pages;
		cut += s->cpu[i].cut_pages;
	}
	fprintf(stderr, "  %llu page(s) did not parse: %llu refused whole (bad header), %llu cut "
			"short at a bad record (the rest of the page dropped)\n",
		(unsigned long long)s->bad_pages, (unsigned long long)refused,
		(unsigned long long)cut);
	for (unsigned i = 0; i < s->n_bad_listed; i++) {
		const struct convert_bad_page *b = &s->bad[i];
		char off[40] = "offset not known (compressed)";

		if (b->offset >= 0)
			(void)snprintf(off, sizeof(off), "file offset %lld", (long long)b->offset);
		fprintf(stderr, "    buffer %u cpu %u page %llu (%s): %s\n", b->buffer, b->cpu,
			(unsigned long long)b->index, off, b->refused ? "refused" : "cut short");
	}
	if (s->bad_pages > s->n_bad_listed)
		fprintf(stderr, "    and %llu more\n",
			(unsigned long long)(s->bad_pages - s->n_bad_listed));
}

static void errors_detail(const struct convert_summary *s)
{
	for (int st = 0; st < _FTRACE_STATUS_MAX; st++)
		if (s->parse_errors_mask & (1u << st))
			log_error("Pages that do not parse: %s", ftrace_parse_status_to_string(st));
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: traced-probes convert IN.dat -o OUT.pftrace [options]\n"
		"Convert a trace-cmd recording (trace.dat, versions 6 and 7) into a Perfetto trace.\n\n"
		"  -o, --output FILE        where to write the trace ('-': standard output)\n"
		"      --compact-sched      columnar sched_switch/sched_waking (the default)\n"
		"      --no-compact-sched   one message per sched event\n"
		"  -q, --quiet              no progress or summary\n"
		"  -h, --help\n"
		"IN.dat may be '-' for standard input.\n");
}

/* A pipe on stdin: libtracecmd needs to seek, so it goes to a file first. */
static int spool_stdin(int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	const char *dir = getenv("TMPDIR");
	uint8_t buf[1 << 16];
	struct stat st;

	if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
		*ret_fd = -EBADF;
		return 0;
	}
	fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		r = write_all(fd, buf, (size_t)n);
		if (r < 0)
			return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int convert_main(int argc, char **argv)
{
	enum { OPT_COMPACT = 256, OPT_NO_COMPACT };
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "compact-sched", no_argument, NULL, OPT_COMPACT },
		{ "no-compact-sched", no_argument, NULL, OPT_NO_COMPACT },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct convert_opts o = CONVERT_OPTS_DEFAULT;
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ char *tmp_path = NULL;
	_cleanup_close_ int spool_fd = -EBADF, out_fd = -EBADF;
	struct progress pr = {};
	const char *in = NULL, *out = NULL, *in_path;
	char fd_path[64];
	bool quiet = false, to_stdout;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:qh", longopts, NULL)) >= 0) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case OPT_COMPACT:
			o.compact_sched = true;
			break;
		case OPT_NO_COMPACT:
			o.compact_sched = false;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		in = argv[optind++];
	if (optind < argc) {
		log_error("Unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (!in || !out) {
		log_error(!in ? "No input file (IN.dat)" : "No output file (-o OUT.pftrace)");
		usage(stderr);
		return 2;
	}

	in_path = in;
	if (strcmp(in, "-") == 0) {
		r = spool_stdin(&spool_fd);
		if (r < 0)
			return log_error_errno(r, "Failed to read standard input: %m"), 1;
		(void)snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d",
			       spool_fd >= 0 ? spool_fd : STDIN_FILENO);
		in_path = fd_path;
	} else if (access(in, R_OK) < 0) {
		return log_error_errno(-errno, "Cannot read '%s': %m", in), 1;
	}

	to_stdout = strcmp(out, "-") == 0;
	if (to_stdout) {
		out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	} else if ((r = open_output_in_place(out)) != -ENOTSUP) {
		/* a device or a FIFO (-o /dev/null): no temporary name, no rename */
		out_fd = r;
		if (out_fd < 0)
			errno = -r;
	} else {
		/* Written under a temporary name, renamed only when complete. */
		if (asprintf(&tmp_path, "%s.tmp-XXXXXX", out) < 0)
			return log_error("Out of memory"), 1;
		out_fd = mkostemp(tmp_path, O_CLOEXEC);
		if (out_fd >= 0) {
			/* mkostemp() makes it 0600; a trace is as readable as any new file. */
			mode_t mask = umask(0);

			(void)umask(mask);
			(void)fchmod(out_fd, 0666 & ~mask);
		}
	}
	if (out_fd < 0)
		return log_error_errno(-errno, "Cannot create '%s': %m", out), 1;

	if (!quiet && isatty(STDERR_FILENO)) {
		pr.start_ns = now_ns(CLOCK_MONOTONIC);
		o.progress = progress_cb;
		o.progress_ctx = &pr;
	}
	/* libtracecmd's own messages would repeat ours, less precisely. */
	tracecmd_set_loglevel(TEP_LOG_NONE);
	r = convert_file_isolated(in_path, out_fd, &o, &sum);
	if (pr.shown)
		fputc('\n', stderr);
	if (r == -EBADMSG && sum && sum->reason[0]) {
		/* The reader itself gave up: nothing complete was written. */
	} else if (r == -EBADMSG) {
		goto converted;
	}
	if (r < 0) {
		if (tmp_path)
			(void)unlink(tmp_path);
		if (r == -EBADMSG)
			log_error("Cannot convert '%s': %s", in, sum ? sum->reason : "damaged file");
		else if (r == -ENODATA)
			log_error("'%s' is not a trace.dat file libtracecmd can read", in);
		else if (sum && sum->reason[0])
			log_error("Cannot convert '%s': %s", in, sum->reason);
		else
			log_error_errno(r, "Cannot convert '%s': %m", in);
		return 1;
	}
converted:
	if (tmp_path) {
		if (fsync(out_fd) < 0 || rename(tmp_path, out) < 0) {
			r = -errno;
			(void)unlink(tmp_path);
			return log_error_errno(r, "Cannot write '%s': %m", out), 1;
		}
	}
	if (!quiet)
		print_summary(sum, in, to_stdout ? "stdout" : out);
	if (r == -EBADMSG) {
		errors_detail(sum);
		log_error("%llu page error(s) in '%s': written as FtraceEventBundle.error entries",
			  (unsigned long long)sum->parse_errors, in);
		return 1;
	}
	return 0;
}
