/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as ring-buffer pages through the whole
 * ftrace data path (header, record walker, typed/generic/compact encoding)
 * with the fixture formats of a real kernel, every event enabled.  The
 * input is cut into 4 KiB pages (the last one zero-padded); the byte after
 * the first page, if any, picks the encoding options.  Whatever was written
 * must decode as a Trace.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PAGES 4
#define OUT_SIZE (4u << 20)

static struct ftrace_format_table *table;
static struct ftrace_parser *parsers[4];
static struct ftrace_pidset *pids;
static uint8_t *out;

static void init(void)
{
	static const int ids[] = {
		FX_ID_PRINT, FX_ID_TASK_RENAME, FX_ID_IPI_SEND_CPU, FX_ID_SCHED_STAT_RUNTIME,
		FX_ID_SCHED_PROCESS_EXEC, FX_ID_SCHED_SWITCH, FX_ID_SCHED_WAKING, FX_ID_SYS_ENTER,
		FX_ID_HRTIMER_EXPIRE_ENTRY,
	};

	table = fx_table();
	if (!table)
		abort();
	for (int i = 0; i < 4; i++) {
		struct ftrace_parser_opts o = FTRACE_PARSER_OPTS_DEFAULT;

		o.compact_sched = i & 1;
		o.generic_dense = i & 2;
		if (ftrace_parser_new(table, &o, &parsers[i]) < 0)
			abort();
		for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++)
			if (ftrace_parser_enable(parsers[i], ids[k]) < 0)
				abort();
	}
	if (ftrace_pidset_new(256, &pids) < 0)
		abort();
	out = malloc(OUT_SIZE);
	if (!out)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pages[MAX_PAGES * FX_PAGE_SIZE];
	struct ftrace_cpu_state st = {};
	struct ftrace_pass_stats stats = {};
	struct ftrace_parser *p;
	struct fx_sink s;
	size_t n_pages;
	int n;

	if (!table)
		init();
	if (size == 0)
		return 0;
	n_pages = (size + FX_PAGE_SIZE - 1) / FX_PAGE_SIZE;
	if (n_pages > MAX_PAGES)
		n_pages = MAX_PAGES;
	memset(pages, 0, n_pages * FX_PAGE_SIZE);
	memcpy(pages, data, size < n_pages * FX_PAGE_SIZE ? size : n_pages * FX_PAGE_SIZE);
	p = parsers[size > FX_PAGE_SIZE ? data[FX_PAGE_SIZE] & 3 : 3];

	memset(&s, 0, sizeof(s));
	s.buf = out;
	s.cap = OUT_SIZE;
	pbw_init(&s.w, out, OUT_SIZE, NULL, NULL);
	s.sink = (struct pbw_sink){ .begin_packet = fx_sink_begin, .end_packet = fx_sink_end,
				    .userdata = &s };

	ftrace_pidset_clear(pids);
	n = ftrace_parser_parse_pages(p, 0, pages, n_pages, FX_PAGE_SIZE, &s.sink, &st, pids,
				      &stats);
	if (n < 0 || stats.pages != n_pages)
		abort();
	if (!pbw_overflowed(&s.w)) {
		Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, fx_sink_len(&s), out);

		if (!t || t->n_packet != (size_t)n)
			abort();
		perfetto__protos__trace__free_unpacked(t, NULL);
	}
	return 0;
}
