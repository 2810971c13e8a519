/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_clock - reading the trace_clock file: which clock is selected,
 * which ones the kernel offers, and the FtraceClock each name stands for.
 * Pure text functions: the files that read and write trace_clock
 * (the undo list, the shared setup) call them.
 */
#include <errno.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/parse/ftrace_parse.h"

int ftrace_clock_selected(const char *text, char *buf, size_t size)
{
	const char *a = strchr(text, '['), *b;

	if (!a)
		return -EBADMSG;
	b = strchr(++a, ']');
	if (!b || b == a || (size_t)(b - a) >= size)
		return -EBADMSG;
	memcpy(buf, a, (size_t)(b - a));
	buf[b - a] = 0;
	return 0;
}

bool ftrace_clock_listed(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; (p = strstr(p, name)); p += n) {
		char before = p == text ? ' ' : p[-1], after = p[n];

		if ((before == ' ' || before == '[') && (after == ' ' || after == ']' || after == '\n' || !after))
			return true;
	}
	return false;
}

int ftrace_clock_from_name(const char *name)
{
	if (strcmp(name, "boot") == 0)
		return FTRACE_CLOCK_UNSPECIFIED;
	if (strcmp(name, "global") == 0)
		return FTRACE_CLOCK_GLOBAL;
	if (strcmp(name, "local") == 0)
		return FTRACE_CLOCK_LOCAL;
	if (strcmp(name, "mono_raw") == 0)
		return FTRACE_CLOCK_MONO_RAW;
	return FTRACE_CLOCK_UNKNOWN;
}
