/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared by ftrace_tracefs*.c only: the controller's fields and the helpers
 * its files use among themselves.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "util/util.h"

struct tracefs_instance;

struct ftrace_undo_entry {
	char *file;                     /* relative to the directory, whitelisted */
	char *value;                    /* what to write back */
};

struct ftrace_event_ref {
	char *key;                      /* "group/name" */
	unsigned refs;                  /* data sources that need it */
	bool ours;                      /* we enabled it: disable it when refs drops to 0 */
};

struct ftrace_tracefs {
	char *path;                     /* absolute, no trailing '/' */
	char *instance_name;            /* NULL: top level */
	int dirfd;
	struct tracefs_instance *inst;  /* only for tracefs_error_last() */
	char *last_kernel_error;

	/* undo list, oldest first; persisted to state_path before each change */
	struct ftrace_undo_entry *undo;
	size_t n_undo, cap_undo;
	bool undo_dirty;
	bool truncated;                 /* we cleared the buffer */
	char *restore_error;            /* the last restore's first failure, or NULL */
	char *state_dir;
	char *state_path;

	/* sharing among data sources */
	unsigned n_attached;
	unsigned n_active;
	bool preserve;                  /* the first data source asked to keep the buffer */
	struct ftrace_event_ref *refs;  /* sorted by key */
	size_t n_refs, cap_refs;
	int clock;                      /* FtraceClock of trace_clock, -1 unknown */
	uint32_t cached_buffer_kb;
	uint32_t buffer_percent;        /* what we wrote, 0 if untouched */

	/* directory-wide features (ftrace_tracefs_features.c) */
	char *syscall_filter;           /* raw_syscalls filter we wrote, NULL: none */
	bool syscalls_all;              /* we cleared it: every syscall */
	bool funcgraph_on;              /* we set current_tracer=function_graph */
	bool exclusive;                 /* a data source with tids/options/cpumask */
};

/* Back to "no feature applied" (the undo list has put the files back). */
void ftrace_tracefs_features_reset(struct ftrace_tracefs *t);

/*
 * The top-level directory of the tracefs @t lives in (kprobe_events and
 * kprobe_profile exist only there; the probes show up in every instance).
 * Returns: an O_PATH fd, or -errno.
 */
int ftrace_tracefs_root_dirfd(const struct ftrace_tracefs *t);

/* Snapshot error_log so that older entries are not blamed on our writes. */
void ftrace_tracefs_note_kernel_error(struct ftrace_tracefs *t);

static inline void ftrace_tracefs_freep(struct ftrace_tracefs **t)
{
	ftrace_tracefs_free(*t);
}

static inline void ftrace_event_list_freep(struct ftrace_event_list **l)
{
	ftrace_event_list_free(*l);
}
