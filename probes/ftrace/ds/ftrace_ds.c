/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One linux.ftrace data source: SetupDataSource (validate, resolve events,
 * configure tracefs), StartDataSource (tracing on, stats snapshot, drain),
 * Flush (read now, FtraceStats pair) and StopDataSource (release what only
 * it needed; the last one restores tracefs).
 */

#include <malloc.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/ds/ftrace_ds_internal.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "probes/ksyms/ksyms.h"
#include "util/util.h"

#define FTRACE_STATS_PHASE_START 1
#define FTRACE_STATS_PHASE_END 2

/* Distinct pids one data source can note in one pass. */
#define FTRACE_PIDSET_CAPACITY 32768u

struct ftrace_ds {
	struct ftrace_host *host;
	struct ftrace_drain *drain;     /* of its tracefs directory, shared */
	struct ftrace_tracefs *tfs;     /* the drain's */
	unsigned n_cpus;                /* the drain's */
	struct ftrace_drain_reader reader;
	uint64_t instance_id;
	uint64_t tracing_session_id;

	struct ftrace_event_list *avail;  /* cfg->events point into it */
	struct ftrace_config *cfg;
	bool *enabled;                  /* per cfg->events: we hold a tracefs reference */
	char **failed;                  /* failed_ftrace_events */
	size_t n_failed;
	char *warnings;

	struct pbw_sink sink;
	struct ftrace_ds_hooks hooks;
	void *userdata;
	struct ftrace_parser *parser;
	struct ftrace_print_filter *print_filter;
	struct ftrace_pidset *pids;
	struct ftrace_cpu_state *cpu_state;     /* [n_cpus] */
	struct ftrace_pass_stats *cpu_pass;     /* [n_cpus], cumulative */
	struct ftrace_cpu_stats *start_stats;   /* [n_cpus], at start */

	struct ftrace_extra *extra;     /* kprobes, filters, tracer, options */
	struct ftrace_symbolizer sym;   /* symbolize_ksyms */
	bool ksyms_ref;                 /* holds a reference on the host's map */
	uint32_t ksyms_parsed, ksyms_mem_kb;

	bool attached;
	bool started;
	bool tracing_released;          /* ftrace_ds_flush_final() gave up tracing_on */
	bool ended;                     /* after the last flush: reads nothing more */
	struct ftrace_cpu_stats *end_stats;  /* [n_cpus], the last END sample once ended */
	uint64_t first_page_ts;         /* earliest page timestamp read; 0: none yet */
	bool ever_started;
	uint64_t passes;
	uint32_t read_errors_mask;      /* 1u << FtraceParseStatus for read failures */
};

/* ---- the reader: what the drain calls in each pass ------------------------ */

static struct ftrace_ds *ds_of(struct ftrace_drain_reader *r)
{
	return (struct ftrace_ds *)((char *)r - offsetof(struct ftrace_ds, reader));
}

static void reader_pass_begin(struct ftrace_drain_reader *r, enum ftrace_clock clock, int64_t ftrace_ts,
			      int64_t boot_ts)
{
	ftrace_parser_set_clock(ds_of(r)->parser, clock, ftrace_ts, boot_ts);
}

static void reader_batch_begin(struct ftrace_drain_reader *r, unsigned cpu, size_t page_size)
{
	struct ftrace_ds *ds = ds_of(r);

	(void)ftrace_parser_batch_begin(ds->parser, cpu, page_size, &ds->sink,
					&ds->cpu_state[cpu], ds->pids, &ds->cpu_pass[cpu]);
}

static void reader_batch_page(struct ftrace_drain_reader *r, const uint8_t *page)
{
	struct ftrace_ds *ds = ds_of(r);
	uint64_t ts;

	/* A page's header timestamp is that of its first event: the earliest
	 * one read is where the recorded data begins (the span in summaries). */
	memcpy(&ts, page, sizeof(ts));
	if (ts && (ds->first_page_ts == 0 || ts < ds->first_page_ts))
		ds->first_page_ts = ts;
	ftrace_parser_batch_page(ds->parser, page);
}

static void reader_batch_end(struct ftrace_drain_reader *r)
{
	(void)ftrace_parser_batch_end(ds_of(r)->parser);
}

static void reader_read_error(struct ftrace_drain_reader *r, int status)
{
	if (status > 0 && status < 32)
		ds_of(r)->read_errors_mask |= 1u << status;
}

static void reader_pass_end(struct ftrace_drain_reader *r)
{
	struct ftrace_ds *ds = ds_of(r);

	ds->passes++;
	if (ds->hooks.pass_done)
		ds->hooks.pass_done(ds, ds->pids, ds->userdata);
	ftrace_symbolize_pass_end(&ds->sym);
	ftrace_pidset_clear(ds->pids);
}

static void reader_release(struct ftrace_drain_reader *r)
{
	ftrace_ds_free(ds_of(r));
}

static int start_now(struct ftrace_ds *ds);

/* The resize the start waited for is over: start now, then say so. */
static void reader_ready(struct ftrace_drain_reader *r, const char *why)
{
	struct ftrace_ds *ds = ds_of(r);
	int k = start_now(ds);

	if (ds->hooks.started)
		ds->hooks.started(ds, k, why, ds->userdata);
}

static const struct ftrace_drain_reader_ops reader_ops = {
	.pass_begin = reader_pass_begin,
	.batch_begin = reader_batch_begin,
	.batch_page = reader_batch_page,
	.batch_end = reader_batch_end,
	.read_error = reader_read_error,
	.pass_end = reader_pass_end,
	.release = reader_release,
	.ready = reader_ready,
};

/* ---- lifecycle ------------------------------------------------------------ */

static void ds_freep(struct ftrace_ds **ds)
{
	ftrace_ds_free(*ds);
}

/*
 * Setup reads directory listings and whole files into buffers it frees
 * again (a few hundred KiB in all): hand those pages back now rather than
 * keep them resident for the whole session.
 */
static void ftrace_plan_freep(struct ftrace_plan **p)
{
	ftrace_plan_free(*p);
}

static void trim_heap(void)
{
#ifdef __GLIBC__
	(void)malloc_trim(0);
#endif
}

static uint64_t ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);

	return pages > 0 && ps > 0 ? (uint64_t)pages * (uint64_t)ps : 0;
}

/* Copy the failures of the options beyond events into failed_ftrace_events. */
static int take_extra_failed(struct ftrace_ds *ds)
{
	char *const *f;
	size_t n = ftrace_extra_failed(ds->extra, &f);
	char **v;

	if (n == 0)
		return 0;
	v = reallocarray(ds->failed, ds->n_failed + n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	ds->failed = v;
	for (size_t i = 0; i < n; i++) {
		ds->failed[ds->n_failed] = strdup(f[i]);
		if (!ds->failed[ds->n_failed])
			return -ENOMEM;
		ds->n_failed++;
	}
	return 0;
}

/*
 * symbolize_ksyms: the host's map (loaded once); when the kernel hides
 * addresses there is nothing to name, which is said once, not fatal.
 */
static int setup_ksyms(struct ftrace_ds *ds)
{
	const struct ksyms *k = NULL;
	_cleanup_free_ char *line = NULL;
	int r;

	r = ftrace_host_ksyms_get(ds->host, &k);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (r == -EPERM)
			line = strdup("symbolize_ksyms: the kernel hides symbol addresses (kernel.kptr_restrict, or no "
				      "CAP_SYSLOG): kernel functions are written without names");
		else
			line = strdup_printf("symbolize_ksyms: cannot load /proc/kallsyms: %s", strerror(-r));
		return line ? str_append_line(&ds->warnings, line) : -ENOMEM;
	}
	ds->ksyms_ref = true;
	ds->sym.k = k;
	ds->ksyms_parsed = (uint32_t)MIN(ksyms_count(k), (size_t)UINT32_MAX);
	ds->ksyms_mem_kb = (uint32_t)MIN(ksyms_mem_bytes(k) / 1024, (size_t)UINT32_MAX);
	ftrace_parser_set_bundle_hook(ds->parser, ftrace_symbolize_bundle, &ds->sym);
	return 0;
}

static int add_failed(struct ftrace_ds *ds, const struct ftrace_event_name *e, const char *why)
{
	char **n = reallocarray(ds->failed, ds->n_failed + 1, sizeof(*n));
	_cleanup_free_ char *line = NULL;

	if (!n)
		return -ENOMEM;
	ds->failed = n;
	ds->failed[ds->n_failed] = strdup_printf("%s/%s", e->group, e->name);
	if (!ds->failed[ds->n_failed])
		return -ENOMEM;
	ds->n_failed++;
	line = strdup_printf("failed to enable ftrace event %s/%s: %s", e->group, e->name, why);
	return line ? str_append_line(&ds->warnings, line) : -ENOMEM;
}

/*
 * Formats first: an event the parser cannot take is reported as failed and
 * never enabled in the kernel.
 */
static int load_events(struct ftrace_ds *ds)
{
	struct ftrace_config *c = ds->cfg;
	size_t w = 0;
	int r;

	for (size_t i = 0; i < c->n_events; i++) {
		const struct ftrace_event_name *e = c->events[i];
		int id;

		r = ftrace_format_table_load_event(ftrace_drain_format_table(ds->drain), e->group, e->name, &id);
		if (r == -ENOMEM)
			return r;
		if (r >= 0) {
			r = ftrace_parser_enable(ds->parser, id);
			if (r == -ENOMEM)
				return r;
		}
		if (r < 0) {
			r = add_failed(ds, e, r == -EOPNOTSUPP ? "generic events are disabled" : strerror(-r));
			if (r < 0)
				return r;
			continue;
		}
		c->events[w++] = e;
	}
	c->n_events = w;
	return 0;
}

/*
 * The kernel's list of available events (thousands of names) is only
 * needed to resolve the config: keep copies of the events the session uses
 * and let the rest go, rather than hold a few hundred KiB for its life.
 */
static int keep_used_events(struct ftrace_ds *ds)
{
	struct ftrace_config *c = ds->cfg;
	struct ftrace_event_list *used = NULL;
	int r;

	r = ftrace_event_list_new(&used);
	for (size_t i = 0; r >= 0 && i < c->n_events; i++)
		r = ftrace_event_list_add(used, c->events[i]->group, c->events[i]->name,
					  c->events[i]->flags);
	if (r < 0) {
		ftrace_event_list_free(used);
		return r;
	}
	ftrace_event_list_sort(used);
	for (size_t i = 0; i < c->n_events; i++) {
		const struct ftrace_event_name *e = ftrace_event_list_find(used, c->events[i]->group,
									   c->events[i]->name);

		/* Names the list would refuse were never resolved: cannot happen. */
		if (!e) {
			ftrace_event_list_free(used);
			return -EINVAL;
		}
		c->events[i] = e;
	}
	ftrace_event_list_free(ds->avail);
	ds->avail = used;
	return 0;
}

/* available_filter_functions is a few MiB on a large kernel. */
#define FUNCS_TEXT_MAX (64u << 20)

/* ftrace_plan_env.read_events: the directory's drain, joined, then its events. */
static int plan_read_events(void *userdata, const char *instance_name, bool exclusive, const char *const *reqs,
			    size_t n_reqs, struct ftrace_event_list **ret, char **ret_error)
{
	struct ftrace_ds *ds = userdata;
	int r;

	r = ftrace_host_get_drain(ds->host, instance_name, &ds->drain, ret_error);
	if (r < 0)
		return r;
	/* Attached from here on so that freeing it on failure releases the directory. */
	ds->reader.ops = &reader_ops;
	ftrace_drain_add_reader(ds->drain, &ds->reader);
	ds->tfs = ftrace_drain_tracefs(ds->drain);
	ds->n_cpus = ftrace_drain_n_cpus(ds->drain);

	r = ftrace_extra_check(exclusive, ds->tfs, ret_error);
	if (r < 0)
		return r;
	r = ftrace_tracefs_read_available(ds->tfs, reqs, n_reqs, ret);
	if (r < 0)
		set_error_text(ret_error, strdup_printf("read %s/available_events: %s",
							 ftrace_tracefs_path(ds->tfs), strerror(-r)));
	return r;
}

/* ftrace_plan_env.read_functions: only the top level has it; the functions are the kernel's. */
static int plan_read_functions(void *userdata, char **ret_text)
{
	struct ftrace_ds *ds = userdata;

	return ftrace_tracefs_read_root(ds->tfs, "available_filter_functions", FUNCS_TEXT_MAX, ret_text);
}

/* What the first attach did with the sub-buffer size, said once where it matters. */
static void note_subbuf(struct ftrace_ds *ds, uint32_t kb)
{
	const char *path = ftrace_tracefs_path(ds->tfs);

	switch (ftrace_tracefs_subbuf_outcome(ds->tfs)) {
	case FTRACE_SUBBUF_SET:
		/* Deferred, the resize thread writes it and its end says whether the kernel took it. */
		log_debug("linux.ftrace: %s: sub-buffers of %u KiB", path, kb);
		break;
	case FTRACE_SUBBUF_ABSENT:
		if (ftrace_host_once(ds->host, FTRACE_HOST_ONCE_SUBBUF))
			log_notice("linux.ftrace: this kernel has no buffer_subbuf_size_kb (Linux 6.8 and later "
				   "have it): ring buffers are read a page at a time");
		break;
	case FTRACE_SUBBUF_REFUSED:
		ftrace_note_subbuf_refused(ds->tfs, kb);
		break;
	default:
		break;
	}
}

int ftrace_ds_setup(struct ftrace_host *h, uint64_t instance_id, uint64_t tracing_session_id,
		    const struct Perfetto__Protos__FtraceConfig *cfg, const struct pbw_sink *sink,
		    const struct ftrace_ds_hooks *hooks, void *userdata, struct ftrace_ds **ret, char **ret_error)
{
	_cleanup_(ds_freep) struct ftrace_ds *ds = NULL;
	_cleanup_(ftrace_plan_freep) struct ftrace_plan *plan = NULL;
	_cleanup_free_ char *enable_errors = NULL;
	struct ftrace_plan_env env;
	struct ftrace_tracefs_params tp;
	struct ftrace_parser_opts po;
	unsigned n_cpus;
	int r;

	if (!h || !cfg || !sink || !sink->begin_packet || !sink->end_packet || !ret)
		return -EINVAL;

	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->host = h;
	ds->instance_id = instance_id;
	ds->tracing_session_id = tracing_session_id;
	ds->sink = *sink;
	if (hooks)
		ds->hooks = *hooks;
	ds->userdata = userdata;

	/* The config is read here, once; everything below takes the plan. */
	env = (struct ftrace_plan_env){
		.read_events = plan_read_events,
		.read_functions = plan_read_functions,
		.userdata = ds,
		.ram_bytes = ram_bytes(),
	};
	r = ftrace_plan_resolve(cfg, &env, &plan, ret_error);
	if (r < 0)
		return r;
	n_cpus = ds->n_cpus;
	ds->avail = TAKE_PTR(plan->avail);
	ds->cfg = TAKE_PTR(plan->config);
	if (ds->cfg->warnings) {
		ds->warnings = strdup(ds->cfg->warnings);
		if (!ds->warnings)
			return -ENOMEM;
	}
	if (ds->cfg->atrace_userspace && ftrace_host_once(h, FTRACE_HOST_ONCE_ATRACE) &&
	    str_append_line(&ds->warnings, "atrace: Linux has no userspace atrace (atrace_apps and the userspace half "
				    "of atrace_categories record nothing); recording the categories' kernel events "
				    "and ftrace/print") < 0)
		return -ENOMEM;

	po = (struct ftrace_parser_opts){
		.compact_sched = ds->cfg->compact_sched,
		.generic_dense = ds->cfg->denser_generic_events,
		.disable_generic_events = ds->cfg->disable_generic_events,
	};
	r = ftrace_parser_new(ftrace_drain_format_table(ds->drain), &po, &ds->parser);
	if (r < 0)
		return r;
	r = load_events(ds);
	if (r < 0)
		return r;
	r = ftrace_print_filter_new(plan->print_rules, plan->n_print_rules, &ds->print_filter);
	if (r < 0)
		return r == -ENOMEM ? r : -EINVAL;
	ftrace_parser_set_print_filter(ds->parser, ds->print_filter);
	r = keep_used_events(ds);
	if (r < 0)
		return r;
	/*
	 * The map costs ~60 ms of CPU and ~1.4 MiB to build: only when an
	 * enabled event can name a kernel address (`perfetto -t` asks for
	 * symbolize_ksyms whatever the events).
	 */
	if (ds->cfg->symbolize_ksyms && ftrace_parser_has_kernel_addresses(ds->parser)) {
		r = setup_ksyms(ds);
		if (r < 0)
			return r;
	}
	r = ftrace_extra_new(plan, &ds->extra);
	if (r < 0)
		return r;

	ds->enabled = calloc(ds->cfg->n_events ? ds->cfg->n_events : 1, sizeof(bool));
	ds->cpu_state = calloc(n_cpus, sizeof(*ds->cpu_state));
	ds->cpu_pass = calloc(n_cpus, sizeof(*ds->cpu_pass));
	ds->start_stats = calloc(n_cpus, sizeof(*ds->start_stats));
	ds->end_stats = calloc(n_cpus, sizeof(*ds->end_stats));
	if (!ds->enabled || !ds->cpu_state || !ds->cpu_pass || !ds->start_stats || !ds->end_stats)
		return -ENOMEM;
	r = ftrace_pidset_new(FTRACE_PIDSET_CAPACITY, &ds->pids);
	if (r < 0)
		return r;

	tp = (struct ftrace_tracefs_params){
		.buffer_size_kb = ds->cfg->buffer_size_kb,
		.drain_buffer_percent = ds->cfg->drain_buffer_percent,
		.preserve = ds->cfg->preserve,
		.mono_raw = ds->cfg->mono_raw,
		.defer_resize = ds->hooks.started != NULL,
		.subbuf_kb = ftrace_tracefs_subbuf_kb(ftrace_host_subbuf_kb(), ds->cfg->buffer_size_kb),
	};
	r = ftrace_tracefs_attach(ds->tfs, &tp, ret_error);
	if (r < 0)
		return r;
	ds->attached = true;
	if (ftrace_tracefs_n_attached(ds->tfs) == 1)
		note_subbuf(ds, tp.subbuf_kb);

	r = ftrace_tracefs_enable_events(ds->tfs, ds->cfg->events, ds->cfg->n_events, ds->enabled,
					 &enable_errors);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("enable ftrace events in %s: %s",
								 ftrace_tracefs_path(ds->tfs), strerror(-r)));
		return r;
	}
	for (size_t i = 0; i < ds->cfg->n_events; i++) {
		if (ds->enabled[i])
			continue;
		r = add_failed(ds, ds->cfg->events[i], "the kernel refused it");
		if (r < 0)
			return r;
	}
	if (enable_errors && str_append_line(&ds->warnings, enable_errors) < 0)
		return -ENOMEM;

	r = ftrace_extra_setup_kprobes(ds->extra, ds->tfs, ftrace_drain_format_table(ds->drain), ds->parser);
	if (r < 0)
		return r;
	r = ftrace_extra_apply(ds->extra, ds->cfg, ds->tfs, ret_error);
	if (r < 0)
		return r;
	r = take_extra_failed(ds);
	if (r < 0)
		return r;
	if (ftrace_extra_warnings(ds->extra) && str_append_line(&ds->warnings, ftrace_extra_warnings(ds->extra)) < 0)
		return -ENOMEM;

	/*
	 * The resize last: the kernel holds its tracefs-wide lock for the
	 * whole resize, and every open of a tracefs file (of any instance)
	 * waits for it, so nothing of the setup may come after it on the
	 * loop.  It runs while the service sends StartDataSource; without a
	 * thread, here and now.
	 */
	if (tp.defer_resize && ftrace_drain_resize_start(ds->drain) < 0)
		ftrace_drain_resize_wait(ds->drain);

	*ret = TAKE_PTR(ds);
	trim_heap();
	return 0;
}

/*
 * Like traced_probes v58.2 (see the reference trace), the packet carries no
 * TracePacket.timestamp: the stats describe the whole trace, not a moment.
 */
static void write_stats_packet(struct ftrace_ds *ds, const struct ftrace_stats_msg *m)
{
	struct pbw *pw = ds->sink.begin_packet(ds->sink.userdata);

	if (!pw)
		return;
	ftrace_stats_encode(pw, m);
	(void)ds->sink.end_packet(ds->sink.userdata);
}

static void sink_flush(struct ftrace_ds *ds)
{
	if (ds->sink.flush)
		ds->sink.flush(ds->sink.userdata);
}

static void snapshot_stats(struct ftrace_ds *ds, struct ftrace_cpu_stats *out)
{
	for (unsigned cpu = 0; cpu < ds->n_cpus; cpu++) {
		out[cpu] = (struct ftrace_cpu_stats){ .cpu = cpu };
		/* An absent CPU stays present == 0 and is left out of the packet. */
		if (ftrace_stats_read(ds->tfs, cpu, &out[cpu]) < 0)
			out[cpu].present = 0;
	}
}

static bool any_entries(const struct ftrace_cpu_stats *st, unsigned n)
{
	for (unsigned cpu = 0; cpu < n; cpu++)
		if (st[cpu].present && st[cpu].entries > 0)
			return true;
	return false;
}

int ftrace_ds_start(struct ftrace_ds *ds)
{
	if (!ds)
		return -EINVAL;
	if (ds->started || ds->reader.waiting)
		return -EALREADY;
	/* Tracing on now would record into a buffer the resize is about to rebuild. */
	if (ftrace_drain_resizing(ds->drain)) {
		if (!ds->hooks.started) {
			ftrace_drain_resize_wait(ds->drain);
		} else {
			ds->reader.waiting = true;
			return FTRACE_DS_START_LATER;
		}
	}
	return start_now(ds);
}

static int start_now(struct ftrace_ds *ds)
{
	int r;

	r = ftrace_drain_open_cpus(ds->drain);
	if (r < 0)
		return r;
	r = ftrace_tracefs_activate(ds->tfs, ds->cfg->drain_buffer_percent);
	if (r < 0)
		return r;
	snapshot_stats(ds, ds->start_stats);
	memset(ds->cpu_pass, 0, ds->n_cpus * sizeof(*ds->cpu_pass));
	ds->started = true;
	ds->ever_started = true;
	ds->reader.period_ms = ds->cfg->drain_period_ms;
	ds->reader.buffer_percent = ds->cfg->drain_buffer_percent;
	ds->reader.started = true;

	if (ds->cfg->preserve) {
		struct ftrace_stats_msg m = { .phase = FTRACE_STATS_PHASE_START, .preserve_ftrace_buffer = true };

		write_stats_packet(ds, &m);
	}

	r = ftrace_host_update_timer(ds->host);
	if (r < 0) {
		ds->started = false;
		ds->reader.started = false;
		(void)ftrace_tracefs_deactivate(ds->tfs);
		return r;
	}
	ftrace_drain_arm_wake(ds->drain);
	return 0;
}

static uint32_t parse_errors_mask(const struct ftrace_ds *ds)
{
	uint32_t m = ds->read_errors_mask;

	for (unsigned cpu = 0; cpu < ds->n_cpus; cpu++)
		m |= ds->cpu_pass[cpu].parse_errors_mask;
	return m;
}

static uint32_t kb_to_pages(uint32_t kb, size_t page_size)
{
	uint64_t bytes = (uint64_t)kb * 1024;

	return (uint32_t)((bytes + page_size - 1) / page_size);
}

/*
 * FtraceStats.cpu_buffer_size_pages is in system pages whatever the
 * sub-buffer size, as traced_probes computes it (buffer_size_kb over the
 * page size): a reader multiplies it by the page size to get the bytes.
 */
static uint32_t kb_to_sys_pages(uint32_t kb)
{
	long ps = sysconf(_SC_PAGESIZE);

	return kb_to_pages(kb, ps > 0 ? (size_t)ps : 4096);
}

/*
 * After the session's last flush: no pass feeds this data source any more,
 * and its summary keeps the END sample that flush wrote.  Without this, a
 * pass between the last flush and StopDataSource (a buffer_percent wake-up,
 * the drain timer, both overdue after the process was stopped) put events
 * into the trace after its END_OF_TRACE stats: a CPU then held more events
 * than END - START read_events.
 */
static void end_reading(struct ftrace_ds *ds, const struct ftrace_cpu_stats *end)
{
	if (!ds->started || ds->ended || !end)
		return;
	memcpy(ds->end_stats, end, ds->n_cpus * sizeof(*end));
	ds->ended = true;
	ds->reader.started = false;
	ftrace_drain_arm_wake(ds->drain);
	(void)ftrace_host_update_timer(ds->host);
}

static int flush(struct ftrace_ds *ds, bool last)
{
	_cleanup_free_ struct ftrace_cpu_stats *now = NULL;
	_cleanup_free_ uint64_t *skipped = NULL;
	struct ftrace_stats_msg m;
	uint32_t kb = 0;
	int r;

	if (!ds)
		return -EINVAL;
	/* Ended: the last pair stands; a new END sample would count reads the trace does not hold. */
	if (!ds->started || ds->ended) {
		sink_flush(ds);
		return 0;
	}

	/*
	 * Read first, then sample the END stats: every event the kernel counts
	 * as read is then in a bundle before the END packet (Perfetto samples
	 * just before its last read, so its counts are off by a few events).
	 */
	r = ftrace_drain_pass(ds->drain, /* flush= */ true, NULL);
	now = calloc(ds->n_cpus, sizeof(*now));
	if (now) {
		snapshot_stats(ds, now);
		/*
		 * With tracing off (the final flush), entries the kernel still
		 * counts are writes that were in flight when tracing stopped and
		 * committed after the read (a writer preempted mid-commit, or a
		 * vCPU the host did not run): give them a millisecond and read
		 * again, a few times at most.  An entry the kernel will not hand
		 * out is reported in the END stats, not waited for.
		 */
		for (unsigned i = 0; i < 4 && ds->tracing_released && any_entries(now, ds->n_cpus); i++) {
			int k;

			(void)nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
			k = ftrace_drain_pass(ds->drain, /* flush= */ true, NULL);

			if (k < 0 && r == 0)
				r = k;
			snapshot_stats(ds, now);
		}
	}

	(void)ftrace_tracefs_read_buffer_kb(ds->tfs, &kb);
	/* Read and not written, since start: what read_events counts that the trace does not hold. */
	skipped = calloc(ds->n_cpus, sizeof(*skipped));
	for (unsigned cpu = 0; skipped && cpu < ds->n_cpus; cpu++)
		skipped[cpu] = ds->cpu_pass[cpu].skipped_events + ds->cpu_pass[cpu].filtered_events;
	m = (struct ftrace_stats_msg){
		.phase = FTRACE_STATS_PHASE_START,
		.cpu = ds->start_stats,
		.n_cpu = ds->n_cpus,
		.bytes_carry_skipped = skipped != NULL,
		.unknown_events = ds->cfg->unknown,
		.n_unknown = ds->cfg->n_unknown,
		.failed_events = ds->failed,
		.n_failed = ds->n_failed,
		.preserve_ftrace_buffer = ds->cfg->preserve,
		.cpu_buffer_size_pages = kb_to_sys_pages(kb),
		.cached_cpu_buffer_size_pages = kb_to_sys_pages(ftrace_tracefs_cached_buffer_kb(ds->tfs)),
		.kernel_symbols_parsed = ds->ksyms_parsed,
		.kernel_symbols_mem_kb = ds->ksyms_mem_kb,
	};
	write_stats_packet(ds, &m);

	m.phase = FTRACE_STATS_PHASE_END;
	m.cpu = now;
	m.n_cpu = now ? ds->n_cpus : 0;
	m.skipped = skipped;
	m.unknown_events = NULL;
	m.n_unknown = 0;
	m.failed_events = NULL;
	m.n_failed = 0;
	m.preserve_ftrace_buffer = false;
	m.parse_errors = parse_errors_mask(ds);
	m.has_kprobe_stats = ftrace_extra_kprobe_stats(ds->extra, ds->tfs, &m.kprobe_hits, &m.kprobe_misses) >= 0;
	write_stats_packet(ds, &m);
	if (last)
		end_reading(ds, now);

	sink_flush(ds);
	return now && skipped ? r : -ENOMEM;
}

int ftrace_ds_flush(struct ftrace_ds *ds)
{
	return flush(ds, /* last= */ false);
}

int ftrace_ds_flush_last(struct ftrace_ds *ds)
{
	if (!ds)
		return -EINVAL;
	return flush(ds, /* last= */ true);
}

int ftrace_ds_flush_final(struct ftrace_ds *ds)
{
	if (!ds)
		return -EINVAL;
	/*
	 * Tracing off before the last read: nothing lands in the buffer after
	 * it, so read_events END - START is exactly what the trace holds and
	 * no event is left behind (entries 0).  A directory another started
	 * data source still uses keeps tracing on for it.
	 */
	if (ds->started && !ds->tracing_released && ftrace_tracefs_deactivate(ds->tfs) >= 0)
		ds->tracing_released = true;
	return flush(ds, /* last= */ true);
}

struct ftrace_ds *ftrace_ds_free(struct ftrace_ds *ds)
{
	if (!ds)
		return NULL;
	if (ds->drain) {
		if (ds->started) {
			ds->started = false;
			if (!ds->tracing_released)
				(void)ftrace_tracefs_deactivate(ds->tfs);
		}
		ftrace_drain_remove_reader(ds->drain, &ds->reader);
		if (ds->attached) {
			/* The last one's detach waits for a resize still running and closes its eventfd. */
			if (ftrace_tracefs_n_attached(ds->tfs) == 1)
				ftrace_drain_resize_forget(ds->drain);
			ftrace_extra_release(ds->extra, ds->tfs);
			ftrace_tracefs_release_events(ds->tfs, ds->cfg->events, ds->cfg->n_events, ds->enabled);
			/* The last one restores current_tracer, which open readers would block. */
			if (ftrace_tracefs_n_attached(ds->tfs) == 1)
				ftrace_drain_close_cpus(ds->drain);
			/* What failed stays in the state file; the daemon's next start puts it back. */
			if (ftrace_tracefs_detach(ds->tfs) < 0) {
				const char *why = ftrace_tracefs_restore_error(ds->tfs);

				log_warning_errno(-EIO, "linux.ftrace: tracefs not fully put back (%s); the rest is "
						  "kept in the state file for the next start", why ? why : "?");
			}
		}
		ftrace_drain_arm_wake(ds->drain);
		ftrace_host_put_drain(ds->host, ds->drain);
		(void)ftrace_host_update_timer(ds->host);
	}

	if (ds->ksyms_ref)
		ftrace_host_ksyms_put(ds->host, ds->cfg && ds->cfg->ksyms_retain);
	ftrace_extra_free(ds->extra);
	ftrace_parser_free(ds->parser);
	ftrace_print_filter_free(ds->print_filter);
	ftrace_pidset_free(ds->pids);
	for (size_t i = 0; i < ds->n_failed; i++)
		free(ds->failed[i]);
	free(ds->failed);
	free(ds->warnings);
	free(ds->enabled);
	free(ds->cpu_state);
	free(ds->cpu_pass);
	free(ds->start_stats);
	free(ds->end_stats);
	ftrace_config_free(ds->cfg);
	ftrace_event_list_free(ds->avail);
	free(ds);
	return NULL;
}

uint64_t ftrace_ds_instance_id(const struct ftrace_ds *ds)
{
	return ds->instance_id;
}

uint64_t ftrace_ds_tracing_session_id(const struct ftrace_ds *ds)
{
	return ds->tracing_session_id;
}

const char *ftrace_ds_get_warnings(const struct ftrace_ds *ds)
{
	return ds->warnings;
}

static uint64_t delta(uint64_t now, uint64_t then)
{
	return now >= then ? now - then : 0;
}

int ftrace_ds_get_summary(struct ftrace_ds *ds, struct ftrace_ds_summary **ret)
{
	_cleanup_free_ struct ftrace_cpu_stats *now = NULL;
	struct ftrace_ds_summary *s;

	if (!ds || !ret)
		return -EINVAL;
	if (!ds->ever_started)
		return -ESTALE;
	now = calloc(ds->n_cpus, sizeof(*now));
	s = calloc(1, sizeof(*s) + ds->n_cpus * sizeof(s->cpu[0]));
	if (!now || !s) {
		free(s);
		return -ENOMEM;
	}
	/* Ended: the window the trace's last stats pair describes, not what other readers took since. */
	if (ds->ended)
		memcpy(now, ds->end_stats, ds->n_cpus * sizeof(*now));
	else
		snapshot_stats(ds, now);

	s->passes = ds->passes;
	s->first_ts = ds->first_page_ts;
	s->n_unknown_events = (unsigned)ds->cfg->n_unknown;
	s->n_failed_events = (unsigned)ds->n_failed;
	s->n_cpus = ds->n_cpus;
	for (unsigned cpu = 0; cpu < ds->n_cpus; cpu++) {
		const struct ftrace_pass_stats *p = &ds->cpu_pass[cpu];
		const struct ftrace_cpu_stats *a = &ds->start_stats[cpu], *b = &now[cpu];
		struct ftrace_cpu_summary *c = &s->cpu[cpu];

		if (ds->cpu_state[cpu].last_event_ts > s->last_ts)
			s->last_ts = ds->cpu_state[cpu].last_event_ts;
		c->events = p->events;
		c->pages = p->pages;
		c->bytes = p->bytes;
		c->pages_with_loss = p->lost_pages;
		c->skipped_events = p->skipped_events + p->filtered_events;
		s->parse_errors += p->parse_errors;
		if (a->present && b->present) {
			c->overrun = delta(b->overrun, a->overrun);
			c->lost_events = c->overrun + delta(b->dropped_events, a->dropped_events);
			c->read_events = delta(b->read_events, a->read_events);
		}
	}
	*ret = s;
	return 0;
}
