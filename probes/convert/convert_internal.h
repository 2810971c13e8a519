/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared inside probes/convert only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/convert/convert.h"

struct pbw;

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

struct tep_handle;
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
 * convert_format_load_all - add every event format of @tep to @t.
 * Returns: the number of events added (those that do not parse are left
 * out and counted in *@ret_failed), or -ENOMEM.
 */
int convert_format_load_all(struct tep_handle *tep, struct ftrace_format_table *t,
			    int **ret_ids, size_t *ret_failed);
