/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * frozen_ftrace - the linux.frozen_ftrace data source: the previous boot's
 * ftrace data, kept in a persistent ring buffer (a boot-mapped tracefs
 * instance, Linux 6.12+, e.g. `reserve_mem=20M:2M:trace
 * trace_instance=boot_mapped^traceoff@trace` on the kernel command line),
 * read once and written as FtraceEventBundles, as Perfetto v58.2 defines it:
 *
 *   - FrozenFtraceConfig.instance_name names the instance (required);
 *   - a START_OF_TRACE FtraceStats with preserve_ftrace_buffer = true comes
 *     first, so that trace_processor keeps events older than the trace;
 *   - every event the instance knows is let through (the old boot may have
 *     recorded any of them); no compact_sched; no clock fields (the
 *     timestamps are the old boot's);
 *   - each CPU is read up to its buffer size, in slices, between which the
 *     event loop runs;
 *   - an END_OF_TRACE FtraceStats with the instance's per-CPU stats and the
 *     parse errors comes last;
 *   - once everything was read, the instance's buffer is cleared (its
 *     `trace` file truncated), the only write this data source makes.
 *
 * Beyond v58.2: the kernel addresses of the old boot (workqueue functions,
 * blocked_reason callers, function graph) are named, as interned
 * kernel_symbols, through this boot's /proc/kallsyms shifted by the
 * difference between the two boots' kernel text addresses that the
 * instance's last_boot_info gives (KASLR moves the kernel on every boot;
 * addresses in modules, which each boot loads where it likes, stay
 * unnamed);
 * an instance that is missing or not boot-mapped is refused with the
 * reason, and an empty one is said so.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/ds/ds.h"

/* The ops of "linux.frozen_ftrace", for probes/ds/ds_registry.c. */
extern const struct ds_ops frozen_ftrace_ds_ops;

/* What an instance's last_boot_info says. */
struct frozen_boot_info {
	/* 6.12-6.14: "text delta:\t%ld", this boot's text address minus the previous one's */
	bool has_text_delta;
	int64_t text_delta;
	/* 6.15+: "%lx\t[kernel]", the previous boot's kernel text address */
	bool has_text_addr;
	uint64_t text_addr;
	/* 6.15+: "# Current": the buffer holds this boot's data, not an older boot's */
	bool current;
};

/* Longest last_boot_info read (the kernel's lists one line per module). */
#define FROZEN_BOOT_INFO_MAX (64u << 10)

/**
 * frozen_ftrace_parse_boot_info - read the text of last_boot_info.
 * @text: the file's bytes, not necessarily NUL-terminated.
 * @len: their count, at most FROZEN_BOOT_INFO_MAX.
 * @ret: what it says; lines not understood are skipped.
 * Returns: 0, or -EBADMSG when no line was understood, -EINVAL.
 */
int frozen_ftrace_parse_boot_info(const char *text, size_t len, struct frozen_boot_info *ret);

/**
 * frozen_ftrace_addr_delta - what to add to an old boot's kernel address
 * to find it in this boot's kallsyms: the text delta, or this boot's
 * @text_start (ksyms_text_start()) minus the old text address.
 * Returns: 0 and *@ret, or -ENODATA when neither is known.
 */
int frozen_ftrace_addr_delta(const struct frozen_boot_info *bi, uint64_t text_start, int64_t *ret);

/* Where setup looks, for the tests: a tracefs root and a kallsyms file. */
struct frozen_ftrace_paths {
	const char *tracefs_root;   /* NULL: the mounted tracefs */
	const char *kallsyms;       /* NULL: /proc/kallsyms */
};

/**
 * frozen_ftrace_setup_at - ds_ops.setup with the paths of @paths.
 * Returns: as ds_ops.setup.
 */
int frozen_ftrace_setup_at(const struct ds_env *env, const struct Perfetto__Protos__DataSourceConfig *cfg,
			   const struct frozen_ftrace_paths *paths, void **ret, char **ret_error,
			   char **ret_warnings);
