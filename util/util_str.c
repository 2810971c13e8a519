/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small string helpers for building human-readable messages: formatting
 * into a new string, handing a message to an optional out-parameter, and
 * growing a list of lines; and the one character-class check for names.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

char *strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

void set_error_text(char **ret_error, char *msg)
{
	if (ret_error) {
		free(*ret_error);
		*ret_error = msg;
	} else {
		free(msg);
	}
}

int array_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t c = *cap ? *cap : (first ? first : 1);
	void *n;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -ENOMEM;
		c *= 2;
	}
	n = reallocarray(*p, c, elem);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = c;
	return 0;
}

int str_append_line(char **buf, const char *line)
{
	size_t old = *buf ? strlen(*buf) : 0, add = strlen(line);
	char *n = realloc(*buf, old + add + 2);

	if (!n)
		return -ENOMEM;
	memcpy(n + old, line, add);
	n[old + add] = '\n';
	n[old + add + 1] = 0;
	*buf = n;
	return 0;
}

char *str_printable_dup(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	char *d = malloc(n + 1);

	if (!d)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		d[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	d[n] = 0;
	return d;
}

bool name_char_ok(char c, unsigned extra)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
		return true;
	switch (c) {
	case '-':
		return extra & NAME_DASH;
	case '.':
		return extra & NAME_DOT;
	case '/':
		return extra & NAME_SLASH;
	case '*':
		return extra & NAME_STAR;
	case ',':
		return extra & NAME_COMMA;
	default:
		return false;
	}
}

bool name_valid(const char *s, size_t max, unsigned extra)
{
	size_t n = 0;

	if (!s)
		return false;
	if ((extra & NAME_NOT_DOTS) && (strcmp(s, ".") == 0 || strcmp(s, "..") == 0))
		return false;
	/* Stops at @max + 1 bytes: the length of a hostile string is never walked. */
	for (; s[n]; n++)
		if (n >= max || !name_char_ok(s[n], extra))
			return false;
	return n > 0;
}
