/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_ksyms - what FtraceConfig.symbolize_ksyms costs on this machine:
 * loading /proc/kallsyms into the symbol map (wall and CPU time, cheapest
 * of N runs), the map's size, and a lookup.  Budget from the issue: at
 * most 150 ms and 2 MiB.  Needs root (or CAP_SYSLOG) to see addresses.
 *
 *   bench_ksyms [-r runs] [-f kallsyms]
 *
 * Prints one table row; not a test: nothing is asserted.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "probes/ksyms/ksyms.h"
#include "util/util.h"

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *path = "/proc/kallsyms";
	unsigned runs = 5;
	uint64_t best_wall = UINT64_MAX, best_cpu = UINT64_MAX, lookup_ns;
	struct ksyms *k = NULL;
	char name[KSYMS_NAME_MAX + 1];
	unsigned found = 0;
	int opt, r;

	while ((opt = getopt(argc, argv, "r:f:")) >= 0) {
		switch (opt) {
		case 'r':
			runs = (unsigned)atoi(optarg);
			break;
		case 'f':
			path = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-r runs] [-f kallsyms]\n", argv[0]);
			return 2;
		}
	}
	for (unsigned i = 0; i < (runs ? runs : 1); i++) {
		uint64_t w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);

		k = ksyms_free(k);
		r = ksyms_load(path, &k);
		if (r == -EPERM) {
			fprintf(stderr, "bench_ksyms: %s hides addresses (kptr_restrict, or not root)\n", path);
			return BENCH_EXIT_SKIP;
		}
		if (r < 0) {
			fprintf(stderr, "bench_ksyms: %s: %s\n", path, strerror(-r));
			return 1;
		}
		best_wall = MIN(best_wall, clock_ns(CLOCK_MONOTONIC) - w0);
		best_cpu = MIN(best_cpu, clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0);
	}

	/* lookups spread over the kernel text, as event addresses would be */
	{
		const uint64_t n = 1000000;
		uint64_t t0, base = 0;

		r = 0;
		for (uint64_t a = 0xffffffff81000000ull; a < 0xffffffff82000000ull && r <= 0; a += 4096)
			if ((r = ksyms_lookup(k, a, name, sizeof(name))) > 0)
				base = a;
		t0 = clock_ns(CLOCK_MONOTONIC);
		for (uint64_t i = 0; i < n; i++)
			found += ksyms_lookup(k, base + (i * 2654435761u) % (16u << 20), name, sizeof(name)) > 0;
		lookup_ns = (clock_ns(CLOCK_MONOTONIC) - t0) / n;
	}

	printf("| what | symbols | map size | load wall | load CPU | lookup |\n");
	printf("|---|---:|---:|---:|---:|---:|\n");
	printf("| ksyms load (%s) | %zu | %.2f MiB | %.1f ms | %.1f ms | %llu ns |\n", path, ksyms_count(k),
	       (double)ksyms_mem_bytes(k) / (1 << 20), (double)best_wall / 1e6, (double)best_cpu / 1e6,
	       (unsigned long long)lookup_ns);
	fprintf(stderr, "bench_ksyms: %u of 1000000 lookups named\n", found);
	ksyms_free(k);
	return 0;
}
