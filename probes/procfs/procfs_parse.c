/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pure parsers for /proc/<pid>/{status,stat,cmdline,smaps_rollup}.  They
 * work on (buffer, length) pairs that need not be NUL-terminated, never
 * allocate and never read past the length: the fuzzer feeds them anything.
 */
#include <errno.h>
#include <string.h>

#include "probes/procfs/procfs_internal.h"
#include "util/util.h"

const uint8_t procfs_counter_field[_PROCFS_CNT_MAX] = {
	[PROCFS_CNT_RUNTIME_USER] = 21,
	[PROCFS_CNT_RUNTIME_KERNEL] = 22,
	[PROCFS_CNT_DMABUF_RSS] = 24,
	[PROCFS_CNT_VM_SIZE] = 2,
	[PROCFS_CNT_VM_LOCKED] = 8,
	[PROCFS_CNT_VM_HWM] = 9,
	[PROCFS_CNT_VM_RSS] = 3,
	[PROCFS_CNT_RSS_ANON] = 4,
	[PROCFS_CNT_RSS_FILE] = 5,
	[PROCFS_CNT_RSS_SHMEM] = 6,
	[PROCFS_CNT_VM_SWAP] = 7,
	[PROCFS_CNT_SMR_RSS] = 16,
	[PROCFS_CNT_SMR_PSS] = 17,
	[PROCFS_CNT_SMR_PSS_ANON] = 18,
	[PROCFS_CNT_SMR_PSS_FILE] = 19,
	[PROCFS_CNT_SMR_PSS_SHMEM] = 20,
	[PROCFS_CNT_SMR_SWAP_PSS] = 23,
	[PROCFS_CNT_OOM_SCORE_ADJ] = 10,
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

int procfs_parse_uint_prefix(const char *p, const char *end, uint64_t *ret)
{
	uint64_t v = 0;
	bool any = false;

	while (p < end && is_blank(*p))
		p++;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
		any = true;
	}
	if (!any)
		return -EINVAL;
	*ret = v;
	return 0;
}

int procfs_parse_int_prefix(const char *p, const char *end, int64_t *ret)
{
	bool neg = false;
	uint64_t u;
	int r;

	while (p < end && is_blank(*p))
		p++;
	if (p < end && (*p == '-' || *p == '+')) {
		neg = *p == '-';
		p++;
	}
	/* a sign followed by blanks is not a number */
	if (p >= end || *p < '0' || *p > '9')
		return -EINVAL;
	r = procfs_parse_uint_prefix(p, end, &u);
	if (r < 0)
		return r;
	if (neg) {
		if (u > (uint64_t)INT64_MAX + 1)
			return -ERANGE;
		*ret = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
	} else {
		if (u > (uint64_t)INT64_MAX)
			return -ERANGE;
		*ret = (int64_t)u;
	}
	return 0;
}

static int parse_i32(const char *p, const char *end, int32_t *ret)
{
	int64_t v;
	int r;

	r = procfs_parse_int_prefix(p, end, &v);
	if (r < 0)
		return r;
	if (v < INT32_MIN || v > INT32_MAX)
		return -ERANGE;
	*ret = (int32_t)v;
	return 0;
}

int32_t procfs_parse_pid(const char *name)
{
	uint32_t v = 0;
	const char *p;

	if (name[0] < '1' || name[0] > '9')
		return 0;
	for (p = name; *p; p++) {
		if (*p < '0' || *p > '9')
			return 0;
		v = v * 10 + (uint32_t)(*p - '0');
		if (v > INT32_MAX)
			return 0;
	}
	return (int32_t)v;
}

/* "Key:" at the start of [line, eol): returns the value start or NULL. */
static const char *match_key(const char *line, const char *eol, const char *key, size_t key_len)
{
	if ((size_t)(eol - line) < key_len || memcmp(line, key, key_len) != 0)
		return NULL;
	return line + key_len;
}

#define KEY(s) s, sizeof(s) - 1

struct mem_key {
	const char *key;
	size_t len;
	enum procfs_counter cnt;
};

static const struct mem_key status_mem_keys[] = {
	{ KEY("VmSize:"), PROCFS_CNT_VM_SIZE },
	{ KEY("VmLck:"), PROCFS_CNT_VM_LOCKED },
	{ KEY("VmHWM:"), PROCFS_CNT_VM_HWM },
	{ KEY("VmRSS:"), PROCFS_CNT_VM_RSS },
	{ KEY("RssAnon:"), PROCFS_CNT_RSS_ANON },
	{ KEY("RssFile:"), PROCFS_CNT_RSS_FILE },
	{ KEY("RssShmem:"), PROCFS_CNT_RSS_SHMEM },
	{ KEY("VmSwap:"), PROCFS_CNT_VM_SWAP },
};

static const struct mem_key smaps_keys[] = {
	{ KEY("Rss:"), PROCFS_CNT_SMR_RSS },
	{ KEY("Pss:"), PROCFS_CNT_SMR_PSS },
	{ KEY("Pss_Anon:"), PROCFS_CNT_SMR_PSS_ANON },
	{ KEY("Pss_File:"), PROCFS_CNT_SMR_PSS_FILE },
	{ KEY("Pss_Shmem:"), PROCFS_CNT_SMR_PSS_SHMEM },
	{ KEY("SwapPss:"), PROCFS_CNT_SMR_SWAP_PSS },
};

static bool parse_mem_line(const char *line, const char *eol, const struct mem_key *keys,
			   size_t n_keys, struct procfs_status *st)
{
	for (size_t i = 0; i < n_keys; i++) {
		const char *v = match_key(line, eol, keys[i].key, keys[i].len);
		uint64_t kb;

		if (!v)
			continue;
		if (procfs_parse_uint_prefix(v, eol, &kb) >= 0) {
			st->mem[keys[i].cnt] = kb;
			st->mem_present |= 1u << keys[i].cnt;
		}
		return true;
	}
	return false;
}

static void parse_nspid(const char *v, const char *eol, struct procfs_status *st)
{
	bool first = true;

	st->n_nspid = 0;
	while (v < eol) {
		int32_t id;

		while (v < eol && is_blank(*v))
			v++;
		if (v >= eol)
			break;
		if (parse_i32(v, eol, &id) < 0)
			break;
		while (v < eol && !is_blank(*v))
			v++;
		if (first) {
			/* our own namespace's view: the pid we already have */
			first = false;
			continue;
		}
		if (st->n_nspid >= PROCFS_MAX_NS_LEVEL)
			break;
		st->nspid[st->n_nspid++] = id;
	}
}

int procfs_status_parse(const char *buf, size_t len, struct procfs_status *ret)
{
	const char *p = buf, *end = buf + len;

	memset(ret, 0, sizeof(*ret));
	ret->kthread = -1;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *v;

		if (!eol)
			eol = end;

		switch (*p) {
		case 'N':
			if ((v = match_key(p, eol, KEY("Name:")))) {
				/*
				 * The kernel writes "Name:\t<comm>".  Only that tab
				 * is a separator: a comm may itself start with
				 * blanks.
				 */
				if (v < eol && *v == '\t')
					v++;
				ret->name = v;
				ret->name_len = (size_t)(eol - v);
				ret->has_name = true;
			} else if ((v = match_key(p, eol, KEY("NSpid:")))) {
				parse_nspid(v, eol, ret);
			}
			break;
		case 'T':
			if ((v = match_key(p, eol, KEY("Tgid:"))))
				ret->has_tgid = parse_i32(v, eol, &ret->tgid) >= 0;
			break;
		case 'P':
			if ((v = match_key(p, eol, KEY("Pid:"))))
				ret->has_pid = parse_i32(v, eol, &ret->pid) >= 0;
			else if ((v = match_key(p, eol, KEY("PPid:"))))
				(void)parse_i32(v, eol, &ret->ppid);
			break;
		case 'U':
			if ((v = match_key(p, eol, KEY("Uid:"))))
				(void)parse_i32(v, eol, &ret->uid);
			break;
		case 'K':
			if ((v = match_key(p, eol, KEY("Kthread:")))) {
				int32_t k;

				if (parse_i32(v, eol, &k) >= 0 && (k == 0 || k == 1))
					ret->kthread = (int8_t)k;
			}
			break;
		case 'V':
		case 'R':
			(void)parse_mem_line(p, eol, status_mem_keys, ARRAY_SIZE(status_mem_keys), ret);
			break;
		default:
			break;
		}
		p = eol + 1;
	}

	/* Kernel threads have no Vm* lines; a user process always has VmSize. */
	ret->has_mem = ret->mem_present & (1u << PROCFS_CNT_VM_SIZE);
	if (!ret->has_tgid && !ret->has_pid)
		return -EINVAL;
	return 0;
}

void procfs_smaps_rollup_parse(const char *buf, size_t len, struct procfs_status *st)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!eol)
			eol = end;
		(void)parse_mem_line(p, eol, smaps_keys, ARRAY_SIZE(smaps_keys), st);
		p = eol + 1;
	}
}

/* The next blank-separated token in [*p, end). */
static bool next_token(const char **p, const char *end, const char **ret_tok, const char **ret_end)
{
	const char *s = *p;

	while (s < end && (is_blank(*s) || *s == '\n'))
		s++;
	if (s >= end)
		return false;
	*ret_tok = s;
	while (s < end && !is_blank(*s) && *s != '\n')
		s++;
	*ret_end = s;
	*p = s;
	return true;
}

int procfs_stat_parse(const char *buf, size_t len, struct procfs_stat *ret)
{
	const char *end = buf + len, *open, *close = NULL, *p, *tok, *tok_end;
	struct procfs_stat st = {};
	unsigned field;
	int r;

	open = memchr(buf, '(', len);
	if (!open)
		return -EINVAL;
	for (p = end; p > open + 1; p--)
		if (p[-1] == ')') {
			close = p - 1;
			break;
		}
	if (!close)
		return -EINVAL;

	r = parse_i32(buf, open, &st.pid);
	if (r < 0)
		return -EINVAL;
	st.comm = open + 1;
	st.comm_len = (size_t)(close - open - 1);

	/* Fields are numbered from 1 as in proc(5): state is 3. */
	p = close + 1;
	for (field = 3; field <= 22; field++) {
		if (!next_token(&p, end, &tok, &tok_end))
			return -EINVAL;
		switch (field) {
		case 3:
			st.state = *tok;
			break;
		case 4:
			if (parse_i32(tok, tok_end, &st.ppid) < 0)
				return -EINVAL;
			break;
		case 14:
			r = procfs_parse_uint_prefix(tok, tok_end, &st.utime);
			break;
		case 15:
			r = procfs_parse_uint_prefix(tok, tok_end, &st.stime);
			break;
		case 22:
			r = procfs_parse_uint_prefix(tok, tok_end, &st.starttime);
			break;
		default:
			break;
		}
		if (r < 0)
			return -EINVAL;
	}
	*ret = st;
	return 0;
}

bool procfs_cmdline_next(const char *buf, size_t len, size_t *pos, const char **ret_arg,
			 size_t *ret_len)
{
	size_t i = *pos;

	/* empty arguments (two NULs in a row) are skipped */
	while (i < len && buf[i] == '\0')
		i++;
	if (i >= len) {
		*pos = len;
		return false;
	}

	const char *s = buf + i;
	const char *nul = memchr(s, '\0', len - i);
	size_t n = nul ? (size_t)(nul - s) : len - i;

	*ret_arg = s;
	*ret_len = n;
	*pos = i + n + (nul ? 1 : 0);
	return true;
}

size_t procfs_comm_to_name(const char *comm, size_t len, char *out, size_t out_size)
{
	size_t n = 0;

	if (len > 0 && comm[len - 1] == '\n')
		len--;
	for (size_t i = 0; i < len; i++) {
		char c = comm[i];
		const char *esc = c == '\\' ? "\\\\" : c == '\n' ? "\\n" : NULL;

		if (esc) {
			if (n + 2 > out_size)
				break;
			out[n++] = esc[0];
			out[n++] = esc[1];
		} else {
			if (n + 1 > out_size)
				break;
			out[n++] = c;
		}
	}
	return n;
}
