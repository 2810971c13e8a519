/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_sys_stats - what one linux.sys_stats poll costs on this machine
 * with meminfo + vmstat + stat (every counter, every stat line), and how
 * many allocations the polls make after the first.
 *
 *   bench_sys_stats [-n polls] [--rows]
 *
 * The polls run back to back through sys_stats_poll() into a reused
 * memory buffer; "CPU" is this process's user + system time over them
 * (the kernel's formatting of the three files is most of it), divided by
 * the number of polls.  "allocs" counts malloc/calloc/realloc calls made
 * by polls 2..n (this binary interposes them).  The CPU share of a 100 ms
 * and of a 10 ms period follows from the per-poll cost.  "parse" is the
 * same three files parsed and encoded from memory (read once), which
 * separates our share from the kernel's.  Not a test:
 * nothing is asserted.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop/loop.h"
#include "probes/sys_stats/sys_stats.h"
#include "probes/sys_stats/sys_stats_internal.h"
#include "protos/perfetto/config/sys_stats/sys_stats_config.pb-c.h"
#include "protos/pbw.h"
#include "util/util.h"

/* ---- allocation counting ------------------------------------------------- */

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static atomic_ulong n_allocs;

_public_ void *malloc(size_t n);
_public_ void *calloc(size_t n, size_t m);
_public_ void *realloc(void *p, size_t n);
_public_ void free(void *p);

void *malloc(size_t n)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
	return __libc_realloc(p, n);
}

void free(void *p)
{
	__libc_free(p);
}

/* ---- a sink over one reused buffer ----------------------------------------- */

struct sink {
	uint8_t buf[256 * 1024];
	struct pbw w;
	uint64_t bytes;
};

static struct pbw *sink_begin(void *userdata)
{
	struct sink *s = userdata;

	pbw_init(&s->w, s->buf, sizeof(s->buf), NULL, NULL);
	return &s->w;
}

static int sink_end(void *userdata)
{
	struct sink *s = userdata;

	s->bytes += pbw_position(&s->w);
	return pbw_overflowed(&s->w) ? -ENOSPC : 0;
}

/* Parse+encode of the three files' current text, µs per poll. */
static double parse_only_us(unsigned polls)
{
	static const char *const files[3] = { "/proc/meminfo", "/proc/vmstat", "/proc/stat" };
	struct sys_stats_keymap mk, vk;
	char *text[3] = {};
	size_t len[3] = {};
	static uint8_t out[256 * 1024];
	struct pbw w;
	uint64_t t0, t1;

	for (size_t i = 0; i < 3; i++)
		if (read_full_file_at(AT_FDCWD, files[i], 1u << 24, &text[i], &len[i]) < 0)
			return -1;
	sys_stats_keymap_init(&mk, SYS_STATS_FILE_MEMINFO, NULL);
	sys_stats_keymap_init(&vk, SYS_STATS_FILE_VMSTAT, NULL);
	t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned k = 0; k < polls; k++) {
		pbw_init(&w, out, sizeof(out), NULL, NULL);
		(void)sys_stats_parse_meminfo(text[0], len[0], &mk, &w);
		(void)sys_stats_parse_vmstat(text[1], len[1], &vk, &w);
		(void)sys_stats_parse_stat(text[2], len[2], SYS_STATS_STAT_ALL, 10000000, &w);
	}
	t1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (size_t i = 0; i < 3; i++)
		free(text[i]);
	return (double)(t1 - t0) / 1000.0 / polls;
}

static uint64_t cpu_ns(void)
{
	return now_ns(CLOCK_PROCESS_CPUTIME_ID);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "polls", required_argument, NULL, 'n' },
		{ "rows", no_argument, NULL, 'R' },
		{},
	};
	Perfetto__Protos__SysStatsConfig cfg = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
	static struct sink sink;
	struct ds_env env = {
		.sink = { .begin_packet = sink_begin, .end_packet = sink_end, .userdata = &sink },
	};
	struct sys_stats_stats st;
	struct sys_stats *ss;
	struct loop *e = NULL;
	_cleanup_free_ char *warnings = NULL;
	unsigned long allocs;
	unsigned polls = 20000;
	bool rows = false;
	uint64_t t0, t1, w0, w1;
	double per_poll_us, parse_us;
	int c, r;

	while ((c = getopt_long(argc, argv, "n:R", opts, NULL)) >= 0) {
		switch (c) {
		case 'n':
			polls = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'R':
			rows = true;
			break;
		default:
			fprintf(stderr, "usage: %s [-n polls] [--rows]\n", argv[0]);
			return 2;
		}
	}
	if (polls < 2)
		polls = 2;

	cfg.has_meminfo_period_ms = cfg.has_vmstat_period_ms = cfg.has_stat_period_ms = true;
	cfg.meminfo_period_ms = cfg.vmstat_period_ms = cfg.stat_period_ms = 100;
	/* the loop only has to exist: the polls are made by hand */
	r = loop_new(&e);
	if (r >= 0) {
		env.event = e;
		r = sys_stats_setup_at(&env, &cfg, NULL, NULL, &ss, NULL, &warnings);
	}
	if (r < 0) {
		fprintf(stderr, "setup: %s\n", strerror(-r));
		return 1;
	}
	if (warnings)
		fprintf(stderr, "%s\n", warnings);

	/* the first poll sizes the read buffer */
	(void)sys_stats_poll(ss);
	sink.bytes = 0;
	allocs = atomic_load(&n_allocs);
	t0 = cpu_ns();
	w0 = now_ns(CLOCK_MONOTONIC);
	for (unsigned i = 1; i < polls; i++)
		(void)sys_stats_poll(ss);
	t1 = cpu_ns();
	w1 = now_ns(CLOCK_MONOTONIC);
	allocs = atomic_load(&n_allocs) - allocs;
	sys_stats_get_stats(ss, &st);
	per_poll_us = (double)(t1 - t0) / 1000.0 / (polls - 1);
	parse_us = parse_only_us(polls);

	if (rows) {
		printf("| sys_stats poll, meminfo+vmstat+stat | %.1f µs CPU (%.1f parse+encode) | %.3f %% at 100 ms, %.2f %% at 10 ms | %.0f bytes/packet | %lu allocs in %u polls |\n",
		       per_poll_us, parse_us, per_poll_us / 1000.0, per_poll_us / 100.0,
		       (double)sink.bytes / (polls - 1), allocs, polls - 1);
	} else {
		printf("polls:            %u (after the first)\n", polls - 1);
		printf("CPU per poll:     %.1f us (wall %.1f us)\n", per_poll_us,
		       (double)(w1 - w0) / 1000.0 / (polls - 1));
		printf("parse+encode:     %.1f us (the rest is the kernel formatting the files)\n", parse_us);
		printf("CPU at 100 ms:    %.3f %%\n", per_poll_us / 1000.0);
		printf("CPU at 10 ms:     %.2f %%\n", per_poll_us / 100.0);
		printf("bytes per packet: %.0f\n", (double)sink.bytes / (polls - 1));
		printf("bytes read/poll:  %.0f\n", (double)st.bytes_read / polls);
		printf("read buffer:      %zu bytes\n", st.buffer_size);
		printf("allocations:      %lu\n", allocs);
	}
	sys_stats_ds_ops.free(ss);
	loop_unref(e);
	return 0;
}
