/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Kernel text symbols from /proc/kallsyms, held compactly for address ->
 * name lookups (FtraceConfig.symbolize_ksyms: the names behind the
 * interned addresses of workqueue functions, funcgraph funcs,
 * blocked_reason callers).
 *
 * Layout: symbols sorted by address; each one is a varint address delta
 * and its name as '_'-separated tokens, each token a varint index into a
 * dictionary ordered by frequency (so the common ones take one byte); a
 * sparse index of every KSYMS_INDEX_STRIDE-th symbol makes a lookup one
 * binary search and a short scan.  About 11 bytes per symbol; this
 * machine's 122,000 text symbols fit in ~1.3 MiB.
 */

#include <stddef.h>
#include <stdint.h>

/* Symbols between two sparse index entries. */
#define KSYMS_INDEX_STRIDE 16u
/* An address further than this past a symbol's start is not in it. */
#define KSYMS_MAX_SYM_SIZE (1u << 20)
/* Longest name kept (the kernel's KSYM_NAME_LEN is 512). */
#define KSYMS_NAME_MAX 511u
/* The most a kallsyms text may be (this machine's is ~5.5 MiB). */
#define KSYMS_TEXT_MAX (256u << 20)

struct ksyms;

/**
 * ksyms_parse - build the map from the kallsyms text @text of @len bytes
 * ("ADDR TYPE NAME[\t[MODULE]]" per line).  Only text symbols (t, T) are
 * kept; a name's ".cfi"/".cfi_jt" suffix is dropped; malformed lines are
 * skipped.  Where two symbols share an address, the first one is kept.
 * Returns: 0; -EPERM when symbols are listed but every address is 0 (the
 * kernel hides them: kernel.kptr_restrict, or no CAP_SYSLOG); -ENODATA when
 * there is no text symbol; -ENOMEM.
 */
int ksyms_parse(const char *text, size_t len, struct ksyms **ret);

/**
 * ksyms_load - ksyms_parse() of the file at @path (NULL: /proc/kallsyms).
 * Returns: as ksyms_parse(), or -errno from opening or reading the file,
 * -EFBIG past KSYMS_TEXT_MAX.
 */
int ksyms_load(const char *path, struct ksyms **ret);

struct ksyms *ksyms_free(struct ksyms *k);

/**
 * ksyms_lookup - the name of the symbol that contains @addr (the last one
 * starting at or below it, if @addr is within KSYMS_MAX_SYM_SIZE of that
 * start), NUL-terminated into @buf.  No allocation.
 * Returns: its length, -ENOENT when no symbol contains @addr, -ENOBUFS
 * when @size is too small.
 */
int ksyms_lookup(const struct ksyms *k, uint64_t addr, char *buf, size_t size);

/**
 * ksyms_count - how many symbols the map holds (FtraceStats.kernel_symbols_parsed).
 */
size_t ksyms_count(const struct ksyms *k);

/**
 * ksyms_mem_bytes - the heap the map holds (FtraceStats.kernel_symbols_mem_kb * 1024).
 */
size_t ksyms_mem_bytes(const struct ksyms *k);

/**
 * ksyms_text_start - the address of _text, the start of the kernel's text
 * (what a boot-mapped instance's last_boot_info gives for the previous
 * boot on kernels that list addresses rather than deltas).
 * Returns: it, or 0 when the text had no _text line.
 */
uint64_t ksyms_text_start(const struct ksyms *k);

/**
 * ksyms_text_end - the address of _etext, the end of the kernel's core
 * text (modules lie elsewhere, each where it was loaded).
 * Returns: it, or 0 when the text had no _etext line.
 */
uint64_t ksyms_text_end(const struct ksyms *k);
