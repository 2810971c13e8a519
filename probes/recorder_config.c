/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The recorder's trace config: either a Perfetto TraceConfig file (text or
 * binary), or one built from command-line flags.  Flags are turned into the
 * same text format a user would write, so both paths go through one parser
 * and produce the same trace shape.
 */
#include <fcntl.h>
#include <stdio.h>
#include <strings.h>
#include <string.h>

#include "protos/pbcheck.h"
#include "protos/pbtxt.h"
#include "probes/recorder.h"
#include "probes/ds/ds.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "util/util.h"

int recorder_parse_duration_ms(const char *s, uint64_t *ret)
{
	char *end;
	double v;
	double mult = 1000.0;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	if (strcmp(end, "ms") == 0)
		mult = 1.0;
	else if (strcmp(end, "s") == 0 || *end == '\0')
		mult = 1000.0;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		mult = 60000.0;
	else if (strcmp(end, "h") == 0)
		mult = 3600000.0;
	else
		return -EINVAL;
	v *= mult;
	/* TraceConfig.duration_ms is a uint32 */
	if (v > (double)UINT32_MAX)
		return -ERANGE;
	*ret = (uint64_t)v;
	return 0;
}

int recorder_parse_size_kb(const char *s, uint32_t *ret)
{
	char *end;
	unsigned long long v;
	unsigned long long mult = 1;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (*end == '\0' || strcasecmp(end, "k") == 0 || strcasecmp(end, "kb") == 0)
		mult = 1;
	else if (strcasecmp(end, "m") == 0 || strcasecmp(end, "mb") == 0)
		mult = 1024;
	else if (strcasecmp(end, "g") == 0 || strcasecmp(end, "gb") == 0)
		mult = 1024 * 1024;
	else
		return -EINVAL;
	if (v == 0 || v > UINT32_MAX / mult)
		return -ERANGE;
	*ret = (uint32_t)(v * mult);
	return 0;
}

/* Event names from the command line go into a quoted pbtxt string. */
static bool event_name_ok(const char *e)
{
	return name_valid(e, 256, NAME_SLASH | NAME_STAR);
}

/* tracefs instance names: the checks proper happen in probes/ftrace; here only
 * what could break out of the quoted string */
static bool instance_name_ok(const char *n)
{
	return name_valid(n, 255, NAME_DASH | NAME_DOT | NAME_NOT_DOTS);
}

/* atrace category names: the same character set Perfetto's table uses */
static bool category_name_ok(const char *c)
{
	return name_valid(c, 64, NAME_DASH);
}

static const struct {
	uint32_t bit;
	const char *field;      /* SysStatsConfig */
} sys_stats_fields[] = {
	{ RECORDER_SYS_MEMINFO, "meminfo_period_ms" },
	{ RECORDER_SYS_VMSTAT, "vmstat_period_ms" },
	{ RECORDER_SYS_STAT, "stat_period_ms" },
	{ RECORDER_SYS_DEVFREQ, "devfreq_period_ms" },
	{ RECORDER_SYS_CPUFREQ, "cpufreq_period_ms" },
	{ RECORDER_SYS_BUDDYINFO, "buddyinfo_period_ms" },
	{ RECORDER_SYS_DISKSTAT, "diskstat_period_ms" },
	{ RECORDER_SYS_PSI, "psi_period_ms" },
	{ RECORDER_SYS_THERMAL, "thermal_period_ms" },
	{ RECORDER_SYS_CPUIDLE, "cpuidle_period_ms" },
	{ RECORDER_SYS_GPUFREQ, "gpufreq_period_ms" },
	{ RECORDER_SYS_SLAB, "slab_period_ms" },
};

static bool has_category(const struct recorder_options *o, const char *name)
{
	for (size_t i = 0; i < o->n_categories; i++)
		if (strcmp(o->categories[i], name) == 0)
			return true;
	return false;
}

/*
 * linux.sys_stats: the --sys-stats sources at one period; the "disk"
 * category adds diskstat every second, as `perfetto -t` does.
 */
static void write_sys_stats(FILE *f, const struct recorder_options *o, unsigned target)
{
	bool disk = has_category(o, "disk") && !(o->sys_stats & RECORDER_SYS_DISKSTAT);

	if (!o->sys_stats && !disk)
		return;
	fprintf(f, "data_sources { config { name: \"linux.sys_stats\" target_buffer: %u\n"
		   "  sys_stats_config {", target);
	for (size_t i = 0; i < ARRAY_SIZE(sys_stats_fields); i++)
		if (o->sys_stats & sys_stats_fields[i].bit)
			fprintf(f, " %s: %u", sys_stats_fields[i].field, o->sys_stats_period_ms);
	if (disk)
		fprintf(f, " diskstat_period_ms: 1000");
	fprintf(f, " } } }\n");
}

/*
 * The config `perfetto -t` builds from the same words (Perfetto v58.2
 * src/perfetto_cmd/config.cc: events and categories into one linux.ftrace
 * with symbolize_ksyms, then linux.process_stats and linux.system_info,
 * flush_period_ms 30 s), plus what the recorder adds for a first run that
 * needs no tuning: a kernel buffer and drain settings that keep up with a
 * busy machine, and process names from a /proc scan at start, kept in a
 * buffer of their own so that a full ftrace buffer cannot cost them.
 */
int recorder_config_text_from_options(const struct recorder_options *o, char **ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	unsigned meta;
	FILE *f;
	static const char *const default_events[] = {
		"sched/sched_switch", "sched/sched_waking",
	};
	/* keep names current for processes that come and go mid-trace */
	static const char *const process_events[] = {
		"sched/sched_wakeup_new", "sched/sched_process_fork", "sched/sched_process_exit",
		"sched/sched_process_free", "task/task_newtask", "task/task_rename",
	};

	for (size_t i = 0; i < o->n_events; i++)
		if (!event_name_ok(o->events[i]))
			return -EINVAL;
	for (size_t i = 0; i < o->n_categories; i++)
		if (!category_name_ok(o->categories[i]))
			return -EINVAL;
	if (o->instance && !instance_name_ok(o->instance))
		return -EINVAL;
	if (o->previous_boot && !instance_name_ok(o->previous_boot))
		return -EINVAL;

	f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	/* buffer 1, when there is one, holds what is written once or slowly */
	fprintf(f, "buffers { size_kb: %u fill_policy: DISCARD }\n", o->service_buffer_kb);
	meta = 0;
	if (o->process_names) {
		fprintf(f, "buffers { size_kb: %u fill_policy: DISCARD }\n", 8192u);
		meta = 1;
	}
	if (o->previous_boot) {
		fprintf(f, "data_sources { config { name: \"linux.frozen_ftrace\" target_buffer: 0\n"
			   "  frozen_ftrace_config { instance_name: \"%s\" } } }\n",
			o->previous_boot);
		goto others;
	}
	fprintf(f, "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		   "  ftrace_config {\n");
	if (o->n_events == 0 && o->n_categories == 0 && !o->hypervisor) {
		for (size_t i = 0; i < ARRAY_SIZE(default_events); i++)
			fprintf(f, "    ftrace_events: \"%s\"\n", default_events[i]);
	}
	for (size_t i = 0; i < o->n_events; i++)
		fprintf(f, "    ftrace_events: \"%s\"\n", o->events[i]);
	if (o->process_names)
		for (size_t i = 0; i < ARRAY_SIZE(process_events); i++)
			fprintf(f, "    ftrace_events: \"%s\"\n", process_events[i]);
	for (size_t i = 0; i < o->n_categories; i++)
		fprintf(f, "    atrace_categories: \"%s\"\n", o->categories[i]);
	if (o->symbolize_ksyms)
		fprintf(f, "    symbolize_ksyms: true\n");
	if (o->compact_sched >= 0)
		fprintf(f, "    compact_sched { enabled: %s }\n", o->compact_sched ? "true" : "false");
	if (o->buffer_size_kb)
		fprintf(f, "    buffer_size_kb: %u\n", o->buffer_size_kb);
	if (o->drain_period_ms)
		fprintf(f, "    drain_period_ms: %u\n", o->drain_period_ms);
	if (o->drain_buffer_percent)
		fprintf(f, "    drain_buffer_percent: %u\n", o->drain_buffer_percent);
	if (o->instance)
		fprintf(f, "    instance_name: \"%s\"\n", o->instance);
	fprintf(f, "  } } }\n");
others:
	/* pKVM's events live in an instance of their own, as perfetto -t asks */
	if (o->hypervisor)
		fprintf(f, "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
			   "  ftrace_config { instance_name: \"hyp\" ftrace_events: \"hyp/*\" } } }\n");
	if (o->process_names)
		fprintf(f, "data_sources { config { name: \"linux.process_stats\" target_buffer: 1\n"
			   "  process_stats_config { scan_all_processes_on_start: true "
			   "record_thread_names: true } } }\n");
	if (o->system_info)
		fprintf(f, "data_sources { config { name: \"linux.system_info\" target_buffer: %u } }\n",
			meta);
	write_sys_stats(f, o, meta);
	fprintf(f, "duration_ms: %llu\n", (unsigned long long)o->duration_ms);
	/* as perfetto -t: long recordings get their data committed regularly */
	fprintf(f, "flush_period_ms: 30000\n");
	if (fclose(f) != 0 || !text)
		return -ENOMEM;
	*ret = TAKE_PTR(text);
	return 0;
}

int recorder_config_load(const char *path, Perfetto__Protos__TraceConfig **ret, char *err,
			 size_t err_len)
{
	_cleanup_free_ char *data = NULL;
	ProtobufCMessage *m = NULL;
	size_t len;
	int r;

	r = read_full_file_at(AT_FDCWD, path, RECORDER_CONFIG_MAX_BYTES, &data, &len);
	if (r == -EFBIG) {
		snprintf(err, err_len, "'%s' is larger than %u MiB, the limit for a config file", path,
			 RECORDER_CONFIG_MAX_BYTES >> 20);
		return -E2BIG;
	}
	if (r < 0) {
		snprintf(err, err_len, "cannot read '%s': %s", path, strerror(-r));
		return r;
	}
	/* Text configs are what people keep; a binary one has bytes text cannot hold. */
	if (memchr(data, '\0', len) == NULL) {
		r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, data, len, &m, err,
				err_len);
		if (r < 0)
			return r;
	} else {
		char why[256];

		/* before unpacking: protobuf-c would cut a string at its NUL unseen */
		r = pbcheck_strings(&perfetto__protos__trace_config__descriptor,
				    (const uint8_t *)data, len, why, sizeof(why));
		if (r == -EINVAL) {
			snprintf(err, err_len, "'%s': %s, and a string may not hold one", path, why);
			return r;
		}
		m = r < 0 ? NULL
			  : protobuf_c_message_unpack(&perfetto__protos__trace_config__descriptor,
						      NULL, len, (const uint8_t *)data);
		if (!m) {
			snprintf(err, err_len, "'%s' is neither a text nor a binary TraceConfig%s%s%s",
				 path, r < 0 ? " (" : "", r < 0 ? why : "", r < 0 ? ")" : "");
			return -EBADMSG;
		}
	}
	*ret = (Perfetto__Protos__TraceConfig *)m;
	return 0;
}

int recorder_config_from_options(const struct recorder_options *o,
				 Perfetto__Protos__TraceConfig **ret, char *err, size_t err_len)
{
	_cleanup_free_ char *text = NULL;
	ProtobufCMessage *m = NULL;
	int r;

	r = recorder_config_text_from_options(o, &text);
	if (r < 0) {
		snprintf(err, err_len, "invalid event, category or instance name on the command line");
		return r;
	}
	r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), &m, err,
			err_len);
	if (r < 0)
		return r;
	*ret = (Perfetto__Protos__TraceConfig *)m;
	return 0;
}

int recorder_config_check(const Perfetto__Protos__TraceConfig *cfg, char *err, size_t err_len)
{
	size_t served = 0;
	int r;

	if (!cfg)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_data_sources; i++) {
		const Perfetto__Protos__DataSourceConfig *dc = cfg->data_sources[i]->config;
		const struct ds_ops *ops;
		size_t bytes;

		if (!dc || !dc->name || !ds_find(dc->name))
			continue;
		served++;
		ops = ds_find(dc->name);
		if (ops->check_config) {
			char why[256] = "";

			r = ops->check_config(dc, why, sizeof(why));
			if (r < 0) {
				snprintf(err, err_len, "data source %zu (%s) %s", i, dc->name, why);
				return r;
			}
		}
		bytes = protobuf_c_message_get_packed_size(&dc->base);
		if (bytes > RECORDER_DS_CONFIG_MAX_BYTES) {
			snprintf(err, err_len, "data source %zu (%s) has a config of %zu bytes encoded, "
				 "more than the limit of %u (%u KiB): it has to fit one IPC frame",
				 i, dc->name, bytes, RECORDER_DS_CONFIG_MAX_BYTES,
				 RECORDER_DS_CONFIG_MAX_BYTES >> 10);
			return -E2BIG;
		}
	}
	if (served == 0) {
		size_t n = (size_t)snprintf(err, err_len, "the config names no data source this program "
					    "records (%zu named); it records", cfg->n_data_sources);

		for (size_t i = 0; ds_registry[i] && n < err_len; i++)
			n += (size_t)snprintf(err + n, err_len - n, "%s %s", i ? "," : "",
					      ds_registry[i]->name);
		return -ENOENT;
	}
	return 0;
}
