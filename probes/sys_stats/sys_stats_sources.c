/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.sys_stats: what each source opens at setup and what it writes at a
 * poll.  Every file is opened once; a poll is one pread() per file into the
 * shared buffer, then a parser or a number.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/sys_stats/sys_stats_internal.h"
#include "util/util.h"

/* First size of the read buffer; it doubles while a file fills it. */
#define SYS_STATS_BUF_INITIAL (16u * 1024)
/* Beyond this a file is cut (a /proc/stat of ~100k CPUs). */
#define SYS_STATS_BUF_MAX (64u * 1024 * 1024)
/* The longest name or type we keep from a small sysfs file. */
#define SYS_STATS_SMALL_FILE_MAX 4096

static const char *const source_names[_SYS_STATS_SRC_MAX] = {
	[SYS_STATS_SRC_MEMINFO] = "meminfo",
	[SYS_STATS_SRC_VMSTAT] = "vmstat",
	[SYS_STATS_SRC_STAT] = "stat",
	[SYS_STATS_SRC_DEVFREQ] = "devfreq",
	[SYS_STATS_SRC_CPUFREQ] = "cpufreq",
	[SYS_STATS_SRC_BUDDYINFO] = "buddyinfo",
	[SYS_STATS_SRC_DISKSTAT] = "diskstat",
	[SYS_STATS_SRC_PSI] = "psi",
	[SYS_STATS_SRC_THERMAL] = "thermal",
	[SYS_STATS_SRC_CPUIDLE] = "cpuidle",
	[SYS_STATS_SRC_GPUFREQ] = "gpufreq",
	[SYS_STATS_SRC_SLAB] = "slab",
};

const char *sys_stats_source_to_string(enum sys_stats_source s)
{
	return s >= 0 && s < _SYS_STATS_SRC_MAX ? source_names[s] : NULL;
}

/* ---- setup ------------------------------------------------------------------ */

static int open_at(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	return fd < 0 ? -errno : fd;
}

static int open_file(struct sys_stats_file *f, int dirfd, const char *path)
{
	int fd = open_at(dirfd, path);

	f->fd = fd < 0 ? -EBADF : fd;
	return fd < 0 ? fd : 0;
}

static void close_file(struct sys_stats_file *f)
{
	if (f->fd >= 0)
		(void)close(f->fd);
	f->fd = -EBADF;
}

/* A small sysfs file's text without its trailing newline, or NULL. */
static char *read_small(int dirfd, const char *path)
{
	char *buf = NULL;
	size_t len = 0;

	if (read_full_file_at(dirfd, path, SYS_STATS_SMALL_FILE_MAX, &buf, &len) < 0)
		return NULL;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		buf[--len] = '\0';
	return buf;
}

static int cmp_names(const void *a, const void *b)
{
	/* thermal_zone2 before thermal_zone10 */
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/*
 * The entries of @path whose name starts with @prefix (and is followed by
 * digits only, with @numbered), sorted.  A missing directory is no entry.
 */
static int list_dir(int dirfd, const char *path, const char *prefix, bool numbered,
		    char ***ret, size_t *ret_n)
{
	_cleanup_free_ char **names = NULL;
	size_t n = 0, cap = 0, plen = strlen(prefix);
	struct dirent *de;
	DIR *d;
	int fd;

	*ret = NULL;
	*ret_n = 0;
	fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		int r = -errno;

		(void)close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		const char *s = de->d_name;
		char **nn;

		if (s[0] == '.' || strncmp(s, prefix, plen) != 0)
			continue;
		if (numbered && (!s[plen] || strspn(s + plen, "0123456789") != strlen(s + plen)))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				goto oom;
			names = nn;
		}
		names[n] = strdup(s);
		if (!names[n])
			goto oom;
		n++;
	}
	(void)closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	*ret = TAKE_PTR(names);
	*ret_n = n;
	return 0;
oom:
	(void)closedir(d);
	free_names(TAKE_PTR(names), n);
	return -ENOMEM;
}

/* cpu<N> directories: the CPUs are 0 .. max N (the count glibc gives too). */
static int count_cpus(int sys_fd, uint32_t *ret)
{
	char **names;
	size_t n;
	uint32_t max = 0;
	int r;

	r = list_dir(sys_fd, "devices/system/cpu", "cpu", true, &names, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		uint32_t c;

		if (safe_atou32(names[i] + 3, &c) == 0 && c >= max)
			max = c + 1;
	}
	free_names(names, n);
	*ret = max;
	return 0;
}

static int open_cpufreq(struct sys_stats *ss, FILE *warn)
{
	uint32_t missing = 0;
	char path[96];

	ss->cpufreq = calloc(ss->n_cpus ? ss->n_cpus : 1, sizeof(*ss->cpufreq));
	if (!ss->cpufreq)
		return -ENOMEM;
	for (uint32_t c = 0; c < ss->n_cpus; c++) {
		(void)snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpufreq/scaling_cur_freq", c);
		if (open_file(&ss->cpufreq[c], ss->sys_fd, path) < 0)
			missing++;
	}
	if (missing)
		fprintf(warn, "linux.sys_stats: cpufreq: %u of %u CPUs have no readable "
			      "cpufreq/scaling_cur_freq (offline, or no cpufreq driver): 0 kHz is written for them\n",
			missing, ss->n_cpus);
	return 0;
}

static int open_named(int dirfd, const char *dir, const char *prefix, bool numbered,
		      const char *value_file, const char *type_file, struct sys_stats_named **ret,
		      size_t *ret_n, size_t *ret_missing)
{
	struct sys_stats_named *v;
	char **names;
	size_t n, missing = 0;
	char path[PATH_MAX];
	int r;

	*ret = NULL;
	*ret_n = 0;
	r = list_dir(dirfd, dir, prefix, numbered, &names, &n);
	if (r < 0)
		return r;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		free_names(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		v[i].name = names[i];
		(void)snprintf(path, sizeof(path), "%s/%s/%s", dir, names[i], value_file);
		if (open_file(&v[i].f, dirfd, path) < 0)
			missing++;
		if (type_file) {
			(void)snprintf(path, sizeof(path), "%s/%s/%s", dir, names[i], type_file);
			v[i].type = read_small(dirfd, path);
		}
	}
	free(names);
	*ret = v;
	*ret_n = n;
	if (ret_missing)
		*ret_missing = missing;
	return 0;
}

static void free_named(struct sys_stats_named *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].type);
		close_file(&v[i].f);
	}
	free(v);
}

static int open_cpuidle(struct sys_stats *ss, FILE *warn)
{
	char dir[64];
	size_t missing = 0;

	ss->cpuidle = calloc(ss->n_cpus ? ss->n_cpus : 1, sizeof(*ss->cpuidle));
	if (!ss->cpuidle)
		return -ENOMEM;
	for (uint32_t c = 0; c < ss->n_cpus; c++) {
		struct sys_stats_cpuidle_cpu *cpu = &ss->cpuidle[ss->n_cpuidle];
		int r;

		(void)snprintf(dir, sizeof(dir), "devices/system/cpu/cpu%u/cpuidle", c);
		r = open_named(ss->sys_fd, dir, "state", true, "time", NULL, &cpu->states,
			       &cpu->n_states, NULL);
		if (r == -ENOMEM)
			return r;
		if (r < 0 || cpu->n_states == 0) {
			free_named(cpu->states, cpu->n_states);
			*cpu = (struct sys_stats_cpuidle_cpu){};
			missing++;
			continue;
		}
		/* the state names ("POLL", "C1", ...) do not change: read them once */
		for (size_t i = 0; i < cpu->n_states; i++) {
			char path[96];
			char *name;

			(void)snprintf(path, sizeof(path), "%s/%s/name", dir, cpu->states[i].name);
			name = read_small(ss->sys_fd, path);
			if (!name) {
				close_file(&cpu->states[i].f);
				continue;
			}
			free(cpu->states[i].name);
			cpu->states[i].name = name;
		}
		cpu->cpu = c;
		ss->n_cpuidle++;
	}
	if (missing)
		fprintf(warn, "linux.sys_stats: cpuidle: %zu of %u CPUs have no cpuidle states\n",
			missing, ss->n_cpus);
	return 0;
}

static void open_gpu(struct sys_stats *ss)
{
	static const struct {
		enum sys_stats_gpu_kind kind;
		const char *path;
	} gpus[] = {
		{ SYS_STATS_GPU_KGSL, "class/kgsl/kgsl-3d0/devfreq/cur_freq" },
		{ SYS_STATS_GPU_I915, "class/drm/card0/gt_act_freq_mhz" },
		{ SYS_STATS_GPU_AMD, "class/drm/card0/device/pp_dpm_sclk" },
	};

	ss->gpu_kind = SYS_STATS_GPU_NONE;
	for (size_t i = 0; i < ARRAY_SIZE(gpus); i++)
		if (open_file(&ss->gpu, ss->sys_fd, gpus[i].path) == 0) {
			ss->gpu_kind = gpus[i].kind;
			return;
		}
}

static void open_proc(struct sys_stats *ss, struct sys_stats_file *f, const char *path, FILE *warn)
{
	int r = open_file(f, ss->proc_fd, path);

	if (r < 0)
		fprintf(warn, "linux.sys_stats: cannot open /proc/%s (%s): left out\n", path,
			strerror(-r));
}

int sys_stats_sources_open(struct sys_stats *ss, FILE *warn)
{
	size_t missing;
	int r;

	ss->meminfo.fd = ss->vmstat.fd = ss->stat.fd = -EBADF;
	ss->buddyinfo.fd = ss->diskstats.fd = ss->slabinfo.fd = ss->gpu.fd = -EBADF;
	for (size_t i = 0; i < ARRAY_SIZE(ss->psi); i++)
		ss->psi[i].fd = -EBADF;

	if (ss->every[SYS_STATS_SRC_MEMINFO])
		open_proc(ss, &ss->meminfo, "meminfo", warn);
	if (ss->every[SYS_STATS_SRC_VMSTAT])
		open_proc(ss, &ss->vmstat, "vmstat", warn);
	if (ss->every[SYS_STATS_SRC_STAT])
		open_proc(ss, &ss->stat, "stat", warn);
	if (ss->every[SYS_STATS_SRC_BUDDYINFO])
		open_proc(ss, &ss->buddyinfo, "buddyinfo", warn);
	if (ss->every[SYS_STATS_SRC_DISKSTAT])
		open_proc(ss, &ss->diskstats, "diskstats", warn);
	if (ss->every[SYS_STATS_SRC_SLAB])
		open_proc(ss, &ss->slabinfo, "slabinfo", warn);
	if (ss->every[SYS_STATS_SRC_PSI]) {
		open_proc(ss, &ss->psi[0], "pressure/cpu", warn);
		open_proc(ss, &ss->psi[1], "pressure/io", warn);
		open_proc(ss, &ss->psi[2], "pressure/memory", warn);
	}

	if (ss->every[SYS_STATS_SRC_CPUFREQ] || ss->every[SYS_STATS_SRC_CPUIDLE]) {
		r = count_cpus(ss->sys_fd, &ss->n_cpus);
		if (r < 0)
			fprintf(warn, "linux.sys_stats: cannot list /sys/devices/system/cpu (%s)\n",
				strerror(-r));
	}
	if (ss->every[SYS_STATS_SRC_CPUFREQ]) {
		r = open_cpufreq(ss, warn);
		if (r < 0)
			return r;
	}
	if (ss->every[SYS_STATS_SRC_CPUIDLE]) {
		r = open_cpuidle(ss, warn);
		if (r < 0)
			return r;
	}
	if (ss->every[SYS_STATS_SRC_DEVFREQ]) {
		r = open_named(ss->sys_fd, "class/devfreq", "", false, "cur_freq", NULL,
			       &ss->devfreq, &ss->n_devfreq, &missing);
		if (r == -ENOMEM)
			return r;
		if (r < 0 || ss->n_devfreq == 0)
			fprintf(warn, "linux.sys_stats: devfreq: no device in /sys/class/devfreq\n");
		else if (missing)
			fprintf(warn, "linux.sys_stats: devfreq: %zu of %zu devices have no readable cur_freq: 0 is written for them\n",
				missing, ss->n_devfreq);
	}
	if (ss->every[SYS_STATS_SRC_THERMAL]) {
		r = open_named(ss->sys_fd, "class/thermal", "thermal_zone", true, "temp", "type",
			       &ss->thermal, &ss->n_thermal, &missing);
		if (r == -ENOMEM)
			return r;
		if (r < 0 || ss->n_thermal == 0)
			fprintf(warn, "linux.sys_stats: thermal: no thermal zone in /sys/class/thermal\n");
		else if (missing)
			fprintf(warn, "linux.sys_stats: thermal: %zu of %zu zones have no readable temp\n",
				missing, ss->n_thermal);
	}
	if (ss->every[SYS_STATS_SRC_GPUFREQ]) {
		open_gpu(ss);
		if (ss->gpu_kind == SYS_STATS_GPU_NONE)
			fprintf(warn, "linux.sys_stats: gpufreq: no kgsl, i915 or amdgpu frequency file\n");
	}
	return 0;
}

void sys_stats_sources_close(struct sys_stats *ss)
{
	close_file(&ss->meminfo);
	close_file(&ss->vmstat);
	close_file(&ss->stat);
	close_file(&ss->buddyinfo);
	close_file(&ss->diskstats);
	close_file(&ss->slabinfo);
	close_file(&ss->gpu);
	for (size_t i = 0; i < ARRAY_SIZE(ss->psi); i++)
		close_file(&ss->psi[i]);
	for (uint32_t c = 0; ss->cpufreq && c < ss->n_cpus; c++)
		close_file(&ss->cpufreq[c]);
	free(ss->cpufreq);
	ss->cpufreq = NULL;
	for (size_t i = 0; i < ss->n_cpuidle; i++)
		free_named(ss->cpuidle[i].states, ss->cpuidle[i].n_states);
	free(ss->cpuidle);
	ss->cpuidle = NULL;
	ss->n_cpuidle = 0;
	free_named(ss->devfreq, ss->n_devfreq);
	ss->devfreq = NULL;
	ss->n_devfreq = 0;
	free_named(ss->thermal, ss->n_thermal);
	ss->thermal = NULL;
	ss->n_thermal = 0;
	free(ss->buf);
	ss->buf = NULL;
	ss->buf_size = 0;
}

/* ---- poll --------------------------------------------------------------------- */

static int grow_buf(struct sys_stats *ss)
{
	size_t size = ss->buf_size ? ss->buf_size * 2 : SYS_STATS_BUF_INITIAL;
	char *b;

	if (size > SYS_STATS_BUF_MAX)
		return -EFBIG;
	b = realloc(ss->buf, size);
	if (!b)
		return -ENOMEM;
	ss->buf = b;
	ss->buf_size = size;
	ss->stats.buffer_size = size;
	return 0;
}

/*
 * The whole of @f in ss->buf with one pread() from offset 0.  Only when the
 * file fills the buffer (the first poll, or a file that grew) is the buffer
 * doubled and the file read again.  Failures are said once per source.
 */
static int read_file(struct sys_stats *ss, enum sys_stats_source s, struct sys_stats_file *f, size_t *ret_len)
{
	int r;

	if (f->fd < 0)
		return -EBADF;
	if (!ss->buf) {
		r = grow_buf(ss);
		if (r < 0)
			return r;
	}
	for (;;) {
		ssize_t n = pread(f->fd, ss->buf, ss->buf_size, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if ((size_t)n < ss->buf_size) {
			ss->stats.bytes_read += (size_t)n;
			*ret_len = (size_t)n;
			return 0;
		}
		r = grow_buf(ss);
		if (r == -EFBIG) {
			/* cut at SYS_STATS_BUF_MAX: parsers see whole lines up to there */
			ss->stats.bytes_read += (size_t)n;
			*ret_len = (size_t)n;
			return 0;
		}
		if (r < 0)
			break;
	}
	ss->stats.read_errors++;
	if (!ss->read_error_logged[s]) {
		ss->read_error_logged[s] = true;
		log_warning_errno(r, "linux.sys_stats: reading a %s file failed, it is left out "
				     "while it fails (said once per session): %m",
				  sys_stats_source_to_string(s));
	}
	return r;
}

static bool read_u64(struct sys_stats *ss, enum sys_stats_source s, struct sys_stats_file *f, uint64_t *ret)
{
	size_t len;

	return read_file(ss, s, f, &len) == 0 && sys_stats_parse_u64(ss->buf, len, ret) == 0;
}

static void write_devfreq(struct sys_stats *ss, struct pbw *w)
{
	for (size_t i = 0; i < ss->n_devfreq; i++) {
		uint64_t v = 0;

		/* unreadable: 0, as traced_probes writes it */
		if (ss->devfreq[i].f.fd >= 0)
			(void)read_u64(ss, SYS_STATS_SRC_DEVFREQ, &ss->devfreq[i].f, &v);
		pbw_begin_nested(w, SYS_STATS_DEVFREQ);
		pbw_string(w, SYS_STATS_KV_KEY, ss->devfreq[i].name);
		pbw_varint(w, SYS_STATS_KV_VALUE, v);
		(void)pbw_end_nested(w);
	}
}

static void write_cpufreq(struct sys_stats *ss, struct pbw *w)
{
	for (uint32_t c = 0; c < ss->n_cpus; c++) {
		uint64_t v = 0;

		if (ss->cpufreq[c].fd >= 0 && !read_u64(ss, SYS_STATS_SRC_CPUFREQ, &ss->cpufreq[c], &v))
			v = 0;
		pbw_varint(w, SYS_STATS_CPUFREQ_KHZ, (uint32_t)v);
	}
}

static void write_thermal(struct sys_stats *ss, struct pbw *w)
{
	for (size_t i = 0; i < ss->n_thermal; i++) {
		const struct sys_stats_named *z = &ss->thermal[i];
		uint64_t v;

		pbw_begin_nested(w, SYS_STATS_THERMAL_ZONE);
		pbw_string(w, 1, z->name);
		/* EIO from a sensor that is off: the zone goes without a temperature */
		if (z->f.fd >= 0 && read_u64(ss, SYS_STATS_SRC_THERMAL, &ss->thermal[i].f, &v))
			pbw_varint(w, 2, v / 1000);
		if (z->type)
			pbw_string(w, 3, z->type);
		(void)pbw_end_nested(w);
	}
}

static void write_cpuidle(struct sys_stats *ss, struct pbw *w)
{
	for (size_t i = 0; i < ss->n_cpuidle; i++) {
		struct sys_stats_cpuidle_cpu *cpu = &ss->cpuidle[i];

		pbw_begin_nested(w, SYS_STATS_CPUIDLE_STATE);
		pbw_varint(w, 1, cpu->cpu);
		for (size_t k = 0; k < cpu->n_states; k++) {
			uint64_t v;

			if (cpu->states[k].f.fd < 0 ||
			    !read_u64(ss, SYS_STATS_SRC_CPUIDLE, &cpu->states[k].f, &v))
				continue;
			pbw_begin_nested(w, 2);
			pbw_string(w, 1, cpu->states[k].name);
			pbw_varint(w, 2, v);
			(void)pbw_end_nested(w);
		}
		(void)pbw_end_nested(w);
	}
}

static void write_gpufreq(struct sys_stats *ss, struct pbw *w)
{
	uint64_t v;
	size_t len;

	switch (ss->gpu_kind) {
	case SYS_STATS_GPU_KGSL:
		if (read_u64(ss, SYS_STATS_SRC_GPUFREQ, &ss->gpu, &v))
			pbw_varint(w, SYS_STATS_GPUFREQ_MHZ, v / 1000000);
		break;
	case SYS_STATS_GPU_I915:
		if (read_u64(ss, SYS_STATS_SRC_GPUFREQ, &ss->gpu, &v))
			pbw_varint(w, SYS_STATS_GPUFREQ_MHZ, v);
		break;
	case SYS_STATS_GPU_AMD:
		if (read_file(ss, SYS_STATS_SRC_GPUFREQ, &ss->gpu, &len) == 0 &&
		    sys_stats_parse_amd_sclk(ss->buf, len, &v) == 0)
			pbw_varint(w, SYS_STATS_GPUFREQ_MHZ, v);
		break;
	default:
		break;
	}
}

void sys_stats_source_write(struct sys_stats *ss, enum sys_stats_source s, struct pbw *w)
{
	static const unsigned psi_some[3] = { SYS_STATS_PSI_CPU_SOME, SYS_STATS_PSI_IO_SOME, SYS_STATS_PSI_MEMORY_SOME };
	size_t len;

	switch (s) {
	case SYS_STATS_SRC_MEMINFO:
		if (read_file(ss, s, &ss->meminfo, &len) == 0)
			(void)sys_stats_parse_meminfo(ss->buf, len, &ss->meminfo_keys, w);
		break;
	case SYS_STATS_SRC_VMSTAT:
		if (read_file(ss, s, &ss->vmstat, &len) == 0)
			(void)sys_stats_parse_vmstat(ss->buf, len, &ss->vmstat_keys, w);
		break;
	case SYS_STATS_SRC_STAT:
		if (read_file(ss, s, &ss->stat, &len) == 0)
			(void)sys_stats_parse_stat(ss->buf, len, ss->stat_mask, ss->ns_per_user_hz, w);
		break;
	case SYS_STATS_SRC_DEVFREQ:
		write_devfreq(ss, w);
		break;
	case SYS_STATS_SRC_CPUFREQ:
		write_cpufreq(ss, w);
		break;
	case SYS_STATS_SRC_BUDDYINFO:
		if (read_file(ss, s, &ss->buddyinfo, &len) == 0)
			(void)sys_stats_parse_buddyinfo(ss->buf, len, w);
		break;
	case SYS_STATS_SRC_DISKSTAT:
		if (read_file(ss, s, &ss->diskstats, &len) == 0)
			(void)sys_stats_parse_diskstats(ss->buf, len, w);
		break;
	case SYS_STATS_SRC_PSI:
		for (size_t i = 0; i < ARRAY_SIZE(ss->psi); i++)
			if (ss->psi[i].fd >= 0 && read_file(ss, s, &ss->psi[i], &len) == 0)
				(void)sys_stats_parse_psi(ss->buf, len, psi_some[i], w);
		break;
	case SYS_STATS_SRC_THERMAL:
		write_thermal(ss, w);
		break;
	case SYS_STATS_SRC_CPUIDLE:
		write_cpuidle(ss, w);
		break;
	case SYS_STATS_SRC_GPUFREQ:
		write_gpufreq(ss, w);
		break;
	case SYS_STATS_SRC_SLAB:
		if (read_file(ss, s, &ss->slabinfo, &len) == 0)
			(void)sys_stats_parse_slabinfo(ss->buf, len, w);
		break;
	default:
		break;
	}
}
