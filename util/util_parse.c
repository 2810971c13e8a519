/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>

#include "util/util.h"

static int parse_unsigned(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	bool any = false;

	if (!s)
		return -EINVAL;
	while (*s == ' ' || *s == '\t')
		s++;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
		any = true;
	}
	if (*s == '\n')
		s++;
	if (!any || *s != '\0')
		return -EINVAL;
	*ret = v;
	return 0;
}

int safe_atou64(const char *s, uint64_t *ret)
{
	return parse_unsigned(s, ret);
}

int safe_atoi64(const char *s, int64_t *ret)
{
	bool neg = false;
	uint64_t v;
	int r;

	if (!s)
		return -EINVAL;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '-' || *s == '+') {
		neg = *s == '-';
		s++;
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;
	r = parse_unsigned(s, &v);
	if (r < 0)
		return r;
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
		return -ERANGE;
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

int safe_atou32(const char *s, uint32_t *ret)
{
	uint64_t v;
	int r = safe_atou64(s, &v);

	if (r < 0)
		return r;
	if (v > UINT32_MAX)
		return -ERANGE;
	*ret = (uint32_t)v;
	return 0;
}

int safe_atoi32(const char *s, int32_t *ret)
{
	int64_t v;
	int r = safe_atoi64(s, &v);

	if (r < 0)
		return r;
	if (v < INT32_MIN || v > INT32_MAX)
		return -ERANGE;
	*ret = (int32_t)v;
	return 0;
}
