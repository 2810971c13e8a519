/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tids_to_trace, tracing_cpumask and tracefs_options: checked and turned
 * into the text traced_probes writes (set_event_pid, tracing_cpumask,
 * options/NAME), plus the small string helpers the other feature files
 * share.  Pure.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "util/util.h"

char *ftrace_opts_printable(const char *s)
{
	return str_printable_dup(s, FTRACE_FEATURE_NAME_MAX);
}

int ftrace_opts_report(char ***v, size_t *n, const char *name)
{
	char *copy;

	for (size_t i = 0; i < *n; i++)
		if (strncmp((*v)[i], name, FTRACE_FEATURE_NAME_MAX) == 0)
			return 0;
	if (*n >= FTRACE_MAX_REPORTED)
		return 0;
	if (!*v) {
		*v = calloc(FTRACE_MAX_REPORTED, sizeof(char *));
		if (!*v)
			return -ENOMEM;
	}
	copy = ftrace_opts_printable(name);
	if (!copy)
		return -ENOMEM;
	(*v)[(*n)++] = copy;
	return 0;
}

void ftrace_opts_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int ftrace_opts_tids(const uint32_t *tids, size_t n, char **ret)
{
	/* "4294967295 " is 11 bytes per tid at most. */
	_cleanup_free_ char *s = NULL;
	size_t off = 0;

	if (n == 0)
		return -EINVAL;
	if (n > FTRACE_MAX_TIDS)
		return -E2BIG;
	s = malloc(n * 11 + 1);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (tids[i] == 0)
			return -EINVAL;
		off += (size_t)sprintf(s + off, i ? " %u" : "%u", tids[i]);
	}
	*ret = TAKE_PTR(s);
	return 0;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool ftrace_opts_cpumask_valid(const char *s)
{
	size_t n = 0, group = 0;

	if (!s)
		return false;
	for (; s[n]; n++) {
		if (n >= FTRACE_CPUMASK_MAX)
			return false;
		if (s[n] == ',') {
			/* every group has digits */
			if (group == 0)
				return false;
			group = 0;
			continue;
		}
		if (!is_hex(s[n]))
			return false;
		group++;
	}
	return group > 0;
}

bool ftrace_opts_option_name_valid(const char *s)
{
	return name_valid(s, FTRACE_FEATURE_NAME_MAX, NAME_DASH);
}
