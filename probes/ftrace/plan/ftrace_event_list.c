/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The names of events: the character check that makes a name safe to put
 * in a path, and the sorted list of available events names resolve against.
 */

#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan_internal.h"
#include "util/util.h"

bool ftrace_name_valid(const char *s)
{
	return name_valid(s, FTRACE_NAME_MAX, 0);
}

bool ftrace_instance_name_valid(const char *s)
{
	return name_valid(s, FTRACE_INSTANCE_NAME_MAX, NAME_DASH | NAME_DOT | NAME_NOT_DOTS);
}

/* ---- the list of available events --------------------------------------- */

int ftrace_event_list_new(struct ftrace_event_list **ret)
{
	struct ftrace_event_list *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	*ret = l;
	return 0;
}

struct ftrace_event_list *ftrace_event_list_free(struct ftrace_event_list *l)
{
	if (!l)
		return NULL;
	for (size_t i = 0; i < l->n; i++) {
		free((char *)l->ev[i].group);
		free((char *)l->ev[i].name);
	}
	free(l->ev);
	free(l);
	return NULL;
}

int ftrace_event_list_add(struct ftrace_event_list *l, const char *group, const char *name, unsigned flags)
{
	char *g, *n;

	if (!ftrace_name_valid(group) || !ftrace_name_valid(name))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct ftrace_event_name *e = reallocarray(l->ev, cap, sizeof(*e));

		if (!e)
			return -ENOMEM;
		l->ev = e;
		l->cap = cap;
	}
	g = strdup(group);
	n = strdup(name);
	if (!g || !n) {
		free(g);
		free(n);
		return -ENOMEM;
	}
	l->ev[l->n++] = (struct ftrace_event_name){ .group = g, .name = n, .flags = flags };
	l->sorted = false;
	return 1;
}

int ftrace_event_list_parse(struct ftrace_event_list *l, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	int r;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *colon = memchr(p, ':', (size_t)(le - p));
		char g[FTRACE_NAME_MAX + 1], n[FTRACE_NAME_MAX + 1];

		if (colon && (size_t)(colon - p) <= FTRACE_NAME_MAX && (size_t)(le - colon - 1) <= FTRACE_NAME_MAX) {
			memcpy(g, p, (size_t)(colon - p));
			g[colon - p] = 0;
			memcpy(n, colon + 1, (size_t)(le - colon - 1));
			n[le - colon - 1] = 0;
			r = ftrace_event_list_add(l, g, n, 0);
			if (r < 0)
				return r;
		}
		p = le + 1;
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	const struct ftrace_event_name *x = a, *y = b;
	int c = strcmp(x->group, y->group);

	return c ? c : strcmp(x->name, y->name);
}

void ftrace_event_list_sort(struct ftrace_event_list *l)
{
	size_t w = 0;

	if (l->n)
		qsort(l->ev, l->n, sizeof(l->ev[0]), name_cmp);
	/* Drop duplicates, keeping the flags of either. */
	for (size_t i = 0; i < l->n; i++) {
		if (w > 0 && name_cmp(&l->ev[w - 1], &l->ev[i]) == 0) {
			l->ev[w - 1].flags |= l->ev[i].flags;
			free((char *)l->ev[i].group);
			free((char *)l->ev[i].name);
			continue;
		}
		l->ev[w++] = l->ev[i];
	}
	l->n = w;
	l->sorted = true;
}

size_t ftrace_event_list_size(const struct ftrace_event_list *l)
{
	return l->n;
}

const struct ftrace_event_name *ftrace_event_list_at(const struct ftrace_event_list *l, size_t i)
{
	return l && i < l->n ? &l->ev[i] : NULL;
}

const struct ftrace_event_name *ftrace_event_list_find(const struct ftrace_event_list *l, const char *group,
						       const char *name)
{
	struct ftrace_event_name k = { .group = group, .name = name };

	if (!l->sorted || l->n == 0)
		return NULL;
	return bsearch(&k, l->ev, l->n, sizeof(k), name_cmp);
}

size_t ftrace_event_list_group_start(const struct ftrace_event_list *l, const char *group)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(l->ev[mid].group, group) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
