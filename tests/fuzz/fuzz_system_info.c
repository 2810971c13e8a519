/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as /proc/cpuinfo, a cpufreq frequency
 * list and /proc/interrupts for linux.system_info.  Every string handed
 * back must point into the input, every iterator must advance.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/system_info/system_info_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_in(const char *buf, size_t len, const char *p, size_t n)
{
	if (p < buf || p + n > buf + len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	uint32_t freqs[64];
	struct system_info_cpu cpu = {};
	struct system_info_irq irq;
	size_t pos = 0, prev = 0, n;
	unsigned n_cpus = 0;

	while (system_info_cpuinfo_next(buf, size, &pos, &cpu)) {
		/*
		 * "unknown" is ours; any other name is a piece of the input,
		 * possibly an empty one at its very end (names are counted,
		 * never NUL-terminated, so only the length may be read).
		 */
		if (cpu.processor >= buf && cpu.processor <= buf + size)
			check_in(buf, size, cpu.processor, cpu.processor_len);
		else if (cpu.processor_len != strlen("unknown") ||
			 memcmp(cpu.processor, "unknown", cpu.processor_len) != 0)
			abort();
		if (pos <= prev && pos != size)
			abort();
		prev = pos;
	}

	n = system_info_freqs_parse(buf, size, freqs, 0, 64);
	for (size_t i = 1; i < n; i++)
		if (freqs[i - 1] >= freqs[i])
			abort();

	pos = prev = 0;
	while (system_info_interrupts_next(buf, size, &pos, &n_cpus, &irq)) {
		check_in(buf, size, irq.name, irq.name_len);
		if (irq.name_len == 0 || pos <= prev)
			abort();
		prev = pos;
	}
	return 0;
}
