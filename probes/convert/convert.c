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
 * Pages: libtracecmd is asked for records, CPU by CPU, and every time a
 * record starts a new page that page is copied whole into a batch; a batch
 * of CONVERT_BATCH_PAGES pages becomes one ftrace_parser_parse_pages_to()
 * call, i.e. about one bundle, as a live drain pass would make.  Pages
 * libtracecmd steps over without returning a record (only padding, or a
 * header it cannot walk) are counted, not converted.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>

#include <traceevent/event-parse.h>
#include <traceevent/kbuffer.h>

#include "probes/convert/convert_internal.h"
#include "probes/convert/convert_tracecmd.h"
#include "probes/ftrace/ftrace_parse.h"
#include "smb/pbw.h"
#include "util/util.h"

#define CONVERT_BATCH_PAGES 64u
#define CONVERT_PIDSET_CAP (1u << 17)
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

struct conv {
	struct tracecmd_input *top;
	const struct convert_opts *opts;
	struct convert_out *out;
	struct convert_summary *sum;
	unsigned page_size, commit_size;
	enum ftrace_clock clock;
	uint64_t t0;
	uint64_t progress_total, progress_done, progress_next;
	uint8_t *batch;
	struct kbuffer *kb;
	int raw_fd;           /* the file itself when its pages are stored as is, else -EBADF */
	uintptr_t src_lo, src_hi; /* source pages copied since the last release */
	bool ts_shifted;
};

/* Per buffer: the sink's state. */
struct conv_buffer {
	struct conv *c;
	struct tep_handle *tep;
	uint32_t seq;
	struct ftrace_pidset *pids;
	size_t symbols_written;
	bool started;
	struct pbw *w;
};

static void tracecmd_closep(struct tracecmd_input **h)
{
	if (*h)
		tracecmd_close(*h);
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
static int write_clock_snapshot(struct conv *c)
{
	static const uint32_t ids[] = { BUILTIN_CLOCK_BOOTTIME, BUILTIN_CLOCK_MONOTONIC,
					BUILTIN_CLOCK_MONOTONIC_RAW };
	struct pbw *w = convert_out_begin(c->out, CONVERT_SEQ_SERVICE, 0);

	pbw_begin_nested(w, CONVERT_PKT_CLOCK_SNAPSHOT);
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		pbw_begin_nested(w, CLOCK_SNAPSHOT_CLOCKS);
		pbw_varint(w, CLOCK_ID, ids[i]);
		pbw_varint(w, CLOCK_TIMESTAMP, c->t0);
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

static void progress_tick(struct conv *c)
{
	if (!c->opts->progress || c->progress_done < c->progress_next)
		return;
	c->progress_next = c->progress_done + (uint64_t)CONVERT_PROGRESS_PAGES * c->page_size;
	c->opts->progress(c->opts->progress_ctx, c->progress_done, c->progress_total,
			  c->sum->events);
}

/*
 * libtracecmd applies the file's time adjustments (--ts-offset, guest
 * offsets, tsc2nsec) to records but not to page bytes.  The first record's
 * raw time on the page, read back with kbuffer, against the record's time
 * gives the shift to put into the copied page's header, so every event of
 * the page moves with it.
 */
static void page_fix_ts(struct conv *c, uint8_t *page, uint64_t rec_ts)
{
	struct ftrace_page_header hdr;
	unsigned long long raw;
	uint64_t ts;

	if (ftrace_page_parse_header(page, c->page_size, c->commit_size, &hdr) < 0)
		return;
	if (kbuffer_load_subbuffer(c->kb, page) < 0 || !kbuffer_read_event(c->kb, &raw))
		return;
	if (raw == rec_ts)
		return;
	memcpy(&ts, page, sizeof(ts));
	ts += rec_ts - raw;
	memcpy(page, &ts, sizeof(ts));
	c->ts_shifted = true;
}

/*
 * libtracecmd maps a whole CPU's data at once (the file itself, or the
 * unpacked copy of a compressed one) and never unmaps behind the reader, so
 * the resident set would grow to the data's size.  The pages already
 * copied are handed back (MADV_PAGEOUT keeps their contents, whatever kind
 * of memory they are: harmless if libtracecmd reads them again, and it
 * does not): memory stays flat however large the file.
 */
static void release_source(struct conv *c)
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

static void note_source(struct conv *c, const uint8_t *map)
{
	uintptr_t a = (uintptr_t)map;

	/* Only a run of adjacent pages is released, never a guess between runs. */
	if (c->src_hi != a)
		release_source(c);
	if (c->src_lo == 0)
		c->src_lo = a;
	c->src_hi = a + c->page_size;
}

static int flush_batch(struct conv_buffer *cb, struct ftrace_parser *p, uint32_t cpu, size_t n,
		       struct ftrace_cpu_state *st, struct ftrace_pass_stats *ps)
{
	struct conv *c = cb->c;
	const struct ftrace_packet_sink sink = { .begin = sink_begin, .end = sink_end, .ctx = cb };
	uint64_t events_before = ps->events;
	int r;

	if (n == 0)
		return 0;
	r = ftrace_parser_parse_pages_to(p, cpu, c->batch, n, c->page_size, &sink, st, cb->pids,
					 ps);
	if (r < 0)
		return r;
	c->sum->events += ps->events - events_before;
	c->sum->bytes_in += (uint64_t)n * c->page_size;
	c->progress_done += (uint64_t)n * c->page_size;
	release_source(c);
	progress_tick(c);
	return 0;
}

/*
 * Pages libtracecmd stepped over without a record (a header it refuses, a
 * zeroed page, only padding) between the pages at @from and @to.  When the
 * file stores pages as they are (no compression), they are read from it
 * and parsed like the others, so a damaged page becomes an FtraceError as
 * it would live; otherwise they are only counted.
 */
static int add_skipped(struct conv_buffer *cb, struct ftrace_parser *p, uint32_t cpu,
		       int64_t from, int64_t to, size_t *n, struct ftrace_cpu_state *st,
		       struct ftrace_pass_stats *ps, struct convert_cpu_summary *cs)
{
	struct conv *c = cb->c;
	int64_t ps_sz = c->page_size;
	int64_t first = ALIGN_UP(from, ps_sz) + ps_sz, last = ALIGN_UP(to, ps_sz);
	int r;

	/* Page starts are only known exactly when pages are page-aligned. */
	if (first >= last)
		return 0;
	if (c->raw_fd < 0 || ALIGN_UP(from, ps_sz) - from > 8 || last - to > 8) {
		cs->skipped_pages += (uint64_t)((last - first) / ps_sz);
		return 0;
	}
	for (int64_t off = first; off < last; off += ps_sz) {
		if (*n == CONVERT_BATCH_PAGES) {
			r = flush_batch(cb, p, cpu, *n, st, ps);
			*n = 0;
			if (r < 0)
				return r;
		}
		if (pread(c->raw_fd, c->batch + *n * c->page_size, c->page_size, off) !=
		    (ssize_t)c->page_size) {
			cs->skipped_pages++;
			continue;
		}
		(*n)++;
	}
	return 0;
}

static int convert_cpu(struct conv_buffer *cb, struct tracecmd_input *h, struct ftrace_parser *p,
		       int cpu)
{
	struct conv *c = cb->c;
	struct convert_cpu_summary *cs = &c->sum->cpu[cpu];
	struct ftrace_cpu_state st = {};
	struct ftrace_pass_stats ps = {};
	int64_t last = 0, head = 0;
	bool first = true;
	size_t n = 0;
	int r = 0;

	for (;;) {
		struct tep_record *rec = tracecmd_read_data(h, cpu);
		uint8_t *map;
		int64_t at;

		if (!rec)
			break;
		map = tracecmd_record_page(h, rec);
		if (!map || (uint8_t *)rec->data < map ||
		    (uint8_t *)rec->data >= map + c->page_size) {
			tracecmd_free_record(rec);
			continue;
		}
		/*
		 * Where the page starts, give or take the 4 or 8 bytes of an
		 * event header: record->offset is the event's offset in the
		 * CPU's data, record->data its payload inside the page.  Records
		 * of one page agree within 8 bytes, pages differ by a page.
		 */
		at = (int64_t)rec->offset - ((uint8_t *)rec->data - map);
		if (first || at > last + (int64_t)c->page_size / 2 ||
		    at < last - (int64_t)c->page_size / 2) {
			if (!first && at > last + (int64_t)c->page_size * 3 / 2) {
				r = add_skipped(cb, p, (uint32_t)cpu, last, at, &n, &st, &ps, cs);
				if (r < 0) {
					tracecmd_free_record(rec);
					break;
				}
			}
			if (n == CONVERT_BATCH_PAGES) {
				r = flush_batch(cb, p, (uint32_t)cpu, n, &st, &ps);
				n = 0;
				if (r < 0) {
					tracecmd_free_record(rec);
					break;
				}
			}
			memcpy(c->batch + n * c->page_size, map, c->page_size);
			note_source(c, map);
			page_fix_ts(c, c->batch + n * c->page_size, rec->ts);
			n++;
			if (first)
				head = at;
			last = at;
			first = false;
		}
		tracecmd_free_record(rec);
	}
	/*
	 * libtracecmd stops a CPU at the first page it cannot walk; the pages
	 * after it, up to the end of the CPU's data (counted from the first
	 * page that held a record), are read by hand as above.
	 */
	if (r >= 0 && !first && c->raw_fd >= 0) {
		off_t size = tracecmd_get_cpu_file_size(h, cpu);

		if (size > 0)
			r = add_skipped(cb, p, (uint32_t)cpu, last,
					ALIGN_UP(head, (int64_t)c->page_size) + size - 4, &n, &st, &ps,
					cs);
	}
	if (r >= 0)
		r = flush_batch(cb, p, (uint32_t)cpu, n, &st, &ps);
	cs->pages += ps.pages;
	cs->events += ps.events;
	cs->lost_pages += ps.lost_pages;
	cs->lost_events += ps.lost_events;
	cs->lost_unknown |= ps.lost_unknown;
	cs->parse_errors += ps.parse_errors;
	c->sum->parse_errors += ps.parse_errors;
	c->sum->parse_errors_mask |= ps.parse_errors_mask;
	return r;
}

/* ---- process names -------------------------------------------------------- */

/*
 * The file's saved cmdlines, for the pids its events mention, as a
 * ProcessTree at the first event's time (trace.dat has no tgids).
 */
static int write_thread_names(struct conv_buffer *cb)
{
	struct conv *c = cb->c;
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
			pbw_varint(w, CONVERT_PKT_TIMESTAMP, c->t0);
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

static void format_table_freep(struct ftrace_format_table **t)
{
	ftrace_format_table_free(*t);
}

static void parser_freep(struct ftrace_parser **p)
{
	ftrace_parser_free(*p);
}

static void pidset_freep(struct ftrace_pidset **s)
{
	ftrace_pidset_free(*s);
}

static int convert_buffer(struct conv *c, struct tracecmd_input *h, uint32_t seq)
{
	_cleanup_(format_table_freep) struct ftrace_format_table *t = NULL;
	_cleanup_(parser_freep) struct ftrace_parser *p = NULL;
	_cleanup_(pidset_freep) struct ftrace_pidset *pids = NULL;
	_cleanup_free_ char *header = NULL;
	_cleanup_free_ int *ids = NULL;
	struct ftrace_parser_opts po = FTRACE_PARSER_OPTS_DEFAULT;
	struct conv_buffer cb = { .c = c, .tep = tracecmd_get_tep(h), .seq = seq };
	int n_cpus = tracecmd_cpus(h), n_ids, r;
	size_t failed;

	if (!cb.tep)
		return -ENODATA;
	r = convert_format_header_page(c->page_size, c->commit_size, &header);
	if (r < 0)
		return r;
	r = ftrace_format_table_new_from_text(header, &t);
	if (r < 0)
		return r;
	n_ids = convert_format_load_all(cb.tep, t, &ids, &failed);
	if (n_ids < 0)
		return n_ids;
	po.compact_sched = c->opts->compact_sched;
	r = ftrace_parser_new(t, &po, &p);
	if (r < 0)
		return r;
	for (int i = 0; i < n_ids; i++) {
		r = ftrace_parser_enable(p, ids[i]);
		if (r == -ENOMEM)
			return r;
	}
	if (c->clock != FTRACE_CLOCK_UNSPECIFIED && c->t0 > 0)
		ftrace_parser_set_clock(p, c->clock, (int64_t)c->t0, (int64_t)c->t0);
	r = ftrace_pidset_new(CONVERT_PIDSET_CAP, &pids);
	if (r < 0)
		return r;
	cb.pids = pids;

	for (int cpu = 0; cpu < n_cpus && cpu < (int)c->sum->n_cpus; cpu++) {
		r = convert_cpu(&cb, h, p, cpu);
		if (r < 0)
			return r;
	}
	return write_thread_names(&cb);
}

/* ---- the file -------------------------------------------------------------- */

static void set_reason(struct convert_summary *s, const char *fmt, ...) _printf_(2, 3);
static void set_reason(struct convert_summary *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
	va_end(ap);
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

int convert_file(const char *in_path, int out_fd, const struct convert_opts *o,
		 struct convert_summary **ret_summary)
{
	_cleanup_(tracecmd_closep) struct tracecmd_input *top = NULL;
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *batch = NULL;
	struct convert_out *out = NULL;
	const struct convert_opts defaults = CONVERT_OPTS_DEFAULT;
	struct tep_handle *tep;
	const char *clock, *zname = NULL, *zver = NULL;
	struct conv c = { .opts = o ? o : &defaults, .raw_fd = -EBADF };
	_cleanup_close_ int raw_fd = -EBADF;
	int n_cpus, n_inst, page_size, commit_size, r;
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
	n_cpus = MIN(n_cpus, CONVERT_MAX_CPUS);
	sum = calloc(1, sizeof(*sum) + (size_t)n_cpus * sizeof(sum->cpu[0]));
	if (!sum)
		return -ENOMEM;
	sum->n_cpus = (unsigned)n_cpus;
	sum->file_version = (unsigned)tracecmd_get_in_file_version(top);
	page_size = tracecmd_page_size(top);
	commit_size = tep_get_header_page_size(tep);
	sum->page_size = page_size > 0 ? (unsigned)page_size : 0;
	clock = tracecmd_get_trace_clock(top);
	(void)snprintf(sum->trace_clock, sizeof(sum->trace_clock), "%s", clock ? clock : "local");
	compressed = tracecmd_get_file_compress_proto(top, &zname, &zver) == 0 && zname;

	/* The page parser reads little-endian words with the host's layout. */
	if (tep_is_file_bigendian(tep)) {
		set_reason(sum, "the file was recorded on a big-endian machine");
		r = -EPROTONOSUPPORT;
		goto fail;
	}
	if (page_size < 64 || page_size > (1 << 20) || (page_size & (page_size - 1))) {
		set_reason(sum, "unsupported kernel page size %d", page_size);
		r = -EPROTONOSUPPORT;
		goto fail;
	}
	if (commit_size != 4 && commit_size != 8) {
		set_reason(sum, "unsupported page header (commit field of %d bytes)", commit_size);
		r = -EPROTONOSUPPORT;
		goto fail;
	}

	c.top = top;
	c.sum = sum;
	c.page_size = (unsigned)page_size;
	c.commit_size = (unsigned)commit_size;
	c.clock = clock_from_name(sum->trace_clock);
	c.t0 = tracecmd_get_first_ts(top);
	batch = malloc((size_t)CONVERT_BATCH_PAGES * (size_t)page_size);
	if (!batch) {
		r = -ENOMEM;
		goto fail;
	}
	c.batch = batch;
	c.kb = kbuffer_alloc(tep_get_long_size(tep) == 4 ? KBUFFER_LSIZE_4 : KBUFFER_LSIZE_8,
			     KBUFFER_ENDIAN_LITTLE);
	if (!c.kb) {
		r = -ENOMEM;
		goto fail;
	}
	r = convert_out_new(out_fd, &out);
	if (r < 0)
		goto fail;
	c.out = out;

	if (!compressed) {
		raw_fd = open(in_path, O_RDONLY | O_CLOEXEC);
		c.raw_fd = raw_fd;
		c.progress_total = data_size(top);
		for (int i = 0; i < n_inst; i++) {
			_cleanup_(tracecmd_closep) struct tracecmd_input *ih =
				tracecmd_buffer_instance_handle(top, i);

			if (ih)
				c.progress_total += data_size(ih);
		}
	}

	r = write_clock_snapshot(&c);
	if (r < 0)
		goto fail;
	/* The top level, then every instance, each on a sequence of its own. */
	for (int i = -1; i < n_inst; i++) {
		_cleanup_(tracecmd_closep) struct tracecmd_input *ih = NULL;
		struct tracecmd_input *h = top;

		if (i >= 0) {
			h = ih = tracecmd_buffer_instance_handle(top, i);
			if (!ih) {
				set_reason(sum, "cannot read buffer \"%s\"",
					   tracecmd_buffer_instance_name(top, i));
				r = -ENODATA;
				goto fail;
			}
		}
		r = convert_buffer(&c, h, CONVERT_SEQ_FTRACE_BASE + (uint32_t)(i + 1));
		if (r < 0)
			goto fail;
		sum->n_buffers++;
	}
	r = convert_out_flush(out);
	if (r < 0)
		goto fail;
	if (c.opts->progress)
		c.opts->progress(c.opts->progress_ctx, c.progress_done, c.progress_done,
				 sum->events);
	sum->ts_shifted = c.ts_shifted;
	r = sum->parse_errors > 0 ? -EBADMSG : 0;
fail:
	if (out) {
		sum->bytes_out = convert_out_bytes(out);
		sum->packets = convert_out_packets(out);
	}
	convert_out_free(out);
	if (c.kb)
		kbuffer_free(c.kb);
	*ret_summary = TAKE_PTR(sum);
	return r;
}

/* ---- isolation ------------------------------------------------------------ */

int convert_file_isolated(const char *in_path, int out_fd, const struct convert_opts *o,
			  struct convert_summary **ret_summary)
{
	const size_t shared_len = sizeof(struct convert_summary) +
				  CONVERT_MAX_CPUS * sizeof(struct convert_cpu_summary);
	struct convert_summary *shared, *sum;
	int status, r;
	pid_t pid;

	if (!in_path || !ret_summary)
		return -EINVAL;
	*ret_summary = NULL;
	shared = mmap(NULL, shared_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		(void)munmap(shared, shared_len);
		return r;
	}
	if (pid == 0) {
		_cleanup_free_ struct convert_summary *s = NULL;

		r = convert_file(in_path, out_fd, o, &s);
		if (s)
			memcpy(shared, s, sizeof(*s) + s->n_cpus * sizeof(s->cpu[0]));
		/* The exit status carries the error; 0 marks "no summary". */
		_exit(s ? 0x80 | (uint8_t)MIN(-r, 0x7f) : (uint8_t)MIN(-r, 0x7f));
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			r = -errno;
			(void)munmap(shared, shared_len);
			return r;
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
