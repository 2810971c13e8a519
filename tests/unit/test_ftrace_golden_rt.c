/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Real ring-buffer pages of a PREEMPT_RT kernel (Debian 12's
 * 6.1.0-*-rt-amd64, recorded under QEMU by bench/bench_fixture into
 * tests/data/ftrace-golden-rt/, 8 pages from each of 2 CPUs) through the
 * drain path, compact and typed.  An RT kernel adds a common field
 * (common_preempt_lazy_count at offset 8), so every sched_switch and
 * sched_waking field sits 4 bytes further than on other kernels:
 * prev_comm at 12, next_pid at 64, sched_waking's pid at 28.  The parser
 * has a fast path for the usual layout; these pages must take the other
 * one and decode to exactly what an independent walk of the pages reads at
 * the RT offsets, in both encodings, which must also agree with each other.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"
#include "util/util.h"

#define RT_DIR "tests/data/ftrace-golden-rt"
#define RT_CPUS 2u
#define RT_PAGE 4096u
#define RT_SINK (8u << 20)
#define RT_MAX_RECORDS 8192u

/* The RT layout, as the format files say (checked in load_data). */
#define SW_PREV_COMM 12
#define SW_PREV_PID 28
#define SW_PREV_PRIO 32
#define SW_PREV_STATE 40
#define SW_NEXT_COMM 48
#define SW_NEXT_PID 64
#define SW_NEXT_PRIO 68
#define WK_COMM 12
#define WK_PID 28
#define WK_PRIO 32
#define WK_TARGET_CPU 36

struct sw_rec {
	char prev_comm[17], next_comm[17];
	int32_t prev_pid, prev_prio, next_pid, next_prio;
	int64_t prev_state;
};

struct wk_rec {
	char comm[17];
	int32_t pid, prio, target_cpu;
};

/* What an independent walk of one CPU's pages finds. */
struct rt_cpu {
	uint8_t *pages;
	size_t n_pages;
	struct sw_rec sw[RT_MAX_RECORDS];
	size_t n_sw;
	struct wk_rec wk[RT_MAX_RECORDS];
	size_t n_wk;
};

static struct {
	char *dir;
	int sw_id, wk_id;
	struct rt_cpu cpu[RT_CPUS];
} data;

static char *path_join(const char *a, const char *b)
{
	char *p = NULL;

	ck_assert_int_ge(asprintf(&p, "%s/%s", a, b), 0);
	return p;
}

static char *read_text(const char *rel)
{
	_cleanup_free_ char *p = path_join(data.dir, rel);
	char *buf = NULL;

	ck_assert_msg(read_full_file_at(AT_FDCWD, p, 16u << 20, &buf, NULL) == 0, "cannot read %s", p);
	return buf;
}

static int format_id(const char *fmt)
{
	const char *p = strstr(fmt, "\nID: ");

	ck_assert_ptr_nonnull(p);
	return atoi(p + 5);
}

static int32_t get_i32(const uint8_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void get_comm(char *dst, const uint8_t *src)
{
	memcpy(dst, src, 16);
	dst[16] = '\0';
}

/* The kernel's ring_buffer.h record layout, walked without the parser. */
static void walk_cpu(struct rt_cpu *c)
{
	for (size_t i = 0; i < c->n_pages; i++) {
		const uint8_t *pg = c->pages + i * RT_PAGE;
		uint64_t commit;
		size_t p = 16, end;

		memcpy(&commit, pg + 8, 8);
		end = 16 + (commit & ((1u << 27) - 1));
		ck_assert_uint_le(end, RT_PAGE);
		while (p + 4 <= end) {
			uint32_t h, type_len, len;
			const uint8_t *r;
			int id;

			memcpy(&h, pg + p, 4);
			type_len = h & 31;
			p += 4;
			if (type_len == 29) {
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
			r = pg + p;
			id = r[0] | (r[1] << 8);
			if (id == data.sw_id) {
				struct sw_rec *s = &c->sw[c->n_sw++];

				ck_assert_uint_ge(len, SW_NEXT_PRIO + 4);
				get_comm(s->prev_comm, r + SW_PREV_COMM);
				get_comm(s->next_comm, r + SW_NEXT_COMM);
				s->prev_pid = get_i32(r + SW_PREV_PID);
				s->prev_prio = get_i32(r + SW_PREV_PRIO);
				memcpy(&s->prev_state, r + SW_PREV_STATE, 8);
				s->next_pid = get_i32(r + SW_NEXT_PID);
				s->next_prio = get_i32(r + SW_NEXT_PRIO);
			} else if (id == data.wk_id) {
				struct wk_rec *w = &c->wk[c->n_wk++];

				ck_assert_uint_ge(len, WK_TARGET_CPU + 4);
				get_comm(w->comm, r + WK_COMM);
				w->pid = get_i32(r + WK_PID);
				w->prio = get_i32(r + WK_PRIO);
				w->target_cpu = get_i32(r + WK_TARGET_CPU);
			}
			ck_assert_uint_lt(c->n_sw, RT_MAX_RECORDS);
			ck_assert_uint_lt(c->n_wk, RT_MAX_RECORDS);
			p += len;
		}
	}
}

static void load_data(void)
{
	const char *root = getenv("TP_SOURCE_ROOT");
	_cleanup_free_ char *sw_fmt = NULL, *wk_fmt = NULL;

	data.dir = path_join(root ? root : ".", RT_DIR);
	sw_fmt = read_text("events/sched/sched_switch/format");
	wk_fmt = read_text("events/sched/sched_waking/format");
	/* These are RT pages, with the offsets the walk above reads at. */
	ck_assert_ptr_nonnull(strstr(sw_fmt, "common_preempt_lazy_count;\toffset:8;\tsize:1;"));
	ck_assert_ptr_nonnull(strstr(sw_fmt, "char prev_comm[16];\toffset:12;"));
	ck_assert_ptr_nonnull(strstr(sw_fmt, "pid_t prev_pid;\toffset:28;"));
	ck_assert_ptr_nonnull(strstr(sw_fmt, "int prev_prio;\toffset:32;"));
	ck_assert_ptr_nonnull(strstr(sw_fmt, "long prev_state;\toffset:40;\tsize:8;"));
	ck_assert_ptr_nonnull(strstr(sw_fmt, "char next_comm[16];\toffset:48;"));
	ck_assert_ptr_nonnull(strstr(sw_fmt, "pid_t next_pid;\toffset:64;"));
	ck_assert_ptr_nonnull(strstr(sw_fmt, "int next_prio;\toffset:68;"));
	ck_assert_ptr_nonnull(strstr(wk_fmt, "common_preempt_lazy_count;\toffset:8;\tsize:1;"));
	ck_assert_ptr_nonnull(strstr(wk_fmt, "char comm[16];\toffset:12;"));
	ck_assert_ptr_nonnull(strstr(wk_fmt, "pid_t pid;\toffset:28;"));
	ck_assert_ptr_nonnull(strstr(wk_fmt, "int prio;\toffset:32;"));
	ck_assert_ptr_nonnull(strstr(wk_fmt, "int target_cpu;\toffset:36;"));
	data.sw_id = format_id(sw_fmt);
	data.wk_id = format_id(wk_fmt);

	for (unsigned cpu = 0; cpu < RT_CPUS; cpu++) {
		struct rt_cpu *c = &data.cpu[cpu];
		char name[32];
		size_t len;

		_cleanup_free_ char *p = NULL;
		char *buf = NULL;

		(void)snprintf(name, sizeof(name), "cpu%u.pages", cpu);
		p = path_join(data.dir, name);
		ck_assert_msg(read_full_file_at(AT_FDCWD, p, 16u << 20, &buf, &len) == 0, "cannot read %s", p);
		c->pages = (uint8_t *)buf;
		ck_assert_uint_gt(len, 0);
		ck_assert_uint_eq(len % RT_PAGE, 0);
		c->n_pages = len / RT_PAGE;
		walk_cpu(c);
	}
}

static void free_data(void)
{
	for (unsigned cpu = 0; cpu < RT_CPUS; cpu++)
		free(data.cpu[cpu].pages);
	free(data.dir);
}

/* ---- decoding ---------------------------------------------------------------- */

struct rt_out {
	struct fx_sink s;
	struct ftrace_pass_stats stats[RT_CPUS];
	unsigned packet_cpu[1024];
	size_t n_packets;
	Perfetto__Protos__Trace *tr;
};

/* All pages of both CPUs, a few per call, as the daemon's passes feed them. */
static void run(bool compact, struct rt_out *out)
{
	static const char *const events[][2] = {
		{ "sched", "sched_switch" }, { "sched", "sched_waking" },
	};
	struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;
	struct ftrace_format_table *t = NULL;
	struct ftrace_parser *p = NULL;
	struct ftrace_pidset *pids = NULL;
	struct ftrace_cpu_state st[RT_CPUS] = {};

	memset(out, 0, sizeof(*out));
	o.compact_sched = compact;
	ck_assert_int_eq(ftrace_format_table_new(data.dir, &t), 0);
	ck_assert_int_eq(ftrace_parser_new(t, &o, &p), 0);
	for (size_t i = 0; i < ARRAY_SIZE(events); i++) {
		int id;

		ck_assert_int_eq(ftrace_format_table_load_event(t, events[i][0], events[i][1], &id), 0);
		ck_assert_int_eq(id, i == 0 ? data.sw_id : data.wk_id);
		ck_assert_int_eq(ftrace_parser_enable(p, id), 0);
	}
	ck_assert(ftrace_parser_compact_sched_active(p) == compact);
	ck_assert_int_eq(ftrace_pidset_new(32768, &pids), 0);
	fx_sink_init(&out->s, RT_SINK);

	for (size_t first = 0; first < data.cpu[0].n_pages || first < data.cpu[1].n_pages; first += 3) {
		for (unsigned cpu = 0; cpu < RT_CPUS; cpu++) {
			const struct rt_cpu *c = &data.cpu[cpu];
			size_t k = first < c->n_pages ? MIN(3, c->n_pages - first) : 0;
			int r;

			if (k == 0)
				continue;
			r = ftrace_parser_parse_pages(p, cpu, c->pages + first * RT_PAGE, k, RT_PAGE,
						      &out->s.sink, &st[cpu], pids, &out->stats[cpu]);
			ck_assert_int_ge(r, 0);
			for (int i = 0; i < r; i++) {
				ck_assert_uint_lt(out->n_packets, ARRAY_SIZE(out->packet_cpu));
				out->packet_cpu[out->n_packets++] = cpu;
			}
		}
		ftrace_pidset_clear(pids);
	}
	ck_assert(!pbw_overflowed(&out->s.w));
	out->tr = perfetto__protos__trace__unpack(NULL, fx_sink_len(&out->s), out->s.buf);
	ck_assert_ptr_nonnull(out->tr);
	ck_assert_uint_eq(out->tr->n_packet, out->n_packets);

	ftrace_pidset_free(pids);
	ftrace_parser_free(p);
	ftrace_format_table_free(t);
}

static void rt_out_done(struct rt_out *out)
{
	perfetto__protos__trace__free_unpacked(out->tr, NULL);
	fx_sink_done(&out->s);
}

static const Perfetto__Protos__FtraceEventBundle *bundle_of(const struct rt_out *out, size_t i,
							     unsigned cpu)
{
	const Perfetto__Protos__FtraceEventBundle *b = out->tr->packet[i]->ftrace_events;

	ck_assert_ptr_nonnull(b);
	if (out->packet_cpu[i] != cpu)
		return NULL;
	ck_assert(b->has_cpu && b->cpu == cpu);
	ck_assert_uint_eq(b->n_error, 0);
	return b;
}

/* switch timestamps per CPU, in order, for comparing the two encodings */
struct rt_ts {
	uint64_t sw[RT_CPUS][RT_MAX_RECORDS];
	uint64_t wk[RT_CPUS][RT_MAX_RECORDS];
};

static struct rt_ts compact_ts, typed_ts;

static void check_compact(void)
{
	struct rt_out out;

	run(true, &out);
	for (unsigned cpu = 0; cpu < RT_CPUS; cpu++) {
		const struct rt_cpu *c = &data.cpu[cpu];
		size_t n_sw = 0, n_wk = 0;

		ck_assert_uint_gt(c->n_sw, 100);
		ck_assert_uint_gt(c->n_wk, 10);
		ck_assert_uint_eq(out.stats[cpu].parse_errors, 0);
		ck_assert_uint_eq(out.stats[cpu].events, c->n_sw + c->n_wk);
		ck_assert_uint_eq(out.stats[cpu].compact_switch, c->n_sw);
		ck_assert_uint_eq(out.stats[cpu].compact_waking, c->n_wk);
		for (size_t i = 0; i < out.tr->n_packet; i++) {
			const Perfetto__Protos__FtraceEventBundle *b = bundle_of(&out, i, cpu);
			const Perfetto__Protos__FtraceEventBundle__CompactSched *cs;
			uint64_t ts = 0;

			if (!b)
				continue;
			ck_assert_uint_eq(b->n_event, 0);
			cs = b->compact_sched;
			if (!cs)
				continue;
			ck_assert_uint_eq(cs->n_switch_next_pid, cs->n_switch_timestamp);
			ck_assert_uint_eq(cs->n_switch_prev_state, cs->n_switch_timestamp);
			ck_assert_uint_eq(cs->n_switch_next_prio, cs->n_switch_timestamp);
			ck_assert_uint_eq(cs->n_switch_next_comm_index, cs->n_switch_timestamp);
			for (size_t k = 0; k < cs->n_switch_timestamp; k++, n_sw++) {
				const struct sw_rec *s = &c->sw[n_sw];

				ck_assert_uint_lt(n_sw, c->n_sw);
				ts += cs->switch_timestamp[k];
				compact_ts.sw[cpu][n_sw] = ts;
				ck_assert_int_eq(cs->switch_next_pid[k], s->next_pid);
				ck_assert_int_eq(cs->switch_next_prio[k], s->next_prio);
				ck_assert_int_eq(cs->switch_prev_state[k], s->prev_state);
				ck_assert_uint_lt(cs->switch_next_comm_index[k], cs->n_intern_table);
				ck_assert_str_eq(cs->intern_table[cs->switch_next_comm_index[k]], s->next_comm);
			}
			ts = 0;
			for (size_t k = 0; k < cs->n_waking_timestamp; k++, n_wk++) {
				const struct wk_rec *w = &c->wk[n_wk];

				ck_assert_uint_lt(n_wk, c->n_wk);
				ts += cs->waking_timestamp[k];
				compact_ts.wk[cpu][n_wk] = ts;
				ck_assert_int_eq(cs->waking_pid[k], w->pid);
				ck_assert_int_eq(cs->waking_prio[k], w->prio);
				ck_assert_int_eq(cs->waking_target_cpu[k], w->target_cpu);
				ck_assert_str_eq(cs->intern_table[cs->waking_comm_index[k]], w->comm);
			}
		}
		ck_assert_uint_eq(n_sw, c->n_sw);
		ck_assert_uint_eq(n_wk, c->n_wk);
	}
	rt_out_done(&out);
}

static void check_typed(void)
{
	struct rt_out out;

	run(false, &out);
	for (unsigned cpu = 0; cpu < RT_CPUS; cpu++) {
		const struct rt_cpu *c = &data.cpu[cpu];
		size_t n_sw = 0, n_wk = 0;

		ck_assert_uint_eq(out.stats[cpu].parse_errors, 0);
		ck_assert_uint_eq(out.stats[cpu].events, c->n_sw + c->n_wk);
		for (size_t i = 0; i < out.tr->n_packet; i++) {
			const Perfetto__Protos__FtraceEventBundle *b = bundle_of(&out, i, cpu);

			if (!b)
				continue;
			ck_assert_ptr_null(b->compact_sched);
			for (size_t k = 0; k < b->n_event; k++) {
				const Perfetto__Protos__FtraceEvent *e = b->event[k];

				ck_assert(e->has_timestamp);
				if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH) {
					const Perfetto__Protos__SchedSwitchFtraceEvent *s = e->sched_switch;
					const struct sw_rec *want = &c->sw[n_sw];

					ck_assert_uint_lt(n_sw, c->n_sw);
					typed_ts.sw[cpu][n_sw++] = e->timestamp;
					ck_assert_str_eq(s->prev_comm, want->prev_comm);
					ck_assert_int_eq(s->prev_pid, want->prev_pid);
					ck_assert_int_eq(s->prev_prio, want->prev_prio);
					ck_assert_int_eq(s->prev_state, want->prev_state);
					ck_assert_str_eq(s->next_comm, want->next_comm);
					ck_assert_int_eq(s->next_pid, want->next_pid);
					ck_assert_int_eq(s->next_prio, want->next_prio);
				} else {
					const Perfetto__Protos__SchedWakingFtraceEvent *w = e->sched_waking;
					const struct wk_rec *want = &c->wk[n_wk];

					ck_assert_int_eq(e->event_case,
							 PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING);
					ck_assert_uint_lt(n_wk, c->n_wk);
					typed_ts.wk[cpu][n_wk++] = e->timestamp;
					ck_assert_str_eq(w->comm, want->comm);
					ck_assert_int_eq(w->pid, want->pid);
					ck_assert_int_eq(w->prio, want->prio);
					ck_assert_int_eq(w->target_cpu, want->target_cpu);
				}
			}
		}
		ck_assert_uint_eq(n_sw, c->n_sw);
		ck_assert_uint_eq(n_wk, c->n_wk);
	}
	rt_out_done(&out);
}

START_TEST(test_rt_compact)
{
	check_compact();
}
END_TEST

START_TEST(test_rt_typed)
{
	check_typed();
}
END_TEST

/* The same events at the same times in both encodings. */
START_TEST(test_rt_encodings_agree)
{
	memset(&compact_ts, 0, sizeof(compact_ts));
	memset(&typed_ts, 0, sizeof(typed_ts));
	check_compact();
	check_typed();
	for (unsigned cpu = 0; cpu < RT_CPUS; cpu++) {
		for (size_t i = 0; i < data.cpu[cpu].n_sw; i++)
			ck_assert_uint_eq(compact_ts.sw[cpu][i], typed_ts.sw[cpu][i]);
		for (size_t i = 0; i < data.cpu[cpu].n_wk; i++)
			ck_assert_uint_eq(compact_ts.wk[cpu][i], typed_ts.wk[cpu][i]);
		ck_assert_uint_gt(typed_ts.sw[cpu][data.cpu[cpu].n_sw - 1], typed_ts.sw[cpu][0]);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_golden_rt");
	TCase *tc = tcase_create("rt");

	tcase_add_unchecked_fixture(tc, load_data, free_data);
	tcase_add_test(tc, test_rt_compact);
	tcase_add_test(tc, test_rt_typed);
	tcase_add_test(tc, test_rt_encodings_agree);
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
