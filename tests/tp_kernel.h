/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Test helpers for the real kernel: tracefs snapshots (to prove we leave it
 * as found), private instances, and a context-switch workload whose tids
 * are known.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TP_TRACEFS "/sys/kernel/tracing"

/* true if root with tracefs mounted (mounting it if needed) */
bool tp_kernel_available(void);

/* tracing_on, set_event, buffer_size_kb, trace_clock, buffer_percent, current_tracer of @dir */
char *tp_tracefs_snapshot(const char *dir);

/* create /sys/kernel/tracing/instances/<name>; removed by tp_instance_remove or at exit */
int tp_instance_create(const char *name, char *ret_path, size_t len);
void tp_instance_remove(const char *name);

struct tp_workload {
	pid_t pid;          /* the workload process (tgid) */
	pid_t tids[64];
	size_t n_tids;
	char comm[16];
};

/*
 * Start @pairs pairs of threads (in a child process named @comm) that pass a
 * byte back and forth over pipes for @ms milliseconds: two context switches
 * and a wakeup per round trip on each pair.
 */
int tp_workload_start(const char *comm, unsigned pairs, unsigned ms, struct tp_workload *ret);
/* wait for it to finish; returns its exit status */
int tp_workload_wait(struct tp_workload *w);
