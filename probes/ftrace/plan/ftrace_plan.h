/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * ftrace plan room: a FtraceConfig becomes a plan (struct ftrace_plan,
 * ftrace_plan_resolve() at the end of this header), read once.  Its parts:
 * the event names resolved against the directory's event list, and the
 * options beyond ftrace_events (atrace categories, syscall_events,
 * kprobe_events, the function graph filters, tids_to_trace,
 * tracing_cpumask, tracefs_options), each turned into the exact text that
 * goes to a tracefs file, or refused with a reason.  Only ftrace_plan.c
 * reads the protobuf; the planners take plain requests.
 *
 * Pure: the config and facts read once from the kernel (available events,
 * available_filter_functions, uname) come in as data or through the
 * caller's callbacks (struct ftrace_plan_env), so the unit tests and
 * the fuzz targets run all of it without a kernel.  Writing the results,
 * and undoing them, is the data source's job (through its undo list).
 * Every name that comes out of here has passed a character-set check, so it
 * can go into a path or a tracefs command without quoting.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct Perfetto__Protos__FtraceConfig;
struct ftrace_print_rule;

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

/* Bounds on what a config can make us hold or write. */
#define FTRACE_FEATURE_NAME_MAX 127u        /* a category, function or option name */
#define FTRACE_MAX_REPORTED 32u             /* rejected names kept for stats/logs */
#define FTRACE_MAX_FUNCTION_FILTERS 1024u   /* function_filters / function_graph_roots each */
#define FTRACE_MAX_FUNCTION_GLOBS 64u       /* entries with '*' or '?' among those */
#define FTRACE_MAX_KPROBES 256u             /* kprobe_events entries */
#define FTRACE_MAX_TIDS 4096u               /* tids_to_trace entries */
#define FTRACE_CPUMASK_MAX 1024u            /* tracing_cpumask text (4096 CPUs) */
/* The kernel refuses an event filter of a page or more (event_filter_write). */
#define FTRACE_SYSCALL_FILTER_MAX 4095u

/* ==== shared helpers (ftrace_opts.c) ===================================== */

/**
 * ftrace_opts_printable - a malloc'd copy of @s for logs and stats: at most
 * FTRACE_FEATURE_NAME_MAX bytes, anything outside printable ASCII as '?'.
 * Returns: the copy, or NULL without memory.
 */
char *ftrace_opts_printable(const char *s);

/**
 * ftrace_opts_report - add a printable copy of @name to the list @v of @n
 * entries, unless it is there already or the list holds
 * FTRACE_MAX_REPORTED (the list is allocated at that size on first use).
 * Returns: 0, -ENOMEM.
 */
int ftrace_opts_report(char ***v, size_t *n, const char *name);

/**
 * ftrace_opts_strv_free - free @n strings of @v, then @v.  Accepts NULL.
 */
void ftrace_opts_strv_free(char **v, size_t n);

/* ==== atrace categories and the events other options imply (ftrace_atrace.c) */

/*
 * On Linux there is no userspace atrace; an atrace category still stands
 * for the kernel tracepoints listed in ftrace_atrace.inc, and asking for
 * atrace at all adds ftrace/print (where userspace annotations land).
 */

/* ftrace_atrace_implied() flags: facts about the running kernel. */
enum {
	/* synthetic/rss_stat_throttled can be made here (a hist trigger on
	 * kmem/rss_stat): "memory" and throttle_rss_stat use it. */
	FTRACE_ATRACE_RSS_THROTTLED_OK = 1u << 0,
	/* Not known yet: the rows that depend on it are all planned, flagged
	 * FTRACE_ATRACE_IF_THROTTLED or _UNLESS_THROTTLED, and
	 * replace_rss_stat means "if the kernel can".  Lets one plan serve both
	 * the names to read and their resolution (ftrace_plan_resolve()). */
	FTRACE_ATRACE_RSS_THROTTLED_EITHER = 1u << 1,
};

/* ftrace_atrace_event.flags */
enum {
	/* From an atrace category: enabled only when the kernel has it, and
	 * left out silently otherwise (traced_probes filters the category
	 * table by what is accessible).  Without it the event is required:
	 * a missing one is an unknown event, as a listed ftrace_event is. */
	FTRACE_ATRACE_OPTIONAL = 1u << 0,
	/* With FTRACE_ATRACE_RSS_THROTTLED_EITHER: only if the kernel has
	 * synthetic/rss_stat_throttled, or only if it has not. */
	FTRACE_ATRACE_IF_THROTTLED = 1u << 1,
	FTRACE_ATRACE_UNLESS_THROTTLED = 1u << 2,
};

/* Category table conditions (the 4th column of ftrace_atrace.inc). */
#define FTRACE_ATRACE_IF_RSS_THROTTLED 1
#define FTRACE_ATRACE_UNLESS_RSS_THROTTLED 2

struct ftrace_atrace_event {
	const char *group;              /* static storage */
	const char *name;
	unsigned flags;                 /* FTRACE_ATRACE_* */
};

struct ftrace_atrace_implied {
	/* sorted by group then name, unique; a required entry wins over an
	 * optional one for the same event */
	struct ftrace_atrace_event *events;
	size_t n_events;
	/* atrace_categories that are not in the table (printable copies, at
	 * most FTRACE_MAX_REPORTED): userspace-only categories such as "view" */
	char **unknown_categories;
	size_t n_unknown_categories;
	/* atrace_categories or atrace_apps is set: the userspace half was asked
	 * for, and Linux has no atrace; say so once */
	bool atrace_userspace;
	/* throttle_rss_stat on a kernel that can: every kmem/rss_stat of the
	 * session (listed or implied) is to be replaced with
	 * synthetic/rss_stat_throttled */
	bool replace_rss_stat;
};

/**
 * ftrace_atrace_category_known - @category is in Perfetto's category table.
 */
bool ftrace_atrace_category_known(const char *category);

/**
 * ftrace_atrace_implied - the events @cfg enables beyond ftrace_events, as
 * traced_probes v58.2 does on Linux: the kernel tracepoints of each
 * atrace_categories entry (unless atrace_userspace_only), ftrace/print when
 * any atrace is asked for, raw_syscalls/sys_enter+sys_exit for
 * syscall_events, ftrace/funcgraph_entry+exit for enable_function_graph.
 * atrace_categories_prefer_sdk changes nothing here (it only steers the
 * Android atrace binary).  Kprobes are planned by ftrace_kprobe_plan().
 * @flags: FTRACE_ATRACE_RSS_THROTTLED_OK if the kernel can.
 * Returns: 0, -ENOMEM.
 */
int ftrace_atrace_implied(const struct Perfetto__Protos__FtraceConfig *cfg, unsigned flags,
			  struct ftrace_atrace_implied **ret);

/* The options ftrace_atrace_implied_from() reads, out of a config. */
struct ftrace_atrace_request {
	const char *const *categories;  /* atrace_categories (NULL entries skipped) */
	size_t n_categories;
	bool apps;                      /* atrace_apps is not empty */
	bool userspace_only;            /* atrace_userspace_only */
	bool syscalls;                  /* syscall_events is not empty */
	bool function_graph;            /* enable_function_graph */
	bool throttle_rss_stat;
};

/* ftrace_atrace_implied() on the options already read out of the config
 * (ftrace_atrace.c; ftrace_atrace_implied() is its adapter, ftrace_plan.c). */
int ftrace_atrace_implied_from(const struct ftrace_atrace_request *req, unsigned flags,
			       struct ftrace_atrace_implied **ret);
struct ftrace_atrace_implied *ftrace_atrace_implied_free(struct ftrace_atrace_implied *a);

/* ==== syscall_events (ftrace_syscalls.c) ================================= */

enum ftrace_syscall_arch {
	FTRACE_SYSCALL_ARCH_X86_64,
	FTRACE_SYSCALL_ARCH_ARM64,
	FTRACE_SYSCALL_ARCH_ARM32,
	FTRACE_SYSCALL_ARCH_X86,
	_FTRACE_SYSCALL_ARCH_MAX,
	_FTRACE_SYSCALL_ARCH_INVALID = -EINVAL,
};

/**
 * ftrace_syscall_arch_from_machine - the table for a uname(2) machine
 * string: "x86_64", "aarch64", "armv7l"/"armv8l" (32-bit userspace),
 * "i686".
 * Returns: the arch, or _FTRACE_SYSCALL_ARCH_INVALID (-EINVAL).
 */
enum ftrace_syscall_arch ftrace_syscall_arch_from_machine(const char *machine);

/**
 * ftrace_syscall_arch_current - the table of the running kernel (uname).
 * Returns: the arch, or -EINVAL for one we have no table for.
 */
enum ftrace_syscall_arch ftrace_syscall_arch_current(void);

const char *ftrace_syscall_arch_to_string(enum ftrace_syscall_arch arch);

/**
 * ftrace_syscall_by_name - the number of syscall @name ("sys_read", the
 * form syscall_events uses) on @arch.
 * Returns: the number (>= 0), -ENOENT for an unknown name, -EINVAL for a
 * bad arch.
 */
int ftrace_syscall_by_name(enum ftrace_syscall_arch arch, const char *name);

/**
 * ftrace_syscall_name - the name of syscall number @nr on @arch, or NULL.
 */
const char *ftrace_syscall_name(enum ftrace_syscall_arch arch, unsigned nr);

/**
 * ftrace_syscall_count - how many named syscalls @arch has (0 for a bad arch).
 */
size_t ftrace_syscall_count(enum ftrace_syscall_arch arch);

struct ftrace_syscall_filter {
	/* For events/raw_syscalls/{sys_enter,sys_exit}/filter:
	 * "id == 0 || id == 3", ids ascending and unique, as traced_probes
	 * writes it; when that would not fit in FTRACE_SYSCALL_FILTER_MAX,
	 * runs of three or more ids become "(id >= a && id <= b)".  NULL when
	 * no name resolved: then nothing is to be recorded for
	 * syscall_events (traced_probes would record every syscall). */
	char *filter;
	size_t n_ids;
	char **unknown;                 /* printable copies, at most FTRACE_MAX_REPORTED */
	size_t n_unknown;               /* copies in unknown[] */
	size_t n_unknown_total;         /* every unknown name, counted */
};

/**
 * ftrace_syscall_filter_build - resolve @names on @arch and build the
 * kernel filter.
 * Returns: 0, -EINVAL for a bad arch, -E2BIG if even the compressed filter
 * is too long (cannot happen with the tables we carry), -ENOMEM.
 */
int ftrace_syscall_filter_build(enum ftrace_syscall_arch arch, const char *const *names, size_t n,
				struct ftrace_syscall_filter **ret);
struct ftrace_syscall_filter *ftrace_syscall_filter_free(struct ftrace_syscall_filter *f);

/* ==== available_filter_functions and function filters (ftrace_funcs.c) === */

struct ftrace_funcs;

/**
 * ftrace_funcs_parse - the set of function names in @text, the contents of
 * available_filter_functions ("name" or "name [module]" per line; names
 * may repeat).  Kept sorted, so membership is a binary search.
 * Returns: 0, -ENOMEM.
 */
int ftrace_funcs_parse(const char *text, size_t len, struct ftrace_funcs **ret);
struct ftrace_funcs *ftrace_funcs_free(struct ftrace_funcs *f);
size_t ftrace_funcs_count(const struct ftrace_funcs *f);
bool ftrace_funcs_contains(const struct ftrace_funcs *f, const char *name);

/**
 * ftrace_funcs_name_valid - a kernel function name: 1..FTRACE_FEATURE_NAME_MAX
 * of [A-Za-z0-9_.] ('.' for compiler clones such as "foo.isra.0").
 */
bool ftrace_funcs_name_valid(const char *s);

/**
 * ftrace_funcs_glob_valid - a set_ftrace_filter glob: a name where '*' and
 * '?' may also appear, at least one of them.  No '[', '!', ':' or spaces:
 * those are negations and commands (":traceoff", ":mod:") that act beyond
 * one session.
 */
bool ftrace_funcs_glob_valid(const char *s);

struct ftrace_funcs_filter {
	/* Accepted entries joined by '\n', ready to append to
	 * set_ftrace_filter or set_graph_function; NULL when none. */
	char *text;
	size_t n_accepted;
	char **rejected;                /* printable copies, at most FTRACE_MAX_REPORTED */
	size_t n_rejected;              /* copies in rejected[] */
	size_t n_rejected_total;        /* every rejected entry, counted */
	size_t n_dropped;               /* valid but over FTRACE_MAX_FUNCTION_FILTERS */
};

/**
 * ftrace_funcs_filter_build - validate @n entries of function_filters or
 * function_graph_roots.  A plain name must be in @avail (when @avail is
 * NULL, because the file could not be read, only its characters are
 * checked); a glob is checked for its characters only (the kernel matches
 * it) and at most FTRACE_MAX_FUNCTION_GLOBS are taken.  Duplicates are
 * dropped.  Past FTRACE_MAX_FUNCTION_FILTERS accepted entries the rest are
 * counted in n_dropped: a huge list costs one pass, never a stall in the
 * kernel.
 * Returns: 0, -ENOMEM.
 */
int ftrace_funcs_filter_build(const struct ftrace_funcs *avail, const char *const *entries, size_t n,
			      struct ftrace_funcs_filter **ret);
struct ftrace_funcs_filter *ftrace_funcs_filter_free(struct ftrace_funcs_filter *f);

/* ==== kprobe_events (ftrace_kprobe.c) ==================================== */

/* The groups and kretprobe maxactive traced_probes v58.2 uses. */
#define FTRACE_KPROBE_GROUP "perfetto_kprobes"
#define FTRACE_KRETPROBE_GROUP "perfetto_kretprobes"
#define FTRACE_KRETPROBE_MAXACTIVE 1024u

/* KprobeEvent.KprobeType values in the trace (perfetto.protos.KprobeEvent). */
enum {
	FTRACE_KPROBE_TRACE_BEGIN = 1,
	FTRACE_KPROBE_TRACE_END = 2,
	FTRACE_KPROBE_TRACE_INSTANT = 3,
};

struct ftrace_kprobe {
	char *name;                     /* the function, also the event name */
	bool retprobe;                  /* in FTRACE_KRETPROBE_GROUP */
	int trace_type;                 /* FTRACE_KPROBE_TRACE_* for its events */
};

struct ftrace_kprobe_plan {
	struct ftrace_kprobe *probes;   /* unique by (group, name) */
	size_t n_probes;
	/* "group/name" of refused entries (printable, at most
	 * FTRACE_MAX_REPORTED), for FtraceStats.failed_ftrace_events */
	char **rejected;
	size_t n_rejected;
	size_t n_rejected_total;        /* every refused entry, counted */
};

/**
 * ftrace_kprobe_name_valid - an event name traced_probes accepts:
 * 1..FTRACE_FEATURE_NAME_MAX of [A-Za-z0-9_].
 */
bool ftrace_kprobe_name_valid(const char *s);

/* One kprobe_events entry: KPROBE sets kprobe, KRETPROBE kretprobe, BOTH
 * both, UNKNOWN neither. */
struct ftrace_kprobe_request {
	const char *probe;              /* may be NULL (refused) */
	bool kprobe, kretprobe;
};

/**
 * ftrace_kprobe_plan_from - the probes @n @reqs ask for: a kprobe alone is
 * an instant kprobe, a kretprobe alone an instant kretprobe, both a kprobe
 * that begins and a kretprobe that ends a slice; neither is skipped.  A
 * name must be valid and, when @avail is given, a function of it; others
 * go to rejected.  At most FTRACE_MAX_KPROBES entries are read.
 * Returns: 0, -ENOMEM.
 */
int ftrace_kprobe_plan_from(const struct ftrace_kprobe_request *reqs, size_t n, const struct ftrace_funcs *avail,
			    struct ftrace_kprobe_plan **ret);

/* ftrace_kprobe_plan_from() of @cfg's kprobe_events (ftrace_plan.c). */
int ftrace_kprobe_plan_build(const struct Perfetto__Protos__FtraceConfig *cfg,
			     const struct ftrace_funcs *avail, struct ftrace_kprobe_plan **ret);
struct ftrace_kprobe_plan *ftrace_kprobe_plan_free(struct ftrace_kprobe_plan *p);

/**
 * ftrace_kprobe_line - the kprobe_events line that creates @p:
 * "p:perfetto_kprobes/NAME NAME" or "r1024:perfetto_kretprobes/NAME NAME".
 * Returns: the length written to @buf (NUL-terminated), -ENOBUFS.
 */
int ftrace_kprobe_line(const struct ftrace_kprobe *p, char *buf, size_t size);

/**
 * ftrace_kprobe_remove_line - the line that removes @p: "-:GROUP/NAME".
 * Returns: the length written to @buf, -ENOBUFS.
 */
int ftrace_kprobe_remove_line(const struct ftrace_kprobe *p, char *buf, size_t size);

/* ==== tids_to_trace, tracing_cpumask, tracefs_options (ftrace_opts.c) ==== */

/**
 * ftrace_opts_tids - the set_event_pid text for @n tids: decimal, separated
 * by ' ', in the given order, as traced_probes writes it.
 * Returns: 0 with a malloc'd string, -EINVAL for none or a tid of 0, -E2BIG
 * above FTRACE_MAX_TIDS, -ENOMEM.
 */
int ftrace_opts_tids(const uint32_t *tids, size_t n, char **ret);

/**
 * ftrace_opts_cpumask_valid - a tracing_cpumask value: hex digits in
 * comma-separated groups (as the kernel prints it, e.g. "3" or
 * "ff,ffffffff"), at most FTRACE_CPUMASK_MAX bytes.
 */
bool ftrace_opts_cpumask_valid(const char *s);

/**
 * ftrace_opts_option_name_valid - a tracefs option (a file under options/):
 * 1..FTRACE_FEATURE_NAME_MAX of [A-Za-z0-9_-], as traced_probes checks.
 */
bool ftrace_opts_option_name_valid(const char *s);

/* ==== event names and config validation (ftrace_plan.c) ================= */

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

/* ==== event lists (ftrace_event_list.c) =================================== */

struct ftrace_event_name {
	const char *group;
	const char *name;
	unsigned flags;                 /* FTRACE_EVENT_* */
};

/* Always on, no enable file (the ftrace/ group: print, bputs, ...). */
#define FTRACE_EVENT_ALWAYS_ON (1u << 0)

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
/* The @i-th event (in sorted order after ftrace_event_list_sort()), NULL past the end. */
const struct ftrace_event_name *ftrace_event_list_at(const struct ftrace_event_list *l, size_t i);
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

/* ==== the plan: one FtraceConfig resolved once (ftrace_plan.c) =========== */

/*
 * What resolving needs from the system, asked for only as the config
 * needs it; the data source answers from its tracefs directory.
 */
struct ftrace_plan_env {
	/*
	 * Join the directory of @instance_name (NULL: the top level) and read
	 * the events @n_reqs @reqs can resolve to (ftrace_tracefs_read_available()).
	 * @exclusive: the config sets tids_to_trace, tracing_cpumask or
	 * tracefs_options, so it needs the directory to itself.
	 * Returns: 0 or -errno with a reason in *@ret_error.
	 */
	int (*read_events)(void *userdata, const char *instance_name, bool exclusive, const char *const *reqs,
			   size_t n_reqs, struct ftrace_event_list **ret, char **ret_error);
	/*
	 * available_filter_functions (malloc'd, NUL-terminated), asked for only
	 * when kprobe_events or function graph filters need it.
	 * Returns: 0 or -errno (-ENOMEM fails the resolve; any other is a
	 * warning, and names are then checked for their characters only).
	 */
	int (*read_functions)(void *userdata, char **ret_text);
	void *userdata;
	uint64_t ram_bytes;             /* picks the default buffer size */
};

/* Everything the setup does, decided: nothing after it reads the config. */
struct ftrace_plan {
	struct ftrace_event_list *avail;        /* config->events point into it */
	struct ftrace_config *config;           /* events, buffer, exclusive options */
	struct ftrace_print_rule *print_rules;  /* print_filter, strings owned */
	size_t n_print_rules;
	struct ftrace_kprobe_plan *kprobes;     /* kprobe_events */
	/* function_filters and function_graph_roots: NULL unless function_graph */
	struct ftrace_funcs_filter *function_filters, *graph_roots;
	uint32_t graph_max_depth;
	/* refused kprobes and filter entries, "what (why)", for
	 * failed_ftrace_events; the same as log lines (and others) in warnings */
	char **failed;
	size_t n_failed;
	char *warnings;
};

/**
 * ftrace_plan_check - the limits of @cfg's own fields, checked before any
 * system access (`record` refuses such a config before it starts): at most
 * FTRACE_MAX_CONFIG_EVENTS ftrace_events, each at most a group and an event
 * name of FTRACE_NAME_MAX bytes and the slash, an instance_name of at most
 * FTRACE_INSTANCE_NAME_MAX bytes.  ftrace_plan_resolve() refuses the same
 * configs (names that long are never valid) with its own reasons, once the
 * session has started; this says so before it.
 * Returns: 0, or -E2BIG with the limit named in @err.
 */
int ftrace_plan_check(const struct Perfetto__Protos__FtraceConfig *cfg, char *err, size_t err_len);

/**
 * ftrace_plan_resolve - read @cfg once into a plan: the instance name is
 * checked, its directory joined and its events read through @env, the
 * config validated and resolved (ftrace_config_resolve()), the print
 * filter rules copied, and the kprobes and function filters planned
 * against available_filter_functions.
 * Returns: 0, -EINVAL with a reason for a config we reject, the errors of
 * @env->read_events, -ENOMEM.
 */
int ftrace_plan_resolve(const struct Perfetto__Protos__FtraceConfig *cfg, const struct ftrace_plan_env *env,
			struct ftrace_plan **ret, char **ret_error);
struct ftrace_plan *ftrace_plan_free(struct ftrace_plan *p);
