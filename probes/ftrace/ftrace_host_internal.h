/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What a data source asks of the host (ftrace_host.c): the drain of a
 * tracefs directory, shared by the data sources that use it, and the
 * drain timer.  The host never calls a data source except through the
 * reader table of ftrace_drain.h.
 */

#include "probes/ftrace/ftrace.h"

struct ftrace_drain;

/**
 * ftrace_host_get_drain - the drain of the top level (@instance_name NULL)
 * or of instances/@instance_name, opened on first use.
 * @ret_error: on failure, a malloc'd reason (may be NULL).
 * Returns: 0 or -errno.
 */
int ftrace_host_get_drain(struct ftrace_host *h, const char *instance_name, struct ftrace_drain **ret,
			  char **ret_error);

/* Free @d if no reader is attached to it any more. */
void ftrace_host_put_drain(struct ftrace_host *h, struct ftrace_drain *d);

/* Arm, re-period or stop the drain timer after a start or a stop. */
int ftrace_host_update_timer(struct ftrace_host *h);

struct ksyms;

/**
 * ftrace_host_ksyms_get - the kernel symbol map, loaded from /proc/kallsyms
 * on first use and shared by every data source that symbolizes.
 * Returns: 0 with a reference taken; -EPERM when the kernel hides the
 * addresses (kernel.kptr_restrict, no CAP_SYSLOG), -errno (no reference).
 */
int ftrace_host_ksyms_get(struct ftrace_host *h, const struct ksyms **ret);

/*
 * Drop a reference.  The map is freed with the last one unless some data
 * source asked to keep it (@retain: ksyms_mem_policy KSYMS_RETAIN).
 */
void ftrace_host_ksyms_put(struct ftrace_host *h, bool retain);

/* True the first time it is called for @what (a FTRACE_HOST_ONCE_* bit). */
enum { FTRACE_HOST_ONCE_ATRACE = 1u << 0, FTRACE_HOST_ONCE_KPTR = 1u << 1 };
bool ftrace_host_once(struct ftrace_host *h, unsigned what);
