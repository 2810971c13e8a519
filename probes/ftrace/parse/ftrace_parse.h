/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * ftrace data path: kernel ring-buffer pages -> records -> FtraceEventBundle
 * TracePackets, encoded the way Perfetto v58.2's traced_probes encodes them.
 *
 * Three objects, three lifetimes:
 *
 *   struct ftrace_format_table  one per tracefs instance.  Holds the page
 *                               header layout and the formats of the events
 *                               any session uses (parsed once with
 *                               libtraceevent), their typed/generic
 *                               translations and the dynamic field ids of
 *                               generic events (stable for the table's life,
 *                               as in Perfetto).
 *   struct ftrace_parser        one per data-source session.  Which event ids
 *                               it wants, encoding options, and scratch
 *                               buffers (compact_sched columns) allocated up
 *                               front.
 *   struct ftrace_cpu_state     one per (session, cpu), owned by the caller,
 *                               carried across drain passes.
 *
 * plus struct ftrace_pidset, the per-session, per-pass metadata (pids seen,
 * renamed pids, kernel symbol addresses) that the /proc scraper joins on.
 *
 * Setup (table/parser creation, load_event, enable) allocates and reads
 * files; ftrace_parser_parse_pages() does neither: no malloc, no syscall, no
 * string lookup per event.  Nothing here is thread-safe: one caller at a
 * time per table and per parser.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pbw;
struct pbw_sink;
struct ftrace_pidset;

/* FtraceParseStatus (protos/perfetto/trace/ftrace/ftrace_stats.proto). */
enum ftrace_parse_status {
	FTRACE_STATUS_UNSPECIFIED = 0,
	FTRACE_STATUS_OK = 1,
	FTRACE_STATUS_UNEXPECTED_READ_ERROR = 2,
	FTRACE_STATUS_PARTIAL_PAGE_READ = 3,
	FTRACE_STATUS_ABI_INVALID_PAGE_HEADER = 4,
	FTRACE_STATUS_ABI_SHORT_EVENT_HEADER = 5,
	FTRACE_STATUS_ABI_NULL_PADDING = 6,
	FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH = 7,
	FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH = 8,
	FTRACE_STATUS_ABI_SHORT_TIME_EXTEND = 9,
	FTRACE_STATUS_ABI_SHORT_TIME_STAMP = 10,
	FTRACE_STATUS_ABI_SHORT_DATA_LENGTH = 11,
	FTRACE_STATUS_ABI_ZERO_DATA_LENGTH = 12,
	FTRACE_STATUS_ABI_INVALID_DATA_LENGTH = 13,
	FTRACE_STATUS_ABI_SHORT_EVENT_ID = 14,
	FTRACE_STATUS_ABI_END_OVERFLOW = 15,
	FTRACE_STATUS_SHORT_COMPACT_EVENT = 16,
	FTRACE_STATUS_INVALID_EVENT = 17,
	_FTRACE_STATUS_MAX,
	_FTRACE_STATUS_INVALID = -22, /* -EINVAL */
};

/**
 * ftrace_parse_status_to_string - the proto enum name ("FTRACE_STATUS_...").
 * Returns: a static string, or NULL for values outside the enum.
 */
const char *ftrace_parse_status_to_string(enum ftrace_parse_status s);

/* FtraceClock (ftrace_event_bundle.proto). 0 = boot: no clock fields. */
enum ftrace_clock {
	FTRACE_CLOCK_UNSPECIFIED = 0,
	FTRACE_CLOCK_UNKNOWN = 1,
	FTRACE_CLOCK_GLOBAL = 2,
	FTRACE_CLOCK_LOCAL = 3,
	FTRACE_CLOCK_MONO_RAW = 4,
};

/* ---- page header ------------------------------------------------------ */

/* Commit word bits (kernel ring_buffer.c). */
#define FTRACE_PAGE_COMMIT_MASK ((1u << 27) - 1)
#define FTRACE_PAGE_MISSED_STORED (1u << 30)
#define FTRACE_PAGE_MISSED_EVENTS (1u << 31)

struct ftrace_page_header {
	uint64_t timestamp;
	uint32_t data_size;     /* commit bits 0-26: payload bytes after the header */
	uint32_t header_size;   /* 8 + commit field size (16 on 64-bit kernels) */
	bool missed_events;     /* commit bit 31 */
	bool missed_stored;     /* bit 30 and the count fits after the data */
	uint64_t missed_count;  /* valid when missed_stored */
};

/**
 * ftrace_page_parse_header - decode and bounds-check the header of one page
 * of @page_size bytes whose commit field is @commit_size (4 or 8) bytes.
 * Returns: 0, or -EBADMSG if the header is short, the data size is 0 or the
 * data would run past the page (FTRACE_STATUS_ABI_INVALID_PAGE_HEADER).
 * @ret is filled as far as it could be decoded either way.
 */
int ftrace_page_parse_header(const uint8_t *page, size_t page_size, unsigned commit_size,
			     struct ftrace_page_header *ret);

/* ---- format table (per tracefs instance) ------------------------------ */

struct ftrace_format_table;

/**
 * ftrace_format_table_new - a table for the tracefs instance at
 * @tracefs_dir (e.g. "/sys/kernel/tracing" or ".../instances/foo").  Reads
 * events/header_page now; event formats are read on demand by
 * ftrace_format_table_load_event() (kallsyms is never parsed).
 * Returns: 0, -ENOENT if header_page is missing, -EBADMSG if it does not
 * parse, -ENOMEM.
 */
int ftrace_format_table_new(const char *tracefs_dir, struct ftrace_format_table **ret);

/**
 * ftrace_format_table_new_from_text - a table with no directory behind it,
 * for fixtures and fuzzing: @header_page is the text of events/header_page;
 * formats are added with ftrace_format_table_add_format().
 */
int ftrace_format_table_new_from_text(const char *header_page, struct ftrace_format_table **ret);

/**
 * ftrace_format_table_free - frees the table.  Parsers created on it must be
 * freed first.  Accepts NULL; returns NULL.
 */
struct ftrace_format_table *ftrace_format_table_free(struct ftrace_format_table *t);

/**
 * ftrace_format_table_load_event - read and parse
 * events/@group/@name/format (once; later calls return the cached id).
 * Returns: 0 and the kernel event id in @ret_event_id, -ENOENT if the event
 * does not exist, -EBADMSG if its format does not parse, -ENOMEM.
 */
int ftrace_format_table_load_event(struct ftrace_format_table *t, const char *group,
				   const char *name, int *ret_event_id);

/**
 * ftrace_format_table_add_format - like load_event, with the format text
 * given (fixtures; also how a table without a directory learns events).
 */
int ftrace_format_table_add_format(struct ftrace_format_table *t, const char *group,
				   const char *name, const char *format_text, int *ret_event_id);

/**
 * ftrace_format_table_set_printk_text - the printk_formats map from @text
 * (that file's layout: `0xADDR : "string"` per line) rather than from
 * tracefs: how a table without a directory resolves `const char *` fields
 * (bprint's fmt, bputs' str).  Replaces any map loaded before.
 * Returns: 0 or -ENOMEM.
 */
int ftrace_format_table_set_printk_text(struct ftrace_format_table *t, const char *text);

/**
 * ftrace_format_table_commit_size - size of the page header's commit field
 * (8 on 64-bit kernels, 4 on 32-bit ones).
 */
unsigned ftrace_format_table_commit_size(const struct ftrace_format_table *t);

/**
 * ftrace_translate_is_typed - whether Perfetto v58.2 has a
 * compiled-in message for @group/@name (else it is a generic event).
 */
bool ftrace_translate_is_typed(const char *group, const char *name);

/* ---- parser (per data-source session) --------------------------------- */

struct ftrace_parser_opts {
	/* FtraceConfig.compact_sched.enabled (default true); used only when
	 * sched/sched_switch is enabled and the kernel formats fit. */
	bool compact_sched;
	/* FtraceConfig.denser_generic_event_encoding (default true): generic
	 * events at dynamic field ids >= 65536 with descriptors; false:
	 * GenericFtraceEvent (field 327). */
	bool generic_dense;
	/* FtraceConfig.disable_generic_events: enabling an event with no
	 * typed message fails with -EOPNOTSUPP. */
	bool disable_generic_events;
};

#define FTRACE_PARSER_OPTS_DEFAULT                                               \
	((struct ftrace_parser_opts){ .compact_sched = true, .generic_dense = true, \
				      .disable_generic_events = false })

struct ftrace_parser;

/**
 * ftrace_parser_new - a parser for one session on table @t (which must
 * outlive it) with options @o (NULL: FTRACE_PARSER_OPTS_DEFAULT).
 * Allocates the compact_sched columns now.
 * Returns: 0 or -ENOMEM.
 */
int ftrace_parser_new(struct ftrace_format_table *t, const struct ftrace_parser_opts *o,
		      struct ftrace_parser **ret);

struct ftrace_parser *ftrace_parser_free(struct ftrace_parser *p);

/**
 * ftrace_parser_enable - let records with @event_id (from
 * ftrace_format_table_load_event()) into this session's bundles.  Builds the
 * translation once: typed if Perfetto has a message for the event (kernel
 * fields mapped to proto fields of the same name; fields the kernel lacks
 * are skipped), otherwise generic (a dynamic field id from 65536, assigned
 * per table in first-enable order, or the legacy GenericFtraceEvent).
 * Enabling sched/sched_switch with compact_sched also resolves
 * sched/sched_waking's format to decide whether compact mode applies.
 * Records of events not enabled here (another session's) are skipped.
 * Returns: 0, -ENOENT if the id was never loaded, -EOPNOTSUPP for a generic
 * event when generic events are disabled, -ENOMEM.
 */
int ftrace_parser_enable(struct ftrace_parser *p, int event_id);

/**
 * ftrace_parser_enable_kprobe - ftrace_parser_enable() for an event of the
 * perfetto_kprobes or perfetto_kretprobes group: its records become
 * FtraceEvent.kprobe_event {name, type = @trace_type} (KprobeEvent.KprobeType:
 * 1 begin, 2 end, 3 instant), as traced_probes writes them.
 * Returns: 0, -EINVAL for an event outside those groups or a bad type,
 * -ENOENT if the id was never loaded, -ENOMEM.
 */
int ftrace_parser_enable_kprobe(struct ftrace_parser *p, int event_id, int trace_type);

/*
 * Called once per bundle, after its FtraceEventBundle is closed and before
 * its TracePacket is finished, with the packet cursor and the pass's
 * pidset: where the data source adds TracePacket fields that depend on what
 * the bundle referenced (interned kernel symbols).  No allocation allowed:
 * it runs on the drain path.
 */
typedef void (*ftrace_parser_bundle_hook)(void *ctx, struct pbw *packet, struct ftrace_pidset *pids);

/**
 * ftrace_parser_set_bundle_hook - call @fn(@ctx, ...) for every bundle this
 * parser writes from now on (NULL: none).
 */
void ftrace_parser_set_bundle_hook(struct ftrace_parser *p, ftrace_parser_bundle_hook fn, void *ctx);

/**
 * ftrace_parser_compact_sched_active - whether sched_switch (and
 * sched_waking) records currently go to the compact_sched columns.
 */
bool ftrace_parser_compact_sched_active(const struct ftrace_parser *p);

/**
 * ftrace_parser_has_kernel_addresses - whether any event enabled so far has
 * a field that carries a kernel address (encoded as an interned index for
 * symbolize_ksyms): workqueue functions, blocked_reason callers, funcgraph.
 */
bool ftrace_parser_has_kernel_addresses(const struct ftrace_parser *p);

/* ---- kernel symbol names (ftrace_symbolize.c) ------------------------- */

struct ksyms;

/*
 * The names behind the kernel addresses a bundle referenced, written into
 * the same packet as interned kernel_symbols (the bundle hook below).
 * Zero-initialise, then set @k (and @addr_delta for another boot's data).
 */
struct ftrace_symbolizer {
	const struct ksyms *k;          /* NULL: nothing to name */
	/*
	 * Added to every address before the lookup: 0 for this boot's events;
	 * for the previous boot's (a boot-mapped instance), this boot's kernel
	 * text address minus that boot's, so that the old addresses land on
	 * this boot's /proc/kallsyms.
	 */
	int64_t addr_delta;
	/*
	 * With text_hi != 0, only addresses that land in [text_lo, text_hi)
	 * (after the delta) are named: the delta moves the core kernel's
	 * text, not modules, which each boot loads where it likes.
	 */
	uint64_t text_lo, text_hi;
	uint32_t watermark;             /* indices up to here were named in this pass */
	uint64_t names;                 /* kernel_symbols entries written */
};

/* An ftrace_parser_bundle_hook: @ctx is a struct ftrace_symbolizer. */
void ftrace_symbolize_bundle(void *ctx, struct pbw *packet, struct ftrace_pidset *pids);

/* The pass's address set is about to be cleared: indices restart at 1. */
void ftrace_symbolize_pass_end(struct ftrace_symbolizer *s);

/* ---- print filter (FtraceConfig.print_filter) ------------------------- */

struct ftrace_print_filter;

/* Rules one filter may hold. */
#define FTRACE_PRINT_FILTER_MAX_RULES 1024u

enum ftrace_print_match {
	FTRACE_PRINT_MATCH_NONE,        /* nothing to match: never matches, left out */
	FTRACE_PRINT_MATCH_PREFIX,      /* the message starts with prefix */
	FTRACE_PRINT_MATCH_ATRACE,      /* "<type>|<pid>|<rest>", rest starting with prefix */
};

/* One rule, as the plan has it (the strings are copied by the filter). */
struct ftrace_print_rule {
	enum ftrace_print_match match;
	const char *type;               /* FTRACE_PRINT_MATCH_ATRACE */
	const char *prefix;
	bool allow;
};

/**
 * ftrace_print_filter_new - compile @n @rules, tried in order.  No rules
 * gives *@ret = NULL (everything kept).
 * Returns: 0, -E2BIG (more than FTRACE_PRINT_FILTER_MAX_RULES), -EINVAL (a
 * string too long), -ENOMEM.
 */
int ftrace_print_filter_new(const struct ftrace_print_rule *rules, size_t n, struct ftrace_print_filter **ret);
struct ftrace_print_filter *ftrace_print_filter_free(struct ftrace_print_filter *f);

/**
 * ftrace_print_filter_allows - should the print event whose buf field holds
 * @buf (at most @len bytes, cut at the first NUL) be kept?  The first rule
 * that matches decides; none matching means yes.
 */
bool ftrace_print_filter_allows(const struct ftrace_print_filter *f, const char *buf, size_t len);

/**
 * ftrace_parser_set_print_filter - drop the ftrace/print events @f refuses
 * (counted in ftrace_pass_stats.filtered_events).  @f is borrowed and must
 * outlive the parser; NULL keeps every print event.
 */
void ftrace_parser_set_print_filter(struct ftrace_parser *p, const struct ftrace_print_filter *f);

/**
 * ftrace_parser_set_clock - clock fields for the bundles written from now
 * on: with @clock != FTRACE_CLOCK_UNSPECIFIED (trace_clock is not "boot")
 * every bundle carries ftrace_clock, ftrace_timestamp=@ftrace_ts and
 * boot_timestamp=@boot_ts (a snapshot the caller takes once per pass).
 */
void ftrace_parser_set_clock(struct ftrace_parser *p, enum ftrace_clock clock, int64_t ftrace_ts,
			     int64_t boot_ts);

/* Per (session, cpu) state that survives between passes.  Zero-initialise. */
struct ftrace_cpu_state {
	/* Timestamp of the last event this session wrote for this CPU; the
	 * next bundle's previous_bundle_end_timestamp (0 before the first). */
	uint64_t last_event_ts;
};

/* Counters for one ftrace_parser_parse_pages() call; added to, never reset. */
struct ftrace_pass_stats {
	uint64_t pages;             /* pages looked at */
	uint64_t bytes;             /* payload bytes of valid pages */
	uint64_t records;           /* data records walked (any session's) */
	uint64_t events;            /* events written (typed+generic+compact) */
	uint64_t generic_events;    /* of which generic */
	uint64_t compact_switch;    /* of which compact sched_switch */
	uint64_t compact_waking;    /* of which compact sched_waking */
	uint64_t packets;           /* bundles (TracePackets) finished */
	uint64_t packets_dropped;   /* of which the writer dropped (-ENOSPC) */
	uint64_t lost_pages;        /* pages with the missed-events flag */
	uint64_t lost_events;       /* sum of the missed counts the kernel stored */
	bool lost_unknown;          /* a flagged page had no stored count */
	uint64_t parse_errors;      /* FtraceErrors written */
	uint32_t parse_errors_mask; /* 1u << enum ftrace_parse_status, per error seen */
	uint64_t filtered_events;   /* print events the print_filter refused */
	/*
	 * Records of events this session did not enable: the kernel always
	 * records trace_marker writes (ftrace/print), and a shared buffer holds
	 * the events of every session and tracer on it.  A reader consumes them
	 * all, so the kernel's read_events counts them: events + filtered_events
	 * + skipped_events is what this session took out of the buffer.
	 */
	uint64_t skipped_events;
};

struct ftrace_pidset;

/**
 * ftrace_parser_parse_pages - parse @n_pages consecutive pages of
 * @page_size bytes each (as read from per_cpu/cpu@cpu/trace_pipe_raw) and
 * write this session's events as FtraceEventBundle packets through @sink
 * (protos/pbw.h: an SMB trace writer's, a file's, a test's plain buffer).
 * Usually one bundle; a new one starts at a page flagged with missed events
 * (that bundle has lost_events=true), when the compact comm table passed 64
 * entries at a page boundary, or when the compact columns are full.  A call
 * with nothing for this session (no event, no error, no loss) writes no
 * packet.  Layout errors become FtraceErrors in the bundle (the rest of
 * that page is skipped).  @st is read and updated; pids and symbol
 * addresses go to @pids (may be NULL: symbol fields are then written as 0);
 * @stats is added to (may be NULL).
 * Returns: the number of packets written (>= 0) or -EINVAL.
 */
int ftrace_parser_parse_pages(struct ftrace_parser *p, uint32_t cpu, const uint8_t *pages,
			      size_t n_pages, size_t page_size, const struct pbw_sink *sink,
			      struct ftrace_cpu_state *st, struct ftrace_pidset *pids,
			      struct ftrace_pass_stats *stats);

/**
 * ftrace_parser_batch_begin - ftrace_parser_parse_pages() one page at a
 * time: begin, then ftrace_parser_batch_page() for each page as it is read
 * (the page need not outlive the call), then ftrace_parser_batch_end().
 * The packets are exactly those of one ftrace_parser_parse_pages() call
 * over the same pages, written through @sink (copied; the data source's
 * packet sink).  One batch per parser at a time.
 * Returns: 0, or -EINVAL (bad arguments, or a batch already open).
 */
int ftrace_parser_batch_begin(struct ftrace_parser *p, uint32_t cpu, size_t page_size,
			      const struct pbw_sink *sink, struct ftrace_cpu_state *st,
			      struct ftrace_pidset *pids, struct ftrace_pass_stats *stats);

/** ftrace_parser_batch_page - parse one page of @page_size bytes into the open batch. */
void ftrace_parser_batch_page(struct ftrace_parser *p, const uint8_t *page);

/**
 * ftrace_parser_batch_end - finish the batch (the last bundle is written).
 * Returns: the number of packets of the batch (>= 0) or -EINVAL.
 */
int ftrace_parser_batch_end(struct ftrace_parser *p);

/* ---- per-pass metadata for the /proc join ------------------------------ */

/**
 * ftrace_pidset_new - a set of at most @capacity pids (and as many renamed
 * pids and kernel symbol addresses), allocated now.  Adds beyond capacity
 * are dropped and flagged.
 */
int ftrace_pidset_new(size_t capacity, struct ftrace_pidset **ret);
struct ftrace_pidset *ftrace_pidset_free(struct ftrace_pidset *s);

/**
 * ftrace_pidset_clear - forget everything (call after each pass's /proc
 * join).  O(entries), not O(capacity).
 */
void ftrace_pidset_clear(struct ftrace_pidset *s);

/**
 * ftrace_pidset_add - add @pid.  Returns: true if it was not there before.
 */
bool ftrace_pidset_add(struct ftrace_pidset *s, int32_t pid);

/**
 * ftrace_pidset_add_renamed - note that @pid was renamed (task_rename).
 */
bool ftrace_pidset_add_renamed(struct ftrace_pidset *s, int32_t pid);

bool ftrace_pidset_contains(const struct ftrace_pidset *s, int32_t pid);

/**
 * ftrace_pidset_pids - the pids in insertion order.  Returns: the count.
 */
size_t ftrace_pidset_pids(const struct ftrace_pidset *s, const int32_t **ret);
size_t ftrace_pidset_renamed(const struct ftrace_pidset *s, const int32_t **ret);

/**
 * ftrace_pidset_intern_addr - the 1-based index of kernel address @addr in
 * insertion order (what Perfetto writes instead of a raw address, so that
 * traces do not reveal the KASLR layout).  Returns: 0 if the set is full.
 */
uint32_t ftrace_pidset_intern_addr(struct ftrace_pidset *s, uint64_t addr);

/**
 * ftrace_pidset_addrs - addresses by index: (*ret)[i] has index i+1, for a
 * symbolizer that emits interned kernel_symbols.  Returns: the count.
 */
size_t ftrace_pidset_addrs(const struct ftrace_pidset *s, const uint64_t **ret);

/**
 * ftrace_pidset_overflowed - some pid, renamed pid or address was dropped
 * since the last clear (the caller may fall back to a full /proc scan).
 */
bool ftrace_pidset_overflowed(const struct ftrace_pidset *s);

/* ==== mapped sub-buffers (ftrace_mapped.c) ==== */
/*
 * ftrace_mapped - the reader side of a per-CPU ring buffer mapped into our
 * address space (Linux 6.10+, trace_pipe_raw's mmap), without the syscalls
 * (ftrace_mapped.c).  It decides which bytes of the mapping are the next
 * page to parse, and hands them over in place when the sub-buffer is
 * complete, or as the page read() would have returned otherwise, so that
 * the parser sees what it would have seen through read().  The caller maps
 * the buffer and supplies the "swap the reader page" call (the ioctl on a
 * live buffer, a simulated ring in tests and replays).
 *
 * Kernel facts (include/uapi/linux/trace_mmap.h, kernel/trace/ring_buffer.c):
 * the mapping is the meta page, then nr_subbufs sub-buffers of subbuf_size
 * bytes (header included), in the order of their ids.  The reader owns the
 * sub-buffer reader.id; TRACE_MMAP_IOCTL_GET_READER marks all its committed
 * bytes read and, if it was read to the end, swaps in the next one.  The
 * writer may still be committing into the reader sub-buffer (it is the
 * writer's page when the ring was nearly empty); its commit word grows
 * then, and everything up to it is valid.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* struct trace_buffer_meta (uapi), laid out as the kernel writes it. */
struct ftrace_rb_meta {
	uint32_t meta_page_size;
	uint32_t meta_struct_len;
	uint32_t subbuf_size;
	uint32_t nr_subbufs;
	struct {
		uint64_t lost_events;
		uint32_t id;
		uint32_t read;
	} reader;
	uint64_t flags;
	uint64_t entries;
	uint64_t overrun;
	uint64_t read;
	uint64_t reserved1;
	uint64_t reserved2;
};

/* TRACE_MMAP_IOCTL_GET_READER: _IO('R', 0x20). */
#define FTRACE_RB_IOCTL_GET_READER 0x5220u

/* Smallest ring-buffer event (header + one word): the writer cannot put
 * anything in a sub-buffer with less room left (RB_EVNT_MIN_SIZE). */
#define FTRACE_RB_MIN_EVENT 8u

struct ftrace_mapped {
	const struct ftrace_rb_meta *meta;
	const uint8_t *subbufs;         /* sub-buffer 0 */
	size_t page_size;               /* subbuf_size: header + data */
	uint32_t nr_subbufs;
	unsigned commit_size;
	unsigned header_size;           /* 8 + commit_size */
	/* Swap the reader sub-buffer (TRACE_MMAP_IOCTL_GET_READER); 0 or -errno. */
	int (*get_reader)(void *ctx);
	void *ctx;
	/* Where we are: bytes of reader sub-buffer @id already handed over, and
	 * the kernel's read timestamp at that offset. */
	uint32_t id;
	uint32_t pos;
	uint64_t pos_ts;
	uint32_t kread;                 /* reader.read after our last swap call: we hand
					 * over nothing past it */
	/* Counters, for tests and benchmarks. */
	uint64_t in_place, copied, swaps;
};

/**
 * ftrace_mapped_init - set up @m over a mapping: @meta (the meta page) and
 * @subbufs (@subbufs_len bytes of sub-buffers), and start where the
 * kernel's reader is (a reader page partly read by an earlier reader is
 * taken up where it stopped).
 * @page_size: the ring buffer's page size; must equal meta->subbuf_size.
 * @commit_size: size of the page header's commit word (4 or 8).
 * Returns: 0, or -EINVAL for a meta page that does not describe this mapping.
 */
int ftrace_mapped_init(struct ftrace_mapped *m, const void *meta, const void *subbufs,
		       size_t subbufs_len, size_t page_size, unsigned commit_size,
		       int (*get_reader)(void *ctx), void *ctx);

/**
 * ftrace_mapped_next - the next page of data, no allocation.  A complete
 * sub-buffer not read before is handed over in place (*@ret_page points
 * into the mapping, valid until the next call); otherwise the rest of the
 * reader sub-buffer is copied into @buf (page_size bytes) with the header
 * read() would have given it: the kernel's read timestamp at that offset,
 * the bytes copied as commit, zeros after.
 * @ret_caught_up: set when the page is the writer's (more may come later).
 * Returns: 1 with a page, 0 when the buffer is empty, -EIO for a sub-buffer
 * the kernel could not have written, or the get_reader error.
 */
int ftrace_mapped_next(struct ftrace_mapped *m, uint8_t *buf, const uint8_t **ret_page,
		       bool *ret_caught_up);

/**
 * ftrace_mapped_read_stamp - the kernel's read timestamp after the records
 * in @data[@from, @to), starting from @ts (rb_update_read_stamp(): padding
 * adds nothing, time extends add, absolute stamps replace).
 */
uint64_t ftrace_mapped_read_stamp(const uint8_t *data, uint32_t from, uint32_t to, uint64_t ts);
