/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * sys_stats - the linux.sys_stats data source, as Perfetto v58.2's
 * traced_probes implements it: every period, one TracePacket
 * { timestamp = CLOCK_BOOTTIME when the poll began, sys_stats { ...,
 * collection_end_timestamp } } with the sources whose period is due.
 *
 * Sources and where they read (each with its own *_period_ms):
 * /proc/meminfo, /proc/vmstat (the counters of the config's lists, or every
 * counter we know by name), /proc/stat (cpu times, IRQ, softirq and fork
 * counts per stat_counters), /sys/class/devfreq/<dev>/cur_freq,
 * cpu<N>/cpufreq/scaling_cur_freq, /proc/buddyinfo, /proc/diskstats,
 * /proc/pressure/{cpu,io,memory}, /sys/class/thermal/thermal_zone<N>,
 * cpu<N>/cpuidle/state<K>, the GPU frequency (kgsl, i915, amdgpu) and
 * /proc/slabinfo.
 *
 * Periods: 0 turns a source off; below 10 ms becomes 10 ms.  The timer runs
 * at the shortest period, on wall-clock multiples of it; every other period
 * must be a multiple of the shortest, or nothing is polled (a warning says
 * so), as traced_probes refuses such configs.
 *
 * Files and directories are opened at setup and read with one pread() each
 * per poll; the read buffer grows on the first poll and then only if a file
 * grows.  A file that cannot be opened or read is left out of the packets
 * (cpufreq: written as 0 kHz) and said once per session.
 */

#include "probes/ds/ds.h"

struct sys_stats;
struct Perfetto__Protos__SysStatsConfig;

/* Perfetto's lower bound for every *_period_ms. */
#define SYS_STATS_MIN_PERIOD_MS 10u

/* The ops of "linux.sys_stats", for probes/ds/ds_registry.c. */
extern const struct ds_ops sys_stats_ds_ops;

/* What sys_stats_report() and the tests read. */
struct sys_stats_stats {
	uint64_t polls;          /* timer ticks that wrote (or tried) a packet */
	uint64_t packets_dropped;/* begin_packet() had no room */
	uint64_t read_errors;    /* failed reads, all sources */
	uint64_t bytes_read;     /* from pread(), all sources */
	size_t buffer_size;      /* the read buffer, now */
};

/**
 * sys_stats_setup_at - as sys_stats_ds_ops.setup, reading below @proc_root
 * and @sys_root (fixture trees laid out like /proc and /sys) instead of
 * /proc and /sys.
 * @env: as for ds_ops.setup (event may be NULL if nothing is polled).
 * @cfg: the SysStatsConfig; NULL polls nothing.
 * @proc_root, @sys_root: directories; NULL for the real ones.
 * @ret: the instance, for the other sys_stats_ds_ops.
 * @ret_error, @ret_warnings: as for ds_ops.setup.
 * Returns: 0, -EINVAL, -ENOMEM, -errno from opening a root.
 */
int sys_stats_setup_at(const struct ds_env *env, const struct Perfetto__Protos__SysStatsConfig *cfg,
		       const char *proc_root, const char *sys_root, struct sys_stats **ret,
		       char **ret_error, char **ret_warnings);

/**
 * sys_stats_poll - one timer tick by hand: read what is due and write the
 * packet (tests and benchmarks; the timer calls the same code).
 * Returns: 0, -ENOSPC if the packet was dropped.
 */
int sys_stats_poll(struct sys_stats *ss);

/**
 * sys_stats_period_ms - the timer's period after clamping, 0 if nothing
 * is polled.
 */
uint32_t sys_stats_period_ms(const struct sys_stats *ss);

/** sys_stats_get_stats - copy the counters into @ret. */
void sys_stats_get_stats(const struct sys_stats *ss, struct sys_stats_stats *ret);
