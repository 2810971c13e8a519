/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_pidset - bounded sets filled while parsing one pass: pids seen,
 * pids renamed, kernel addresses seen.  Each is an insertion-ordered array
 * plus an index (a bitmap for pids, open addressing for the rest),
 * allocated once; adds never allocate.  Memory is allocated for the
 * capacity but only touched as far as it is used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "util/util.h"

/*
 * Index slots hold (array position + 1); 0 = empty.  Slots = 2 x capacity
 * rounded up to a power of two keeps probes short.  Keys are never removed
 * one by one, so each key remembers its slot and clearing is O(n).
 */
struct oset {
	uint64_t *keys;      /* insertion order */
	uint32_t *slot_of;   /* slot index of keys[i] */
	uint32_t *slots;
	size_t n, cap, mask;
};

/*
 * Pids below the largest pid_max (2^22, the kernel's PID_MAX_LIMIT on
 * 64-bit) are members when their bit is set: no hashing, and the memory
 * touched is the list in insertion order plus the bitmap words where the
 * pids live (a hash index would touch a page per pid, at random, and keep
 * them all resident).  Anything else (a corrupt record's pid) goes through
 * a hash index of its own, touched only when such pids appear.
 */
#define PID_BITS (1u << 22)

struct ftrace_pidset {
	struct oset big_pids, renamed, addrs;
	uint64_t *pid_bits;
	int32_t *pid_list;       /* every pid, insertion order */
	size_t n_pids, cap;
	int32_t *renamed_list;   /* int32 view of renamed, same order */
	bool overflowed;
};

static uint64_t hash64(uint64_t k)
{
	/* splitmix64 finaliser: pids are dense, addresses share high bits. */
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	k ^= k >> 31;
	return k;
}

static int oset_init(struct oset *s, size_t cap)
{
	size_t slots = 16;

	while (slots < cap * 2)
		slots <<= 1;
	s->keys = calloc(cap, sizeof(*s->keys));
	s->slot_of = calloc(cap, sizeof(*s->slot_of));
	s->slots = calloc(slots, sizeof(*s->slots));
	if (!s->keys || !s->slot_of || !s->slots)
		return -ENOMEM;
	s->cap = cap;
	s->mask = slots - 1;
	return 0;
}

static void oset_done(struct oset *s)
{
	free(s->keys);
	free(s->slot_of);
	free(s->slots);
}

/* Returns: position of @key, or -1 with @ret_slot the empty slot to use. */
static long oset_find(const struct oset *s, uint64_t key, size_t *ret_slot)
{
	size_t i = (size_t)hash64(key) & s->mask;

	for (;; i = (i + 1) & s->mask) {
		uint32_t v = s->slots[i];

		if (v == 0) {
			*ret_slot = i;
			return -1;
		}
		if (s->keys[v - 1] == key)
			return (long)v - 1;
	}
}

/* Returns: 1 added, 0 present, -ENOSPC full; *ret_pos = its position. */
static int oset_add(struct oset *s, uint64_t key, size_t *ret_pos)
{
	size_t slot = 0;
	long pos = oset_find(s, key, &slot);

	if (pos >= 0) {
		*ret_pos = (size_t)pos;
		return 0;
	}
	if (s->n >= s->cap)
		return -ENOSPC;
	s->keys[s->n] = key;
	s->slot_of[s->n] = (uint32_t)slot;
	s->slots[slot] = (uint32_t)(s->n + 1);
	*ret_pos = s->n++;
	return 1;
}

static void oset_clear(struct oset *s)
{
	for (size_t k = 0; k < s->n; k++)
		s->slots[s->slot_of[k]] = 0;
	s->n = 0;
}

int ftrace_pidset_new(size_t capacity, struct ftrace_pidset **ret)
{
	struct ftrace_pidset *s;

	if (!ret || capacity == 0 || capacity > (1u << 24))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cap = capacity;
	if (oset_init(&s->big_pids, capacity) < 0 || oset_init(&s->renamed, capacity) < 0 ||
	    oset_init(&s->addrs, capacity) < 0 ||
	    !(s->pid_bits = calloc(PID_BITS / 64, sizeof(uint64_t))) ||
	    !(s->pid_list = calloc(capacity, sizeof(int32_t))) ||
	    !(s->renamed_list = calloc(capacity, sizeof(int32_t)))) {
		ftrace_pidset_free(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

struct ftrace_pidset *ftrace_pidset_free(struct ftrace_pidset *s)
{
	if (!s)
		return NULL;
	oset_done(&s->big_pids);
	oset_done(&s->renamed);
	oset_done(&s->addrs);
	free(s->pid_bits);
	free(s->pid_list);
	free(s->renamed_list);
	free(s);
	return NULL;
}

static inline bool pid_cached(uint32_t pid)
{
	return pid < PID_BITS;
}

void ftrace_pidset_clear(struct ftrace_pidset *s)
{
	for (size_t i = 0; i < s->n_pids; i++) {
		uint32_t pid = (uint32_t)s->pid_list[i];

		if (pid_cached(pid))
			s->pid_bits[pid / 64] &= ~(1ull << (pid % 64));
	}
	s->n_pids = 0;
	oset_clear(&s->big_pids);
	oset_clear(&s->renamed);
	oset_clear(&s->addrs);
	s->overflowed = false;
}

bool ftrace_pidset_add(struct ftrace_pidset *s, int32_t pid)
{
	uint32_t u = (uint32_t)pid;

	if (pid_cached(u)) {
		uint64_t bit = 1ull << (u % 64);

		if (s->pid_bits[u / 64] & bit)
			return false;
		if (s->n_pids >= s->cap) {
			s->overflowed = true;
			return false;
		}
		s->pid_bits[u / 64] |= bit;
	} else {
		size_t pos;
		int r;

		if (s->n_pids >= s->cap) {
			/* Full: a pid already there stays "not new", as below. */
			size_t slot;

			if (oset_find(&s->big_pids, u, &slot) < 0)
				s->overflowed = true;
			return false;
		}
		r = oset_add(&s->big_pids, u, &pos);
		if (r <= 0)
			return false;
	}
	s->pid_list[s->n_pids++] = pid;
	return true;
}

static bool add_renamed(struct ftrace_pidset *s, int32_t pid)
{
	size_t pos;
	int r = oset_add(&s->renamed, (uint32_t)pid, &pos);

	if (r < 0) {
		s->overflowed = true;
		return false;
	}
	s->renamed_list[pos] = pid;
	return r > 0;
}

bool ftrace_pidset_add_renamed(struct ftrace_pidset *s, int32_t pid)
{
	return add_renamed(s, pid);
}

bool ftrace_pidset_contains(const struct ftrace_pidset *s, int32_t pid)
{
	size_t slot;

	if (pid_cached((uint32_t)pid))
		return s->pid_bits[(uint32_t)pid / 64] & (1ull << ((uint32_t)pid % 64));
	return oset_find(&s->big_pids, (uint32_t)pid, &slot) >= 0;
}

size_t ftrace_pidset_pids(const struct ftrace_pidset *s, const int32_t **ret)
{
	*ret = s->pid_list;
	return s->n_pids;
}

size_t ftrace_pidset_renamed(const struct ftrace_pidset *s, const int32_t **ret)
{
	*ret = s->renamed_list;
	return s->renamed.n;
}

uint32_t ftrace_pidset_intern_addr(struct ftrace_pidset *s, uint64_t addr)
{
	size_t pos;

	if (oset_add(&s->addrs, addr, &pos) < 0) {
		s->overflowed = true;
		return 0;
	}
	return (uint32_t)pos + 1;
}

size_t ftrace_pidset_addrs(const struct ftrace_pidset *s, const uint64_t **ret)
{
	*ret = s->addrs.keys;
	return s->addrs.n;
}

bool ftrace_pidset_overflowed(const struct ftrace_pidset *s)
{
	return s->overflowed;
}
