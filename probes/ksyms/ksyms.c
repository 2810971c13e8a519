/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kallsyms symbol map (see ksyms.h for the layout).  Building it takes
 * one pass over the text with a temporary token table; what stays is the
 * encoded stream, the sparse index and the token dictionary, each
 * allocated at its final size.
 */

#include <assert.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ksyms/ksyms.h"
#include "util/util.h"
#include "util/util_varint.h"

struct ksyms {
	uint8_t *stream;                /* per symbol: addr delta, n tokens, tokens */
	size_t stream_len;
	uint64_t *idx_addr;             /* every KSYMS_INDEX_STRIDE-th symbol */
	uint32_t *idx_off;              /* its offset in stream; its delta is 0 */
	size_t n_idx;
	char *tok_blob;                 /* tokens by id (most frequent first) */
	uint32_t *tok_off;              /* n_tok + 1 offsets into tok_blob */
	size_t n_tok;
	size_t n_syms;
	uint64_t text_start;            /* _text, 0 if not listed */
	uint64_t text_end;              /* _etext, 0 if not listed */
};

/* ---- building ----------------------------------------------------------- */

struct tok {
	uint32_t off, len;              /* in the arena */
	uint32_t count;
	uint32_t id;                    /* final id, by frequency */
};

struct sym {
	uint64_t addr;
	uint32_t first;                 /* index into the token list; grows with file order */
	uint32_t n;
};

struct builder {
	/* token table: open addressing over indices + 1 into toks */
	uint32_t *slots;
	size_t n_slots;
	struct tok *toks;
	size_t n_toks, cap_toks;
	char *arena;
	size_t arena_len, arena_cap;
	/* symbols and their token lists */
	struct sym *syms;
	size_t n_syms, cap_syms;
	uint32_t *list;
	size_t n_list, cap_list;
	uint64_t text_start;            /* _text, kept whatever its type letter */
	uint64_t text_end;              /* _etext */
};

static void builder_done(struct builder *b)
{
	free(b->slots);
	free(b->toks);
	free(b->arena);
	free(b->syms);
	free(b->list);
}

static uint32_t hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static int rehash(struct builder *b)
{
	size_t n = b->n_slots ? b->n_slots * 2 : 16384;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_toks; i++) {
		size_t j = hash(b->arena + b->toks[i].off, b->toks[i].len) & (n - 1);

		while (s[j])
			j = (j + 1) & (n - 1);
		s[j] = (uint32_t)i + 1;
	}
	free(b->slots);
	b->slots = s;
	b->n_slots = n;
	return 0;
}

/* The id (in first-seen order) of token @s, added if new. */
static int intern(struct builder *b, const char *s, size_t n, uint32_t *ret)
{
	size_t j;
	int r;

	/* keep the table at most half full */
	if ((b->n_toks + 1) * 2 > b->n_slots) {
		r = rehash(b);
		if (r < 0)
			return r;
	}
	for (j = hash(s, n) & (b->n_slots - 1); b->slots[j]; j = (j + 1) & (b->n_slots - 1)) {
		struct tok *t = &b->toks[b->slots[j] - 1];

		if (t->len == n && memcmp(b->arena + t->off, s, n) == 0) {
			t->count++;
			*ret = b->slots[j] - 1;
			return 0;
		}
	}
	r = array_grow((void **)&b->toks, &b->cap_toks, b->n_toks + 1, sizeof(*b->toks), 4096);
	if (r >= 0)
		r = array_grow((void **)&b->arena, &b->arena_cap, b->arena_len + n, 1, 65536);
	if (r < 0)
		return r;
	/* an empty token ("a__b") may come before the arena has any room */
	if (n)
		memcpy(b->arena + b->arena_len, s, n);
	b->toks[b->n_toks] = (struct tok){ .off = (uint32_t)b->arena_len, .len = (uint32_t)n, .count = 1 };
	b->arena_len += n;
	b->slots[j] = (uint32_t)++b->n_toks;
	*ret = (uint32_t)b->n_toks - 1;
	return 0;
}

static int add_symbol(struct builder *b, uint64_t addr, const char *name, size_t len)
{
	uint32_t first = (uint32_t)b->n_list;
	int r;

	r = array_grow((void **)&b->syms, &b->cap_syms, b->n_syms + 1, sizeof(*b->syms), 16384);
	if (r < 0)
		return r;
	/* "a_b__c" -> a, b, "", c: joining with '_' gives the name back */
	for (size_t i = 0, start = 0; i <= len; i++) {
		uint32_t id;

		if (i < len && name[i] != '_')
			continue;
		r = array_grow((void **)&b->list, &b->cap_list, b->n_list + 1, sizeof(*b->list), 65536);
		if (r >= 0)
			r = intern(b, name + start, i - start, &id);
		if (r < 0)
			return r;
		b->list[b->n_list++] = id;
		start = i + 1;
	}
	b->syms[b->n_syms++] = (struct sym){ addr, first, (uint32_t)b->n_list - first };
	return 0;
}

static bool ends_with(const char *s, size_t len, const char *suffix, size_t *ret_len)
{
	size_t n = strlen(suffix);

	if (len <= n || memcmp(s + len - n, suffix, n) != 0)
		return false;
	*ret_len = len - n;
	return true;
}

/*
 * One line: "ADDR TYPE NAME" then optionally a tab and "[module]".
 * @any counts well-formed lines, @nonzero those with an address.
 */
static int parse_line(struct builder *b, const char *p, const char *le, size_t *any, size_t *nonzero)
{
	uint64_t addr = 0;
	const char *name;
	size_t digits = 0, len;
	char type;
	int v;

	for (; p < le && (v = hex_digit_value(*p)) >= 0; p++, digits++)
		addr = addr << 4 | (uint64_t)v;
	if (digits == 0 || digits > 16 || le - p < 4 || p[0] != ' ' || p[2] != ' ')
		return 0;
	type = p[1];
	name = p + 3;
	for (p = name; p < le && *p != '\t' && *p != ' ' && *p != 0; p++)
		;
	len = (size_t)(p - name);
	if (len == 0)
		return 0;
	(*any)++;
	if (addr == 0)
		return 0;
	(*nonzero)++;
	if (len == 5 && memcmp(name, "_text", 5) == 0 && !b->text_start)
		b->text_start = addr;
	if (len == 6 && memcmp(name, "_etext", 6) == 0 && !b->text_end)
		b->text_end = addr;
	/* text only; '$' names are ARM mapping symbols, not functions */
	if ((type != 't' && type != 'T') || name[0] == '$' || len > KSYMS_NAME_MAX)
		return 0;
	/* Clang CFI adds a "foo.cfi" or "foo.cfi_jt" for "foo"; the plain
	 * name is what a reader wants, and it keeps the token table small. */
	if (!ends_with(name, len, ".cfi_jt", &len))
		(void)ends_with(name, len, ".cfi", &len);
	return add_symbol(b, addr, name, len);
}

static int sym_cmp(const void *x, const void *y)
{
	const struct sym *a = x, *b = y;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	/* file order among equal addresses: the first one is kept */
	return a->first < b->first ? -1 : a->first > b->first;
}

static int tok_freq_cmp(const void *x, const void *y)
{
	const struct tok *a = *(const struct tok *const *)x, *b = *(const struct tok *const *)y;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* The dictionary, ids by frequency so that frequent tokens take one byte. */
static int build_dictionary(struct builder *b, struct ksyms *k)
{
	_cleanup_free_ struct tok **order = malloc((b->n_toks + 1) * sizeof(*order));
	size_t off = 0;

	k->tok_off = malloc((b->n_toks + 1) * sizeof(*k->tok_off));
	k->tok_blob = malloc(b->arena_len + 1);
	if (!order || !k->tok_off || !k->tok_blob)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_toks; i++)
		order[i] = &b->toks[i];
	if (b->n_toks)
		qsort(order, b->n_toks, sizeof(*order), tok_freq_cmp);
	for (size_t i = 0; i < b->n_toks; i++) {
		order[i]->id = (uint32_t)i;
		k->tok_off[i] = (uint32_t)off;
		memcpy(k->tok_blob + off, b->arena + order[i]->off, order[i]->len);
		off += order[i]->len;
	}
	k->tok_off[b->n_toks] = (uint32_t)off;
	k->n_tok = b->n_toks;
	return 0;
}

/*
 * The stream's exact length: the encoding pass below, sized only, so that
 * the stream is allocated once at its size (a bound then a shrinking
 * realloc left the old pointer in play as the failure fallback).
 */
static size_t stream_len(const struct builder *b)
{
	uint64_t prev = 0;
	size_t len = 0;

	for (size_t i = 0; i < b->n_syms; i++) {
		const struct sym *y = &b->syms[i];

		if (i % KSYMS_INDEX_STRIDE == 0)
			prev = y->addr;
		len += varint_len(y->addr - prev) + varint_len(y->n);
		for (uint32_t t = 0; t < y->n; t++)
			len += varint_len(b->toks[b->list[y->first + t]].id);
		prev = y->addr;
	}
	return len;
}

static int encode(struct builder *b, struct ksyms *k)
{
	size_t n = 0, w = 0;
	uint64_t prev = 0;
	uint8_t *p, *s;

	/* drop all but the first symbol of each address */
	for (size_t i = 0; i < b->n_syms; i++)
		if (w == 0 || b->syms[w - 1].addr != b->syms[i].addr)
			b->syms[w++] = b->syms[i];
	b->n_syms = w;

	k->stream_len = stream_len(b);
	k->n_idx = (b->n_syms + KSYMS_INDEX_STRIDE - 1) / KSYMS_INDEX_STRIDE;
	k->idx_addr = malloc(k->n_idx * sizeof(*k->idx_addr) + 1);
	k->idx_off = malloc(k->n_idx * sizeof(*k->idx_off) + 1);
	/* the room varint_put() may touch past the last value */
	s = malloc(k->stream_len + VARINT_PUT_ROOM);
	if (!k->idx_addr || !k->idx_off || !s) {
		free(s);
		return -ENOMEM;
	}
	p = s;
	for (size_t i = 0; i < b->n_syms; i++) {
		const struct sym *y = &b->syms[i];

		if (i % KSYMS_INDEX_STRIDE == 0) {
			k->idx_addr[n] = y->addr;
			k->idx_off[n++] = (uint32_t)(p - s);
			prev = y->addr;
		}
		p = varint_put(p, y->addr - prev);
		p = varint_put(p, y->n);
		for (uint32_t t = 0; t < y->n; t++)
			p = varint_put(p, b->toks[b->list[y->first + t]].id);
		prev = y->addr;
	}
	assert((size_t)(p - s) == k->stream_len);
	k->stream = s;
	k->n_syms = b->n_syms;
	return 0;
}

int ksyms_parse(const char *text, size_t len, struct ksyms **ret)
{
	_cleanup_(builder_done) struct builder b = { 0 };
	const char *p = text, *end = text + len;
	size_t any = 0, nonzero = 0;
	struct ksyms *k;
	int r;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		r = parse_line(&b, p, le, &any, &nonzero);
		if (r < 0)
			return r;
		p = le + 1;
	}
	if (any > 0 && nonzero == 0)
		return -EPERM;
	if (b.n_syms == 0)
		return -ENODATA;
	/* the stream stores offsets in 32 bits */
	if (b.n_list > UINT32_MAX / 4 || b.arena_len > UINT32_MAX / 4)
		return -E2BIG;

	qsort(b.syms, b.n_syms, sizeof(*b.syms), sym_cmp);
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->text_start = b.text_start;
	k->text_end = b.text_end;
	r = build_dictionary(&b, k);
	if (r >= 0)
		r = encode(&b, k);
	if (r < 0) {
		ksyms_free(k);
		return r;
	}
	*ret = k;
	return 0;
}

int ksyms_load(const char *path, struct ksyms **ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r;

	r = read_full_file_at(AT_FDCWD, path ? path : "/proc/kallsyms", KSYMS_TEXT_MAX, &text, &len);
	if (r < 0)
		return r;
	return ksyms_parse(text, len, ret);
}

struct ksyms *ksyms_free(struct ksyms *k)
{
	if (!k)
		return NULL;
	free(k->stream);
	free(k->idx_addr);
	free(k->idx_off);
	free(k->tok_blob);
	free(k->tok_off);
	free(k);
	return NULL;
}

/* ---- lookups ------------------------------------------------------------ */

size_t ksyms_count(const struct ksyms *k)
{
	return k ? k->n_syms : 0;
}

size_t ksyms_mem_bytes(const struct ksyms *k)
{
	if (!k)
		return 0;
	return sizeof(*k) + k->stream_len + k->n_idx * (sizeof(*k->idx_addr) + sizeof(*k->idx_off)) +
	       k->tok_off[k->n_tok] + (k->n_tok + 1) * sizeof(*k->tok_off);
}

int ksyms_lookup(const struct ksyms *k, uint64_t addr, char *buf, size_t size)
{
	const uint8_t *p, *end, *best = NULL;
	size_t lo = 0, hi, blk;
	uint64_t cur, best_addr = 0, v, n_tok;
	size_t out = 0;

	if (!k || k->n_idx == 0 || addr < k->idx_addr[0])
		return -ENOENT;
	/* last index entry at or below addr */
	hi = k->n_idx;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->idx_addr[mid] <= addr)
			lo = mid;
		else
			hi = mid;
	}
	blk = lo;
	p = k->stream + k->idx_off[blk];
	end = blk + 1 < k->n_idx ? k->stream + k->idx_off[blk + 1] : k->stream + k->stream_len;
	cur = k->idx_addr[blk];
	while (p < end) {
		const uint8_t *sym = p;

		if (!varint_get(&p, end, &v) || !varint_get(&p, end, &n_tok))
			return -ENOENT;
		cur += v;
		if (cur > addr)
			break;
		best = sym;
		best_addr = cur;
		for (uint64_t t = 0; t < n_tok; t++)
			if (!varint_get(&p, end, &v))
				return -ENOENT;
	}
	if (!best || addr - best_addr > KSYMS_MAX_SYM_SIZE)
		return -ENOENT;

	p = best;
	(void)varint_get(&p, end, &v);
	(void)varint_get(&p, end, &n_tok);
	for (uint64_t t = 0; t < n_tok; t++) {
		size_t l;

		if (!varint_get(&p, end, &v) || v >= k->n_tok)
			return -ENOENT;
		l = k->tok_off[v + 1] - k->tok_off[v];
		if (out + l + (t > 0) + 1 > size)
			return -ENOBUFS;
		if (t > 0)
			buf[out++] = '_';
		memcpy(buf + out, k->tok_blob + k->tok_off[v], l);
		out += l;
	}
	if (out + 1 > size)
		return -ENOBUFS;
	buf[out] = 0;
	return (int)out;
}

uint64_t ksyms_text_start(const struct ksyms *k)
{
	return k ? k->text_start : 0;
}

uint64_t ksyms_text_end(const struct ksyms *k)
{
	return k ? k->text_end : 0;
}
