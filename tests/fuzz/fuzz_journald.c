/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as the fields of one journal entry
 * ("KEY=value" pieces split at NUL bytes, as sd-journal hands them out) for
 * linux.systemd_journald.  Every string taken must point into its field,
 * after the '=', and every number must be a set bit of has_num.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/journald/journald.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct journald_entry e = {};
	size_t pos = 0;

	while (pos < size) {
		const uint8_t *end = memchr(data + pos, '\0', size - pos);
		size_t len = end ? (size_t)(end - (data + pos)) : size - pos;
		/* a copy of exactly @len bytes, so ASan sees any read past them */
		char *f = malloc(len ? len : 1);

		if (!f)
			return 0;
		memcpy(f, data + pos, len);
		if (journald_entry_field(f, len, &e) == 1)
			for (int i = 0; i < _JOURNALD_STR_MAX; i++)
				if (e.str[i] >= f && e.str[i] < f + len &&
				    (e.str[i] + e.str_len[i] > f + len || e.str[i] == f || e.str[i][-1] != '='))
					abort();
		/* strings of earlier fields point into freed copies: forget them */
		for (int i = 0; i < _JOURNALD_STR_MAX; i++)
			e.str[i] = NULL;
		free(f);
		pos += len + 1;
	}
	if (e.has_num & ~0x1fu)
		abort();
	return 0;
}
