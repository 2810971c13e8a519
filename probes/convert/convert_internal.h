/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared inside probes/convert only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/convert/convert.h"

struct pbw;
struct tep_handle;

/* ---- convert.c: the conversion, fed record by record --------------------- */

/*
 * The reader (libtracecmd in convert_file(); fixtures and the fuzzer
 * elsewhere) hands over, buffer by buffer and CPU by CPU, the records it
 * finds; the context copies each record's whole page once, fills in pages
 * the reader stepped over from the file itself, rebuilds the event formats
 * from the buffer's tep handle, parses the pages and writes the trace.
 */

/* Offsets past this are not file offsets (and would overflow the sums). */
#define CONVERT_MAX_OFFSET (INT64_C(1) << 56)

struct convert_layout {
	unsigned n_cpus;         /* of the largest buffer */
	int page_size;           /* as the file says: checked by convert_ctx_start() */
	int commit_size;         /* of the page header's commit field: 4 or 8 */
	int long_size;           /* the kernel's: 4 or 8 */
	bool big_endian;
	int raw_fd;              /* the file, when its pages sit at their offsets; else < 0 */
	const char *trace_clock; /* NULL: local */
	uint64_t t0;             /* the first event's time */
	uint64_t progress_total; /* page bytes, 0 when not known */
};

struct convert_rec {
	uint64_t offset;         /* the event's offset in the file (raw_fd) */
	const uint8_t *page;     /* the whole page it lies on, page_size bytes */
	const uint8_t *data;     /* its payload, inside the page */
	uint64_t ts;             /* its time, with the file's adjustments */
};

struct convert_ctx;

/* convert_ctx_new - a context with an empty summary.  Returns: 0, -ENOMEM. */
int convert_ctx_new(const struct convert_layout *l, const struct convert_opts *o,
		    struct convert_ctx **ret);

/* The summary being filled (reason[] says why a layout was refused). */
struct convert_summary *convert_ctx_summary(struct convert_ctx *c);

/*
 * convert_ctx_start - check the layout and write the trace's first packet
 * to @out_fd.  Returns: 0, -EPROTONOSUPPORT with the summary's reason set,
 * -ENOMEM, -errno.
 */
int convert_ctx_start(struct convert_ctx *c, int out_fd);

/*
 * convert_ctx_buffer_begin - the next buffer, described by @tep (its event
 * formats, printk formats, saved cmdlines and kallsyms), which must live
 * until convert_ctx_buffer_end().  It gets the next ftrace sequence.
 */
int convert_ctx_buffer_begin(struct convert_ctx *c, struct tep_handle *tep);

int convert_ctx_cpu_begin(struct convert_ctx *c, unsigned cpu);

/*
 * convert_ctx_record - one record of the current CPU, in file order.  Its
 * page is copied when it starts a new one (records whose data lies outside
 * their page are ignored).  Returns: 0 or -errno.
 */
int convert_ctx_record(struct convert_ctx *c, const struct convert_rec *rec);

/*
 * convert_ctx_cpu_end - the CPU is done: pages after the last record, up to
 * @data_size bytes of CPU data from its first page (0: unknown), are read
 * from the file, then everything left is parsed.  Returns: 0 or -errno.
 */
int convert_ctx_cpu_end(struct convert_ctx *c, int64_t data_size);

/* convert_ctx_buffer_end - the buffer's ProcessTree; frees its parser. */
int convert_ctx_buffer_end(struct convert_ctx *c);

/* convert_ctx_finish - flush.  Returns: 0, -EBADMSG if pages did not parse, -errno. */
int convert_ctx_finish(struct convert_ctx *c);

/*
 * convert_ctx_free - frees @c; its summary goes to *@ret_summary (the caller
 * frees it) or is freed with it when @ret_summary is NULL.
 */
void convert_ctx_free(struct convert_ctx *c, struct convert_summary **ret_summary);

/* ---- convert_out.c: the Perfetto file ---------------------------------- */

/* TracePacket fields (protos/perfetto/trace/trace_packet.proto). */
#define CONVERT_PKT_PROCESS_TREE 2u
#define CONVERT_PKT_TRUSTED_UID 3u
#define CONVERT_PKT_CLOCK_SNAPSHOT 6u
#define CONVERT_PKT_TIMESTAMP 8u
#define CONVERT_PKT_TRUSTED_SEQ_ID 10u
#define CONVERT_PKT_INTERNED_DATA 12u
#define CONVERT_PKT_SEQUENCE_FLAGS 13u
#define CONVERT_PKT_FIRST_ON_SEQUENCE 87u

#define CONVERT_SEQ_INCREMENTAL_STATE_CLEARED 1u
#define CONVERT_SEQ_NEEDS_INCREMENTAL_STATE 2u

/* Sequence ids, as traced numbers them: 1 is the service's own. */
#define CONVERT_SEQ_SERVICE 1u
#define CONVERT_SEQ_PROCESS_TREE 2u
#define CONVERT_SEQ_FTRACE_BASE 3u /* + buffer index */

struct convert_out;

int convert_out_new(int fd, struct convert_out **ret);
struct convert_out *convert_out_free(struct convert_out *o);

/*
 * convert_out_begin - open a TracePacket on sequence @seq (its
 * trusted_packet_sequence_id, and first_packet_on_sequence the first time).
 * @flags are its sequence_flags (0: none).  Returns the cursor to write the
 * packet's fields with.
 */
struct pbw *convert_out_begin(struct convert_out *o, uint32_t seq, uint32_t flags);

/* convert_out_end - close the packet; written out once enough is buffered. */
int convert_out_end(struct convert_out *o);

/* convert_out_flush - write out everything buffered.  Returns: 0 or -errno. */
int convert_out_flush(struct convert_out *o);

uint64_t convert_out_bytes(const struct convert_out *o);
uint64_t convert_out_packets(const struct convert_out *o);

/* ---- convert_format.c: event formats from a tep handle ----------------- */

struct tep_event;
struct ftrace_format_table;

/*
 * convert_format_header_page - the text of events/header_page for pages of
 * @page_size bytes whose commit field has @commit_size bytes.
 */
int convert_format_header_page(unsigned page_size, unsigned commit_size, char **ret);

/*
 * convert_format_event_text - a tracefs "format" text for @ev with the
 * layout libtraceevent parsed from the file (names, types, offsets, sizes,
 * signedness); the print format is left empty, as nothing here prints.
 */
int convert_format_event_text(const struct tep_event *ev, char **ret);

/*
 * convert_format_printk_text - @tep's printk formats (address -> format
 * string, as the file stored them) as printk_formats text, for
 * ftrace_format_table_set_printk_text().  Not thread-safe (stdout is
 * redirected for the call).  Returns: 0 or -ENOMEM.
 */
int convert_format_printk_text(struct tep_handle *tep, char **ret);

/*
 * convert_format_load_all - add every event format of @tep to @t.
 * Returns: the number of events added (those that do not parse are left
 * out and counted in *@ret_failed), or -ENOMEM.
 */
int convert_format_load_all(struct tep_handle *tep, struct ftrace_format_table *t,
			    int **ret_ids, size_t *ret_failed);
