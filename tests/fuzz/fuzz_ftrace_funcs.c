/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as available_filter_functions, then
 * (after the first NUL) as the function_filters of a config, one per line,
 * checked against the parsed set.  The parser must stay inside the buffer
 * (not NUL-terminated, as read from tracefs), find every valid name of the
 * text, and keep the set sorted and unique; the filter must accept only
 * valid names that are in the set, or globs, within the caps, and join
 * them into a text that holds exactly what it accepted.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "probes/ftrace/tracefs/ftrace_tracefs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Each line's first word, as the parser cuts it, must be in the set if valid. */
static void check_names(const struct ftrace_funcs *f, const char *text, size_t len)
{
	char name[256];

	for (size_t i = 0; i < len;) {
		size_t e = i, n = 0;

		while (e < len && text[e] != '\n')
			e++;
		while (i + n < e && n < sizeof(name) - 1 && text[i + n] != ' ' && text[i + n] != '\t' &&
		       text[i + n] != 0)
			n++;
		memcpy(name, text + i, n);
		name[n] = 0;
		if (n < sizeof(name) - 1 && ftrace_funcs_name_valid(name) && !ftrace_funcs_contains(f, name))
			abort();
		i = e + 1;
	}
}

static void check_filter(const struct ftrace_funcs *f, char *list)
{
	const char *entries[512];
	struct ftrace_funcs_filter *flt = NULL;
	size_t n = 0;
	char *save = NULL;

	for (char *e = strtok_r(list, "\n", &save); e && n < 512; e = strtok_r(NULL, "\n", &save))
		entries[n++] = e;
	if (ftrace_funcs_filter_build(f, entries, n, &flt) < 0)
		return;
	if (flt->n_accepted + flt->n_rejected_total + flt->n_dropped > n || flt->n_rejected > flt->n_rejected_total ||
	    flt->n_accepted > FTRACE_MAX_FUNCTION_FILTERS || (flt->n_accepted > 0) != (flt->text != NULL))
		abort();
	if (flt->text) {
		size_t lines = 1;
		char *copy = strdup(flt->text), *s = NULL;

		for (const char *c = flt->text; *c; c++)
			lines += *c == '\n';
		if (lines != flt->n_accepted || !copy)
			abort();
		for (char *e = strtok_r(copy, "\n", &s); e; e = strtok_r(NULL, "\n", &s))
			if (!ftrace_funcs_glob_valid(e) && !(ftrace_funcs_name_valid(e) && ftrace_funcs_contains(f, e)))
				abort();
		free(copy);
	}
	ftrace_funcs_filter_free(flt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t len = nul ? (size_t)(nul - data) : size;
	char *text = malloc(len ? len : 1), *list = NULL;
	struct ftrace_funcs *f = NULL;

	if (!text)
		return 0;
	memcpy(text, data, len);
	if (ftrace_funcs_parse(text, len, &f) < 0)
		goto out;
	check_names(f, text, len);
	if (nul) {
		list = malloc(size - len);
		if (!list)
			goto out;
		memcpy(list, nul + 1, size - len - 1);
		list[size - len - 1] = 0;
		check_filter(f, list);
	}
out:
	free(list);
	ftrace_funcs_free(f);
	free(text);
	return 0;
}
