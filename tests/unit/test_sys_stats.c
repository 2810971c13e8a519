/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.sys_stats and linux.system_info: each parser on fixture files
 * (tests/data/sys_stats/host: copied from a 2-CPU VM; edge: hand-made
 * missing fields, junk, unreadable files), a /proc/stat of 4096 CPUs and
 * one of 1 MiB made here, the data sources through their ds_ops on fixture
 * roots, and sys_stats on the real /proc and /sys for a few polls.
 *
 * Packets go to a sink over a plain buffer: each is wrapped as Trace.packet
 * (field 1), so the buffer decodes as a Trace with protobuf-c.
 */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "loop/loop.h"
#include "protos/pbtxt.h"
#include "probes/sys_stats/sys_stats.h"
#include "probes/sys_stats/sys_stats_internal.h"
#include "probes/system_info/system_info.h"
#include "probes/system_info/system_info_internal.h"
#include "protos/perfetto/common/sys_stats_counters.pb-c.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "protos/perfetto/config/sys_stats/sys_stats_config.pb-c.h"
#include "protos/perfetto/config/system_info/system_info_config.pb-c.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "protos/pbw.h"
#include "util/util.h"

typedef Perfetto__Protos__SysStats SysStats;
typedef Perfetto__Protos__SysStatsConfig SysStatsConfig;
typedef Perfetto__Protos__TracePacket Packet;

#define NS_PER_TICK UINT64_C(10000000)

/* ---- fixtures ------------------------------------------------------------ */

static char data_dir[PATH_MAX];

static void find_data_dir(void)
{
	const char *root = getenv("TP_SOURCE_ROOT");

	(void)snprintf(data_dir, sizeof(data_dir), "%s/tests/data/sys_stats", root ? root : ".");
}

static char *fixture(const char *tree, const char *path, size_t *ret_len)
{
	char full[PATH_MAX * 2];
	char *buf = NULL;
	int r;

	(void)snprintf(full, sizeof(full), "%s/%s/%s", data_dir, tree, path);
	r = read_full_file_at(AT_FDCWD, full, 64u << 20, &buf, ret_len);
	ck_assert_msg(r == 0, "%s: %s", full, strerror(-r));
	return buf;
}

static void root_path(char *buf, size_t len, const char *tree, const char *which)
{
	ck_assert_uint_lt(strlen(data_dir) + strlen(tree) + strlen(which) + 2, len);
	(void)snprintf(buf, len, "%s/%s/%s", data_dir, tree, which);
}

/* ---- parsing into a SysStats message ------------------------------------- */

struct parsed {
	uint8_t *buf;
	size_t n;
	SysStats *msg;
};

enum parser {
	P_MEMINFO,
	P_VMSTAT,
	P_STAT,
	P_BUDDY,
	P_DISK,
	P_PSI_IO,
	P_SLAB,
};

static size_t run_parser(enum parser p, const char *text, size_t len, const struct sys_stats_keymap *keys,
			 unsigned mask, struct pbw *w)
{
	switch (p) {
	case P_MEMINFO:
		return sys_stats_parse_meminfo(text, len, keys, w);
	case P_VMSTAT:
		return sys_stats_parse_vmstat(text, len, keys, w);
	case P_STAT:
		return sys_stats_parse_stat(text, len, mask, NS_PER_TICK, w);
	case P_BUDDY:
		return sys_stats_parse_buddyinfo(text, len, w);
	case P_DISK:
		return sys_stats_parse_diskstats(text, len, w);
	case P_PSI_IO:
		return sys_stats_parse_psi(text, len, SYS_STATS_PSI_IO_SOME, w);
	case P_SLAB:
		return sys_stats_parse_slabinfo(text, len, w);
	}
	return 0;
}

static void parse_text(struct parsed *out, enum parser p, const char *text, size_t len,
		       const struct sys_stats_keymap *keys, unsigned mask)
{
	size_t cap = len * 8 + 4096;
	struct pbw w;

	out->buf = malloc(cap);
	ck_assert_ptr_nonnull(out->buf);
	pbw_init(&w, out->buf, cap, NULL, NULL);
	out->n = run_parser(p, text, len, keys, mask, &w);
	ck_assert(!pbw_overflowed(&w));
	out->msg = perfetto__protos__sys_stats__unpack(NULL, pbw_position(&w), out->buf);
	ck_assert_msg(out->msg, "parser output does not decode");
}

static void parse_fixture(struct parsed *out, enum parser p, const char *tree, const char *path,
			  const struct sys_stats_keymap *keys, unsigned mask)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	text = fixture(tree, path, &len);
	parse_text(out, p, text, len, keys, mask);
}

static void parsed_done(struct parsed *p)
{
	perfetto__protos__sys_stats__free_unpacked(p->msg, NULL);
	free(p->buf);
	*p = (struct parsed){};
}

/* ---- counter tables ------------------------------------------------------ */

START_TEST(test_counter_tables)
{
	const ProtobufCEnumDescriptor *md = &perfetto__protos__meminfo_counters__descriptor;
	const ProtobufCEnumDescriptor *vd = &perfetto__protos__vmstat_counters__descriptor;
	struct sys_stats_keymap m;

	/* every counter of the schema but *_UNSPECIFIED has a key */
	sys_stats_keymap_init(&m, SYS_STATS_FILE_MEMINFO, NULL);
	ck_assert_uint_eq(m.n, md->n_values - 1);
	sys_stats_keymap_init(&m, SYS_STATS_FILE_VMSTAT, NULL);
	ck_assert_uint_eq(m.n, vd->n_values - 1);

	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_MEMINFO, "MemTotal"),
			  PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL);
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_MEMINFO, "Active(anon)"),
			  PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_ACTIVE_ANON);
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_MEMINFO, "SUnreclaim"),
			  PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_SLAB_UNRECLAIMABLE);
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_MEMINFO, "Committed_AS"),
			  PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_COMMITED_AS);
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_MEMINFO, "ION_heap_pool"),
			  PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_ION_HEAP_POOL);
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_VMSTAT, "nr_free_pages"),
			  PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_FREE_PAGES);
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_VMSTAT, "workingset_restore_file"),
			  PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_WORKINGSET_RESTORE_FILE);
	/* a key of the other file, or of neither */
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_VMSTAT, "MemTotal"), 0);
	ck_assert_uint_eq(sys_stats_counter_number(SYS_STATS_FILE_MEMINFO, "MemUnspecified"), 0);

	/* every key the hash finds is the one the table has */
	sys_stats_keymap_init(&m, SYS_STATS_FILE_VMSTAT, NULL);
	for (size_t i = 1; i < vd->n_values; i++) {
		char key[128];
		size_t n = strlen(vd->values[i].name) - strlen("VMSTAT_");

		for (size_t j = 0; j <= n; j++)
			key[j] = (char)tolower(vd->values[i].name[strlen("VMSTAT_") + j]);
		ck_assert_uint_eq(sys_stats_keymap_find(&m, key, n), (unsigned)vd->values[i].value);
	}
}
END_TEST

/* The counters of @text the table knows, counted line by line with strcmp. */
static size_t known_keys(const char *text, enum sys_stats_counter_file f)
{
	_cleanup_free_ char *copy = strdup(text);
	size_t n = 0;
	char *save = NULL;

	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[128];

		if (sscanf(line, "%127[^: ]", key) == 1 && sys_stats_counter_number(f, key))
			n++;
	}
	return n;
}

START_TEST(test_meminfo)
{
	_cleanup_free_ char *text = NULL;
	struct sys_stats_keymap all, some;
	uint64_t enabled[SYS_STATS_COUNTER_MAX / 64] = {};
	struct parsed p;
	size_t len;

	sys_stats_keymap_init(&all, SYS_STATS_FILE_MEMINFO, NULL);
	text = fixture("host", "proc/meminfo", &len);
	parse_text(&p, P_MEMINFO, text, len, &all, 0);
	ck_assert_uint_eq(p.msg->n_meminfo, known_keys(text, SYS_STATS_FILE_MEMINFO));
	ck_assert_uint_ge(p.msg->n_meminfo, 30);
	ck_assert_int_eq(p.msg->meminfo[0]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL);
	ck_assert_uint_eq(p.msg->meminfo[0]->value, 24684084);
	parsed_done(&p);

	/* only the listed counters */
	enabled[0] = (1u << PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE) |
		     (1u << PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_CACHED);
	sys_stats_keymap_init(&some, SYS_STATS_FILE_MEMINFO, enabled);
	parse_text(&p, P_MEMINFO, text, len, &some, 0);
	ck_assert_uint_eq(p.msg->n_meminfo, 2);
	ck_assert_int_eq(p.msg->meminfo[0]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE);
	ck_assert_int_eq(p.msg->meminfo[1]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_CACHED);
	parsed_done(&p);

	/* junk values, unknown keys, a missing value, no final newline */
	parse_fixture(&p, P_MEMINFO, "edge", "proc/meminfo", &all, 0);
	ck_assert_uint_eq(p.n, 4);
	ck_assert_uint_eq(p.msg->n_meminfo, 4);
	ck_assert_int_eq(p.msg->meminfo[0]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL);
	ck_assert_uint_eq(p.msg->meminfo[0]->value, 1000);
	ck_assert_int_eq(p.msg->meminfo[1]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_ACTIVE_ANON);
	ck_assert_uint_eq(p.msg->meminfo[1]->value, 42);
	ck_assert_int_eq(p.msg->meminfo[2]->key,
			 PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_SLAB_RECLAIMABLE);
	ck_assert_int_eq(p.msg->meminfo[3]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_COMMITED_AS);
	ck_assert_uint_eq(p.msg->meminfo[3]->value, 123456789012ull);
	parsed_done(&p);
}
END_TEST

START_TEST(test_vmstat)
{
	_cleanup_free_ char *text = NULL;
	struct sys_stats_keymap all;
	struct parsed p;
	size_t len;

	sys_stats_keymap_init(&all, SYS_STATS_FILE_VMSTAT, NULL);
	text = fixture("host", "proc/vmstat", &len);
	parse_text(&p, P_VMSTAT, text, len, &all, 0);
	ck_assert_uint_eq(p.msg->n_vmstat, known_keys(text, SYS_STATS_FILE_VMSTAT));
	ck_assert_uint_ge(p.msg->n_vmstat, 100);
	ck_assert_int_eq(p.msg->vmstat[0]->key, PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_FREE_PAGES);
	ck_assert_uint_eq(p.msg->vmstat[0]->value, 1020294);
	parsed_done(&p);

	parse_fixture(&p, P_VMSTAT, "edge", "proc/vmstat", &all, 0);
	ck_assert_uint_eq(p.msg->n_vmstat, 3);
	ck_assert_uint_eq(p.msg->vmstat[0]->value, 10);
	/* too many digits: saturated, not wrapped */
	ck_assert_int_eq(p.msg->vmstat[1]->key,
			 PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_WORKINGSET_REFAULT_FILE);
	ck_assert_uint_eq(p.msg->vmstat[1]->value, UINT64_MAX);
	ck_assert_int_eq(p.msg->vmstat[2]->key, PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_PGFAULT);
	ck_assert_uint_eq(p.msg->vmstat[2]->value, 77);
	parsed_done(&p);
}
END_TEST

START_TEST(test_stat)
{
	const Perfetto__Protos__SysStats__CpuTimes *c;
	struct parsed p;

	parse_fixture(&p, P_STAT, "host", "proc/stat", NULL, SYS_STATS_STAT_ALL);
	ck_assert_uint_eq(p.msg->n_cpu_stat, 2);
	c = p.msg->cpu_stat[0];
	ck_assert_uint_eq(c->cpu_id, 0);
	ck_assert_uint_eq(c->user_ns, 22812 * NS_PER_TICK);
	ck_assert_uint_eq(c->user_nice_ns, 16469 * NS_PER_TICK);
	ck_assert_uint_eq(c->system_mode_ns, 13606 * NS_PER_TICK);
	ck_assert_uint_eq(c->idle_ns, 15793 * NS_PER_TICK);
	ck_assert_uint_eq(c->io_wait_ns, 348 * NS_PER_TICK);
	ck_assert(c->has_irq_ns);
	ck_assert_uint_eq(c->irq_ns, 0);
	ck_assert_uint_eq(c->softirq_ns, 195 * NS_PER_TICK);
	ck_assert_uint_eq(c->steal_ns, 327 * NS_PER_TICK);
	ck_assert_uint_eq(p.msg->cpu_stat[1]->cpu_id, 1);
	ck_assert(p.msg->has_num_forks);
	ck_assert_uint_eq(p.msg->num_forks, 31399);
	ck_assert(p.msg->has_num_irq_total);
	ck_assert_uint_gt(p.msg->n_num_irq, 0);
	for (size_t i = 0; i < p.msg->n_num_irq; i++)
		ck_assert_uint_gt(p.msg->num_irq[i]->count, 0);
	ck_assert_uint_eq(p.msg->num_softirq_total, 482404);
	ck_assert_uint_eq(p.msg->n_num_softirq, 10);
	ck_assert_int_eq(p.msg->num_softirq[9]->irq, 9);
	ck_assert_uint_eq(p.msg->num_softirq[9]->count, 176867);
	parsed_done(&p);

	/* only what stat_counters asks for */
	parse_fixture(&p, P_STAT, "host", "proc/stat", NULL, SYS_STATS_STAT_FORK_COUNT);
	ck_assert_uint_eq(p.msg->n_cpu_stat, 0);
	ck_assert(!p.msg->has_num_irq_total);
	ck_assert(!p.msg->has_num_softirq_total);
	ck_assert_uint_eq(p.msg->num_forks, 31399);
	parsed_done(&p);

	/* short cpu line, a cpu with no number, junk fork count */
	parse_fixture(&p, P_STAT, "edge", "proc/stat", NULL, SYS_STATS_STAT_ALL);
	ck_assert_uint_eq(p.msg->n_cpu_stat, 2);
	ck_assert_uint_eq(p.msg->cpu_stat[0]->cpu_id, 0);
	ck_assert_uint_eq(p.msg->cpu_stat[0]->system_mode_ns, 3 * NS_PER_TICK);
	ck_assert(p.msg->cpu_stat[0]->has_steal_ns);
	ck_assert_uint_eq(p.msg->cpu_stat[0]->steal_ns, 0);
	ck_assert_uint_eq(p.msg->cpu_stat[1]->cpu_id, 7);
	ck_assert_uint_eq(p.msg->cpu_stat[1]->steal_ns, 80 * NS_PER_TICK);
	ck_assert(!p.msg->has_num_forks);
	ck_assert_uint_eq(p.msg->num_irq_total, 100);
	ck_assert_uint_eq(p.msg->n_num_irq, 2);
	ck_assert_int_eq(p.msg->num_irq[0]->irq, 1);
	ck_assert_uint_eq(p.msg->num_irq[0]->count, 5);
	ck_assert_int_eq(p.msg->num_irq[1]->irq, 3);
	ck_assert_uint_eq(p.msg->num_irq[1]->count, 7);
	ck_assert_uint_eq(p.msg->num_softirq_total, 50);
	ck_assert_uint_eq(p.msg->n_num_softirq, 3);
	ck_assert_uint_eq(p.msg->num_softirq[1]->count, 0);
	parsed_done(&p);
}
END_TEST

/* A /proc/stat of @cpus CPUs whose intr line pads it to at least @min_size. */
static char *make_stat(unsigned cpus, size_t min_size, size_t *ret_len)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	size_t irqs = 0;

	ck_assert_ptr_nonnull(f);
	fprintf(f, "cpu  1 2 3 4 5 6 7 8 0 0\n");
	for (unsigned c = 0; c < cpus; c++)
		fprintf(f, "cpu%u %u 1 2 3 4 5 6 %u 0 0\n", c, c, c + 1);
	fprintf(f, "intr 123");
	while ((size_t)ftell(f) < min_size) {
		fprintf(f, " %zu", irqs % 3);
		irqs++;
	}
	fprintf(f, "\nctxt 1\nbtime 2\nprocesses 42\nsoftirq 1 1\n");
	ck_assert_int_eq(fclose(f), 0);
	*ret_len = len;
	return text;
}

START_TEST(test_stat_large)
{
	_cleanup_free_ char *text = NULL;
	struct parsed p;
	size_t len;

	/* 4096 CPUs */
	text = make_stat(4096, 0, &len);
	parse_text(&p, P_STAT, text, len, NULL, SYS_STATS_STAT_ALL);
	ck_assert_uint_eq(p.msg->n_cpu_stat, 4096);
	ck_assert_uint_eq(p.msg->cpu_stat[4095]->cpu_id, 4095);
	ck_assert_uint_eq(p.msg->cpu_stat[4095]->user_ns, 4095 * NS_PER_TICK);
	ck_assert_uint_eq(p.msg->cpu_stat[4095]->steal_ns, 4096 * NS_PER_TICK);
	ck_assert_uint_eq(p.msg->num_forks, 42);
	parsed_done(&p);
	free(text);

	/* 1 MiB, most of it the intr line: every non-zero count is kept */
	text = make_stat(2, 1u << 20, &len);
	ck_assert_uint_ge(len, 1u << 20);
	parse_text(&p, P_STAT, text, len, NULL, SYS_STATS_STAT_ALL);
	ck_assert_uint_eq(p.msg->n_cpu_stat, 2);
	ck_assert_uint_eq(p.msg->num_irq_total, 123);
	ck_assert_uint_gt(p.msg->n_num_irq, 100000);
	ck_assert_int_eq(p.msg->num_irq[0]->irq, 1);
	ck_assert_int_eq(p.msg->num_irq[1]->irq, 2);
	ck_assert_uint_eq(p.msg->num_irq[1]->count, 2);
	ck_assert_uint_eq(p.msg->num_forks, 42);
	parsed_done(&p);
}
END_TEST

START_TEST(test_buddyinfo)
{
	struct parsed p;

	parse_fixture(&p, P_BUDDY, "host", "proc/buddyinfo", NULL, 0);
	ck_assert_uint_eq(p.msg->n_buddy_info, 3);
	ck_assert_str_eq(p.msg->buddy_info[0]->node, "0");
	ck_assert_str_eq(p.msg->buddy_info[0]->zone, "DMA");
	ck_assert_uint_eq(p.msg->buddy_info[0]->n_order_pages, 11);
	ck_assert_uint_eq(p.msg->buddy_info[0]->order_pages[10], 3);
	ck_assert_str_eq(p.msg->buddy_info[2]->zone, "Normal");
	parsed_done(&p);

	/* no comma after the node; a line with only "Node" */
	parse_fixture(&p, P_BUDDY, "edge", "proc/buddyinfo", NULL, 0);
	ck_assert_uint_eq(p.msg->n_buddy_info, 3);
	ck_assert_str_eq(p.msg->buddy_info[0]->node, "0");
	ck_assert_uint_eq(p.msg->buddy_info[0]->n_order_pages, 3);
	ck_assert_str_eq(p.msg->buddy_info[1]->node, "1");
	ck_assert_str_eq(p.msg->buddy_info[1]->zone, "Normal");
	ck_assert_uint_eq(p.msg->buddy_info[1]->order_pages[0], 4);
	ck_assert_ptr_null(p.msg->buddy_info[2]->node);
	parsed_done(&p);
}
END_TEST

START_TEST(test_diskstats)
{
	const Perfetto__Protos__SysStats__DiskStat *d;
	struct parsed p;

	parse_fixture(&p, P_DISK, "host", "proc/diskstats", NULL, 0);
	ck_assert_uint_eq(p.msg->n_disk_stat, 10);
	ck_assert_str_eq(p.msg->disk_stat[0]->device_name, "loop0");
	ck_assert(p.msg->disk_stat[0]->has_flush_time_ms);
	parsed_done(&p);

	/* an old kernel's 14 columns: no discard or flush fields */
	parse_fixture(&p, P_DISK, "edge", "proc/diskstats", NULL, 0);
	ck_assert_uint_eq(p.msg->n_disk_stat, 3);
	d = p.msg->disk_stat[0];
	ck_assert_str_eq(d->device_name, "sda");
	ck_assert_uint_eq(d->read_sectors, 3);
	ck_assert_uint_eq(d->read_time_ms, 4);
	ck_assert_uint_eq(d->write_sectors, 7);
	ck_assert_uint_eq(d->write_time_ms, 8);
	ck_assert(!d->has_discard_sectors && !d->has_flush_count);
	d = p.msg->disk_stat[1];
	ck_assert_str_eq(d->device_name, "nvme0n1");
	ck_assert_uint_eq(d->read_sectors, 30);
	ck_assert_uint_eq(d->discard_sectors, 14);
	ck_assert_uint_eq(d->discard_time_ms, 150);
	ck_assert_uint_eq(d->flush_count, 160);
	ck_assert_uint_eq(d->flush_time_ms, 170);
	ck_assert_ptr_null(p.msg->disk_stat[2]->device_name);
	parsed_done(&p);
}
END_TEST

START_TEST(test_psi_slab_values)
{
	struct parsed p;
	uint64_t v;

	parse_fixture(&p, P_PSI_IO, "host", "proc/pressure/io", NULL, 0);
	ck_assert_uint_eq(p.msg->n_psi, 2);
	ck_assert_int_eq(p.msg->psi[0]->resource,
			 PERFETTO__PROTOS__SYS_STATS__PSI_SAMPLE__PSI_RESOURCE__PSI_RESOURCE_IO_SOME);
	ck_assert_uint_eq(p.msg->psi[0]->total_ns, 15892891000ull);
	ck_assert_int_eq(p.msg->psi[1]->resource,
			 PERFETTO__PROTOS__SYS_STATS__PSI_SAMPLE__PSI_RESOURCE__PSI_RESOURCE_IO_FULL);
	ck_assert_uint_eq(p.msg->psi[1]->total_ns, 6640178000ull);
	parsed_done(&p);

	parse_fixture(&p, P_PSI_IO, "edge", "proc/pressure/io", NULL, 0);
	ck_assert_uint_eq(p.msg->n_psi, 3);
	ck_assert_int_eq(p.msg->psi[2]->resource, 0);
	ck_assert_uint_eq(p.msg->psi[2]->total_ns, 9000);
	parsed_done(&p);

	parse_fixture(&p, P_SLAB, "host", "proc/slabinfo", NULL, 0);
	ck_assert_uint_eq(p.msg->n_slab_info, 10);
	ck_assert_str_eq(p.msg->slab_info[0]->name, "btrfs_delayed_node");
	ck_assert_uint_eq(p.msg->slab_info[0]->pages_per_slab, 1);
	ck_assert(p.msg->slab_info[0]->has_num_slabs);
	parsed_done(&p);

	parse_fixture(&p, P_SLAB, "edge", "proc/slabinfo", NULL, 0);
	ck_assert_uint_eq(p.msg->n_slab_info, 2);
	ck_assert_str_eq(p.msg->slab_info[0]->name, "kmalloc-64");
	ck_assert_uint_eq(p.msg->slab_info[0]->pages_per_slab, 1);
	ck_assert_uint_eq(p.msg->slab_info[0]->num_slabs, 2);
	ck_assert(!p.msg->slab_info[1]->has_pages_per_slab);
	parsed_done(&p);

	ck_assert_int_eq(sys_stats_parse_u64("1800000\n", 8, &v), 0);
	ck_assert_uint_eq(v, 1800000);
	ck_assert_int_eq(sys_stats_parse_u64("-5000\n", 6, &v), -EINVAL);
	ck_assert_int_eq(sys_stats_parse_u64("", 0, &v), -EINVAL);
	ck_assert_int_eq(sys_stats_parse_amd_sclk("0: 500Mhz \n1: 1800Mhz *\n", 24, &v), 0);
	ck_assert_uint_eq(v, 1800);
	ck_assert_int_eq(sys_stats_parse_amd_sclk("0: 500Mhz \n1: 1800Mhz\n", 22, &v), -ENOENT);
}
END_TEST

/* ---- capture sink ----------------------------------------------------------- */

struct capture {
	uint8_t *buf;
	size_t cap;
	struct pbw w;
	bool inited;
	unsigned packets, flushes, commits;
	bool refuse;
	Perfetto__Protos__Trace *trace;
};

static struct pbw *cap_begin(void *userdata)
{
	struct capture *c = userdata;

	if (c->refuse)
		return NULL;
	if (!c->inited) {
		pbw_init(&c->w, c->buf, c->cap, NULL, NULL);
		c->inited = true;
	}
	pbw_begin_nested(&c->w, 1);
	return &c->w;
}

static int cap_end(void *userdata)
{
	struct capture *c = userdata;

	(void)pbw_end_nested(&c->w);
	c->packets++;
	return pbw_overflowed(&c->w) ? -ENOSPC : 0;
}

static void cap_flush(void *userdata)
{
	((struct capture *)userdata)->flushes++;
}

static void cap_commit(void *host)
{
	((struct capture *)host)->commits++;
}

static struct ds_env cap_env(struct capture *c, struct loop *e, size_t cap)
{
	*c = (struct capture){ .cap = cap };
	c->buf = malloc(cap);
	ck_assert_ptr_nonnull(c->buf);
	return (struct ds_env){
		.event = e,
		.instance_id = 7,
		.tracing_session_id = 9,
		.sink = { .begin_packet = cap_begin, .end_packet = cap_end, .flush = cap_flush,
			  .userdata = c },
		.host = { .commit_soon = cap_commit, .host = c },
	};
}

static const Perfetto__Protos__Trace *cap_decode(struct capture *c)
{
	if (c->trace)
		perfetto__protos__trace__free_unpacked(c->trace, NULL);
	c->trace = NULL;
	ck_assert(c->inited);
	ck_assert(!pbw_overflowed(&c->w));
	c->trace = perfetto__protos__trace__unpack(NULL, pbw_position(&c->w), c->buf);
	ck_assert_msg(c->trace, "captured packets do not decode");
	ck_assert_uint_eq(c->trace->n_packet, c->packets);
	return c->trace;
}

static void cap_done(struct capture *c)
{
	if (c->trace)
		perfetto__protos__trace__free_unpacked(c->trace, NULL);
	free(c->buf);
	*c = (struct capture){};
}

static const SysStats *packet_sys_stats(const Packet *p)
{
	ck_assert_int_eq(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS);
	ck_assert(p->has_timestamp);
	ck_assert(p->sys_stats->has_collection_end_timestamp);
	ck_assert_uint_ge(p->sys_stats->collection_end_timestamp, p->timestamp);
	return p->sys_stats;
}

/* ---- sys_stats on fixture roots ------------------------------------------------ */

static SysStatsConfig every_source(uint32_t ms)
{
	SysStatsConfig c = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;

#define ON(f) (c.has_##f##_period_ms = true, c.f##_period_ms = ms)
	ON(meminfo);
	ON(vmstat);
	ON(stat);
	ON(devfreq);
	ON(cpufreq);
	ON(buddyinfo);
	ON(diskstat);
	ON(psi);
	ON(thermal);
	ON(cpuidle);
	ON(gpufreq);
	ON(slab);
#undef ON
	return c;
}

START_TEST(test_ds_edge_tree)
{
	_cleanup_free_ char *warnings = NULL, *error = NULL;
	char proc[PATH_MAX * 2], sys[PATH_MAX * 2];
	SysStatsConfig cfg = every_source(100);
	struct capture cap;
	struct ds_env env;
	struct sys_stats *ss;
	const SysStats *s;
	struct loop *e;

	ck_assert_int_eq(loop_new(&e), 0);
	env = cap_env(&cap, e, 1 << 20);
	cfg.vmstat_period_ms = 200;
	root_path(proc, sizeof(proc), "edge", "proc");
	root_path(sys, sizeof(sys), "edge", "sys");
	ck_assert_int_eq(sys_stats_setup_at(&env, &cfg, proc, sys, &ss, &error, &warnings), 0);
	ck_assert_uint_eq(sys_stats_period_ms(ss), 100);
	/* one line per source with a problem, no more */
	ck_assert_ptr_nonnull(warnings);
	ck_assert_msg(strstr(warnings, "cpufreq: 1 of 4 CPUs"), "%s", warnings);
	ck_assert_ptr_nonnull(strstr(warnings, "cpuidle: 3 of 4 CPUs"));
	ck_assert_ptr_nonnull(strstr(warnings, "devfreq: 1 of 2 devices"));
	ck_assert_ptr_null(strstr(strstr(warnings, "cpufreq") + 1, "cpufreq: "));

	ck_assert_int_eq(sys_stats_poll(ss), 0);
	ck_assert_int_eq(sys_stats_poll(ss), 0);
	cap_decode(&cap);
	ck_assert_uint_eq(cap.trace->n_packet, 2);
	ck_assert_uint_eq(cap.commits, 2);
	s = packet_sys_stats(cap.trace->packet[0]);

	ck_assert_uint_eq(s->n_meminfo, 4);
	ck_assert_uint_eq(s->n_vmstat, 3);
	ck_assert_uint_eq(s->n_cpu_stat, 2);
	/* cpu0 reads, cpu1 has no cpufreq, cpu2 junk, cpu3 EISDIR: 0 for each */
	ck_assert_uint_eq(s->n_cpufreq_khz, 4);
	ck_assert_uint_eq(s->cpufreq_khz[0], 1800000);
	ck_assert_uint_eq(s->cpufreq_khz[1], 0);
	ck_assert_uint_eq(s->cpufreq_khz[2], 0);
	ck_assert_uint_eq(s->cpufreq_khz[3], 0);
	ck_assert_uint_eq(s->n_devfreq, 2);
	ck_assert_str_eq(s->devfreq[0]->key, "bus");
	ck_assert_uint_eq(s->devfreq[0]->value, 0);
	ck_assert_str_eq(s->devfreq[1]->key, "gpu-devfreq");
	ck_assert_uint_eq(s->devfreq[1]->value, 600000000);
	ck_assert_uint_eq(s->n_thermal_zone, 3);
	ck_assert_str_eq(s->thermal_zone[0]->name, "thermal_zone0");
	ck_assert_uint_eq(s->thermal_zone[0]->temp, 45);
	ck_assert_str_eq(s->thermal_zone[0]->type, "acpitz");
	ck_assert_str_eq(s->thermal_zone[1]->name, "thermal_zone1");
	ck_assert(!s->thermal_zone[1]->has_temp);
	ck_assert_str_eq(s->thermal_zone[1]->type, "x86_pkg_temp");
	ck_assert_str_eq(s->thermal_zone[2]->name, "thermal_zone10");
	ck_assert(!s->thermal_zone[2]->has_temp);
	ck_assert_uint_eq(s->n_cpuidle_state, 1);
	ck_assert_uint_eq(s->cpuidle_state[0]->cpu_id, 0);
	ck_assert_uint_eq(s->cpuidle_state[0]->n_cpuidle_state_entry, 3);
	ck_assert_str_eq(s->cpuidle_state[0]->cpuidle_state_entry[0]->state, "POLL");
	ck_assert_uint_eq(s->cpuidle_state[0]->cpuidle_state_entry[0]->duration_us, 12);
	ck_assert_str_eq(s->cpuidle_state[0]->cpuidle_state_entry[1]->state, "C1");
	ck_assert_str_eq(s->cpuidle_state[0]->cpuidle_state_entry[2]->state, "C10");
	ck_assert_uint_eq(s->cpuidle_state[0]->cpuidle_state_entry[2]->duration_us, 56);
	ck_assert_uint_eq(s->n_gpufreq_mhz, 1);
	ck_assert_uint_eq(s->gpufreq_mhz[0], 350);
	ck_assert_uint_eq(s->n_psi, 4);
	ck_assert_uint_eq(s->n_slab_info, 2);
	ck_assert_uint_eq(s->n_buddy_info, 3);
	ck_assert_uint_eq(s->n_disk_stat, 3);

	/* vmstat every other poll */
	s = packet_sys_stats(cap.trace->packet[1]);
	ck_assert_uint_eq(s->n_meminfo, 4);
	ck_assert_uint_eq(s->n_vmstat, 0);
	ck_assert_uint_ge(cap.trace->packet[1]->timestamp, cap.trace->packet[0]->timestamp);

	/* a full writer: the poll is dropped and counted */
	cap.refuse = true;
	ck_assert_int_eq(sys_stats_poll(ss), -ENOSPC);
	ck_assert_int_eq(sys_stats_ds_ops.flush(ss), 0);
	ck_assert_uint_eq(cap.flushes, 1);
	{
		struct sys_stats_stats st;
		struct ds_report r = {};

		sys_stats_get_stats(ss, &st);
		ck_assert_uint_eq(st.polls, 3);
		ck_assert_uint_eq(st.packets_dropped, 1);
		/* the EISDIR reads (cpufreq, thermal) */
		ck_assert_uint_gt(st.read_errors, 0);
		ck_assert_int_eq(sys_stats_ds_ops.report(ss, &r), 0);
		ck_assert_uint_eq(r.events, 2);
	}
	sys_stats_ds_ops.free(ss);
	cap_done(&cap);
	loop_unref(e);
}
END_TEST

START_TEST(test_ds_periods)
{
	SysStatsConfig cfg = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
	_cleanup_free_ char *w1 = NULL, *w2 = NULL, *w3 = NULL;
	struct capture cap;
	struct ds_env env;
	struct sys_stats *ss;
	struct loop *e;

	ck_assert_int_eq(loop_new(&e), 0);
	env = cap_env(&cap, e, 4096);

	/* below 10 ms: 10 ms, said once */
	cfg.has_meminfo_period_ms = true;
	cfg.meminfo_period_ms = 1;
	ck_assert_int_eq(sys_stats_setup_at(&env, &cfg, NULL, NULL, &ss, NULL, &w1), 0);
	ck_assert_uint_eq(sys_stats_period_ms(ss), SYS_STATS_MIN_PERIOD_MS);
	ck_assert_ptr_nonnull(w1);
	ck_assert_ptr_nonnull(strstr(w1, "meminfo_period_ms 1 is below 10 ms"));
	sys_stats_ds_ops.free(ss);

	/* periods that are not multiples of the shortest: nothing polled */
	cfg.meminfo_period_ms = 30;
	cfg.has_vmstat_period_ms = true;
	cfg.vmstat_period_ms = 20;
	ck_assert_int_eq(sys_stats_setup_at(&env, &cfg, NULL, NULL, &ss, NULL, &w2), 0);
	ck_assert_uint_eq(sys_stats_period_ms(ss), 0);
	ck_assert_ptr_nonnull(strstr(w2, "not multiples"));
	ck_assert_int_eq(sys_stats_ds_ops.start(ss), 0);
	sys_stats_ds_ops.free(ss);

	/* 0 is off; no config at all polls nothing and needs no loop */
	cfg.meminfo_period_ms = 0;
	cfg.vmstat_period_ms = 40;
	ck_assert_int_eq(sys_stats_setup_at(&env, &cfg, NULL, NULL, &ss, NULL, &w3), 0);
	ck_assert_uint_eq(sys_stats_period_ms(ss), 40);
	ck_assert_ptr_null(w3);
	sys_stats_ds_ops.free(ss);
	env.event = NULL;
	ck_assert_int_eq(sys_stats_setup_at(&env, NULL, NULL, NULL, &ss, NULL, NULL), 0);
	ck_assert_uint_eq(sys_stats_period_ms(ss), 0);
	sys_stats_ds_ops.free(ss);
	/* polling without a loop is refused */
	ck_assert_int_eq(sys_stats_setup_at(&env, &cfg, NULL, NULL, &ss, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sys_stats_setup_at(&env, &cfg, "/nonexistent-root", NULL, &ss, NULL, NULL),
			 -ENOENT);
	cap_done(&cap);
	loop_unref(e);
}
END_TEST

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* A /proc of one 1 MiB stat file: the buffer grows once, then stays. */
START_TEST(test_ds_big_stat_file)
{
	char dir[] = "/tmp/test-sys-stats-XXXXXX", path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	SysStatsConfig cfg = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
	struct sys_stats_stats st1, st2;
	struct capture cap;
	struct ds_env env;
	struct sys_stats *ss;
	struct loop *e;
	size_t len;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	text = make_stat(4096, 1u << 20, &len);
	(void)snprintf(path, sizeof(path), "%s/stat", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, text, len), 0);
	close(fd);

	ck_assert_int_eq(loop_new(&e), 0);
	env = cap_env(&cap, e, 32 << 20);
	cfg.has_stat_period_ms = true;
	cfg.stat_period_ms = 1000;
	ck_assert_int_eq(sys_stats_setup_at(&env, &cfg, dir, NULL, &ss, NULL, NULL), 0);
	ck_assert_int_eq(sys_stats_poll(ss), 0);
	sys_stats_get_stats(ss, &st1);
	ck_assert_uint_gt(st1.buffer_size, len);
	ck_assert_int_eq(sys_stats_poll(ss), 0);
	sys_stats_get_stats(ss, &st2);
	ck_assert_uint_eq(st2.buffer_size, st1.buffer_size);
	ck_assert_uint_eq(st2.bytes_read, 2 * len);
	cap_decode(&cap);
	for (size_t i = 0; i < 2; i++) {
		const SysStats *s = packet_sys_stats(cap.trace->packet[i]);

		ck_assert_uint_eq(s->n_cpu_stat, 4096);
		ck_assert_uint_eq(s->num_forks, 42);
	}
	sys_stats_ds_ops.free(ss);
	cap_done(&cap);
	loop_unref(e);
	ck_assert_int_eq(nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}
END_TEST

/* ---- sys_stats on the real /proc and /sys ------------------------------------------ */

struct live {
	struct capture *cap;
	struct loop *e;
	unsigned want;
};

static int live_check(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct live *l = userdata;

	if (l->cap->packets >= l->want)
		return loop_exit(l->e, 0);
	(void)loop_source_set_time_relative(s, 2000);
	return loop_source_set_enabled(s, LOOP_ONESHOT);
}

START_TEST(test_ds_live)
{
	SysStatsConfig cfg = every_source(10);
	Perfetto__Protos__DataSourceConfig dcfg = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
	struct loop_source *check = NULL, *guard = NULL;
	struct capture cap;
	struct sys_stats_stats st;
	struct ds_env env;
	struct sysinfo si;
	struct live l;
	struct loop *e;
	void *ds = NULL;
	uint64_t mem_total_kb;
	long online = sysconf(_SC_NPROCESSORS_ONLN);

	cfg.stat_period_ms = 20;
	cfg.slab_period_ms = 0; /* root only */
	dcfg.sys_stats_config = &cfg;
	ck_assert_int_eq(loop_new(&e), 0);
	env = cap_env(&cap, e, 16 << 20);
	ck_assert_int_eq(sys_stats_ds_ops.setup(&env, &dcfg, &ds, NULL, NULL), 0);
	ck_assert_int_eq(sys_stats_ds_ops.start(ds), 0);
	ck_assert_int_eq(sys_stats_ds_ops.start(ds), -EALREADY);

	l = (struct live){ .cap = &cap, .e = e, .want = 6 };
	ck_assert_int_eq(loop_add_time_relative(e, &check, CLOCK_MONOTONIC, 1000, 0, live_check, &l), 0);
	ck_assert_int_eq(loop_run(e), 0);
	sys_stats_ds_ops.free(ds);
	loop_source_unref(check);
	loop_source_unref(guard);

	ck_assert_int_eq(sysinfo(&si), 0);
	mem_total_kb = (uint64_t)si.totalram * si.mem_unit / 1024;
	cap_decode(&cap);
	ck_assert_uint_ge(cap.trace->n_packet, 6);
	for (size_t i = 0; i < cap.trace->n_packet; i++) {
		const SysStats *s = packet_sys_stats(cap.trace->packet[i]);
		bool found = false;

		if (i > 0)
			ck_assert_uint_gt(cap.trace->packet[i]->timestamp,
					  cap.trace->packet[i - 1]->timestamp);
		for (size_t k = 0; k < s->n_meminfo; k++)
			if (s->meminfo[k]->key == PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL) {
				ck_assert_uint_eq(s->meminfo[k]->value, mem_total_kb);
				found = true;
			}
		ck_assert(found);
		ck_assert_uint_gt(s->n_vmstat, 50);
		/* stat every other poll, from the first */
		if (i % 2 == 0) {
			ck_assert_uint_eq(s->n_cpu_stat, (size_t)online);
			ck_assert(s->has_num_forks);
		} else {
			ck_assert_uint_eq(s->n_cpu_stat, 0);
		}
		ck_assert_uint_ge(s->n_cpufreq_khz, (size_t)online);
	}
	/* cpu times and the fork count never go back */
	for (size_t i = 2; i < cap.trace->n_packet; i += 2) {
		const SysStats *a = cap.trace->packet[i - 2]->sys_stats;
		const SysStats *b = cap.trace->packet[i]->sys_stats;

		ck_assert_uint_ge(b->num_forks, a->num_forks);
		for (size_t c = 0; c < b->n_cpu_stat; c++) {
			ck_assert_uint_eq(a->cpu_stat[c]->cpu_id, b->cpu_stat[c]->cpu_id);
			ck_assert_uint_ge(b->cpu_stat[c]->user_ns, a->cpu_stat[c]->user_ns);
			ck_assert_uint_ge(b->cpu_stat[c]->system_mode_ns, a->cpu_stat[c]->system_mode_ns);
			ck_assert_uint_ge(b->cpu_stat[c]->idle_ns, a->cpu_stat[c]->idle_ns);
		}
	}
	(void)st;
	cap_done(&cap);
	loop_unref(e);
}
END_TEST

/* ---- system_info -------------------------------------------------------------------- */

static const Packet *run_system_info(struct capture *cap, const char *tree, bool irq_names,
				     unsigned want_packets)
{
	Perfetto__Protos__SystemInfoConfig cfg = PERFETTO__PROTOS__SYSTEM_INFO_CONFIG__INIT;
	char proc[PATH_MAX * 2], sys[PATH_MAX * 2];
	struct system_info *si;
	struct ds_env env;

	env = cap_env(cap, NULL, 1 << 20);
	cfg.has_irq_names = true;
	cfg.irq_names = irq_names;
	root_path(proc, sizeof(proc), tree, "proc");
	root_path(sys, sizeof(sys), tree, "sys");
	ck_assert_int_eq(system_info_setup_at(&env, &cfg, proc, sys, &si), 0);
	ck_assert_int_eq(system_info_ds_ops.start(si), 0);
	ck_assert_uint_eq(cap->flushes, 1);
	system_info_ds_ops.free(si);
	cap_decode(cap);
	ck_assert_uint_eq(cap->trace->n_packet, want_packets);
	ck_assert_int_eq(cap->trace->packet[0]->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO);
	ck_assert(cap->trace->packet[0]->has_timestamp);
	return cap->trace->packet[0];
}

START_TEST(test_system_info_edge)
{
	const Perfetto__Protos__CpuInfo *ci;
	const Perfetto__Protos__CpuInfo__Cpu *c;
	const Perfetto__Protos__InterruptInfo *ii;
	struct capture cap;

	ci = run_system_info(&cap, "edge", true, 2)->cpu_info;
	/* the block with processor "junk" is not a CPU */
	ck_assert_uint_eq(ci->n_cpus, 3);
	c = ci->cpus[0];
	ck_assert_str_eq(c->processor, "AArch64 Processor rev 4 (aarch64)");
	ck_assert_uint_eq(c->n_frequencies, 4);
	ck_assert_uint_eq(c->frequencies[0], 1200000);
	ck_assert_uint_eq(c->frequencies[1], 1800000);
	ck_assert_uint_eq(c->frequencies[2], 2000000);
	ck_assert_uint_eq(c->frequencies[3], 2400000);
	ck_assert(c->has_capacity);
	ck_assert_uint_eq(c->capacity, 512);
	ck_assert_int_eq(c->identifier_case, PERFETTO__PROTOS__CPU_INFO__CPU__IDENTIFIER_ARM_IDENTIFIER);
	ck_assert_uint_eq(c->arm_identifier->implementer, 0x41);
	ck_assert_uint_eq(c->arm_identifier->architecture, 8);
	ck_assert_uint_eq(c->arm_identifier->variant, 1);
	ck_assert_uint_eq(c->arm_identifier->part, 0xd05);
	ck_assert_uint_eq(c->arm_identifier->revision, 0);
	ck_assert_uint_eq(c->features, 2); /* mte3 */
	c = ci->cpus[1];
	ck_assert_str_eq(c->processor, "AArch64 Processor rev 4 (aarch64)");
	ck_assert_uint_eq(c->n_frequencies, 0);
	ck_assert(!c->has_capacity);
	ck_assert_int_eq(c->identifier_case, 0);
	ck_assert_uint_eq(c->features, 1); /* mte */
	c = ci->cpus[2];
	ck_assert_uint_eq(c->n_frequencies, 0);
	ck_assert(!c->has_features);

	ck_assert_int_eq(cap.trace->packet[1]->data_case,
			 PERFETTO__PROTOS__TRACE_PACKET__DATA_INTERRUPT_INFO);
	ii = cap.trace->packet[1]->interrupt_info;
	ck_assert_uint_eq(ii->n_irq_mapping, 3);
	ck_assert_uint_eq(ii->irq_mapping[0]->irq_id, 11);
	ck_assert_str_eq(ii->irq_mapping[0]->name, "arch_timer");
	ck_assert_uint_eq(ii->irq_mapping[1]->irq_id, 13);
	ck_assert_str_eq(ii->irq_mapping[1]->name, "cs40l26 IRQ1 Controller");
	ck_assert_uint_eq(ii->irq_mapping[2]->irq_id, 14);
	ck_assert_str_eq(ii->irq_mapping[2]->name, "name_without_trigger");
	cap_done(&cap);
}
END_TEST

START_TEST(test_system_info_host)
{
	const Perfetto__Protos__CpuInfo *ci;
	const Perfetto__Protos__InterruptInfo *ii;
	struct capture cap;

	/* x86: no "Processor" line, no cpufreq; as the reference trace has it */
	ci = run_system_info(&cap, "host", true, 2)->cpu_info;
	ck_assert_uint_eq(ci->n_cpus, 2);
	for (size_t i = 0; i < 2; i++) {
		ck_assert_str_eq(ci->cpus[i]->processor, "unknown");
		ck_assert_uint_eq(ci->cpus[i]->capacity, 1024);
		ck_assert_uint_eq(ci->cpus[i]->n_frequencies, 0);
		ck_assert(!ci->cpus[i]->has_features);
	}
	ii = cap.trace->packet[1]->interrupt_info;
	ck_assert_uint_gt(ii->n_irq_mapping, 10);
	ck_assert_uint_eq(ii->irq_mapping[0]->irq_id, 24);
	ck_assert_str_eq(ii->irq_mapping[0]->name, "ACPI:Ged");
	cap_done(&cap);

	/* without irq_names: CpuInfo only */
	run_system_info(&cap, "host", false, 1);
	cap_done(&cap);
}
END_TEST

/* ---- the configs of tests/data/configs ------------------------------------------- */

/*
 * Parse tests/data/configs/@name and run its linux.sys_stats (one poll) and
 * linux.system_info data sources on this machine; the packets go to @cap.
 */
static void run_config(const char *name, struct capture *cap, struct loop *e)
{
	Perfetto__Protos__TraceConfig *tc = NULL;
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX * 2], err[256];
	struct ds_env env;
	size_t len;
	unsigned found = 0;

	(void)snprintf(path, sizeof(path), "%s/../configs/%s", data_dir, name);
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, path, 1 << 20, &text, &len), 0);
	ck_assert_msg(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, len,
				  (ProtobufCMessage **)&tc, err, sizeof(err)) == 0, "%s: %s", name, err);
	env = cap_env(cap, e, 1 << 20);
	for (size_t i = 0; i < tc->n_data_sources; i++) {
		const Perfetto__Protos__DataSourceConfig *dc = tc->data_sources[i]->config;
		const struct ds_ops *ops = NULL;
		void *ds = NULL;

		if (strcmp(dc->name, sys_stats_ds_ops.name) == 0)
			ops = &sys_stats_ds_ops;
		else if (strcmp(dc->name, system_info_ds_ops.name) == 0)
			ops = &system_info_ds_ops;
		if (!ops)
			continue;
		ck_assert_int_eq(ops->setup(&env, dc, &ds, NULL, NULL), 0);
		if (ops == &sys_stats_ds_ops)
			ck_assert_int_eq(sys_stats_poll(ds), 0);
		else
			ck_assert_int_eq(ops->start(ds), 0);
		ops->free(ds);
		found++;
	}
	ck_assert_uint_gt(found, 0);
	protobuf_c_message_free_unpacked(&tc->base, NULL);
	cap_decode(cap);
}

static bool has_meminfo(const SysStats *s, int key)
{
	for (size_t i = 0; i < s->n_meminfo; i++)
		if ((int)s->meminfo[i]->key == key)
			return true;
	return false;
}

static bool has_vmstat(const SysStats *s, int key)
{
	for (size_t i = 0; i < s->n_vmstat; i++)
		if ((int)s->vmstat[i]->key == key)
			return true;
	return false;
}

START_TEST(test_configs)
{
	const SysStats *s;
	struct capture cap;
	struct loop *e;
	long cpus = sysconf(_SC_NPROCESSORS_CONF);

	ck_assert_int_eq(loop_new(&e), 0);

	/*
	 * The docs' memory-counters example: what the reference trace has,
	 * meminfo 1, 2, 3; vmstat 1, 3, 4 (no nr_alloc_batch since Linux 4.x);
	 * cpu_stat per CPU and num_forks, no IRQ counts.
	 */
	run_config("memory-counters.cfg", &cap, e);
	ck_assert_uint_eq(cap.trace->n_packet, 1);
	s = packet_sys_stats(cap.trace->packet[0]);
	ck_assert_uint_eq(s->n_meminfo, 3);
	for (int k = 1; k <= 3; k++)
		ck_assert(has_meminfo(s, k));
	ck_assert(has_vmstat(s, PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_FREE_PAGES));
	ck_assert(has_vmstat(s, PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_ACTIVE_ANON));
	ck_assert_uint_le(s->n_vmstat, 4);
	ck_assert_uint_eq(s->n_cpu_stat, (size_t)sysconf(_SC_NPROCESSORS_ONLN));
	ck_assert(s->has_num_forks);
	ck_assert(!s->has_num_irq_total && !s->has_num_softirq_total);
	cap_done(&cap);

	/* the docs' cpu-freq example: cpufreq_khz per CPU only, then a CpuInfo */
	run_config("cpu-freq.cfg", &cap, e);
	ck_assert_uint_eq(cap.trace->n_packet, 2);
	s = packet_sys_stats(cap.trace->packet[0]);
	ck_assert_uint_eq(s->n_cpufreq_khz, (size_t)cpus);
	ck_assert_uint_eq(s->n_meminfo + s->n_vmstat + s->n_cpu_stat, 0);
	ck_assert_int_eq(cap.trace->packet[1]->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO);
	ck_assert_uint_eq(cap.trace->packet[1]->cpu_info->n_cpus, (size_t)sysconf(_SC_NPROCESSORS_ONLN));
	cap_done(&cap);

	/* Perfetto's test config: its lists, IRQ counts but no softirqs */
	run_config("sys_stats.cfg", &cap, e);
	s = packet_sys_stats(cap.trace->packet[0]);
	ck_assert_uint_gt(s->n_meminfo, 5);
	ck_assert_uint_le(s->n_meminfo, 11);
	ck_assert_uint_gt(s->n_vmstat, 5);
	ck_assert(s->has_num_irq_total && !s->has_num_softirq_total && s->has_num_forks);
	cap_done(&cap);
	loop_unref(e);
}
END_TEST

static Suite *sys_stats_suite(void)
{
	Suite *s = suite_create("sys_stats");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_test(tc, test_counter_tables);
	tcase_add_test(tc, test_meminfo);
	tcase_add_test(tc, test_vmstat);
	tcase_add_test(tc, test_stat);
	tcase_add_test(tc, test_stat_large);
	tcase_add_test(tc, test_buddyinfo);
	tcase_add_test(tc, test_diskstats);
	tcase_add_test(tc, test_psi_slab_values);
	suite_add_tcase(s, tc);

	tc = tcase_create("fixture");
	tcase_add_test(tc, test_ds_edge_tree);
	tcase_add_test(tc, test_ds_periods);
	tcase_add_test(tc, test_ds_big_stat_file);
	tcase_add_test(tc, test_system_info_edge);
	tcase_add_test(tc, test_system_info_host);
	suite_add_tcase(s, tc);

	tc = tcase_create("live");
	tcase_add_test(tc, test_ds_live);
	tcase_add_test(tc, test_configs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	find_data_dir();
	sr = srunner_create(sys_stats_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
