/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * system_info - the linux.system_info data source, as Perfetto v58.2's
 * traced_probes implements it: at start, one TracePacket { timestamp =
 * CLOCK_BOOTTIME, cpu_info { cpus: one per "processor" of /proc/cpuinfo } }
 * with, per CPU, the processor name (the Arm "Processor" line, "unknown"
 * elsewhere), the frequencies of cpufreq's scaling_available_frequencies and
 * scaling_boost_frequencies (sorted, once each), cpu_capacity, the Arm CPU
 * identifier and the known feature flags; then, with irq_names, one
 * TracePacket { interrupt_info } with the IRQ names of /proc/interrupts.
 * Then the writer is flushed.  Nothing is polled.
 */

#include "probes/ds/ds.h"

struct system_info;
struct Perfetto__Protos__SystemInfoConfig;

/* The ops of "linux.system_info", for probes/ds/ds_registry.c. */
extern const struct ds_ops system_info_ds_ops;

/**
 * system_info_setup_at - as system_info_ds_ops.setup, reading below
 * @proc_root and @sys_root (fixture trees) instead of /proc and /sys.
 * @env: as for ds_ops.setup (the event loop is not used).
 * @cfg: may be NULL.
 * @proc_root, @sys_root: NULL for the real ones.
 * @ret: the instance, for the other system_info_ds_ops.
 * Returns: 0, -EINVAL, -ENOMEM, -errno from opening a root.
 */
int system_info_setup_at(const struct ds_env *env,
			 const struct Perfetto__Protos__SystemInfoConfig *cfg,
			 const char *proc_root, const char *sys_root, struct system_info **ret);
