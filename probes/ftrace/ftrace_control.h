/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Internal to probes/ftrace: the control side of linux.ftrace (tracefs
 * writes with an undo list, config validation, per-CPU stats, per-CPU page
 * reading).  Not used outside this folder except by its tests.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pbw;
struct Perfetto__Protos__FtraceConfig;

/* Bounds on anything a config or the kernel can make us hold. */
#define FTRACE_NAME_MAX 127u            /* one group or event name */
#define FTRACE_INSTANCE_NAME_MAX 255u
#define FTRACE_MAX_CONFIG_EVENTS 4096u  /* ftrace_events entries in one config */
#define FTRACE_MAX_EVENTS 4096u         /* events one data source may enable */
#define FTRACE_MAX_REPORTED_NAME 256u   /* longest name echoed in stats/warnings */
#define FTRACE_MAX_CPUS 4096u
#define FTRACE_BUFFER_KB_MAX (1024u * 1024u)   /* 1 GiB per CPU */
#define FTRACE_DRAIN_MS_DEFAULT 100u
#define FTRACE_DRAIN_MS_MIN 1u
#define FTRACE_DRAIN_MS_MAX 60000u
#define FTRACE_BUFFER_KB_LOW_RAM 2048u
#define FTRACE_BUFFER_KB_HIGH_RAM 8192u
#define FTRACE_HIGH_RAM_BYTES (7ull << 30)

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

/* The last restore's first failure ("DIR/FILE: reason"), or NULL if it had none. */
const char *ftrace_tracefs_restore_error(const struct ftrace_tracefs *t);

size_t ftrace_tracefs_undo_count(const struct ftrace_tracefs *t);

/**
 * ftrace_tracefs_undo_file_replay - replay one persisted undo list file.
 * @force: replay even if the owning pid is alive.
 * Returns: 1 replayed and removed, 0 skipped (owner alive), -errno
 * (-EBADMSG for a malformed file).
 */
int ftrace_tracefs_undo_file_replay(const char *path, bool force);

/**
 * ftrace_tracefs_undo_parse - the text of an undo state file (NUL-terminated,
 * cut up in place) as a controller that is not open: its directory, truncate
 * flag and undo list, every record validated as for a replay, and the owner's
 * pid in *@ret_pid.  Pure (the directory is checked to be tracefs only by the
 * replay), so that the fuzzer can reach it.
 * Returns: 0, -EBADMSG (malformed), -ENOMEM.
 */
int ftrace_tracefs_undo_parse(char *text, int *ret_pid, struct ftrace_tracefs **ret);

/**
 * ftrace_tracefs_undo_replay_dir - ftrace_tracefs_undo_file_replay() (not
 * forced) on every undo list file of @state_dir.
 * Returns: the number replayed, or the first -errno (the other files are
 * still tried; a missing @state_dir holds none).
 */
int ftrace_tracefs_undo_replay_dir(const char *state_dir);

/* -- shared use of one directory by several data sources (ftrace_tracefs_share.c) -- */

struct ftrace_event_name {
	const char *group;
	const char *name;
	unsigned flags;                 /* FTRACE_EVENT_* */
};

/* Always on, no enable file (the ftrace/ group: print, bputs, ...). */
#define FTRACE_EVENT_ALWAYS_ON (1u << 0)

struct ftrace_tracefs_params {
	uint32_t buffer_size_kb;        /* per CPU, already defaulted and bounded */
	uint32_t drain_buffer_percent;  /* 0: leave buffer_percent alone */
	bool preserve;                  /* keep buffer, clock and size */
	bool mono_raw;
};

/**
 * ftrace_tracefs_attach - a data source joins this directory.  The first
 * one configures it (current_tracer must be nop unless @p->preserve;
 * tracing_on=0; clear; trace_clock; buffer_size_kb), the others inherit
 * that setup.  Every change is remembered and persisted first.
 * Returns: 0, -EBUSY (another tracer is active), -errno.
 */
int ftrace_tracefs_attach(struct ftrace_tracefs *t, const struct ftrace_tracefs_params *p,
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
 * Returns: 0, -EOPNOTSUPP (no function_graph tracer or set_graph_function;
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

/* ==== event names and config validation (ftrace_config.c) =============== */

/**
 * ftrace_name_valid - a group or event name: 1..FTRACE_NAME_MAX of
 * [A-Za-z0-9_].  Nothing else ever reaches a path.
 */
bool ftrace_name_valid(const char *s);

/**
 * ftrace_instance_name_valid - [A-Za-z0-9_.-], not "." or "..", at most
 * FTRACE_INSTANCE_NAME_MAX bytes.
 */
bool ftrace_instance_name_valid(const char *s);

struct ftrace_event_list;

int ftrace_event_list_new(struct ftrace_event_list **ret);
struct ftrace_event_list *ftrace_event_list_free(struct ftrace_event_list *l);
/**
 * ftrace_event_list_add - add one event; invalid names are skipped (returns
 * 0 without adding).  Call ftrace_event_list_sort() before lookups.
 */
int ftrace_event_list_add(struct ftrace_event_list *l, const char *group, const char *name,
			  unsigned flags);
/**
 * ftrace_event_list_parse - add every "group:name" line of @text
 * (available_events format); malformed lines are skipped.
 */
int ftrace_event_list_parse(struct ftrace_event_list *l, const char *text, size_t len);
void ftrace_event_list_sort(struct ftrace_event_list *l);
size_t ftrace_event_list_size(const struct ftrace_event_list *l);
const struct ftrace_event_name *ftrace_event_list_find(const struct ftrace_event_list *l,
						       const char *group, const char *name);

/* A validated FtraceConfig, with every default applied. */
struct ftrace_config {
	/* events to enable, deduplicated; pointers into the event list */
	const struct ftrace_event_name **events;
	size_t n_events;
	/* requested but absent or malformed (printable copies, bounded) */
	char **unknown;
	size_t n_unknown;
	char *warnings;                 /* one per line, or NULL */
	char *instance_name;            /* NULL: top level */
	uint32_t buffer_size_kb;
	uint32_t drain_period_ms;
	uint32_t drain_buffer_percent;
	bool compact_sched;
	bool disable_generic_events;
	bool denser_generic_events;
	bool preserve;
	bool mono_raw;
	bool has_sched_switch;

	/* options beyond ftrace_events (their events are in events[]) */
	bool atrace_userspace;          /* atrace asked for: Linux has none, say so */
	bool has_raw_syscalls;          /* raw_syscalls events are among events[] */
	char *syscall_filter;           /* for them, from syscall_events; NULL: every syscall */
	bool function_graph;            /* enable_function_graph */
	bool symbolize_ksyms;
	bool ksyms_retain;              /* ksyms_mem_policy KSYMS_RETAIN */
	bool exclusive;                 /* tids_to_trace, tracing_cpumask or tracefs_options */
	char *event_pids;               /* set_event_pid text, NULL: untouched */
	char *cpumask;                  /* tracing_cpumask, NULL: untouched */
	struct ftrace_config_option {
		char *name;             /* valid for options/<name> */
		bool on;
	} *options;
	size_t n_options;
};

/* tracefs_options entries one config may list. */
#define FTRACE_MAX_TRACEFS_OPTIONS 256u

/**
 * ftrace_config_instance_name - the validated instance_name of @cfg.
 * @ret: borrowed from @cfg, NULL for the top level.
 * Returns: 0 or -EINVAL with a reason.
 */
int ftrace_config_instance_name(const struct Perfetto__Protos__FtraceConfig *cfg, const char **ret,
				char **ret_error);

/**
 * ftrace_config_resolve - validate @cfg and resolve its event names against
 * @avail without touching the system (pure but for uname(2): the fuzz
 * target calls it).  Besides ftrace_events, the events the other options
 * imply (ftrace_atrace_implied(): atrace categories, syscall_events,
 * function graph) are resolved, syscall_events becomes the raw_syscalls
 * filter of this machine's table, and tids_to_trace, tracing_cpumask and
 * tracefs_options are checked.
 * @ram_bytes: physical memory, picks the default buffer size.
 * Unknown or malformed names go to unknown[], not to an error.
 * Returns: 0, -EINVAL with a reason for a config we reject (also: atrace
 * with instance_name, a bad cpumask, option name or tid), -ENOMEM.
 */
int ftrace_config_resolve(const struct Perfetto__Protos__FtraceConfig *cfg,
			  const struct ftrace_event_list *avail, uint64_t ram_bytes,
			  struct ftrace_config **ret, char **ret_error);
struct ftrace_config *ftrace_config_free(struct ftrace_config *c);

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

/* ==== per-CPU raw page reader (ftrace_cpu.c) ============================ */

struct ftrace_cpu;

enum ftrace_cpu_read_status {
	FTRACE_CPU_MORE,        /* stopped at max_pages: there may be more */
	FTRACE_CPU_EMPTY,       /* the kernel had nothing more (or caught up) */
};

/**
 * ftrace_cpu_open - non-blocking reader of per_cpu/cpu@cpu/trace_pipe_raw.
 * @page_size: ring-buffer page size (ftrace_tracefs_page_size()).
 * @commit_size: size of the page header's commit word (4 or 8).
 * Returns: 0, -ENOENT if the CPU has no per_cpu directory (not present),
 * -errno.
 */
int ftrace_cpu_open(struct ftrace_tracefs *t, unsigned cpu, size_t page_size, unsigned commit_size,
		    struct ftrace_cpu **ret);
struct ftrace_cpu *ftrace_cpu_free(struct ftrace_cpu *c);

/**
 * ftrace_cpu_fd - the trace_pipe_raw fd (still owned by @c), to poll for
 * the kernel's buffer_percent wake-up.
 */
int ftrace_cpu_fd(const struct ftrace_cpu *c);
unsigned ftrace_cpu_index(const struct ftrace_cpu *c);
/* Start of a read pass: the caught-up heuristic never stops on its first page. */
void ftrace_cpu_begin_pass(struct ftrace_cpu *c);
size_t ftrace_cpu_page_size(const struct ftrace_cpu *c);

/**
 * ftrace_cpu_read_page - the next whole page of this CPU, no allocation.
 * Read with read() into @buf (page_size bytes), or, when the buffer is
 * mapped, either in place in the mapping or copied into @buf as read()
 * would have returned it.
 * @ret_page: the page to parse (@buf or the mapping), valid until the next
 *   call on @c.
 * @ret_status: FTRACE_CPU_MORE, or FTRACE_CPU_EMPTY when nothing was read
 *   or the page read shows we caught up with the writer.
 * @ret_parse_status: set to a FtraceParseStatus (2 unexpected read error, 3
 *   partial page) when a read failed that way, untouched otherwise.
 * Returns: 1 with a page, 0 with none, or -errno for a read error.
 */
int ftrace_cpu_read_page(struct ftrace_cpu *c, void *buf, const uint8_t **ret_page,
			 enum ftrace_cpu_read_status *ret_status, int *ret_parse_status);

/* What a mapped reader saw: the meta page's counters as of the last swap,
 * and how the pages were handed over. */
struct ftrace_cpu_map_counters {
	uint64_t entries;       /* events in the buffer */
	uint64_t overrun;       /* events overwritten (lost) */
	uint64_t read;          /* events consumed */
	uint64_t lost_events;   /* lost at the last swap, not yet reported */
	uint64_t in_place;      /* pages parsed in the mapping */
	uint64_t copied;        /* pages copied (the writer's page, read() style) */
	uint64_t swaps;         /* reader sub-buffers swapped in */
	size_t mapped_bytes;    /* size of the mapping (kernel pages) */
};

/**
 * ftrace_cpu_mapped - whether @c reads through the ring buffer's mapping
 * (false: read()), and if so its counters in @ret (may be NULL).
 */
bool ftrace_cpu_mapped(const struct ftrace_cpu *c, struct ftrace_cpu_map_counters *ret);
