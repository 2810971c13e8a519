/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Inside the plan room only: the event list's layout, which the resolver
 * walks by group (ftrace_event_list.c, ftrace_plan.c).
 */

#include <stdbool.h>
#include <stddef.h>

#include "probes/ftrace/plan/ftrace_plan.h"

struct ftrace_event_list {
	struct ftrace_event_name *ev;
	size_t n, cap;
	bool sorted;
};

/* First index of @group in the sorted list @l, or l->n. */
size_t ftrace_event_list_group_start(const struct ftrace_event_list *l, const char *group);
