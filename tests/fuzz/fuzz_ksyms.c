/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as /proc/kallsyms text.  The parser
 * must stay inside the buffer (ASan checks the reads); every lookup must
 * return a NUL-terminated name of the length it reports, never longer than
 * KSYMS_NAME_MAX, and the count and size must agree with a successful parse.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ksyms/ksyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_lookup(const struct ksyms *k, uint64_t addr)
{
	char buf[KSYMS_NAME_MAX + 1];
	int r = ksyms_lookup(k, addr, buf, sizeof(buf));

	if (r == -ENOENT)
		return;
	if (r < 0 || (size_t)r > KSYMS_NAME_MAX || strlen(buf) != (size_t)r)
		abort();
	/* a buffer one byte short must be refused, not overrun */
	if (r > 0 && ksyms_lookup(k, addr, buf, (size_t)r) != -ENOBUFS)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ksyms *k = NULL;
	int r = ksyms_parse((const char *)data, size, &k);

	if (r < 0) {
		if (k || (r != -EPERM && r != -ENODATA && r != -ENOMEM && r != -E2BIG))
			abort();
		return 0;
	}
	if (ksyms_count(k) == 0 || ksyms_mem_bytes(k) == 0)
		abort();
	/* addresses taken from the input itself, and around them */
	for (size_t i = 0; i + 8 <= size && i < 256; i += 8) {
		uint64_t a;

		memcpy(&a, data + i, 8);
		check_lookup(k, a);
		check_lookup(k, a - 1);
	}
	check_lookup(k, 0);
	check_lookup(k, UINT64_MAX);
	check_lookup(k, 0xffffffff81000000ull);
	ksyms_free(k);
	return 0;
}
