/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as the text of tracefs
 * per_cpu/cpuN/stats.  The parser must stay inside the buffer (it is not
 * NUL-terminated here, as it is not when read from tracefs), keep the CPU
 * it was given, set only the bits of fields it found, and on a failure
 * leave the result as it was.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KNOWN_BITS                                                                                   \
	(FTRACE_STAT_ENTRIES | FTRACE_STAT_OVERRUN | FTRACE_STAT_COMMIT_OVERRUN | FTRACE_STAT_BYTES |  \
	 FTRACE_STAT_DROPPED | FTRACE_STAT_READ | FTRACE_STAT_OLDEST_TS | FTRACE_STAT_NOW_TS)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact-size copy, so that ASan sees a read past the end */
	char *text = malloc(size ? size : 1);
	struct ftrace_cpu_stats s, before;
	int r;

	if (!text)
		return 0;
	memcpy(text, data, size);
	memset(&s, 0xa5, sizeof(s));
	s.cpu = 7;
	before = s;
	r = ftrace_stats_parse(text, size, &s);
	if (r < 0) {
		if (r != -EBADMSG || memcmp(&s, &before, sizeof(s)) != 0)
			abort();
	} else {
		if (r != 0 || s.cpu != 7 || s.present == 0 || (s.present & ~(uint32_t)KNOWN_BITS))
			abort();
		/* what is absent reads as 0, never as stack or earlier contents */
		if ((!(s.present & FTRACE_STAT_ENTRIES) && s.entries) ||
		    (!(s.present & FTRACE_STAT_READ) && s.read_events) ||
		    (!(s.present & FTRACE_STAT_NOW_TS) && s.now_ts != 0.0))
			abort();
		if (!isfinite(s.oldest_event_ts) || s.oldest_event_ts < 0 || !isfinite(s.now_ts) || s.now_ts < 0)
			abort();
	}
	free(text);
	return 0;
}
