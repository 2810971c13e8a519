/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as the content of a power_supply
 * counter file (linux.sysfs_power).  What the parser accepts must be a
 * number whose decimal form it reads back the same; it must never read
 * past the bytes given.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/sysfs_power/sysfs_power.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly @size bytes, so ASan sees any read past them */
	char *text = malloc(size ? size : 1);
	char again[32];
	int64_t v = 0, w = 0;
	int r;

	if (!text)
		return 0;
	memcpy(text, data, size);
	r = sysfs_power_parse_value(text, size, &v);
	if (r != 0 && r != -EINVAL && r != -ERANGE)
		abort();
	if (r == 0) {
		if (memchr(text, '\0', size))
			abort();
		snprintf(again, sizeof(again), "%" PRId64 "\n", v);
		if (sysfs_power_parse_value(again, strlen(again), &w) != 0 || w != v)
			abort();
	}
	free(text);
	return 0;
}
