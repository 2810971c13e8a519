/* SPDX-License-Identifier: Apache-2.0 */
/*
 * available_filter_functions as a sorted set, and the function_filters /
 * function_graph_roots of a config checked against it.  Pure: the file's
 * text comes in as data.
 */

#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "util/util.h"

struct ftrace_funcs {
	char *blob;                     /* the names, NUL-terminated, file order */
	const char **names;             /* into blob, sorted, unique */
	size_t n;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int ftrace_funcs_parse(const char *text, size_t len, struct ftrace_funcs **ret)
{
	struct ftrace_funcs *f;
	size_t lines = 0, w = 0, n = 0;
	char *p, *end;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	/* One copy of the text becomes the names: cut at the first blank
	 * (" [module]" follows module functions) and at every newline. */
	f->blob = malloc(len + 1);
	if (!f->blob)
		goto oom;
	memcpy(f->blob, text, len);
	f->blob[len] = 0;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	f->names = malloc((lines + 1) * sizeof(*f->names));
	if (!f->names)
		goto oom;

	p = f->blob;
	end = f->blob + len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		char *q = p;

		while (q < le && *q != ' ' && *q != '\t' && *q != 0)
			q++;
		*q = 0;
		if (q > p && ftrace_funcs_name_valid(p))
			f->names[n++] = p;
		p = le + 1;
	}
	if (n)
		qsort(f->names, n, sizeof(*f->names), name_cmp);
	for (size_t i = 0; i < n; i++)
		if (w == 0 || strcmp(f->names[w - 1], f->names[i]) != 0)
			f->names[w++] = f->names[i];
	f->n = w;
	*ret = f;
	return 0;
oom:
	ftrace_funcs_free(f);
	return -ENOMEM;
}

struct ftrace_funcs *ftrace_funcs_free(struct ftrace_funcs *f)
{
	if (!f)
		return NULL;
	free(f->names);
	free(f->blob);
	free(f);
	return NULL;
}

size_t ftrace_funcs_count(const struct ftrace_funcs *f)
{
	return f ? f->n : 0;
}

bool ftrace_funcs_contains(const struct ftrace_funcs *f, const char *name)
{
	if (!f || !name || f->n == 0)
		return false;
	return bsearch(&name, f->names, f->n, sizeof(*f->names), name_cmp) != NULL;
}

/* '.': compiler-made names (foo.cold, foo.isra.0) are functions too. */
bool ftrace_funcs_name_valid(const char *s)
{
	return name_valid(s, FTRACE_FEATURE_NAME_MAX, NAME_DOT);
}

bool ftrace_funcs_glob_valid(const char *s)
{
	size_t n = 0;
	bool wild = false;

	if (!s)
		return false;
	for (; s[n]; n++) {
		if (n >= FTRACE_FEATURE_NAME_MAX)
			return false;
		if (s[n] == '*' || s[n] == '?')
			wild = true;
		else if (!name_char_ok(s[n], NAME_DOT))
			return false;
	}
	return wild;
}

int ftrace_funcs_filter_build(const struct ftrace_funcs *avail, const char *const *entries, size_t n,
			      struct ftrace_funcs_filter **ret)
{
	_cleanup_free_ const char **taken = NULL;
	struct ftrace_funcs_filter *f;
	size_t n_taken = 0, n_globs = 0, len = 0;
	int r = 0;

	f = calloc(1, sizeof(*f));
	taken = malloc(MIN(n, (size_t)FTRACE_MAX_FUNCTION_FILTERS) * sizeof(*taken) + 1);
	if (!f || !taken) {
		free(f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && r >= 0; i++) {
		const char *e = entries[i];
		bool glob = ftrace_funcs_glob_valid(e), dup = false;

		if (!e)
			continue;
		if (!glob && !(ftrace_funcs_name_valid(e) && (!avail || ftrace_funcs_contains(avail, e)))) {
			f->n_rejected_total++;
			r = ftrace_opts_report(&f->rejected, &f->n_rejected, e);
			continue;
		}
		/* Past the cap nothing is compared, so a huge list costs one
		 * lookup per entry; below it the duplicate check is bounded. */
		if (n_taken >= FTRACE_MAX_FUNCTION_FILTERS || (glob && n_globs >= FTRACE_MAX_FUNCTION_GLOBS)) {
			f->n_dropped++;
			continue;
		}
		for (size_t k = 0; k < n_taken && !dup; k++)
			dup = strcmp(taken[k], e) == 0;
		if (dup)
			continue;
		n_globs += glob;
		taken[n_taken++] = e;
		len += strlen(e) + 1;
	}
	if (r < 0)
		goto fail;
	f->n_accepted = n_taken;
	if (n_taken > 0) {
		char *p = f->text = malloc(len);

		if (!p) {
			r = -ENOMEM;
			goto fail;
		}
		for (size_t k = 0; k < n_taken; k++) {
			size_t l = strlen(taken[k]);

			memcpy(p, taken[k], l);
			p += l;
			*p++ = k + 1 < n_taken ? '\n' : 0;
		}
	}
	*ret = f;
	return 0;
fail:
	ftrace_funcs_filter_free(f);
	return r;
}

struct ftrace_funcs_filter *ftrace_funcs_filter_free(struct ftrace_funcs_filter *f)
{
	if (!f)
		return NULL;
	free(f->text);
	ftrace_opts_strv_free(f->rejected, f->n_rejected);
	free(f);
	return NULL;
}
