/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process-wide ftrace state: one entry per tracefs directory in use,
 * its per-CPU readers, and the drain timer that reads them.
 *
 * A read pass takes each CPU's pages once and gives them to every started
 * data source of that directory (each parser keeps only its own events).
 * The pass is bounded per CPU; a CPU that hits the bound gets another pass
 * right away, so a late or slow timer reads more, never less.
 */

#include <string.h>
#include <time.h>

#include "probes/ftrace/ftrace_ds_internal.h"
#include "smb/smb.h"
#include "util/util.h"

int ftrace_host_new(struct event *e, struct ftrace_host **ret)
{
	struct ftrace_host *h;

	if (!e || !ret)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->state_dir = strdup(ftrace_state_dir());
	if (!h->state_dir) {
		free(h);
		return -ENOMEM;
	}
	h->event = event_ref(e);
	*ret = h;
	return 0;
}

struct ftrace_host *ftrace_host_free(struct ftrace_host *h)
{
	if (!h)
		return NULL;
	/* Freeing the last data source of a directory frees that directory too. */
	while (h->insts) {
		struct ftrace_inst *in = h->insts;

		if (in->sessions)
			ftrace_ds_free(in->sessions);
		else
			ftrace_host_put_inst(in);
	}
	h->timer = event_source_disable_unref(h->timer);
	event_unref(h->event);
	free(h->root);
	free(h->state_dir);
	free(h);
	return NULL;
}

static struct ftrace_inst *inst_free(struct ftrace_inst *in)
{
	if (!in)
		return NULL;
	if (in->wake)
		for (unsigned i = 0; i < in->n_cpus; i++)
			in->wake[i] = event_source_disable_unref(in->wake[i]);
	free(in->wake);
	if (in->cpus)
		for (unsigned i = 0; i < in->n_cpus; i++)
			ftrace_cpu_free(in->cpus[i]);
	free(in->cpus);
	free(in->pages);
	ftrace_format_table_free(in->table);
	ftrace_tracefs_free(in->tfs);
	free(in);
	return NULL;
}

int ftrace_host_get_inst(struct ftrace_host *h, const char *instance_name, struct ftrace_inst **ret,
			 char **ret_error)
{
	struct ftrace_inst *in;
	long ncpu;
	int r;

	for (in = h->insts; in; in = in->next) {
		const char *n = ftrace_tracefs_instance_name(in->tfs);

		if ((!n && !instance_name) || (n && instance_name && strcmp(n, instance_name) == 0)) {
			*ret = in;
			return 0;
		}
	}

	if (!h->root) {
		r = ftrace_tracefs_find_root(&h->root, ret_error);
		if (r < 0)
			return r;
	}

	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->host = h;
	r = ftrace_tracefs_open(h->root, instance_name, h->state_dir, &in->tfs, ret_error);
	if (r < 0)
		goto fail;
	r = ftrace_format_table_new(ftrace_tracefs_path(in->tfs), &in->table);
	if (r < 0) {
		ftrace_set_error(ret_error, ftrace_strdup_printf("read the ring-buffer page layout of %s: %s",
								 ftrace_tracefs_path(in->tfs), strerror(-r)));
		goto fail;
	}
	in->commit_size = ftrace_format_table_commit_size(in->table);
	r = ftrace_tracefs_page_size(in->tfs, &in->page_size);
	if (r < 0)
		goto fail;
	ncpu = sysconf(_SC_NPROCESSORS_CONF);
	in->n_cpus = ncpu <= 0 ? 1 : (unsigned)MIN((unsigned long)ncpu, FTRACE_MAX_CPUS);
	in->cpus = calloc(in->n_cpus, sizeof(*in->cpus));
	in->pages = malloc(in->page_size);
	if (!in->cpus || !in->pages) {
		r = -ENOMEM;
		goto fail;
	}

	in->next = h->insts;
	h->insts = in;
	*ret = in;
	return 0;

fail:
	inst_free(in);
	return r;
}

void ftrace_host_put_inst(struct ftrace_inst *in)
{
	struct ftrace_host *h = in->host;

	if (in->sessions)
		return;
	for (struct ftrace_inst **p = &h->insts; *p; p = &(*p)->next)
		if (*p == in) {
			*p = in->next;
			break;
		}
	inst_free(in);
}

int ftrace_inst_open_cpus(struct ftrace_inst *in)
{
	unsigned opened = 0;
	int r;

	if (in->cpus_open)
		return 0;
	for (unsigned i = 0; i < in->n_cpus; i++) {
		if (in->cpus[i]) {
			opened++;
			continue;
		}
		r = ftrace_cpu_open(in->tfs, i, in->page_size, in->commit_size, &in->cpus[i]);
		/* Possible but absent CPUs have no per_cpu directory: not an error. */
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		opened++;
	}
	if (opened == 0)
		return -ENODEV;
	in->cpus_open = true;
	return 0;
}

/*
 * When trace_clock is not "boot", bundles carry an (ftrace clock, boottime)
 * pair taken together; cpu0's stats "now ts" is the ftrace clock's now.
 */
static void set_clock_snapshot(struct ftrace_inst *in)
{
	int clock = ftrace_tracefs_clock(in->tfs);
	struct ftrace_cpu_stats s = { 0 };
	int64_t fts = 0, bts = 0;

	if (clock != FTRACE_CLOCK_UNSPECIFIED) {
		unsigned cpu0 = 0;

		while (cpu0 + 1 < in->n_cpus && !in->cpus[cpu0])
			cpu0++;
		bts = (int64_t)now_ns(CLOCK_BOOTTIME);
		if (ftrace_stats_read(in->tfs, cpu0, &s) >= 0 && (s.present & FTRACE_STAT_NOW_TS))
			fts = (int64_t)(s.now_ts * 1e9);
	}
	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		if (ds->started)
			ftrace_parser_set_clock(ds->parser, (enum ftrace_clock)clock, fts, bts);
}

/*
 * A batch is up to FTRACE_BATCH_PAGES pages, one bundle per session (as
 * Perfetto).  Each page is parsed as soon as read() has copied it: one
 * page buffer, still in L1 for the parser, and the next copy lands in it
 * again rather than in cold memory.
 */
static void batch_begin(struct ftrace_inst *in, unsigned cpu)
{
	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		if (ds->started)
			(void)ftrace_parser_batch_begin(ds->parser, cpu, in->page_size, &ds->sink,
							&ds->cpu_state[cpu], ds->pids, &ds->cpu_pass[cpu]);
}

static void batch_page(struct ftrace_inst *in)
{
	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		if (ds->started)
			ftrace_parser_batch_page(ds->parser, in->pages);
}

static void batch_end(struct ftrace_inst *in)
{
	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		if (ds->started)
			(void)ftrace_parser_batch_end(ds->parser);
}

static void note_read_error(struct ftrace_inst *in, int status)
{
	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		if (ds->started && status > 0 && status < 32)
			ds->read_errors_mask |= 1u << status;
}

int ftrace_inst_read_pass(struct ftrace_inst *in, bool flush, bool *ret_more)
{
	size_t budget_per_cpu = FTRACE_PASS_MAX_PAGES;
	bool any = false;
	int r = 0;

	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		any |= ds->started;
	if (!any || !in->cpus_open)
		return 0;

	if (flush) {
		/* A flush empties the buffer: up to its whole size (plus the reader page). */
		uint32_t kb = ftrace_tracefs_cached_buffer_kb(in->tfs);
		size_t pages;

		if (kb == 0)
			(void)ftrace_tracefs_read_buffer_kb(in->tfs, &kb);
		pages = (size_t)kb * 1024 / in->page_size + 2;
		budget_per_cpu = MAX(pages, (size_t)FTRACE_PASS_MAX_PAGES);
	}

	set_clock_snapshot(in);

	for (unsigned cpu = 0; cpu < in->n_cpus; cpu++) {
		struct ftrace_cpu *c = in->cpus[cpu];
		size_t budget = budget_per_cpu;

		if (!c)
			continue;
		ftrace_cpu_begin_pass(c);
		for (bool empty = false; budget > 0 && !empty;) {
			size_t in_batch = 0;

			/* A batch with no page opens no bundle: begin() writes nothing. */
			batch_begin(in, cpu);
			while (in_batch < FTRACE_BATCH_PAGES && budget > 0) {
				enum ftrace_cpu_read_status st;
				int pst = 0, k;

				k = ftrace_cpu_read_page(c, in->pages, &st, &pst);
				if (k > 0) {
					batch_page(in);
					in_batch++;
					budget--;
				}
				if (pst)
					note_read_error(in, pst);
				if (k < 0 && r == 0)
					r = k;
				if (k < 0 || st == FTRACE_CPU_EMPTY) {
					empty = true;
					break;
				}
			}
			batch_end(in);
		}
		if (budget == 0 && ret_more)
			*ret_more = true;
	}

	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next) {
		if (!ds->started)
			continue;
		ds->passes++;
		if (ds->hooks.pass_done)
			ds->hooks.pass_done(ds, ds->pids, ds->userdata);
		ftrace_pidset_clear(ds->pids);
	}
	return r;
}

/* ---- drain timer --------------------------------------------------------- */

static uint32_t wanted_period(const struct ftrace_host *h)
{
	uint32_t p = 0;

	for (struct ftrace_inst *in = h->insts; in; in = in->next)
		for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
			if (ds->started && (p == 0 || ds->cfg->drain_period_ms < p))
				p = ds->cfg->drain_period_ms;
	return p;
}

/* Like Perfetto: wake on multiples of the period on the wall clock. */
static uint64_t next_deadline_usec(uint32_t period_ms)
{
	uint64_t wall_ms = now_ns(CLOCK_REALTIME) / 1000000u;
	uint64_t delay_ms = period_ms - wall_ms % period_ms;

	return now_ns(CLOCK_MONOTONIC) / 1000u + delay_ms * 1000u;
}

static int on_timer(struct event_source *s, uint64_t usec, void *userdata)
{
	struct ftrace_host *h = userdata;
	bool more = false;

	for (struct ftrace_inst *in = h->insts; in; in = in->next) {
		(void)ftrace_inst_read_pass(in, /* flush= */ false, &more);
		ftrace_inst_arm_wake(in);
	}

	if (h->period_ms == 0)
		return 0;
	/* A CPU still had data: go again at once instead of waiting a period. */
	(void)event_source_set_time(s, more ? now_ns(CLOCK_MONOTONIC) / 1000u : next_deadline_usec(h->period_ms));
	(void)event_source_set_enabled(s, EVENT_ONESHOT);
	return 0;
}

/*
 * drain_buffer_percent: the kernel wakes a poller of trace_pipe_raw once a
 * CPU's buffer is that full, so a burst is drained at once instead of at the
 * next tick.  One-shot sources, re-armed after the pass: a pass that found
 * nothing leaves them off until the next tick, so a poll that keeps
 * reporting data we cannot read never spins.
 */
static int on_wake(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct ftrace_inst *in = userdata;
	bool more = false;
	uint64_t before = 0, after = 0;

	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		for (unsigned c = 0; c < in->n_cpus; c++)
			before += ds->cpu_pass[c].pages;
	(void)ftrace_inst_read_pass(in, /* flush= */ false, &more);
	for (struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		for (unsigned c = 0; c < in->n_cpus; c++)
			after += ds->cpu_pass[c].pages;
	if (after > before)
		ftrace_inst_arm_wake(in);
	return 0;
}

static bool wants_wake(const struct ftrace_inst *in)
{
	for (const struct ftrace_ds *ds = in->sessions; ds; ds = ds->next)
		if (ds->started && ds->cfg->drain_buffer_percent > 0)
			return true;
	return false;
}

void ftrace_inst_arm_wake(struct ftrace_inst *in)
{
	bool on = in->cpus_open && wants_wake(in);

	if (on && !in->wake) {
		in->wake = calloc(in->n_cpus, sizeof(*in->wake));
		if (!in->wake)
			return;
	}
	for (unsigned i = 0; in->wake && i < in->n_cpus; i++) {
		int fd = ftrace_cpu_fd(in->cpus[i]);

		if (!on || fd < 0) {
			if (in->wake[i])
				(void)event_source_set_enabled(in->wake[i], EVENT_OFF);
			continue;
		}
		if (!in->wake[i] &&
		    event_add_io(in->host->event, &in->wake[i], fd, EPOLLIN, on_wake, in) < 0) {
			in->wake[i] = NULL;
			continue;
		}
		(void)event_source_set_enabled(in->wake[i], EVENT_ONESHOT);
	}
	in->wake_on = on;
}

int ftrace_host_update_timer(struct ftrace_host *h)
{
	uint32_t p = wanted_period(h);
	int r;

	if (p == 0) {
		h->period_ms = 0;
		if (h->timer)
			(void)event_source_set_enabled(h->timer, EVENT_OFF);
		return 0;
	}
	if (p == h->period_ms && h->timer)
		return 0;
	if (!h->timer) {
		/* 1 ms accuracy: a coarse timer would swallow short periods. */
		r = event_add_time(h->event, &h->timer, CLOCK_MONOTONIC, next_deadline_usec(p), 1000, on_timer, h);
		if (r < 0) {
			h->timer = NULL;
			return r;
		}
		(void)event_source_set_description(h->timer, "ftrace-drain");
	} else {
		r = event_source_set_time(h->timer, next_deadline_usec(p));
		if (r < 0)
			return r;
	}
	r = event_source_set_enabled(h->timer, EVENT_ONESHOT);
	if (r < 0)
		return r;
	h->period_ms = p;
	return 0;
}
