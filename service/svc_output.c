/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What goes into a session's file: records appended through its svc_trace,
 * producer packets with the trusted fields the service appends, and the
 * end of writing.  A write error or max_file_size_bytes stops the writing
 * here and disables the session from a loop turn of its own, through the
 * handler the session module installed (ss->end_handler): this file sits
 * below the session logic and never calls into it.
 */
#include "service/svc_internal.h"
#include "util/util.h"
#include "util/util_varint.h"

int svc_output_write(struct svc_session *ss, const uint8_t *data, size_t len, const uint8_t *trailer,
		      size_t tlen)
{
	int r;

	if (ss->write_stopped)
		return 0;
	r = svc_trace_append(ss->trace, data, len, trailer, tlen);
	ss->stats.bytes = svc_trace_bytes(ss->trace);
	if (r == 0)
		return 0;
	ss->write_stopped = true;
	if (r > 0) {
		/* max_file_size_bytes: traced stops writing and disables
		 * tracing the normal way (stop acks, no final flush). */
		ss->end_immediately = false;
		r = 0;
	} else {
		if (!ss->error)
			ss->error = r;
		ss->end_immediately = true;
	}
	/* Not from here: we may be deep inside a read pass. */
	(void)svc_session_arm_defer(ss, &ss->end_defer, ss->end_handler);
	return r;
}

void svc_output_flush(struct svc_session *ss)
{
	int r;

	if (ss->write_stopped)
		return;
	r = svc_trace_flush(ss->trace);
	if (r < 0) {
		ss->write_stopped = true;
		if (!ss->error)
			ss->error = r;
		ss->end_immediately = true;
		(void)svc_session_arm_defer(ss, &ss->end_defer, ss->end_handler);
	}
}

static uint32_t sequence_id(struct svc_session *ss, uint16_t producer_id, uint16_t writer_id,
			    uint32_t buffer_index)
{
	struct svc_seq *q;

	if (ss->last_seq_hit < ss->n_seqs) {
		q = &ss->seqs[ss->last_seq_hit];
		if (q->producer_id == producer_id && q->writer_id == writer_id)
			return q->seq_id;
	}
	for (size_t i = 0; i < ss->n_seqs; i++) {
		q = &ss->seqs[i];
		if (q->producer_id == producer_id && q->writer_id == writer_id) {
			ss->last_seq_hit = i;
			return q->seq_id;
		}
	}
	if (ss->n_seqs == ss->cap_seqs) {
		size_t cap = ss->cap_seqs ? ss->cap_seqs * 2 : 16;
		struct svc_seq *n = realloc(ss->seqs, cap * sizeof(*n));

		if (!n)
			return 0;
		ss->seqs = n;
		ss->cap_seqs = cap;
	}
	/* traced: one id per (producer, writer) in order of first packet,
	 * counting up from the service's own sequence 1. */
	q = &ss->seqs[ss->n_seqs];
	*q = (struct svc_seq){
		.producer_id = producer_id,
		.writer_id = writer_id,
		.seq_id = ++ss->last_seq_id,
		.buffer_index = buffer_index,
	};
	ss->last_seq_hit = ss->n_seqs++;
	return q->seq_id;
}

static uint8_t *put_varint_field(uint8_t *t, uint32_t field, uint64_t v)
{
	t = varint_put(t, (uint64_t)field << 3);
	return varint_put(t, v);
}

int svc_output_packet(struct svc_session *ss, struct svc_producer *p, const uint8_t *data, size_t len,
		       uint16_t writer_id, uint32_t buffer_index, uint32_t previous_packet_dropped)
{
	/* trusted_uid (3), trusted_packet_sequence_id (10), trusted_pid (79),
	 * previous_packet_dropped (42), machine_id (98): appended after the
	 * producer's bytes, so they win over anything the producer wrote. */
	uint8_t trailer[5 * 12], *t = trailer;
	uint32_t seq;

	if (ss->write_stopped || ss->state == SVC_SESSION_DISABLED || len == 0)
		return 0;
	if (!svc_validate_packet(data, len)) {
		ss->stats.invalid_packets++;
		return 0;
	}
	seq = sequence_id(ss, p->id, writer_id, buffer_index);
	if (seq == 0)
		return -ENOMEM;
	t = put_varint_field(t, 3, (uint64_t)(int64_t)(int32_t)p->uid);
	t = put_varint_field(t, 10, seq);
	if (p->have_pid)
		t = put_varint_field(t, 79, (uint64_t)(int64_t)(int32_t)p->pid);
	if (previous_packet_dropped)
		t = put_varint_field(t, 42, previous_packet_dropped);
	/* as traced: only a remote machine's packets carry one */
	if (p->machine_id)
		t = put_varint_field(t, 98, p->machine_id);
	ss->stats.packets++;
	ss->buffers[buffer_index].bytes_read += len;
	ss->buffers[buffer_index].packets_read++;
	return svc_output_write(ss, data, len, trailer, (size_t)(t - trailer));
}
