/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_drain - what the drain+encode path costs per event, on real pages,
 * beside the floor of merely walking them.
 *
 *   bench_drain [-d SECONDS] [-w PAIRS] [-r REPS] [--save FILE | --load FILE]
 *               [--only floor|kbuffer|compact|plain|scale] [--rows] [--digest]
 *
 * Records ~2 s of sched_switch/sched_waking pages from a tracefs instance
 * of its own (tp-bench-<pid>, removed at exit) while a pipe ping-pong
 * workload runs, then replays those same pages through
 *   - the floor: a hand-written walk of every record (bench_walk.h),
 *   - libtraceevent's kbuffer walk,
 *   - ftrace_parser_parse_pages() into an SMB, compact_sched on and off,
 *     recycling chunks after every batch as the service would,
 * and finally the compact replay as if the pages came from 64 and 256 CPUs.
 * Times are CLOCK_PROCESS_CPUTIME_ID: each pass (or 256 pages) of the
 * replay takes its best of REPS runs (default 10), and those are summed.
 * --load replays a saved capture and needs neither root nor tracefs (for
 * exact repeatability, and for profilers).  --digest prints, instead of
 * timings, a hash of every byte the parser writes for the capture (compact
 * and plain, through a plain buffer): equal digests before and after a
 * change of the encoder mean identical output on all of the capture's
 * events.  Not a test: asserts nothing.
 */
#include <errno.h>
#include <getopt.h>
#include <kbuffer.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_capture.h"
#include "bench/bench_walk.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/pbw.h"
#include "smb/smb.h"
#include "util/util.h"

/* As the daemon: 32 pages per parse call, pidsets of 32768 (ftrace_ds_internal.h). */
#define BATCH_PAGES 32u
#define PIDSET_CAPACITY 32768u
#define SMB_SIZE (2u << 20)
#define SMB_PAGE (32u << 10)

static volatile sig_atomic_t arg_stop;
static double arg_seconds = 2.0;
static unsigned arg_pairs = 2;
static unsigned arg_reps = 10;
static const char *arg_save;
static const char *arg_load;
static const char *arg_only;
static bool arg_rows;
static bool arg_digest;

/* One ftrace_parser_parse_pages() call of a replay. */
struct call {
	uint32_t cpu;
	uint32_t n;
	uint64_t first;
	bool end_of_pass;       /* the daemon clears the pidset here */
};

struct layout {
	const uint8_t *pages;
	uint8_t *owned;
	struct call *calls;
	size_t n_calls;
	unsigned n_cpus;
};

static void layout_done(struct layout *l)
{
	free(l->owned);
	free(l->calls);
	*l = (struct layout){};
}

static int push_calls(struct layout *l, size_t *cap, uint32_t cpu, uint64_t first, uint64_t n)
{
	for (uint64_t done = 0; done < n;) {
		uint32_t k = (uint32_t)MIN(n - done, (uint64_t)BATCH_PAGES);

		if (l->n_calls == *cap) {
			size_t ncap = *cap ? *cap * 2 : 1024;
			struct call *c = realloc(l->calls, ncap * sizeof(*c));

			if (!c)
				return -ENOMEM;
			l->calls = c;
			*cap = ncap;
		}
		l->calls[l->n_calls++] = (struct call){ .cpu = cpu, .n = k, .first = first + done };
		done += k;
	}
	return 0;
}

/* The pages as they were read: per CPU, per drain pass. */
static int layout_native(const struct bench_capture *c, struct layout *l)
{
	size_t cap = 0;
	int r;

	*l = (struct layout){ .pages = c->pages, .n_cpus = c->n_cpus };
	for (uint64_t i = 0; i < c->n_runs; i++) {
		r = push_calls(l, &cap, c->runs[i].cpu, c->runs[i].first, c->runs[i].n);
		if (r < 0)
			return r;
		if (l->n_calls && (i + 1 == c->n_runs || c->runs[i + 1].pass != c->runs[i].pass))
			l->calls[l->n_calls - 1].end_of_pass = true;
	}
	return 0;
}

/*
 * The same pages dealt round-robin to @n_cpus CPUs within each pass: the
 * same events, but in many small per-CPU batches, as a big machine would
 * drain them.
 */
static int layout_spread(const struct bench_capture *c, unsigned n_cpus, struct layout *l)
{
	size_t cap = 0, ps = c->page_size;
	uint64_t out = 0;
	int r;

	*l = (struct layout){ .n_cpus = n_cpus };
	l->owned = malloc(MAX(c->n_pages, 1u) * ps);
	if (!l->owned)
		return -ENOMEM;
	l->pages = l->owned;
	for (uint64_t i = 0; i < c->n_runs;) {
		uint64_t j = i, first, n_pass = 0;

		while (j < c->n_runs && c->runs[j].pass == c->runs[i].pass)
			n_pass += c->runs[j++].n;
		first = c->runs[i].first;   /* runs of a pass are contiguous */
		for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
			uint64_t start = out;

			for (uint64_t k = cpu; k < n_pass; k += n_cpus)
				memcpy(l->owned + (out++) * ps, c->pages + (first + k) * ps, ps);
			r = push_calls(l, &cap, cpu, start, out - start);
			if (r < 0)
				return r;
		}
		if (l->n_calls)
			l->calls[l->n_calls - 1].end_of_pass = true;
		i = j;
	}
	return 0;
}

/* ---- timing --------------------------------------------------------------- */

/*
 * CPU time per segment of the replay, keeping each segment's minimum over
 * the repetitions: on a shared machine a preemption or a noisy neighbour
 * then spoils one segment of one repetition, not the whole figure.
 */
struct seg_timer {
	uint64_t *min;
	size_t n, cur;
	uint64_t t0;
};

static int seg_timer_init(struct seg_timer *s, size_t n)
{
	*s = (struct seg_timer){ .n = n };
	s->min = malloc(MAX(n, 1u) * sizeof(*s->min));
	if (!s->min)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		s->min[i] = UINT64_MAX;
	return 0;
}

static void seg_begin(struct seg_timer *s)
{
	s->cur = 0;
	s->t0 = bench_process_cpu_ns();
}

static void seg_mark(struct seg_timer *s)
{
	uint64_t t = bench_process_cpu_ns();

	if (s->cur < s->n && t - s->t0 < s->min[s->cur])
		s->min[s->cur] = t - s->t0;
	s->cur++;
	s->t0 = t;
}

static uint64_t seg_total_done(struct seg_timer *s)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < s->n; i++)
		sum += s->min[i] == UINT64_MAX ? 0 : s->min[i];
	free(s->min);
	s->min = NULL;
	return sum;
}

/* ---- floor and kbuffer ---------------------------------------------------- */

#define WALK_SEGMENT_PAGES 256u

struct walk_result {
	uint64_t best_ns;
	struct bench_walk w;
};

static int replay_floor(const struct bench_capture *c, unsigned commit_size,
			struct walk_result *ret)
{
	struct seg_timer seg;
	int r;

	*ret = (struct walk_result){};
	r = seg_timer_init(&seg, (c->n_pages + WALK_SEGMENT_PAGES - 1) / WALK_SEGMENT_PAGES);
	if (r < 0)
		return r;
	for (unsigned rep = 0; rep < arg_reps; rep++) {
		struct bench_walk w = {};

		seg_begin(&seg);
		for (uint64_t i = 0; i < c->n_pages; i++) {
			bench_walk_page(c->pages + i * c->page_size, c->page_size, commit_size, &w);
			if ((i + 1) % WALK_SEGMENT_PAGES == 0 || i + 1 == c->n_pages)
				seg_mark(&seg);
		}
		ret->w = w;
	}
	ret->best_ns = seg_total_done(&seg);
	return 0;
}

static int replay_kbuffer(const struct bench_capture *c, unsigned commit_size,
			  struct walk_result *ret)
{
	struct kbuffer *kb = kbuffer_alloc(commit_size == 8 ? KBUFFER_LSIZE_8 : KBUFFER_LSIZE_4,
					   KBUFFER_ENDIAN_LITTLE);
	struct seg_timer seg;
	int r;

	if (!kb)
		return -ENOMEM;
	*ret = (struct walk_result){};
	r = seg_timer_init(&seg, (c->n_pages + WALK_SEGMENT_PAGES - 1) / WALK_SEGMENT_PAGES);
	if (r < 0) {
		kbuffer_free(kb);
		return r;
	}
	for (unsigned rep = 0; rep < arg_reps; rep++) {
		struct bench_walk w = {};

		seg_begin(&seg);
		for (uint64_t i = 0; i < c->n_pages; i++) {
			unsigned long long ts;
			const uint8_t *d;

			if (kbuffer_load_subbuffer(kb, c->pages + i * c->page_size) >= 0) {
				w.pages++;
				for (d = kbuffer_read_event(kb, &ts); d; d = kbuffer_next_event(kb, &ts)) {
					w.records++;
					w.sink += ts ^ (uint64_t)(d[0] | (d[1] << 8));
				}
			}
			if ((i + 1) % WALK_SEGMENT_PAGES == 0 || i + 1 == c->n_pages)
				seg_mark(&seg);
		}
		ret->w = w;
	}
	ret->best_ns = seg_total_done(&seg);
	kbuffer_free(kb);
	return 0;
}

/* ---- ours ----------------------------------------------------------------- */

struct parse_result {
	uint64_t best_ns;
	struct ftrace_pass_stats st;
	uint64_t bytes;
	uint64_t chunks;
	uint64_t commits;
	bool compact_active;
};

struct ids {
	int sched_switch, sched_waking;
};

/* A parser for sched_switch + sched_waking, as the benchmarks record them. */
static int sched_parser_new(struct ftrace_format_table *t, const struct ftrace_parser_opts *o,
			    const struct ids *ids, struct ftrace_parser **ret)
{
	struct ftrace_parser *p = NULL;
	int r = ftrace_parser_new(t, o, &p);

	if (r >= 0)
		r = ftrace_parser_enable(p, ids->sched_switch);
	if (r >= 0)
		r = ftrace_parser_enable(p, ids->sched_waking);
	if (r < 0) {
		ftrace_parser_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

/* What a service does with a commit in shmem emulation: free the chunks. */
static void recycle(struct smb *smb, uint64_t *chunks, uint64_t *commits)
{
	struct smb_commit cm;

	if (!smb_take_commit(smb, &cm))
		return;
	(*commits)++;
	*chunks += cm.n_moves;
	for (size_t i = 0; i < cm.n_moves; i++)
		smb_chunk_release_local(smb, cm.moves[i].page, cm.moves[i].chunk);
}

/* Not inlined: profilers can collect just this (--toggle-collect=replay_parser). */
static __attribute__((noinline)) int replay_parser(struct ftrace_format_table *t, const struct ids *ids,
			 const struct layout *l, size_t page_size, bool compact,
			 struct parse_result *ret)
{
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;
	struct ftrace_parser *p = NULL;
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state *states = NULL;
	struct smb_writer *w = NULL;
	struct pbw_sink sink;
	struct smb *smb = NULL;
	struct seg_timer seg = {};
	size_t n_seg = 0;
	void *mem = NULL;
	int r;

	*ret = (struct parse_result){};
	o.compact_sched = compact;
	mem = aligned_alloc(4096, SMB_SIZE);
	states = calloc(l->n_cpus, sizeof(*states));
	if (!mem || !states) {
		r = -ENOMEM;
		goto out;
	}
	memset(mem, 0, SMB_SIZE);
	r = smb_new(mem, SMB_SIZE, SMB_PAGE, &smb);
	if (r >= 0)
		r = smb_writer_new(smb, 1, 0, &w);
	if (r >= 0)
		r = ftrace_pidset_new(PIDSET_CAPACITY, &pids);
	if (r >= 0)
		r = sched_parser_new(t, &o, ids, &p);
	if (r < 0)
		goto out;
	sink = smb_writer_sink(w);
	ret->compact_active = ftrace_parser_compact_sched_active(p);
	for (size_t i = 0; i < l->n_calls; i++)
		n_seg += l->calls[i].end_of_pass;
	r = seg_timer_init(&seg, n_seg);
	if (r < 0)
		goto out;

	for (unsigned rep = 0; rep < arg_reps; rep++) {
		struct ftrace_pass_stats st = {};
		struct smb_writer_stats ws0, ws1;
		uint64_t chunks = 0, commits = 0;

		memset(states, 0, l->n_cpus * sizeof(*states));
		smb_writer_get_stats(w, &ws0);
		seg_begin(&seg);
		for (size_t i = 0; i < l->n_calls; i++) {
			const struct call *cl = &l->calls[i];

			(void)ftrace_parser_parse_pages(p, cl->cpu, l->pages + cl->first * page_size,
							cl->n, page_size, &sink, &states[cl->cpu],
							pids, &st);
			recycle(smb, &chunks, &commits);
			if (cl->end_of_pass) {
				ftrace_pidset_clear(pids);
				seg_mark(&seg);
			}
		}
		smb_writer_get_stats(w, &ws1);
		ret->st = st;
		ret->bytes = ws1.bytes_written - ws0.bytes_written;
		ret->chunks = chunks;
		ret->commits = commits;
	}
	ret->best_ns = seg_total_done(&seg);
out:
	w = smb_writer_free(w);
	smb = smb_free(smb);
	p = ftrace_parser_free(p);
	pids = ftrace_pidset_free(pids);
	free(seg.min);
	free(states);
	free(mem);
	return r;
}

/* ---- digest of the output ------------------------------------------------- */

#define DIGEST_SINK_SIZE (64u << 20)

struct digest_sink {
	struct pbw w;
	uint8_t *buf;
	uint64_t hash;
	uint64_t bytes;
};

static struct pbw *digest_begin(void *ctx)
{
	struct digest_sink *d = ctx;

	pbw_init(&d->w, d->buf, DIGEST_SINK_SIZE, NULL, NULL);
	return &d->w;
}

/* FNV-1a over each packet, chained: slow per byte, but independent of us. */
static int digest_end(void *ctx)
{
	struct digest_sink *d = ctx;
	size_t n = (size_t)(d->w.cur - d->buf);

	if (pbw_overflowed(&d->w))
		return -ENOSPC;
	for (size_t i = 0; i < n; i++)
		d->hash = (d->hash ^ d->buf[i]) * 0x100000001b3ull;
	d->hash = (d->hash ^ n) * 0x100000001b3ull;
	d->bytes += n;
	return 0;
}

static int digest_parser(struct ftrace_format_table *t, const struct ids *ids,
			 const struct layout *l, size_t page_size, bool compact)
{
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;
	struct digest_sink d = { .hash = 0xcbf29ce484222325ull };
	const struct pbw_sink sink = { .begin_packet = digest_begin, .end_packet = digest_end,
				       .userdata = &d };
	struct ftrace_parser *p = NULL;
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state *states = NULL;
	struct ftrace_pass_stats st = {};
	uint64_t pid_hash = 0xcbf29ce484222325ull;
	int r;

	o.compact_sched = compact;
	d.buf = malloc(DIGEST_SINK_SIZE);
	states = calloc(l->n_cpus, sizeof(*states));
	r = d.buf && states ? 0 : -ENOMEM;
	if (r >= 0)
		r = ftrace_pidset_new(PIDSET_CAPACITY, &pids);
	if (r >= 0)
		r = sched_parser_new(t, &o, ids, &p);
	for (size_t i = 0; r >= 0 && i < l->n_calls; i++) {
		const struct call *cl = &l->calls[i];

		r = ftrace_parser_parse_pages(p, cl->cpu, l->pages + cl->first * page_size, cl->n,
					      page_size, &sink, &states[cl->cpu], pids, &st);
		if (cl->end_of_pass) {
			const int32_t *v;
			size_t n = ftrace_pidset_pids(pids, &v);

			/* The /proc join sees the pids in this order. */
			for (size_t k = 0; k < n; k++)
				pid_hash = (pid_hash ^ (uint32_t)v[k]) * 0x100000001b3ull;
			pid_hash = (pid_hash ^ n) * 0x100000001b3ull;
			ftrace_pidset_clear(pids);
		}
	}
	if (r >= 0)
		printf("digest %s: output %016llx (%llu bytes, %llu packets, %llu events), pids %016llx\n",
		       compact ? "compact" : "plain", (unsigned long long)d.hash,
		       (unsigned long long)d.bytes, (unsigned long long)st.packets,
		       (unsigned long long)st.events, (unsigned long long)pid_hash);
	ftrace_parser_free(p);
	ftrace_pidset_free(pids);
	free(states);
	free(d.buf);
	return r < 0 ? r : 0;
}

/* ---- capture -------------------------------------------------------------- */

static int table_from_capture(const struct bench_capture *c, struct ftrace_format_table **ret_t,
			      struct ids *ret_ids)
{
	struct ftrace_format_table *t = NULL;
	int r;

	r = ftrace_format_table_new_from_text(c->header_page, &t);
	if (r >= 0)
		r = ftrace_format_table_add_format(t, "sched", "sched_switch", c->fmt_switch,
						   &ret_ids->sched_switch);
	if (r >= 0)
		r = ftrace_format_table_add_format(t, "sched", "sched_waking", c->fmt_waking,
						   &ret_ids->sched_waking);
	if (r < 0) {
		ftrace_format_table_free(t);
		return r;
	}
	*ret_t = t;
	return 0;
}

/*
 * Record in an instance of our own.  The format table is read from the
 * instance directory while it still exists, as the daemon reads it.
 */
static int capture_live(struct bench_capture **ret_c, struct ftrace_format_table **ret_t,
			struct ids *ret_ids)
{
	char name[64], dir[PATH_MAX];
	struct ftrace_format_table *t = NULL;
	int r;

	(void)snprintf(name, sizeof(name), "tp-bench-%d", (int)getpid());
	r = bench_instance_create(name, dir, sizeof(dir));
	if (r < 0)
		return log_error_errno(r, "Cannot create instance %s: %m", name);
	r = ftrace_format_table_new(dir, &t);
	if (r >= 0)
		r = ftrace_format_table_load_event(t, "sched", "sched_switch", &ret_ids->sched_switch);
	if (r >= 0)
		r = ftrace_format_table_load_event(t, "sched", "sched_waking", &ret_ids->sched_waking);
	if (r < 0) {
		log_error_errno(r, "Cannot load the sched formats from %s: %m", dir);
	} else {
		const struct bench_capture_opts o = {
			.instance_dir = dir,
			.pairs = arg_pairs,
			.duration_ns = (uint64_t)(arg_seconds * 1e9),
			.max_pages = 65536,     /* 256 MiB of 4 KiB pages */
			.buffer_kb = 16384,
			.period_ms = 100,
			.stop = &arg_stop,
		};

		r = bench_capture_record(&o, ret_c);
		if (r < 0)
			log_error_errno(r, "Capture failed: %m");
	}
	if (bench_instance_remove(name) < 0)
		log_warning("Could not remove %s", dir);
	if (r < 0) {
		ftrace_format_table_free(t);
		return r;
	}
	*ret_t = t;
	return 0;
}

/* ---- main ----------------------------------------------------------------- */

static bool want(const char *what)
{
	return !arg_only || strcmp(arg_only, what) == 0;
}

static void on_signal(int sig)
{
	arg_stop = 1;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "duration", required_argument, NULL, 'd' },
		{ "pairs", required_argument, NULL, 'w' },
		{ "reps", required_argument, NULL, 'r' },
		{ "save", required_argument, NULL, 'S' },
		{ "load", required_argument, NULL, 'L' },
		{ "only", required_argument, NULL, 'O' },
		{ "rows", no_argument, NULL, 'R' },
		{ "digest", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int c;

	while ((c = getopt_long(argc, argv, "d:w:r:h", opts, NULL)) >= 0) {
		switch (c) {
		case 'd':
			arg_seconds = strtod(optarg, NULL);
			if (!(arg_seconds > 0 && arg_seconds <= 60))
				return log_error_errno(-EINVAL, "Bad duration: %s", optarg);
			break;
		case 'w':
			if (safe_atou32(optarg, &arg_pairs) < 0 || arg_pairs == 0 || arg_pairs > 64)
				return log_error_errno(-EINVAL, "Bad pair count: %s", optarg);
			break;
		case 'r':
			if (safe_atou32(optarg, &arg_reps) < 0 || arg_reps == 0 || arg_reps > 1000)
				return log_error_errno(-EINVAL, "Bad repetition count: %s", optarg);
			break;
		case 'S':
			arg_save = optarg;
			break;
		case 'L':
			arg_load = optarg;
			break;
		case 'O':
			arg_only = optarg;
			break;
		case 'R':
			arg_rows = true;
			break;
		case 'D':
			arg_digest = true;
			break;
		case 'h':
			printf("Usage: %s [-d SECONDS] [-w PAIRS] [-r REPS] [--save FILE | --load FILE]\n"
			       "       [--only floor|kbuffer|compact|plain|scale] [--rows] [--digest]\n",
			       argv[0]);
			return 0;
		default:
			return -EINVAL;
		}
	}
	return 1;
}

static void print_walk_row(const char *what, const struct walk_result *res, size_t page_size)
{
	struct bench_row row = BENCH_ROW_EMPTY(what);

	if (res->w.records == 0)
		return;
	row.ns_per_event = (double)res->best_ns / (double)res->w.records;
	row.events_per_s = (double)res->w.records * 1e9 / (double)MAX(res->best_ns, 1u);
	row.bytes_per_event = (double)res->w.pages * (double)page_size / (double)res->w.records;
	row.bytes_suffix = " raw";
	bench_row_print(stdout, &row);
}

static void print_parse_row(const char *label, const struct parse_result *res, double floor_ns)
{
	char what[128];
	struct bench_row row = BENCH_ROW_EMPTY(what);
	double ns;

	if (res->st.events == 0)
		return;
	ns = (double)res->best_ns / (double)res->st.events;
	if (floor_ns > 0)
		(void)snprintf(what, sizeof(what), "%s (%.2fx floor)", label, ns / floor_ns);
	else
		(void)snprintf(what, sizeof(what), "%s", label);
	row.ns_per_event = ns;
	row.events_per_s = (double)res->st.events * 1e9 / (double)MAX(res->best_ns, 1u);
	row.bytes_per_event = (double)res->bytes / (double)res->st.events;
	bench_row_print(stdout, &row);
}

static double parse_ns(const struct parse_result *res)
{
	return res->st.events ? (double)res->best_ns / (double)res->st.events : 0;
}

int main(int argc, char **argv)
{
	struct bench_capture *c = NULL;
	struct ftrace_format_table *t = NULL;
	struct walk_result floor_res = {}, kb_res = {};
	struct parse_result compact = {}, plain = {};
	struct ids ids = {};
	struct layout native = {};
	double floor_ns = 0;
	unsigned commit_size;
	int r;

	r = parse_args(argc, argv);
	if (r <= 0)
		return r < 0 ? 2 : 0;
	(void)signal(SIGINT, on_signal);
	(void)signal(SIGTERM, on_signal);
	(void)signal(SIGHUP, on_signal);

	if (arg_load) {
		r = bench_capture_load(arg_load, &c);
		if (r < 0) {
			log_error_errno(r, "Cannot load %s: %m", arg_load);
			return 1;
		}
		r = table_from_capture(c, &t, &ids);
		if (r < 0) {
			log_error_errno(r, "The formats saved in %s do not parse: %m", arg_load);
			goto out;
		}
	} else {
		r = bench_tracefs_ready();
		if (r < 0) {
			fprintf(stderr, "bench_drain: needs root and tracefs at %s (%s); skipped\n",
				BENCH_TRACEFS, strerror(-r));
			return BENCH_EXIT_SKIP;
		}
		r = capture_live(&c, &t, &ids);
		if (r < 0)
			goto out;
		if (arg_save) {
			r = bench_capture_save(c, arg_save);
			if (r < 0)
				log_warning_errno(r, "Cannot save the capture to %s: %m", arg_save);
		}
	}
	if (c->n_pages == 0) {
		log_error("The capture is empty");
		r = -ENODATA;
		goto out;
	}
	commit_size = ftrace_format_table_commit_size(t);
	r = layout_native(c, &native);
	if (r < 0)
		goto out;
	if (arg_digest) {
		r = digest_parser(t, &ids, &native, c->page_size, true);
		if (r >= 0)
			r = digest_parser(t, &ids, &native, c->page_size, false);
		if (r < 0)
			log_error_errno(r, "Digest failed: %m");
		goto out;
	}

	if (!arg_rows)
		bench_table_header(stdout);
	if (!arg_only || want("floor")) {
		r = replay_floor(c, commit_size, &floor_res);
		if (r < 0)
			goto out;
		floor_ns = floor_res.w.records ? (double)floor_res.best_ns / (double)floor_res.w.records : 0;
	}
	if (want("floor"))
		print_walk_row("floor (walk only), replay", &floor_res, c->page_size);
	if (want("kbuffer")) {
		r = replay_kbuffer(c, commit_size, &kb_res);
		if (r >= 0)
			print_walk_row("kbuffer walk, replay", &kb_res, c->page_size);
	}
	if (want("compact") || want("scale")) {
		r = replay_parser(t, &ids, &native, c->page_size, true, &compact);
		if (r < 0)
			log_error_errno(r, "Replay (compact) failed: %m");
		else if (want("compact"))
			print_parse_row("traced-probes replay, compact", &compact, floor_ns);
	}
	if (want("plain")) {
		r = replay_parser(t, &ids, &native, c->page_size, false, &plain);
		if (r < 0)
			log_error_errno(r, "Replay (plain) failed: %m");
		else
			print_parse_row("traced-probes replay, plain", &plain, floor_ns);
	}

	{
		double secs = (double)c->duration_ns / 1e9;
		uint64_t records = floor_res.w.records ? floor_res.w.records : compact.st.records;

		bench_note(stdout, "replay: %llu pages (%.1f MiB) read from %u CPUs in %.2f s while %u"
			   " ping-pong pairs ran (%.0f round trips/s); %llu records; kernel overruns"
			   " during the capture: %llu%s",
			   (unsigned long long)c->n_pages,
			   (double)c->n_pages * c->page_size / (1 << 20), c->n_cpus, secs, arg_pairs,
			   secs > 0 ? (double)c->trips / secs : 0, (unsigned long long)records,
			   (unsigned long long)c->overruns,
			   c->truncated ? " (stopped early at the page cap)" : "");
		bench_note(stdout, "replay figures: CPU time of the replaying process, each segment's"
			   " best of %u runs, summed; events/s per CPU-second; \"raw\" bytes are"
			   " ring-buffer pages per record", arg_reps);
		if (compact.st.events && want("compact"))
			bench_note(stdout, "replay compact: %llu bundles, %llu SMB chunks of %u KiB"
				   " (%.0f chunks per second of trace), compact_sched %s",
				   (unsigned long long)compact.st.packets,
				   (unsigned long long)compact.chunks, SMB_PAGE >> 10,
				   secs > 0 ? (double)compact.chunks / secs : 0,
				   compact.compact_active ? "active" : "NOT active");
		if (plain.st.events)
			bench_note(stdout, "replay plain: %llu bundles, %llu SMB chunks (%.0f per second"
				   " of trace)", (unsigned long long)plain.st.packets,
				   (unsigned long long)plain.chunks,
				   secs > 0 ? (double)plain.chunks / secs : 0);
		if (compact.st.parse_errors || plain.st.parse_errors)
			bench_note(stdout, "parse errors: compact %llu, plain %llu (mask 0x%x)",
				   (unsigned long long)compact.st.parse_errors,
				   (unsigned long long)plain.st.parse_errors,
				   compact.st.parse_errors_mask | plain.st.parse_errors_mask);
	}

	if (want("scale") && compact.st.events) {
		static const unsigned fake[] = { 64, 256 };
		char line[512];
		int n = snprintf(line, sizeof(line), "scale (compact replay, same pages): %u CPUs"
				 " %.1f ns/event in %llu calls", c->n_cpus, parse_ns(&compact),
				 (unsigned long long)native.n_calls);

		for (size_t i = 0; i < ARRAY_SIZE(fake) && n > 0 && (size_t)n < sizeof(line); i++) {
			struct layout spread = {};
			struct parse_result res = {};

			r = layout_spread(c, fake[i], &spread);
			if (r >= 0)
				r = replay_parser(t, &ids, &spread, c->page_size, true, &res);
			if (r >= 0)
				n += snprintf(line + n, sizeof(line) - (size_t)n,
					      "; %u CPUs %.1f ns/event (%.2fx) in %zu calls,"
					      " %.2f bytes/event", fake[i], parse_ns(&res),
					      parse_ns(&res) / parse_ns(&compact), spread.n_calls,
					      res.st.events ? (double)res.bytes / res.st.events : 0);
			layout_done(&spread);
		}
		bench_note(stdout, "%s", line);
	}
	r = 0;
out:
	layout_done(&native);
	ftrace_format_table_free(t);
	bench_capture_free(c);
	return r < 0 ? 1 : 0;
}
