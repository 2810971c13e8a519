/* SPDX-License-Identifier: Apache-2.0 */
/*
 * syscall_events: syscall names to numbers for the running architecture
 * (tables in ftrace_syscalls.inc, generated from Perfetto's), and the
 * kernel filter on raw_syscalls that keeps only those numbers.  Pure,
 * except ftrace_syscall_arch_current(), which asks uname(2).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "util/util.h"

struct syscall_row {
	const char *name;
	uint16_t nr;
};

#define ROW(name, nr) { name, nr },
#define SKIP(name, nr)

static const struct syscall_row x86_64_rows[] = {
#define FTRACE_SYSCALL_X86_64 ROW
#define FTRACE_SYSCALL_ARM64 SKIP
#define FTRACE_SYSCALL_ARM32 SKIP
#define FTRACE_SYSCALL_X86 SKIP
#include "probes/ftrace/plan/ftrace_syscalls.inc"
#undef FTRACE_SYSCALL_X86_64
#undef FTRACE_SYSCALL_ARM64
#undef FTRACE_SYSCALL_ARM32
#undef FTRACE_SYSCALL_X86
};

static const struct syscall_row arm64_rows[] = {
#define FTRACE_SYSCALL_X86_64 SKIP
#define FTRACE_SYSCALL_ARM64 ROW
#define FTRACE_SYSCALL_ARM32 SKIP
#define FTRACE_SYSCALL_X86 SKIP
#include "probes/ftrace/plan/ftrace_syscalls.inc"
#undef FTRACE_SYSCALL_X86_64
#undef FTRACE_SYSCALL_ARM64
#undef FTRACE_SYSCALL_ARM32
#undef FTRACE_SYSCALL_X86
};

static const struct syscall_row arm32_rows[] = {
#define FTRACE_SYSCALL_X86_64 SKIP
#define FTRACE_SYSCALL_ARM64 SKIP
#define FTRACE_SYSCALL_ARM32 ROW
#define FTRACE_SYSCALL_X86 SKIP
#include "probes/ftrace/plan/ftrace_syscalls.inc"
#undef FTRACE_SYSCALL_X86_64
#undef FTRACE_SYSCALL_ARM64
#undef FTRACE_SYSCALL_ARM32
#undef FTRACE_SYSCALL_X86
};

static const struct syscall_row x86_rows[] = {
#define FTRACE_SYSCALL_X86_64 SKIP
#define FTRACE_SYSCALL_ARM64 SKIP
#define FTRACE_SYSCALL_ARM32 SKIP
#define FTRACE_SYSCALL_X86 ROW
#include "probes/ftrace/plan/ftrace_syscalls.inc"
#undef FTRACE_SYSCALL_X86_64
#undef FTRACE_SYSCALL_ARM64
#undef FTRACE_SYSCALL_ARM32
#undef FTRACE_SYSCALL_X86
};

#undef ROW
#undef SKIP

static const struct {
	const char *name;
	const struct syscall_row *rows;
	size_t n;
} tables[_FTRACE_SYSCALL_ARCH_MAX] = {
	[FTRACE_SYSCALL_ARCH_X86_64] = { "x86_64", x86_64_rows, ARRAY_SIZE(x86_64_rows) },
	[FTRACE_SYSCALL_ARCH_ARM64] = { "arm64", arm64_rows, ARRAY_SIZE(arm64_rows) },
	[FTRACE_SYSCALL_ARCH_ARM32] = { "arm32", arm32_rows, ARRAY_SIZE(arm32_rows) },
	[FTRACE_SYSCALL_ARCH_X86] = { "x86", x86_rows, ARRAY_SIZE(x86_rows) },
};

static bool arch_ok(enum ftrace_syscall_arch arch)
{
	return arch >= 0 && arch < _FTRACE_SYSCALL_ARCH_MAX;
}

enum ftrace_syscall_arch ftrace_syscall_arch_from_machine(const char *machine)
{
	if (!machine)
		return _FTRACE_SYSCALL_ARCH_INVALID;
	if (strcmp(machine, "x86_64") == 0)
		return FTRACE_SYSCALL_ARCH_X86_64;
	if (strcmp(machine, "aarch64") == 0)
		return FTRACE_SYSCALL_ARCH_ARM64;
	/* armv8l: 32-bit userspace on a 64-bit kernel, the arm32 numbers */
	if (strcmp(machine, "armv7l") == 0 || strcmp(machine, "armv8l") == 0)
		return FTRACE_SYSCALL_ARCH_ARM32;
	if (strcmp(machine, "i686") == 0)
		return FTRACE_SYSCALL_ARCH_X86;
	return _FTRACE_SYSCALL_ARCH_INVALID;
}

enum ftrace_syscall_arch ftrace_syscall_arch_current(void)
{
	struct utsname u;

	if (uname(&u) < 0)
		return _FTRACE_SYSCALL_ARCH_INVALID;
	return ftrace_syscall_arch_from_machine(u.machine);
}

const char *ftrace_syscall_arch_to_string(enum ftrace_syscall_arch arch)
{
	return arch_ok(arch) ? tables[arch].name : NULL;
}

static int row_cmp(const void *key, const void *row)
{
	return strcmp(key, ((const struct syscall_row *)row)->name);
}

int ftrace_syscall_by_name(enum ftrace_syscall_arch arch, const char *name)
{
	const struct syscall_row *r;

	if (!arch_ok(arch))
		return -EINVAL;
	if (!name)
		return -ENOENT;
	r = bsearch(name, tables[arch].rows, tables[arch].n, sizeof(struct syscall_row), row_cmp);
	return r ? r->nr : -ENOENT;
}

const char *ftrace_syscall_name(enum ftrace_syscall_arch arch, unsigned nr)
{
	if (!arch_ok(arch))
		return NULL;
	/* Rows are sorted by name; this is for logs, not a hot path. */
	for (size_t i = 0; i < tables[arch].n; i++)
		if (tables[arch].rows[i].nr == nr)
			return tables[arch].rows[i].name;
	return NULL;
}

size_t ftrace_syscall_count(enum ftrace_syscall_arch arch)
{
	return arch_ok(arch) ? tables[arch].n : 0;
}

/* Numbers fit in 16 bits (the largest is below 600). */
#define NR_LIMIT 65536u

/*
 * The filter for ascending unique @ids into @buf (FTRACE_SYSCALL_FILTER_MAX
 * + 1 bytes): one "id == N" per id, as traced_probes writes it; with
 * @ranges, runs of three or more as one range.  False if it does not fit.
 */
static bool format_filter(const uint16_t *ids, size_t n, bool ranges, char *buf)
{
	const size_t size = FTRACE_SYSCALL_FILTER_MAX + 1;
	size_t off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n;) {
		const char *sep = i ? " || " : "";
		size_t j = i;
		int w;

		while (ranges && j + 1 < n && ids[j + 1] == ids[j] + 1)
			j++;
		if (j - i >= 2)
			w = snprintf(buf + off, size - off, "%s(id >= %u && id <= %u)", sep, ids[i], ids[j]);
		else
			w = snprintf(buf + off, size - off, "%sid == %u", sep, ids[j = i]);
		if (w < 0 || (size_t)w >= size - off)
			return false;
		off += (size_t)w;
		i = j + 1;
	}
	return true;
}

int ftrace_syscall_filter_build(enum ftrace_syscall_arch arch, const char *const *names, size_t n,
				struct ftrace_syscall_filter **ret)
{
	_cleanup_free_ bool *seen = NULL;
	_cleanup_free_ uint16_t *ids = NULL;
	_cleanup_free_ char *buf = NULL;
	struct ftrace_syscall_filter *f;
	size_t n_ids = 0;
	int r = 0;

	if (!arch_ok(arch))
		return -EINVAL;
	seen = calloc(NR_LIMIT, sizeof(bool));
	f = calloc(1, sizeof(*f));
	if (!seen || !f) {
		free(f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int nr;

		if (!names[i])
			continue;
		nr = ftrace_syscall_by_name(arch, names[i]);
		if (nr >= 0) {
			seen[nr] = true;
			continue;
		}
		f->n_unknown_total++;
		r = ftrace_opts_report(&f->unknown, &f->n_unknown, names[i]);
		if (r < 0)
			goto fail;
	}
	ids = malloc(tables[arch].n * sizeof(*ids));
	buf = malloc(FTRACE_SYSCALL_FILTER_MAX + 1);
	if (!ids || !buf) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned nr = 0; nr < NR_LIMIT; nr++)
		if (seen[nr])
			ids[n_ids++] = (uint16_t)nr;
	f->n_ids = n_ids;
	if (n_ids > 0) {
		if (!format_filter(ids, n_ids, /* ranges= */ false, buf) &&
		    !format_filter(ids, n_ids, /* ranges= */ true, buf)) {
			r = -E2BIG;
			goto fail;
		}
		f->filter = TAKE_PTR(buf);
	}
	*ret = f;
	return 0;
fail:
	ftrace_syscall_filter_free(f);
	return r;
}

struct ftrace_syscall_filter *ftrace_syscall_filter_free(struct ftrace_syscall_filter *f)
{
	if (!f)
		return NULL;
	free(f->filter);
	ftrace_opts_strv_free(f->unknown, f->n_unknown);
	free(f);
	return NULL;
}
