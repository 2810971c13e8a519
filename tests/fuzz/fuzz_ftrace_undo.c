/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as an undo state file
 * (/run/traced-probes/ftrace*.undo), which a restart reads back to put
 * tracefs as it was.  The file is a hint, never a way to write arbitrary
 * tracefs files: whatever the parser accepts names an absolute directory
 * and only files and values the undo list itself would hold, and anything
 * else is -EBADMSG (or -ENOMEM), with nothing returned.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
/* the undo bookkeeping, to check what a parsed state file remembers */
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Files no undo record may name: escapes from the directory, and files a restore must never write. */
static const char *const forbidden[] = {
	"../tracing_on", "/tracing_on", "events/../../x/enable", "events/sched/../enable", "trace",
	"instances/x/tracing_on", "per_cpu/cpu0/trace_pipe_raw", "kprobe_events", "options/../trace",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ftrace_tracefs *t = (struct ftrace_tracefs *)(uintptr_t)1;
	char *text = malloc(size + 1);
	size_t lines = 0;
	int pid = -12345, r;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	r = ftrace_tracefs_undo_parse(text, &pid, &t);
	if (r < 0) {
		/* nothing returned, nothing clobbered */
		if ((r != -EBADMSG && r != -ENOMEM) || t != (struct ftrace_tracefs *)(uintptr_t)1 || pid != -12345)
			abort();
		free(text);
		return 0;
	}
	/* one record per line at most, after the magic, pid, dir lines */
	if (!t || ftrace_tracefs_undo_count(t) > lines)
		abort();
	/* the restore path walks only files of the accepted kinds */
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
		if (ftrace_tracefs_remembered(t, forbidden[i]))
			abort();
	ftrace_tracefs_free(t);
	free(text);
	return 0;
}
