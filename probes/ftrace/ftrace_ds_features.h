/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Internal to probes/ftrace: what one linux.ftrace data source sets up
 * beyond its events (ftrace_ds_features.c): kprobes, the raw_syscalls
 * filter, the function graph tracer, set_event_pid, tracing_cpumask,
 * tracefs options, and the kernel symbol names of its bundles
 * (ftrace_symbolize.c).  Used by ftrace_ds.c only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/ftrace/ftrace_parse.h"

struct ftrace_tracefs;
struct ftrace_config;
struct ftrace_format_table;
struct ksyms;
struct Perfetto__Protos__FtraceConfig;

/* ---- kernel symbols (ftrace_symbolize.c) ---------------------------------- */

struct ftrace_symbolizer {
	const struct ksyms *k;          /* NULL: nothing to name */
	uint32_t watermark;             /* indices up to here were named in this pass */
	uint64_t names;                 /* kernel_symbols entries written */
};

/* An ftrace_parser_bundle_hook: @ctx is a struct ftrace_symbolizer. */
void ftrace_symbolize_bundle(void *ctx, struct pbw *packet, struct ftrace_pidset *pids);

/* The pass's address set is about to be cleared: indices restart at 1. */
void ftrace_symbolize_pass_end(struct ftrace_symbolizer *s);

/* ---- the options beyond events (ftrace_ds_features.c) --------------------- */

struct ftrace_extra;

/**
 * ftrace_extra_check - may a data source with @cfg join @t now?  One with
 * tids_to_trace, tracefs_options or tracing_cpumask needs the directory to
 * itself, and none may join while such a one is there (as traced_probes).
 * Returns: 0, or -EBUSY with a reason.
 */
int ftrace_extra_check(const struct Perfetto__Protos__FtraceConfig *cfg, struct ftrace_tracefs *t,
		       char **ret_error);

/**
 * ftrace_extra_requests - the names ftrace_tracefs_read_available() must
 * cover for @cfg: its ftrace_events and every event its other options
 * imply.  @ret: a malloc'd array of @ret_n strings (free with
 * ftrace_extra_requests_free()).
 */
int ftrace_extra_requests(const struct Perfetto__Protos__FtraceConfig *cfg, char ***ret, size_t *ret_n);
void ftrace_extra_requests_free(char **v, size_t n);

/**
 * ftrace_extra_new - plan the kprobes and function filters of @cfg against
 * @t (reads available_filter_functions once, when it may).
 */
int ftrace_extra_new(const struct Perfetto__Protos__FtraceConfig *cfg, struct ftrace_tracefs *t,
		     struct ftrace_extra **ret);
struct ftrace_extra *ftrace_extra_free(struct ftrace_extra *x);

/**
 * ftrace_extra_setup_kprobes - create the planned kprobes (after the data
 * source attached to @t), load their formats into @table and let @parser
 * encode them as KprobeEvent, then enable them.  A probe that cannot be
 * made is reported, not fatal.
 * Returns: 0, -ENOMEM, or -errno when the undo state cannot be saved.
 */
int ftrace_extra_setup_kprobes(struct ftrace_extra *x, struct ftrace_tracefs *t,
			       struct ftrace_format_table *table, struct ftrace_parser *parser);

/**
 * ftrace_extra_apply - after the events are on: the raw_syscalls filter,
 * function graph, set_event_pid, tracing_cpumask and tracefs_options of
 * @c.  What the kernel lacks (function_graph) is reported, not fatal;
 * exclusive options that cannot be applied fail the setup, as in
 * traced_probes.
 * Returns: 0, or -errno with a reason.
 */
int ftrace_extra_apply(struct ftrace_extra *x, const struct ftrace_config *c, struct ftrace_tracefs *t,
		       char **ret_error);

/* Drop the kprobe events' references (before the data source detaches). */
void ftrace_extra_release(struct ftrace_extra *x, struct ftrace_tracefs *t);

/* failed_ftrace_events entries and log lines of the setup (owned by @x). */
size_t ftrace_extra_failed(const struct ftrace_extra *x, char *const **ret);
const char *ftrace_extra_warnings(const struct ftrace_extra *x);

/**
 * ftrace_extra_kprobe_stats - hits and misses of this data source's kprobes
 * from kprobe_profile.  Returns: 0, -ENOENT when it has none.
 */
int ftrace_extra_kprobe_stats(const struct ftrace_extra *x, struct ftrace_tracefs *t, int64_t *ret_hits,
			      int64_t *ret_misses);
