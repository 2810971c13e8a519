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
#define RECORDER_MAX_CATEGORIES 64

/* linux.sys_stats sources (SysStatsConfig *_period_ms), for --sys-stats */
enum {
	RECORDER_SYS_MEMINFO = 1u << 0,
	RECORDER_SYS_VMSTAT = 1u << 1,
	RECORDER_SYS_STAT = 1u << 2,
	RECORDER_SYS_CPUFREQ = 1u << 3,
	RECORDER_SYS_DEVFREQ = 1u << 4,
	RECORDER_SYS_BUDDYINFO = 1u << 5,
	RECORDER_SYS_DISKSTAT = 1u << 6,
	RECORDER_SYS_PSI = 1u << 7,
	RECORDER_SYS_THERMAL = 1u << 8,
	RECORDER_SYS_CPUIDLE = 1u << 9,
	RECORDER_SYS_GPUFREQ = 1u << 10,
	RECORDER_SYS_SLAB = 1u << 11,
};
/* --sys-stats with no list: the counters read next to a sched trace */
#define RECORDER_SYS_DEFAULT \
	(RECORDER_SYS_MEMINFO | RECORDER_SYS_VMSTAT | RECORDER_SYS_STAT | RECORDER_SYS_CPUFREQ)
#define RECORDER_SYS_STATS_PERIOD_MS 250u

struct recorder_options {
	const char *output;
	const char *config_path;        /* -c: a TraceConfig, text or binary */
	uint64_t duration_ms;           /* -t, counted from the moment tracing is on */
	uint32_t buffer_size_kb;        /* -b: per-CPU kernel buffer, 0 = default */
	uint32_t service_buffer_kb;     /* the service's buffer for ftrace data */
	uint32_t drain_period_ms;       /* 0 = default */
	uint32_t drain_buffer_percent;  /* drain at once at this fill level; 0 = off */
	/* --subbuf-size: ring-buffer sub-buffer KiB (0: the kernel's), when given */
	uint32_t subbuf_kb;
	bool subbuf_given;
	/* -e and GROUP/NAME words: FtraceConfig.ftrace_events */
	const char *events[RECORDER_MAX_EVENTS];
	size_t n_events;
	/* bare words, as `perfetto -t`: FtraceConfig.atrace_categories */
	const char *categories[RECORDER_MAX_CATEGORIES];
	size_t n_categories;
	bool hypervisor;                /* "hyp"/"hypervisor": the hyp instance, as perfetto -t */
	int compact_sched;              /* -1 unset (on), 0 off, 1 on */
	bool process_names;
	bool symbolize_ksyms;           /* FtraceConfig.symbolize_ksyms (perfetto -t sets it) */
	bool system_info;               /* linux.system_info (perfetto -t adds it) */
	uint32_t sys_stats;             /* RECORDER_SYS_* sources; 0: no linux.sys_stats */
	uint32_t sys_stats_period_ms;
	const char *instance;           /* tracefs instance (must exist) */
	/* --previous-boot: linux.frozen_ftrace of this boot-mapped instance
	 * instead of linux.ftrace (and no process names: the pids are the
	 * old boot's) */
	const char *previous_boot;
	bool duration_given;            /* -t was given */
	bool quiet;
};

/**
 * recorder_options_init - the defaults that make a first run useful:
 * sched_switch + sched_waking + process names for 10 s.
 */
void recorder_options_init(struct recorder_options *o);

/**
 * recorder_parse_args - fill @o from `record` arguments (argv[0] is
 * "record"); @o is initialised first.  A refused word is logged by name.
 * Returns: 0 to record, 1 when --help was printed, -EINVAL for a bad word.
 */
int recorder_parse_args(int argc, char **argv, struct recorder_options *o);

/**
 * recorder_add_specifier - one positional word, as `perfetto -t` reads
 * them: GROUP/NAME (or GROUP/ *) is an ftrace event, "hyp"/"hypervisor" the
 * hypervisor's instance, any other word an atrace category.
 * @err: why the word was refused.
 * Returns: 0, -EINVAL (malformed word), -E2BIG (too many).
 */
int recorder_add_specifier(struct recorder_options *o, const char *word, char *err, size_t err_len);

/**
 * recorder_parse_sys_stats - a --sys-stats list: comma-separated sources
 * (meminfo, vmstat, stat, cpufreq, devfreq, buddyinfo, diskstat, psi,
 * thermal, cpuidle, gpufreq, slab) and presets (default, memory, cpu, io,
 * all); NULL or "" is "default".
 * Returns: 0 with *@ret the RECORDER_SYS_* mask, or -EINVAL with @err
 * naming the word.
 */
int recorder_parse_sys_stats(const char *list, uint32_t *ret, char *err, size_t err_len);

/**
 * recorder_check_events - before anything is changed: does any event the
 * options ask for exist under @tracefs_root (a tracefs mount, or NULL to
 * find it)?  Categories count when Perfetto's table knows them.
 * @ret_error: on -ENOENT, a malloc'd reason listing what is unknown.
 * Returns: 0 (something can be recorded, or the kernel's list could not
 * be read: the data source then reports for itself), -ENOENT when nothing
 * asked for exists, -ENOMEM.
 */
int recorder_check_events(const struct recorder_options *o, const char *tracefs_root,
			  char **ret_error);

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

/* A config file (text or binary) is at most this long. */
#define RECORDER_CONFIG_MAX_BYTES (4u << 20)
/*
 * One data source's config, encoded, is at most this long: its
 * SetupDataSource has to fit one IPC frame (131068 bytes) with the command
 * around it, or the data source would never hear of it.
 */
#define RECORDER_DS_CONFIG_MAX_BYTES (120u << 10)

/**
 * recorder_config_check - what `record` refuses before anything is
 * recorded: a config that names no data source this program serves, a
 * linux.ftrace config with more than FTRACE_MAX_CONFIG_EVENTS events, an
 * event name longer than a group, '/' and an event name can be, an instance
 * name over FTRACE_INSTANCE_NAME_MAX, and a data source config over
 * RECORDER_DS_CONFIG_MAX_BYTES.  @err says which and names the limit.
 * Returns: 0, -ENOENT (nothing served), -E2BIG (a limit), -EINVAL.
 */
int recorder_config_check(const Perfetto__Protos__TraceConfig *cfg, char *err, size_t err_len);
