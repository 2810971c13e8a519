/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The mapped per-CPU reader (ftrace_cpu_mmap.c), used by ftrace_cpu.c
 * only: the page reader of one CPU either maps its buffer or read()s it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/ftrace/ftrace_control.h"

struct ftrace_cpu_map;

/* True when TRACED_PROBES_FTRACE_MMAP=1 is in the environment, until a
 * kernel without mapped ring buffers was seen. */
bool ftrace_cpu_map_enabled(void);

/*
 * ftrace_cpu_map_open - map the ring buffer behind @fd (trace_pipe_raw of
 * one CPU, stays open and owned by the caller while the map lives).
 * Returns: 0, -EOPNOTSUPP when mapping is not asked for, -ENODEV on a kernel that
 * cannot map (remembered), -EBUSY and others when this buffer refuses.
 */
int ftrace_cpu_map_open(int fd, size_t page_size, unsigned commit_size, struct ftrace_cpu_map **ret);
struct ftrace_cpu_map *ftrace_cpu_map_free(struct ftrace_cpu_map *map);

/* ftrace_mapped_next() on the live mapping. */
int ftrace_cpu_map_next(struct ftrace_cpu_map *map, uint8_t *buf, const uint8_t **ret_page,
			bool *ret_caught_up);
void ftrace_cpu_map_counters(const struct ftrace_cpu_map *map, struct ftrace_cpu_map_counters *ret);
