/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * recorder - `traced-probes record`: the producer and an in-process tracing
 * service (on its own thread, over a socketpair and a memfd SMB, speaking the
 * real protocol) record one trace into a file.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protos/perfetto/config/trace_config.pb-c.h"

#define RECORDER_MAX_EVENTS 256

struct recorder_options {
	const char *output;
	const char *config_path;        /* -c: a TraceConfig, text or binary */
	uint64_t duration_ms;           /* -t */
	uint32_t buffer_size_kb;        /* -b: per-CPU kernel buffer, 0 = default */
	uint32_t service_buffer_kb;     /* the service's buffer for ftrace data */
	uint32_t drain_period_ms;       /* 0 = default */
	uint32_t drain_buffer_percent;  /* drain at once at this fill level; 0 = off */
	const char *events[RECORDER_MAX_EVENTS];
	size_t n_events;
	int compact_sched;              /* -1 unset (on), 0 off, 1 on */
	bool process_names;
	const char *instance;           /* tracefs instance (must exist) */
	bool quiet;
};

/**
 * recorder_options_init - the defaults that make a first run useful:
 * sched_switch + sched_waking + process names for 10 s.
 */
void recorder_options_init(struct recorder_options *o);

/**
 * recorder_main - parse `record` arguments (argv[0] is "record") and run.
 * Returns: a process exit code.
 */
int recorder_main(int argc, char **argv);

/**
 * recorder_run - record one trace as @o says.
 * Returns: 0, or -errno after logging what went wrong.
 */
int recorder_run(const struct recorder_options *o);

/* config building, exposed for tests */
int recorder_parse_duration_ms(const char *s, uint64_t *ret);
int recorder_parse_size_kb(const char *s, uint32_t *ret);
int recorder_config_text_from_options(const struct recorder_options *o, char **ret);
int recorder_config_from_options(const struct recorder_options *o,
				 Perfetto__Protos__TraceConfig **ret, char *err, size_t err_len);
int recorder_config_load(const char *path, Perfetto__Protos__TraceConfig **ret, char *err,
			 size_t err_len);
