/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The set of pids already written, as a bitmap split in pages that are
 * allocated the first time a pid in their range shows up.  Pids are dense
 * at the bottom of the pid space, so this is 4 KiB on most systems and
 * bounded by 512 KiB for pid_max = 4M, with O(1) lookups.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/procfs/procfs_internal.h"
#include "util/util.h"

#define PAGE_WORDS (PROCFS_PIDSET_PAGE_BITS / 64)

bool procfs_pidset_contains(const struct procfs_pidset *s, int32_t pid)
{
	uint32_t p = (uint32_t)pid;
	const uint64_t *page;

	if (pid < 0 || p >= PROCFS_PIDSET_MAX_PID)
		return false;
	page = s->pages[p / PROCFS_PIDSET_PAGE_BITS];
	if (!page)
		return false;
	p %= PROCFS_PIDSET_PAGE_BITS;
	return page[p / 64] & (UINT64_C(1) << (p % 64));
}

int procfs_pidset_add(struct procfs_pidset *s, int32_t pid)
{
	uint32_t p = (uint32_t)pid;
	uint64_t **slot, bit;

	if (pid < 0 || p >= PROCFS_PIDSET_MAX_PID)
		return -ERANGE;
	slot = &s->pages[p / PROCFS_PIDSET_PAGE_BITS];
	if (!*slot) {
		*slot = calloc(PAGE_WORDS, sizeof(uint64_t));
		if (!*slot)
			return -ENOMEM;
	}
	p %= PROCFS_PIDSET_PAGE_BITS;
	bit = UINT64_C(1) << (p % 64);
	if ((*slot)[p / 64] & bit)
		return 0;
	(*slot)[p / 64] |= bit;
	s->count++;
	return 1;
}

void procfs_pidset_remove(struct procfs_pidset *s, int32_t pid)
{
	uint32_t p = (uint32_t)pid;
	uint64_t *page, bit;

	if (pid < 0 || p >= PROCFS_PIDSET_MAX_PID)
		return;
	page = s->pages[p / PROCFS_PIDSET_PAGE_BITS];
	if (!page)
		return;
	p %= PROCFS_PIDSET_PAGE_BITS;
	bit = UINT64_C(1) << (p % 64);
	if (page[p / 64] & bit) {
		page[p / 64] &= ~bit;
		s->count--;
	}
}

void procfs_pidset_clear(struct procfs_pidset *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(s->pages); i++)
		if (s->pages[i])
			memset(s->pages[i], 0, PAGE_WORDS * sizeof(uint64_t));
	s->count = 0;
}

void procfs_pidset_done(struct procfs_pidset *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(s->pages); i++) {
		free(s->pages[i]);
		s->pages[i] = NULL;
	}
	s->count = 0;
}
