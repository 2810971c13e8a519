/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kprobe_events: which probes a config asks for, checked, and the exact
 * kprobe_events lines that create and remove them (the groups and the
 * kretprobe maxactive are traced_probes v58.2's).  Pure.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "util/util.h"

bool ftrace_kprobe_name_valid(const char *s)
{
	return name_valid(s, FTRACE_FEATURE_NAME_MAX, 0);
}

static const char *group_of(const struct ftrace_kprobe *p)
{
	return p->retprobe ? FTRACE_KRETPROBE_GROUP : FTRACE_KPROBE_GROUP;
}

static int add_probe(struct ftrace_kprobe_plan *p, size_t *cap, const char *name, bool retprobe, int type)
{
	char *copy;

	for (size_t i = 0; i < p->n_probes; i++)
		if (p->probes[i].retprobe == retprobe && strcmp(p->probes[i].name, name) == 0)
			return 0;
	if (p->n_probes == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		struct ftrace_kprobe *v = reallocarray(p->probes, c, sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->probes = v;
		*cap = c;
	}
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	p->probes[p->n_probes++] = (struct ftrace_kprobe){ copy, retprobe, type };
	return 0;
}

static int reject(struct ftrace_kprobe_plan *p, const char *group, const char *name)
{
	_cleanup_free_ char *printable = ftrace_opts_printable(name ? name : "");
	_cleanup_free_ char *full = NULL;

	p->n_rejected_total++;
	if (!printable || asprintf(&full, "%s/%s", group, printable) < 0)
		return -ENOMEM;
	return ftrace_opts_report(&p->rejected, &p->n_rejected, full);
}

int ftrace_kprobe_plan_from(const struct ftrace_kprobe_request *reqs, size_t n, const struct ftrace_funcs *avail,
			    struct ftrace_kprobe_plan **ret)
{
	struct ftrace_kprobe_plan *p;
	size_t cap = 0;
	int r = 0;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n && r >= 0; i++) {
		bool want_k = reqs[i].kprobe, want_r = reqs[i].kretprobe;
		bool both = want_k && want_r;
		const char *name = reqs[i].probe;

		if (!want_k && !want_r)
			continue;
		if (i >= FTRACE_MAX_KPROBES || !ftrace_kprobe_name_valid(name) ||
		    (avail && !ftrace_funcs_contains(avail, name))) {
			if (want_k && r >= 0)
				r = reject(p, FTRACE_KPROBE_GROUP, name);
			if (want_r && r >= 0)
				r = reject(p, FTRACE_KRETPROBE_GROUP, name);
			continue;
		}
		if (want_k)
			r = add_probe(p, &cap, name, false,
				      both ? FTRACE_KPROBE_TRACE_BEGIN : FTRACE_KPROBE_TRACE_INSTANT);
		if (want_r && r >= 0)
			r = add_probe(p, &cap, name, true,
				      both ? FTRACE_KPROBE_TRACE_END : FTRACE_KPROBE_TRACE_INSTANT);
	}
	if (r < 0) {
		ftrace_kprobe_plan_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

struct ftrace_kprobe_plan *ftrace_kprobe_plan_free(struct ftrace_kprobe_plan *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_probes; i++)
		free(p->probes[i].name);
	free(p->probes);
	ftrace_opts_strv_free(p->rejected, p->n_rejected);
	free(p);
	return NULL;
}

static int fit(int n, size_t size)
{
	return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}

int ftrace_kprobe_line(const struct ftrace_kprobe *p, char *buf, size_t size)
{
	if (p->retprobe)
		return fit(snprintf(buf, size, "r%u:%s/%s %s", FTRACE_KRETPROBE_MAXACTIVE, group_of(p), p->name,
				    p->name), size);
	return fit(snprintf(buf, size, "p:%s/%s %s", group_of(p), p->name, p->name), size);
}

int ftrace_kprobe_remove_line(const struct ftrace_kprobe *p, char *buf, size_t size)
{
	return fit(snprintf(buf, size, "-:%s/%s", group_of(p), p->name), size);
}
