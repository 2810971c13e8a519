/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * sysfs_power - the linux.sysfs_power data source, as Perfetto v58.2's
 * traced_probes defines it: the batteries of /sys/class/power_supply (a
 * directory whose `type` reads "Battery" and whose `present` reads "1"),
 * found at setup, are polled once a second on the wall clock's whole
 * seconds, each poll one TracePacket { timestamp = CLOCK_BOOTTIME,
 * battery { BatteryCounters } } per battery:
 *
 *   charge_now  -> charge_counter_uah     current_now -> current_ua
 *   capacity    -> capacity_percent       current_avg -> current_avg_ua
 *   energy_now  -> energy_counter_uwh     voltage_now -> voltage_uv
 *
 * and the battery's directory name when there is more than one.  A file a
 * battery lacks (or that does not read as a number) leaves its field out.
 * Unlike v58.2, current_avg goes to current_avg_ua rather than over
 * current_ua, so trace_processor shows both.  The config has no fields.
 */

#include <stdint.h>

#include "probes/ds/ds.h"

struct sysfs_power;

/* The ops of "linux.sysfs_power", for probes/ds/ds_registry.c. */
extern const struct ds_ops sysfs_power_ds_ops;

/* Batteries followed at most: a machine has one or two. */
#define SYSFS_POWER_BATTERIES_MAX 16u

/* What sysfs_power_get_stats() returns (tests, the report). */
struct sysfs_power_stats {
	uint64_t polls;            /* timer ticks */
	uint64_t packets;          /* BatteryCounters packets written */
	uint64_t packets_dropped;  /* begin_packet() had no room, or end_packet() failed */
	uint64_t read_errors;      /* a counter file that vanished or did not parse */
	unsigned batteries;        /* batteries found at setup */
};

/**
 * sysfs_power_parse_value - one sysfs counter: a signed decimal integer,
 * blanks and one trailing newline allowed, nothing else.
 * @text: the bytes read (need not be NUL-terminated).
 * @len: their number.
 * @ret: the value, untouched on failure.
 * Returns: 0, -EINVAL for anything else, -ERANGE past int64.
 */
int sysfs_power_parse_value(const char *text, size_t len, int64_t *ret);

/**
 * sysfs_power_setup_at - as sysfs_power_ds_ops.setup, looking for batteries
 * in @power_supply_dir (a fixture tree laid out like
 * /sys/class/power_supply) instead of the real one.
 * @env: as for ds_ops.setup (the loop is used from start on).
 * @power_supply_dir: NULL for /sys/class/power_supply.
 * @ret: the instance, for the other sysfs_power_ds_ops.
 * @ret_warnings: as for ds_ops.setup: says when no battery was found.
 * Returns: 0 (also with no battery, or no power_supply class), -EINVAL, -ENOMEM.
 */
int sysfs_power_setup_at(const struct ds_env *env, const char *power_supply_dir,
			 struct sysfs_power **ret, char **ret_warnings);

/**
 * sysfs_power_poll - one timer tick by hand: a packet per battery (tests;
 * the timer calls the same code).
 * Returns: 0, -ENOSPC if a packet was dropped.
 */
int sysfs_power_poll(struct sysfs_power *sp);

/** sysfs_power_get_stats - copy the counters into @ret. */
void sysfs_power_get_stats(const struct sysfs_power *sp, struct sysfs_power_stats *ret);
