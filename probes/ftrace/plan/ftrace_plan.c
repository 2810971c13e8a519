/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resolve step: the one place that reads a FtraceConfig.  It turns the
 * config into a plan (struct ftrace_plan): validated, every default
 * applied, event names resolved, and the options the other files of this
 * room plan (atrace, kprobes, function filters) read out into plain
 * requests for them.  Pure: what it needs from the system (the available
 * events, available_filter_functions) comes in through the caller's
 * callbacks or as data, so the fuzz target and the unit tests run it
 * without a kernel.  Every name that leaves this file has passed
 * ftrace_name_valid(), which is what makes it safe to put in a path.
 */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ftrace/plan/ftrace_plan_internal.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "util/util.h"

static void ftrace_config_freep_(struct ftrace_config **c)
{
	ftrace_config_free(*c);
}

static void ftrace_atrace_implied_freep(struct ftrace_atrace_implied **a)
{
	ftrace_atrace_implied_free(*a);
}

/* ---- resolution ---------------------------------------------------------- */

/*
 * Groups searched, in this order, for a bare event name (Perfetto looks
 * bare names up in its compiled-in table, which is dominated by these).
 */
static const char *const known_groups[] = {
	"sched", "task", "power", "irq", "ftrace", "raw_syscalls", "signal", "timer", "workqueue",
	"ipi", "cpuhp", "oom", "kmem", "vmscan", "compaction", "block", "filemap", "writeback",
	"ext4", "f2fs", "i2c", "regulator", "clk", "binder", "lowmemorykiller", "mm_event",
	"dmabuf_heap", "gpu_mem", "thermal", "cgroup", "syscalls", "sock", "net", "skb",
	"tcp", "fastrpc", "panel", "mali", "dpu", "g2d", "scm", "systrace", "vmstat",
};

struct resolver {
	const struct ftrace_event_list *avail;
	struct ftrace_config *c;
	bool *chosen;                   /* per avail index */
	size_t cap_events, cap_unknown;
};

static int add_event(struct resolver *rs, size_t idx)
{
	struct ftrace_config *c = rs->c;

	if (rs->chosen[idx])
		return 0;
	if (c->n_events >= FTRACE_MAX_EVENTS)
		return -E2BIG;
	if (c->n_events == rs->cap_events) {
		size_t cap = rs->cap_events ? rs->cap_events * 2 : 32;
		const struct ftrace_event_name **e = reallocarray(c->events, cap, sizeof(*e));

		if (!e)
			return -ENOMEM;
		c->events = e;
		rs->cap_events = cap;
	}
	rs->chosen[idx] = true;
	c->events[c->n_events++] = &rs->avail->ev[idx];
	return 0;
}

static int add_unknown(struct resolver *rs, const char *name)
{
	struct ftrace_config *c = rs->c;
	char *d;

	for (size_t i = 0; i < c->n_unknown; i++)
		if (strncmp(c->unknown[i], name, FTRACE_MAX_REPORTED_NAME) == 0)
			return 0;
	if (c->n_unknown == rs->cap_unknown) {
		size_t cap = rs->cap_unknown ? rs->cap_unknown * 2 : 8;
		char **u = reallocarray(c->unknown, cap, sizeof(*u));

		if (!u)
			return -ENOMEM;
		c->unknown = u;
		rs->cap_unknown = cap;
	}
	d = str_printable_dup(name, FTRACE_MAX_REPORTED_NAME);
	if (!d)
		return -ENOMEM;
	c->unknown[c->n_unknown++] = d;
	return 0;
}

static int warn(struct ftrace_config *c, const char *fmt, ...) _printf_(2, 3);
static int warn(struct ftrace_config *c, const char *fmt, ...)
{
	_cleanup_free_ char *line = NULL;
	size_t old = c->warnings ? strlen(c->warnings) : 0, add;
	va_list ap;
	char *n;

	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (!line)
		return -ENOMEM;
	add = strlen(line);
	n = realloc(c->warnings, old + add + 2);
	if (!n)
		return -ENOMEM;
	memcpy(n + old, line, add);
	n[old + add] = '\n';
	n[old + add + 1] = 0;
	c->warnings = n;
	return 0;
}

static int resolve_one(struct resolver *rs, const char *req)
{
	const struct ftrace_event_list *l = rs->avail;
	char group[FTRACE_NAME_MAX + 1], name[FTRACE_NAME_MAX + 1];
	const char *slash = strchr(req, '/');
	const struct ftrace_event_name *e;
	size_t glen;

	if (!slash) {
		if (!ftrace_name_valid(req))
			return add_unknown(rs, req);
		for (size_t i = 0; i < ARRAY_SIZE(known_groups); i++) {
			e = ftrace_event_list_find(l, known_groups[i], req);
			if (e)
				return add_event(rs, (size_t)(e - l->ev));
		}
		/* Not in a known group: accept it only if exactly one group has it. */
		size_t found = SIZE_MAX;
		for (size_t i = 0; i < l->n; i++) {
			if (strcmp(l->ev[i].name, req) != 0)
				continue;
			if (found != SIZE_MAX)
				return add_unknown(rs, req);
			found = i;
		}
		return found == SIZE_MAX ? add_unknown(rs, req) : add_event(rs, found);
	}

	glen = (size_t)(slash - req);
	if (glen == 0 || glen > FTRACE_NAME_MAX || strlen(slash + 1) > FTRACE_NAME_MAX)
		return add_unknown(rs, req);
	memcpy(group, req, glen);
	group[glen] = 0;
	strcpy(name, slash + 1);
	if (!ftrace_name_valid(group))
		return add_unknown(rs, req);

	if (strcmp(name, "*") == 0) {
		size_t i = ftrace_event_list_group_start(l, group);
		bool any = false;
		int r;

		for (; i < l->n && strcmp(l->ev[i].group, group) == 0; i++) {
			any = true;
			r = add_event(rs, i);
			if (r < 0)
				return r;
		}
		return any ? 0 : add_unknown(rs, req);
	}
	if (!ftrace_name_valid(name))
		return add_unknown(rs, req);
	e = ftrace_event_list_find(l, group, name);
	if (!e)
		return add_unknown(rs, req);
	return add_event(rs, (size_t)(e - l->ev));
}

int ftrace_config_instance_name(const Perfetto__Protos__FtraceConfig *cfg, const char **ret, char **ret_error)
{
	const char *n = cfg->instance_name;

	if (!n || !n[0]) {
		*ret = NULL;
		return 0;
	}
	if (!ftrace_instance_name_valid(n)) {
		if (ret_error) {
			_cleanup_free_ char *p = str_printable_dup(n, FTRACE_MAX_REPORTED_NAME);

			free(*ret_error);
			if (asprintf(ret_error, "invalid FtraceConfig.instance_name '%s': use 1..%u of [A-Za-z0-9_.-], "
				     "not '.' or '..'", p ? p : "", FTRACE_INSTANCE_NAME_MAX) < 0)
				*ret_error = NULL;
		}
		return -EINVAL;
	}
	*ret = n;
	return 0;
}

static uint32_t default_buffer_kb(uint64_t ram_bytes)
{
	return ram_bytes >= FTRACE_HIGH_RAM_BYTES ? FTRACE_BUFFER_KB_HIGH_RAM : FTRACE_BUFFER_KB_LOW_RAM;
}

/* Every event of @imp: the required ones resolve like ftrace_events, the optional ones only if present. */
static int resolve_implied(struct resolver *rs, const struct ftrace_atrace_implied *imp, bool throttled)
{
	const struct ftrace_event_list *l = rs->avail;
	int r;

	for (size_t i = 0; i < imp->n_events; i++) {
		const struct ftrace_atrace_event *ae = &imp->events[i];
		const struct ftrace_event_name *e;

		/* The rows of the category table that depend on the kernel. */
		if (((ae->flags & FTRACE_ATRACE_IF_THROTTLED) && !throttled) ||
		    ((ae->flags & FTRACE_ATRACE_UNLESS_THROTTLED) && throttled))
			continue;
		e = ftrace_event_list_find(l, ae->group, ae->name);
		if (e) {
			r = add_event(rs, (size_t)(e - l->ev));
		} else if (ae->flags & FTRACE_ATRACE_OPTIONAL) {
			r = 0;
		} else {
			char name[2 * FTRACE_NAME_MAX + 2];

			(void)snprintf(name, sizeof(name), "%s/%s", ae->group, ae->name);
			r = add_unknown(rs, name);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static bool is_event(const struct ftrace_event_name *e, const char *group, const char *name)
{
	return strcmp(e->group, group) == 0 && strcmp(e->name, name) == 0;
}

/* Drop the events of @group from the resolved set. */
static void drop_group(struct ftrace_config *c, const char *group)
{
	size_t w = 0;

	for (size_t i = 0; i < c->n_events; i++)
		if (strcmp(c->events[i]->group, group) != 0)
			c->events[w++] = c->events[i];
	c->n_events = w;
}

/*
 * throttle_rss_stat on a kernel that has synthetic/rss_stat_throttled:
 * that event instead of kmem/rss_stat.  (Linux kernels have no such event
 * unless someone made it; then kmem/rss_stat stays.)
 */
static int replace_rss_stat(struct resolver *rs)
{
	const struct ftrace_event_name *thr = ftrace_event_list_find(rs->avail, "synthetic", "rss_stat_throttled");
	struct ftrace_config *c = rs->c;
	size_t w = 0;

	if (!thr)
		return 0;
	for (size_t i = 0; i < c->n_events; i++)
		if (!is_event(c->events[i], "kmem", "rss_stat"))
			c->events[w++] = c->events[i];
	c->n_events = w;
	return add_event(rs, (size_t)(thr - rs->avail->ev));
}

static int set_reason(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int set_reason(char **ret_error, const char *fmt, ...)
{
	char *m = NULL;
	va_list ap;

	if (!ret_error)
		return -EINVAL;
	va_start(ap, fmt);
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	free(*ret_error);
	*ret_error = m;
	return -EINVAL;
}

/* syscall_events: the raw_syscalls filter of this machine's syscall table. */
static int resolve_syscalls(const Perfetto__Protos__FtraceConfig *cfg, struct ftrace_config *c)
{
	struct ftrace_syscall_filter *f = NULL;
	enum ftrace_syscall_arch arch;
	int r;

	for (size_t i = 0; i < c->n_events; i++)
		if (strcmp(c->events[i]->group, "raw_syscalls") == 0)
			c->has_raw_syscalls = true;
	if (cfg->n_syscall_events == 0 || !c->has_raw_syscalls)
		return 0;
	arch = ftrace_syscall_arch_current();
	if (arch < 0) {
		drop_group(c, "raw_syscalls");
		c->has_raw_syscalls = false;
		return warn(c, "FtraceConfig.syscall_events: no syscall table for this architecture; "
			    "raw_syscalls not recorded");
	}
	r = ftrace_syscall_filter_build(arch, (const char *const *)cfg->syscall_events, cfg->n_syscall_events, &f);
	if (r < 0)
		return r;
	for (size_t i = 0; i < f->n_unknown && r >= 0; i++)
		r = warn(c, "FtraceConfig.syscall_events: '%s' is not a syscall of %s", f->unknown[i],
			 ftrace_syscall_arch_to_string(arch));
	if (r >= 0 && f->n_unknown_total > f->n_unknown)
		r = warn(c, "FtraceConfig.syscall_events: %zu more unknown syscalls",
			 f->n_unknown_total - f->n_unknown);
	if (r >= 0 && !f->filter) {
		/* traced_probes would record every syscall; nothing listed is one. */
		drop_group(c, "raw_syscalls");
		c->has_raw_syscalls = false;
		r = warn(c, "FtraceConfig.syscall_events: no listed syscall exists on %s; raw_syscalls not recorded",
			 ftrace_syscall_arch_to_string(arch));
	}
	if (r >= 0 && f->filter)
		c->syscall_filter = TAKE_PTR(f->filter);
	ftrace_syscall_filter_free(f);
	return r;
}

/* tids_to_trace, tracing_cpumask, tracefs_options: checked now, written by the data source. */
static int resolve_exclusive(const Perfetto__Protos__FtraceConfig *cfg, struct ftrace_config *c, char **ret_error)
{
	int r;

	if (cfg->n_tids_to_trace > 0) {
		r = ftrace_opts_tids(cfg->tids_to_trace, cfg->n_tids_to_trace, &c->event_pids);
		if (r == -EINVAL)
			return set_reason(ret_error, "FtraceConfig.tids_to_trace: 0 is not a thread id");
		if (r == -E2BIG)
			return set_reason(ret_error, "FtraceConfig.tids_to_trace lists %zu tids, more than the %u allowed",
					  cfg->n_tids_to_trace, FTRACE_MAX_TIDS);
		if (r < 0)
			return r;
		c->exclusive = true;
	}
	if (cfg->tracing_cpumask && cfg->tracing_cpumask[0]) {
		if (!ftrace_opts_cpumask_valid(cfg->tracing_cpumask)) {
			_cleanup_free_ char *p = str_printable_dup(cfg->tracing_cpumask, FTRACE_MAX_REPORTED_NAME);

			return set_reason(ret_error, "FtraceConfig.tracing_cpumask '%s' is not a hex CPU mask "
					  "(such as \"3\" or \"ff,ffffffff\")", p ? p : "");
		}
		c->cpumask = strdup(cfg->tracing_cpumask);
		if (!c->cpumask)
			return -ENOMEM;
		c->exclusive = true;
	}
	if (cfg->n_tracefs_options > FTRACE_MAX_TRACEFS_OPTIONS)
		return set_reason(ret_error, "FtraceConfig lists %zu tracefs_options, more than the %u allowed",
				  cfg->n_tracefs_options, FTRACE_MAX_TRACEFS_OPTIONS);
	for (size_t i = 0; i < cfg->n_tracefs_options; i++) {
		const Perfetto__Protos__FtraceConfig__TracefsOption *o = cfg->tracefs_options[i];

		c->exclusive = true;
		if (!o || !o->has_state || o->state == PERFETTO__PROTOS__FTRACE_CONFIG__TRACEFS_OPTION__STATE__STATE_UNKNOWN)
			continue;
		if (!ftrace_opts_option_name_valid(o->name)) {
			_cleanup_free_ char *p = str_printable_dup(o->name ? o->name : "", FTRACE_MAX_REPORTED_NAME);

			return set_reason(ret_error, "FtraceConfig.tracefs_options: invalid option name '%s' "
					  "(use [A-Za-z0-9_-])", p ? p : "");
		}
		if (!c->options) {
			c->options = calloc(cfg->n_tracefs_options, sizeof(*c->options));
			if (!c->options)
				return -ENOMEM;
		}
		c->options[c->n_options].name = strdup(o->name);
		if (!c->options[c->n_options].name)
			return -ENOMEM;
		c->options[c->n_options++].on =
			o->state == PERFETTO__PROTOS__FTRACE_CONFIG__TRACEFS_OPTION__STATE__STATE_ENABLED;
	}
	return 0;
}

/* "group/event": two names and the slash */
#define EVENT_NAME_MAX (2 * FTRACE_NAME_MAX + 1)

int ftrace_plan_check(const Perfetto__Protos__FtraceConfig *cfg, char *err, size_t err_len)
{
	if (!cfg)
		return 0;
	if (cfg->n_ftrace_events > FTRACE_MAX_CONFIG_EVENTS) {
		snprintf(err, err_len, "lists %zu ftrace_events, more than the limit of %u",
			 cfg->n_ftrace_events, FTRACE_MAX_CONFIG_EVENTS);
		return -E2BIG;
	}
	for (size_t k = 0; k < cfg->n_ftrace_events; k++) {
		size_t n = cfg->ftrace_events[k] ? strlen(cfg->ftrace_events[k]) : 0;

		if (n > EVENT_NAME_MAX) {
			snprintf(err, err_len, "has an ftrace_events[%zu] of %zu bytes, more than the limit "
				 "of %u (a group and an event name of at most %u each)", k, n,
				 EVENT_NAME_MAX, FTRACE_NAME_MAX);
			return -E2BIG;
		}
	}
	if (cfg->instance_name && strlen(cfg->instance_name) > FTRACE_INSTANCE_NAME_MAX) {
		snprintf(err, err_len, "has an instance_name of %zu bytes, more than the limit of %u",
			 strlen(cfg->instance_name), FTRACE_INSTANCE_NAME_MAX);
		return -E2BIG;
	}
	return 0;
}

/* ftrace_config_resolve() with the implied events of @cfg already planned
 * (FTRACE_ATRACE_RSS_THROTTLED_EITHER): the conditions are decided here,
 * by whether @avail has synthetic/rss_stat_throttled. */
static int resolve_config(const Perfetto__Protos__FtraceConfig *cfg, const struct ftrace_event_list *avail,
			  uint64_t ram_bytes, const struct ftrace_atrace_implied *implied, struct ftrace_config **ret,
			  char **ret_error)
{
	_cleanup_(ftrace_config_freep_) struct ftrace_config *c = NULL;
	_cleanup_free_ bool *chosen = NULL;
	bool throttled = ftrace_event_list_find(avail, "synthetic", "rss_stat_throttled");
	struct resolver rs;
	const char *inst;
	int r;

	r = ftrace_config_instance_name(cfg, &inst, ret_error);
	if (r < 0)
		return r;
	if (cfg->n_ftrace_events > FTRACE_MAX_CONFIG_EVENTS) {
		if (ret_error) {
			free(*ret_error);
			if (asprintf(ret_error, "FtraceConfig lists %zu events, more than the %u allowed",
				     cfg->n_ftrace_events, FTRACE_MAX_CONFIG_EVENTS) < 0)
				*ret_error = NULL;
		}
		return -EINVAL;
	}

	if (inst && (cfg->n_atrace_categories > 0 || cfg->n_atrace_apps > 0))
		return set_reason(ret_error, "FtraceConfig.atrace_categories and atrace_apps cannot be used with "
				  "instance_name '%s' (as in traced_probes: they stand for system-wide state)", inst);

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (inst) {
		c->instance_name = strdup(inst);
		if (!c->instance_name)
			return -ENOMEM;
	}
	chosen = calloc(avail->n ? avail->n : 1, sizeof(bool));
	if (!chosen)
		return -ENOMEM;
	rs = (struct resolver){ .avail = avail, .c = c, .chosen = chosen };

	for (size_t i = 0; i < cfg->n_ftrace_events; i++) {
		const char *req = cfg->ftrace_events[i];

		if (!req)
			continue;
		r = resolve_one(&rs, req);
		if (r == -E2BIG) {
			if (ret_error) {
				free(*ret_error);
				if (asprintf(ret_error, "FtraceConfig expands to more than %u events",
					     FTRACE_MAX_EVENTS) < 0)
					*ret_error = NULL;
			}
			return -EINVAL;
		}
		if (r < 0)
			return r;
	}
	r = resolve_implied(&rs, implied, throttled);
	if (r >= 0 && implied->replace_rss_stat && throttled)
		r = replace_rss_stat(&rs);
	if (r == -E2BIG)
		return set_reason(ret_error, "FtraceConfig expands to more than %u events", FTRACE_MAX_EVENTS);
	if (r < 0)
		return r;
	c->atrace_userspace = implied->atrace_userspace;
	for (size_t i = 0; i < implied->n_unknown_categories && r >= 0; i++)
		r = warn(c, "atrace category '%s' has no kernel events on Linux", implied->unknown_categories[i]);
	for (size_t i = 0; i < c->n_unknown && r >= 0; i++)
		r = warn(c, "unknown ftrace event '%s'", c->unknown[i]);
	if (r < 0)
		return r;
	r = resolve_syscalls(cfg, c);
	if (r < 0)
		return r;
	r = resolve_exclusive(cfg, c, ret_error);
	if (r < 0)
		return r;
	c->function_graph = cfg->has_enable_function_graph && cfg->enable_function_graph;
	c->symbolize_ksyms = cfg->has_symbolize_ksyms && cfg->symbolize_ksyms;
	c->ksyms_retain = cfg->has_ksyms_mem_policy &&
			  cfg->ksyms_mem_policy == PERFETTO__PROTOS__FTRACE_CONFIG__KSYMS_MEM_POLICY__KSYMS_RETAIN;

	for (size_t i = 0; i < c->n_events; i++)
		if (strcmp(c->events[i]->group, "sched") == 0 && strcmp(c->events[i]->name, "sched_switch") == 0)
			c->has_sched_switch = true;

	/* Buffer size: explicit wins, unless it is only a lower bound below the default. */
	uint32_t def = default_buffer_kb(ram_bytes);
	uint32_t kb = cfg->has_buffer_size_kb ? cfg->buffer_size_kb : 0;
	if (kb == 0 || (cfg->has_buffer_size_lower_bound && cfg->buffer_size_lower_bound && kb < def))
		kb = def;
	/*
	 * traced_probes v58.2 writes whatever size is asked (it dropped its
	 * 64 MiB cap); a uint32 of KiB is up to 4 TiB per CPU, which the kernel
	 * would try to allocate.  Ours: at most 1 GiB per CPU, and all CPUs
	 * together at most a quarter of the machine's memory.  Either cap is
	 * said in the warnings (the daemon's log, record's output), and the
	 * size the kernel then has is in FtraceStats.cpu_buffer_size_pages.
	 */
	c->buffer_size_kb = MIN(kb, FTRACE_BUFFER_KB_MAX);
	if (kb > FTRACE_BUFFER_KB_MAX) {
		r = warn(c, "buffer_size_kb %u is over the cap of %u KiB (1 GiB) per CPU; using %u", kb,
			 FTRACE_BUFFER_KB_MAX, FTRACE_BUFFER_KB_MAX);
		if (r < 0)
			return r;
	}
	/* never ask the kernel for more than a quarter of the machine's memory in all */
	if (ram_bytes > 0) {
		long ncpus = sysconf(_SC_NPROCESSORS_CONF);
		uint64_t cap_kb = ram_bytes / 4 / 1024 / (uint64_t)(ncpus > 0 ? ncpus : 1);

		if (cap_kb >= 4 && c->buffer_size_kb > cap_kb) {
			r = warn(c, "buffer_size_kb %u is more than this machine can hold (all CPUs together at most a "
				 "quarter of its %llu MiB); using %llu", c->buffer_size_kb,
				 (unsigned long long)(ram_bytes >> 20), (unsigned long long)cap_kb);
			if (r < 0)
				return r;
			c->buffer_size_kb = (uint32_t)cap_kb;
		}
	}

	c->drain_period_ms = FTRACE_DRAIN_MS_DEFAULT;
	if (cfg->has_drain_period_ms && cfg->drain_period_ms >= FTRACE_DRAIN_MS_MIN &&
	    cfg->drain_period_ms <= FTRACE_DRAIN_MS_MAX)
		c->drain_period_ms = cfg->drain_period_ms;

	c->drain_buffer_percent = cfg->has_drain_buffer_percent && cfg->drain_buffer_percent <= 100 ?
					  cfg->drain_buffer_percent : 0;
	c->compact_sched = c->has_sched_switch &&
			   (!cfg->compact_sched || !cfg->compact_sched->has_enabled || cfg->compact_sched->enabled);
	c->disable_generic_events = cfg->has_disable_generic_events && cfg->disable_generic_events;
	c->denser_generic_events = !cfg->has_denser_generic_event_encoding || cfg->denser_generic_event_encoding;
	c->preserve = cfg->has_preserve_ftrace_buffer && cfg->preserve_ftrace_buffer;
	c->mono_raw = cfg->has_use_monotonic_raw_clock && cfg->use_monotonic_raw_clock;

	*ret = TAKE_PTR(c);
	return 0;
}

int ftrace_config_resolve(const Perfetto__Protos__FtraceConfig *cfg, const struct ftrace_event_list *avail,
			  uint64_t ram_bytes, struct ftrace_config **ret, char **ret_error)
{
	_cleanup_(ftrace_atrace_implied_freep) struct ftrace_atrace_implied *implied = NULL;
	int r;

	r = ftrace_atrace_implied(cfg, FTRACE_ATRACE_RSS_THROTTLED_EITHER, &implied);
	if (r < 0)
		return r;
	return resolve_config(cfg, avail, ram_bytes, implied, ret, ret_error);
}

struct ftrace_config *ftrace_config_free(struct ftrace_config *c)
{
	if (!c)
		return NULL;
	for (size_t i = 0; i < c->n_unknown; i++)
		free(c->unknown[i]);
	free(c->unknown);
	free(c->events);
	free(c->warnings);
	free(c->instance_name);
	free(c->syscall_filter);
	free(c->event_pids);
	free(c->cpumask);
	for (size_t i = 0; i < c->n_options; i++)
		free(c->options[i].name);
	free(c->options);
	free(c);
	return NULL;
}

/* ---- the options other files plan, read out of the config here ------------ */

int ftrace_atrace_implied(const Perfetto__Protos__FtraceConfig *cfg, unsigned flags,
			  struct ftrace_atrace_implied **ret)
{
	struct ftrace_atrace_request req = {
		.categories = (const char *const *)cfg->atrace_categories,
		.n_categories = cfg->n_atrace_categories,
		.apps = cfg->n_atrace_apps > 0,
		.userspace_only = cfg->has_atrace_userspace_only && cfg->atrace_userspace_only,
		.syscalls = cfg->n_syscall_events > 0,
		.function_graph = cfg->has_enable_function_graph && cfg->enable_function_graph,
		.throttle_rss_stat = cfg->has_throttle_rss_stat && cfg->throttle_rss_stat,
	};

	return ftrace_atrace_implied_from(&req, flags, ret);
}

int ftrace_kprobe_plan_build(const Perfetto__Protos__FtraceConfig *cfg, const struct ftrace_funcs *avail,
			     struct ftrace_kprobe_plan **ret)
{
	_cleanup_free_ struct ftrace_kprobe_request *reqs = NULL;

	reqs = calloc(cfg->n_kprobe_events ? cfg->n_kprobe_events : 1, sizeof(*reqs));
	if (!reqs)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->n_kprobe_events; i++) {
		const Perfetto__Protos__FtraceConfig__KprobeEvent *k = cfg->kprobe_events[i];
		int type = k && k->has_type ? (int)k->type : 0;

		reqs[i].probe = k ? k->probe : NULL;
		reqs[i].kprobe = type == PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_KPROBE ||
				 type == PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_BOTH;
		reqs[i].kretprobe =
			type == PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_KRETPROBE ||
			type == PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_BOTH;
	}
	return ftrace_kprobe_plan_from(reqs, cfg->n_kprobe_events, avail, ret);
}

/* ---- the plan -------------------------------------------------------------- */

static void ftrace_plan_freep(struct ftrace_plan **p)
{
	ftrace_plan_free(*p);
}

static bool has_exclusive(const Perfetto__Protos__FtraceConfig *cfg)
{
	return cfg->n_tids_to_trace > 0 || cfg->n_tracefs_options > 0 ||
	       (cfg->tracing_cpumask && cfg->tracing_cpumask[0]);
}

/* The names the directory's event list must hold for @cfg to resolve: the
 * full list is thousands of events. */
static int event_requests(const Perfetto__Protos__FtraceConfig *cfg, const struct ftrace_atrace_implied *imp,
			  char ***ret, size_t *ret_n)
{
	char **v;
	size_t n = 0, cap;
	int r = 0;

	cap = cfg->n_ftrace_events + imp->n_events + 1;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; r >= 0 && i < cfg->n_ftrace_events; i++) {
		if (!cfg->ftrace_events[i])
			continue;
		v[n] = strdup(cfg->ftrace_events[i]);
		r = v[n++] ? 0 : -ENOMEM;
	}
	for (size_t i = 0; r >= 0 && i < imp->n_events; i++) {
		/* As for a kernel that has synthetic/rss_stat_throttled: its
		 * group is then read, and kmem is read for the other rows. */
		if (imp->events[i].flags & FTRACE_ATRACE_UNLESS_THROTTLED)
			continue;
		v[n] = strdup_printf("%s/%s", imp->events[i].group, imp->events[i].name);
		r = v[n++] ? 0 : -ENOMEM;
	}
	if (r >= 0 && cfg->has_throttle_rss_stat && cfg->throttle_rss_stat) {
		v[n] = strdup("synthetic/rss_stat_throttled");
		r = v[n++] ? 0 : -ENOMEM;
	}
	if (r < 0) {
		ftrace_opts_strv_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static int print_rules(const Perfetto__Protos__FtraceConfig__PrintFilter *pf, struct ftrace_plan *p)
{
	if (!pf || pf->n_rules == 0)
		return 0;
	p->print_rules = calloc(pf->n_rules, sizeof(*p->print_rules));
	if (!p->print_rules)
		return -ENOMEM;
	/* Every rule, even one with nothing to match: the filter counts them
	 * against its limit as they were given. */
	for (size_t i = 0; i < pf->n_rules; i++) {
		const Perfetto__Protos__FtraceConfig__PrintFilter__Rule *c = pf->rules[i];
		struct ftrace_print_rule *pr = &p->print_rules[p->n_print_rules++];
		const char *type = NULL, *prefix = NULL;

		pr->allow = c->has_allow && c->allow;
		switch (c->match_case) {
		case PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__MATCH_PREFIX:
			pr->match = FTRACE_PRINT_MATCH_PREFIX;
			prefix = c->prefix;
			break;
		case PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__MATCH_ATRACE_MSG:
			pr->match = FTRACE_PRINT_MATCH_ATRACE;
			type = c->atrace_msg->type;
			prefix = c->atrace_msg->prefix;
			break;
		default:
			pr->match = FTRACE_PRINT_MATCH_NONE;
			break;
		}
		if ((type && !(pr->type = strdup(type))) || (prefix && !(pr->prefix = strdup(prefix))))
			return -ENOMEM;
	}
	return 0;
}

static int add_failed(struct ftrace_plan *p, const char *what, const char *why)
{
	char **n = reallocarray(p->failed, p->n_failed + 1, sizeof(*n));
	_cleanup_free_ char *line = NULL;

	if (!n)
		return -ENOMEM;
	p->failed = n;
	p->failed[p->n_failed] = strdup_printf("%s (%s)", what, why);
	if (!p->failed[p->n_failed])
		return -ENOMEM;
	p->n_failed++;
	line = strdup_printf("ftrace: %s: %s", what, why);
	return line ? str_append_line(&p->warnings, line) : -ENOMEM;
}

/* Refused and dropped entries of one filter list, as failed_ftrace_events. */
static int report_filter(struct ftrace_plan *p, const char *list, const struct ftrace_funcs_filter *f)
{
	int r = 0;

	for (size_t i = 0; r >= 0 && i < f->n_rejected; i++) {
		_cleanup_free_ char *what = strdup_printf("%s: %s", list, f->rejected[i]);

		r = what ? add_failed(p, what, "not a kernel function, or not a valid name") : -ENOMEM;
	}
	if (r >= 0 && f->n_rejected_total > f->n_rejected) {
		_cleanup_free_ char *why = strdup_printf("%zu more entries refused", f->n_rejected_total - f->n_rejected);

		r = why ? add_failed(p, list, why) : -ENOMEM;
	}
	if (r >= 0 && f->n_dropped > 0) {
		_cleanup_free_ char *why = strdup_printf("%zu entries past the first %u dropped", f->n_dropped,
							 FTRACE_MAX_FUNCTION_FILTERS);

		r = why ? add_failed(p, list, why) : -ENOMEM;
	}
	return r;
}

/* Kprobes and the function graph filters, against the kernel's functions. */
static int plan_functions(const Perfetto__Protos__FtraceConfig *cfg, const struct ftrace_plan_env *env,
			  struct ftrace_plan *p)
{
	bool graph = cfg->has_enable_function_graph && cfg->enable_function_graph;
	struct ftrace_funcs *avail = NULL;
	int r = 0;

	if (cfg->n_kprobe_events > 0 || (graph && (cfg->n_function_filters > 0 || cfg->n_function_graph_roots > 0))) {
		_cleanup_free_ char *text = NULL;

		r = env->read_functions ? env->read_functions(env->userdata, &text) : -ENOENT;
		if (r >= 0)
			r = ftrace_funcs_parse(text, strlen(text), &avail);
		else if (r != -ENOMEM) {
			/* Some kernels refuse it even to root: the kernel then judges the names. */
			char *line = strdup_printf("ftrace: cannot read available_filter_functions (%s): function "
						   "names are checked for their characters only", strerror(-r));

			r = line ? str_append_line(&p->warnings, line) : -ENOMEM;
			free(line);
		}
	}
	if (r >= 0)
		r = ftrace_kprobe_plan_build(cfg, avail, &p->kprobes);
	for (size_t i = 0; r >= 0 && i < p->kprobes->n_rejected; i++)
		r = add_failed(p, p->kprobes->rejected[i], "refused: not a kernel function, or not a valid name");
	if (r >= 0 && graph) {
		p->graph_max_depth = cfg->has_function_graph_max_depth ? cfg->function_graph_max_depth : 0;
		r = ftrace_funcs_filter_build(avail, (const char *const *)cfg->function_filters,
					      cfg->n_function_filters, &p->function_filters);
		if (r >= 0)
			r = ftrace_funcs_filter_build(avail, (const char *const *)cfg->function_graph_roots,
						      cfg->n_function_graph_roots, &p->graph_roots);
		if (r >= 0)
			r = report_filter(p, "function_filters", p->function_filters);
		if (r >= 0)
			r = report_filter(p, "function_graph_roots", p->graph_roots);
	}
	ftrace_funcs_free(avail);
	return r;
}

int ftrace_plan_resolve(const Perfetto__Protos__FtraceConfig *cfg, const struct ftrace_plan_env *env,
			struct ftrace_plan **ret, char **ret_error)
{
	_cleanup_(ftrace_plan_freep) struct ftrace_plan *p = NULL;
	_cleanup_(ftrace_atrace_implied_freep) struct ftrace_atrace_implied *implied = NULL;
	char **reqs = NULL;
	size_t n_reqs = 0;
	const char *inst;
	int r;

	if (!cfg || !env || !env->read_events || !ret)
		return -EINVAL;
	r = ftrace_config_instance_name(cfg, &inst, ret_error);
	if (r < 0)
		return r;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;

	/* Once, for both the names to read and their resolution. */
	r = ftrace_atrace_implied(cfg, FTRACE_ATRACE_RSS_THROTTLED_EITHER, &implied);
	if (r < 0)
		return r;
	r = event_requests(cfg, implied, &reqs, &n_reqs);
	if (r < 0)
		return r;
	r = env->read_events(env->userdata, inst, has_exclusive(cfg), (const char *const *)reqs, n_reqs, &p->avail,
			     ret_error);
	ftrace_opts_strv_free(reqs, n_reqs);
	if (r < 0)
		return r;
	r = resolve_config(cfg, p->avail, env->ram_bytes, implied, &p->config, ret_error);
	if (r < 0)
		return r;
	r = print_rules(cfg->print_filter, p);
	if (r < 0)
		return r;
	r = plan_functions(cfg, env, p);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

struct ftrace_plan *ftrace_plan_free(struct ftrace_plan *p)
{
	if (!p)
		return NULL;
	ftrace_config_free(p->config);
	ftrace_event_list_free(p->avail);
	for (size_t i = 0; i < p->n_print_rules; i++) {
		free((char *)p->print_rules[i].type);
		free((char *)p->print_rules[i].prefix);
	}
	free(p->print_rules);
	ftrace_kprobe_plan_free(p->kprobes);
	ftrace_funcs_filter_free(p->function_filters);
	ftrace_funcs_filter_free(p->graph_roots);
	ftrace_opts_strv_free(p->failed, p->n_failed);
	free(p->warnings);
	free(p);
	return NULL;
}
