/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.system_info: reads /proc/cpuinfo, the cpufreq frequency lists and
 * cpu_capacity (and /proc/interrupts with irq_names) once, at start, and
 * writes them as one CpuInfo packet (and one InterruptInfo packet).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probes/system_info/system_info.h"
#include "probes/system_info/system_info_internal.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "protos/perfetto/config/system_info/system_info_config.pb-c.h"
#include "protos/pbw.h"
#include "util/util.h"

/* /proc/cpuinfo of 4096 CPUs with every x86 flag is ~10 MiB. */
#define SYSTEM_INFO_CPUINFO_MAX (64u * 1024 * 1024)
#define SYSTEM_INFO_SMALL_MAX (64u * 1024)
/* Frequencies kept per CPU: cpufreq tables are far shorter. */
#define SYSTEM_INFO_FREQS_MAX 512

struct system_info {
	struct pbw_sink sink;
	int proc_fd, sys_fd;
	bool irq_names;
	bool started;
	uint64_t packets;
	uint64_t packets_dropped;
};

static int open_root(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static void system_info_free(struct system_info *si)
{
	if (!si)
		return;
	if (si->proc_fd >= 0)
		(void)close(si->proc_fd);
	if (si->sys_fd >= 0)
		(void)close(si->sys_fd);
	free(si);
}

int system_info_setup_at(const struct ds_env *env, const Perfetto__Protos__SystemInfoConfig *cfg,
			 const char *proc_root, const char *sys_root, struct system_info **ret)
{
	struct system_info *si;
	int r;

	if (!env || !env->sink.begin_packet || !env->sink.end_packet || !ret)
		return -EINVAL;
	si = calloc(1, sizeof(*si));
	if (!si)
		return -ENOMEM;
	si->sink = env->sink;
	si->proc_fd = si->sys_fd = -EBADF;
	si->irq_names = cfg && cfg->has_irq_names && cfg->irq_names;
	r = open_root(proc_root ? proc_root : "/proc");
	if (r >= 0) {
		si->proc_fd = r;
		r = open_root(sys_root ? sys_root : "/sys");
	}
	if (r < 0) {
		system_info_free(si);
		return r;
	}
	si->sys_fd = r;
	*ret = si;
	return 0;
}

/* A whole file, or NULL (missing files are normal here: no cpufreq, no capacity). */
static char *read_at(int dirfd, const char *path, size_t max, size_t *ret_len)
{
	char *buf = NULL;

	if (read_full_file_at(dirfd, path, max, &buf, ret_len) < 0)
		return NULL;
	return buf;
}

static void write_cpu(struct system_info *si, struct pbw *w, const struct system_info_cpu *cpu,
		      uint32_t *freqs)
{
	static const char *const freq_files[] = {
		"scaling_available_frequencies",
		"scaling_boost_frequencies",
	};
	char path[128];
	size_t n = 0, len;
	char *text;
	uint64_t cap;

	pbw_begin_nested(w, SYSTEM_INFO_CPUINFO_CPUS);
	pbw_bytes(w, SYSTEM_INFO_CPU_PROCESSOR, cpu->processor, cpu->processor_len);

	for (size_t i = 0; i < ARRAY_SIZE(freq_files); i++) {
		(void)snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpufreq/%s", cpu->index,
			       freq_files[i]);
		text = read_at(si->sys_fd, path, SYSTEM_INFO_SMALL_MAX, &len);
		if (text)
			n = system_info_freqs_parse(text, len, freqs, n, SYSTEM_INFO_FREQS_MAX);
		free(text);
	}
	for (size_t i = 0; i < n; i++)
		pbw_varint(w, SYSTEM_INFO_CPU_FREQUENCIES, freqs[i]);

	(void)snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpu_capacity", cpu->index);
	text = read_at(si->sys_fd, path, SYSTEM_INFO_SMALL_MAX, &len);
	if (text && safe_atou64(text, &cap) == 0 && cap <= UINT32_MAX)
		pbw_varint(w, SYSTEM_INFO_CPU_CAPACITY, cap);
	free(text);

	/* all five Arm fields or none, as traced_probes writes them */
	if (cpu->has_arm == SYSTEM_INFO_ARM_ALL) {
		pbw_begin_nested(w, SYSTEM_INFO_CPU_ARM_IDENTIFIER);
		for (uint32_t i = 0; i < 5; i++)
			pbw_varint(w, i + 1, cpu->arm[i]);
		(void)pbw_end_nested(w);
	}
	if (cpu->features)
		pbw_varint(w, SYSTEM_INFO_CPU_FEATURES, cpu->features);
	(void)pbw_end_nested(w);
}

static int end_packet(struct system_info *si)
{
	int r = si->sink.end_packet(si->sink.userdata);

	si->packets++;
	if (r < 0)
		si->packets_dropped++;
	return r;
}

static int write_cpu_info(struct system_info *si)
{
	_cleanup_free_ uint32_t *freqs = NULL;
	_cleanup_free_ char *text = NULL;
	struct system_info_cpu cpu = {};
	size_t len = 0, pos = 0;
	struct pbw *w;

	/* no /proc/cpuinfo: an empty CpuInfo, as traced_probes writes then */
	text = read_at(si->proc_fd, "cpuinfo", SYSTEM_INFO_CPUINFO_MAX, &len);
	freqs = malloc(SYSTEM_INFO_FREQS_MAX * sizeof(*freqs));
	if (!freqs)
		return -ENOMEM;

	w = si->sink.begin_packet(si->sink.userdata);
	if (!w) {
		si->packets_dropped++;
		return -ENOSPC;
	}
	pbw_varint(w, SYSTEM_INFO_PKT_TIMESTAMP, now_ns(CLOCK_BOOTTIME));
	pbw_begin_nested(w, SYSTEM_INFO_PKT_CPU_INFO);
	while (text && system_info_cpuinfo_next(text, len, &pos, &cpu))
		write_cpu(si, w, &cpu, freqs);
	(void)pbw_end_nested(w);
	return end_packet(si);
}

/* The name words of an IRQ, joined by one space each. */
static void write_irq_name(struct pbw *w, const struct system_info_irq *irq)
{
	const char *p = irq->name, *end = irq->name + irq->name_len;
	bool first = true;

	pbw_begin_nested(w, SYSTEM_INFO_IRQ_NAME);
	while (p < end) {
		const char *t;

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		t = p;
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		if (p == t)
			break;
		if (!first)
			pbw_append_raw(w, " ", 1);
		pbw_append_raw(w, t, (size_t)(p - t));
		first = false;
	}
	(void)pbw_end_nested(w);
}

static int write_interrupt_info(struct system_info *si)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0, pos = 0;
	unsigned n_cpus = 0;
	struct system_info_irq irq;
	struct pbw *w = NULL;

	text = read_at(si->proc_fd, "interrupts", SYSTEM_INFO_CPUINFO_MAX, &len);
	if (!text)
		return 0;
	/* no packet when no IRQ has a name */
	while (system_info_interrupts_next(text, len, &pos, &n_cpus, &irq)) {
		if (!w) {
			w = si->sink.begin_packet(si->sink.userdata);
			if (!w) {
				si->packets_dropped++;
				return -ENOSPC;
			}
			pbw_varint(w, SYSTEM_INFO_PKT_TIMESTAMP, now_ns(CLOCK_BOOTTIME));
			pbw_begin_nested(w, SYSTEM_INFO_PKT_INTERRUPT_INFO);
		}
		pbw_begin_nested(w, SYSTEM_INFO_IRQ_MAPPING);
		pbw_varint(w, SYSTEM_INFO_IRQ_ID, irq.irq);
		write_irq_name(w, &irq);
		(void)pbw_end_nested(w);
	}
	if (!w)
		return 0;
	(void)pbw_end_nested(w);
	return end_packet(si);
}

/* ---- ds_ops ------------------------------------------------------------------ */

static int op_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
		    void **ret, char **ret_error, char **ret_warnings)
{
	struct system_info *si;
	int r;

	r = system_info_setup_at(env, cfg ? cfg->system_info_config : NULL, NULL, NULL, &si);
	if (r < 0) {
		/* asprintf() leaves *ret_error undefined when it fails */
		if (ret_error &&
		    asprintf(ret_error, "linux.system_info: setup failed: %s", strerror(-r)) < 0)
			*ret_error = NULL;
		return r;
	}
	*ret = si;
	return 0;
}

static int op_start(void *ds)
{
	struct system_info *si = ds;
	int r;

	if (!si)
		return -EINVAL;
	if (si->started)
		return -EALREADY;
	si->started = true;
	r = write_cpu_info(si);
	if (r >= 0 && si->irq_names)
		r = write_interrupt_info(si);
	if (si->sink.flush)
		si->sink.flush(si->sink.userdata);
	/* a dropped packet is counted, not a failed start */
	return r == -ENOSPC ? 0 : r;
}

static int op_flush(void *ds)
{
	struct system_info *si = ds;

	if (!si)
		return -EINVAL;
	if (si->sink.flush)
		si->sink.flush(si->sink.userdata);
	return 0;
}

static int op_report(void *ds, struct ds_report *r)
{
	struct system_info *si = ds;

	if (!si || !r)
		return -EINVAL;
	r->events = si->packets - si->packets_dropped;
	return 0;
}

static void op_free(void *ds)
{
	system_info_free(ds);
}

const struct ds_ops system_info_ds_ops = {
	.name = "linux.system_info",
	.setup = op_setup,
	.start = op_start,
	.flush = op_flush,
	.report = op_report,
	.free = op_free,
};
