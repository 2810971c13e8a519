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
	SYS_STATS_PKT_SYS_STATS = 7,
	SYS_STATS_PKT_TIMESTAMP = 8,

	SYS_STATS_MEMINFO = 1,
	SYS_STATS_VMSTAT = 2,
	SYS_STATS_CPU_STAT = 3,
	SYS_STATS_NUM_FORKS = 4,
	SYS_STATS_NUM_IRQ_TOTAL = 5,
	SYS_STATS_NUM_IRQ = 6,
	SYS_STATS_NUM_SOFTIRQ_TOTAL = 7,
	SYS_STATS_NUM_SOFTIRQ = 8,
	SYS_STATS_COLLECTION_END = 9,
	SYS_STATS_DEVFREQ = 10,
	SYS_STATS_CPUFREQ_KHZ = 11,
	SYS_STATS_BUDDY_INFO = 12,
	SYS_STATS_DISK_STAT = 13,
	SYS_STATS_PSI = 14,
	SYS_STATS_THERMAL_ZONE = 15,
	SYS_STATS_CPUIDLE_STATE = 16,
	SYS_STATS_GPUFREQ_MHZ = 17,
	SYS_STATS_SLAB_INFO = 18,

	/* MeminfoValue, VmstatValue, DevfreqValue, InterruptCount: key/irq = 1, value = 2 */
	SYS_STATS_KV_KEY = 1,
	SYS_STATS_KV_VALUE = 2,
};

/* SysStatsConfig.StatCounters, as bits of a mask */
enum {
	SYS_STATS_STAT_CPU_TIMES = 1u << 1,
	SYS_STATS_STAT_IRQ_COUNTS = 1u << 2,
	SYS_STATS_STAT_SOFTIRQ_COUNTS = 1u << 3,
	SYS_STATS_STAT_FORK_COUNT = 1u << 4,
	SYS_STATS_STAT_ALL = SYS_STATS_STAT_CPU_TIMES | SYS_STATS_STAT_IRQ_COUNTS | SYS_STATS_STAT_SOFTIRQ_COUNTS |
			     SYS_STATS_STAT_FORK_COUNT,
};

/* PsiSample.PsiResource of the "some" line of each file; "full" is +1. */
enum {
	SYS_STATS_PSI_CPU_SOME = 1,
	SYS_STATS_PSI_IO_SOME = 3,
	SYS_STATS_PSI_MEMORY_SOME = 5,
};

/* ---- counter names (sys_stats_counters.inc) ---- */

enum sys_stats_counter_file {
	SYS_STATS_FILE_MEMINFO,
	SYS_STATS_FILE_VMSTAT,
	_SYS_STATS_FILE_MAX,
	_SYS_STATS_FILE_INVALID = -22,
};

/* Larger than any MeminfoCounters or VmstatCounters number. */
#define SYS_STATS_COUNTER_MAX 256
#define SYS_STATS_KEYMAP_SLOTS 512

/*
 * The enabled counters of one file, by key: an open-addressing hash table
 * filled at setup, so that a poll costs one hash and one compare per line.
 */
struct sys_stats_keymap {
	uint16_t slot[SYS_STATS_KEYMAP_SLOTS]; /* 0: empty; else index + 1 in the counter table */
	unsigned n;                            /* counters enabled */
};

/**
 * sys_stats_keymap_init - fill @m with the counters of @file whose number has its
 * bit set in @enabled (bit n of enabled[n / 64]); NULL enables every one.
 */
void sys_stats_keymap_init(struct sys_stats_keymap *m, enum sys_stats_counter_file file, const uint64_t *enabled);

/**
 * sys_stats_keymap_find - the counter number of @key (@len bytes, no ':'), or 0.
 */
unsigned sys_stats_keymap_find(const struct sys_stats_keymap *m, const char *key, size_t len);

/**
 * sys_stats_counter_number - the number of @key in @file's table, enabled or not;
 * 0 if it is not a counter we know.
 */
unsigned sys_stats_counter_number(enum sys_stats_counter_file file, const char *key);

/* ---- parsers: each returns the number of entries written ---- */

/* "Key:   value kB" lines -> SysStats.meminfo */
size_t sys_stats_parse_meminfo(const char *buf, size_t len, const struct sys_stats_keymap *m, struct pbw *w);
/* "key value" lines -> SysStats.vmstat */
size_t sys_stats_parse_vmstat(const char *buf, size_t len, const struct sys_stats_keymap *m, struct pbw *w);
/*
 * /proc/stat: cpu<N> lines (times * @ns_per_tick), intr, softirq,
 * processes, as @mask (SYS_STATS_STAT_*) enables them.
 */
size_t sys_stats_parse_stat(const char *buf, size_t len, unsigned mask, uint64_t ns_per_tick,
			    struct pbw *w);
/* /proc/buddyinfo -> SysStats.buddy_info */
size_t sys_stats_parse_buddyinfo(const char *buf, size_t len, struct pbw *w);
/* /proc/diskstats -> SysStats.disk_stat */
size_t sys_stats_parse_diskstats(const char *buf, size_t len, struct pbw *w);
/* /proc/pressure/<x> -> SysStats.psi; @some: SYS_STATS_PSI_*_SOME of the file */
size_t sys_stats_parse_psi(const char *buf, size_t len, unsigned some, struct pbw *w);
/* /proc/slabinfo -> SysStats.slab_info (the two header lines skipped) */
size_t sys_stats_parse_slabinfo(const char *buf, size_t len, struct pbw *w);

/**
 * sys_stats_parse_u64 - the leading decimal number of a sysfs value ("1234\n").
 * Returns: 0, or -EINVAL when @buf does not start with a digit.
 */
int sys_stats_parse_u64(const char *buf, size_t len, uint64_t *ret);

/**
 * sys_stats_parse_amd_sclk - the current clock of amdgpu's pp_dpm_sclk (the line
 * that ends in '*': "1: 1800Mhz *").
 * Returns: 0, or -ENOENT.
 */
int sys_stats_parse_amd_sclk(const char *buf, size_t len, uint64_t *ret);

/* ---- the data source (sys_stats_ds.c, sys_stats_sources.c) ---- */


/* The sources, in the order their fields are written in a packet. */
enum sys_stats_source {
	SYS_STATS_SRC_MEMINFO,
	SYS_STATS_SRC_VMSTAT,
	SYS_STATS_SRC_STAT,
	SYS_STATS_SRC_DEVFREQ,
	SYS_STATS_SRC_CPUFREQ,
	SYS_STATS_SRC_BUDDYINFO,
	SYS_STATS_SRC_DISKSTAT,
	SYS_STATS_SRC_PSI,
	SYS_STATS_SRC_THERMAL,
	SYS_STATS_SRC_CPUIDLE,
	SYS_STATS_SRC_GPUFREQ,
	SYS_STATS_SRC_SLAB,
	_SYS_STATS_SRC_MAX,
	_SYS_STATS_SRC_INVALID = -22,
};

const char *sys_stats_source_to_string(enum sys_stats_source s);

/* A file opened at setup, read with pread() at every poll that needs it. */
struct sys_stats_file {
	int fd;              /* -EBADF: could not be opened */
};

/* A named file under a directory: devfreq devices, thermal zones, idle states. */
struct sys_stats_named {
	char *name;
	char *type;          /* thermal zone type, read once */
	struct sys_stats_file f;
};

struct sys_stats_cpuidle_cpu {
	uint32_t cpu;
	size_t n_states;
	struct sys_stats_named *states;
};

enum sys_stats_gpu_kind {
	SYS_STATS_GPU_NONE,
	SYS_STATS_GPU_KGSL,  /* Hz */
	SYS_STATS_GPU_I915,  /* MHz */
	SYS_STATS_GPU_AMD,   /* pp_dpm_sclk table */
};

struct sys_stats {
	struct loop *event;
	struct loop_source *timer;
	struct pbw_sink sink;
	struct ds_host host;
	uint64_t instance_id;
	uint64_t tracing_session_id;

	int proc_fd, sys_fd;
	uint32_t period_ms;                 /* the timer's, 0: nothing polled */
	uint32_t every[_SYS_STATS_SRC_MAX]; /* poll source s every every[s] ticks, 0: never */
	uint64_t tick;
	bool started;

	struct sys_stats_keymap meminfo_keys, vmstat_keys;
	unsigned stat_mask;
	uint64_t ns_per_user_hz;

	/* the read buffer, shared by every file: grows to the largest one */
	char *buf;
	size_t buf_size;

	struct sys_stats_file meminfo, vmstat, stat, buddyinfo, diskstats, slabinfo;
	struct sys_stats_file psi[3];       /* cpu, io, memory */
	struct sys_stats_file gpu;
	enum sys_stats_gpu_kind gpu_kind;
	struct sys_stats_file *cpufreq;     /* [n_cpus], -EBADF where missing */
	uint32_t n_cpus;
	struct sys_stats_named *devfreq;
	size_t n_devfreq;
	struct sys_stats_named *thermal;
	size_t n_thermal;
	struct sys_stats_cpuidle_cpu *cpuidle;
	size_t n_cpuidle;

	bool read_error_logged[_SYS_STATS_SRC_MAX];
	struct sys_stats_stats stats;
};

/**
 * sys_stats_sources_open - open what every enabled source reads; problems are
 * appended to @warnings (a stream), one line per source.
 * Returns: 0 or -ENOMEM.
 */
int sys_stats_sources_open(struct sys_stats *ss, FILE *warnings);

/** sys_stats_sources_close - close and free what sys_stats_sources_open() opened. */
void sys_stats_sources_close(struct sys_stats *ss);

/** sys_stats_source_write - read source @s and write its fields into @w. */
void sys_stats_source_write(struct sys_stats *ss, enum sys_stats_source s, struct pbw *w);
