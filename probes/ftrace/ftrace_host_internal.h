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
