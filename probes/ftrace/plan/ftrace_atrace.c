/* SPDX-License-Identifier: Apache-2.0 */
/*
 * atrace categories on Linux, and the other events that config options
 * switch on by themselves (the options come in as a plain request,
 * filled by the resolve step, ftrace_plan.c).  The category table is data
 * (ftrace_atrace.inc, generated from Perfetto's); this file only looks it
 * up.  Pure.
 */

#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "util/util.h"

struct atrace_row {
	const char *category;
	const char *group;
	const char *name;
	int condition;                  /* 0 or FTRACE_ATRACE_*_RSS_THROTTLED */
};

static const char *const categories[] = {
#define FTRACE_ATRACE_CATEGORY(c) c,
#define FTRACE_ATRACE(c, g, n, cond)
#include "probes/ftrace/plan/ftrace_atrace.inc"
#undef FTRACE_ATRACE_CATEGORY
#undef FTRACE_ATRACE
};

static const struct atrace_row rows[] = {
#define FTRACE_ATRACE_CATEGORY(c)
#define FTRACE_ATRACE(c, g, n, cond) { c, g, n, cond },
#include "probes/ftrace/plan/ftrace_atrace.inc"
#undef FTRACE_ATRACE_CATEGORY
#undef FTRACE_ATRACE
};

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

bool ftrace_atrace_category_known(const char *category)
{
	if (!category)
		return false;
	return bsearch(&category, categories, ARRAY_SIZE(categories), sizeof(categories[0]), str_cmp) != NULL;
}

/* First row of @category (rows are sorted by category), or ARRAY_SIZE(rows). */
static size_t category_first_row(const char *category)
{
	size_t lo = 0, hi = ARRAY_SIZE(rows);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(rows[mid].category, category) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct builder {
	struct ftrace_atrace_implied *a;
	size_t cap;
};

static int add_event(struct builder *b, const char *group, const char *name, unsigned flags)
{
	struct ftrace_atrace_implied *a = b->a;

	if (a->n_events == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 32;
		struct ftrace_atrace_event *e = reallocarray(a->events, cap, sizeof(*e));

		if (!e)
			return -ENOMEM;
		a->events = e;
		b->cap = cap;
	}
	a->events[a->n_events++] = (struct ftrace_atrace_event){ group, name, flags };
	return 0;
}

static int add_category(struct builder *b, const char *category, unsigned flags)
{
	bool throttled = flags & FTRACE_ATRACE_RSS_THROTTLED_OK;
	bool either = flags & FTRACE_ATRACE_RSS_THROTTLED_EITHER;
	int r;

	if (!ftrace_atrace_category_known(category))
		return ftrace_opts_report(&b->a->unknown_categories, &b->a->n_unknown_categories, category);
	for (size_t i = category_first_row(category);
	     i < ARRAY_SIZE(rows) && strcmp(rows[i].category, category) == 0; i++) {
		unsigned ev_flags = FTRACE_ATRACE_OPTIONAL;

		if (either)
			ev_flags |= rows[i].condition == FTRACE_ATRACE_IF_RSS_THROTTLED ? FTRACE_ATRACE_IF_THROTTLED :
				    rows[i].condition == FTRACE_ATRACE_UNLESS_RSS_THROTTLED ? FTRACE_ATRACE_UNLESS_THROTTLED :
				    0;
		else if ((rows[i].condition == FTRACE_ATRACE_IF_RSS_THROTTLED && !throttled) ||
			 (rows[i].condition == FTRACE_ATRACE_UNLESS_RSS_THROTTLED && throttled))
			continue;
		r = add_event(b, rows[i].group, rows[i].name, ev_flags);
		if (r < 0)
			return r;
	}
	return 0;
}

static int event_cmp(const void *x, const void *y)
{
	const struct ftrace_atrace_event *a = x, *b = y;
	int c = strcmp(a->group, b->group);

	if (c)
		return c;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	/* required (flags 0) first, then optional, then conditional: the
	 * dedup below keeps the least conditional */
	return (int)a->flags - (int)b->flags;
}

static void sort_unique(struct ftrace_atrace_implied *a)
{
	size_t w = 0;

	if (a->n_events == 0)
		return;
	qsort(a->events, a->n_events, sizeof(a->events[0]), event_cmp);
	for (size_t i = 0; i < a->n_events; i++) {
		if (w > 0 && strcmp(a->events[w - 1].group, a->events[i].group) == 0 &&
		    strcmp(a->events[w - 1].name, a->events[i].name) == 0)
			continue;
		a->events[w++] = a->events[i];
	}
	a->n_events = w;
}

int ftrace_atrace_implied_from(const struct ftrace_atrace_request *req, unsigned flags,
			       struct ftrace_atrace_implied **ret)
{
	struct ftrace_atrace_implied *a;
	struct builder b = { 0 };
	int r = 0;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	b.a = a;

	a->atrace_userspace = req->n_categories > 0 || req->apps;
	if (a->atrace_userspace)
		r = add_event(&b, "ftrace", "print", 0);
	if (r >= 0 && !req->userspace_only)
		for (size_t i = 0; i < req->n_categories && r >= 0; i++)
			if (req->categories[i])
				r = add_category(&b, req->categories[i], flags);
	if (r >= 0 && req->syscalls) {
		r = add_event(&b, "raw_syscalls", "sys_enter", 0);
		if (r >= 0)
			r = add_event(&b, "raw_syscalls", "sys_exit", 0);
	}
	if (r >= 0 && req->function_graph) {
		r = add_event(&b, "ftrace", "funcgraph_entry", 0);
		if (r >= 0)
			r = add_event(&b, "ftrace", "funcgraph_exit", 0);
	}
	if (r < 0) {
		ftrace_atrace_implied_free(a);
		return r;
	}
	sort_unique(a);
	a->replace_rss_stat = req->throttle_rss_stat &&
			      (flags & (FTRACE_ATRACE_RSS_THROTTLED_OK | FTRACE_ATRACE_RSS_THROTTLED_EITHER));
	*ret = a;
	return 0;
}

struct ftrace_atrace_implied *ftrace_atrace_implied_free(struct ftrace_atrace_implied *a)
{
	if (!a)
		return NULL;
	free(a->events);
	ftrace_opts_strv_free(a->unknown_categories, a->n_unknown_categories);
	free(a);
	return NULL;
}
