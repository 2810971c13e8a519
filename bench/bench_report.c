/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_report - clocks and the shared result table.  Every benchmark
 * prints rows of the same Markdown table and "- " notes, so bench/run.sh
 * can stitch them into one.
 */
#include <errno.h>
#include <stdarg.h>
#include <time.h>

#include "bench/bench.h"
#include "util/util.h"

uint64_t bench_process_cpu_ns(void)
{
	return now_ns(CLOCK_PROCESS_CPUTIME_ID);
}

uint64_t bench_mono_ns(void)
{
	return now_ns(CLOCK_MONOTONIC);
}

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

void bench_table_header(FILE *f)
{
	fprintf(f, "| what | ns/event (CPU) | events/s | bytes/event | overruns | peak RSS |"
		   " workload slowdown |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|\n");
}

static void cell_double(FILE *f, double v, int decimals, const char *suffix)
{
	if (v < 0)
		fprintf(f, " - |");
	else
		fprintf(f, " %.*f%s |", decimals, v, suffix ? suffix : "");
}

static void cell_rate(FILE *f, double v)
{
	if (v < 0)
		fprintf(f, " - |");
	else if (v >= 1e6)
		fprintf(f, " %.2f M |", v / 1e6);
	else if (v >= 1e3)
		fprintf(f, " %.1f k |", v / 1e3);
	else
		fprintf(f, " %.0f |", v);
}

void bench_row_print(FILE *f, const struct bench_row *r)
{
	fprintf(f, "| %s |", r->what);
	cell_double(f, r->ns_per_event, r->ns_per_event < 100 ? 1 : 0, NULL);
	cell_rate(f, r->events_per_s);
	cell_double(f, r->bytes_per_event, 2, r->bytes_suffix);
	if (r->overruns < 0)
		fprintf(f, " - |");
	else
		fprintf(f, " %lld |", (long long)r->overruns);
	if (r->peak_rss_kb < 0)
		fprintf(f, " - |");
	else
		fprintf(f, " %.1f MiB |", (double)r->peak_rss_kb / 1024.0);
	if (!r->slowdown_valid)
		fprintf(f, " - |");
	else
		fprintf(f, " %+.1f %% |", r->slowdown_pct);
	fputc('\n', f);
	fflush(f);
}

void bench_note(FILE *f, const char *fmt, ...)
{
	va_list ap;

	fputs("- ", f);
	/* The test is for gcc 12 with -fsanitize=undefined, which otherwise
	 * warns of a null format here. */
	if (fmt) {
		va_start(ap, fmt);
		vfprintf(f, fmt, ap);
		va_end(ap);
	}
	fputc('\n', f);
	fflush(f);
}
