/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The trace.dat converter on the golden files of tests/data/convert (made
 * by record.sh there, unpacked at build time): every event libtracecmd
 * reads is in the Perfetto trace with the same CPU, timestamp and pid (and
 * the compact columns' fields), typed sched fields match in the
 * non-compact encoding, and damaged pages become FtraceErrors and a
 * failure, never a crash.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/lib/convert_check.h"

const char *__lsan_default_suppressions(void);

/* libtracecmd 3.1.6 does not free the strings of its sscanf("%ms") calls
 * while opening a file (the stack ends in glibc's vsscanf). */
_public_ const char *__lsan_default_suppressions(void)
{
	return "leak:libtracecmd.so\nleak:__isoc99_vsscanf\n";
}

static char *golden(const char *name)
{
	const char *root = getenv("TP_BUILD_ROOT");
	char *p;

	ck_assert_int_ge(asprintf(&p, "%s/tests/%s", root ? root : ".", name), 0);
	return p;
}

static const char *const goldens[] = {
	"sched-v6.dat",
	"irq-v7-zstd.dat",
	"syscalls-v7.dat",
	"lost-b64-v6.dat",
	"lost-b4-v7.dat",
};

START_TEST(test_golden)
{
	_cleanup_free_ char *path = golden(goldens[_i]);
	_cleanup_free_ struct convert_summary *sum = NULL;
	struct cc_pf pf = {};

	cc_check_file(path, /* compact= */ true, &sum, &pf);
	ck_assert_uint_eq(sum->parse_errors, 0);
	ck_assert_uint_eq(pf.errors, 0);
	ck_assert_uint_gt(pf.threads, 0);
	ck_assert_uint_eq(sum->page_size, 4096);
	ck_assert_uint_eq(sum->file_version, strstr(goldens[_i], "v6") ? 6 : 7);
	ck_assert_str_eq(sum->trace_clock, "local");
	cc_pf_done(&pf);
}
END_TEST

/* Kernel symbol fields (hrtimer function pointers) are interned. */
START_TEST(test_golden_symbols)
{
	_cleanup_free_ char *path = golden("irq-v7-zstd.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	struct cc_pf pf = {};

	cc_check_file(path, true, &sum, &pf);
	ck_assert_uint_gt(pf.symbols, 0);
	ck_assert_uint_eq(pf.symbols, sum->symbols);
	cc_pf_done(&pf);
}
END_TEST

/* The earliest event of a bundle, compact columns included. */
static uint64_t bundle_first_ts(const Perfetto__Protos__FtraceEventBundle *b)
{
	uint64_t first = UINT64_MAX;

	for (size_t e = 0; e < b->n_event; e++)
		first = MIN(first, b->event[e]->timestamp);
	if (b->compact_sched && b->compact_sched->n_switch_timestamp)
		first = MIN(first, b->compact_sched->switch_timestamp[0]);
	if (b->compact_sched && b->compact_sched->n_waking_timestamp)
		first = MIN(first, b->compact_sched->waking_timestamp[0]);
	return first;
}

/*
 * Real kernel losses (trace-cmd record -b 4 under perf bench sched
 * messaging): `trace-cmd report` prints "CPU:0 [294 EVENTS DROPPED]" and
 * "CPU:0 [EVENTS DROPPED]" (lost, count not stored).  Each is a bundle
 * with lost_events on that CPU starting at the record report prints next,
 * and the summary has the same counts.
 */
START_TEST(test_golden_losses)
{
	_cleanup_free_ char *path = golden("lost-b4-v7.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	struct tracecmd_input *h, *ih;
	struct cc_pf pf = {};
	struct {
		int cpu;
		uint64_t ts;
		int missed;
	} drops[16];
	size_t n_drops = 0, matched = 0;
	uint64_t lost_bundles[2] = {};

	cc_check_file(path, true, &sum, &pf);
	h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS);
	ck_assert_ptr_nonnull(h);
	ck_assert_int_eq(tracecmd_buffer_instances(h), 1);
	ih = tracecmd_buffer_instance_handle(h, 0);
	ck_assert_ptr_nonnull(ih);
	for (int cpu = 0; cpu < tep_get_cpus(tracecmd_get_tep(ih)); cpu++) {
		struct tep_record *r;

		while ((r = tracecmd_read_data(ih, cpu))) {
			if (r->missed_events != 0) {
				ck_assert_uint_lt(n_drops, ARRAY_SIZE(drops));
				drops[n_drops].cpu = cpu;
				drops[n_drops].ts = r->ts;
				drops[n_drops++].missed = r->missed_events;
			}
			tracecmd_free_record(r);
		}
	}
	tracecmd_close(ih);
	tracecmd_close(h);

	/* What trace-cmd report printed for this file. */
	ck_assert_uint_eq(n_drops, 2);
	ck_assert_int_eq(drops[0].cpu, 0);
	ck_assert_int_eq(drops[0].missed, 294);
	ck_assert_int_eq(drops[1].cpu, 0);
	ck_assert_int_lt(drops[1].missed, 0);

	ck_assert_uint_eq(sum->n_cpus, 2);
	ck_assert_uint_eq(sum->cpu[0].lost_pages, 2);
	ck_assert_uint_eq(sum->cpu[0].lost_events, 294);
	ck_assert(sum->cpu[0].lost_unknown);
	ck_assert_uint_eq(sum->cpu[1].lost_pages, 0);
	ck_assert(!sum->cpu[1].lost_unknown);

	for (size_t i = 0; i < pf.trace->n_packet; i++) {
		Perfetto__Protos__FtraceEventBundle *b = pf.trace->packet[i]->ftrace_events;

		if (pf.trace->packet[i]->data_case !=
			    PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS ||
		    !b->lost_events)
			continue;
		ck_assert_uint_lt(b->cpu, 2);
		lost_bundles[b->cpu]++;
		for (size_t k = 0; k < n_drops; k++)
			if (drops[k].cpu == (int)b->cpu && drops[k].ts == bundle_first_ts(b))
				matched++;
	}
	ck_assert_uint_eq(lost_bundles[0], 2);
	ck_assert_uint_eq(lost_bundles[1], 0);
	ck_assert_uint_eq(matched, 2);
	cc_pf_done(&pf);
}
END_TEST

/* --no-compact-sched: typed SchedSwitchFtraceEvent with the kernel's fields. */
START_TEST(test_no_compact_fields)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	struct tracecmd_input *h;
	struct tep_handle *tep;
	struct tep_event *sw;
	struct cc_pf pf = {};
	size_t checked = 0;

	cc_check_file(path, /* compact= */ false, &sum, &pf);
	h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS);
	ck_assert_ptr_nonnull(h);
	/* The golden file's events are in its instance. */
	if (tracecmd_buffer_instances(h) > 0) {
		struct tracecmd_input *ih = tracecmd_buffer_instance_handle(h, 0);

		tracecmd_close(h);
		h = ih;
	}
	tep = tracecmd_get_tep(h);
	sw = tep_find_event_by_name(tep, "sched", "sched_switch");
	ck_assert_ptr_nonnull(sw);
	for (int cpu = 0; cpu < tep_get_cpus(tep); cpu++) {
		struct tep_record *r;
		size_t k = 0;

		while ((r = tracecmd_read_data(h, cpu))) {
			if (tep_data_type(tep, r) == sw->id) {
				Perfetto__Protos__SchedSwitchFtraceEvent *s = NULL;
				char comm[16];

				/* The n-th switch on this CPU in the trace. */
				for (size_t i = 0, seen = 0; i < pf.trace->n_packet && !s; i++) {
					Perfetto__Protos__TracePacket *tp = pf.trace->packet[i];
					Perfetto__Protos__FtraceEventBundle *b = tp->ftrace_events;

					if (tp->data_case !=
						    PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS || b->cpu != (uint32_t)cpu)
						continue;
					for (size_t e = 0; e < b->n_event && !s; e++)
						if (b->event[e]->event_case ==
							 PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH &&
						    seen++ == k &&
						    b->event[e]->timestamp == r->ts)
							s = b->event[e]->sched_switch;
				}
				ck_assert_msg(s, "switch %zu on cpu %d at %llu", k, cpu, r->ts);
				ck_assert_int_eq(s->prev_pid, cc_field(sw, r, "prev_pid"));
				ck_assert_int_eq(s->next_pid, cc_field(sw, r, "next_pid"));
				ck_assert_int_eq(s->prev_prio, cc_field(sw, r, "prev_prio"));
				ck_assert_int_eq(s->next_prio, cc_field(sw, r, "next_prio"));
				ck_assert_int_eq(s->prev_state, cc_field(sw, r, "prev_state"));
				cc_comm(sw, r, "prev_comm", comm);
				ck_assert_str_eq(s->prev_comm, comm);
				cc_comm(sw, r, "next_comm", comm);
				ck_assert_str_eq(s->next_comm, comm);
				k++;
				checked++;
			}
			tracecmd_free_record(r);
		}
	}
	tracecmd_close(h);
	ck_assert_uint_gt(checked, 0);
	cc_pf_done(&pf);
}
END_TEST

/* ---- damaged files ------------------------------------------------------ */

/* A copy of sched-v6.dat (v6: page bytes sit at their file offsets). */
static char *damaged_copy(char *tmpl, uint8_t **ret_data, size_t *ret_len)
{
	_cleanup_free_ char *src = golden("sched-v6.dat");
	_cleanup_close_ int fd = -EBADF;
	char *data;
	size_t len;

	fd = open(src, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read_full_fd(fd, 64u << 20, &data, &len), 0);
	*ret_data = (uint8_t *)data;
	*ret_len = len;
	return tmpl;
}

static void write_copy(char *tmpl, const uint8_t *data, size_t len)
{
	int fd = mkstemp(tmpl);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, data, len), 0);
	close(fd);
}

/* File offset of the @nth page holding records on CPU @cpu of the instance. */
static uint64_t page_offset(const char *path, int cpu, int nth)
{
	struct tracecmd_input *h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS), *ih;
	uint64_t off = 0, last = UINT64_MAX;
	struct tep_record *r;
	int seen = -1;

	ck_assert_ptr_nonnull(h);
	ck_assert_int_ge(tracecmd_buffer_instances(h), 1);
	ih = tracecmd_buffer_instance_handle(h, 0);
	ck_assert_ptr_nonnull(ih);
	while ((r = tracecmd_read_data(ih, cpu))) {
		uint64_t page = r->offset & ~4095ull;

		if (page != last) {
			last = page;
			if (++seen == nth)
				off = page;
		}
		tracecmd_free_record(r);
		if (off)
			break;
	}
	tracecmd_close(ih);
	tracecmd_close(h);
	ck_assert_uint_gt(off, 0);
	return off;
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* The kernel's missed-events flag on a page: that bundle says lost_events. */
START_TEST(test_lost_flag)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-lost-XXXXXX";
	uint64_t off = page_offset(path, 0, 1);
	struct cc_list got = {};
	struct cc_pf pf = {};
	size_t len;

	damaged_copy(tmpl, &data, &len);
	ck_assert_uint_lt(off + 16, len);
	put64(data + off + 8, get64(data + off + 8) | (1ull << 31));
	write_copy(tmpl, data, len);
	ck_assert_int_eq(cc_convert(tmpl, true, &pf, &sum), 0);
	cc_from_pftrace(pf.buf, pf.len, &got, &pf);
	ck_assert_uint_eq(pf.lost_bundles, 1);
	ck_assert_uint_eq(sum->cpu[0].lost_pages, 1);
	ck_assert(sum->cpu[0].lost_unknown);
	free(got.v);
	cc_pf_done(&pf);
	unlink(tmpl);
}
END_TEST

/* A commit past the page end: an FtraceError in the bundle, -EBADMSG. */
START_TEST(test_commit_past_end)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-commit-XXXXXX";
	uint64_t off = page_offset(path, 0, 1);
	struct cc_list got = {};
	struct cc_pf pf = {};
	size_t len;

	damaged_copy(tmpl, &data, &len);
	put64(data + off + 8, 4096 + 64);
	write_copy(tmpl, data, len);
	ck_assert_int_eq(cc_convert(tmpl, true, &pf, &sum), -EBADMSG);
	cc_from_pftrace(pf.buf, pf.len, &got, &pf);
	ck_assert_uint_ge(pf.errors, 1);
	ck_assert_uint_eq(pf.errors, sum->parse_errors);
	ck_assert(sum->parse_errors_mask & (1u << FTRACE_STATUS_ABI_INVALID_PAGE_HEADER));
	free(got.v);
	cc_pf_done(&pf);
	unlink(tmpl);
}
END_TEST

/*
 * The same on a CPU's first page: libtracecmd 3.1.6 crashes while opening
 * such a buffer; the conversion fails with the reason, the caller lives.
 */
START_TEST(test_first_page_damaged)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-first-XXXXXX";
	uint64_t off = page_offset(path, 0, 0);
	struct cc_pf pf = {};
	size_t len;

	damaged_copy(tmpl, &data, &len);
	put64(data + off + 8, 4096 + 64);
	write_copy(tmpl, data, len);
	ck_assert_int_eq(cc_convert(tmpl, true, &pf, &sum), -EBADMSG);
	ck_assert_ptr_nonnull(sum);
	ck_assert(sum->reason[0] || sum->parse_errors > 0);
	cc_pf_done(&pf);
	unlink(tmpl);
}
END_TEST

/*
 * A padding record whose length points back at itself: libtraceevent's
 * kbuffer (1.7) loops on it for ever.  The child reads no record, the
 * parent's stall watch kills it: -EBADMSG with the reason, in bounded time.
 */
START_TEST(test_reader_loop_killed)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-loop-XXXXXX";
	struct convert_opts o = CONVERT_OPTS_DEFAULT;
	uint64_t off = page_offset(path, 0, 1);
	uint32_t pad[2] = { 1u << 5 | 29u, (uint32_t)-4 };  /* delta 1, PADDING; length -4 */
	int out = memfd_create("pftrace", MFD_CLOEXEC);
	size_t len;

	ck_assert_int_ge(out, 0);
	damaged_copy(tmpl, &data, &len);
	ck_assert_uint_lt(off + 24, len);
	memcpy(data + off + 16, pad, sizeof(pad));
	write_copy(tmpl, data, len);
	o.stall_ms = 1000;
	ck_assert_int_eq(convert_file_isolated(tmpl, out, &o, &sum), -EBADMSG);
	ck_assert_ptr_nonnull(sum);
	ck_assert_msg(strstr(sum->reason, "no progress"), "reason: %s", sum->reason);
	close(out);
	unlink(tmpl);
}
END_TEST

/* Garbage inside a page's events: errors, not a crash. */
START_TEST(test_garbage_events)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-garbage-XXXXXX";
	uint64_t off = page_offset(path, 0, 0);
	struct cc_pf pf = {};
	size_t len;
	int r;

	damaged_copy(tmpl, &data, &len);
	/* Every event header from the second one on: type_len 29 (padding)
	 * with a length running far past the page. */
	for (size_t i = 64; i < 4096; i += 8) {
		uint32_t w = 29u | (0x7ffffffu << 5);

		memcpy(data + off + i, &w, 4);
		memcpy(data + off + i + 4, &w, 4);
	}
	write_copy(tmpl, data, len);
	r = cc_convert(tmpl, true, &pf, &sum);
	ck_assert(r == 0 || r == -EBADMSG);
	ck_assert_ptr_nonnull(sum);
	if (r == -EBADMSG)
		ck_assert_uint_gt(sum->parse_errors, 0);
	cc_pf_done(&pf);
	unlink(tmpl);
}
END_TEST

/* ---- bprint: strings from the file's printk formats -------------------- */

static bool rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* Whether the message @p..@end has a length-delimited field equal to @want. */
static bool has_string(const uint8_t *p, const uint8_t *end, const char *want)
{
	uint64_t tag, v;

	while (p < end && rd_varint(&p, end, &tag)) {
		if ((tag & 7) == 0) {
			if (!rd_varint(&p, end, &v))
				return false;
		} else if ((tag & 7) == 2) {
			if (!rd_varint(&p, end, &v) || v > (uint64_t)(end - p))
				return false;
			if (v == strlen(want) && memcmp(p, want, v) == 0)
				return true;
			p += v;
		} else {
			return false;
		}
	}
	return false;
}

/* The first printk format of @tep (address and text), as libtraceevent lists them. */
static void first_printk(struct tep_handle *tep, uint64_t *addr, char *text, size_t len)
{
	char *dump = NULL, *sp;
	size_t dump_len = 0;
	FILE *mem = open_memstream(&dump, &dump_len), *saved = stdout;

	ck_assert_ptr_nonnull(mem);
	fflush(stdout);
	stdout = mem;
	tep_print_printk(tep);
	stdout = saved;
	ck_assert_int_eq(fclose(mem), 0);
	ck_assert_ptr_nonnull(dump);
	*addr = strtoull(dump, &sp, 16);
	ck_assert_uint_ne(*addr, 0);
	ck_assert_int_eq(*sp, ' ');
	(void)snprintf(text, len, "%.*s", (int)strcspn(sp + 1, "\n"), sp + 1);
	ck_assert_uint_gt(strlen(text), 0);
	free(dump);
}

/*
 * A sched_waking record of sched-v6.dat rewritten in place as an
 * ftrace/bprint (trace_printk) record whose fmt points at one of the file's
 * printk formats: the converted generic bprint event carries that format's
 * text, as a live recording's does (from tracefs printk_formats).
 */
START_TEST(test_bprint_printk)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-bprint-XXXXXX";
	struct tracecmd_input *h, *ih;
	struct tep_handle *tep;
	struct tep_event *bp, *wk;
	struct tep_record *r;
	struct cc_pf pf = {};
	struct cc_list got = {};
	uint64_t addr, ts = 0, payload = 0, ip = 0xffffffff81000000ull;
	char text[256];
	uint16_t id;
	size_t len, found = 0;
	int field_id = 0;

	damaged_copy(tmpl, &data, &len);
	h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS);
	ck_assert_ptr_nonnull(h);
	ih = tracecmd_buffer_instance_handle(h, 0);
	ck_assert_ptr_nonnull(ih);
	tep = tracecmd_get_tep(ih);
	bp = tep_find_event_by_name(tep, "ftrace", "bprint");
	wk = tep_find_event_by_name(tep, "sched", "sched_waking");
	ck_assert_ptr_nonnull(bp);
	ck_assert_ptr_nonnull(wk);
	ck_assert_int_eq(tep_find_field(bp, "fmt")->offset, 16);
	first_printk(tep, &addr, text, sizeof(text));
	id = (uint16_t)bp->id;
	while ((r = tracecmd_read_data(ih, 0))) {
		if (!payload && tep_data_type(tep, r) == wk->id) {
			/* A short record: a 4-byte header, then the payload. */
			payload = r->offset + 4;
			ts = r->ts;
			ck_assert_uint_le(payload + (uint64_t)r->size, len);
			ck_assert_mem_eq(data + payload, r->data, (size_t)r->size);
			ck_assert_int_ge(r->size, 24);
		}
		tracecmd_free_record(r);
	}
	tracecmd_close(ih);
	tracecmd_close(h);
	ck_assert_uint_gt(payload, 0);
	memcpy(data + payload, &id, 2);
	memcpy(data + payload + 8, &ip, 8);
	memcpy(data + payload + 16, &addr, 8);
	write_copy(tmpl, data, len);

	ck_assert_int_eq(cc_convert(tmpl, true, &pf, &sum), 0);
	cc_from_pftrace(pf.buf, pf.len, &got, &pf);
	for (size_t i = 0; i < pf.trace->n_packet; i++) {
		Perfetto__Protos__FtraceEventBundle *b = pf.trace->packet[i]->ftrace_events;

		if (pf.trace->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			continue;
		for (size_t d = 0; d < b->n_generic_event_descriptors; d++) {
			const ProtobufCBinaryData *ed = &b->generic_event_descriptors[d]->event_descriptor;

			if (memmem(ed->data, ed->len, "bprint", 6))
				field_id = b->generic_event_descriptors[d]->field_id;
		}
		for (size_t e = 0; e < b->n_event && field_id; e++) {
			const Perfetto__Protos__FtraceEvent *ev = b->event[e];

			for (unsigned u = 0; u < ev->base.n_unknown_fields; u++) {
				const ProtobufCMessageUnknownField *f = &ev->base.unknown_fields[u];
				const uint8_t *p = f->data;
				uint64_t n;

				if (f->tag != (uint32_t)field_id)
					continue;
				/* protobuf-c keeps the length prefix. */
				ck_assert(rd_varint(&p, f->data + f->len, &n));
				ck_assert_msg(has_string(p, p + n, text), "bprint without \"%s\"", text);
				ck_assert_uint_eq(ev->timestamp, ts);
				found++;
			}
		}
	}
	ck_assert_int_ge(field_id, 65536);
	ck_assert_uint_eq(found, 1);
	free(got.v);
	cc_pf_done(&pf);
	unlink(tmpl);
}
END_TEST

START_TEST(test_not_a_trace)
{
	_cleanup_free_ struct convert_summary *sum = NULL;
	char tmpl[] = "/tmp/tp-convert-junk-XXXXXX";
	static const uint8_t junk[] = "\027\010Dtracing6\0not really";
	struct cc_pf pf = {};

	write_copy(tmpl, junk, sizeof(junk));
	ck_assert_int_eq(cc_convert(tmpl, true, &pf, &sum), -ENODATA);
	cc_pf_done(&pf);
	ck_assert_int_eq(cc_convert("/nonexistent/trace.dat", true, &pf, &sum), -ENODATA);
	cc_pf_done(&pf);
	unlink(tmpl);
}
END_TEST

/* Cut inside the CPU data: refused or converted up to the cut, no crash. */
START_TEST(test_truncated)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-cut-XXXXXX";
	uint64_t off = page_offset(path, 0, 2);
	struct cc_pf pf = {};
	size_t len;
	int r;

	damaged_copy(tmpl, &data, &len);
	write_copy(tmpl, data, off + 100);
	r = cc_convert(tmpl, true, &pf, &sum);
	ck_assert_msg(r == 0 || r == -EBADMSG || r == -ENODATA, "r=%d", r);
	cc_pf_done(&pf);
	unlink(tmpl);
}
END_TEST

/* Exit status of `traced-probes convert ARGS` (run as its own program,
 * traced-probes-convert, found beside traced-probes in the build tree). */
static int cli(const char *args)
{
	const char *root = getenv("TP_BUILD_ROOT");
	_cleanup_free_ char *cmd = NULL;
	int st;

	ck_assert_int_ge(asprintf(&cmd, "%s/probes/traced-probes convert %s 2>/dev/null",
				  root ? root : ".", args), 0);
	st = system(cmd);
	ck_assert_msg(WIFEXITED(st), "%s: status %d", cmd, st);
	return WEXITSTATUS(st);
}

/* The command line keeps its exit statuses: 0 done, 1 failed, 2 usage. */
START_TEST(test_cli)
{
	_cleanup_free_ char *in = golden("sched-v6.dat");
	_cleanup_free_ char *args = NULL;
	char out[] = "/tmp/tp-convert-cli-XXXXXX";
	int fd = mkstemp(out);
	struct stat st;

	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_ge(asprintf(&args, "-q %s -o %s", in, out), 0);
	ck_assert_int_eq(cli(args), 0);
	ck_assert_int_eq(stat(out, &st), 0);
	ck_assert_int_gt(st.st_size, 0);
	ck_assert_int_eq(cli(""), 2);
	ck_assert_int_eq(cli("--no-such-option"), 2);
	ck_assert_int_eq(cli("/nonexistent.dat -o /dev/null"), 1);
	unlink(out);
}
END_TEST

/*
 * Pages that do not parse are counted and named (issue 20): a page whose
 * header is refused and one cut short at a bad record, on two CPUs of a
 * mutated golden.  The summary says which, by CPU, place and file offset;
 * the command exits 1 and prints them; the undamaged pages convert as before.
 */
START_TEST(test_bad_pages_named)
{
	_cleanup_free_ char *path = golden("sched-v6.dat");
	_cleanup_free_ struct convert_summary *sum = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	_cleanup_free_ char *cmd = NULL, *want_cut = NULL, *want_refused = NULL;
	char tmpl[] = "/tmp/tp-convert-bad-XXXXXX", text[8192];
	const char *root = getenv("TP_BUILD_ROOT");
	uint64_t cut = page_offset(path, 0, 3), refused = page_offset(path, 1, 2);
	struct cc_pf pf = {};
	size_t len, n;
	FILE *f;
	int st;

	damaged_copy(tmpl, &data, &len);
	memset(data + cut + 16, 0xff, 4);          /* the first record's header */
	memset(data + refused + 8, 0, 8);          /* commit 0: no data */
	write_copy(tmpl, data, len);
	ck_assert_int_eq(cc_convert(tmpl, true, &pf, &sum), -EBADMSG);
	ck_assert_uint_eq(sum->bad_pages, 2);
	ck_assert_uint_eq(sum->parse_errors, 2);
	ck_assert_uint_eq(sum->cpu[0].cut_pages, 1);
	ck_assert_uint_eq(sum->cpu[0].refused_pages, 0);
	ck_assert_uint_eq(sum->cpu[1].refused_pages, 1);
	ck_assert_uint_eq(sum->cpu[1].cut_pages, 0);
	ck_assert_uint_eq(sum->n_bad_listed, 2);
	ck_assert_uint_eq(sum->bad[0].cpu, 0);
	ck_assert_uint_eq(sum->bad[0].index, 3);
	ck_assert_int_eq(sum->bad[0].offset, (int64_t)cut);
	ck_assert(!sum->bad[0].refused);
	ck_assert_uint_eq(sum->bad[1].cpu, 1);
	ck_assert_uint_eq(sum->bad[1].index, 2);
	ck_assert_int_eq(sum->bad[1].offset, (int64_t)refused);
	ck_assert(sum->bad[1].refused);
	/* the other pages: every event of the original but those two pages' */
	ck_assert_uint_gt(sum->events, 0);
	cc_pf_done(&pf);

	/* the command names them and fails */
	ck_assert_int_ge(asprintf(&cmd, "%s/probes/traced-probes convert %s -o /dev/null 2>&1",
				  root ? root : ".", tmpl), 0);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	st = pclose(f);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 1);
	ck_assert_int_ge(asprintf(&want_cut, "cpu 0 page 3 (file offset %llu): cut short",
				  (unsigned long long)cut), 0);
	ck_assert_int_ge(asprintf(&want_refused, "cpu 1 page 2 (file offset %llu): refused",
				  (unsigned long long)refused), 0);
	ck_assert_msg(strstr(text, "2 page(s) did not parse: 1 refused whole"), "%s", text);
	ck_assert_msg(strstr(text, want_cut), "%s", text);
	ck_assert_msg(strstr(text, want_refused), "%s", text);
	unlink(tmpl);
}
END_TEST

/* 34 bytes of 0xff over a page header (the mutant): never exit 0. */
START_TEST(test_page_header_overwritten)
{
	_cleanup_free_ char *path = golden("sched-v6.dat"), *args = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	char tmpl[] = "/tmp/tp-convert-ff-XXXXXX";
	struct stat st;
	size_t len;

	for (int cpu = 0; cpu < 2; cpu++) {
		uint64_t off = page_offset(path, cpu, 1);

		damaged_copy(tmpl, &data, &len);
		memset(data + off, 0xff, 34);
		write_copy(tmpl, data, len);
		free(args);
		ck_assert_int_ge(asprintf(&args, "-q %s -o /dev/null", tmpl), 0);
		ck_assert_int_eq(cli(args), 1);
		unlink(tmpl);
		strcpy(tmpl, "/tmp/tp-convert-ff-XXXXXX");
		free(data);
		data = NULL;
	}
	/* -o /dev/null is written in place, never renamed over (as root it could be) */
	ck_assert_int_eq(stat("/dev/null", &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("convert");
	TCase *tc = tcase_create("golden");

	tcase_add_loop_test(tc, test_golden, 0, (int)ARRAY_SIZE(goldens));
	tcase_add_test(tc, test_golden_symbols);
	tcase_add_test(tc, test_golden_losses);
	tcase_add_test(tc, test_no_compact_fields);
	suite_add_tcase(s, tc);
	tc = tcase_create("damaged");
	tcase_add_test(tc, test_lost_flag);
	tcase_add_test(tc, test_commit_past_end);
	tcase_add_test(tc, test_first_page_damaged);
	tcase_add_test(tc, test_reader_loop_killed);
	tcase_add_test(tc, test_garbage_events);
	tcase_add_test(tc, test_not_a_trace);
	tcase_add_test(tc, test_bprint_printk);
	tcase_add_test(tc, test_truncated);
	suite_add_tcase(s, tc);
	tc = tcase_create("cli");
	tcase_add_test(tc, test_cli);
	tcase_add_test(tc, test_bad_pages_named);
	tcase_add_test(tc, test_page_header_overwritten);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	tracecmd_set_loglevel(TEP_LOG_NONE);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
