/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Test helper for the trace.dat converter: the events libtracecmd reads
 * from a trace.dat (what trace-cmd report prints) against the events of the
 * converted Perfetto trace, per CPU, as sorted lists of
 * (timestamp, kind, key fields).  Compact sched entries carry what the
 * columns hold (next pid, prev state, next comm; woken pid, target cpu,
 * comm), every other event its timestamp and common_pid.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <trace-cmd/trace-cmd.h>

#include "probes/convert/convert.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "util/util.h"

struct cc_ev {
	uint32_t cpu;
	uint64_t ts;
	char kind;          /* 'S' compact switch, 'W' compact waking, 'E' other */
	int64_t a, b;       /* S: next_pid, prev_state; W: pid, target_cpu; E: pid, 0 */
	char comm[16];
};

struct cc_list {
	struct cc_ev *v;
	size_t n, cap;
};

static inline void cc_push(struct cc_list *l, const struct cc_ev *e)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		ck_assert_ptr_nonnull(l->v);
	}
	l->v[l->n++] = *e;
}

static inline int cc_cmp(const void *x, const void *y)
{
	const struct cc_ev *a = x, *b = y;

	if (a->cpu != b->cpu)
		return a->cpu < b->cpu ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	return strncmp(a->comm, b->comm, sizeof(a->comm));
}

static inline long long cc_field(struct tep_event *ev, struct tep_record *r, const char *name)
{
	unsigned long long v = 0;

	ck_assert_msg(tep_get_field_val(NULL, ev, name, r, &v, 0) == 0, "field %s of %s", name,
		      ev->name);
	return (long long)v;
}

static inline void cc_comm(struct tep_event *ev, struct tep_record *r, const char *name, char *out)
{
	struct tep_format_field *f = tep_find_field(ev, name);

	ck_assert_ptr_nonnull(f);
	memset(out, 0, 16);
	memcpy(out, (char *)r->data + f->offset, MIN(f->size, 15));
}

static inline void cc_from_handle(struct tracecmd_input *h, bool compact, struct cc_list *l)
{
	struct tep_handle *tep = tracecmd_get_tep(h);
	int n_cpus = tep_get_cpus(tep);
	struct tep_event *sw = tep_find_event_by_name(tep, "sched", "sched_switch");
	struct tep_event *wk = tep_find_event_by_name(tep, "sched", "sched_waking");

	for (int cpu = 0; cpu < n_cpus; cpu++) {
		struct tep_record *r;

		while ((r = tracecmd_read_data(h, cpu))) {
			int id = tep_data_type(tep, r);
			struct tep_event *ev = tep_find_event(tep, id);
			struct cc_ev e = { .cpu = (uint32_t)cpu, .ts = r->ts, .kind = 'E' };

			ck_assert_ptr_nonnull(ev);
			if (compact && sw && ev == sw) {
				e.kind = 'S';
				e.a = cc_field(ev, r, "next_pid");
				e.b = cc_field(ev, r, "prev_state");
				cc_comm(ev, r, "next_comm", e.comm);
			} else if (compact && wk && ev == wk) {
				e.kind = 'W';
				e.a = cc_field(ev, r, "pid");
				e.b = cc_field(ev, r, "target_cpu");
				cc_comm(ev, r, "comm", e.comm);
			} else {
				e.a = tep_data_pid(tep, r);
			}
			cc_push(l, &e);
			tracecmd_free_record(r);
		}
	}
}

/* Every buffer of the file, the way trace-cmd report reads them. */
static inline void cc_from_dat(const char *path, bool compact, struct cc_list *l)
{
	struct tracecmd_input *h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS);
	int n;

	ck_assert_ptr_nonnull(h);
	cc_from_handle(h, compact, l);
	n = tracecmd_buffer_instances(h);
	for (int i = 0; i < n; i++) {
		struct tracecmd_input *ih = tracecmd_buffer_instance_handle(h, i);

		ck_assert_ptr_nonnull(ih);
		cc_from_handle(ih, compact, l);
		tracecmd_close(ih);
	}
	tracecmd_close(h);
	qsort(l->v, l->n, sizeof(*l->v), cc_cmp);
}

struct cc_pf {
	Perfetto__Protos__Trace *trace;
	uint8_t *buf;
	size_t len;
	uint64_t bundles, lost_bundles, errors, threads, symbols;
	bool clock_snapshot;
};

static inline void cc_from_pftrace(const uint8_t *buf, size_t len, struct cc_list *l,
				   struct cc_pf *pf)
{
	pf->trace = perfetto__protos__trace__unpack(NULL, len, buf);
	ck_assert_ptr_nonnull(pf->trace);
	for (size_t i = 0; i < pf->trace->n_packet; i++) {
		Perfetto__Protos__TracePacket *p = pf->trace->packet[i];
		Perfetto__Protos__FtraceEventBundle *b =
			p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS ? p->ftrace_events
											 : NULL;

		ck_assert(p->optional_trusted_packet_sequence_id_case ==
			  PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID);
		pf->clock_snapshot |= p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
		if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
			pf->threads += p->process_tree->n_threads;
		if (p->interned_data)
			pf->symbols += p->interned_data->n_kernel_symbols;
		if (!b)
			continue;
		pf->bundles++;
		pf->lost_bundles += b->has_lost_events && b->lost_events;
		pf->errors += b->n_error;
		for (size_t k = 0; k < b->n_event; k++) {
			struct cc_ev e = { .cpu = b->cpu, .ts = b->event[k]->timestamp, .kind = 'E',
					   .a = b->event[k]->pid };
			cc_push(l, &e);
		}
		if (b->compact_sched) {
			Perfetto__Protos__FtraceEventBundle__CompactSched *c = b->compact_sched;
			uint64_t ts = 0;

			for (size_t k = 0; k < c->n_switch_timestamp; k++) {
				struct cc_ev e = { .cpu = b->cpu, .kind = 'S' };

				ts += c->switch_timestamp[k];
				e.ts = ts;
				e.a = c->switch_next_pid[k];
				e.b = c->switch_prev_state[k];
				ck_assert_uint_lt(c->switch_next_comm_index[k], c->n_intern_table);
				strncpy(e.comm, c->intern_table[c->switch_next_comm_index[k]], 15);
				cc_push(l, &e);
			}
			ts = 0;
			for (size_t k = 0; k < c->n_waking_timestamp; k++) {
				struct cc_ev e = { .cpu = b->cpu, .kind = 'W' };

				ts += c->waking_timestamp[k];
				e.ts = ts;
				e.a = c->waking_pid[k];
				e.b = c->waking_target_cpu[k];
				ck_assert_uint_lt(c->waking_comm_index[k], c->n_intern_table);
				strncpy(e.comm, c->intern_table[c->waking_comm_index[k]], 15);
				cc_push(l, &e);
			}
		}
	}
	qsort(l->v, l->n, sizeof(*l->v), cc_cmp);
}

static inline void cc_expect_same(const struct cc_list *want, const struct cc_list *got)
{
	size_t n = MIN(want->n, got->n);

	for (size_t i = 0; i < n; i++) {
		const struct cc_ev *w = &want->v[i], *g = &got->v[i];

		ck_assert_msg(cc_cmp(w, g) == 0,
			      "event %zu: want cpu %u ts %llu %c %lld %lld '%s', got cpu %u ts %llu %c "
			      "%lld %lld '%s'",
			      i, w->cpu, (unsigned long long)w->ts, w->kind, (long long)w->a,
			      (long long)w->b, w->comm, g->cpu, (unsigned long long)g->ts, g->kind,
			      (long long)g->a, (long long)g->b, g->comm);
	}
	ck_assert_uint_eq(want->n, got->n);
}

static inline void cc_pf_done(struct cc_pf *pf)
{
	if (pf->trace)
		perfetto__protos__trace__free_unpacked(pf->trace, NULL);
	free(pf->buf);
	memset(pf, 0, sizeof(*pf));
}

/* Convert @dat into memory (a memfd). */
static inline int cc_convert(const char *dat, bool compact, struct cc_pf *pf,
			     struct convert_summary **ret_sum)
{
	struct convert_opts o = CONVERT_OPTS_DEFAULT;
	int fd = memfd_create("pftrace", MFD_CLOEXEC), r;
	struct stat st;

	ck_assert_int_ge(fd, 0);
	cc_pf_done(pf);
	o.compact_sched = compact;
	r = convert_file_isolated(dat, fd, &o, ret_sum);
	ck_assert_int_eq(fstat(fd, &st), 0);
	pf->len = (size_t)st.st_size;
	pf->buf = malloc(pf->len + 1);
	ck_assert_ptr_nonnull(pf->buf);
	ck_assert_int_eq(pread(fd, pf->buf, pf->len, 0), (ssize_t)pf->len);
	close(fd);
	return r;
}


/* The whole check: convert, decode, compare with libtracecmd's records. */
static inline void cc_check_file(const char *dat, bool compact, struct convert_summary **ret_sum,
				 struct cc_pf *pf)
{
	struct cc_list want = {}, got = {};
	int r;

	r = cc_convert(dat, compact, pf, ret_sum);
	ck_assert_msg(r == 0, "convert %s: %d", dat, r);
	cc_from_dat(dat, compact, &want);
	cc_from_pftrace(pf->buf, pf->len, &got, pf);
	ck_assert_uint_gt(want.n, 0);
	cc_expect_same(&want, &got);
	ck_assert(pf->clock_snapshot);
	ck_assert_uint_eq((*ret_sum)->events, want.n);
	free(want.v);
	free(got.v);
}
