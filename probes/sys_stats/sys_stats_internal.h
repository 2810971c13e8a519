/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared between the files of probes/sys_stats/, its tests, fuzz target and
 * benchmark: the pure parsers of /proc and /sys contents and the counter
 * name tables.
 *
 * Every parser reads @len bytes at @buf (no NUL needed), allocates nothing
 * and writes the fields it finds straight into @w, which must be inside an
 * open SysStats message.  Malformed lines are skipped or their numbers read
 * as 0, the way traced_probes reads them with strtoll(); nothing is an error.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "probes/ds/ds.h"
#include "probes/sys_stats/sys_stats.h"
#include "protos/pbw.h"

/* ---- field numbers (trace_packet.proto, sys_stats/sys_stats.proto) ---- */

enum {
	SS_PKT_SYS_STATS = 7,
	SS_PKT_TIMESTAMP = 8,

	SS_MEMINFO = 1,
	SS_VMSTAT = 2,
	SS_CPU_STAT = 3,
	SS_NUM_FORKS = 4,
	SS_NUM_IRQ_TOTAL = 5,
	SS_NUM_IRQ = 6,
	SS_NUM_SOFTIRQ_TOTAL = 7,
	SS_NUM_SOFTIRQ = 8,
	SS_COLLECTION_END = 9,
	SS_DEVFREQ = 10,
	SS_CPUFREQ_KHZ = 11,
	SS_BUDDY_INFO = 12,
	SS_DISK_STAT = 13,
	SS_PSI = 14,
	SS_THERMAL_ZONE = 15,
	SS_CPUIDLE_STATE = 16,
	SS_GPUFREQ_MHZ = 17,
	SS_SLAB_INFO = 18,

	/* MeminfoValue, VmstatValue, DevfreqValue, InterruptCount: key/irq = 1, value = 2 */
	SS_KV_KEY = 1,
	SS_KV_VALUE = 2,
};

/* SysStatsConfig.StatCounters, as bits of a mask */
enum {
	SS_STAT_CPU_TIMES = 1u << 1,
	SS_STAT_IRQ_COUNTS = 1u << 2,
	SS_STAT_SOFTIRQ_COUNTS = 1u << 3,
	SS_STAT_FORK_COUNT = 1u << 4,
	SS_STAT_ALL = SS_STAT_CPU_TIMES | SS_STAT_IRQ_COUNTS | SS_STAT_SOFTIRQ_COUNTS |
		      SS_STAT_FORK_COUNT,
};

/* PsiSample.PsiResource of the "some" line of each file; "full" is +1. */
enum {
	SS_PSI_CPU_SOME = 1,
	SS_PSI_IO_SOME = 3,
	SS_PSI_MEMORY_SOME = 5,
};

/* ---- counter names (sys_stats_counters.inc) ---- */

enum ss_counter_file {
	SS_FILE_MEMINFO,
	SS_FILE_VMSTAT,
	_SS_FILE_MAX,
	_SS_FILE_INVALID = -22,
};

/* Larger than any MeminfoCounters or VmstatCounters number. */
#define SS_COUNTER_MAX 256
#define SS_KEYMAP_SLOTS 512

/*
 * The enabled counters of one file, by key: an open-addressing hash table
 * filled at setup, so that a poll costs one hash and one compare per line.
 */
struct ss_keymap {
	uint16_t slot[SS_KEYMAP_SLOTS]; /* 0: empty; else index + 1 in the counter table */
	unsigned n;                     /* counters enabled */
};

/**
 * ss_keymap_init - fill @m with the counters of @file whose number has its
 * bit set in @enabled (bit n of enabled[n / 64]); NULL enables every one.
 */
void ss_keymap_init(struct ss_keymap *m, enum ss_counter_file file, const uint64_t *enabled);

/**
 * ss_keymap_find - the counter number of @key (@len bytes, no ':'), or 0.
 */
unsigned ss_keymap_find(const struct ss_keymap *m, const char *key, size_t len);

/**
 * ss_counter_number - the number of @key in @file's table, enabled or not;
 * 0 if it is not a counter we know.
 */
unsigned ss_counter_number(enum ss_counter_file file, const char *key);

/* ---- parsers: each returns the number of entries written ---- */

/* "Key:   value kB" lines -> SysStats.meminfo */
size_t ss_parse_meminfo(const char *buf, size_t len, const struct ss_keymap *m, struct pbw *w);
/* "key value" lines -> SysStats.vmstat */
size_t ss_parse_vmstat(const char *buf, size_t len, const struct ss_keymap *m, struct pbw *w);
/*
 * /proc/stat: cpu<N> lines (times * @ns_per_tick), intr, softirq,
 * processes, as @mask (SS_STAT_*) enables them.
 */
size_t ss_parse_stat(const char *buf, size_t len, unsigned mask, uint64_t ns_per_tick,
		     struct pbw *w);
/* /proc/buddyinfo -> SysStats.buddy_info */
size_t ss_parse_buddyinfo(const char *buf, size_t len, struct pbw *w);
/* /proc/diskstats -> SysStats.disk_stat */
size_t ss_parse_diskstats(const char *buf, size_t len, struct pbw *w);
/* /proc/pressure/<x> -> SysStats.psi; @some: SS_PSI_*_SOME of the file */
size_t ss_parse_psi(const char *buf, size_t len, unsigned some, struct pbw *w);
/* /proc/slabinfo -> SysStats.slab_info (the two header lines skipped) */
size_t ss_parse_slabinfo(const char *buf, size_t len, struct pbw *w);

/**
 * ss_parse_u64 - the leading decimal number of a sysfs value ("1234\n").
 * Returns: 0, or -EINVAL when @buf does not start with a digit.
 */
int ss_parse_u64(const char *buf, size_t len, uint64_t *ret);

/**
 * ss_parse_amd_sclk - the current clock of amdgpu's pp_dpm_sclk (the line
 * that ends in '*': "1: 1800Mhz *").
 * Returns: 0, or -ENOENT.
 */
int ss_parse_amd_sclk(const char *buf, size_t len, uint64_t *ret);

/* ---- the data source (sys_stats_ds.c, sys_stats_sources.c) ---- */


/* The sources, in the order their fields are written in a packet. */
enum ss_source {
	SS_SRC_MEMINFO,
	SS_SRC_VMSTAT,
	SS_SRC_STAT,
	SS_SRC_DEVFREQ,
	SS_SRC_CPUFREQ,
	SS_SRC_BUDDYINFO,
	SS_SRC_DISKSTAT,
	SS_SRC_PSI,
	SS_SRC_THERMAL,
	SS_SRC_CPUIDLE,
	SS_SRC_GPUFREQ,
	SS_SRC_SLAB,
	_SS_SRC_MAX,
	_SS_SRC_INVALID = -22,
};

const char *ss_source_to_string(enum ss_source s);

/* A file opened at setup, read with pread() at every poll that needs it. */
struct ss_file {
	int fd;              /* -EBADF: could not be opened */
};

/* A named file under a directory: devfreq devices, thermal zones, idle states. */
struct ss_named {
	char *name;
	char *type;          /* thermal zone type, read once */
	struct ss_file f;
};

struct ss_cpuidle_cpu {
	uint32_t cpu;
	size_t n_states;
	struct ss_named *states;
};

enum ss_gpu_kind {
	SS_GPU_NONE,
	SS_GPU_KGSL,         /* Hz */
	SS_GPU_I915,         /* MHz */
	SS_GPU_AMD,          /* pp_dpm_sclk table */
};

struct sys_stats {
	struct event *event;
	struct event_source *timer;
	struct pbw_sink sink;
	struct ds_host host;
	uint64_t instance_id;
	uint64_t tracing_session_id;

	int proc_fd, sys_fd;
	uint32_t period_ms;                 /* the timer's, 0: nothing polled */
	uint32_t every[_SS_SRC_MAX];        /* poll source s every every[s] ticks, 0: never */
	uint64_t tick;
	bool started;

	struct ss_keymap meminfo_keys, vmstat_keys;
	unsigned stat_mask;
	uint64_t ns_per_user_hz;

	/* the read buffer, shared by every file: grows to the largest one */
	char *buf;
	size_t buf_size;

	struct ss_file meminfo, vmstat, stat, buddyinfo, diskstats, slabinfo;
	struct ss_file psi[3];              /* cpu, io, memory */
	struct ss_file gpu;
	enum ss_gpu_kind gpu_kind;
	struct ss_file *cpufreq;            /* [n_cpus], -EBADF where missing */
	uint32_t n_cpus;
	struct ss_named *devfreq;
	size_t n_devfreq;
	struct ss_named *thermal;
	size_t n_thermal;
	struct ss_cpuidle_cpu *cpuidle;
	size_t n_cpuidle;

	bool read_error_logged[_SS_SRC_MAX];
	struct sys_stats_stats stats;
};

/**
 * ss_sources_open - open what every enabled source reads; problems are
 * appended to @warnings (a stream), one line per source.
 * Returns: 0 or -ENOMEM.
 */
int ss_sources_open(struct sys_stats *ss, FILE *warnings);

/** ss_sources_close - close and free what ss_sources_open() opened. */
void ss_sources_close(struct sys_stats *ss);

/** ss_source_write - read source @s and write its fields into @w. */
void ss_source_write(struct sys_stats *ss, enum ss_source s, struct pbw *w);
