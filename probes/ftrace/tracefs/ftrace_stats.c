/* SPDX-License-Identifier: Apache-2.0 */
/*
 * per_cpu/cpuN/stats parsing and the FtraceStats packet.
 *
 * The stats file is "key: value" lines whose set changed over kernel
 * versions (commit overrun, dropped events, read events arrived later), so
 * every field is optional and unknown lines are skipped.
 */

#include <stdio.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "protos/pbw.h"
#include "util/util.h"

/* TracePacket / FtraceStats / FtraceCpuStats field numbers (ftrace_stats.proto). */
enum {
	TRACE_PACKET_FTRACE_STATS = 34,
	FTRACE_STATS_PHASE = 1,
	FTRACE_STATS_CPU_STATS = 2,
	FTRACE_STATS_KERNEL_SYMBOLS_PARSED = 3,
	FTRACE_STATS_KERNEL_SYMBOLS_MEM_KB = 4,
	FTRACE_STATS_ATRACE_ERRORS = 5,
	FTRACE_STATS_UNKNOWN_EVENTS = 6,
	FTRACE_STATS_FAILED_EVENTS = 7,
	FTRACE_STATS_PRESERVE = 8,
	FTRACE_STATS_PARSE_ERRORS = 9,
	FTRACE_STATS_KPROBE_STATS = 10,
	FTRACE_STATS_CPU_BUFFER_SIZE_PAGES = 11,
	FTRACE_STATS_CACHED_CPU_BUFFER_SIZE_PAGES = 12,
	KPROBE_STATS_HITS = 1,
	KPROBE_STATS_MISSES = 2,
	CPU_STATS_CPU = 1,
	CPU_STATS_ENTRIES = 2,
	CPU_STATS_OVERRUN = 3,
	CPU_STATS_COMMIT_OVERRUN = 4,
	CPU_STATS_BYTES_READ = 5,
	CPU_STATS_OLDEST_EVENT_TS = 6,
	CPU_STATS_NOW_TS = 7,
	CPU_STATS_DROPPED_EVENTS = 8,
	CPU_STATS_READ_EVENTS = 9,
};

/* "  123.456789" -> seconds; no locale, no strtod. */
static int parse_seconds(const char *s, size_t len, double *ret)
{
	uint64_t ip = 0, fp = 0, scale = 1;
	size_t i = 0, digits = 0;

	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
		if (ip > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		ip = ip * 10 + (uint64_t)(s[i] - '0');
	}
	if (i < len && s[i] == '.') {
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
			if (scale >= 1000000000000000000ull)
				continue; /* beyond what a double keeps anyway */
			fp = fp * 10 + (uint64_t)(s[i] - '0');
			scale *= 10;
		}
	}
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (digits == 0 || i != len)
		return -EINVAL;
	*ret = (double)ip + (double)fp / (double)scale;
	return 0;
}

static int parse_u64(const char *s, size_t len, uint64_t *ret)
{
	char buf[32];

	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\r' || s[len - 1] == '\t'))
		len--;
	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = 0;
	return safe_atou64(buf, ret);
}

int ftrace_stats_parse(const char *text, size_t len, struct ftrace_cpu_stats *ret)
{
	static const struct {
		const char *key;
		uint32_t bit;
		size_t off;
	} keys[] = {
		{ "entries", FTRACE_STAT_ENTRIES, offsetof(struct ftrace_cpu_stats, entries) },
		{ "overrun", FTRACE_STAT_OVERRUN, offsetof(struct ftrace_cpu_stats, overrun) },
		{ "commit overrun", FTRACE_STAT_COMMIT_OVERRUN, offsetof(struct ftrace_cpu_stats, commit_overrun) },
		{ "bytes", FTRACE_STAT_BYTES, offsetof(struct ftrace_cpu_stats, bytes) },
		{ "dropped events", FTRACE_STAT_DROPPED, offsetof(struct ftrace_cpu_stats, dropped_events) },
		{ "read events", FTRACE_STAT_READ, offsetof(struct ftrace_cpu_stats, read_events) },
	};
	struct ftrace_cpu_stats s = { .cpu = ret->cpu };
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *colon = memchr(p, ':', (size_t)(le - p));

		if (colon) {
			size_t klen = (size_t)(colon - p);
			const char *v = colon + 1;
			size_t vlen = (size_t)(le - v);
			bool done = false;

			for (size_t i = 0; i < ARRAY_SIZE(keys) && !done; i++) {
				uint64_t x;

				if (strlen(keys[i].key) != klen || memcmp(keys[i].key, p, klen) != 0)
					continue;
				done = true;
				if (parse_u64(v, vlen, &x) >= 0) {
					memcpy((char *)&s + keys[i].off, &x, sizeof(x));
					s.present |= keys[i].bit;
				}
			}
			if (!done && klen == strlen("oldest event ts") && memcmp(p, "oldest event ts", klen) == 0 &&
			    parse_seconds(v, vlen, &s.oldest_event_ts) >= 0)
				s.present |= FTRACE_STAT_OLDEST_TS;
			else if (!done && klen == strlen("now ts") && memcmp(p, "now ts", klen) == 0 &&
				 parse_seconds(v, vlen, &s.now_ts) >= 0)
				s.present |= FTRACE_STAT_NOW_TS;
		}
		p = le + 1;
	}
	if (s.present == 0)
		return -EBADMSG;
	*ret = s;
	return 0;
}

int ftrace_stats_read(struct ftrace_tracefs *t, unsigned cpu, struct ftrace_cpu_stats *ret)
{
	_cleanup_free_ char *text = NULL;
	char path[48];
	size_t len;
	int r;

	(void)snprintf(path, sizeof(path), "per_cpu/cpu%u/stats", cpu);
	r = ftrace_tracefs_read(t, path, 4096, &text, &len);
	if (r < 0)
		return r;
	ret->cpu = cpu;
	return ftrace_stats_parse(text, len, ret);
}

/*
 * Events a session read and did not write (another session's, a
 * trace_marker line, what its print filter refused) have no field of their
 * own in Perfetto v58.2: FtraceCpuStats, FtraceStats and FtraceEventBundle
 * have no counter of events of ids a session did not enable, and no
 * FtraceParseStatus means "not ours" (a status in ftrace_parse_errors makes
 * trace_processor refuse the whole trace).  The count goes in bytes_read
 * (5), the per-CPU field trace_processor reads whose kernel value is worth
 * least here: the size of what is still in the buffer, which the proto
 * itself calls misnamed and inaccurate before Linux 6.6, and which entries
 * (2) already says in events.  Every other field keeps the kernel's value:
 * entries, overrun, commit_overrun, dropped_events and read_events are the
 * accounting, the two timestamps are clocks.  trace_processor shows it as
 * ftrace_cpu_bytes_{begin,end,delta}: 0 at START, the count at END, so
 * that the delta is the count and, per CPU,
 *   events in the trace + ftrace_cpu_bytes_delta = ftrace_cpu_read_events_delta.
 */
static void encode_cpu(struct pbw *w, const struct ftrace_cpu_stats *s, bool bytes_carry_skipped,
		       uint64_t skipped)
{
	pbw_begin_nested(w, FTRACE_STATS_CPU_STATS);
	pbw_varint(w, CPU_STATS_CPU, s->cpu);
	if (s->present & FTRACE_STAT_ENTRIES)
		pbw_varint(w, CPU_STATS_ENTRIES, s->entries);
	if (s->present & FTRACE_STAT_OVERRUN)
		pbw_varint(w, CPU_STATS_OVERRUN, s->overrun);
	if (s->present & FTRACE_STAT_COMMIT_OVERRUN)
		pbw_varint(w, CPU_STATS_COMMIT_OVERRUN, s->commit_overrun);
	if (bytes_carry_skipped)
		pbw_varint(w, CPU_STATS_BYTES_READ, skipped);
	else if (s->present & FTRACE_STAT_BYTES)
		pbw_varint(w, CPU_STATS_BYTES_READ, s->bytes);
	if (s->present & FTRACE_STAT_OLDEST_TS)
		pbw_double(w, CPU_STATS_OLDEST_EVENT_TS, s->oldest_event_ts);
	if (s->present & FTRACE_STAT_NOW_TS)
		pbw_double(w, CPU_STATS_NOW_TS, s->now_ts);
	if (s->present & FTRACE_STAT_DROPPED)
		pbw_varint(w, CPU_STATS_DROPPED_EVENTS, s->dropped_events);
	if (s->present & FTRACE_STAT_READ)
		pbw_varint(w, CPU_STATS_READ_EVENTS, s->read_events);
	(void)pbw_end_nested(w);
}

void ftrace_stats_encode(struct pbw *w, const struct ftrace_stats_msg *m)
{
	pbw_begin_nested(w, TRACE_PACKET_FTRACE_STATS);
	pbw_varint(w, FTRACE_STATS_PHASE, (uint64_t)m->phase);
	for (size_t i = 0; i < m->n_cpu; i++)
		if (m->cpu[i].present)
			encode_cpu(w, &m->cpu[i], m->bytes_carry_skipped,
				   m->skipped ? m->skipped[i] : 0);
	/* Always present in traced_probes' packets, 0 without a symbolizer. */
	pbw_varint(w, FTRACE_STATS_KERNEL_SYMBOLS_PARSED, m->kernel_symbols_parsed);
	pbw_varint(w, FTRACE_STATS_KERNEL_SYMBOLS_MEM_KB, m->kernel_symbols_mem_kb);
	if (m->atrace_errors)
		pbw_string(w, FTRACE_STATS_ATRACE_ERRORS, m->atrace_errors);
	for (size_t i = 0; i < m->n_unknown; i++)
		pbw_string(w, FTRACE_STATS_UNKNOWN_EVENTS, m->unknown_events[i]);
	for (size_t i = 0; i < m->n_failed; i++)
		pbw_string(w, FTRACE_STATS_FAILED_EVENTS, m->failed_events[i]);
	if (m->preserve_ftrace_buffer)
		pbw_varint(w, FTRACE_STATS_PRESERVE, 1);
	/* proto2 repeated enum: one unpacked varint per status, OK (1) never written. */
	for (unsigned st = 2; st < 64; st++)
		if (m->parse_errors & (1ull << st))
			pbw_varint(w, FTRACE_STATS_PARSE_ERRORS, st);
	if (m->has_kprobe_stats) {
		pbw_begin_nested(w, FTRACE_STATS_KPROBE_STATS);
		pbw_int(w, KPROBE_STATS_HITS, m->kprobe_hits);
		pbw_int(w, KPROBE_STATS_MISSES, m->kprobe_misses);
		(void)pbw_end_nested(w);
	}
	if (m->cpu_buffer_size_pages)
		pbw_varint(w, FTRACE_STATS_CPU_BUFFER_SIZE_PAGES, m->cpu_buffer_size_pages);
	if (m->cached_cpu_buffer_size_pages)
		pbw_varint(w, FTRACE_STATS_CACHED_CPU_BUFFER_SIZE_PAGES, m->cached_cpu_buffer_size_pages);
	(void)pbw_end_nested(w);
}
