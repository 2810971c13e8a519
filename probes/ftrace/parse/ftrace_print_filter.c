/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The print filter (FtraceConfig.print_filter, as the plan's plain rules):
 * which ftrace/print events (trace_marker writes) a session keeps.  Rules
 * are tried in order and the first that matches the message decides; a
 * message no rule matches is kept.  A rule matches either
 * a plain prefix of the message, or an atrace message "<type>|<pid>|<rest>"
 * of the given type whose <rest> starts with the given prefix.
 *
 * Checked once per print event, on the bytes of its buf field: no
 * allocation, no copy.
 */
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "util/util.h"

#define PRINT_FILTER_MAX_STRING 4096u

struct print_rule {
	bool allow;
	bool atrace;
	char *type;          /* atrace: what stands before "|<pid>|" */
	size_t type_len;
	char *prefix;
	size_t prefix_len;
};

struct ftrace_print_filter {
	struct print_rule *rules;
	size_t n_rules;
};

static bool starts_with(const char *s, size_t len, const char *prefix, size_t prefix_len)
{
	return prefix_len <= len && memcmp(s, prefix, prefix_len) == 0;
}

static bool rule_matches(const struct print_rule *r, const char *s, size_t len)
{
	size_t i;

	if (!r->atrace)
		return starts_with(s, len, r->prefix, r->prefix_len);
	if (!starts_with(s, len, r->type, r->type_len))
		return false;
	i = r->type_len;
	if (i >= len || s[i] != '|')
		return false;
	/* the pid: at least zero digits, then '|' */
	for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
		;
	if (i >= len || s[i] != '|')
		return false;
	i++;
	return starts_with(s + i, len - i, r->prefix, r->prefix_len);
}

bool ftrace_print_filter_allows(const struct ftrace_print_filter *f, const char *buf, size_t len)
{
	/* the kernel's buf is NUL-terminated inside the record; stop there */
	len = strnlen(buf, len);
	for (size_t i = 0; i < f->n_rules; i++)
		if (rule_matches(&f->rules[i], buf, len))
			return f->rules[i].allow;
	return true;
}

struct ftrace_print_filter *ftrace_print_filter_free(struct ftrace_print_filter *f)
{
	if (!f)
		return NULL;
	for (size_t i = 0; i < f->n_rules; i++) {
		free(f->rules[i].type);
		free(f->rules[i].prefix);
	}
	free(f->rules);
	free(f);
	return NULL;
}

static int dup_bounded(const char *s, char **ret, size_t *ret_len)
{
	size_t len = s ? strnlen(s, PRINT_FILTER_MAX_STRING + 1) : 0;

	if (len > PRINT_FILTER_MAX_STRING)
		return -EINVAL;
	*ret = strndup(s ? s : "", len);
	if (!*ret)
		return -ENOMEM;
	*ret_len = len;
	return 0;
}

int ftrace_print_filter_new(const struct ftrace_print_rule *rules, size_t n, struct ftrace_print_filter **ret)
{
	struct ftrace_print_filter *f;
	int r = 0;

	if (n == 0) {
		*ret = NULL;
		return 0;
	}
	if (n > FTRACE_PRINT_FILTER_MAX_RULES)
		return -E2BIG;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->rules = calloc(n, sizeof(*f->rules));
	if (!f->rules) {
		free(f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && r >= 0; i++) {
		const struct ftrace_print_rule *c = &rules[i];
		struct print_rule *pr = &f->rules[f->n_rules];

		pr->allow = c->allow;
		switch (c->match) {
		case FTRACE_PRINT_MATCH_PREFIX:
			r = dup_bounded(c->prefix, &pr->prefix, &pr->prefix_len);
			break;
		case FTRACE_PRINT_MATCH_ATRACE:
			pr->atrace = true;
			r = dup_bounded(c->type, &pr->type, &pr->type_len);
			if (r >= 0)
				r = dup_bounded(c->prefix, &pr->prefix, &pr->prefix_len);
			break;
		default:
			/* a rule with nothing to match never matches: leave it out */
			continue;
		}
		f->n_rules++;
	}
	if (r < 0) {
		ftrace_print_filter_free(f);
		return r;
	}
	*ret = f;
	return 0;
}
