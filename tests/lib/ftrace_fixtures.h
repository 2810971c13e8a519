/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared fixtures of the ftrace data-path tests and fuzzer: event formats
 * from a real kernel, a builder for ring-buffer pages, and a packet sink
 * that collects bundles into a Trace message for decoding.
 */

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "protos/pbw.h"

/* header_page and event formats copied from a 6.18 x86_64 kernel. */
static const char fx_header_page[] =
	"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
	"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
	"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
	"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

static const char fx_fmt_sched_switch[] =
	"name: sched_switch\n"
	"ID: 372\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
	"\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
	"\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n"
	"\n"
	"print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\", { 0x00000001, \"S\" }, { 0x00000002, \"D\" }, { 0x00000004, \"T\" }, { 0x00000008, \"t\" }, { 0x00000010, \"X\" }, { 0x00000020, \"Z\" }, { 0x00000040, \"P\" }, { 0x00000080, \"I\" }) : \"R\", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\", REC->next_comm, REC->next_pid, REC->next_prio\n";

static const char fx_fmt_sched_waking[] =
	"name: sched_waking\n"
	"ID: 375\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n"
	"\n"
	"print fmt: \"comm=%s pid=%d prio=%d target_cpu=%03d\", REC->comm, REC->pid, REC->prio, REC->target_cpu\n";

static const char fx_fmt_sched_stat_runtime[] =
	"name: sched_stat_runtime\n"
	"ID: 363\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:__data_loc char[] comm;\toffset:8;\tsize:4;\tsigned:0;\n"
	"\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n"
	"\tfield:u64 runtime;\toffset:16;\tsize:8;\tsigned:0;\n"
	"\n"
	"print fmt: \"comm=%s pid=%d runtime=%Lu [ns]\", __get_str(comm), REC->pid, (unsigned long long)REC->runtime\n";

static const char fx_fmt_ipi_send_cpu[] =
	"name: ipi_send_cpu\n"
	"ID: 354\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:unsigned int cpu;\toffset:8;\tsize:4;\tsigned:0;\n"
	"\tfield:void * callsite;\toffset:16;\tsize:8;\tsigned:0;\n"
	"\tfield:void * callback;\toffset:24;\tsize:8;\tsigned:0;\n"
	"\n"
	"print fmt: \"cpu=%u callsite=%pS callback=%pS\", REC->cpu, REC->callsite, REC->callback\n";

static const char fx_fmt_print[] =
	"name: print\n"
	"ID: 5\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
	"\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n"
	"\n"
	"print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n";

static const char fx_fmt_task_rename[] =
	"name: task_rename\n"
	"ID: 204\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n"
	"\tfield:char oldcomm[16];\toffset:12;\tsize:16;\tsigned:0;\n"
	"\tfield:char newcomm[16];\toffset:28;\tsize:16;\tsigned:0;\n"
	"\tfield:short oom_score_adj;\toffset:44;\tsize:2;\tsigned:1;\n"
	"\n"
	"print fmt: \"pid=%d oldcomm=%s newcomm=%s oom_score_adj=%hd\", REC->pid, REC->oldcomm, REC->newcomm, REC->oom_score_adj\n";

static const char fx_fmt_sched_process_exec[] =
	"name: sched_process_exec\n"
	"ID: 365\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n"
	"\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n"
	"\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n"
	"\n"
	"print fmt: \"filename=%s pid=%d old_pid=%d\", __get_str(filename), REC->pid, REC->old_pid\n";

static const char fx_fmt_sys_enter[] =
	"name: sys_enter\n"
	"ID: 443\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n"
	"\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n"
	"\n"
	"print fmt: \"NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)\", REC->id, REC->args[0], REC->args[1], REC->args[2], REC->args[3], REC->args[4], REC->args[5]\n";

static const char fx_fmt_hrtimer_expire_entry[] =
	"name: hrtimer_expire_entry\n"
	"ID: 459\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n"
	"\tfield:s64 now;\toffset:16;\tsize:8;\tsigned:1;\n"
	"\tfield:void * function;\toffset:24;\tsize:8;\tsigned:0;\n"
	"\n"
	"print fmt: \"hrtimer=%p function=%ps now=%llu\", REC->hrtimer, REC->function, (unsigned long long) REC->now\n";

/* Event ids in the fixture formats above. */
enum {
	FX_ID_PRINT = 5,
	FX_ID_TASK_RENAME = 204,
	FX_ID_IPI_SEND_CPU = 354,
	FX_ID_SCHED_STAT_RUNTIME = 363,
	FX_ID_SCHED_PROCESS_EXEC = 365,
	FX_ID_SCHED_SWITCH = 372,
	FX_ID_SCHED_WAKING = 375,
	FX_ID_SYS_ENTER = 443,
	FX_ID_HRTIMER_EXPIRE_ENTRY = 459,
};

static inline struct ftrace_format_table *fx_table(void)
{
	static const struct { const char *g, *n, *fmt; } fx[] = {
		{ "sched", "sched_switch", fx_fmt_sched_switch },
		{ "sched", "sched_waking", fx_fmt_sched_waking },
		{ "sched", "sched_stat_runtime", fx_fmt_sched_stat_runtime },
		{ "ipi", "ipi_send_cpu", fx_fmt_ipi_send_cpu },
		{ "ftrace", "print", fx_fmt_print },
		{ "task", "task_rename", fx_fmt_task_rename },
		{ "sched", "sched_process_exec", fx_fmt_sched_process_exec },
		{ "raw_syscalls", "sys_enter", fx_fmt_sys_enter },
		{ "timer", "hrtimer_expire_entry", fx_fmt_hrtimer_expire_entry },
	};
	struct ftrace_format_table *t = NULL;

	if (ftrace_format_table_new_from_text(fx_header_page, &t) < 0)
		return NULL;
	for (size_t i = 0; i < sizeof(fx) / sizeof(fx[0]); i++)
		if (ftrace_format_table_add_format(t, fx[i].g, fx[i].n, fx[i].fmt, NULL) < 0)
			return ftrace_format_table_free(t);
	return t;
}

/* ---- page builder ------------------------------------------------------- */

#define FX_PAGE_SIZE 4096u
#define FX_HDR 16u

struct fx_page {
	uint8_t b[FX_PAGE_SIZE];
	size_t pos;
	uint32_t flags; /* commit flag bits */
};

static inline void fx_page_init(struct fx_page *p, uint64_t ts)
{
	memset(p, 0, sizeof(*p));
	memcpy(p->b, &ts, 8);
	p->pos = FX_HDR;
}

static inline void fx_put32(struct fx_page *p, uint32_t v)
{
	assert(p->pos + 4 <= FX_PAGE_SIZE);
	memcpy(p->b + p->pos, &v, 4);
	p->pos += 4;
}

static inline void fx_put(struct fx_page *p, const void *d, size_t n)
{
	assert(p->pos + n <= FX_PAGE_SIZE);
	memcpy(p->b + p->pos, d, n);
	p->pos += n;
}

static inline uint32_t fx_rec_hdr(uint32_t type_len, uint32_t delta)
{
	return (type_len & 0x1f) | (delta << 5);
}

/* A data record, padded to 4 bytes; long ones use the type-0 form. */
static inline void fx_event(struct fx_page *p, uint32_t delta, const void *payload, size_t len)
{
	size_t padded = (len + 3) & ~(size_t)3;
	static const uint8_t zeros[4];

	if (padded == 0)
		padded = 4;
	if (padded <= 28 * 4) {
		fx_put32(p, fx_rec_hdr((uint32_t)(padded / 4), delta));
	} else {
		fx_put32(p, fx_rec_hdr(0, delta));
		fx_put32(p, (uint32_t)padded + 4);
	}
	fx_put(p, payload, len);
	fx_put(p, zeros, padded - len);
}

/* Same, always in the type-0 (explicit length) form. */
static inline void fx_event_long(struct fx_page *p, uint32_t delta, const void *payload, size_t len)
{
	size_t padded = (len + 3) & ~(size_t)3;
	static const uint8_t zeros[4];

	fx_put32(p, fx_rec_hdr(0, delta));
	fx_put32(p, (uint32_t)padded + 4);
	fx_put(p, payload, len);
	fx_put(p, zeros, padded - len);
}

static inline void fx_time_extend(struct fx_page *p, uint32_t delta, uint32_t ext)
{
	fx_put32(p, fx_rec_hdr(30, delta));
	fx_put32(p, ext);
}

static inline void fx_abs_ts(struct fx_page *p, uint64_t ts)
{
	fx_put32(p, fx_rec_hdr(31, (uint32_t)(ts & ((1u << 27) - 1))));
	fx_put32(p, (uint32_t)(ts >> 27));
}

/* Padding record of @total bytes (header included, >= 8). */
static inline void fx_padding(struct fx_page *p, uint32_t delta, uint32_t total)
{
	fx_put32(p, fx_rec_hdr(29, delta));
	fx_put32(p, total - 4);
	p->pos += total - 8;
}

/* Seal: commit = data length | flags. */
static inline void fx_page_finish(struct fx_page *p)
{
	uint64_t commit = (uint64_t)(p->pos - FX_HDR) | p->flags;

	memcpy(p->b + 8, &commit, 8);
}

static inline void fx_page_set_missed(struct fx_page *p, bool stored, uint64_t count)
{
	p->flags |= FTRACE_PAGE_MISSED_EVENTS;
	if (stored) {
		p->flags |= FTRACE_PAGE_MISSED_STORED;
		memcpy(p->b + p->pos, &count, 8);
	}
}

/* Copy built pages into one contiguous run, as read() leaves them. */
static inline uint8_t *fx_pack(const struct fx_page *pages, size_t n)
{
	uint8_t *out = malloc(n * FX_PAGE_SIZE);

	assert(out);
	for (size_t i = 0; i < n; i++)
		memcpy(out + i * FX_PAGE_SIZE, pages[i].b, FX_PAGE_SIZE);
	return out;
}

/*
 * The events of @n built 4 KiB pages in sub-buffers of @size bytes (a
 * larger power of two), as a kernel with buffer_subbuf_size_kb would have
 * written them: the first page's time in the header, then each page's data
 * in order, every page after the first in a sub-buffer led by an absolute
 * timestamp record of that page's time, so every event keeps its time.  A
 * page with missed events starts a sub-buffer of its own, which carries its
 * flags and stored count (after the data, as the kernel stores it).
 * Returns: @*ret_n sub-buffers, contiguous, malloc'd.
 */
static inline uint8_t *fx_merge(const struct fx_page *pages, size_t n, size_t size, size_t *ret_n)
{
	const uint64_t lost = FTRACE_PAGE_MISSED_EVENTS | FTRACE_PAGE_MISSED_STORED;
	uint8_t *out = calloc(n ? n : 1, size), *sb = NULL;
	uint64_t flags = 0, missed = 0;
	size_t out_n = 0, pos = 0;

	assert(out && size > FX_PAGE_SIZE && (size & (size - 1)) == 0);
	for (size_t i = 0; i <= n; i++) {
		uint64_t ts = 0, commit = 0;
		size_t len = 0;
		bool fresh;

		if (i < n) {
			memcpy(&ts, pages[i].b, 8);
			memcpy(&commit, pages[i].b + 8, 8);
			len = (size_t)(commit & FTRACE_PAGE_COMMIT_MASK);
		}
		fresh = i == n || !sb || (commit & FTRACE_PAGE_MISSED_EVENTS) || pos + 8 + len + 8 > size;
		if (fresh && sb) {
			uint64_t c = (uint64_t)(pos - FX_HDR) | flags;

			memcpy(sb + 8, &c, 8);
			if (flags & FTRACE_PAGE_MISSED_STORED)
				memcpy(sb + pos, &missed, 8);
		}
		if (i == n)
			break;
		if (fresh) {
			sb = out + out_n++ * size;
			memcpy(sb, &ts, 8);
			pos = FX_HDR;
			flags = commit & lost;
			if (flags & FTRACE_PAGE_MISSED_STORED)
				memcpy(&missed, pages[i].b + FX_HDR + len, 8);
		} else {
			uint32_t w[2] = { fx_rec_hdr(31, (uint32_t)(ts & ((1u << 27) - 1))), (uint32_t)(ts >> 27) };

			memcpy(sb + pos, w, 8);
			pos += 8;
		}
		memcpy(sb + pos, pages[i].b + FX_HDR, len);
		pos += len;
	}
	*ret_n = out_n;
	return out;
}

/* ---- record payloads ---------------------------------------------------- */

/* Kernel comms are NUL-padded, not necessarily NUL-terminated. */
static inline void fx_comm(uint8_t *dst, const char *s)
{
	memset(dst, 0, 16);
	memcpy(dst, s, strnlen(s, 16));
}

static inline void fx_common(uint8_t *r, uint16_t id, uint8_t flags, int32_t pid)
{
	memcpy(r, &id, 2);
	r[2] = flags;
	r[3] = 0;
	memcpy(r + 4, &pid, 4);
}

static inline size_t fx_sched_switch(uint8_t r[64], int32_t common_pid, const char *prev_comm,
				     int32_t prev_pid, int32_t prev_prio, int64_t prev_state,
				     const char *next_comm, int32_t next_pid, int32_t next_prio)
{
	memset(r, 0, 64);
	fx_common(r, FX_ID_SCHED_SWITCH, 0, common_pid);
	fx_comm(r + 8, prev_comm);
	memcpy(r + 24, &prev_pid, 4);
	memcpy(r + 28, &prev_prio, 4);
	memcpy(r + 32, &prev_state, 8);
	fx_comm(r + 40, next_comm);
	memcpy(r + 56, &next_pid, 4);
	memcpy(r + 60, &next_prio, 4);
	return 64;
}

static inline size_t fx_sched_waking(uint8_t r[36], uint8_t flags, int32_t common_pid,
				     const char *comm, int32_t pid, int32_t prio, int32_t target_cpu)
{
	memset(r, 0, 36);
	fx_common(r, FX_ID_SCHED_WAKING, flags, common_pid);
	fx_comm(r + 8, comm);
	memcpy(r + 24, &pid, 4);
	memcpy(r + 28, &prio, 4);
	memcpy(r + 32, &target_cpu, 4);
	return 36;
}

/* sched_stat_runtime: __data_loc comm at 8, pid at 12, runtime at 16, string at 24. */
static inline size_t fx_stat_runtime(uint8_t r[64], int32_t common_pid, const char *comm,
				     int32_t pid, uint64_t runtime)
{
	uint16_t len = (uint16_t)(strlen(comm) + 1);
	uint32_t loc = 24u | ((uint32_t)len << 16);

	memset(r, 0, 64);
	fx_common(r, FX_ID_SCHED_STAT_RUNTIME, 0, common_pid);
	memcpy(r + 8, &loc, 4);
	memcpy(r + 12, &pid, 4);
	memcpy(r + 16, &runtime, 8);
	memcpy(r + 24, comm, len);
	return 24 + len;
}

static inline size_t fx_ipi_send_cpu(uint8_t r[32], int32_t common_pid, uint32_t cpu,
				     uint64_t callsite, uint64_t callback)
{
	memset(r, 0, 32);
	fx_common(r, FX_ID_IPI_SEND_CPU, 0, common_pid);
	memcpy(r + 8, &cpu, 4);
	memcpy(r + 16, &callsite, 8);
	memcpy(r + 24, &callback, 8);
	return 32;
}

/* ---- a sink that collects packets into one Trace message ---------------- */

struct fx_sink {
	struct pbw w;
	uint8_t *buf;
	size_t cap;
	int packets;
	struct pbw_sink sink;
};

static inline struct pbw *fx_sink_begin(void *ctx)
{
	struct fx_sink *s = ctx;

	pbw_begin_nested(&s->w, 1); /* Trace.packet */
	return &s->w;
}

static inline int fx_sink_end(void *ctx)
{
	struct fx_sink *s = ctx;

	(void)pbw_end_nested(&s->w);
	s->packets++;
	return 0;
}

static inline void fx_sink_init(struct fx_sink *s, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->buf = malloc(cap);
	assert(s->buf);
	s->cap = cap;
	pbw_init(&s->w, s->buf, cap, NULL, NULL);
	s->sink = (struct pbw_sink){ .begin_packet = fx_sink_begin, .end_packet = fx_sink_end,
				     .userdata = s };
}

static inline size_t fx_sink_len(const struct fx_sink *s)
{
	return (size_t)(s->w.cur - s->buf);
}

static inline void fx_sink_done(struct fx_sink *s)
{
	free(s->buf);
	s->buf = NULL;
}
