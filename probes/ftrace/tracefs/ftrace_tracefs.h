/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Internal to probes/ftrace: the tracefs room, the only code that writes
 * tracefs (every write goes through a directory's undo list), with the
 * trace_clock text and the per-CPU stats it reads.  Used by the ds room
 * and by the tests.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/ftrace/plan/ftrace_plan.h"

struct pbw;

/* ==== trace_clock text (ftrace_clock.c) ================================= */

/**
 * ftrace_clock_selected - the selected clock of a trace_clock file's @text
 * ("local [boot] global" -> "boot"), copied into @buf of @size bytes.
 * Returns: 0, or -EBADMSG if no clock is bracketed or the name does not fit.
 */
int ftrace_clock_selected(const char *text, char *buf, size_t size);

/**
 * ftrace_clock_listed - whether @name is one of the words of trace_clock's
 * @text, selected or not.
 */
bool ftrace_clock_listed(const char *text, const char *name);

/**
 * ftrace_clock_from_name - the FtraceClock (enum ftrace_clock) a trace_clock
 * name stands for: boot is FTRACE_CLOCK_UNSPECIFIED (bundles carry no clock
 * fields), an unknown name FTRACE_CLOCK_UNKNOWN.
 */
int ftrace_clock_from_name(const char *name);

/* ==== tracefs directory controller (ftrace_tracefs*.c) =================== */

struct ftrace_tracefs;

/**
 * ftrace_tracefs_find_root - the tracefs mount to use: /sys/kernel/tracing
 * (mounted there first if it is not and we may), else
 * /sys/kernel/debug/tracing.
 * @ret_root: malloc'd absolute path without trailing '/'.
 * @ret_error: malloc'd reason on failure (may be NULL).
 * Returns: 0, -ENODEV if no tracefs can be found or mounted, -EACCES if it
 * exists but we may not write to it.
 */
int ftrace_tracefs_find_root(char **ret_root, char **ret_error);

/**
 * ftrace_tracefs_open - a controller for @root (top level) or for
 * @root/instances/@instance_name, which must exist.  Its undo list is
 * persisted under @state_dir (NULL: no persistence).
 * Returns: 0, -EINVAL for a bad name, -ENOENT for a missing instance,
 * -EACCES if not writable, -errno.
 */
int ftrace_tracefs_open(const char *root, const char *instance_name, const char *state_dir,
			struct ftrace_tracefs **ret, char **ret_error);

/**
 * ftrace_tracefs_free - close the controller.  Does NOT restore anything:
 * call ftrace_tracefs_restore() first.  Accepts NULL.
 */
struct ftrace_tracefs *ftrace_tracefs_free(struct ftrace_tracefs *t);

const char *ftrace_tracefs_path(const struct ftrace_tracefs *t);
const char *ftrace_tracefs_instance_name(const struct ftrace_tracefs *t);
int ftrace_tracefs_dirfd(const struct ftrace_tracefs *t);
const char *ftrace_tracefs_state_path(const struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_read - read a whole tracefs file (relative path) into a
 * NUL-terminated buffer of at most @max bytes.
 */
int ftrace_tracefs_read(struct ftrace_tracefs *t, const char *file, size_t max, char **ret,
			size_t *ret_len);

/**
 * ftrace_tracefs_read_root - ftrace_tracefs_read() of a file of the
 * top-level directory (kprobe_profile), whichever directory @t is.
 */
int ftrace_tracefs_read_root(struct ftrace_tracefs *t, const char *file, size_t max, char **ret);

/* The raw writes and the undo list bookkeeping are the room's own
 * (ftrace_tracefs_internal.h): everything else writes through
 * ftrace_tracefs_set() and the calls below, which remember first. */

/**
 * ftrace_tracefs_set - remember @file, persist if that added an entry, then
 * write @value with ftrace_tracefs_write().
 */
int ftrace_tracefs_set(struct ftrace_tracefs *t, const char *file, const char *value,
		       char **ret_error);

/**
 * ftrace_tracefs_restore - tracing_on=0, replay the undo list newest first,
 * clear the buffer if we had cleared it, then remove the state file.
 * Entries that fail are kept (and the file too).
 * Returns: 0 or the first -errno.
 */
int ftrace_tracefs_restore(struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_clear_frozen - empty the ring buffer of an instance this
 * process never recorded in (open "trace" with O_TRUNC): the clean-up of
 * linux.frozen_ftrace once it has read the previous boot's data, so that
 * the next boot does not find it again.  Nothing is remembered or undone.
 * Returns: 0 or -errno.
 */
int ftrace_tracefs_clear_frozen(struct ftrace_tracefs *t);

/* The last restore's first failure ("DIR/FILE: reason"), or NULL if it had none. */
const char *ftrace_tracefs_restore_error(const struct ftrace_tracefs *t);

size_t ftrace_tracefs_undo_count(const struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_undo_file_replay - replay one persisted undo list file.
 * @force: replay even if the owning pid is alive.
 * A file written in another boot is only removed: tracefs starts afresh at
 * boot, and the pid it names may be another process's now.  So is a file
 * whose instance is no longer in a mounted tracefs: its settings went with it.
 * Returns: 1 replayed (or another boot's, or its instance gone) and removed,
 * 0 skipped (owner alive), -errno (-EBADMSG for a malformed file).
 */
int ftrace_tracefs_undo_file_replay(const char *path, bool force);

/**
 * ftrace_tracefs_undo_parse - the text of an undo state file (NUL-terminated,
 * cut up in place) as a controller that is not open: its directory, truncate
 * flag and undo list, every record validated as for a replay, and the owner's
 * pid in *@ret_pid (and its boot, from version 3 files, kept in the
 * controller for the replay).  Pure (the directory is checked to be tracefs only by the
 * replay), so that the fuzzer can reach it.
 * Returns: 0, -EBADMSG (malformed), -ENOMEM.
 */
int ftrace_tracefs_undo_parse(char *text, int *ret_pid, struct ftrace_tracefs **ret);

/**
 * ftrace_tracefs_undo_replay_dir - ftrace_tracefs_undo_file_replay() (not
 * forced) on every undo list file of @state_dir.
 * @ret_report (may be NULL): unless every file was replayed, a malloc'd
 * text, one line per file left alone and why (its owner still runs, it is
 * malformed, the restore failed); untouched when there is nothing to say.
 * Returns: the number replayed, or the first -errno (the other files are
 * still tried; a missing @state_dir holds none).
 */
int ftrace_tracefs_undo_replay_dir(const char *state_dir, char **ret_report);

/* -- shared use of one directory by several data sources (ftrace_tracefs_share.c) -- */

struct ftrace_tracefs_params {
	uint32_t buffer_size_kb;        /* per CPU, already defaulted and bounded */
	uint32_t drain_buffer_percent;  /* 0: leave buffer_percent alone */
	bool preserve;                  /* keep buffer, clock and size */
	bool mono_raw;
	/*
	 * Only plan the buffer_size_kb write (undo entry persisted): the
	 * caller runs it with ftrace_tracefs_resize_start(), off its loop.
	 */
	bool defer_resize;
	/*
	 * Ring-buffer sub-buffer size to set (buffer_subbuf_size_kb, Linux
	 * 6.8+), already chosen with ftrace_tracefs_subbuf_kb(); 0: leave the
	 * kernel's.  Only the first attach sets it, and never with @preserve.
	 */
	uint32_t subbuf_kb;
};

/* Sub-buffer sizes the kernel takes: 1 to 128 system pages, a power of two. */
#define FTRACE_SUBBUF_MIN_KB 4u
#define FTRACE_SUBBUF_MAX_KB 512u
/* A buffer keeps at least this many sub-buffers (see ftrace_tracefs_subbuf_kb()). */
#define FTRACE_SUBBUF_MIN_COUNT 32u

/**
 * ftrace_tracefs_subbuf_kb - the sub-buffer size a session on a per-CPU
 * buffer of @buffer_kb asks for when @want_kb is wanted: @want_kb rounded
 * down to a power of two within FTRACE_SUBBUF_MIN_KB..FTRACE_SUBBUF_MAX_KB,
 * and no more than @buffer_kb / FTRACE_SUBBUF_MIN_COUNT (a small buffer
 * keeps many small sub-buffers: the writer never waits on the reader's
 * page, and buffer_percent wake-ups stay fine-grained).  @buffer_kb 0:
 * not known, no such bound.
 * Returns: the size in KiB, 0 when @want_kb is 0 (leave the kernel's).
 */
uint32_t ftrace_tracefs_subbuf_kb(uint32_t want_kb, uint32_t buffer_kb);

/*
 * What the first attach did with the sub-buffer size, for the caller to say
 * once: FTRACE_SUBBUF_SET (changed, in the undo list), _KEPT (already that
 * size, or not asked), _ABSENT (no buffer_subbuf_size_kb: a kernel before
 * 6.8, whose sub-buffers are the system page), _REFUSED (the kernel refused
 * the write; ftrace_tracefs_subbuf_error() says why; the size is the
 * kernel's).
 */
enum ftrace_subbuf_outcome {
	FTRACE_SUBBUF_KEPT,
	FTRACE_SUBBUF_SET,
	FTRACE_SUBBUF_ABSENT,
	FTRACE_SUBBUF_REFUSED,
	_FTRACE_SUBBUF_OUTCOME_MAX,
	_FTRACE_SUBBUF_OUTCOME_INVALID = -EINVAL,
};
enum ftrace_subbuf_outcome ftrace_tracefs_subbuf_outcome(const struct ftrace_tracefs *t);
/* The kernel's refusal of the last sub-buffer write, or NULL. */
const char *ftrace_tracefs_subbuf_error(const struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_attach - a data source joins this directory.  The first
 * one configures it (current_tracer must be nop unless @p->preserve;
 * tracing_on=0; clear; trace_clock; buffer_size_kb), the others inherit
 * that setup.  Every change is remembered and persisted first.
 * Returns: 0, -EBUSY (another tracer is active), -errno.
 */
int ftrace_tracefs_attach(struct ftrace_tracefs *t, const struct ftrace_tracefs_params *p,
			  char **ret_error);

/* -- the buffer resize off the loop thread (ftrace_tracefs_resize.c) -- */

/*
 * With defer_resize, the first attach plans the buffer_size_kb write and
 * the buffer_subbuf_size_kb write (either or both): both rebuild every
 * CPU's buffer.  "Resize" below is the two together.
 */

/* A resize the first attach planned (defer_resize) and nobody started yet. */
bool ftrace_tracefs_resize_planned(const struct ftrace_tracefs *t);
/* A resize thread is running, or has finished and not been joined. */
bool ftrace_tracefs_resizing(const struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_resize_start - write the planned sizes on a
 * thread of its own.  The thread uses only the directory's fd; the caller
 * must not close it (ftrace_tracefs_detach() and _free() join first).
 * @ret_fd: an eventfd that becomes readable when the write has returned
 *   (owned by @t; closed by ftrace_tracefs_resize_finish()).
 * Returns: 1 (running; also when already running), 0 (nothing planned),
 * -errno.
 */
int ftrace_tracefs_resize_start(struct ftrace_tracefs *t, int *ret_fd);

struct ftrace_tracefs_resized {
	uint32_t buffer_kb;     /* buffer_size_kb asked for; 0: none */
	uint32_t subbuf_kb;     /* buffer_subbuf_size_kb asked for; 0: none */
	bool subbuf_refused;    /* ftrace_tracefs_subbuf_error() says why */
	uint64_t ns;            /* how long the kernel took for both */
};

/**
 * ftrace_tracefs_resize_finish - join the resize thread (blocks until the
 * writes returned; at once after the eventfd fired), or do planned writes
 * that were never started, here.  A failed resize leaves the kernel's size
 * as it was (the undo entry stays, and is harmless); a refused sub-buffer
 * size is not an error (the outcome becomes FTRACE_SUBBUF_REFUSED).
 * @ret: what was asked for, and how long it took.
 * Returns: 0 (also when there was nothing to do) or the buffer_size_kb
 * write's -errno.
 */
int ftrace_tracefs_resize_finish(struct ftrace_tracefs *t, struct ftrace_tracefs_resized *ret,
				 char **ret_error);

/**
 * ftrace_tracefs_detach - a data source leaves (after its events were
 * released).  The last one restores everything.
 * Returns: 0 or the first -errno of the restore.
 */
int ftrace_tracefs_detach(struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_enable_events - take a reference on each of @ev and enable
 * those not yet on.  @ret_ok[i] tells whether event i is on now (a failed
 * one holds no reference).  @ret_errors collects one line per failure.
 * Returns: number enabled ok, or -errno if the undo list could not be
 * persisted (nothing was enabled then).
 */
int ftrace_tracefs_enable_events(struct ftrace_tracefs *t, const struct ftrace_event_name *const *ev,
				 size_t n, bool *ret_ok, char **ret_errors);

/**
 * ftrace_tracefs_release_events - drop the references taken by
 * ftrace_tracefs_enable_events() for the events with @ok[i]; events no data
 * source needs any more and that we enabled are disabled again.
 */
void ftrace_tracefs_release_events(struct ftrace_tracefs *t, const struct ftrace_event_name *const *ev,
				   size_t n, const bool *ok);

/**
 * ftrace_tracefs_activate - a data source starts: tracing_on=1 for the first
 * one (and buffer_percent, when asked).  ftrace_tracefs_deactivate: the last
 * one to stop writes tracing_on=0.
 */
int ftrace_tracefs_activate(struct ftrace_tracefs *t, uint32_t drain_buffer_percent);
int ftrace_tracefs_deactivate(struct ftrace_tracefs *t);

unsigned ftrace_tracefs_n_attached(const struct ftrace_tracefs *t);
unsigned ftrace_tracefs_n_active(const struct ftrace_tracefs *t);

/* The trace_clock selected now: FtraceClock value (0 boot, 2 global, 3 local, 4 mono_raw, 1 other). */
int ftrace_tracefs_clock(const struct ftrace_tracefs *t);
/* buffer_size_kb as we last wrote it (0 if untouched), and as read back. */
uint32_t ftrace_tracefs_cached_buffer_kb(const struct ftrace_tracefs *t);
int ftrace_tracefs_read_buffer_kb(struct ftrace_tracefs *t, uint32_t *ret_kb);

/**
 * ftrace_tracefs_page_size - ring-buffer sub-buffer size in bytes
 * (buffer_subbuf_size_kb when present, else the system page size).
 */
int ftrace_tracefs_page_size(struct ftrace_tracefs *t, size_t *ret);

/* -- directory-wide features (ftrace_tracefs_features.c) -- */

/* Longest raw_syscalls filter the kernel takes (it refuses a page). */
#define FTRACE_SYSCALL_FILTER_TEXT_MAX 4095u

/**
 * ftrace_tracefs_syscall_filter - a data source records raw_syscalls with
 * @filter ("id == 0 || id == 3") on sys_enter and sys_exit, or with every
 * syscall (@filter NULL).  The directory's filter becomes the union of what
 * its data sources asked for (every syscall when too long).
 */
int ftrace_tracefs_syscall_filter(struct ftrace_tracefs *t, const char *filter, char **ret_error);

/* @tracer is listed in available_tracers. */
bool ftrace_tracefs_has_tracer(struct ftrace_tracefs *t, const char *tracer);

/**
 * ftrace_tracefs_function_graph - current_tracer=function_graph with the
 * '\n'-separated function names or globs @filters (set_ftrace_filter) and
 * @roots (set_graph_function) and @max_depth (0: unlimited).  The first
 * call saves and clears both filter files and the depth; later ones add to
 * the filters.  Entries the kernel refuses are listed in *@ret_refused.
 * @roots and a nonzero @max_depth need set_graph_function and
 * max_graph_depth in this directory (6.12's instances have the tracer but
 * neither file); without them nothing is changed.
 * Returns: 0, -EOPNOTSUPP (no function_graph tracer, no set_graph_function
 * for @roots or max_graph_depth for @max_depth, *@ret_error says which;
 * or filter files we could not restore), -EBUSY (another tracer is set),
 * -errno.
 */
int ftrace_tracefs_function_graph(struct ftrace_tracefs *t, const char *filters, const char *roots,
				  uint32_t max_depth, char **ret_refused, char **ret_error);

/**
 * ftrace_tracefs_kprobe_create - append @line (ftrace_kprobe_line()) to
 * kprobe_events for @group/@name, with an undo entry that removes it
 * (persisted first).  A probe that already exists and is not ours is used
 * and left in place.
 * Returns: 0, -EINVAL, -ENOENT (no kprobe_events: kernel without kprobes),
 * -errno from the kernel (EINVAL: no such function).
 */
int ftrace_tracefs_kprobe_create(struct ftrace_tracefs *t, const char *group, const char *name,
				 const char *line, char **ret_error);

/**
 * ftrace_tracefs_set_list - save list file @file, then replace its
 * contents with @value.
 */
int ftrace_tracefs_set_list(struct ftrace_tracefs *t, const char *file, const char *value, char **ret_error);

/* A data source with exclusive features (tids_to_trace, tracefs_options,
 * tracing_cpumask) holds the directory: no other may join it. */
bool ftrace_tracefs_exclusive(const struct ftrace_tracefs *t);
void ftrace_tracefs_set_exclusive(struct ftrace_tracefs *t, bool on);

/**
 * ftrace_tracefs_read_available - the events of this directory (its
 * events/<group>/<name>/ tree; instances have no available_events), with
 * the ftrace/ group flagged FTRACE_EVENT_ALWAYS_ON, as a sorted list.
 * With @reqs (FtraceConfig.ftrace_events), only what they can resolve to:
 * every event of a group they name, and the events named like a bare
 * "name" in any group; NULL: all of them.
 */
struct ftrace_event_list;
int ftrace_tracefs_read_available(struct ftrace_tracefs *t, const char *const *reqs, size_t n_reqs,
				  struct ftrace_event_list **ret);

/* ==== per-CPU stats (ftrace_stats.c) ==================================== */

enum {
	FTRACE_STAT_ENTRIES = 1u << 0,
	FTRACE_STAT_OVERRUN = 1u << 1,
	FTRACE_STAT_COMMIT_OVERRUN = 1u << 2,
	FTRACE_STAT_BYTES = 1u << 3,
	FTRACE_STAT_OLDEST_TS = 1u << 4,
	FTRACE_STAT_NOW_TS = 1u << 5,
	FTRACE_STAT_DROPPED = 1u << 6,
	FTRACE_STAT_READ = 1u << 7,
};

struct ftrace_cpu_stats {
	uint32_t cpu;
	uint32_t present;               /* FTRACE_STAT_* fields found */
	uint64_t entries;
	uint64_t overrun;
	uint64_t commit_overrun;
	uint64_t bytes;
	uint64_t dropped_events;
	uint64_t read_events;
	double oldest_event_ts;         /* seconds */
	double now_ts;
};

/**
 * ftrace_stats_parse - parse one per_cpu/cpuN/stats text.  Unknown lines
 * and missing fields are tolerated (present says what was found).
 * Returns: 0, -EBADMSG if nothing at all was recognised.
 */
int ftrace_stats_parse(const char *text, size_t len, struct ftrace_cpu_stats *ret);

/**
 * ftrace_stats_read - per_cpu/cpu@cpu/stats of @t.
 */
int ftrace_stats_read(struct ftrace_tracefs *t, unsigned cpu, struct ftrace_cpu_stats *ret);

/* Everything one FtraceStats message carries. */
struct ftrace_stats_msg {
	int phase;                      /* 1 START_OF_TRACE, 2 END_OF_TRACE */
	const struct ftrace_cpu_stats *cpu;
	size_t n_cpu;                   /* entries with present == 0 are skipped */
	/*
	 * Events read and not written, per CPU ([n_cpu]; NULL: 0 on every
	 * CPU), carried in FtraceCpuStats.bytes_read in place of the kernel's
	 * "bytes" (ftrace_stats.c says why).  The data source passes NULL in
	 * the START packet and its counts in the END one, so that
	 * trace_processor's ftrace_cpu_bytes_delta is the count.
	 */
	bool bytes_carry_skipped;
	const uint64_t *skipped;
	char *const *unknown_events;
	size_t n_unknown;
	char *const *failed_events;
	size_t n_failed;
	const char *atrace_errors;      /* NULL: not written */
	bool preserve_ftrace_buffer;
	uint64_t parse_errors;          /* bit n: FtraceParseStatus n seen */
	uint32_t cpu_buffer_size_pages; /* 0: not written */
	uint32_t cached_cpu_buffer_size_pages;
	uint32_t kernel_symbols_parsed; /* symbolize_ksyms: symbols in the map */
	uint32_t kernel_symbols_mem_kb;
	bool has_kprobe_stats;          /* the session has kprobes */
	int64_t kprobe_hits;
	int64_t kprobe_misses;
};

/**
 * ftrace_stats_encode - TracePacket.ftrace_stats (34) with @m, written on
 * @w (a TracePacket cursor).
 */
void ftrace_stats_encode(struct pbw *w, const struct ftrace_stats_msg *m);

