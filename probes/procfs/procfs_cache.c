/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Last counter values written per pid (ProcessStats writes only what
 * changed).  Open addressing with linear probing on the pid; entries are
 * never removed one by one, only all at once when the cache's TTL expires
 * or incremental state is cleared, so no tombstones are needed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/procfs/procfs_internal.h"

static size_t slot_of(int32_t pid, size_t cap)
{
	/* Fibonacci hashing: consecutive pids spread over the table. */
	return (size_t)(((uint32_t)pid * UINT32_C(2654435769)) >> 7) & (cap - 1);
}

static struct procfs_cache_entry *find_slot(struct procfs_cache_entry *slots, size_t cap,
					    int32_t pid)
{
	size_t i = slot_of(pid, cap);

	while (slots[i].pid != 0 && slots[i].pid != pid)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow(struct procfs_cache *c)
{
	size_t ncap = c->cap ? c->cap * 2 : 256;
	struct procfs_cache_entry *n;

	n = calloc(ncap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slots[i].pid != 0)
			*find_slot(n, ncap, c->slots[i].pid) = c->slots[i];
	free(c->slots);
	c->slots = n;
	c->cap = ncap;
	return 0;
}

struct procfs_cache_entry *procfs_cache_get(struct procfs_cache *c, int32_t pid)
{
	struct procfs_cache_entry *e;

	if (pid <= 0)
		return NULL;
	/* keep the load at or below one half */
	if ((c->used + 1) * 2 > c->cap && grow(c) < 0)
		return NULL;
	e = find_slot(c->slots, c->cap, pid);
	if (e->pid == 0) {
		e->pid = pid;
		e->valid = 0;
		c->used++;
	}
	return e;
}

void procfs_cache_clear(struct procfs_cache *c)
{
	if (c->slots)
		memset(c->slots, 0, c->cap * sizeof(*c->slots));
	c->used = 0;
}

void procfs_cache_done(struct procfs_cache *c)
{
	free(c->slots);
	*c = (struct procfs_cache){};
}
