/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_drain - the read pass of one tracefs directory.
 *
 * A pass takes each CPU's pages once and gives them to every started
 * reader of that directory (each parser keeps only its own events).  It is
 * bounded per CPU; a CPU that hits the bound tells the caller, which runs
 * another pass right away, so a late or slow timer reads more, never less.
 * The buffer_percent wake-ups of the directory live here too: they run a
 * pass as soon as the kernel reports a CPU's buffer that full.
 */

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/ds/ftrace_ds_internal.h"
#include "util/util.h"

struct ftrace_drain;

struct drain_wake {
	struct loop_source *source;
	struct ftrace_drain *d;
	unsigned empty_in_row;          /* wake-ups whose pass read nothing */
};

struct ftrace_drain {
	struct loop *event;
	struct ftrace_tracefs *tfs;
	struct ftrace_format_table *table;
	size_t page_size;
	unsigned commit_size;
	unsigned n_cpus;                /* _SC_NPROCESSORS_CONF */
	struct ftrace_cpu **cpus;       /* [n_cpus]; NULL: not opened or not present */
	bool cpus_open;
	uint8_t *page;                  /* one page: read, then parsed at once */
	struct ftrace_drain_reader *readers;
	/* [n_cpus]: wake-ups when a CPU's buffer reaches buffer_percent */
	struct drain_wake *wake;
	uint64_t pages_read;            /* by every pass, for the wake-ups */
	struct loop_source *resize;     /* the resize thread's eventfd */
};

/* The wake-up sources go with the CPUs' fds they poll. */
static void wake_drop(struct ftrace_drain *d)
{
	if (d->wake)
		for (unsigned i = 0; i < d->n_cpus; i++)
			d->wake[i].source = loop_source_disable_unref(d->wake[i].source);
}

int ftrace_drain_new(struct loop *e, struct ftrace_tracefs *tfs, struct ftrace_drain **ret,
		     char **ret_error)
{
	struct ftrace_drain *d;
	long ncpu;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d) {
		ftrace_tracefs_free(tfs);
		return -ENOMEM;
	}
	d->event = loop_ref(e);
	d->tfs = tfs;
	r = ftrace_format_table_new(ftrace_tracefs_path(tfs), &d->table);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("read the ring-buffer page layout of %s: %s",
							ftrace_tracefs_path(tfs), strerror(-r)));
		goto fail;
	}
	d->commit_size = ftrace_format_table_commit_size(d->table);
	r = ftrace_tracefs_page_size(tfs, &d->page_size);
	if (r < 0)
		goto fail;
	ncpu = sysconf(_SC_NPROCESSORS_CONF);
	d->n_cpus = ncpu <= 0 ? 1 : (unsigned)MIN((unsigned long)ncpu, FTRACE_MAX_CPUS);
	d->cpus = calloc(d->n_cpus, sizeof(*d->cpus));
	d->page = malloc(d->page_size);
	if (!d->cpus || !d->page) {
		r = -ENOMEM;
		goto fail;
	}
	*ret = d;
	return 0;

fail:
	ftrace_drain_free(d);
	return r;
}

struct ftrace_drain *ftrace_drain_free(struct ftrace_drain *d)
{
	if (!d)
		return NULL;
	wake_drop(d);
	free(d->wake);
	d->resize = loop_source_disable_unref(d->resize);
	if (d->cpus)
		for (unsigned i = 0; i < d->n_cpus; i++)
			ftrace_cpu_free(d->cpus[i]);
	free(d->cpus);
	free(d->page);
	ftrace_format_table_free(d->table);
	ftrace_tracefs_free(d->tfs);
	loop_unref(d->event);
	free(d);
	return NULL;
}

struct ftrace_tracefs *ftrace_drain_tracefs(const struct ftrace_drain *d)
{
	return d->tfs;
}

struct ftrace_format_table *ftrace_drain_format_table(const struct ftrace_drain *d)
{
	return d->table;
}

unsigned ftrace_drain_n_cpus(const struct ftrace_drain *d)
{
	return d->n_cpus;
}

void ftrace_drain_add_reader(struct ftrace_drain *d, struct ftrace_drain_reader *r)
{
	r->started = false;
	r->next = d->readers;
	d->readers = r;
}

/*
 * The per-CPU readers go with the last data source, before it restores
 * tracefs: a mapped ring buffer cannot be resized (EBUSY), so the buffer
 * size could not be put back while we still map it.
 */
static void close_cpus(struct ftrace_drain *d)
{
	wake_drop(d);
	for (unsigned i = 0; i < d->n_cpus; i++)
		d->cpus[i] = ftrace_cpu_free(d->cpus[i]);
	d->cpus_open = false;
}

void ftrace_drain_remove_reader(struct ftrace_drain *d, struct ftrace_drain_reader *r)
{
	for (struct ftrace_drain_reader **p = &d->readers; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	r->next = NULL;
	r->started = false;
	if (!d->readers)
		close_cpus(d);
}

struct ftrace_drain_reader *ftrace_drain_first_reader(const struct ftrace_drain *d)
{
	return d->readers;
}

/*
 * The sub-buffer size as it is now: the first attach may have changed it
 * since the drain was made, and the last detach puts it back.  Only while
 * no CPU is open (the kernel refuses the change while one is mapped).
 */
static int refresh_page_size(struct ftrace_drain *d)
{
	size_t ps;
	uint8_t *page;
	int r;

	r = ftrace_tracefs_page_size(d->tfs, &ps);
	if (r < 0)
		return r;
	if (ps == d->page_size)
		return 0;
	page = malloc(ps);
	if (!page)
		return -ENOMEM;
	free(d->page);
	d->page = page;
	d->page_size = ps;
	return 0;
}

int ftrace_drain_open_cpus(struct ftrace_drain *d)
{
	unsigned opened = 0;
	int r;

	if (d->cpus_open)
		return 0;
	for (unsigned i = 0; i < d->n_cpus; i++)
		opened += d->cpus[i] != NULL;
	if (opened == 0) {
		r = refresh_page_size(d);
		if (r < 0)
			return r;
	}
	opened = 0;
	for (unsigned i = 0; i < d->n_cpus; i++) {
		if (d->cpus[i]) {
			opened++;
			continue;
		}
		r = ftrace_cpu_open(d->tfs, i, d->page_size, d->commit_size, &d->cpus[i]);
		/* Possible but absent CPUs have no per_cpu directory: not an error. */
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		opened++;
	}
	if (opened == 0)
		return -ENODEV;
	d->cpus_open = true;
	return 0;
}

void ftrace_drain_close_cpus(struct ftrace_drain *d)
{
	close_cpus(d);
}

/*
 * When trace_clock is not "boot", bundles carry an (ftrace clock, boottime)
 * pair taken together; cpu0's stats "now ts" is the ftrace clock's now.
 */
static void pass_begin(struct ftrace_drain *d)
{
	int clock = ftrace_tracefs_clock(d->tfs);
	struct ftrace_cpu_stats s = { 0 };
	int64_t fts = 0, bts = 0;

	if (clock != FTRACE_CLOCK_UNSPECIFIED) {
		unsigned cpu0 = 0;

		while (cpu0 + 1 < d->n_cpus && !d->cpus[cpu0])
			cpu0++;
		bts = (int64_t)now_ns(CLOCK_BOOTTIME);
		if (ftrace_stats_read(d->tfs, cpu0, &s) >= 0 && (s.present & FTRACE_STAT_NOW_TS))
			fts = (int64_t)(s.now_ts * 1e9);
	}
	for (struct ftrace_drain_reader *r = d->readers; r; r = r->next)
		if (r->started)
			r->ops->pass_begin(r, (enum ftrace_clock)clock, fts, bts);
}

/*
 * A batch is up to FTRACE_BATCH_BYTES of pages, one bundle per reader (as
 * Perfetto).  Each page is parsed as soon as read() has copied it: one
 * page buffer, still in L1 for the parser, and the next copy lands in it
 * again rather than in cold memory.  With a mapped buffer, the page is
 * parsed where the kernel wrote it, and the buffer only holds the
 * writer's page copied at the end of a CPU's turn.
 */
static void batch_begin(struct ftrace_drain *d, unsigned cpu)
{
	for (struct ftrace_drain_reader *r = d->readers; r; r = r->next)
		if (r->started)
			r->ops->batch_begin(r, cpu, d->page_size);
}

static void batch_page(struct ftrace_drain *d, const uint8_t *page)
{
	for (struct ftrace_drain_reader *r = d->readers; r; r = r->next)
		if (r->started)
			r->ops->batch_page(r, page);
}

static void batch_end(struct ftrace_drain *d)
{
	for (struct ftrace_drain_reader *r = d->readers; r; r = r->next)
		if (r->started)
			r->ops->batch_end(r);
}

static void read_error(struct ftrace_drain *d, int status)
{
	for (struct ftrace_drain_reader *r = d->readers; r; r = r->next)
		if (r->started)
			r->ops->read_error(r, status);
}

int ftrace_drain_pass(struct ftrace_drain *d, bool flush, bool *ret_more)
{
	const size_t pass_pages = MAX(FTRACE_PASS_MAX_BYTES / d->page_size, (size_t)1);
	const size_t batch_pages = MAX(FTRACE_BATCH_BYTES / d->page_size, (size_t)1);
	size_t budget_per_cpu = pass_pages;
	bool any = false, to_empty;
	int r = 0;

	for (struct ftrace_drain_reader *rd = d->readers; rd; rd = rd->next)
		any |= rd->started;
	if (!any || !d->cpus_open)
		return 0;

	to_empty = flush && ftrace_tracefs_n_active(d->tfs) == 0;
	if (flush) {
		/* A flush empties the buffer: up to its whole size (plus the reader page). */
		uint32_t kb = ftrace_tracefs_cached_buffer_kb(d->tfs);
		size_t pages;

		if (kb == 0)
			(void)ftrace_tracefs_read_buffer_kb(d->tfs, &kb);
		pages = (size_t)kb * 1024 / d->page_size + 2;
		budget_per_cpu = MAX(pages, pass_pages);
	}

	pass_begin(d);

	for (unsigned cpu = 0; cpu < d->n_cpus; cpu++) {
		struct ftrace_cpu *c = d->cpus[cpu];
		size_t budget = budget_per_cpu;
		unsigned small_in_row = 0;

		if (!c)
			continue;
		ftrace_cpu_begin_pass(c);
		for (bool empty = false; budget > 0 && !empty;) {
			size_t in_batch = 0;

			/* A batch with no page opens no bundle: begin() writes nothing. */
			batch_begin(d, cpu);
			while (in_batch < batch_pages && budget > 0) {
				enum ftrace_cpu_read_status st;
				const uint8_t *page = NULL;
				int pst = 0, k;

				k = ftrace_cpu_read_page(c, d->page, &page, &st, &pst);
				if (k > 0) {
					batch_page(d, page);
					d->pages_read++;
					in_batch++;
					budget--;
				}
				if (pst)
					read_error(d, pst);
				if (k < 0 && r == 0)
					r = k;
				/*
				 * The "caught up" hint (a page under half full) may be
				 * the rest of a page an earlier read copied in part,
				 * with whole pages after it.  A periodic pass trusts it;
				 * a flush needs two such pages in a row (a writer still
				 * filling its page, not a stray small page), so it does
				 * not chase a busy writer tiny page after tiny page; with
				 * tracing off in the directory (the final flush) there is
				 * no writer to chase and only an empty read ends it.
				 */
				if (k > 0 && st == FTRACE_CPU_EMPTY)
					small_in_row++;
				else
					small_in_row = 0;
				if (k <= 0 || (small_in_row > 0 && !flush) || (small_in_row > 1 && !to_empty)) {
					empty = true;
					break;
				}
			}
			batch_end(d);
		}
		if (budget == 0 && ret_more)
			*ret_more = true;
	}

	for (struct ftrace_drain_reader *rd = d->readers; rd; rd = rd->next)
		if (rd->started)
			rd->ops->pass_end(rd);
	return r;
}

uint32_t ftrace_drain_period_ms(const struct ftrace_drain *d)
{
	uint32_t p = 0;

	for (const struct ftrace_drain_reader *r = d->readers; r; r = r->next)
		if (r->started && (p == 0 || r->period_ms < p))
			p = r->period_ms;
	return p;
}

/* ---- buffer_percent wake-ups --------------------------------------------- */

/*
 * drain_buffer_percent: the kernel wakes a poller of trace_pipe_raw once a
 * CPU's buffer is that full, so a burst is drained at once instead of at the
 * next tick.  One-shot sources, re-armed after the pass.
 *
 * A pass that read nothing is of two kinds.  Usually the wake-up was stale:
 * two CPUs crossed the mark before the loop ran, the first one's pass read
 * both, and the second finds its buffer read already.  Its source must be
 * armed again, or that CPU waits for the tick (up to a minute) however full
 * it gets.  Rarely a poll keeps reporting data a read cannot return; then
 * re-arming would spin.  So a CPU's source is re-armed after one empty pass
 * and left off after a second in a row, until a tick or another CPU's pass
 * arms it again.
 */
#define WAKE_EMPTY_IN_ROW_MAX 1u

static void arm_wake(struct ftrace_drain *d, bool fresh);

static int on_wake(struct loop_source *s, int fd, uint32_t revents, void *userdata)
{
	struct drain_wake *w = userdata;
	struct ftrace_drain *d = w->d;
	uint64_t before = d->pages_read;
	bool more = false;

	(void)ftrace_drain_pass(d, /* flush= */ false, &more);
	if (d->pages_read > before)
		w->empty_in_row = 0;
	else if (++w->empty_in_row > WAKE_EMPTY_IN_ROW_MAX)
		return 0;
	arm_wake(d, /* fresh= */ false);
	return 0;
}

static bool wants_wake(const struct ftrace_drain *d)
{
	for (const struct ftrace_drain_reader *r = d->readers; r; r = r->next)
		if (r->started && r->buffer_percent > 0)
			return true;
	return false;
}

/* @fresh: a tick or a start or stop, which gives every CPU its empty pass back */
static void arm_wake(struct ftrace_drain *d, bool fresh)
{
	bool on = d->cpus_open && wants_wake(d);

	if (on && !d->wake) {
		d->wake = calloc(d->n_cpus, sizeof(*d->wake));
		if (!d->wake)
			return;
		for (unsigned i = 0; i < d->n_cpus; i++)
			d->wake[i].d = d;
	}
	for (unsigned i = 0; d->wake && i < d->n_cpus; i++) {
		struct drain_wake *w = &d->wake[i];
		int fd = ftrace_cpu_fd(d->cpus[i]);

		if (!on || fd < 0) {
			if (w->source)
				(void)loop_source_set_enabled(w->source, LOOP_OFF);
			continue;
		}
		if (fresh)
			w->empty_in_row = 0;
		if (!w->source && loop_add_io(d->event, &w->source, fd, EPOLLIN, on_wake, w) < 0) {
			w->source = NULL;
			continue;
		}
		(void)loop_source_set_enabled(w->source, LOOP_ONESHOT);
	}
}

void ftrace_drain_arm_wake(struct ftrace_drain *d)
{
	arm_wake(d, /* fresh= */ true);
}

/* ---- the directory's buffer resize ---------------------------------------- */

void ftrace_note_subbuf_refused(struct ftrace_tracefs *tfs, uint32_t kb)
{
	log_notice("linux.ftrace: %s: sub-buffers of %u KiB refused (%s); reading the kernel's",
		   ftrace_tracefs_path(tfs), kb, ftrace_tracefs_subbuf_error(tfs) ?: "?");
}

static void resize_done(struct ftrace_drain *d)
{
	_cleanup_free_ char *err = NULL;
	struct ftrace_drain_reader *next;
	struct ftrace_tracefs_resized rs = {};
	char what[96] = "", why[512];
	int r;

	d->resize = loop_source_disable_unref(d->resize);
	r = ftrace_tracefs_resize_finish(d->tfs, &rs, &err);
	if (rs.subbuf_refused)
		ftrace_note_subbuf_refused(d->tfs, rs.subbuf_kb);
	if (rs.subbuf_kb > 0)
		(void)snprintf(what, sizeof(what), "buffer_subbuf_size_kb %u%s", rs.subbuf_kb,
			       rs.buffer_kb > 0 ? " and " : "");
	if (rs.buffer_kb > 0)
		(void)snprintf(what + strlen(what), sizeof(what) - strlen(what), "buffer_size_kb %u", rs.buffer_kb);
	if (r < 0)
		(void)snprintf(why, sizeof(why), "%s failed after %.1f s (%s); recording with the "
			       "buffer size the kernel kept", what, (double)rs.ns / 1e9, err ? err : strerror(-r));
	else
		(void)snprintf(why, sizeof(why), "%s took %.1f s", what, (double)rs.ns / 1e9);
	/* a failure is news even when no start waited for it */
	log_full_errno(r < 0 ? LOG_LEVEL_WARNING : LOG_LEVEL_DEBUG, 0, "linux.ftrace: %s: %s",
		       ftrace_tracefs_path(d->tfs), why);
	for (struct ftrace_drain_reader *x = d->readers; x; x = next) {
		next = x->next;
		if (!x->waiting)
			continue;
		x->waiting = false;
		if (x->ops->ready)
			x->ops->ready(x, why);
	}
}

static int on_resize(struct loop_source *s, int fd, uint32_t revents, void *userdata)
{
	(void)s;
	(void)fd;
	(void)revents;
	resize_done(userdata);
	return 0;
}

int ftrace_drain_resize_start(struct ftrace_drain *d)
{
	int fd, r;

	r = ftrace_tracefs_resize_start(d->tfs, &fd);
	if (r <= 0)
		return r;
	if (d->resize)
		return 0;
	return loop_add_io(d->event, &d->resize, fd, EPOLLIN, on_resize, d);
}

bool ftrace_drain_resizing(const struct ftrace_drain *d)
{
	return ftrace_tracefs_resizing(d->tfs) || ftrace_tracefs_resize_planned(d->tfs);
}

void ftrace_drain_resize_wait(struct ftrace_drain *d)
{
	if (ftrace_drain_resizing(d))
		resize_done(d);
}

void ftrace_drain_resize_forget(struct ftrace_drain *d)
{
	d->resize = loop_source_disable_unref(d->resize);
}
