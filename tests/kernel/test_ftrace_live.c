/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.ftrace end to end on the real kernel, without IPC: the public
 * ftrace_ds_* API records sched_switch + sched_waking under a context-switch
 * workload into an SMB, a service-side reader takes the chunks back, and the
 * packets are decoded with protobuf-c.
 *
 * What must hold: every CPU has bundles, timestamps never go backwards on a
 * CPU, the workload's threads appear, and the kernel's own accounting
 * agrees with ours: events emitted == END read_events - START read_events,
 * with what the ring buffer lost reported (overrun, lost_events bundles),
 * also in a deliberately starved run.  Two data sources on one instance
 * each get only their own events, and stopping one keeps the other's.
 *
 * Needs root and tracefs (77 otherwise).  Runs in an instance of its own
 * (tp-live-<pid>), removed at the end; the instance and the top level must
 * be byte-identical afterwards.
 */

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "smb/smb.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

#define SMB_SIZE (64u << 20)
#define SMB_PAGE (32u << 10)
#define TARGET_BUFFER 1u
#define MAX_WRITERS 2
/* The sink over writer @w, for the one call (the data source copies it). */
#define SINK(w) ((const struct pbw_sink[1]){ smb_writer_sink(w) })

static char g_inst_name[64];
static char g_inst_dir[512];
static char g_state_dir[128];
static char *g_snap_inst, *g_snap_top;

/* ---- a producer/service pair in one process --------------------------------- */

struct rec {
	void *mem;
	struct smb *smb;
	struct smb_reader *reader;
	struct smb_writer *w[MAX_WRITERS];
	char *trace[MAX_WRITERS];       /* Trace bytes, per writer */
	size_t trace_len[MAX_WRITERS];
	FILE *out[MAX_WRITERS];
	uint64_t passes;
	uint64_t pids_seen;
};

static int on_packet(const struct smb_packet *p, void *userdata)
{
	struct rec *r = userdata;
	uint8_t hdr[16], *e;
	unsigned idx = p->writer_id - 1;

	ck_assert_uint_lt(idx, MAX_WRITERS);
	/* Trace.packet = 1, length-delimited */
	hdr[0] = 0x0a;
	e = pbw_put_varint_raw(hdr + 1, p->len);
	fwrite(hdr, 1, (size_t)(e - hdr), r->out[idx]);
	fwrite(p->data, 1, p->len, r->out[idx]);
	return 0;
}

static void pump(struct rec *r, bool final)
{
	struct smb_commit cm;

	while (smb_take_commit(r->smb, &cm)) {
		for (size_t i = 0; i < cm.n_moves; i++)
			ck_assert_int_eq(smb_reader_move(r->reader, &cm.moves[i]), 0);
		for (size_t i = 0; i < cm.n_patches; i++)
			ck_assert_int_eq(smb_reader_patch(r->reader, &cm.patches[i]), 0);
	}
	ck_assert_int_ge(smb_reader_read_packets(r->reader, final, on_packet, r), 0);
}

static void rec_init(struct rec *r, unsigned n_writers)
{
	memset(r, 0, sizeof(*r));
	r->mem = mmap(NULL, SMB_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(r->mem, MAP_FAILED);
	ck_assert_int_eq(smb_new(r->mem, SMB_SIZE, SMB_PAGE, &r->smb), 0);
	ck_assert_int_eq(smb_reader_new(r->mem, SMB_SIZE, SMB_PAGE, SMB_SIZE, &r->reader), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(r->reader, TARGET_BUFFER), 0);
	for (unsigned i = 0; i < n_writers; i++) {
		ck_assert_int_eq(smb_writer_new(r->smb, (uint16_t)(i + 1), TARGET_BUFFER, &r->w[i]), 0);
		r->out[i] = open_memstream(&r->trace[i], &r->trace_len[i]);
		ck_assert_ptr_nonnull(r->out[i]);
	}
}

/* Writers gone (their last chunk released), final read, trace files closed. */
static void rec_finish(struct rec *r)
{
	for (unsigned i = 0; i < MAX_WRITERS; i++)
		r->w[i] = smb_writer_free(r->w[i]);
	pump(r, true);
	for (unsigned i = 0; i < MAX_WRITERS; i++)
		if (r->out[i]) {
			fclose(r->out[i]);
			r->out[i] = NULL;
		}
}

static void rec_free(struct rec *r)
{
	for (unsigned i = 0; i < MAX_WRITERS; i++)
		free(r->trace[i]);
	smb_reader_free(r->reader);
	smb_free(r->smb);
	munmap(r->mem, SMB_SIZE);
}

static void load(struct rec *r, unsigned idx, struct tp_trace_summary *s)
{
	char path[] = "/tmp/tp-live-trace-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, r->trace[idx], r->trace_len[idx]), 0);
	close(fd);
	ck_assert_int_eq(tp_trace_load(path, s), 0);
	unlink(path);
}

static void on_pass(struct ftrace_ds *ds, const struct ftrace_pidset *pids, void *userdata)
{
	struct rec *r = userdata;

	r->passes++;
	/* What the service would do between passes: take the committed chunks. */
	pump(r, false);
}

/* ---- fixture --------------------------------------------------------------- */

static void setup(void)
{
	(void)snprintf(g_inst_name, sizeof(g_inst_name), "tp-live-%d", (int)getpid());
	(void)snprintf(g_inst_dir, sizeof(g_inst_dir), TP_TRACEFS "/instances/%s", g_inst_name);
	(void)rmdir(g_inst_dir);
	ck_assert_int_eq(mkdir(g_inst_dir, 0755), 0);
	(void)snprintf(g_state_dir, sizeof(g_state_dir), "/tmp/tp-live-state-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(g_state_dir));
	setenv(FTRACE_STATE_DIR_ENV, g_state_dir, 1);
	g_snap_inst = tp_tracefs_snapshot(g_inst_dir);
	g_snap_top = tp_tracefs_snapshot(TP_TRACEFS);
}

static void teardown(void)
{
	char cmd[256];

	/* A test that died half-way left its undo list behind. */
	(void)ftrace_host_recover(g_state_dir);
	(void)rmdir(g_inst_dir);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_state_dir);
	(void)system(cmd);
	free(g_snap_inst);
	free(g_snap_top);
}

/*
 * The top level is not ours: anyone may use it between two tests (under
 * the machine's tracefs lock, or not), so each test compares it with how
 * it was when that test started (in the test's own process).
 */
static void snap_top(void)
{
	free(g_snap_top);
	g_snap_top = tp_tracefs_snapshot(TP_TRACEFS);
}

static void assert_untouched(void)
{
	char *a = tp_tracefs_snapshot(g_inst_dir), *b = tp_tracefs_snapshot(TP_TRACEFS);

	ck_assert_str_eq(a, g_snap_inst);
	ck_assert_msg(strcmp(b, g_snap_top) == 0,
		      "the top level changed during the test (ours, or another tracer's?):\n"
		      "before:\n%s\nafter:\n%s", g_snap_top, b);
	free(a);
	free(b);
}

static unsigned online_cpus_with_buffers(bool *present, unsigned max)
{
	unsigned n = 0;

	for (unsigned cpu = 0; cpu < max; cpu++) {
		char p[600];

		(void)snprintf(p, sizeof(p), "%s/per_cpu/cpu%u", g_inst_dir, cpu);
		present[cpu] = access(p, F_OK) == 0;
		n += present[cpu];
	}
	return n;
}

static bool workload_done(struct tp_workload *w)
{
	int status;
	pid_t p = waitpid(w->pid, &status, WNOHANG);

	if (p == w->pid) {
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		w->pid = 0;
		return true;
	}
	return false;
}

/* Run the event loop (drain timer) until the workload ends. */
static void run_until_done(struct loop *e, struct tp_workload *w)
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + 60ull * 1000000000ull;

	while (!workload_done(w)) {
		ck_assert_int_ge(loop_run_once(e, 20 * 1000), 0);
		ck_assert_uint_lt(now_ns(CLOCK_MONOTONIC), deadline);
	}
}

static Perfetto__Protos__FtraceConfig sched_config(char **events, size_t n, uint32_t kb, uint32_t drain_ms)
{
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;

	cfg.ftrace_events = events;
	cfg.n_ftrace_events = n;
	cfg.instance_name = g_inst_name;
	cfg.has_buffer_size_kb = true;
	cfg.buffer_size_kb = kb;
	cfg.has_drain_period_ms = true;
	cfg.drain_period_ms = drain_ms;
	return cfg;
}

/*
 * The kernel's accounting against ours, per CPU: every event the kernel
 * says was consumed is in a bundle, and the summary agrees with the trace.
 */
static void reconcile(const struct tp_trace_summary *s, const struct ftrace_ds_summary *sum,
		      const bool *present, unsigned n_cpus, bool *ret_lost, uint64_t *ret_lost_pages)
{
	bool lost = false;

	for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
		const struct tp_cpu_summary *c = &s->cpu[cpu];
		uint64_t read = c->end_read - c->start_read;
		uint64_t overrun = c->end_overrun - c->start_overrun;

		if (!present[cpu])
			continue;
		fprintf(stderr, "cpu %u: bundles %llu (lost %llu) events %llu (switch %llu waking %llu) "
			"kernel read %llu overrun %llu; summary events %llu lost %llu pages %llu\n", cpu,
			(unsigned long long)c->bundles, (unsigned long long)c->lost_bundles,
			(unsigned long long)c->events, (unsigned long long)c->switches,
			(unsigned long long)c->wakings, (unsigned long long)read, (unsigned long long)overrun,
			(unsigned long long)sum->cpu[cpu].events, (unsigned long long)sum->cpu[cpu].lost_events,
			(unsigned long long)sum->cpu[cpu].pages);
		ck_assert_msg(c->bundles > 0, "cpu %u has no bundles", cpu);
		ck_assert_msg(!c->ts_decreased, "cpu %u: timestamps went backwards", cpu);
		ck_assert_uint_ge(c->end_read, c->start_read);
		ck_assert_msg(c->events_at_end == read,
			      "cpu %u: %llu events emitted, kernel read %llu (overrun %llu)", cpu,
			      (unsigned long long)c->events_at_end, (unsigned long long)read,
			      (unsigned long long)overrun);
		ck_assert_uint_eq(sum->cpu[cpu].events, c->events);
		ck_assert_uint_ge(sum->cpu[cpu].overrun, overrun);
		ck_assert_uint_ge(sum->cpu[cpu].read_events, read);
		/*
		 * A flagged page reports a loss that happened before it was
		 * read; a loss after the last read (a busy machine between the
		 * flush and the END snapshot) is only in the stats.
		 */
		if (overrun > 0)
			lost = true;
		*ret_lost_pages += sum->cpu[cpu].pages_with_loss;
		ck_assert_uint_eq(sum->cpu[cpu].pages_with_loss > 0, c->lost_bundles > 0);
	}
	*ret_lost = lost;
}

/*
 * @ret_counted: the context switches the kernel counted from the start of
 * tracing to the end of the workload (/proc/stat), all of which the trace,
 * flushed after that, holds unless the buffer overran.
 */
static void record(uint32_t kb, uint32_t drain_ms, unsigned pairs, unsigned ms, struct rec *r,
		   struct tp_trace_summary *s, struct ftrace_ds_summary **ret_sum, struct tp_workload *wl,
		   uint64_t *ret_counted)
{
	char *events[] = { "sched/sched_switch", "sched/sched_waking" };
	Perfetto__Protos__FtraceConfig cfg = sched_config(events, 2, kb, drain_ms);
	const struct ftrace_ds_hooks hooks = { .pass_done = on_pass };
	struct ftrace_host *h = NULL;
	struct ftrace_ds *ds = NULL;
	struct loop *e = NULL;
	char *err = NULL;
	int rr;

	rec_init(r, 1);
	ck_assert_int_ge(loop_new(&e), 0);
	ck_assert_int_eq(ftrace_host_new(e, &h), 0);
	rr = ftrace_ds_setup(h, 1, 1, &cfg, SINK(r->w[0]), &hooks, r, &ds, &err);
	ck_assert_msg(rr == 0, "setup: %d %s", rr, err ? err : "");
	ck_assert_ptr_null(ftrace_ds_get_warnings(ds));
	ck_assert_int_eq(ftrace_ds_start(ds), 0);
	*ret_counted = tp_context_switches();

	ck_assert_int_eq(tp_workload_start("tp-live-wl", pairs, ms, wl), 0);
	run_until_done(e, wl);
	*ret_counted = tp_context_switches() - *ret_counted;

	ck_assert_int_eq(ftrace_ds_flush(ds), 0);
	pump(r, false);
	ck_assert_int_eq(ftrace_ds_get_summary(ds, ret_sum), 0);
	ftrace_ds_free(ds);
	ftrace_host_free(h);
	loop_unref(e);
	rec_finish(r);
	load(r, 0, s);
}

START_TEST(test_record_sched)
{
	struct ftrace_ds_summary *sum = NULL;
	struct tp_trace_summary s;
	struct tp_workload wl;
	bool present[TP_MAX_CPUS] = { 0 }, lost;
	unsigned n_cpus = (unsigned)MIN(sysconf(_SC_NPROCESSORS_CONF), TP_MAX_CPUS);
	uint64_t switches = 0, lost_pages = 0, counted;
	struct rec r;

	online_cpus_with_buffers(present, n_cpus);
	record(4096, 100, 2, 2000, &r, &s, &sum, &wl, &counted);

	ck_assert_uint_ge(r.passes, 5); /* the drain timer ran */
	ck_assert_uint_eq(s.stats_pairs, 1);
	reconcile(&s, sum, present, n_cpus, &lost, &lost_pages);
	if (lost)
		fprintf(stderr, "note: the kernel overran with a 4 MiB buffer: is the machine overloaded?\n");
	for (unsigned cpu = 0; cpu < n_cpus; cpu++)
		switches += s.cpu[cpu].switches;
	/*
	 * every switch the kernel counted meanwhile, on however slow a
	 * machine, give or take the few the last partial pages still held
	 */
	ck_assert_msg(switches > 0 && (lost || switches >= counted - counted / 100),
		      "%llu switches, the kernel counted %llu", (unsigned long long)switches,
		      (unsigned long long)counted);
	for (size_t i = 0; i < wl.n_tids; i++)
		ck_assert_msg(tp_trace_has_next_pid(&s, wl.tids[i]), "tid %d never switched in", wl.tids[i]);
	ck_assert(s.compact_bytes > 0); /* compact_sched is the default with sched_switch */
	ck_assert_uint_eq(s.packets_with_loss_flag, 0);

	tp_trace_free(&s);
	free(sum);
	rec_free(&r);
	assert_untouched();
}
END_TEST

START_TEST(test_record_starved)
{
	struct ftrace_ds_summary *sum = NULL;
	struct tp_trace_summary s;
	struct tp_workload wl;
	bool present[TP_MAX_CPUS] = { 0 }, lost = false;
	unsigned n_cpus = (unsigned)MIN(sysconf(_SC_NPROCESSORS_CONF), TP_MAX_CPUS);
	uint64_t lost_total = 0, lost_bundles = 0, lost_pages = 0, counted;
	struct rec r;

	online_cpus_with_buffers(present, n_cpus);
	/* A tiny buffer drained every 2 s under heavy load must overrun. */
	record(16, 2000, 4, 1500, &r, &s, &sum, &wl, &counted);

	reconcile(&s, sum, present, n_cpus, &lost, &lost_pages);
	ck_assert_uint_gt(lost_pages, 0);
	ck_assert_msg(lost, "a 16 KiB buffer drained every 2 s did not overrun");
	for (unsigned cpu = 0; cpu < n_cpus; cpu++) {
		lost_total += sum->cpu[cpu].lost_events;
		lost_bundles += s.cpu[cpu].lost_bundles;
		ck_assert_uint_ge(sum->cpu[cpu].lost_events, s.cpu[cpu].end_overrun - s.cpu[cpu].start_overrun);
	}
	ck_assert_uint_gt(lost_total, 0);
	ck_assert_uint_gt(lost_bundles, 0);

	tp_trace_free(&s);
	free(sum);
	rec_free(&r);
	assert_untouched();
}
END_TEST

/* Two data sources on one instance: each sees only its own events. */
START_TEST(test_two_sessions_one_instance)
{
	char *ev_a[] = { "sched/sched_switch" };
	char *ev_b[] = { "sched/sched_waking", "sched/sched_process_exit" };
	Perfetto__Protos__FtraceConfig ca = sched_config(ev_a, 1, 2048, 100);
	Perfetto__Protos__FtraceConfig cb = sched_config(ev_b, 2, 512, 50);
	const struct ftrace_ds_hooks hooks = { .pass_done = on_pass };
	struct tp_trace_summary sa, sb;
	struct ftrace_host *h = NULL;
	struct ftrace_ds *a = NULL, *b = NULL;
	struct tp_workload wl;
	struct loop *e = NULL;
	char *err = NULL, *v;
	uint64_t a_sw = 0, a_wk = 0, b_sw = 0, b_wk = 0, counted;
	struct rec r;

	rec_init(&r, 2);
	ck_assert_int_ge(loop_new(&e), 0);
	ck_assert_int_eq(ftrace_host_new(e, &h), 0);
	ck_assert_int_eq(ftrace_ds_setup(h, 1, 1, &ca, SINK(r.w[0]), &hooks, &r, &a, &err), 0);
	ck_assert_int_eq(ftrace_ds_setup(h, 2, 2, &cb, SINK(r.w[1]), &hooks, &r, &b, &err), 0);
	ck_assert_int_eq(ftrace_ds_start(a), 0);
	ck_assert_int_eq(ftrace_ds_start(b), 0);
	ck_assert_int_eq(ftrace_ds_start(b), -EALREADY);

	counted = tp_context_switches();
	ck_assert_int_eq(tp_workload_start("tp-live-two", 2, 800, &wl), 0);
	run_until_done(e, &wl);
	counted = tp_context_switches() - counted;
	ck_assert_int_eq(ftrace_ds_flush(a), 0);
	ck_assert_int_eq(ftrace_ds_flush(b), 0);

	/* A leaves: its event goes off, B's stay on and tracing stays on. */
	ftrace_ds_free(a);
	{
		char p[600];

		(void)snprintf(p, sizeof(p), "%s/set_event", g_inst_dir);
		ck_assert_int_eq(read_full_file_at(AT_FDCWD, p, 1 << 16, &v, NULL), 0);
		ck_assert_ptr_null(strstr(v, "sched:sched_switch"));
		ck_assert_ptr_nonnull(strstr(v, "sched:sched_waking"));
		free(v);
		(void)snprintf(p, sizeof(p), "%s/tracing_on", g_inst_dir);
		ck_assert_int_eq(read_full_file_at(AT_FDCWD, p, 64, &v, NULL), 0);
		ck_assert_str_eq(v, "1\n");
		free(v);
	}
	ftrace_ds_free(b);
	ftrace_host_free(h);
	loop_unref(e);
	rec_finish(&r);
	load(&r, 0, &sa);
	load(&r, 1, &sb);

	for (unsigned cpu = 0; cpu < TP_MAX_CPUS; cpu++) {
		a_sw += sa.cpu[cpu].switches;
		a_wk += sa.cpu[cpu].wakings + sa.cpu[cpu].other_events;
		b_sw += sb.cpu[cpu].switches;
		b_wk += sb.cpu[cpu].wakings;
	}
	/* A has (all but a few of) the switches the kernel counted meanwhile */
	ck_assert_msg(a_sw > 0 && a_sw >= counted - counted / 100, "A: %llu switches, the kernel counted %llu",
		      (unsigned long long)a_sw, (unsigned long long)counted);
	ck_assert_uint_eq(a_wk, 0);
	ck_assert_uint_eq(b_sw, 0);
	/* the workload's switches come from pipe wake-ups: B saw them too */
	ck_assert_msg(b_wk >= a_sw / 10, "B: %llu wakings for %llu switches", (unsigned long long)b_wk,
		      (unsigned long long)a_sw);
	ck_assert_uint_eq(sa.stats_pairs, 1);
	ck_assert_uint_eq(sb.stats_pairs, 1);

	tp_trace_free(&sa);
	tp_trace_free(&sb);
	rec_free(&r);
	assert_untouched();
}
END_TEST

static char *inst_file(const char *f)
{
	char p[600];
	char *v = NULL;

	(void)snprintf(p, sizeof(p), "%s/%s", g_inst_dir, f);
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, p, 1 << 16, &v, NULL), 0);
	return v;
}

/* Unknown and malformed event names are reported in FtraceStats, not fatal. */
START_TEST(test_unknown_events_in_stats)
{
	char *events[] = { "sched/sched_switch", "sched/no_such_event", "../x", "initcall/initcall_level" };
	Perfetto__Protos__FtraceConfig cfg = sched_config(events, 4, 256, 100);
	struct ftrace_host *h = NULL;
	struct ftrace_ds *ds = NULL;
	Perfetto__Protos__Trace *t;
	struct loop *e = NULL;
	bool found_start = false, found_end = false;
	struct rec r;

	/* an event Perfetto has no message for, with generic events disabled: failed */
	ck_assert(!ftrace_translate_is_typed("initcall", "initcall_level"));
	cfg.has_disable_generic_events = true;
	cfg.disable_generic_events = true;
	rec_init(&r, 1);
	ck_assert_int_ge(loop_new(&e), 0);
	ck_assert_int_eq(ftrace_host_new(e, &h), 0);
	ck_assert_int_eq(ftrace_ds_setup(h, 1, 1, &cfg, SINK(r.w[0]), NULL, NULL, &ds, NULL), 0);
	{
		char *v = inst_file("events/initcall/initcall_level/enable");

		ck_assert_str_eq(v, "0\n"); /* never enabled in the kernel */
		free(v);
	}
	ck_assert_int_eq(ftrace_ds_start(ds), 0);
	ck_assert_int_eq(ftrace_ds_flush(ds), 0);
	ftrace_host_free(h); /* frees ds too */
	loop_unref(e);
	rec_finish(&r);

	t = perfetto__protos__trace__unpack(NULL, r.trace_len[0], (const uint8_t *)r.trace[0]);
	ck_assert_ptr_nonnull(t);
	for (size_t i = 0; i < t->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = t->packet[i];
		const Perfetto__Protos__FtraceStats *st = p->ftrace_stats;

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS)
			continue;
		/* as in the v58.2 reference trace: no timestamp, sizes in both phases */
		ck_assert(!p->has_timestamp);
		ck_assert(st->has_cpu_buffer_size_pages && st->cpu_buffer_size_pages >= 64);
		ck_assert(st->has_kernel_symbols_parsed && st->kernel_symbols_parsed == 0);
		if (st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE) {
			found_start = true;
			ck_assert_uint_eq(st->n_unknown_ftrace_events, 2);
			ck_assert_str_eq(st->unknown_ftrace_events[0], "sched/no_such_event");
			ck_assert_str_eq(st->unknown_ftrace_events[1], "../x");
			ck_assert_uint_eq(st->n_failed_ftrace_events, 1);
			ck_assert_str_eq(st->failed_ftrace_events[0], "initcall/initcall_level");
			ck_assert_uint_gt(st->n_cpu_stats, 0);
		} else {
			found_end = true;
			ck_assert_int_eq(st->phase, PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE);
			ck_assert_uint_eq(st->n_unknown_ftrace_events, 0);
			ck_assert_uint_eq(st->n_ftrace_parse_errors, 0);
			ck_assert(st->has_cpu_buffer_size_pages && st->cpu_buffer_size_pages >= 64);
			ck_assert(st->has_cached_cpu_buffer_size_pages && st->cached_cpu_buffer_size_pages == 64);
			ck_assert_uint_gt(st->n_cpu_stats, 0);
			ck_assert(st->cpu_stats[0]->has_now_ts && st->cpu_stats[0]->now_ts > 0);
		}
	}
	ck_assert(found_start && found_end);
	perfetto__protos__trace__free_unpacked(t, NULL);
	rec_free(&r);
	assert_untouched();
}
END_TEST

/*
 * trace_clock mono_raw: every bundle says which clock its timestamps use
 * and carries an (ftrace clock, boottime) pair taken together.
 */
START_TEST(test_mono_raw_clock_fields)
{
	char *events[] = { "sched/sched_switch" };
	Perfetto__Protos__FtraceConfig cfg = sched_config(events, 1, 512, 50);
	const struct ftrace_ds_hooks hooks = { .pass_done = on_pass };
	struct ftrace_host *h = NULL;
	struct ftrace_ds *ds = NULL;
	Perfetto__Protos__Trace *t;
	struct tp_workload wl;
	struct loop *e = NULL;
	size_t bundles = 0;
	char *v;
	struct rec r;

	v = inst_file("trace_clock");
	if (!strstr(v, "mono_raw")) {
		free(v);
		return; /* not on this kernel */
	}
	free(v);
	cfg.has_use_monotonic_raw_clock = true;
	cfg.use_monotonic_raw_clock = true;
	rec_init(&r, 1);
	ck_assert_int_ge(loop_new(&e), 0);
	ck_assert_int_eq(ftrace_host_new(e, &h), 0);
	ck_assert_int_eq(ftrace_ds_setup(h, 1, 1, &cfg, SINK(r.w[0]), &hooks, &r, &ds, NULL), 0);
	v = inst_file("trace_clock");
	ck_assert_ptr_nonnull(strstr(v, "[mono_raw]"));
	free(v);
	ck_assert_int_eq(ftrace_ds_start(ds), 0);
	ck_assert_int_eq(tp_workload_start("tp-live-clk", 1, 300, &wl), 0);
	run_until_done(e, &wl);
	ck_assert_int_eq(ftrace_ds_flush(ds), 0);
	ftrace_ds_free(ds);
	ftrace_host_free(h);
	loop_unref(e);
	rec_finish(&r);

	t = perfetto__protos__trace__unpack(NULL, r.trace_len[0], (const uint8_t *)r.trace[0]);
	ck_assert_ptr_nonnull(t);
	for (size_t i = 0; i < t->n_packet; i++) {
		const Perfetto__Protos__FtraceEventBundle *b = t->packet[i]->ftrace_events;

		if (t->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			continue;
		bundles++;
		ck_assert(b->has_ftrace_clock);
		ck_assert_int_eq(b->ftrace_clock, PERFETTO__PROTOS__FTRACE_CLOCK__FTRACE_CLOCK_MONO_RAW);
		ck_assert(b->has_ftrace_timestamp && b->ftrace_timestamp > 0);
		ck_assert(b->has_boot_timestamp && b->boot_timestamp > 0);
	}
	ck_assert_uint_gt(bundles, 0);
	perfetto__protos__trace__free_unpacked(t, NULL);
	rec_free(&r);
	assert_untouched();
}
END_TEST

/*
 * preserve_ftrace_buffer: the buffer, its size and the clock are left
 * alone, what was already in the buffer is read, and the start says so.
 */
START_TEST(test_preserve_buffer)
{
	char *events[] = { "sched/sched_switch" };
	Perfetto__Protos__FtraceConfig cfg = sched_config(events, 1, 512, 100);
	struct ftrace_host *h = NULL;
	struct ftrace_ds *ds = NULL;
	Perfetto__Protos__Trace *t;
	struct loop *e = NULL;
	char *clock_before = inst_file("trace_clock"), *size_before = inst_file("buffer_size_kb"), *v;
	char p[600];
	bool preserve_start = false;
	int fd;
	struct rec r;

	/* Something already in the buffer: a marker written before we start. */
	(void)snprintf(p, sizeof(p), "%s/trace_marker", g_inst_dir);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, "tp-preserved", 12), 0);
	close(fd);

	cfg.has_preserve_ftrace_buffer = true;
	cfg.preserve_ftrace_buffer = true;
	events[0] = "ftrace/print";
	rec_init(&r, 1);
	ck_assert_int_ge(loop_new(&e), 0);
	ck_assert_int_eq(ftrace_host_new(e, &h), 0);
	ck_assert_int_eq(ftrace_ds_setup(h, 1, 1, &cfg, SINK(r.w[0]), NULL, NULL, &ds, NULL), 0);
	v = inst_file("trace_clock");
	ck_assert_str_eq(v, clock_before);
	free(v);
	v = inst_file("buffer_size_kb");
	ck_assert_str_eq(v, size_before);
	free(v);
	ck_assert_int_eq(ftrace_ds_start(ds), 0);
	ck_assert_int_eq(ftrace_ds_flush(ds), 0);
	ftrace_ds_free(ds);
	ftrace_host_free(h);
	loop_unref(e);
	rec_finish(&r);

	t = perfetto__protos__trace__unpack(NULL, r.trace_len[0], (const uint8_t *)r.trace[0]);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_ge(t->n_packet, 3);
	/* The first packet: START_OF_TRACE with preserve_ftrace_buffer, written at start. */
	for (size_t i = 0; i < t->n_packet; i++) {
		const Perfetto__Protos__TracePacket *pk = t->packet[i];

		if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS &&
		    pk->ftrace_stats->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE &&
		    pk->ftrace_stats->has_preserve_ftrace_buffer && pk->ftrace_stats->preserve_ftrace_buffer) {
			preserve_start = true;
			ck_assert_uint_eq(i, 0);
			break;
		}
	}
	ck_assert(preserve_start);
	{
		/* the marker from before the start is in the trace */
		bool found = false;

		for (size_t i = 0; i < t->n_packet && !found; i++) {
			const Perfetto__Protos__FtraceEventBundle *b = t->packet[i]->ftrace_events;

			if (t->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
				continue;
			for (size_t k = 0; k < b->n_event; k++)
				if (b->event[k]->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT &&
				    strstr(b->event[k]->print->buf, "tp-preserved"))
					found = true;
		}
		ck_assert_msg(found, "the marker written before start is not in the trace");
	}
	perfetto__protos__trace__free_unpacked(t, NULL);
	free(clock_before);
	free(size_before);
	rec_free(&r);
	assert_untouched();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_live");
	TCase *k = tcase_create("kernel");

	tcase_add_unchecked_fixture(k, setup, teardown);
	tcase_add_checked_fixture(k, snap_top, NULL);
	tcase_set_timeout(k, 240);
	tcase_add_test(k, test_unknown_events_in_stats);
	tcase_add_test(k, test_record_sched);
	tcase_add_test(k, test_record_starved);
	tcase_add_test(k, test_two_sessions_one_instance);
	tcase_add_test(k, test_mono_raw_clock_fields);
	tcase_add_test(k, test_preserve_buffer);
	suite_add_tcase(s, k);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	if (!tp_kernel_available()) {
		fprintf(stderr, "skipped: needs root and tracefs\n");
		return 77;
	}
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
