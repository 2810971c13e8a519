/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.frozen_ftrace: the previous boot's persistent ring buffer, read
 * once (frozen_ftrace.h says what is written).
 *
 * The pages go through the same parser as linux.ftrace (probes/ftrace/
 * parse) with its batch API, one slice of pages per CPU per loop
 * iteration: a 20 MiB buffer is thousands of pages, and the producer must
 * commit (and the service free chunks) between slices, or packets would be
 * dropped for want of a free chunk.  The last flush of a session reads
 * whatever is left at once, so that the trace is whole whatever the
 * session's duration.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop/loop.h"
#include "probes/frozen_ftrace/frozen_ftrace.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ksyms/ksyms.h"
#include "protos/pbw.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "util/util.h"

/* Pages per CPU per loop iteration (traced_probes reads 32 per task). */
#define FROZEN_SLICE_PAGES 32u
/* Kernel addresses named per slice; more are written as 0. */
#define FROZEN_PIDSET_CAPACITY 8192u
/* The most CPUs read (per_cpu/cpuN beyond this are left alone). */
#define FROZEN_MAX_CPUS 4096u

struct frozen_cpu {
	int fd;                         /* trace_pipe_raw, O_NONBLOCK; -EBADF: done or absent */
	uint64_t quota;                 /* pages left to read: the buffer's size at most */
	uint64_t pages;                 /* pages read */
	struct ftrace_cpu_state st;
};

struct frozen {
	struct pbw_sink sink;
	struct ds_host host;
	struct loop *loop;
	struct loop_source *task;
	char *instance;

	struct ftrace_tracefs *tfs;
	struct ftrace_format_table *table;
	struct ftrace_parser *parser;
	struct ftrace_pidset *pids;
	struct ksyms *ksyms;
	struct ftrace_symbolizer sym;

	struct frozen_cpu *cpu;
	unsigned n_cpus;
	size_t page_size;
	uint8_t *page;

	struct ftrace_pass_stats stats;
	uint32_t errors_mask;           /* 1u << FtraceParseStatus, read errors included */
	unsigned events_enabled, events_failed;
	bool started, done, cleared;
};

/* ---- the instance --------------------------------------------------------------- */

static void close_cpu(struct frozen_cpu *c)
{
	if (c->fd >= 0)
		(void)close(c->fd);
	c->fd = -EBADF;
}

static struct frozen *frozen_free(struct frozen *f)
{
	if (!f)
		return NULL;
	f->task = loop_source_disable_unref(f->task);
	for (unsigned i = 0; f->cpu && i < f->n_cpus; i++)
		close_cpu(&f->cpu[i]);
	free(f->cpu);
	free(f->page);
	f->parser = ftrace_parser_free(f->parser);
	f->table = ftrace_format_table_free(f->table);
	f->pids = ftrace_pidset_free(f->pids);
	f->ksyms = ksyms_free(f->ksyms);
	f->tfs = ftrace_tracefs_free(f->tfs);
	f->loop = loop_unref(f->loop);
	free(f->instance);
	free(f);
	return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct frozen *, frozen_free);

/*
 * Every event of the instance: the old boot may have recorded any of them,
 * and records of an event not enabled would be dropped.  A format that
 * does not parse is counted, not fatal.
 */
static int enable_all_events(struct frozen *f)
{
	struct ftrace_event_list *l = NULL;
	int r;

	r = ftrace_tracefs_read_available(f->tfs, NULL, 0, &l);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ftrace_event_list_size(l); i++) {
		const struct ftrace_event_name *ev = ftrace_event_list_at(l, i);
		int id;

		r = ftrace_format_table_load_event(f->table, ev->group, ev->name, &id);
		if (r >= 0)
			r = ftrace_parser_enable(f->parser, id);
		if (r == -ENOMEM)
			break;
		if (r < 0)
			f->events_failed++;
		else
			f->events_enabled++;
		r = 0;
	}
	ftrace_event_list_free(l);
	return r;
}

static int open_cpus(struct frozen *f, uint64_t quota)
{
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	unsigned n = conf > 0 ? (unsigned)conf : 1;
	unsigned opened = 0;

	if (n > FROZEN_MAX_CPUS)
		n = FROZEN_MAX_CPUS;
	f->cpu = calloc(n, sizeof(*f->cpu));
	if (!f->cpu)
		return -ENOMEM;
	f->n_cpus = n;
	for (unsigned i = 0; i < n; i++) {
		char path[64];

		snprintf(path, sizeof(path), "per_cpu/cpu%u/trace_pipe_raw", i);
		f->cpu[i].fd = openat(ftrace_tracefs_dirfd(f->tfs), path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (f->cpu[i].fd < 0) {
			f->cpu[i].fd = -EBADF;
			continue;
		}
		f->cpu[i].quota = quota;
		opened++;
	}
	return opened ? 0 : -ENODEV;
}

/*
 * Whether the instance's `trace` shows an event line within its first
 * block (the kernel formats it as it is read: the head is cheap, the whole
 * of a 20 MiB buffer is not).
 */
static bool has_event_lines(struct ftrace_tracefs *t)
{
	char buf[16384];
	_cleanup_close_ int fd = openat(ftrace_tracefs_dirfd(t), "trace", O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0)
		return true;    /* unknown: say nothing */
	while (len < sizeof(buf) - 1) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (*p != '#' && *p != '\n')
			return true;
	return false;
}

static char *reason_missing(const char *root, const char *name)
{
	return strdup_printf("linux.frozen_ftrace: no tracefs instance '%s' in %s/instances: boot "
			     "with a persistent ring buffer for it, e.g. 'reserve_mem=20M:2M:trace "
			     "trace_instance=%s^traceoff@trace' on the kernel command line (Linux 6.12+)",
			     name, root, name);
}

int frozen_ftrace_setup_at(const struct ds_env *env, const struct Perfetto__Protos__DataSourceConfig *cfg,
			   const struct frozen_ftrace_paths *paths, void **ret, char **ret_error,
			   char **ret_warnings)
{
	_cleanup_(frozen_freep) struct frozen *f = NULL;
	_cleanup_free_ char *root = NULL, *info = NULL, *warnings = NULL, *err = NULL;
	const char *name = NULL;
	struct frozen_boot_info bi = { 0 };
	size_t info_len = 0;
	uint32_t kb = 0;
	int r;

	if (!env || !cfg || !ret)
		return -EINVAL;
	if (cfg->frozen_ftrace_config)
		name = cfg->frozen_ftrace_config->instance_name;
	if (!name || !*name) {
		set_error_text(ret_error, strdup("linux.frozen_ftrace: frozen_ftrace_config.instance_name is "
						 "required (the boot-mapped instance to read)"));
		return -EINVAL;
	}
	if (!ftrace_instance_name_valid(name)) {
		_cleanup_free_ char *shown = str_printable_dup(name, 64);

		set_error_text(ret_error, strdup_printf("linux.frozen_ftrace: '%s' is not an instance name",
							shown ? shown : "?"));
		return -EINVAL;
	}

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->sink = env->sink;
	f->host = env->host;
	f->loop = loop_ref(env->event);
	f->instance = strdup(name);
	if (!f->instance)
		return -ENOMEM;

	if (paths && paths->tracefs_root) {
		root = strdup(paths->tracefs_root);
		if (!root)
			return -ENOMEM;
	} else {
		r = ftrace_tracefs_find_root(&root, &err);
		if (r < 0) {
			set_error_text(ret_error, strdup_printf("linux.frozen_ftrace: %s",
								err ? err : strerror(-r)));
			return r;
		}
	}
	/* No state directory: nothing is ever set here, so there is nothing to undo. */
	r = ftrace_tracefs_open(root, name, NULL, &f->tfs, &err);
	if (r == -ENOENT) {
		set_error_text(ret_error, reason_missing(root, name));
		return r;
	}
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("linux.frozen_ftrace: %s", err ? err : strerror(-r)));
		return r;
	}

	/*
	 * Only a boot-mapped instance has last_boot_info.  Any other holds
	 * this boot's data, someone else's: reading it would consume it and
	 * the clean-up would erase it.
	 */
	r = ftrace_tracefs_read(f->tfs, "last_boot_info", FROZEN_BOOT_INFO_MAX, &info, &info_len);
	if (r == -ENOENT) {
		set_error_text(ret_error,
			       strdup_printf("linux.frozen_ftrace: instance '%s' is not boot-mapped (it has no "
					     "last_boot_info): it holds this boot's data, not a previous boot's, "
					     "and is left alone",
					     name));
		return -EMEDIUMTYPE;
	}
	if (r >= 0 && frozen_ftrace_parse_boot_info(info, info_len, &bi) < 0)
		(void)str_append_line(&warnings, "linux.frozen_ftrace: last_boot_info not understood: "
						 "kernel addresses are not named");
	if (bi.current)
		(void)str_append_line(&warnings,
				      "linux.frozen_ftrace: last_boot_info says '# Current': the buffer holds "
				      "this boot's data, not the previous boot's");

	if (!has_event_lines(f->tfs))
		(void)str_append_line(&warnings, "linux.frozen_ftrace: the instance holds no event: the "
						 "previous boot traced nothing into it, or its data was read "
						 "and cleared already");

	r = ftrace_format_table_new(ftrace_tracefs_path(f->tfs), &f->table);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("linux.frozen_ftrace: %s/events/header_page: %s",
							ftrace_tracefs_path(f->tfs), strerror(-r)));
		return r;
	}
	/* As traced_probes: no compact_sched for a buffer written by another boot. */
	{
		struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;

		o.compact_sched = false;
		r = ftrace_parser_new(f->table, &o, &f->parser);
		if (r < 0)
			return r;
	}
	r = enable_all_events(f);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("linux.frozen_ftrace: %s/events: %s",
							ftrace_tracefs_path(f->tfs), strerror(-r)));
		return r;
	}
	if (f->events_failed) {
		_cleanup_free_ char *w = strdup_printf("linux.frozen_ftrace: %u of the instance's event formats did "
						       "not parse: their records are counted as skipped",
						       f->events_failed);
		(void)str_append_line(&warnings, w);
	}
	if (f->events_enabled == 0) {
		set_error_text(ret_error, strdup_printf("linux.frozen_ftrace: %s has no event format that parses",
							ftrace_tracefs_path(f->tfs)));
		return -ENODATA;
	}

	r = ftrace_tracefs_page_size(f->tfs, &f->page_size);
	if (r < 0)
		return r;
	f->page = malloc(f->page_size);
	if (!f->page)
		return -ENOMEM;
	/* The buffer holds at most its size: reading past it would be this boot's data. */
	r = ftrace_tracefs_read_buffer_kb(f->tfs, &kb);
	if (r < 0 || kb == 0)
		kb = 1;
	r = open_cpus(f, ((uint64_t)kb * 1024 + f->page_size - 1) / f->page_size);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("linux.frozen_ftrace: no per_cpu/cpuN/trace_pipe_raw in %s "
							"could be opened",
							ftrace_tracefs_path(f->tfs)));
		return r;
	}

	r = ftrace_pidset_new(FROZEN_PIDSET_CAPACITY, &f->pids);
	if (r < 0)
		return r;
	if (ftrace_parser_has_kernel_addresses(f->parser)) {
		int64_t delta = 0;

		r = ksyms_load(paths ? paths->kallsyms : NULL, &f->ksyms);
		if (r < 0) {
			_cleanup_free_ char *w = strdup_printf(
				"linux.frozen_ftrace: kernel addresses are not named: %s: %s",
				paths && paths->kallsyms ? paths->kallsyms : "/proc/kallsyms",
				r == -EPERM ? "addresses hidden (kernel.kptr_restrict, or no CAP_SYSLOG)" : strerror(-r));
			(void)str_append_line(&warnings, w);
		} else if (frozen_ftrace_addr_delta(&bi, ksyms_text_start(f->ksyms), &delta) < 0) {
			(void)str_append_line(&warnings, "linux.frozen_ftrace: the previous boot's kernel text "
							 "address is unknown: kernel addresses are not named");
			f->ksyms = ksyms_free(f->ksyms);
		} else if (!ksyms_text_start(f->ksyms) || ksyms_text_end(f->ksyms) <= ksyms_text_start(f->ksyms)) {
			(void)str_append_line(&warnings, "linux.frozen_ftrace: kallsyms lists no _text/_etext: "
							 "kernel addresses are not named");
			f->ksyms = ksyms_free(f->ksyms);
		} else {
			/* the core kernel only: a module's old address moved by the
			 * kernel's delta would name whatever lies there now */
			f->sym.k = f->ksyms;
			f->sym.addr_delta = delta;
			f->sym.text_lo = ksyms_text_start(f->ksyms);
			f->sym.text_hi = ksyms_text_end(f->ksyms);
		}
	}
	ftrace_parser_set_bundle_hook(f->parser, ftrace_symbolize_bundle, &f->sym);

	if (ret_warnings)
		*ret_warnings = TAKE_PTR(warnings);
	*ret = TAKE_PTR(f);
	return 0;
}

/* ---- reading -------------------------------------------------------------------- */

/* One slice of up to @max pages of @cpu.  Returns: the pages read. */
static uint64_t read_slice(struct frozen *f, unsigned cpu, uint64_t max)
{
	struct frozen_cpu *c = &f->cpu[cpu];
	uint64_t n = 0;
	bool open = false;

	while (c->fd >= 0 && n < max && c->quota > 0) {
		ssize_t k = read(c->fd, f->page, f->page_size);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || (size_t)k != f->page_size) {
			/* EAGAIN or 0: the buffer is empty, as expected at its end */
			if (k < 0 && errno != EAGAIN)
				f->errors_mask |= 1u << FTRACE_STATUS_UNEXPECTED_READ_ERROR;
			else if (k > 0)
				f->errors_mask |= 1u << FTRACE_STATUS_PARTIAL_PAGE_READ;
			close_cpu(c);
			break;
		}
		if (!open) {
			if (ftrace_parser_batch_begin(f->parser, cpu, f->page_size, &f->sink, &c->st, f->pids,
						      &f->stats) < 0) {
				close_cpu(c);
				break;
			}
			open = true;
		}
		ftrace_parser_batch_page(f->parser, f->page);
		c->quota--;
		c->pages++;
		n++;
	}
	if (c->quota == 0)
		close_cpu(c);
	if (open) {
		(void)ftrace_parser_batch_end(f->parser);
		/* the slice is a pass: symbol indices restart with the next one */
		ftrace_symbolize_pass_end(&f->sym);
		ftrace_pidset_clear(f->pids);
	}
	return n;
}

static void write_stats(struct frozen *f, int phase)
{
	struct ftrace_cpu_stats *cs = NULL;
	struct ftrace_stats_msg m = {
		.phase = phase,
		.preserve_ftrace_buffer = phase == 1,
	};
	struct pbw *w;

	if (phase == 2) {
		cs = calloc(f->n_cpus, sizeof(*cs));
		for (unsigned i = 0; cs && i < f->n_cpus; i++)
			if (ftrace_stats_read(f->tfs, i, &cs[i]) < 0)
				cs[i].present = 0;
		m.cpu = cs;
		m.n_cpu = cs ? f->n_cpus : 0;
		m.parse_errors = f->errors_mask | f->stats.parse_errors_mask;
		m.kernel_symbols_parsed = f->ksyms ? (uint32_t)ksyms_count(f->ksyms) : 0;
		m.kernel_symbols_mem_kb = f->ksyms ? (uint32_t)(ksyms_mem_bytes(f->ksyms) / 1024) : 0;
	}
	w = f->sink.begin_packet(f->sink.userdata);
	if (w) {
		ftrace_stats_encode(w, &m);
		(void)f->sink.end_packet(f->sink.userdata);
	}
	free(cs);
}

/* Reading is over: the END stats, then the clean-up v58.2 does. */
static void finish(struct frozen *f)
{
	if (f->done)
		return;
	f->done = true;
	write_stats(f, 2);
	if (ftrace_tracefs_clear_frozen(f->tfs) >= 0)
		f->cleared = true;
	if (f->host.commit_soon)
		f->host.commit_soon(f->host.host);
}

/* One slice of every CPU.  Returns: whether any CPU is left to read. */
static bool read_round(struct frozen *f, uint64_t max)
{
	bool more = false;

	for (unsigned i = 0; i < f->n_cpus; i++) {
		(void)read_slice(f, i, max);
		more |= f->cpu[i].fd >= 0;
	}
	return more;
}

static int on_task(struct loop_source *s, void *userdata)
{
	struct frozen *f = userdata;

	if (read_round(f, FROZEN_SLICE_PAGES)) {
		if (f->host.commit_soon)
			f->host.commit_soon(f->host.host);
		return loop_source_set_enabled(s, LOOP_ONESHOT);
	}
	finish(f);
	return 0;
}

/* ---- ds_ops ------------------------------------------------------------------------ */

static int op_setup(const struct ds_env *env, const struct Perfetto__Protos__DataSourceConfig *cfg,
		    void **ret, char **ret_error, char **ret_warnings)
{
	return frozen_ftrace_setup_at(env, cfg, NULL, ret, ret_error, ret_warnings);
}

static int op_start(void *ds)
{
	struct frozen *f = ds;
	int r;

	if (!f)
		return -EINVAL;
	if (f->started)
		return -EALREADY;
	f->started = true;
	/* first, so that trace_processor keeps events from before the trace's start */
	write_stats(f, 1);
	r = loop_add_defer(f->loop, &f->task, on_task, f);
	if (r < 0)
		return r;
	(void)loop_source_set_description(f->task, "frozen-ftrace-read");
	return 0;
}

static void sink_flush(struct frozen *f)
{
	if (f->sink.flush)
		f->sink.flush(f->sink.userdata);
}

static int op_flush(void *ds)
{
	struct frozen *f = ds;

	if (!f)
		return -EINVAL;
	sink_flush(f);
	return 0;
}

/*
 * The session ends (the last flush, final for `record`, not for the
 * daemon; the same here): read what is left now, so that the trace holds
 * all of it whatever the session's duration.
 */
static int op_flush_last(void *ds)
{
	struct frozen *f = ds;

	if (!f)
		return -EINVAL;
	if (f->started && !f->done) {
		while (read_round(f, FROZEN_SLICE_PAGES))
			;
		f->task = loop_source_disable_unref(f->task);
		finish(f);
	}
	sink_flush(f);
	return 0;
}

static int op_report(void *ds, struct ds_report *r)
{
	struct frozen *f = ds;

	if (!f || !r)
		return -EINVAL;
	r->events = f->stats.events;
	r->lost_events = f->stats.lost_events;
	r->pages_with_loss = f->stats.lost_pages;
	r->skipped_events = f->stats.skipped_events;
	return 0;
}

static void op_free(void *ds)
{
	struct frozen *f = ds;

	/* the ops log at debug only (ds.h): the END stats are missing from the trace */
	if (f && f->started && !f->done)
		log_debug("linux.frozen_ftrace: the session ended before instance '%s' was read to its end: "
			    "the rest is left in the buffer",
			    f->instance);
	frozen_free(f);
}

const struct ds_ops frozen_ftrace_ds_ops = {
	.name = "linux.frozen_ftrace",
	.setup = op_setup,
	.start = op_start,
	.flush = op_flush,
	.flush_final = op_flush_last,
	.flush_last = op_flush_last,
	.report = op_report,
	.free = op_free,
};
