/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Golden bytes of the drain path: real ring-buffer pages recorded on this
 * project's test kernel (tests/data/ftrace-golden/, made with
 * bench/bench_fixture: 16 pages from each of 2 CPUs, the first of each
 * flagged with missed events, a typed/generic mix of sched, task and irq
 * events) parsed with several session setups, byte for byte against the
 * committed outputs.  Any change to the encoder that changes one byte of
 * what a session writes fails here; the outputs are also decoded with
 * protobuf-c once and checked against an independent count of the records
 * in the pages, so the goldens themselves are known to be sane.  The same
 * sessions also write through a real SMB writer with small chunks (every
 * compact column then meets chunk ends) and must deliver the same packets.
 *
 * To regenerate after an intended change of the output:
 *   TP_GOLDEN_REGEN=1 meson test -C BUILD test_ftrace_golden
 * (then review the diff of the .meta.expected files and commit).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "smb/smb.h"
#include "tests/lib/ftrace_fixtures.h"
#include "util/util.h"

#define GOLDEN_DIR "tests/data/ftrace-golden"
#define GOLDEN_CPUS 2u
#define GOLDEN_PAGE 4096u
#define GOLDEN_SINK (8u << 20)

static const char *const all_events[] = {
	"sched/sched_switch", "sched/sched_waking", "sched/sched_wakeup_new",
	"sched/sched_process_fork", "sched/sched_process_exec", "sched/sched_process_exit",
	"sched/sched_process_free", "sched/sched_migrate_task", "sched/sched_stat_runtime",
	"sched/sched_wake_idle_without_ipi", "task/task_newtask", "task/task_rename",
	"irq/softirq_entry", NULL,
};

/* Not enabled: sched_waking (compact switch alone) and most typed events. */
static const char *const some_events[] = {
	"sched/sched_switch", "sched/sched_stat_runtime", "task/task_rename",
	"sched/sched_process_exec", NULL,
};

struct golden_case {
	const char *name;
	bool compact;
	bool dense;
	const char *const *events;
	size_t batch;                   /* pages per parse call */
	enum ftrace_clock clock;        /* UNSPECIFIED: boot, no clock fields */
};

static const struct golden_case cases[] = {
	{ "compact", true, true, all_events, 5, FTRACE_CLOCK_UNSPECIFIED },
	{ "compact-whole", true, true, all_events, 16, FTRACE_CLOCK_UNSPECIFIED },
	{ "plain", false, true, all_events, 5, FTRACE_CLOCK_UNSPECIFIED },
	{ "legacy", true, false, all_events, 3, FTRACE_CLOCK_UNSPECIFIED },
	{ "subset-clock", true, true, some_events, 7, FTRACE_CLOCK_MONO_RAW },
};

struct golden_data {
	char *dir;
	uint8_t *pages[GOLDEN_CPUS];
	size_t n_pages[GOLDEN_CPUS];
};

static struct golden_data data;

static char *path_join(const char *a, const char *b)
{
	char *p = NULL;

	ck_assert_int_ge(asprintf(&p, "%s/%s", a, b), 0);
	return p;
}

static int read_file(const char *path, uint8_t **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0;
	int r;

	if (fd < 0)
		return -errno;
	r = read_full_fd(fd, 16u << 20, &buf, &len);
	if (r < 0)
		return r;
	*ret = (uint8_t *)buf;
	*ret_len = len;
	return 0;
}

static void write_file(const char *path, const void *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, buf, len), 0);
}

static void load_data(void)
{
	const char *root = getenv("TP_SOURCE_ROOT");

	data.dir = path_join(root ? root : ".", GOLDEN_DIR);
	for (unsigned cpu = 0; cpu < GOLDEN_CPUS; cpu++) {
		char name[32];
		_cleanup_free_ char *p = NULL;
		size_t len;

		(void)snprintf(name, sizeof(name), "cpu%u.pages", cpu);
		p = path_join(data.dir, name);
		ck_assert_msg(read_file(p, &data.pages[cpu], &len) == 0, "cannot read %s", p);
		ck_assert_uint_eq(len % GOLDEN_PAGE, 0);
		ck_assert_uint_gt(len, 0);
		data.n_pages[cpu] = len / GOLDEN_PAGE;
	}
}

/* ---- an independent record count (kernel ring_buffer.h layout) ---------- */

static void count_records(const uint8_t *pages, size_t n_pages, uint64_t *counts /* [65536] */)
{
	for (size_t i = 0; i < n_pages; i++) {
		const uint8_t *pg = pages + i * GOLDEN_PAGE;
		uint64_t commit;
		size_t p = 16, end;

		memcpy(&commit, pg + 8, 8);
		end = 16 + (commit & ((1u << 27) - 1));
		ck_assert_uint_le(end, GOLDEN_PAGE);
		while (p + 4 <= end) {
			uint32_t h, type_len, len;

			memcpy(&h, pg + p, 4);
			type_len = h & 31;
			p += 4;
			if (type_len == 29) {           /* padding: length word counts itself */
				memcpy(&len, pg + p, 4);
				p += len;
				continue;
			}
			if (type_len == 30 || type_len == 31) {
				p += 4;
				continue;
			}
			if (type_len == 0) {
				memcpy(&len, pg + p, 4);
				len -= 4;
				p += 4;
			} else {
				len = 4 * type_len;
			}
			ck_assert_uint_le(p + len, end);
			counts[pg[p] | (pg[p + 1] << 8)]++;
			p += len;
		}
	}
}

/* ---- running a case --------------------------------------------------------- */

struct golden_out {
	struct fx_sink s;
	char *meta;
	size_t meta_len;
	int ids[32];
	size_t n_ids;
	struct ftrace_pass_stats stats[GOLDEN_CPUS];
	uint32_t packet_cpu[4096];      /* cpu of each packet, in order */
	size_t n_packets;
};

static void dump_list(FILE *f, const char *what, const int32_t *v, size_t n)
{
	fprintf(f, "%s %zu:", what, n);
	for (size_t i = 0; i < n; i++)
		fprintf(f, " %d", v[i]);
	fputc('\n', f);
}

static void dump_stats(FILE *f, unsigned cpu, const struct ftrace_pass_stats *s)
{
	fprintf(f, "stats cpu %u: pages %llu bytes %llu records %llu events %llu generic %llu"
		" compact_switch %llu compact_waking %llu packets %llu dropped %llu lost_pages %llu"
		" lost_events %llu lost_unknown %d parse_errors %llu mask 0x%x\n", cpu,
		(unsigned long long)s->pages, (unsigned long long)s->bytes,
		(unsigned long long)s->records, (unsigned long long)s->events,
		(unsigned long long)s->generic_events, (unsigned long long)s->compact_switch,
		(unsigned long long)s->compact_waking, (unsigned long long)s->packets,
		(unsigned long long)s->packets_dropped, (unsigned long long)s->lost_pages,
		(unsigned long long)s->lost_events, s->lost_unknown,
		(unsigned long long)s->parse_errors, s->parse_errors_mask);
}

/* Where a case writes: a plain buffer (the goldens), or an SMB writer. */
struct golden_smb {
	struct smb *smb;
	struct smb_writer *w;
	struct smb_reader *rd;
	int (*cb)(const struct smb_packet *pkt, void *userdata);
	void *userdata;
	bool batch;     /* ftrace_parser_batch_*(), page by page, as the daemon */
};

/* The service's side after each call: move the committed chunks, patch, read. */
static void smb_service(struct golden_smb *gs, bool final)
{
	struct smb_commit c;

	if (smb_take_commit(gs->smb, &c)) {
		for (size_t i = 0; i < c.n_moves; i++)
			ck_assert_int_eq(smb_reader_move(gs->rd, &c.moves[i]), 0);
		for (size_t i = 0; i < c.n_patches; i++)
			ck_assert_int_eq(smb_reader_patch(gs->rd, &c.patches[i]), 0);
	}
	ck_assert_int_ge(smb_reader_read_packets(gs->rd, final, gs->cb, gs->userdata), 0);
}

static void run_case_to(const struct golden_case *gc, struct golden_out *out, struct golden_smb *gs)
{
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;
	struct ftrace_format_table *t = NULL;
	struct ftrace_parser *p = NULL;
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state st[GOLDEN_CPUS] = {};
	size_t max_pages = MAX(data.n_pages[0], data.n_pages[1]);
	FILE *meta;

	memset(out, 0, sizeof(*out));
	o.compact_sched = gc->compact;
	o.generic_dense = gc->dense;
	ck_assert_int_eq(ftrace_format_table_new(data.dir, &t), 0);
	ck_assert_int_eq(ftrace_parser_new(t, &o, &p), 0);
	for (size_t i = 0; gc->events[i]; i++) {
		char group[64], *name;

		(void)snprintf(group, sizeof(group), "%s", gc->events[i]);
		name = strchr(group, '/');
		ck_assert_ptr_nonnull(name);
		*name++ = 0;
		ck_assert_int_eq(ftrace_format_table_load_event(t, group, name, &out->ids[i]), 0);
		ck_assert_int_eq(ftrace_parser_enable(p, out->ids[i]), 0);
		out->n_ids++;
	}
	ck_assert(ftrace_parser_compact_sched_active(p) == gc->compact);
	if (gc->clock != FTRACE_CLOCK_UNSPECIFIED)
		ftrace_parser_set_clock(p, gc->clock, 123456789012345, 987654321098765);
	ck_assert_int_eq(ftrace_pidset_new(32768, &pids), 0);
	fx_sink_init(&out->s, GOLDEN_SINK);
	meta = open_memstream(&out->meta, &out->meta_len);
	ck_assert_ptr_nonnull(meta);

	/* Passes as the daemon makes them: each CPU in turn, then the /proc join. */
	for (size_t first = 0, pass = 0; first < max_pages; first += gc->batch, pass++) {
		const int32_t *v;
		size_t n;

		for (unsigned cpu = 0; cpu < GOLDEN_CPUS; cpu++) {
			size_t k = first < data.n_pages[cpu] ? MIN(gc->batch, data.n_pages[cpu] - first) : 0;
			int r;

			if (k == 0)
				continue;
			if (gs && gs->batch) {
				static uint8_t one[GOLDEN_PAGE];
				const struct pbw_sink sink = smb_writer_sink(gs->w);

				/* Each page through one buffer, scribbled over after use. */
				ck_assert_int_eq(ftrace_parser_batch_begin(p, cpu, GOLDEN_PAGE, &sink, &st[cpu],
									   pids, &out->stats[cpu]), 0);
				for (size_t i = 0; i < k; i++) {
					memcpy(one, data.pages[cpu] + (first + i) * GOLDEN_PAGE, GOLDEN_PAGE);
					ftrace_parser_batch_page(p, one);
					memset(one, 0xa5, sizeof(one));
				}
				r = ftrace_parser_batch_end(p);
				smb_service(gs, false);
			} else if (gs) {
				const struct pbw_sink sink = smb_writer_sink(gs->w);

				r = ftrace_parser_parse_pages(p, cpu, data.pages[cpu] + first * GOLDEN_PAGE,
							      k, GOLDEN_PAGE, &sink, &st[cpu], pids,
							      &out->stats[cpu]);
				smb_service(gs, false);
			} else {
				r = ftrace_parser_parse_pages(p, cpu, data.pages[cpu] + first * GOLDEN_PAGE,
							      k, GOLDEN_PAGE, &out->s.sink, &st[cpu],
							      pids, &out->stats[cpu]);
			}
			ck_assert_int_ge(r, 0);
			fprintf(meta, "pass %zu cpu %u pages %zu+%zu packets %d last_event_ts %llu\n",
				pass, cpu, first, k, r, (unsigned long long)st[cpu].last_event_ts);
			for (int i = 0; i < r; i++) {
				ck_assert_uint_lt(out->n_packets, ARRAY_SIZE(out->packet_cpu));
				out->packet_cpu[out->n_packets++] = cpu;
			}
		}
		n = ftrace_pidset_pids(pids, &v);
		dump_list(meta, "pids", v, n);
		n = ftrace_pidset_renamed(pids, &v);
		dump_list(meta, "renamed", v, n);
		fprintf(meta, "overflowed %d\n", ftrace_pidset_overflowed(pids));
		ftrace_pidset_clear(pids);
	}
	for (unsigned cpu = 0; cpu < GOLDEN_CPUS; cpu++)
		dump_stats(meta, cpu, &out->stats[cpu]);
	fprintf(meta, "bytes %zu\n", fx_sink_len(&out->s));
	ck_assert_int_eq(fclose(meta), 0);
	ck_assert(!pbw_overflowed(&out->s.w));

	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}

static void run_case(const struct golden_case *gc, struct golden_out *out)
{
	run_case_to(gc, out, NULL);
}

static void golden_out_done(struct golden_out *out)
{
	fx_sink_done(&out->s);
	free(out->meta);
}

/* Equal, or a message with the first differing offset. */
static void compare_file(const char *gname, const char *suffix, const uint8_t *got, size_t len)
{
	_cleanup_free_ char *name = NULL, *path = NULL;
	_cleanup_free_ uint8_t *want = NULL;
	size_t want_len = 0, i;

	ck_assert_int_ge(asprintf(&name, "%s.%s", gname, suffix), 0);
	path = path_join(data.dir, name);
	if (getenv("TP_GOLDEN_REGEN")) {
		write_file(path, got, len);
		fprintf(stderr, "test_ftrace_golden: wrote %s (%zu bytes)\n", path, len);
		return;
	}
	ck_assert_msg(read_file(path, &want, &want_len) == 0, "cannot read %s", path);
	for (i = 0; i < MIN(len, want_len) && got[i] == want[i]; i++)
		;
	ck_assert_msg(i == len && len == want_len,
		      "%s: output differs from the golden at byte %zu (got %zu bytes, want %zu)",
		      name, i, len, want_len);
}

/* ---- the sanity of the goldens -------------------------------------------- */

static uint64_t *record_counts(unsigned cpu)
{
	uint64_t *c = calloc(65536, sizeof(*c));

	ck_assert_ptr_nonnull(c);
	count_records(data.pages[cpu], data.n_pages[cpu], c);
	return c;
}

static int id_of(const struct golden_out *out, const struct golden_case *gc, const char *ev)
{
	for (size_t i = 0; gc->events[i]; i++)
		if (strcmp(gc->events[i], ev) == 0)
			return out->ids[i];
	return -1;
}

/* Decoded content agrees with the pages: every enabled record is an event
 * or a compact entry, in the encoding the case asks for. */
static void check_decoded(const struct golden_case *gc, const struct golden_out *out)
{
	Perfetto__Protos__Trace *tr;
	int sw = id_of(out, gc, "sched/sched_switch"), wk = id_of(out, gc, "sched/sched_waking");
	int rt = id_of(out, gc, "sched/sched_stat_runtime"), rn = id_of(out, gc, "task/task_rename");

	tr = perfetto__protos__trace__unpack(NULL, fx_sink_len(&out->s), out->s.buf);
	ck_assert_ptr_nonnull(tr);
	ck_assert_uint_eq(tr->n_packet, out->n_packets);

	for (unsigned cpu = 0; cpu < GOLDEN_CPUS; cpu++) {
		_cleanup_free_ uint64_t *want = record_counts(cpu);
		uint64_t n_sw = 0, n_wk = 0, n_events = 0, n_rename = 0, n_generic = 0, n_typed_sw = 0;
		uint64_t want_events = 0, lost = 0, last_ts = 0;

		for (size_t i = 0; i < tr->n_packet; i++) {
			const Perfetto__Protos__FtraceEventBundle *b = tr->packet[i]->ftrace_events;

			ck_assert_ptr_nonnull(b);
			if (out->packet_cpu[i] != cpu)
				continue;
			ck_assert(b->has_cpu && b->cpu == cpu);
			ck_assert_uint_eq(b->n_error, 0);
			ck_assert(b->has_previous_bundle_end_timestamp);
			ck_assert_uint_eq(b->has_ftrace_clock, gc->clock != FTRACE_CLOCK_UNSPECIFIED);
			lost += b->has_lost_events && b->lost_events;
			if (b->compact_sched) {
				const Perfetto__Protos__FtraceEventBundle__CompactSched *c = b->compact_sched;

				ck_assert(gc->compact);
				ck_assert_uint_eq(c->n_switch_next_pid, c->n_switch_timestamp);
				ck_assert_uint_eq(c->n_switch_next_comm_index, c->n_switch_timestamp);
				ck_assert_uint_eq(c->n_waking_pid, c->n_waking_timestamp);
				ck_assert_uint_eq(c->n_waking_common_flags, c->n_waking_timestamp);
				for (size_t k = 0; k < c->n_switch_next_comm_index; k++)
					ck_assert_uint_lt(c->switch_next_comm_index[k], c->n_intern_table);
				for (size_t k = 0; k < c->n_waking_comm_index; k++)
					ck_assert_uint_lt(c->waking_comm_index[k], c->n_intern_table);
				n_sw += c->n_switch_timestamp;
				n_wk += c->n_waking_timestamp;
			}
			for (size_t k = 0; k < b->n_event; k++) {
				const Perfetto__Protos__FtraceEvent *e = b->event[k];

				ck_assert(e->has_timestamp);
				ck_assert_uint_ge(e->timestamp, last_ts);
				last_ts = e->timestamp;
				n_events++;
				n_rename += e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME;
				n_typed_sw += e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH;
				if (gc->dense)
					n_generic += e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT__NOT_SET &&
						     e->base.n_unknown_fields == 1 &&
						     e->base.unknown_fields[0].tag >= 65536;
				else
					n_generic += e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC;
			}
		}
		for (size_t i = 0; gc->events[i]; i++)
			want_events += want[out->ids[i]];
		/* The first page of each CPU carries the kernel's missed-events flag. */
		ck_assert_uint_eq(lost, 1);
		ck_assert_uint_eq(out->stats[cpu].events, want_events);
		ck_assert_uint_eq(out->stats[cpu].parse_errors, 0);
		ck_assert_uint_gt(want[sw], 100);
		if (gc->compact) {
			ck_assert_uint_eq(n_sw, want[sw]);
			ck_assert_uint_eq(n_wk, wk >= 0 ? want[wk] : 0);
			ck_assert_uint_eq(n_typed_sw, 0);
			ck_assert_uint_eq(n_events + n_sw + n_wk, want_events);
		} else {
			ck_assert_uint_eq(n_typed_sw, want[sw]);
			ck_assert_uint_eq(n_events, want_events);
		}
		ck_assert_uint_gt(want[rt], 0);
		ck_assert_uint_eq(n_generic, want[rt]);
		ck_assert_uint_gt(want[rn], 0);
		ck_assert_uint_eq(n_rename, want[rn]);
	}
	perfetto__protos__trace__free_unpacked(tr, NULL);
}

START_TEST(test_golden)
{
	const struct golden_case *gc = &cases[_i];
	struct golden_out out;

	run_case(gc, &out);
	check_decoded(gc, &out);
	compare_file(gc->name, "expected", out.s.buf, fx_sink_len(&out.s));
	compare_file(gc->name, "meta.expected", (const uint8_t *)out.meta, out.meta_len);
	golden_out_done(&out);
}
END_TEST

/* The compact comm table passes 64 at a page boundary in the captured pages. */
START_TEST(test_golden_comm_split)
{
	struct golden_out out;
	Perfetto__Protos__Trace *tr;
	size_t max_comms = 0, bundles = 0;

	run_case(&cases[1], &out);
	tr = perfetto__protos__trace__unpack(NULL, fx_sink_len(&out.s), out.s.buf);
	ck_assert_ptr_nonnull(tr);
	for (size_t i = 0; i < tr->n_packet; i++) {
		const Perfetto__Protos__FtraceEventBundle *b = tr->packet[i]->ftrace_events;

		if (b->compact_sched) {
			max_comms = MAX(max_comms, b->compact_sched->n_intern_table);
			bundles++;
		}
	}
	/* Two lost-events splits alone would make 2 bundles. */
	ck_assert_uint_gt(bundles, 2);
	ck_assert_uint_gt(max_comms, 64);
	perfetto__protos__trace__free_unpacked(tr, NULL);
	golden_out_done(&out);
}
END_TEST

/* ---- the same through an SMB ------------------------------------------------ */

/* One packet of a Trace stream as the buffer sink writes it: 0x0a, length, bytes. */
static bool next_trace_packet(const uint8_t **p, const uint8_t *end, const uint8_t **ret,
			      size_t *ret_len)
{
	uint64_t len = 0;
	int shift = 0;

	if (*p >= end)
		return false;
	ck_assert_uint_eq(**p, 0x0a);
	(*p)++;
	for (;; shift += 7) {
		ck_assert(*p < end && shift < 64);
		len |= (uint64_t)(**p & 0x7f) << shift;
		if (!(*(*p)++ & 0x80))
			break;
	}
	ck_assert_uint_le(len, (uint64_t)(end - *p));
	*ret = *p;
	*ret_len = (size_t)len;
	*p += len;
	return true;
}

struct smb_compare {
	uint8_t *want;
	const uint8_t *pos, *end;
	size_t packets;
};

static int compare_packet(const struct smb_packet *pkt, void *userdata)
{
	/* What the writer adds to a sequence's first packet: first_packet_on_sequence. */
	static const uint8_t first_on_seq[] = { 0xb8, 0x05, 0x01 };
	struct smb_compare *c = userdata;
	const uint8_t *want, *got = pkt->data;
	size_t want_len, got_len = pkt->len;

	ck_assert_msg(next_trace_packet(&c->pos, c->end, &want, &want_len),
		      "more packets through the SMB than in the golden");
	if (c->packets == 0) {
		ck_assert_uint_ge(got_len, sizeof(first_on_seq));
		ck_assert_mem_eq(got, first_on_seq, sizeof(first_on_seq));
		got += sizeof(first_on_seq);
		got_len -= sizeof(first_on_seq);
	}
	ck_assert_uint_eq(pkt->previous_packet_dropped, c->packets == 0 ? SMB_DATA_LOSS_PRESENT : 0);
	ck_assert_msg(got_len == want_len && memcmp(got, want, want_len) == 0,
		      "packet %zu differs from the golden (%zu bytes, want %zu)", c->packets, got_len,
		      want_len);
	c->packets++;
	return 0;
}

/*
 * Chunks of 4 KiB: bundles cross many of them, packed columns split at
 * chunk ends.  Dense encodings only: the legacy one has small nested
 * messages whose one-byte length is, by design, only compacted when they
 * do not straddle a chunk, so its bytes depend on where chunks end.
 * Runs 4..7 feed the pages one at a time through the batch API.
 */
START_TEST(test_golden_smb)
{
	static const size_t dense_cases[] = { 0, 1, 2, 4 };
	const struct golden_case *gc = &cases[dense_cases[_i % 4]];
	const size_t size = 1u << 20, page = 4096;
	_cleanup_free_ char *name = NULL, *path = NULL;
	struct smb_compare cmp = {};
	struct golden_smb gs = { .cb = compare_packet, .userdata = &cmp, .batch = _i >= 4 };
	struct smb_writer_stats ws;
	struct golden_out out;
	size_t want_len;
	void *mem = aligned_alloc(4096, size);

	ck_assert_ptr_nonnull(mem);
	memset(mem, 0, size);
	ck_assert_int_ge(asprintf(&name, "%s.expected", gc->name), 0);
	path = path_join(data.dir, name);
	ck_assert_int_eq(read_file(path, &cmp.want, &want_len), 0);
	cmp.pos = cmp.want;
	cmp.end = cmp.want + want_len;
	ck_assert_int_eq(smb_new(mem, size, page, &gs.smb), 0);
	ck_assert_int_eq(smb_writer_new(gs.smb, 1, 0, &gs.w), 0);
	ck_assert_int_eq(smb_reader_new(mem, size, page, 16u << 20, &gs.rd), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(gs.rd, 0), 0);

	run_case_to(gc, &out, &gs);
	smb_writer_flush(gs.w);
	smb_service(&gs, true);
	ck_assert_msg(cmp.pos == cmp.end, "%s: fewer packets through the SMB than in the golden",
		      gc->name);
	ck_assert_uint_eq(cmp.packets, out.n_packets);
	smb_writer_get_stats(gs.w, &ws);
	ck_assert_uint_gt(ws.chunks_acquired, 10);

	golden_out_done(&out);
	smb_reader_free(gs.rd);
	smb_writer_free(gs.w);
	smb_free(gs.smb);
	free(mem);
	free(cmp.want);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_golden");
	TCase *tc = tcase_create("golden");

	tcase_add_unchecked_fixture(tc, load_data, NULL);
	tcase_add_loop_test(tc, test_golden, 0, (int)ARRAY_SIZE(cases));
	tcase_add_test(tc, test_golden_comm_split);
	tcase_add_loop_test(tc, test_golden_smb, 0, 8);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
