/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One trace.dat into one Perfetto trace.
 *
 * Sequences: 1 carries the service's packets (a clock snapshot), 2 the
 * ProcessTree built from the file's saved cmdlines, 3+i the ftrace bundles
 * of buffer i (0: top level, then each instance), each with its own format
 * table, parser and interned kernel symbols, as separate ftrace data
 * sources would be.
 *
 * Pages: the reader hands over records, CPU by CPU (convert_file() asks
 * libtracecmd for them), and every time a record starts a new page that
 * page is copied whole into a batch; a batch of CONVERT_BATCH_PAGES pages
 * becomes one ftrace_parser_parse_pages() call, i.e. about one bundle,
 * as a live drain pass would make.  Pages the reader steps over without
 * returning a record (only padding, or a header it cannot walk) are read
 * from the file when it stores pages as they are, else counted.  The
 * record-fed part (convert_ctx_*) knows nothing of libtracecmd, so that it
 * can be driven and fuzzed without a file.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>

#include <traceevent/event-parse.h>
#include <traceevent/kbuffer.h>

#include "probes/convert/convert_internal.h"
#include "probes/convert/convert_tracecmd.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/pbw.h"
#include "util/util.h"

/* The fuzzer builds with small ones, so that batch and table limits are
 * reached with small inputs and every input runs fast. */
#ifndef CONVERT_BATCH_PAGES
#define CONVERT_BATCH_PAGES 64u
#endif
#ifndef CONVERT_PIDSET_CAP
#define CONVERT_PIDSET_CAP (1u << 17)
#endif
#define CONVERT_THREADS_PER_PACKET 1024u
#define CONVERT_PROGRESS_PAGES 1024u

/* ClockSnapshot / ProcessTree / InternedData field numbers. */
#define CLOCK_SNAPSHOT_CLOCKS 1u
#define CLOCK_SNAPSHOT_PRIMARY 2u
#define CLOCK_ID 1u
#define CLOCK_TIMESTAMP 2u
#define BUILTIN_CLOCK_MONOTONIC 3u
#define BUILTIN_CLOCK_MONOTONIC_RAW 5u
#define BUILTIN_CLOCK_BOOTTIME 6u
#define PROCESS_TREE_THREADS 2u
#define THREAD_TID 1u
#define THREAD_NAME 2u
#define INTERNED_KERNEL_SYMBOLS 26u
#define INTERNED_STRING_IID 1u
#define INTERNED_STRING_STR 2u

struct conv_cpu {
	bool active;
	unsigned cpu;
	struct ftrace_cpu_state st;
	struct ftrace_pass_stats ps;
	int64_t last, head;   /* where the last page and the first page start */
	bool first;           /* no page yet */
	size_t n;             /* pages in the batch */
	uint64_t next_index;  /* the CPU's pages so far */
	/* each batch page's place, for naming a page that does not parse */
	uint64_t index[CONVERT_BATCH_PAGES];
	int64_t offset[CONVERT_BATCH_PAGES];
};

/* The buffer being converted: its formats, parser and the sink's state. */
struct conv_buffer {
	struct convert_ctx *c;
	bool active;
	struct tep_handle *tep;
	uint32_t seq;
	struct ftrace_format_table *t;
	struct ftrace_parser *p;
	struct ftrace_pidset *pids;
	size_t symbols_written;
	bool started;
	struct pbw *w;
};

struct convert_ctx {
	struct convert_opts opts;
	struct convert_layout layout;
	struct convert_out *out;
	struct convert_summary *sum;
	unsigned page_size, commit_size;
	enum ftrace_clock clock;
	uint64_t progress_done, progress_next;
	uint8_t *batch;
	unsigned buffer_index;    /* of the buffer being converted */
	struct kbuffer *kb;
	uintptr_t src_lo, src_hi; /* source pages copied since the last release */
	bool started;
	struct conv_buffer buf;
	struct conv_cpu cpu;
};

static void set_reason(struct convert_summary *s, const char *fmt, ...) _printf_(2, 3);
static void set_reason(struct convert_summary *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
	va_end(ap);
}

static enum ftrace_clock clock_from_name(const char *name)
{
	if (!name || strcmp(name, "boot") == 0)
		return FTRACE_CLOCK_UNSPECIFIED;
	if (strcmp(name, "local") == 0)
		return FTRACE_CLOCK_LOCAL;
	if (strcmp(name, "global") == 0)
		return FTRACE_CLOCK_GLOBAL;
	if (strcmp(name, "mono_raw") == 0)
		return FTRACE_CLOCK_MONO_RAW;
	/* mono, perf, uptime, x86-tsc, counter, tai: FtraceClock has no value
	 * for them; the timestamps are kept as recorded, read as boot time. */
	return FTRACE_CLOCK_UNSPECIFIED;
}

/*
 * The service's clock snapshot.  A trace.dat has no pairing of its clock
 * with the others, so they are all declared equal at the first event: the
 * converted timestamps are the file's, exactly as trace-cmd report prints
 * them, whichever clock recorded them.
 */
static int write_clock_snapshot(struct convert_ctx *c)
{
	static const uint32_t ids[] = { BUILTIN_CLOCK_BOOTTIME, BUILTIN_CLOCK_MONOTONIC,
					BUILTIN_CLOCK_MONOTONIC_RAW };
	struct pbw *w = convert_out_begin(c->out, CONVERT_SEQ_SERVICE, 0);

	pbw_begin_nested(w, CONVERT_PKT_CLOCK_SNAPSHOT);
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		pbw_begin_nested(w, CLOCK_SNAPSHOT_CLOCKS);
		pbw_varint(w, CLOCK_ID, ids[i]);
		pbw_varint(w, CLOCK_TIMESTAMP, c->layout.t0);
		(void)pbw_end_nested(w);
	}
	pbw_varint(w, CLOCK_SNAPSHOT_PRIMARY, BUILTIN_CLOCK_BOOTTIME);
	(void)pbw_end_nested(w);
	return convert_out_end(c->out);
}

/* ---- the parser's packet sink ------------------------------------------ */

static struct pbw *sink_begin(void *ctx)
{
	struct conv_buffer *cb = ctx;
	uint32_t flags = CONVERT_SEQ_NEEDS_INCREMENTAL_STATE;

	/* Kernel symbol iids are per sequence: its first packet starts the table. */
	if (!cb->started)
		flags |= CONVERT_SEQ_INCREMENTAL_STATE_CLEARED;
	cb->started = true;
	cb->w = convert_out_begin(cb->c->out, cb->seq, flags);
	return cb->w;
}

/* Symbols the bundle just written introduced, in the same packet. */
static void write_symbols(struct conv_buffer *cb, struct pbw *w)
{
	const uint64_t *addrs;
	size_t n = ftrace_pidset_addrs(cb->pids, &addrs);

	if (n <= cb->symbols_written)
		return;
	pbw_begin_nested(w, CONVERT_PKT_INTERNED_DATA);
	for (size_t i = cb->symbols_written; i < n; i++) {
		const char *name = tep_find_function(cb->tep, addrs[i]);
		char hex[24];

		if (!name) {
			(void)snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)addrs[i]);
			name = hex;
		}
		pbw_begin_nested(w, INTERNED_KERNEL_SYMBOLS);
		pbw_varint(w, INTERNED_STRING_IID, i + 1);
		pbw_string(w, INTERNED_STRING_STR, name);
		(void)pbw_end_nested(w);
	}
	(void)pbw_end_nested(w);
	cb->c->sum->symbols += n - cb->symbols_written;
	cb->symbols_written = n;
}

static int sink_end(void *ctx)
{
	struct conv_buffer *cb = ctx;

	write_symbols(cb, cb->w);
	cb->w = NULL;
	return convert_out_end(cb->c->out);
}

/* ---- pages --------------------------------------------------------------- */

static void progress_tick(struct convert_ctx *c)
{
	if (!c->opts.progress || c->progress_done < c->progress_next)
		return;
	c->progress_next = c->progress_done + (uint64_t)CONVERT_PROGRESS_PAGES * c->page_size;
	c->opts.progress(c->opts.progress_ctx, c->progress_done, c->layout.progress_total,
			 c->sum->events);
}

/*
 * libtracecmd applies the file's time adjustments (--ts-offset, guest
 * offsets, tsc2nsec) to records but not to page bytes.  The first record's
 * raw time on the page, read back with kbuffer, against the record's time
 * gives the shift to put into the copied page's header, so every event of
 * the page moves with it.
 */
static void page_fix_ts(struct convert_ctx *c, uint8_t *page, uint64_t rec_ts)
{
	struct ftrace_page_header hdr;
	unsigned long long raw;
	uint64_t ts;

	/* kbuffer trusts the commit field: only a sane header is handed to it. */
	if (ftrace_page_parse_header(page, c->page_size, c->commit_size, &hdr) < 0)
		return;
	if (kbuffer_load_subbuffer(c->kb, page) < 0 || !kbuffer_read_event(c->kb, &raw))
		return;
	if (raw == rec_ts)
		return;
	memcpy(&ts, page, sizeof(ts));
	ts += rec_ts - raw;
	memcpy(page, &ts, sizeof(ts));
	c->sum->ts_shifted = true;
}

/*
 * libtracecmd maps a whole CPU's data at once (the file itself, or the
 * unpacked copy of a compressed one) and never unmaps behind the reader, so
 * the resident set would grow to the data's size.  The pages already
 * copied are handed back (MADV_PAGEOUT keeps their contents, whatever kind
 * of memory they are: harmless if libtracecmd reads them again, and it
 * does not): memory stays flat however large the file.
 */
static void release_source(struct convert_ctx *c)
{
	long sys_page = sysconf(_SC_PAGESIZE);
	uintptr_t lo, hi;

	if (c->src_hi <= c->src_lo || sys_page <= 0)
		goto done;
	lo = ALIGN_UP(c->src_lo, (uintptr_t)sys_page);
	hi = c->src_hi & ~((uintptr_t)sys_page - 1);
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_PAGEOUT);
done:
	c->src_lo = c->src_hi = 0;
}

static void note_source(struct convert_ctx *c, const uint8_t *map)
{
	uintptr_t a = (uintptr_t)map;

	/* Only a run of adjacent pages is released, never a guess between runs. */
	if (c->src_hi != a)
		release_source(c);
	if (c->src_lo == 0)
		c->src_lo = a;
	c->src_hi = a + c->page_size;
}

/* Batch page @i wrote an FtraceError: count it and name it. */
static void note_bad_page(struct convert_ctx *c, size_t i)
{
	struct conv_cpu *cc = &c->cpu;
	struct convert_cpu_summary *cs = &c->sum->cpu[cc->cpu];
	struct ftrace_page_header hdr;
	bool refused = ftrace_page_parse_header(c->batch + i * c->page_size, c->page_size,
						c->commit_size, &hdr) < 0;

	if (refused)
		cs->refused_pages++;
	else
		cs->cut_pages++;
	c->sum->bad_pages++;
	if (c->sum->n_bad_listed < CONVERT_BAD_PAGES_LISTED)
		c->sum->bad[c->sum->n_bad_listed++] = (struct convert_bad_page){
			.buffer = c->buffer_index,
			.cpu = cc->cpu,
			.index = cc->index[i],
			.offset = cc->offset[i],
			.refused = refused,
		};
}

/*
 * One page at a time through the batch API (the same bundles as one
 * ftrace_parser_parse_pages() call), so that a page that writes an
 * FtraceError is known by its place and can be named.
 */
static int flush_batch(struct convert_ctx *c)
{
	struct conv_cpu *cc = &c->cpu;
	const struct pbw_sink sink = { .begin_packet = sink_begin, .end_packet = sink_end,
				       .userdata = &c->buf };
	uint64_t events_before = cc->ps.events;
	size_t n = cc->n;
	int r;

	if (n == 0)
		return 0;
	cc->n = 0;
	r = ftrace_parser_batch_begin(c->buf.p, cc->cpu, c->page_size, &sink, &cc->st, c->buf.pids,
				      &cc->ps);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		uint64_t errors_before = cc->ps.parse_errors;

		ftrace_parser_batch_page(c->buf.p, c->batch + i * c->page_size);
		if (cc->ps.parse_errors != errors_before)
			note_bad_page(c, i);
	}
	r = ftrace_parser_batch_end(c->buf.p);
	if (r < 0)
		return r;
	c->sum->events += cc->ps.events - events_before;
	c->sum->bytes_in += (uint64_t)n * c->page_size;
	c->progress_done += (uint64_t)n * c->page_size;
	release_source(c);
	progress_tick(c);
	return 0;
}

/*
 * Pages the reader stepped over without a record (a header it refuses, a
 * zeroed page, only padding) between the pages at @from and @to.  When the
 * file stores pages as they are (no compression), they are read from it
 * and parsed like the others, so a damaged page becomes an FtraceError as
 * it would live; otherwise they are only counted.
 */
static int add_skipped(struct convert_ctx *c, int64_t from, int64_t to)
{
	struct conv_cpu *cc = &c->cpu;
	struct convert_cpu_summary *cs = &c->sum->cpu[cc->cpu];
	int64_t ps_sz = c->page_size;
	int64_t first = ALIGN_UP(from, ps_sz) + ps_sz, last = ALIGN_UP(to, ps_sz);
	int r;

	/* Page starts are only known exactly when pages are page-aligned. */
	if (first >= last)
		return 0;
	if (c->layout.raw_fd < 0 || ALIGN_UP(from, ps_sz) - from > 8 || last - to > 8) {
		cs->skipped_pages += (uint64_t)((last - first) / ps_sz);
		cc->next_index += (uint64_t)((last - first) / ps_sz);
		return 0;
	}
	for (int64_t off = first; off < last; off += ps_sz) {
		if (cc->n == CONVERT_BATCH_PAGES) {
			r = flush_batch(c);
			if (r < 0)
				return r;
		}
		if (pread(c->layout.raw_fd, c->batch + cc->n * c->page_size, c->page_size, off) !=
		    (ssize_t)c->page_size) {
			/* The file ends here, whatever its headers said. */
			cs->skipped_pages += (uint64_t)((last - off) / ps_sz);
			break;
		}
		cc->index[cc->n] = cc->next_index++;
		cc->offset[cc->n] = off;
		cc->n++;
	}
	return 0;
}

int convert_ctx_record(struct convert_ctx *c, const struct convert_rec *rec)
{
	struct conv_cpu *cc = &c->cpu;
	int64_t ps = c->page_size, at;
	int r;

	if (!cc->active || !rec)
		return -EINVAL;
	/* Offsets are file offsets: anything near the int64 range is not one. */
	if (!rec->page || rec->data < rec->page || rec->data >= rec->page + ps ||
	    rec->offset > (uint64_t)CONVERT_MAX_OFFSET)
		return 0;
	/*
	 * Where the page starts, give or take the 4 or 8 bytes of an event
	 * header: the offset is the event's in the CPU's data, data its
	 * payload inside the page.  Records of one page agree within 8 bytes,
	 * pages differ by a page.
	 */
	at = (int64_t)rec->offset - (rec->data - rec->page);
	if (!cc->first && at <= cc->last + ps / 2 && at >= cc->last - ps / 2)
		return 0;
	if (!cc->first && at > cc->last + ps * 3 / 2) {
		r = add_skipped(c, cc->last, at);
		if (r < 0)
			return r;
	}
	if (cc->n == CONVERT_BATCH_PAGES) {
		r = flush_batch(c);
		if (r < 0)
			return r;
	}
	memcpy(c->batch + cc->n * c->page_size, rec->page, c->page_size);
	note_source(c, rec->page);
	page_fix_ts(c, c->batch + cc->n * c->page_size, rec->ts);
	cc->index[cc->n] = cc->next_index++;
	/* a file offset only where pages sit at their offsets, page-aligned */
	cc->offset[cc->n] = c->layout.raw_fd >= 0 && ALIGN_UP(at, ps) - at <= 8 ? ALIGN_UP(at, ps) : -1;
	cc->n++;
	if (cc->first)
		cc->head = at;
	cc->last = at;
	cc->first = false;
	return 0;
}

int convert_ctx_cpu_begin(struct convert_ctx *c, unsigned cpu)
{
	if (!c->buf.active || c->cpu.active || cpu >= c->sum->n_cpus)
		return -EINVAL;
	c->cpu = (struct conv_cpu){ .active = true, .cpu = cpu, .first = true };
	return 0;
}

int convert_ctx_cpu_end(struct convert_ctx *c, int64_t data_size)
{
	struct conv_cpu *cc = &c->cpu;
	struct convert_cpu_summary *cs;
	int r = 0;

	if (!cc->active)
		return -EINVAL;
	cs = &c->sum->cpu[cc->cpu];
	/*
	 * libtracecmd stops a CPU at the first page it cannot walk; the pages
	 * after it, up to the end of the CPU's data (counted from the first
	 * page that held a record), are read by hand as above.
	 */
	if (!cc->first && c->layout.raw_fd >= 0 && data_size > 0 &&
	    data_size <= CONVERT_MAX_OFFSET)
		r = add_skipped(c, cc->last, ALIGN_UP(cc->head, (int64_t)c->page_size) + data_size - 4);
	if (r >= 0)
		r = flush_batch(c);
	cs->pages += cc->ps.pages;
	cs->events += cc->ps.events;
	cs->lost_pages += cc->ps.lost_pages;
	cs->lost_events += cc->ps.lost_events;
	cs->lost_unknown |= cc->ps.lost_unknown;
	cs->parse_errors += cc->ps.parse_errors;
	c->sum->parse_errors += cc->ps.parse_errors;
	c->sum->parse_errors_mask |= cc->ps.parse_errors_mask;
	cc->active = false;
	cc->n = 0;
	return r;
}

/* ---- process names -------------------------------------------------------- */

/*
 * The file's saved cmdlines, for the pids its events mention, as a
 * ProcessTree at the first event's time (trace.dat has no tgids).
 */
static int write_thread_names(struct conv_buffer *cb)
{
	struct convert_ctx *c = cb->c;
	const int32_t *pids;
	size_t n = ftrace_pidset_pids(cb->pids, &pids), in_packet = 0;
	struct pbw *w = NULL;
	int r;

	for (size_t i = 0; i < n; i++) {
		const char *comm;

		if (pids[i] <= 0)
			continue;
		comm = tep_data_comm_from_pid(cb->tep, pids[i]);
		if (!comm || strcmp(comm, "<...>") == 0)
			continue;
		if (!w) {
			w = convert_out_begin(c->out, CONVERT_SEQ_PROCESS_TREE, 0);
			pbw_varint(w, CONVERT_PKT_TIMESTAMP, c->layout.t0);
			pbw_begin_nested(w, CONVERT_PKT_PROCESS_TREE);
		}
		pbw_begin_nested(w, PROCESS_TREE_THREADS);
		pbw_int(w, THREAD_TID, pids[i]);
		pbw_string(w, THREAD_NAME, comm);
		(void)pbw_end_nested(w);
		c->sum->threads++;
		if (++in_packet == CONVERT_THREADS_PER_PACKET) {
			(void)pbw_end_nested(w);
			r = convert_out_end(c->out);
			if (r < 0)
				return r;
			w = NULL;
			in_packet = 0;
		}
	}
	if (w) {
		(void)pbw_end_nested(w);
		return convert_out_end(c->out);
	}
	return 0;
}

/* ---- one buffer ------------------------------------------------------------ */

static void buffer_reset(struct conv_buffer *cb)
{
	cb->p = ftrace_parser_free(cb->p);
	cb->t = ftrace_format_table_free(cb->t);
	cb->pids = ftrace_pidset_free(cb->pids);
	cb->active = false;
}

int convert_ctx_buffer_begin(struct convert_ctx *c, struct tep_handle *tep)
{
	struct conv_buffer *cb = &c->buf;
	struct ftrace_parser_opts po = FTRACE_PARSER_OPTS_DEFAULT;
	_cleanup_free_ char *header = NULL, *printk = NULL;
	_cleanup_free_ int *ids = NULL;
	int n_ids, r;
	size_t failed;

	if (!c->started || cb->active || !tep)
		return -EINVAL;
	*cb = (struct conv_buffer){ .c = c, .active = true, .tep = tep,
				    .seq = CONVERT_SEQ_FTRACE_BASE + c->sum->n_buffers };
	c->buffer_index = c->sum->n_buffers;
	r = convert_format_header_page(c->page_size, c->commit_size, &header);
	if (r < 0)
		goto fail;
	r = ftrace_format_table_new_from_text(header, &cb->t);
	if (r < 0)
		goto fail;
	n_ids = convert_format_load_all(tep, cb->t, &ids, &failed);
	if (n_ids < 0) {
		r = n_ids;
		goto fail;
	}
	/* bprint's fmt and bputs' str point into the file's printk formats. */
	r = convert_format_printk_text(tep, &printk);
	if (r < 0)
		goto fail;
	r = ftrace_format_table_set_printk_text(cb->t, printk);
	if (r < 0)
		goto fail;
	po.compact_sched = c->opts.compact_sched;
	r = ftrace_parser_new(cb->t, &po, &cb->p);
	if (r < 0)
		goto fail;
	for (int i = 0; i < n_ids; i++) {
		r = ftrace_parser_enable(cb->p, ids[i]);
		if (r == -ENOMEM)
			goto fail;
	}
	if (c->clock != FTRACE_CLOCK_UNSPECIFIED && c->layout.t0 > 0)
		ftrace_parser_set_clock(cb->p, c->clock, (int64_t)c->layout.t0,
					(int64_t)c->layout.t0);
	r = ftrace_pidset_new(CONVERT_PIDSET_CAP, &cb->pids);
	if (r < 0)
		goto fail;
	return 0;
fail:
	buffer_reset(cb);
	return r;
}

int convert_ctx_buffer_end(struct convert_ctx *c)
{
	struct conv_buffer *cb = &c->buf;
	int r;

	if (!cb->active || c->cpu.active)
		return -EINVAL;
	r = write_thread_names(cb);
	buffer_reset(cb);
	if (r < 0)
		return r;
	c->sum->n_buffers++;
	return 0;
}

/* ---- the context ------------------------------------------------------------ */

int convert_ctx_new(const struct convert_layout *l, const struct convert_opts *o,
		    struct convert_ctx **ret)
{
	struct convert_ctx *c;
	unsigned n_cpus;

	if (!l || !ret)
		return -EINVAL;
	n_cpus = MIN(l->n_cpus, CONVERT_MAX_CPUS);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->sum = calloc(1, sizeof(*c->sum) + (size_t)n_cpus * sizeof(c->sum->cpu[0]));
	if (!c->sum) {
		free(c);
		return -ENOMEM;
	}
	c->opts = o ? *o : CONVERT_OPTS_DEFAULT;
	c->layout = *l;
	c->layout.trace_clock = NULL;
	c->sum->n_cpus = n_cpus;
	c->sum->page_size = l->page_size > 0 ? (unsigned)l->page_size : 0;
	(void)snprintf(c->sum->trace_clock, sizeof(c->sum->trace_clock), "%s",
		       l->trace_clock ? l->trace_clock : "local");
	c->clock = clock_from_name(c->sum->trace_clock);
	*ret = c;
	return 0;
}

struct convert_summary *convert_ctx_summary(struct convert_ctx *c)
{
	return c->sum;
}

int convert_ctx_start(struct convert_ctx *c, int out_fd)
{
	const struct convert_layout *l = &c->layout;
	int r;

	if (c->started)
		return -EINVAL;
	/* The page parser reads little-endian words with the host's layout. */
	if (l->big_endian) {
		set_reason(c->sum, "the file was recorded on a big-endian machine");
		return -EPROTONOSUPPORT;
	}
	if (l->page_size < 64 || l->page_size > (1 << 20) || (l->page_size & (l->page_size - 1))) {
		set_reason(c->sum, "unsupported kernel page size %d", l->page_size);
		return -EPROTONOSUPPORT;
	}
	if (l->commit_size != 4 && l->commit_size != 8) {
		set_reason(c->sum, "unsupported page header (commit field of %d bytes)",
			   l->commit_size);
		return -EPROTONOSUPPORT;
	}
	if (l->long_size != 4 && l->long_size != 8) {
		set_reason(c->sum, "unsupported kernel word size of %d bytes", l->long_size);
		return -EPROTONOSUPPORT;
	}
	c->page_size = (unsigned)l->page_size;
	c->commit_size = (unsigned)l->commit_size;
	c->batch = malloc((size_t)CONVERT_BATCH_PAGES * c->page_size);
	if (!c->batch)
		return -ENOMEM;
	c->kb = kbuffer_alloc(l->long_size == 4 ? KBUFFER_LSIZE_4 : KBUFFER_LSIZE_8,
			      KBUFFER_ENDIAN_LITTLE);
	if (!c->kb)
		return -ENOMEM;
	r = convert_out_new(out_fd, &c->out);
	if (r < 0)
		return r;
	c->started = true;
	return write_clock_snapshot(c);
}

int convert_ctx_finish(struct convert_ctx *c)
{
	int r;

	if (!c->started || c->buf.active)
		return -EINVAL;
	r = convert_out_flush(c->out);
	if (r < 0)
		return r;
	if (c->opts.progress)
		c->opts.progress(c->opts.progress_ctx, c->progress_done, c->progress_done,
				 c->sum->events);
	return c->sum->parse_errors > 0 ? -EBADMSG : 0;
}

void convert_ctx_free(struct convert_ctx *c, struct convert_summary **ret_summary)
{
	if (!c)
		return;
	buffer_reset(&c->buf);
	if (c->out) {
		c->sum->bytes_out = convert_out_bytes(c->out);
		c->sum->packets = convert_out_packets(c->out);
	}
	convert_out_free(c->out);
	if (c->kb)
		kbuffer_free(c->kb);
	free(c->batch);
	if (ret_summary)
		*ret_summary = c->sum;
	else
		free(c->sum);
	free(c);
}

/* ---- the file, through libtracecmd ------------------------------------------ */

static void tracecmd_closep(struct tracecmd_input **h)
{
	if (*h)
		tracecmd_close(*h);
}

static void convert_ctx_freep(struct convert_ctx **c)
{
	convert_ctx_free(*c, NULL);
}

static uint64_t data_size(struct tracecmd_input *h)
{
	uint64_t total = 0;
	int n = tracecmd_cpus(h);

	for (int cpu = 0; cpu < n; cpu++) {
		off_t sz = tracecmd_get_cpu_file_size(h, cpu);

		if (sz > 0)
			total += (uint64_t)sz;
	}
	return total;
}

/*
 * In the child of convert_file_isolated(): a counter in shared memory that
 * each record read moves, for the parent's stall watch.  NULL otherwise.
 */
static uint64_t *heartbeat;
static uint64_t beat_count;

/* Only the child writes it: a plain store, no locked add per record. */
static void beat(void)
{
	if (heartbeat)
		__atomic_store_n(heartbeat, ++beat_count, __ATOMIC_RELAXED);
}

/* One buffer (the top level or an instance): its records, CPU by CPU. */
static int convert_handle(struct convert_ctx *c, struct tracecmd_input *h)
{
	int n_cpus = tracecmd_cpus(h), r;

	r = convert_ctx_buffer_begin(c, tracecmd_get_tep(h));
	if (r < 0)
		return r;
	for (int cpu = 0; cpu < n_cpus && cpu < (int)c->sum->n_cpus; cpu++) {
		struct tep_record *rec;
		int r2;

		beat();
		r = convert_ctx_cpu_begin(c, (unsigned)cpu);
		if (r < 0)
			return r;
		while ((rec = tracecmd_read_data(h, cpu))) {
			const struct convert_rec cr = {
				.offset = rec->offset,
				.page = tracecmd_record_page(h, rec),
				.data = rec->data,
				.ts = rec->ts,
			};

			beat();
			r = convert_ctx_record(c, &cr);
			tracecmd_free_record(rec);
			if (r < 0)
				break;
		}
		r2 = convert_ctx_cpu_end(c, r < 0 ? 0 : tracecmd_get_cpu_file_size(h, cpu));
		if (r >= 0)
			r = r2;
		if (r < 0)
			return r;
	}
	return convert_ctx_buffer_end(c);
}

int convert_file(const char *in_path, int out_fd, const struct convert_opts *o,
		 struct convert_summary **ret_summary)
{
	_cleanup_(tracecmd_closep) struct tracecmd_input *top = NULL;
	_cleanup_(convert_ctx_freep) struct convert_ctx *c = NULL;
	_cleanup_close_ int raw_fd = -EBADF;
	struct convert_layout l = { .raw_fd = -EBADF };
	struct tep_handle *tep;
	const char *zname = NULL, *zver = NULL;
	int n_cpus, n_inst, r;
	bool compressed;

	if (!in_path || !ret_summary)
		return -EINVAL;
	*ret_summary = NULL;
	/* Plugins would only change how events print; nothing here prints. */
	top = tracecmd_open(in_path, TRACECMD_FL_LOAD_NO_PLUGINS);
	if (!top)
		return -ENODATA;
	tep = tracecmd_get_tep(top);
	n_cpus = tracecmd_cpus(top);
	n_inst = tracecmd_buffer_instances(top);
	for (int i = 0; i < n_inst; i++) {
		_cleanup_(tracecmd_closep) struct tracecmd_input *ih =
			tracecmd_buffer_instance_handle(top, i);

		if (ih)
			n_cpus = MAX(n_cpus, tracecmd_cpus(ih));
	}
	if (!tep || n_cpus < 0)
		return -ENODATA;
	compressed = tracecmd_get_file_compress_proto(top, &zname, &zver) == 0 && zname;

	l.n_cpus = (unsigned)n_cpus;
	l.page_size = tracecmd_page_size(top);
	l.commit_size = tep_get_header_page_size(tep);
	l.long_size = tep_get_long_size(tep);
	l.big_endian = tep_is_file_bigendian(tep);
	l.trace_clock = tracecmd_get_trace_clock(top);
	l.t0 = tracecmd_get_first_ts(top);
	if (!compressed) {
		raw_fd = open(in_path, O_RDONLY | O_CLOEXEC);
		l.raw_fd = raw_fd;
		l.progress_total = data_size(top);
		for (int i = 0; i < n_inst; i++) {
			_cleanup_(tracecmd_closep) struct tracecmd_input *ih =
				tracecmd_buffer_instance_handle(top, i);

			if (ih)
				l.progress_total += data_size(ih);
		}
	}
	r = convert_ctx_new(&l, o, &c);
	if (r < 0)
		return r;
	convert_ctx_summary(c)->file_version = (unsigned)tracecmd_get_in_file_version(top);
	r = convert_ctx_start(c, out_fd);
	if (r < 0)
		goto done;
	/* The top level, then every instance, each on a sequence of its own. */
	for (int i = -1; i < n_inst; i++) {
		_cleanup_(tracecmd_closep) struct tracecmd_input *ih = NULL;
		struct tracecmd_input *h = top;

		if (i >= 0) {
			h = ih = tracecmd_buffer_instance_handle(top, i);
			if (!ih) {
				set_reason(convert_ctx_summary(c), "cannot read buffer \"%s\"",
					   tracecmd_buffer_instance_name(top, i));
				r = -ENODATA;
				goto done;
			}
		}
		r = convert_handle(c, h);
		if (r < 0)
			goto done;
	}
	r = convert_ctx_finish(c);
done:
	convert_ctx_free(TAKE_PTR(c), ret_summary);
	return r;
}

/* ---- isolation ------------------------------------------------------------ */

/*
 * Waits for the child, watching its heartbeat: no record read for
 * @stall_ms and it is killed (*ret_stalled).  A pidfd lets poll() return
 * the moment the child exits; without one (before Linux 5.3) waitpid()
 * just blocks, as it did before the watch.
 */
static int wait_child(pid_t pid, const uint64_t *beats, unsigned stall_ms, int *ret_status, bool *ret_stalled)
{
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	uint64_t last = __atomic_load_n(beats, __ATOMIC_RELAXED);
	unsigned quiet_ms = 0;

	*ret_stalled = false;
	while (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		int k = poll(&p, 1, 250);
		uint64_t now;

		if (k < 0 && errno != EINTR)
			return -errno;
		if (k > 0)
			break;
		now = __atomic_load_n(beats, __ATOMIC_RELAXED);
		quiet_ms = now == last ? quiet_ms + 250 : 0;
		last = now;
		if (quiet_ms >= stall_ms) {
			(void)kill(pid, SIGKILL);
			*ret_stalled = true;
			break;
		}
	}
	while (waitpid(pid, ret_status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

int convert_file_isolated(const char *in_path, int out_fd, const struct convert_opts *o,
			  struct convert_summary **ret_summary)
{
	const size_t summary_len = sizeof(struct convert_summary) +
				   CONVERT_MAX_CPUS * sizeof(struct convert_cpu_summary);
	const size_t shared_len = summary_len + sizeof(uint64_t);
	struct convert_summary *shared, *sum;
	uint64_t *beats;
	bool stalled = false;
	int status, r;
	pid_t pid;

	if (!in_path || !ret_summary)
		return -EINVAL;
	*ret_summary = NULL;
	shared = mmap(NULL, shared_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return -errno;
	beats = (uint64_t *)((uint8_t *)shared + summary_len);
	pid = fork();
	if (pid < 0) {
		r = -errno;
		(void)munmap(shared, shared_len);
		return r;
	}
	if (pid == 0) {
		_cleanup_free_ struct convert_summary *s = NULL;

		heartbeat = beats;
		r = convert_file(in_path, out_fd, o, &s);
		if (s)
			memcpy(shared, s, sizeof(*s) + s->n_cpus * sizeof(s->cpu[0]));
		/* The exit status carries the error; 0 marks "no summary". */
		_exit(s ? 0x80 | (uint8_t)MIN(-r, 0x7f) : (uint8_t)MIN(-r, 0x7f));
	}
	r = wait_child(pid, beats, o && o->stall_ms ? o->stall_ms : 10000, &status, &stalled);
	if (r < 0) {
		(void)munmap(shared, shared_len);
		return r;
	}
	if (stalled) {
		sum = calloc(1, sizeof(*sum));
		if (sum) {
			set_reason(sum, "the reader made no progress for %u ms: the file is damaged",
				   o && o->stall_ms ? o->stall_ms : 10000);
			*ret_summary = sum;
		}
		(void)munmap(shared, shared_len);
		return -EBADMSG;
	}
	if (WIFSIGNALED(status)) {
		sum = calloc(1, sizeof(*sum));
		if (sum) {
			set_reason(sum, "the reader crashed (signal %d): the file is damaged",
				   WTERMSIG(status));
			*ret_summary = sum;
		}
		(void)munmap(shared, shared_len);
		return -EBADMSG;
	}
	r = -(WEXITSTATUS(status) & 0x7f);
	if (WEXITSTATUS(status) & 0x80) {
		size_t len = sizeof(*shared) + shared->n_cpus * sizeof(shared->cpu[0]);

		sum = malloc(len);
		if (!sum) {
			(void)munmap(shared, shared_len);
			return -ENOMEM;
		}
		memcpy(sum, shared, len);
		*ret_summary = sum;
	}
	(void)munmap(shared, shared_len);
	return r;
}
