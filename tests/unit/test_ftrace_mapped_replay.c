/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mapped reader replayed on the golden capture (pages read() returned
 * from a real kernel), without a kernel: each CPU's pages go through a
 * simulated mapped ring buffer (meta page, two sub-buffers, the swap call
 * behaving as the kernel's), with the writer caught on some pages
 * mid-way, and ftrace_mapped_next() hands pages to the parser.  The same
 * capture goes through the parser as read() would have returned it (the
 * pages cut where the writer was caught, the rest stamped with the
 * kernel's read timestamp).  Both outputs must be equal byte for byte.
 * Runs as any user.
 */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "protos/pbw.h"
#include "tests/lib/ftrace_fixtures.h"
#include "util/util.h"

#define GOLDEN_DIR "tests/data/ftrace-golden"
#define CPUS 2u
#define PAGE 4096u
#define HDR 16u
#define BSIZE (PAGE - HDR)
#define SPLIT_EVERY 7u
#define BATCH 5u

static uint8_t *golden[CPUS];
static size_t golden_n[CPUS];
static char *golden_dir;

static void load(void)
{
	const char *root = getenv("TP_SOURCE_ROOT");

	ck_assert_int_ge(asprintf(&golden_dir, "%s/%s", root ? root : ".", GOLDEN_DIR), 0);
	for (unsigned cpu = 0; cpu < CPUS; cpu++) {
		_cleanup_free_ char *p = NULL;
		_cleanup_close_ int fd = -EBADF;
		char *buf = NULL;
		size_t len = 0;

		ck_assert_int_ge(asprintf(&p, "%s/cpu%u.pages", golden_dir, cpu), 0);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(read_full_fd(fd, 16u << 20, &buf, &len), 0);
		ck_assert_uint_eq(len % PAGE, 0);
		golden[cpu] = (uint8_t *)buf;
		golden_n[cpu] = len / PAGE;
	}
}

static uint32_t commit_of(const uint8_t *pg)
{
	uint32_t c;

	memcpy(&c, pg + 8, 4);
	return c;
}

/* Where to catch the writer on page @pg: after the data record ending
 * nearest the middle, and the timestamp of that record (0: no split). */
static uint32_t split_point(const uint8_t *pg, uint64_t *ret_ts)
{
	struct ftrace_page_iter it;
	struct ftrace_record rec;
	uint64_t ts = 0;
	uint32_t n = commit_of(pg) & FTRACE_PAGE_COMMIT_MASK, best = 0;

	if (commit_of(pg) & FTRACE_PAGE_MISSED_EVENTS)
		return 0;
	ftrace_page_iter_init(&it, pg + HDR, n, 0);
	memcpy(&it.ts, pg, 8);
	while (ftrace_page_next(&it, &rec) > 0) {
		uint32_t end = (uint32_t)(it.ptr - (pg + HDR));

		if (end >= n)
			break;
		if (best == 0 || (end <= n / 2 + 64 && end > best)) {
			best = end;
			ts = rec.ts;
		}
	}
	*ret_ts = ts;
	return best;
}

/* ---- the read() side: pages as read() returns them ---------------------- */

static uint8_t *read_side(unsigned cpu, size_t *ret_n)
{
	uint8_t *out = calloc(golden_n[cpu] * 2, PAGE);
	size_t n = 0;

	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < golden_n[cpu]; i++) {
		const uint8_t *pg = golden[cpu] + i * PAGE;
		uint32_t size = commit_of(pg) & FTRACE_PAGE_COMMIT_MASK, k;
		uint64_t ts_k = 0, w;

		k = i % SPLIT_EVERY == 3 ? split_point(pg, &ts_k) : 0;
		if (k == 0) {
			memcpy(out + n++ * PAGE, pg, PAGE);
			continue;
		}
		/* First read: what was committed, from the page start. */
		memcpy(out + n * PAGE, pg, 8);
		w = k;
		memcpy(out + n * PAGE + 8, &w, 8);
		memcpy(out + n * PAGE + HDR, pg + HDR, k);
		n++;
		/* Second read: the rest, stamped at the read offset. */
		memcpy(out + n * PAGE, &ts_k, 8);
		w = size - k;
		memcpy(out + n * PAGE + 8, &w, 8);
		memcpy(out + n * PAGE + HDR, pg + HDR + k, size - k);
		n++;
	}
	*ret_n = n;
	return out;
}

/* ---- the mapped side: a simulated ring and ftrace_mapped_next() --------- */

struct sim {
	_Alignas(64) struct ftrace_rb_meta meta;
	_Alignas(64) uint8_t sub[2][PAGE];
	unsigned cpu;
	size_t next;                    /* golden page to swap in next */
	uint32_t rest;                  /* the writer caught here: commit still to add */
};

static void sim_set_commit(struct sim *s, uint8_t *pg, uint64_t commit)
{
	memcpy(pg + 8, &commit, 8);
}

/* The writer finished golden page @i into sub-buffer @pg, as the kernel
 * leaves it: a page cut short ends in a padding record up to the end. */
static void sim_load(struct sim *s, uint8_t *pg, size_t i)
{
	const uint8_t *src = golden[s->cpu] + i * PAGE;
	uint32_t commit = commit_of(src), size = commit & FTRACE_PAGE_COMMIT_MASK;
	uint64_t ts_k;
	uint32_t k;

	memcpy(pg, src, PAGE);
	s->rest = 0;
	if (!(commit & FTRACE_PAGE_MISSED_EVENTS) && BSIZE - size >= FTRACE_RB_MIN_EVENT) {
		uint32_t pad[2] = { FTRACE_RB_TYPE_PADDING | (1u << 5), BSIZE - size - 4 };

		memcpy(pg + HDR + size, pad, 8);
		sim_set_commit(s, pg, BSIZE);
	}
	k = i % SPLIT_EVERY == 3 ? split_point(src, &ts_k) : 0;
	if (k) {
		/* The writer is still on it: only k bytes committed yet. */
		s->rest = commit_of(pg);
		sim_set_commit(s, pg, k);
	}
}

/* TRACE_MMAP_IOCTL_GET_READER, as ring_buffer_map_get_reader() does it. */
static int sim_get_reader(void *ctx)
{
	struct sim *s = ctx;
	uint8_t *pg = s->sub[s->meta.reader.id];
	uint32_t size;

	/* The writer went on meanwhile and finished its page. */
	if (s->rest) {
		sim_set_commit(s, pg, s->rest);
		s->rest = 0;
	}
	size = commit_of(pg) & FTRACE_PAGE_COMMIT_MASK;
	if (s->meta.reader.read < size) {
		s->meta.reader.read = size;
		return 0;
	}
	if (s->next >= golden_n[s->cpu] || s->rest)
		return 0;
	s->meta.reader.id ^= 1;
	pg = s->sub[s->meta.reader.id];
	sim_load(s, pg, s->next++);
	s->meta.reader.read = commit_of(pg) & FTRACE_PAGE_COMMIT_MASK;
	return 0;
}

static uint8_t *mapped_side(unsigned cpu, size_t *ret_n, uint64_t *ret_in_place, uint64_t *ret_copied)
{
	struct sim *s = aligned_alloc(64, sizeof(*s));
	uint8_t *out = calloc(golden_n[cpu] * 2 + 1, PAGE), *buf = malloc(PAGE);
	struct ftrace_mapped m;
	size_t n = 0;

	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(out);
	memset(s, 0, sizeof(*s));
	s->cpu = cpu;
	s->meta.meta_page_size = 4096;
	s->meta.meta_struct_len = sizeof(s->meta);
	s->meta.subbuf_size = PAGE;
	s->meta.nr_subbufs = 2;
	ck_assert_int_eq(ftrace_mapped_init(&m, &s->meta, s->sub, sizeof(s->sub), PAGE, 8, sim_get_reader,
					    s), 0);
	for (;;) {
		const uint8_t *page = NULL;
		bool caught_up;
		int k = ftrace_mapped_next(&m, buf, &page, &caught_up);

		ck_assert_int_ge(k, 0);
		if (k == 0)
			break;
		ck_assert_uint_lt(n, golden_n[cpu] * 2 + 1);
		memcpy(out + n++ * PAGE, page, PAGE);
		memset(buf, 0xa5, PAGE);
	}
	ck_assert_uint_eq(s->next, golden_n[cpu]);
	*ret_n = n;
	*ret_in_place = m.in_place;
	*ret_copied = m.copied;
	free(buf);
	free(s);
	return out;
}

/* ---- parse both and compare ----------------------------------------------- */

static const char *const events[] = {
	"sched/sched_switch", "sched/sched_waking", "sched/sched_wakeup_new",
	"sched/sched_process_fork", "sched/sched_process_exec", "sched/sched_process_exit",
	"sched/sched_process_free", "sched/sched_migrate_task", "sched/sched_stat_runtime",
	"task/task_newtask", "task/task_rename", "irq/softirq_entry", NULL,
};

static void parse(uint8_t *const pages[CPUS], const size_t n[CPUS], bool compact, struct fx_sink *out,
		  uint64_t last_ts[CPUS])
{
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;
	struct ftrace_format_table *t = NULL;
	struct ftrace_parser *p = NULL;
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state st[CPUS] = {};
	size_t max = MAX(n[0], n[1]);

	o.compact_sched = compact;
	ck_assert_int_eq(ftrace_format_table_new(golden_dir, &t), 0);
	ck_assert_int_eq(ftrace_parser_new(t, &o, &p), 0);
	for (size_t i = 0; events[i]; i++) {
		char group[64], *name;
		int id;

		(void)snprintf(group, sizeof(group), "%s", events[i]);
		name = strchr(group, '/');
		*name++ = 0;
		ck_assert_int_eq(ftrace_format_table_load_event(t, group, name, &id), 0);
		ck_assert_int_eq(ftrace_parser_enable(p, id), 0);
	}
	ck_assert_int_eq(ftrace_pidset_new(32768, &pids), 0);
	fx_sink_init(out, 16u << 20);
	for (size_t first = 0; first < max; first += BATCH)
		for (unsigned cpu = 0; cpu < CPUS; cpu++) {
			size_t k = first < n[cpu] ? MIN(BATCH, n[cpu] - first) : 0;

			if (k)
				ck_assert_int_ge(ftrace_parser_parse_pages(p, cpu, pages[cpu] + first * PAGE, k,
									   PAGE, &out->sink, &st[cpu], pids,
									   NULL), 0);
		}
	for (unsigned cpu = 0; cpu < CPUS; cpu++)
		last_ts[cpu] = st[cpu].last_event_ts;
	ck_assert(!pbw_overflowed(&out->w));
	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}

static void compare(bool compact)
{
	uint8_t *rd[CPUS], *mp[CPUS];
	size_t rn[CPUS], mn[CPUS];
	uint64_t rts[CPUS], mts[CPUS];
	struct fx_sink ro, mo;

	for (unsigned cpu = 0; cpu < CPUS; cpu++) {
		uint64_t in_place, copied;

		rd[cpu] = read_side(cpu, &rn[cpu]);
		mp[cpu] = mapped_side(cpu, &mn[cpu], &in_place, &copied);
		ck_assert_uint_eq(mn[cpu], rn[cpu]);
		/* Most pages in place; the split ones copied, twice each. */
		ck_assert_uint_gt(in_place, rn[cpu] / 2);
		ck_assert_uint_gt(copied, 0);
		ck_assert_uint_eq(in_place + copied, rn[cpu]);
	}
	parse(rd, rn, compact, &ro, rts);
	parse(mp, mn, compact, &mo, mts);
	ck_assert_uint_gt(fx_sink_len(&ro), 0);
	ck_assert_uint_eq(fx_sink_len(&mo), fx_sink_len(&ro));
	ck_assert_msg(memcmp(mo.buf, ro.buf, fx_sink_len(&ro)) == 0, "mapped output differs from read()'s");
	for (unsigned cpu = 0; cpu < CPUS; cpu++) {
		ck_assert_uint_eq(mts[cpu], rts[cpu]);
		free(rd[cpu]);
		free(mp[cpu]);
	}
	fx_sink_done(&ro);
	fx_sink_done(&mo);
}

START_TEST(test_replay_compact)
{
	compare(true);
}
END_TEST

START_TEST(test_replay_plain)
{
	compare(false);
}
END_TEST

/* The kernel's read timestamp: padding adds nothing, extends add, stamps replace. */
START_TEST(test_read_stamp)
{
	struct fx_page p;
	uint8_t payload[8] = { 1, 0 };

	fx_page_init(&p, 1000);
	fx_event(&p, 10, payload, sizeof(payload));     /* 1010 */
	fx_padding(&p, 7, 16);                          /* ignored */
	fx_time_extend(&p, 5, 1);                       /* + 5 + 2^27 */
	fx_event(&p, 3, payload, sizeof(payload));
	fx_abs_ts(&p, 5000000000ull);
	fx_event(&p, 2, payload, sizeof(payload));
	fx_page_finish(&p);
	ck_assert_uint_eq(ftrace_mapped_read_stamp(p.b + FX_HDR, 0, 12, 1000), 1010);
	ck_assert_uint_eq(ftrace_mapped_read_stamp(p.b + FX_HDR, 0, 28, 1000), 1010);
	ck_assert_uint_eq(ftrace_mapped_read_stamp(p.b + FX_HDR, 0, 48, 1000),
			  1010 + 5 + (1ull << 27) + 3);
	ck_assert_uint_eq(ftrace_mapped_read_stamp(p.b + FX_HDR, 0, (uint32_t)(p.pos - FX_HDR), 1000),
			  5000000000ull + 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ftrace_mapped");
	TCase *tc = tcase_create("replay");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, load, NULL);
	tcase_add_test(tc, test_read_stamp);
	tcase_add_test(tc, test_replay_compact);
	tcase_add_test(tc, test_replay_plain);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
