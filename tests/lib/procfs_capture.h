/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared by the procfs suites (test_procfs, test_procfs_real): a packet
 * sink bound to a plain buffer, each packet wrapped as Trace.packet
 * (field 1) so the whole buffer decodes as a Trace with protobuf-c, and
 * look-ups into the decoded ProcessTree and ProcessStats packets.
 */

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ds/ds.h"
#include "probes/procfs/procfs.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "protos/pbw.h"
#include "util/util.h"

typedef Perfetto__Protos__ProcessTree__Process TreeProcess;
typedef Perfetto__Protos__ProcessTree__Thread TreeThread;
typedef Perfetto__Protos__ProcessStats__Process StatsProcess;
typedef Perfetto__Protos__TracePacket Packet;

/* ---- capture sink ------------------------------------------------------- */

struct capture {
	uint8_t *buf;
	size_t cap;
	struct pbw w;
	bool inited;
	unsigned packets;
	unsigned flushes;
	Perfetto__Protos__Trace *trace;
};

static inline struct pbw *cap_begin(void *userdata)
{
	struct capture *c = userdata;

	if (!c->inited) {
		pbw_init(&c->w, c->buf, c->cap, NULL, NULL);
		c->inited = true;
	}
	pbw_begin_nested(&c->w, 1); /* Trace.packet */
	return &c->w;
}

static inline int cap_end(void *userdata)
{
	struct capture *c = userdata;

	(void)pbw_end_nested(&c->w);
	c->packets++;
	return pbw_overflowed(&c->w) ? -ENOSPC : 0;
}

static inline void cap_flush(void *userdata)
{
	((struct capture *)userdata)->flushes++;
}

static inline void cap_init(struct capture *c, size_t cap)
{
	*c = (struct capture){ .cap = cap };
	c->buf = malloc(cap);
	ck_assert_ptr_nonnull(c->buf);
}

static inline struct pbw_sink cap_sink(struct capture *c)
{
	return (struct pbw_sink){
		.begin_packet = cap_begin,
		.end_packet = cap_end,
		.flush = cap_flush,
		.userdata = c,
	};
}

static inline const Perfetto__Protos__Trace *cap_decode(struct capture *c)
{
	if (c->trace)
		perfetto__protos__trace__free_unpacked(c->trace, NULL);
	c->trace = NULL;
	if (!c->inited)
		return NULL;
	ck_assert(!pbw_overflowed(&c->w));
	c->trace = perfetto__protos__trace__unpack(NULL, pbw_position(&c->w), c->buf);
	ck_assert_msg(c->trace, "captured packets do not decode");
	ck_assert_uint_eq(c->trace->n_packet, c->packets);
	return c->trace;
}

static inline void cap_done(struct capture *c)
{
	if (c->trace)
		perfetto__protos__trace__free_unpacked(c->trace, NULL);
	free(c->buf);
	*c = (struct capture){};
}

static inline const Perfetto__Protos__ProcessTree *packet_tree(const Packet *p)
{
	return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE ? p->process_tree
										: NULL;
}

static inline const Perfetto__Protos__ProcessStats *packet_stats(const Packet *p)
{
	return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_STATS ? p->process_stats
										 : NULL;
}

/* The only entry for @pid across packets [from, n_packet); NULL if none. */
static inline const TreeProcess *find_process(const Perfetto__Protos__Trace *t, size_t from, int32_t pid)
{
	const TreeProcess *found = NULL;

	for (size_t i = from; i < t->n_packet; i++) {
		const Perfetto__Protos__ProcessTree *tree = packet_tree(t->packet[i]);

		for (size_t j = 0; tree && j < tree->n_processes; j++)
			if (tree->processes[j]->pid == pid) {
				ck_assert_msg(!found, "process %d written twice", pid);
				found = tree->processes[j];
			}
	}
	return found;
}

static inline const TreeThread *find_thread(const Perfetto__Protos__Trace *t, size_t from, int32_t tid)
{
	const TreeThread *found = NULL;

	for (size_t i = from; i < t->n_packet; i++) {
		const Perfetto__Protos__ProcessTree *tree = packet_tree(t->packet[i]);

		for (size_t j = 0; tree && j < tree->n_threads; j++)
			if (tree->threads[j]->tid == tid) {
				ck_assert_msg(!found, "thread %d written twice", tid);
				found = tree->threads[j];
			}
	}
	return found;
}

static inline const StatsProcess *find_stats(const Packet *p, int32_t pid)
{
	const Perfetto__Protos__ProcessStats *s = packet_stats(p);

	for (size_t j = 0; s && j < s->n_processes; j++)
		if (s->processes[j]->pid == pid)
			return s->processes[j];
	return NULL;
}

static inline Perfetto__Protos__ProcessStatsConfig cfg_default(void)
{
	Perfetto__Protos__ProcessStatsConfig cfg = PERFETTO__PROTOS__PROCESS_STATS_CONFIG__INIT;
	return cfg;
}

#define CFG_SET(cfg, field, v)              \
	do {                                \
		(cfg).has_##field = true;   \
		(cfg).field = (v);          \
	} while (0)

static inline bool cmdline_is(const TreeProcess *p, const char *const *args, size_t n)
{
	if (p->n_cmdline != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(p->cmdline[i], args[i]) != 0)
			return false;
	return true;
}
