/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/recorder.h"
#include "tests/lib/tp_record.h"
#include "util/util.h"
#include "util/util_varint.h"

struct field {
	uint32_t no;
	unsigned wire;
	uint64_t v;
	const uint8_t *p;
	size_t len;
};

/* Next field of [*pp, end): 1, 0 at the end, -1 malformed. */
static int next_field(const uint8_t **pp, const uint8_t *end, struct field *f)
{
	const uint8_t *p = *pp;
	uint64_t key, len;

	if (p >= end)
		return 0;
	if (!varint_get(&p, end, &key))
		return -1;
	f->no = (uint32_t)(key >> 3);
	f->wire = key & 7;
	f->p = NULL;
	f->len = 0;
	switch (f->wire) {
	case 0:
		if (!varint_get(&p, end, &f->v))
			return -1;
		break;
	case 1:
		p = end - p >= 8 ? p + 8 : NULL;
		break;
	case 5:
		p = end - p >= 4 ? p + 4 : NULL;
		break;
	case 2:
		if (!varint_get(&p, end, &len) || len > (uint64_t)(end - p))
			return -1;
		f->p = p;
		f->len = (size_t)len;
		p += len;
		break;
	default:
		return -1;
	}
	if (!p)
		return -1;
	*pp = p;
	return 1;
}

static void add_name(char **v, size_t *n, const uint8_t *s, size_t len)
{
	for (size_t i = 0; i < *n; i++)
		if (strlen(v[i]) == len && memcmp(v[i], s, len) == 0)
			return;
	if (*n < TP_SCAN_MAX_NAMES)
		v[(*n)++] = strndup((const char *)s, len);
}

static void add_event(struct tp_ftrace_scan *s, uint32_t cpu, uint64_t ts)
{
	if (!s->want_events)
		return;
	if (s->n_events == s->cap_events) {
		size_t cap = s->cap_events * 2 + 1024;
		void *n = realloc(s->events, cap * sizeof(*s->events));

		if (!n)
			return;
		s->events = n;
		s->cap_events = cap;
	}
	s->events[s->n_events++] = (struct tp_scan_event){ cpu, ts };
}

static void scan_event(struct tp_ftrace_scan *s, uint32_t cpu, const uint8_t *p, const uint8_t *end)
{
	struct field f, g;

	while (next_field(&p, end, &f) > 0) {
		const uint8_t *q = f.p, *qe = f.p + f.len;

		if (f.no == 1 && f.wire == 0)
			add_event(s, cpu, f.v);
		if (f.no <= 2)
			continue;
		if (f.no < TP_SCAN_MAX_FIELD)
			s->events_by_field[f.no]++;
		if (f.wire != 2)
			continue;
		if (f.no == 542) {      /* KprobeEvent */
			while (next_field(&q, qe, &g) > 0) {
				if (g.no == 1 && g.wire == 2)
					add_name(s->kprobe_names, &s->n_kprobe_names, g.p, g.len);
				if (g.no == 2 && g.wire == 0) {
					s->kprobe_begin += g.v == 1;
					s->kprobe_end += g.v == 2;
					s->kprobe_instant += g.v == 3;
				}
			}
		} else if (f.no == 329 || f.no == 330) {  /* SysEnter/SysExit.id */
			while (next_field(&q, qe, &g) > 0)
				if (g.no == 1 && g.wire == 0) {
					if (g.v < 1024)
						s->syscall_ids[g.v]++;
					else
						s->syscalls_other++;
				}
		}
	}
}

static void scan_packet(struct tp_ftrace_scan *s, const uint8_t *p, const uint8_t *end)
{
	struct field f, g, h;

	while (next_field(&p, end, &f) > 0) {
		const uint8_t *q = f.p, *qe = f.p + f.len;

		if (f.no < 256)
			s->packets_by_field[f.no]++;
		if (f.no == 13 && f.wire == 0 && (f.v & 1))
			s->sequence_cleared++;
		if (f.wire != 2)
			continue;
		if (f.no == 1) {                /* FtraceEventBundle */
			uint32_t cpu = 0;

			s->bundles++;
			while (next_field(&q, qe, &g) > 0) {
				if (g.no == 1 && g.wire == 0)
					cpu = (uint32_t)g.v;
				if (g.no == 2 && g.wire == 2)
					scan_event(s, cpu, g.p, g.p + g.len);
				if (g.no == 4)
					s->compact_bundles++;
			}
		} else if (f.no == 12) {        /* InternedData.kernel_symbols */
			while (next_field(&q, qe, &g) > 0) {
				const uint8_t *r = g.p, *re = g.p + g.len;

				if (g.no != 26 || g.wire != 2)
					continue;
				s->symbols++;
				while (next_field(&r, re, &h) > 0)
					if (h.no == 2 && h.wire == 2)
						add_name(s->symbol_names, &s->n_symbol_names, h.p, h.len);
			}
		} else if (f.no == 34) {        /* FtraceStats */
			s->stats_packets++;
			while (next_field(&q, qe, &g) > 0) {
				if (g.no == 7 && g.wire == 2)
					add_name(s->failed, &s->n_failed, g.p, g.len);
				if (g.no == 6 && g.wire == 2)
					add_name(s->unknown, &s->n_unknown, g.p, g.len);
				if (g.no == 3 && g.wire == 0 && g.v > s->kernel_symbols_parsed)
					s->kernel_symbols_parsed = g.v;
				if (g.no == 10)
					s->has_kprobe_stats = true;
				if (g.no == 8 && g.wire == 0 && g.v)
					s->preserve_ftrace_buffer = true;
			}
		}
	}
}

static int scan_trace(const char *path, bool want_events, struct tp_ftrace_scan *ret)
{
	_cleanup_free_ char *data = NULL;
	const uint8_t *p, *end;
	struct field f;
	size_t len;
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->want_events = want_events;
	r = read_full_file_at(AT_FDCWD, path, 1u << 30, &data, &len);
	if (r < 0)
		return r;
	p = (const uint8_t *)data;
	end = p + len;
	while ((r = next_field(&p, end, &f)) > 0)
		if (f.no == 1 && f.wire == 2)
			scan_packet(ret, f.p, f.p + f.len);
	return r < 0 ? -EBADMSG : 0;
}

int tp_scan_trace(const char *path, struct tp_ftrace_scan *ret)
{
	return scan_trace(path, false, ret);
}

int tp_scan_trace_events(const char *path, struct tp_ftrace_scan *ret)
{
	return scan_trace(path, true, ret);
}

void tp_scan_free(struct tp_ftrace_scan *s)
{
	free(s->events);
	for (size_t i = 0; i < s->n_symbol_names; i++)
		free(s->symbol_names[i]);
	for (size_t i = 0; i < s->n_kprobe_names; i++)
		free(s->kprobe_names[i]);
	for (size_t i = 0; i < s->n_failed; i++)
		free(s->failed[i]);
	for (size_t i = 0; i < s->n_unknown; i++)
		free(s->unknown[i]);
	memset(s, 0, sizeof(*s));
}

bool tp_scan_has_symbol(const struct tp_ftrace_scan *s, const char *name)
{
	for (size_t i = 0; i < s->n_symbol_names; i++)
		if (strcmp(s->symbol_names[i], name) == 0)
			return true;
	return false;
}

bool tp_scan_failed_has(const struct tp_ftrace_scan *s, const char *prefix)
{
	for (size_t i = 0; i < s->n_failed; i++)
		if (strncmp(s->failed[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

int tp_write_file(const char *path, const char *text)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return negative_errno();
	return write_all(fd, text, strlen(text));
}

int tp_record(const char *cfg_path, const char *out)
{
	struct recorder_options o;

	recorder_options_init(&o);
	o.output = out;
	o.config_path = cfg_path;
	o.quiet = true;
	return recorder_run(&o);
}

pid_t tp_record_spawn(const char *cfg_path, const char *out, const char *state_dir)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	setenv(FTRACE_STATE_DIR_ENV, state_dir, 1);
	_exit(tp_record(cfg_path, out) < 0 ? 1 : 0);
}

static void snap_file(FILE *f, const char *dir, const char *name)
{
	_cleanup_free_ char *data = NULL;
	char path[1024];

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_full_file_at(AT_FDCWD, path, 4u << 20, &data, NULL) < 0)
		fprintf(f, "%s: <unreadable>\n", name);
	else
		fprintf(f, "%s: %s\n", name, data);
}

char *tp_feature_snapshot(const char *dir)
{
	static const char *const files[] = {
		"tracing_on", "current_tracer", "tracing_cpumask", "set_event_pid", "set_event",
		"set_ftrace_filter", "set_graph_function", "max_graph_depth",
		"events/raw_syscalls/sys_enter/filter", "events/raw_syscalls/sys_exit/filter",
	};
	char *out = NULL, opts[1024];
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	DIR *d;

	if (!f)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		snap_file(f, dir, files[i]);
	snap_file(f, "/sys/kernel/tracing", "kprobe_events");
	(void)snprintf(opts, sizeof(opts), "%s/options", dir);
	d = opendir(opts);
	for (struct dirent *de; d && (de = readdir(d));) {
		char name[300];

		if (de->d_name[0] == '.')
			continue;
		(void)snprintf(name, sizeof(name), "options/%s", de->d_name);
		snap_file(f, dir, name);
	}
	if (d)
		closedir(d);
	fclose(f);
	return out;
}
