/* SPDX-License-Identifier: Apache-2.0 */
/*
 * symbolize_ksyms: names for the kernel addresses a bundle referenced.
 *
 * Address fields carry the 1-based index of the address in the pass's
 * address set (ftrace_pidset_intern_addr()), never the address.  After each
 * bundle, the same packet gets InternedData.kernel_symbols {iid, str} for
 * every index above the watermark that names a symbol; the first packet
 * that writes any also says SEQ_INCREMENTAL_STATE_CLEARED.  The set and the
 * watermark restart with each read pass, as in traced_probes.  Runs on the
 * drain path: no allocation, the name goes through a stack buffer.
 */

#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ksyms/ksyms.h"
#include "protos/pbw.h"

/* TracePacket / InternedData / InternedString field numbers. */
enum {
	PACKET_INTERNED_DATA = 12,
	PACKET_SEQUENCE_FLAGS = 13,
	SEQ_INCREMENTAL_STATE_CLEARED = 1,
	INTERNED_KERNEL_SYMBOLS = 26,
	INTERNED_STRING_IID = 1,
	INTERNED_STRING_STR = 2,
};

void ftrace_symbolize_bundle(void *ctx, struct pbw *packet, struct ftrace_pidset *pids)
{
	struct ftrace_symbolizer *s = ctx;
	const uint64_t *addrs;
	size_t n;
	bool open = false;

	if (!s->k || !pids)
		return;
	n = ftrace_pidset_addrs(pids, &addrs);
	if (n <= s->watermark)
		return;
	for (size_t i = s->watermark; i < n; i++) {
		char name[KSYMS_NAME_MAX + 1];
		uint64_t addr = addrs[i] + (uint64_t)s->addr_delta;
		int len;

		if (s->text_hi && (addr < s->text_lo || addr >= s->text_hi))
			continue;
		len = ksyms_lookup(s->k, addr, name, sizeof(name));
		if (len <= 0)
			continue;
		if (!open) {
			if (s->watermark == 0)
				pbw_varint(packet, PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
			pbw_begin_nested(packet, PACKET_INTERNED_DATA);
			open = true;
		}
		pbw_begin_nested(packet, INTERNED_KERNEL_SYMBOLS);
		pbw_varint(packet, INTERNED_STRING_IID, i + 1);
		pbw_bytes(packet, INTERNED_STRING_STR, name, (size_t)len);
		(void)pbw_end_nested(packet);
		s->names++;
	}
	if (open) {
		(void)pbw_end_nested(packet);
		/* Only once a name went out: until then the sequence has no state to clear. */
		s->watermark = (uint32_t)n;
	}
}

void ftrace_symbolize_pass_end(struct ftrace_symbolizer *s)
{
	s->watermark = 0;
}
