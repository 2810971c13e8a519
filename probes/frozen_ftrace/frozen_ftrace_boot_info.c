/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The text of a boot-mapped instance's last_boot_info: untrusted in the
 * sense that its layout changed between kernels (6.12 prints deltas, 6.15
 * the previous boot's addresses), kept apart so that the fuzz target
 * compiles it alone.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "probes/frozen_ftrace/frozen_ftrace.h"
#include "util/util.h"

/* @line (not NUL-terminated) starts with @prefix. */
static bool starts(const char *line, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && memcmp(line, prefix, n) == 0;
}

static int parse_number(const char *p, size_t len, bool hex, uint64_t *ret_u, int64_t *ret_i)
{
	char buf[32];
	size_t i = 0;

	while (i < len && (p[i] == ' ' || p[i] == '\t'))
		i++;
	p += i;
	len -= i;
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\r'))
		len--;
	if (len == 0 || len >= sizeof(buf) || memchr(p, '\0', len))
		return -EBADMSG;
	memcpy(buf, p, len);
	buf[len] = '\0';
	if (!hex)
		return safe_atoi64(buf, ret_i) < 0 ? -EBADMSG : 0;
	*ret_u = 0;
	for (i = 0; i < len; i++) {
		int v = hex_digit_value(buf[i]);

		if (v < 0 || i >= 16)
			return -EBADMSG;
		*ret_u = *ret_u << 4 | (uint64_t)v;
	}
	return 0;
}

int frozen_ftrace_parse_boot_info(const char *text, size_t len, struct frozen_boot_info *ret)
{
	const char *p, *end;
	bool any = false;

	if (!text || !ret || len > FROZEN_BOOT_INFO_MAX)
		return -EINVAL;
	*ret = (struct frozen_boot_info){ 0 };
	for (p = text, end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		const char *tab = memchr(p, '\t', n);

		uint64_t addr;
		int64_t delta;

		if (starts(p, n, "text delta:")) {
			if (parse_number(p + 11, n - 11, false, NULL, &delta) == 0) {
				ret->text_delta = delta;
				ret->has_text_delta = true;
				any = true;
			}
		} else if (starts(p, n, "data delta:")) {
			any = true;
		} else if (starts(p, n, "# Current")) {
			ret->current = true;
			any = true;
		} else if (tab && (size_t)(p + n - tab) == sizeof("[kernel]") &&
			   memcmp(tab + 1, "[kernel]", sizeof("[kernel]") - 1) == 0) {
			if (parse_number(p, (size_t)(tab - p), true, &addr, NULL) == 0 && addr) {
				ret->text_addr = addr;
				ret->has_text_addr = true;
				any = true;
			}
		}
		p += n + 1;
	}
	return any ? 0 : -EBADMSG;
}

int frozen_ftrace_addr_delta(const struct frozen_boot_info *bi, uint64_t text_start, int64_t *ret)
{
	if (!bi || !ret)
		return -EINVAL;
	if (bi->has_text_delta) {
		*ret = bi->text_delta;
		return 0;
	}
	if (bi->current) {
		*ret = 0;
		return 0;
	}
	if (bi->has_text_addr && text_start) {
		*ret = (int64_t)(text_start - bi->text_addr);
		return 0;
	}
	return -ENODATA;
}

