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
	/* the boot the state file belongs to ("": not known), /proc/sys/kernel/random/boot_id */
	char boot_id[BOOT_ID_LEN + 1];

	/* sharing among data sources */
	unsigned n_attached;
	unsigned n_active;
	bool preserve;                  /* the first data source asked to keep the buffer */
	struct ftrace_event_ref *refs;  /* sorted by key */
	size_t n_refs, cap_refs;
	int clock;                      /* FtraceClock of trace_clock, -1 unknown */
	uint32_t cached_buffer_kb;
	uint32_t buffer_percent;        /* what we wrote, 0 if untouched */
	int subbuf_outcome;             /* enum ftrace_subbuf_outcome of the first attach */
	char *subbuf_error;             /* the kernel's refusal of our sub-buffer size */
	/* the buffer resize (ftrace_tracefs_resize.c) */
	uint32_t resize_kb;             /* planned by the first attach, not written yet; 0: none */
	uint32_t resize_subbuf_kb;      /* the sub-buffer size planned with it; 0: none */
	struct ftrace_tracefs_resize *resize;   /* its thread, while one runs */

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

/*
 * Wait for a running resize thread and drop its result, and forget a
 * planned one: the restore is about to write buffer_size_kb back.
 */
void ftrace_tracefs_resize_join(struct ftrace_tracefs *t);

/*
 * buffer_size_kb = @value, each CPU's buffer resized from that CPU, so that
 * no kworker is waited for (ftrace_tracefs.c says why); the _at form
 * touches only @dirfd (the resize thread's).
 */
int ftrace_tracefs_buffer_kb_write_at(int dirfd, const char *value);
/* One write of @file through @dirfd only: 0 or -errno, no error text. */
int ftrace_tracefs_write_at(int dirfd, const char *file, const char *value);
int ftrace_tracefs_write_buffer_kb(struct ftrace_tracefs *t, const char *value, char **ret_error);

/*
 * Write the planned sub-buffer size now (ftrace_tracefs_resize.c); a
 * refusal goes to ftrace_tracefs_subbuf_refused().
 */
void ftrace_tracefs_subbuf_write(struct ftrace_tracefs *t, uint32_t kb);
/*
 * The kernel refused our sub-buffer size and kept its own: drop the undo
 * entry, say why (@why: owned; NULL when out of memory).
 */
void ftrace_tracefs_subbuf_refused(struct ftrace_tracefs *t, char *why);

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

/* ==== raw writes and undo bookkeeping: inside the room only ============== */

/**
 * ftrace_tracefs_write - the one validated write: open(O_WRONLY|O_CLOEXEC),
 * write all of @value (looping on short writes and EINTR), close.  Does not
 * record anything for undo.  On failure *@ret_error (if non-NULL) gets a
 * message naming the file and value, with the kernel's error_log text when
 * the kernel refused the value with EINVAL.
 * Returns: 0 or -errno.
 */
int ftrace_tracefs_write(struct ftrace_tracefs *t, const char *file, const char *value,
			 char **ret_error);

/**
 * ftrace_tracefs_write_trunc - ftrace_tracefs_write() with O_TRUNC: how the
 * list files (set_ftrace_filter, set_graph_function, set_event_pid) are
 * emptied before @value (may be "") is written.
 */
int ftrace_tracefs_write_trunc(struct ftrace_tracefs *t, const char *file, const char *value,
			       char **ret_error);

/**
 * ftrace_tracefs_kprobe_write - append @line to the top-level kprobe_events
 * (of the tracefs @t lives in; never truncated).
 * Returns: 0 or -errno (-EEXIST: the probe exists; -ENOENT: no such probe
 * to remove, or no kprobe_events at all).
 */
int ftrace_tracefs_kprobe_write(struct ftrace_tracefs *t, const char *line, char **ret_error);

/**
 * ftrace_tracefs_truncate - clear the ring buffer (open "trace" with O_TRUNC).
 */
int ftrace_tracefs_truncate(struct ftrace_tracefs *t);

/* -- undo list (ftrace_tracefs_undo.c) -- */

/**
 * ftrace_tracefs_remember - record the current value of @file so that
 * restore puts it back, unless it is already recorded.  Supported files:
 * tracing_on, trace_clock, buffer_size_kb (per-CPU sizes when they differ),
 * buffer_percent, current_tracer, max_graph_depth, tracing_cpumask,
 * options/<name>, events/<g>/<n>/enable, events/<g>/<n>/filter, and the
 * list files set_ftrace_filter, set_graph_function, set_event_pid (put
 * back by truncating, then writing the saved entries).  Kprobes are
 * recorded by ftrace_tracefs_kprobe_create().
 * Returns: 1 if a new entry was recorded, 0 if already there, -EOPNOTSUPP
 * for a list file holding entries that cannot be written back (function
 * commands such as ":traceoff"), -E2BIG for one too long to keep, -errno.
 */
int ftrace_tracefs_remember(struct ftrace_tracefs *t, const char *file);

/**
 * ftrace_tracefs_remember_value - record @old_value for @file without
 * reading it (the caller just read it).
 */
int ftrace_tracefs_remember_value(struct ftrace_tracefs *t, const char *file, const char *old_value);

/* Whether @file has an undo entry. */
bool ftrace_tracefs_remembered(const struct ftrace_tracefs *t, const char *file);

/**
 * ftrace_tracefs_forget - drop the entry for @file (we just put the file
 * back ourselves).
 */
void ftrace_tracefs_forget(struct ftrace_tracefs *t, const char *file);

/**
 * ftrace_tracefs_note_truncated - remember that we cleared the buffer, so
 * restore and recovery clear it again (our data must not outlive us).
 */
void ftrace_tracefs_note_truncated(struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_persist - write the undo list to the state file (atomic
 * replace) if it changed since the last persist.  Must succeed before the
 * recorded files are changed.
 */
int ftrace_tracefs_persist(struct ftrace_tracefs *t);
