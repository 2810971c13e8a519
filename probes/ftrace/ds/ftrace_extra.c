/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What one linux.ftrace data source sets up beyond its events: kprobes
 * (created, encoded as KprobeEvent, removed through the undo list), the
 * raw_syscalls filter of syscall_events, the function_graph tracer and its
 * filters, and the exclusive options (set_event_pid, tracing_cpumask,
 * options/NAME).  What to set up comes decided in the plan (ftrace_plan.h);
 * the writes go through the directory's undo list (ftrace_tracefs.h).
 *
 * A kernel without a feature (no kprobe_events, no function_graph tracer)
 * costs that part only: it is listed in failed_ftrace_events with the
 * reason and logged, and the rest records.
 */

#include <stdio.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/ds/ftrace_ds_internal.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "util/util.h"

struct extra_kprobe {
	struct ftrace_event_name ev;    /* group is static, name points into the plan */
	int trace_type;
};

struct ftrace_extra {
	struct ftrace_kprobe_plan *kplan;
	struct extra_kprobe *kprobes;   /* created and loaded */
	const struct ftrace_event_name **kev;
	bool *kev_ok;
	size_t n_kprobes;
	bool kprobes_enabled;           /* we hold references on kev_ok[] */

	struct ftrace_funcs_filter *filters, *roots;
	uint32_t max_depth;

	char **failed;
	size_t n_failed;
	char *warnings;
};

int ftrace_extra_check(bool exclusive, struct ftrace_tracefs *t, char **ret_error)
{
	if (ftrace_tracefs_n_attached(t) == 0)
		return 0;
	if (exclusive) {
		set_error_text(ret_error, strdup_printf("a session with tids_to_trace, tracefs_options or tracing_cpumask "
							"needs %s to itself, and another session is using it",
							ftrace_tracefs_path(t)));
		return -EBUSY;
	}
	if (ftrace_tracefs_exclusive(t)) {
		set_error_text(ret_error, strdup_printf("%s is held by a session with tids_to_trace, tracefs_options or "
							"tracing_cpumask", ftrace_tracefs_path(t)));
		return -EBUSY;
	}
	return 0;
}

static int add_failed(struct ftrace_extra *x, const char *what, const char *why)
{
	char **n = reallocarray(x->failed, x->n_failed + 1, sizeof(*n));
	_cleanup_free_ char *line = NULL;

	if (!n)
		return -ENOMEM;
	x->failed = n;
	x->failed[x->n_failed] = strdup_printf("%s (%s)", what, why);
	if (!x->failed[x->n_failed])
		return -ENOMEM;
	x->n_failed++;
	line = strdup_printf("ftrace: %s: %s", what, why);
	return line ? str_append_line(&x->warnings, line) : -ENOMEM;
}

int ftrace_extra_new(struct ftrace_plan *plan, struct ftrace_extra **ret)
{
	struct ftrace_extra *x;

	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	/* Taken over from the plan: what it refused comes first in our lists. */
	x->kplan = TAKE_PTR(plan->kprobes);
	x->filters = TAKE_PTR(plan->function_filters);
	x->roots = TAKE_PTR(plan->graph_roots);
	x->max_depth = plan->graph_max_depth;
	x->failed = TAKE_PTR(plan->failed);
	x->n_failed = plan->n_failed;
	plan->n_failed = 0;
	x->warnings = TAKE_PTR(plan->warnings);
	*ret = x;
	return 0;
}

struct ftrace_extra *ftrace_extra_free(struct ftrace_extra *x)
{
	if (!x)
		return NULL;
	ftrace_kprobe_plan_free(x->kplan);
	ftrace_funcs_filter_free(x->filters);
	ftrace_funcs_filter_free(x->roots);
	free(x->kprobes);
	free(x->kev);
	free(x->kev_ok);
	ftrace_opts_strv_free(x->failed, x->n_failed);
	free(x->warnings);
	free(x);
	return NULL;
}

int ftrace_extra_setup_kprobes(struct ftrace_extra *x, struct ftrace_tracefs *t, struct ftrace_format_table *table,
			       struct ftrace_parser *parser)
{
	_cleanup_free_ char *enable_errors = NULL;
	bool no_kprobes = false;
	size_t n = 0;
	int r;

	if (!x->kplan || x->kplan->n_probes == 0)
		return 0;
	x->kprobes = calloc(x->kplan->n_probes, sizeof(*x->kprobes));
	x->kev = calloc(x->kplan->n_probes, sizeof(*x->kev));
	x->kev_ok = calloc(x->kplan->n_probes, sizeof(*x->kev_ok));
	if (!x->kprobes || !x->kev || !x->kev_ok)
		return -ENOMEM;
	for (size_t i = 0; i < x->kplan->n_probes; i++) {
		const struct ftrace_kprobe *p = &x->kplan->probes[i];
		const char *group = p->retprobe ? FTRACE_KRETPROBE_GROUP : FTRACE_KPROBE_GROUP;
		_cleanup_free_ char *err = NULL, *what = strdup_printf("%s/%s", group, p->name);
		char line[2 * FTRACE_FEATURE_NAME_MAX + 64];
		int id;

		if (!what)
			return -ENOMEM;
		if (no_kprobes) {
			r = add_failed(x, what, "the kernel has no kprobe_events");
			if (r < 0)
				return r;
			continue;
		}
		r = ftrace_kprobe_line(p, line, sizeof(line));
		if (r >= 0)
			r = ftrace_tracefs_kprobe_create(t, group, p->name, line, &err);
		if (r == -ENOMEM)
			return r;
		if (r == -ENOENT) {
			/* CONFIG_KPROBE_EVENTS=n: every probe fails the same way. */
			no_kprobes = true;
			r = add_failed(x, what, "the kernel has no kprobe_events");
			if (r < 0)
				return r;
			continue;
		}
		if (r < 0) {
			r = add_failed(x, what, err ? err : strerror(-r));
			if (r < 0)
				return r;
			continue;
		}
		r = ftrace_format_table_load_event(table, group, p->name, &id);
		if (r >= 0)
			r = ftrace_parser_enable_kprobe(parser, id, p->trace_type);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			r = add_failed(x, what, "its format could not be read");
			if (r < 0)
				return r;
			continue;
		}
		x->kprobes[n] = (struct extra_kprobe){
			.ev = { .group = group, .name = p->name },
			.trace_type = p->trace_type,
		};
		x->kev[n] = &x->kprobes[n].ev;
		n++;
	}
	x->n_kprobes = n;
	if (n == 0)
		return 0;
	r = ftrace_tracefs_enable_events(t, x->kev, n, x->kev_ok, &enable_errors);
	if (r < 0)
		return r;
	x->kprobes_enabled = true;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *what = NULL;

		if (x->kev_ok[i])
			continue;
		what = strdup_printf("%s/%s", x->kev[i]->group, x->kev[i]->name);
		r = what ? add_failed(x, what, "the kernel refused to enable it") : -ENOMEM;
		if (r < 0)
			return r;
	}
	if (enable_errors && str_append_line(&x->warnings, enable_errors) < 0)
		return -ENOMEM;
	return 0;
}

void ftrace_extra_release(struct ftrace_extra *x, struct ftrace_tracefs *t)
{
	if (!x || !x->kprobes_enabled)
		return;
	ftrace_tracefs_release_events(t, x->kev, x->n_kprobes, x->kev_ok);
	x->kprobes_enabled = false;
}

static int apply_function_graph(struct ftrace_extra *x, struct ftrace_tracefs *t)
{
	_cleanup_free_ char *refused = NULL, *err = NULL;
	int r;

	r = ftrace_tracefs_function_graph(t, x->filters ? x->filters->text : NULL, x->roots ? x->roots->text : NULL,
					  x->max_depth, &refused, &err);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		const char *why = err ? err : strerror(-r);

		r = add_failed(x, "ftrace/funcgraph_entry", why);
		if (r >= 0)
			r = add_failed(x, "ftrace/funcgraph_exit", why);
		return r;
	}
	for (char *p = refused, *nl; p && *p; p = nl + 1) {
		_cleanup_free_ char *what = NULL;

		nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = 0;
		what = strdup_printf("function filter %s", p);
		r = what ? add_failed(x, what, "refused by the kernel") : -ENOMEM;
		if (r < 0)
			return r;
	}
	return 0;
}

static int apply_option(struct ftrace_tracefs *t, const struct ftrace_config_option *o, char **ret_error)
{
	_cleanup_free_ char *cur = NULL, *file = strdup_printf("options/%s", o->name);
	int r;

	if (!file)
		return -ENOMEM;
	r = ftrace_tracefs_read(t, file, 64, &cur, NULL);
	if (r < 0 || (cur[0] != '0' && cur[0] != '1')) {
		set_error_text(ret_error, strdup_printf("tracefs option '%s' does not exist in %s", o->name,
							ftrace_tracefs_path(t)));
		return r < 0 ? r : -EINVAL;
	}
	return ftrace_tracefs_set(t, file, o->on ? "1" : "0", ret_error);
}

int ftrace_extra_apply(struct ftrace_extra *x, const struct ftrace_config *c, struct ftrace_tracefs *t,
		       char **ret_error)
{
	int r;

	if (c->has_raw_syscalls) {
		r = ftrace_tracefs_syscall_filter(t, c->syscall_filter, ret_error);
		if (r < 0)
			return r;
	}
	if (c->function_graph) {
		r = apply_function_graph(x, t);
		if (r < 0)
			return r;
	}
	if (c->event_pids) {
		r = ftrace_tracefs_set_list(t, "set_event_pid", c->event_pids, ret_error);
		if (r < 0)
			return r;
	}
	if (c->cpumask) {
		r = ftrace_tracefs_set(t, "tracing_cpumask", c->cpumask, ret_error);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < c->n_options; i++) {
		r = apply_option(t, &c->options[i], ret_error);
		if (r < 0)
			return r;
	}
	if (c->exclusive)
		ftrace_tracefs_set_exclusive(t, true);
	return 0;
}

size_t ftrace_extra_failed(const struct ftrace_extra *x, char *const **ret)
{
	*ret = x->failed;
	return x->n_failed;
}

const char *ftrace_extra_warnings(const struct ftrace_extra *x)
{
	return x->warnings;
}

int ftrace_extra_kprobe_stats(const struct ftrace_extra *x, struct ftrace_tracefs *t, int64_t *ret_hits,
			      int64_t *ret_misses)
{
	_cleanup_free_ char *text = NULL;
	int64_t hits = 0, misses = 0;
	int r;

	if (!x || x->n_kprobes == 0)
		return -ENOENT;
	r = ftrace_tracefs_read_root(t, "kprobe_profile", 1u << 20, &text);
	if (r < 0)
		return r;
	/* "  NAME  HITS  MISSES" per probe; ours are named after their function. */
	for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		char name[FTRACE_NAME_MAX + 1];
		long long h, m;

		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		if (sscanf(line, "%127s %lld %lld", name, &h, &m) != 3)
			continue;
		for (size_t i = 0; i < x->n_kprobes; i++)
			if (x->kev_ok[i] && strcmp(x->kev[i]->name, name) == 0) {
				hits += h;
				misses += m;
				break;
			}
	}
	*ret_hits = hits;
	*ret_misses = misses;
	return 0;
}
