/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as a boot-mapped instance's
 * last_boot_info (linux.frozen_ftrace).  The parser must never read past
 * the bytes given, must say -EBADMSG or 0 and nothing else, and what it
 * took must be what the text says: a text delta it reports is read back
 * the same from the line it wrote, and the address delta derived from it
 * is that delta.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/frozen_ftrace/frozen_ftrace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly @size bytes, so ASan sees any read past them */
	char *text = malloc(size ? size : 1);
	struct frozen_boot_info bi, again;
	char line[64];
	int64_t d;
	int r;

	if (!text)
		return 0;
	memcpy(text, data, size);
	r = frozen_ftrace_parse_boot_info(text, size, &bi);
	if (size > FROZEN_BOOT_INFO_MAX) {
		if (r != -EINVAL)
			abort();
	} else if (r != 0 && r != -EBADMSG) {
		abort();
	}
	if (r == 0 && bi.has_text_delta) {
		snprintf(line, sizeof(line), "text delta:\t%" PRId64 "\n", bi.text_delta);
		if (frozen_ftrace_parse_boot_info(line, strlen(line), &again) != 0 || !again.has_text_delta ||
		    again.text_delta != bi.text_delta)
			abort();
		if (frozen_ftrace_addr_delta(&bi, 0, &d) != 0 || d != bi.text_delta)
			abort();
	}
	if (r == 0 && bi.has_text_addr && bi.text_addr == 0)
		abort();
	free(text);
	return 0;
}
