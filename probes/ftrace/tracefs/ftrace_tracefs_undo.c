/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The undo list of a tracefs directory: the old value of every file we
 * change, persisted to a state file before the change so that a restart
 * after SIGKILL can put tracefs back (ftrace_tracefs_undo_replay_dir(), for
 * ftrace_host_recover()).
 *
 * State file (text, one record per line, written atomically):
 *   traced-probes-ftrace-undo 3
 *   pid <owner pid>
 *   boot <boot id of the owner's boot>  (from version 3; files of 1 and 2 are read too)
 *   dir <absolute tracefs directory>
 *   truncate <0|1>
 *   w <relative file> <old value>     (oldest change first)
 * Every field is re-validated when replayed: the file is only a hint of
 * what to restore, never a way to write arbitrary tracefs files.
 */

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"

#define UNDO_MAGIC "traced-probes-ftrace-undo 3"
#define UNDO_MAGIC_V2 "traced-probes-ftrace-undo 2"
#define UNDO_MAGIC_V1 "traced-probes-ftrace-undo 1"
#define UNDO_VALUE_MAX 63u
#define UNDO_CPUMASK_MAX 1024u
/* set_ftrace_filter, set_graph_function, set_event_pid as found. */
#define UNDO_LIST_MAX (256u << 10)
/* The kernel refuses an event filter of a page or more. */
#define UNDO_FILTER_MAX 4095u
#define UNDO_FILE_MAX (8u << 20)
/* file_replay(): the file was another boot's, removed with nothing restored */
#define REPLAY_OTHER_BOOT 2
/* file_replay(): its instance is gone, the file removed with nothing restored */
#define REPLAY_INSTANCE_GONE 3
#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif

/* What an undo record puts back, and how. */
enum undo_kind {
	UNDO_PLAIN,     /* one short token, written as is */
	UNDO_FUNCS,     /* function names, '\n'-separated: truncate, then write */
	UNDO_PIDS,      /* pids, ' '-separated: truncate, then write */
	UNDO_FILTER,    /* an event filter expression ("0": none) */
	UNDO_KPROBE,    /* "kprobe:GROUP/NAME": remove that probe (top-level kprobe_events) */
	_UNDO_KIND_INVALID = -EINVAL,
};

static bool token_char(char c, bool comma)
{
	return name_char_ok(c, NAME_DASH | NAME_DOT | (comma ? NAME_COMMA : 0));
}

static bool value_valid(const char *v, bool comma)
{
	size_t n = 0;

	for (const char *c = v; *c; c++, n++)
		if (!token_char(*c, comma))
			return false;
	/* tracing_cpumask (the only value with commas) takes 4096 CPUs' worth */
	return n > 0 && n <= (comma ? UNDO_CPUMASK_MAX : UNDO_VALUE_MAX);
}

/* Names separated by @sep (empty: the file was empty), each one checked. */
static bool list_valid(const char *v, char sep, bool digits_only)
{
	size_t n = strlen(v), tok = 0;

	if (n > UNDO_LIST_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		char c = v[i];

		if (c == sep || c == 0) {
			if (tok == 0 && n > 0)
				return false;
			tok = 0;
			continue;
		}
		if (digits_only ? !(c >= '0' && c <= '9') : !name_char_ok(c, NAME_DOT))
			return false;
		if (++tok > FTRACE_NAME_MAX)
			return false;
	}
	return true;
}

static bool filter_valid(const char *v)
{
	size_t n = 0;

	for (const char *c = v; *c; c++, n++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			return false;
	return n > 0 && n <= UNDO_FILTER_MAX;
}

/* "events/G/N/@leaf" with valid G and N. */
static bool event_file(const char *f, const char *leaf)
{
	char g[FTRACE_NAME_MAX + 1], n[FTRACE_NAME_MAX + 1];
	const char *a, *b;

	if (strncmp(f, "events/", 7) != 0)
		return false;
	a = f + 7;
	b = strchr(a, '/');
	if (!b || (size_t)(b - a) > FTRACE_NAME_MAX)
		return false;
	memcpy(g, a, (size_t)(b - a));
	g[b - a] = 0;
	a = b + 1;
	b = strchr(a, '/');
	if (!b || (size_t)(b - a) > FTRACE_NAME_MAX || b[0] != '/' || strcmp(b + 1, leaf) != 0)
		return false;
	memcpy(n, a, (size_t)(b - a));
	n[b - a] = 0;
	return ftrace_name_valid(g) && ftrace_name_valid(n);
}

/* The only files an undo record may name, and what kind of value each takes. */
static enum undo_kind undo_file_kind(const char *f)
{
	static const char *const plain[] = { "tracing_on", "trace_clock", "buffer_size_kb", "buffer_percent",
					     "current_tracer", "max_graph_depth", "tracing_cpumask",
					     "buffer_subbuf_size_kb" };
	unsigned cpu;
	int end = 0;

	for (size_t i = 0; i < ARRAY_SIZE(plain); i++)
		if (strcmp(f, plain[i]) == 0)
			return UNDO_PLAIN;
	if (strcmp(f, "set_ftrace_filter") == 0 || strcmp(f, "set_graph_function") == 0)
		return UNDO_FUNCS;
	if (strcmp(f, "set_event_pid") == 0)
		return UNDO_PIDS;
	if (sscanf(f, "per_cpu/cpu%u/buffer_size_kb%n", &cpu, &end) == 1 && f[end] == 0 &&
	    cpu < FTRACE_MAX_CPUS && strncmp(f, "per_cpu/cpu", 11) == 0 && f[11] >= '0' && f[11] <= '9')
		return UNDO_PLAIN;
	if (strncmp(f, "options/", 8) == 0) {
		const char *o = f + 8;
		size_t n = strlen(o);

		if (n == 0 || n > FTRACE_NAME_MAX)
			return _UNDO_KIND_INVALID;
		for (size_t i = 0; i < n; i++)
			if (!token_char(o[i], false) || o[i] == '.')
				return _UNDO_KIND_INVALID;
		return UNDO_PLAIN;
	}
	if (strncmp(f, "kprobe:", 7) == 0) {
		const char *g = f + 7, *slash = strchr(g, '/');

		if (!slash || (strncmp(g, "perfetto_kprobes/", 17) != 0 && strncmp(g, "perfetto_kretprobes/", 20) != 0))
			return _UNDO_KIND_INVALID;
		return ftrace_name_valid(slash + 1) ? UNDO_KPROBE : _UNDO_KIND_INVALID;
	}
	if (event_file(f, "enable"))
		return UNDO_PLAIN;
	if (event_file(f, "filter"))
		return UNDO_FILTER;
	return _UNDO_KIND_INVALID;
}

static bool undo_value_valid(const char *file, enum undo_kind k, const char *v)
{
	switch (k) {
	case UNDO_PLAIN:
		if (strncmp(file, "options/", 8) == 0)
			return strcmp(v, "0") == 0 || strcmp(v, "1") == 0;
		/* We only ever start a tracer over nop: nothing else is put back. */
		if (strcmp(file, "current_tracer") == 0)
			return strcmp(v, "nop") == 0;
		return value_valid(v, strcmp(file, "tracing_cpumask") == 0);
	case UNDO_FUNCS:
		return list_valid(v, '\n', false);
	case UNDO_PIDS:
		return list_valid(v, ' ', true);
	case UNDO_FILTER:
		return filter_valid(v);
	case UNDO_KPROBE:
		return strcmp(v, "-") == 0;
	default:
		return false;
	}
}

/* First token of a tracefs value, without a soft-mode '*' suffix. */
static void first_token(const char *text, char *buf, size_t size)
{
	size_t n = 0;

	while (*text == ' ' || *text == '\t')
		text++;
	while (text[n] && text[n] != '\n' && text[n] != ' ' && text[n] != '*' && n + 1 < size)
		n++;
	memcpy(buf, text, n);
	buf[n] = 0;
}

static int undo_find(const struct ftrace_tracefs *t, const char *file)
{
	for (size_t i = t->n_undo; i > 0; i--)
		if (strcmp(t->undo[i - 1].file, file) == 0)
			return (int)(i - 1);
	return -1;
}

int ftrace_tracefs_remember_value(struct ftrace_tracefs *t, const char *file, const char *old_value)
{
	_cleanup_free_ char *f = NULL, *v = NULL;
	enum undo_kind k = undo_file_kind(file);

	if (k < 0 || !undo_value_valid(file, k, old_value))
		return -EINVAL;
	if (t->n_undo == t->cap_undo) {
		size_t cap = t->cap_undo ? t->cap_undo * 2 : 16;
		struct ftrace_undo_entry *n = reallocarray(t->undo, cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->undo = n;
		t->cap_undo = cap;
	}
	f = strdup(file);
	v = strdup(old_value);
	if (!f || !v)
		return -ENOMEM;
	t->undo[t->n_undo++] = (struct ftrace_undo_entry){ TAKE_PTR(f), TAKE_PTR(v) };
	t->undo_dirty = true;
	return 1;
}

/* buffer_size_kb reads "N", "N (expanded: M)" before first use, or "X" when CPUs differ. */
static int remember_buffer_size(struct ftrace_tracefs *t, const char *text)
{
	char v[UNDO_VALUE_MAX + 1];
	const char *exp = strstr(text, "(expanded:");
	int r;

	if (exp) {
		/*
		 * An unexpanded buffer cannot be re-created; the size it would
		 * have expanded to is what the next user of tracefs gets.
		 */
		first_token(exp + strlen("(expanded:"), v, sizeof(v));
		v[strcspn(v, ")")] = 0;
		return ftrace_tracefs_remember_value(t, "buffer_size_kb", v);
	}
	first_token(text, v, sizeof(v));
	if (strcmp(v, "X") != 0)
		return ftrace_tracefs_remember_value(t, "buffer_size_kb", v);

	/* Per-CPU sizes differ: remember each one. */
	for (unsigned cpu = 0; cpu < FTRACE_MAX_CPUS; cpu++) {
		_cleanup_free_ char *s = NULL;
		char f[64];

		(void)snprintf(f, sizeof(f), "per_cpu/cpu%u/buffer_size_kb", cpu);
		r = ftrace_tracefs_read(t, f, 256, &s, NULL);
		if (r == -ENOENT) {
			char d[32];

			(void)snprintf(d, sizeof(d), "per_cpu/cpu%u", cpu + 1);
			if (faccessat(t->dirfd, d, F_OK, 0) < 0)
				break;
			continue;
		}
		if (r < 0)
			return r;
		first_token(s, v, sizeof(v));
		if (undo_find(t, f) >= 0)
			continue;
		r = ftrace_tracefs_remember_value(t, f, v);
		if (r < 0)
			return r;
	}
	return 1;
}

/*
 * The entries of a list file as the kernel prints them, joined by @sep:
 * comment lines ("#### all functions enabled ####") stand for an empty
 * list; anything that is not a plain name (a ":traceoff" command, a
 * "name [module]" form we could not write back) makes the file one we
 * cannot restore exactly, so the caller must leave it alone.
 */
static int list_value(const char *text, char sep, bool digits_only, char **ret)
{
	_cleanup_free_ char *out = malloc(strlen(text) + 1);
	size_t n = 0;

	if (!out)
		return -ENOMEM;
	for (const char *p = text; *p;) {
		size_t len = strcspn(p, " \t\n");

		if (len == 0) {
			p++;
			continue;
		}
		if (*p == '#') {
			p += strcspn(p, "\n");
			continue;
		}
		if (len > FTRACE_NAME_MAX)
			return -EOPNOTSUPP;
		for (size_t i = 0; i < len; i++)
			if (digits_only ? !(p[i] >= '0' && p[i] <= '9') : !name_char_ok(p[i], NAME_DOT))
				return -EOPNOTSUPP;
		if (n)
			out[n++] = sep;
		memcpy(out + n, p, len);
		n += len;
		p += len;
	}
	out[n] = 0;
	if (n > UNDO_LIST_MAX)
		return -E2BIG;
	*ret = TAKE_PTR(out);
	return 0;
}

int ftrace_tracefs_remember(struct ftrace_tracefs *t, const char *file)
{
	_cleanup_free_ char *s = NULL;
	char v[UNDO_CPUMASK_MAX + 1];
	enum undo_kind k = undo_file_kind(file);
	int r;

	if (k < 0 || k == UNDO_KPROBE)
		return -EINVAL;
	if (undo_find(t, file) >= 0)
		return 0;
	r = ftrace_tracefs_read(t, file, k == UNDO_PLAIN ? 4096 : 4 * UNDO_LIST_MAX, &s, NULL);
	if (r < 0)
		return r;
	if (k == UNDO_FUNCS || k == UNDO_PIDS) {
		_cleanup_free_ char *l = NULL;

		r = list_value(s, k == UNDO_FUNCS ? '\n' : ' ', k == UNDO_PIDS, &l);
		if (r < 0)
			return r;
		return ftrace_tracefs_remember_value(t, file, l);
	}
	if (k == UNDO_FILTER) {
		s[strcspn(s, "\n")] = 0;
		return ftrace_tracefs_remember_value(t, file, strcmp(s, "none") == 0 || !s[0] ? "0" : s);
	}
	if (strcmp(file, "buffer_size_kb") == 0)
		return remember_buffer_size(t, s);
	if (strcmp(file, "trace_clock") == 0) {
		r = ftrace_clock_selected(s, v, sizeof(v));
		if (r < 0)
			return r;
	} else {
		first_token(s, v, sizeof(v));
	}
	return ftrace_tracefs_remember_value(t, file, v);
}

bool ftrace_tracefs_remembered(const struct ftrace_tracefs *t, const char *file)
{
	return undo_find(t, file) >= 0;
}

void ftrace_tracefs_forget(struct ftrace_tracefs *t, const char *file)
{
	int i = undo_find(t, file);

	if (i < 0)
		return;
	free(t->undo[i].file);
	free(t->undo[i].value);
	memmove(&t->undo[i], &t->undo[i + 1], (t->n_undo - (size_t)i - 1) * sizeof(t->undo[0]));
	t->n_undo--;
	t->undo_dirty = true;
}

void ftrace_tracefs_note_truncated(struct ftrace_tracefs *t)
{
	if (!t->truncated)
		t->undo_dirty = true;
	t->truncated = true;
}

size_t ftrace_tracefs_undo_count(const struct ftrace_tracefs *t)
{
	return t->n_undo;
}

static int mkdir_parents(const char *dir)
{
	_cleanup_free_ char *p = strdup(dir);

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return negative_errno();
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return negative_errno();
	return 0;
}

static int write_state_file(const char *path, const char *dir, const char *content)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -EBADF;
	int r;

	r = mkdir_parents(dir);
	if (r < 0)
		return r;
	tmp = strdup_printf("%s.tmp.%d", path, (int)getpid());
	if (!tmp)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return negative_errno();
	r = write_all(fd, content, strlen(content));
	/*
	 * No fsync(): the file outlives a crash of this process (the rename is
	 * atomic, the page cache is the file), and what it would add, surviving
	 * a crash of the machine, is worth nothing: tracefs does not survive
	 * that either.  On a disk under load an fsync can take a long time on
	 * the loop thread, and the file is written at every attach and detach.
	 */
	if (r >= 0 && rename(tmp, path) < 0)
		r = negative_errno();
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

/*
 * Values go to the state file one per line: bytes outside the token set
 * (spaces and operators of a filter, the newlines of a list, '%') as %XX.
 * An empty value is written as "%".
 */
static void put_escaped(FILE *f, const char *v)
{
	if (!*v) {
		fputc('%', f);
		return;
	}
	for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
		if (token_char((char)*c, true))
			fputc(*c, f);
		else
			fprintf(f, "%%%02X", *c);
	}
}

/* Decodes put_escaped()'s form in place.  Returns: 0, -EBADMSG. */
static int unescape(char *v)
{
	char *w = v;

	if (strcmp(v, "%") == 0) {
		*v = 0;
		return 0;
	}
	for (char *c = v; *c; c++) {
		int hi, lo;

		if (*c != '%') {
			*w++ = *c;
			continue;
		}
		hi = hex_digit_value(c[1]);
		lo = hi >= 0 ? hex_digit_value(c[2]) : -1;
		if (lo < 0 || (hi == 0 && lo == 0))
			return -EBADMSG;
		*w++ = (char)(hi * 16 + lo);
		c += 2;
	}
	*w = 0;
	return 0;
}

int ftrace_tracefs_persist(struct ftrace_tracefs *t)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	if (!t->undo_dirty)
		return 0;
	if (!t->state_path) {
		t->undo_dirty = false;
		return 0;
	}
	if (t->n_undo == 0 && !t->truncated) {
		if (unlink(t->state_path) < 0 && errno != ENOENT)
			return negative_errno();
		t->undo_dirty = false;
		return 0;
	}

	f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	/* read once: every state file of this directory names its boot, so that another boot never replays it */
	if (!t->boot_id[0])
		boot_id_read(t->boot_id);
	fprintf(f, UNDO_MAGIC "\npid %d\n", (int)getpid());
	if (t->boot_id[0])
		fprintf(f, "boot %s\n", t->boot_id);
	fprintf(f, "dir %s\ntruncate %d\n", t->path, t->truncated ? 1 : 0);
	for (size_t i = 0; i < t->n_undo; i++) {
		fprintf(f, "w %s ", t->undo[i].file);
		put_escaped(f, t->undo[i].value);
		fputc('\n', f);
	}
	if (fclose(f) != 0 || !buf)
		return -ENOMEM;

	r = write_state_file(t->state_path, t->state_dir, buf);
	if (r < 0)
		return r;
	t->undo_dirty = false;
	return 0;
}

int ftrace_tracefs_set(struct ftrace_tracefs *t, const char *file, const char *value, char **ret_error)
{
	int r;

	r = ftrace_tracefs_remember(t, file);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("read %s/%s: %s", t->path, file, strerror(-r)));
		return r;
	}
	r = ftrace_tracefs_persist(t);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("save undo state to %s: %s",
								 t->state_path, strerror(-r)));
		return r;
	}
	return ftrace_tracefs_write(t, file, value, ret_error);
}

int ftrace_tracefs_kprobe_write(struct ftrace_tracefs *t, const char *line, char **ret_error)
{
	_cleanup_close_ int dfd = ftrace_tracefs_root_dirfd(t), fd = -EBADF;
	int r;

	if (dfd < 0)
		return dfd;
	/* Never O_TRUNC: that would remove every kprobe on the system. */
	fd = openat(dfd, "kprobe_events", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = negative_errno();
		set_error_text(ret_error, strdup_printf("open kprobe_events: %s", strerror(-r)));
		return r;
	}
	r = write_all(fd, line, strlen(line));
	if (r < 0)
		set_error_text(ret_error, strdup_printf("write '%s' to kprobe_events: %s", line, strerror(-r)));
	return r;
}

int ftrace_tracefs_write_trunc(struct ftrace_tracefs *t, const char *file, const char *value,
			       char **ret_error)
{
	_cleanup_close_ int fd = -EBADF;
	int r;

	fd = openat(t->dirfd, file, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = negative_errno();
		set_error_text(ret_error, strdup_printf("open %s/%s: %s", t->path, file, strerror(-r)));
		return r;
	}
	if (!*value)
		return 0;
	r = write_all(fd, value, strlen(value));
	if (r < 0)
		set_error_text(ret_error, strdup_printf("write to %s/%s: %s", t->path, file, strerror(-r)));
	return r;
}

static bool is_buffer_size_file(const char *f)
{
	unsigned cpu;
	int end = 0;

	return strcmp(f, "buffer_size_kb") == 0 ||
	       (sscanf(f, "per_cpu/cpu%u/buffer_size_kb%n", &cpu, &end) == 1 && f[end] == 0);
}

/* @file's first word is @value now. */
static bool file_reads(struct ftrace_tracefs *t, const char *file, const char *value)
{
	_cleanup_free_ char *s = NULL;
	char v[UNDO_VALUE_MAX + 1];

	if (ftrace_tracefs_read(t, file, 256, &s, NULL) < 0)
		return false;
	first_token(s, v, sizeof(v));
	return strcmp(v, value) == 0;
}

/*
 * Put one entry back, the way its kind needs.  @subbuf_back: the sub-buffer
 * size was just put back, which leaves buffer_size_kb reading its old
 * value over a different number of pages.
 */
static int undo_apply(struct ftrace_tracefs *t, const struct ftrace_undo_entry *e, bool subbuf_back)
{
	char line[2 * FTRACE_NAME_MAX + 16];
	int r;

	switch (undo_file_kind(e->file)) {
	case UNDO_FUNCS:
	case UNDO_PIDS:
		return ftrace_tracefs_write_trunc(t, e->file, e->value, NULL);
	case UNDO_KPROBE:
		(void)snprintf(line, sizeof(line), "-:%s", e->file + strlen("kprobe:"));
		r = ftrace_tracefs_kprobe_write(t, line, NULL);
		/* Already gone (removed by hand, or the kernel rebooted): nothing to undo. */
		return r == -ENOENT ? 0 : r;
	case UNDO_PLAIN:
		/*
		 * A buffer that kept its size (the resize failed: a boot-mapped
		 * instance's is fixed, and any write to it is refused) needs
		 * nothing put back.
		 */
		if (is_buffer_size_file(e->file) && !subbuf_back && file_reads(t, e->file, e->value))
			return 0;
		if (strcmp(e->file, "buffer_size_kb") == 0)
			return ftrace_tracefs_write_buffer_kb(t, e->value, NULL);
		r = ftrace_tracefs_write(t, e->file, e->value, NULL);
		/*
		 * The kernel refuses a tracer change while any trace_pipe_raw of
		 * the directory is open, and a process that forked just before
		 * our readers closed holds copies until its child execs or exits:
		 * give that up to half a second.  A reader that stays (someone's
		 * own cat of trace_pipe) leaves the entry for the next start.
		 */
		for (unsigned i = 0; r == -EBUSY && strcmp(e->file, "current_tracer") == 0 && i < 50; i++) {
			(void)nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
			r = ftrace_tracefs_write(t, e->file, e->value, NULL);
		}
		return r;
	case UNDO_FILTER:
		return ftrace_tracefs_write(t, e->file, e->value, NULL);
	default:
		return -EINVAL;
	}
}

/* What the caller's log says when a restore falls short. */
static void note_restore_error(struct ftrace_tracefs *t, const char *what, int error)
{
	free(t->restore_error);
	t->restore_error = strdup_printf("%s/%s: %s", t->path ? t->path : "?", what, strerror(-error));
}

int ftrace_tracefs_restore(struct ftrace_tracefs *t)
{
	int tracing_on = undo_find(t, "tracing_on");
	bool subbuf_back = false;
	int r = 0, k;

	free(t->restore_error);
	t->restore_error = NULL;

	/* Quiet the buffer first so nothing is recorded half-way through. */
	if (tracing_on >= 0)
		(void)ftrace_tracefs_write(t, "tracing_on", "0", NULL);

	for (size_t i = t->n_undo; i > 0; i--) {
		struct ftrace_undo_entry *e = &t->undo[i - 1];

		if ((int)(i - 1) == tracing_on)
			continue;
		k = undo_apply(t, e, subbuf_back);
		if (k < 0 && r == 0) {
			r = k;
			note_restore_error(t, e->file, k);
		}
		if (k >= 0 && strcmp(e->file, "buffer_subbuf_size_kb") == 0)
			subbuf_back = true;
		if (k >= 0) {
			ftrace_tracefs_forget(t, e->file);
			if (tracing_on > (int)(i - 1))
				tracing_on--;
		}
	}
	if (t->truncated) {
		k = ftrace_tracefs_truncate(t);
		if (k < 0 && r == 0) {
			r = k;
			note_restore_error(t, "trace", k);
		}
		if (k >= 0)
			t->truncated = false;
	}
	if (tracing_on >= 0) {
		k = ftrace_tracefs_write(t, "tracing_on", t->undo[tracing_on].value, NULL);
		if (k < 0 && r == 0) {
			r = k;
			note_restore_error(t, "tracing_on", k);
		}
		if (k >= 0)
			ftrace_tracefs_forget(t, "tracing_on");
	}

	t->undo_dirty = true;
	k = ftrace_tracefs_persist(t);
	if (k < 0 && r == 0) {
		r = k;
		note_restore_error(t, "the state file", k);
	}
	return r;
}

const char *ftrace_tracefs_restore_error(const struct ftrace_tracefs *t)
{
	return t ? t->restore_error : NULL;
}

/* ---- recovery ------------------------------------------------------------ */

static bool pid_alive(pid_t pid)
{
	if (pid <= 0)
		return false;
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* The form of a "dir" line; that it is tracefs is checked before a replay. */
static bool dir_form_valid(const char *d)
{
	return d[0] == '/' && !strstr(d, "/../") && !strstr(d, "/./") && strlen(d) <= 4095;
}

static bool dir_valid(const char *d)
{
	struct statfs sfs;

	return dir_form_valid(d) && statfs(d, &sfs) == 0 && (unsigned long)sfs.f_type == TRACEFS_MAGIC;
}

/*
 * @d, an instance directory, is missing from a mounted tracefs: removed
 * since the file was written (rmdir by hand, or by whoever made it), and
 * every setting of it went with it.  Only a missing name under an
 * "instances" directory that is tracefs counts: a tracefs not mounted (yet)
 * at that path keeps the file for later.
 */
static bool instance_gone(const char *d)
{
	static const char suffix[] = "/instances";
	const char *slash = strrchr(d, '/');
	char parent[4096];
	struct statfs sfs;
	size_t n;

	if (!dir_form_valid(d) || !slash || !slash[1])
		return false;
	n = (size_t)(slash - d);
	if (n < strlen(suffix) || n >= sizeof(parent) ||
	    memcmp(slash - strlen(suffix), suffix, strlen(suffix)) != 0)
		return false;
	memcpy(parent, d, n);
	parent[n] = 0;
	if (statfs(parent, &sfs) != 0 || (unsigned long)sfs.f_type != TRACEFS_MAGIC)
		return false;
	return access(d, F_OK) < 0 && errno == ENOENT;
}

int ftrace_tracefs_undo_parse(char *text, int *ret_pid, struct ftrace_tracefs **ret)
{
	_cleanup_(ftrace_tracefs_freep) struct ftrace_tracefs *t = NULL;
	char *line, *save = NULL;
	int pid = 0, r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->dirfd = -EBADF;
	t->clock = -1;

	line = strtok_r(text, "\n", &save);
	if (!line || (strcmp(line, UNDO_MAGIC) != 0 && strcmp(line, UNDO_MAGIC_V2) != 0 &&
		      strcmp(line, UNDO_MAGIC_V1) != 0))
		return -EBADMSG;
	while ((line = strtok_r(NULL, "\n", &save))) {
		if (strncmp(line, "pid ", 4) == 0) {
			int32_t v;

			if (safe_atoi32(line + 4, &v) < 0)
				return -EBADMSG;
			pid = v;
		} else if (strncmp(line, "boot ", 5) == 0) {
			if (t->boot_id[0] || !boot_id_valid(line + 5))
				return -EBADMSG;
			memcpy(t->boot_id, line + 5, BOOT_ID_LEN + 1);
		} else if (strncmp(line, "dir ", 4) == 0) {
			if (t->path || !dir_form_valid(line + 4))
				return -EBADMSG;
			t->path = strdup(line + 4);
			if (!t->path)
				return -ENOMEM;
		} else if (strncmp(line, "truncate ", 9) == 0) {
			t->truncated = strcmp(line + 9, "1") == 0;
		} else if (strncmp(line, "w ", 2) == 0) {
			char *file = line + 2, *value = strchr(file, ' ');

			if (!value)
				return -EBADMSG;
			*value++ = 0;
			if (unescape(value) < 0)
				return -EBADMSG;
			r = ftrace_tracefs_remember_value(t, file, value);
			if (r < 0)
				return r == -EINVAL ? -EBADMSG : r;
		} else {
			return -EBADMSG;
		}
	}
	if (!t->path)
		return -EBADMSG;
	*ret_pid = pid;
	*ret = TAKE_PTR(t);
	return 0;
}

/* As ftrace_tracefs_undo_file_replay(); a list left alone for a live owner sets *@ret_live_pid. */
static int file_replay(const char *path, bool force, int *ret_live_pid)
{
	_cleanup_(ftrace_tracefs_freep) struct ftrace_tracefs *t = NULL;
	_cleanup_free_ char *text = NULL;
	bool gone = false;
	int pid, r;
	size_t len;

	r = read_full_file_at(AT_FDCWD, path, UNDO_FILE_MAX, &text, &len);
	if (r < 0)
		return r;
	r = ftrace_tracefs_undo_parse(text, &pid, &t);
	if (r < 0)
		return r;
	if (t->boot_id[0]) {
		char now[BOOT_ID_LEN + 1];

		boot_id_read(now);
		/*
		 * Left by another boot (where the state directory is not a
		 * tmpfs that the reboot emptied): tracefs starts afresh at
		 * every boot, so there is nothing to put back, its instance may
		 * be gone, and its pid may be anybody's now.  Replaying it
		 * would write that boot's values over this one's.
		 */
		if (now[0] && strcmp(now, t->boot_id) != 0) {
			if (unlink(path) < 0 && errno != ENOENT)
				return negative_errno();
			return REPLAY_OTHER_BOOT;
		}
	}
	if (!dir_valid(t->path)) {
		if (!instance_gone(t->path))
			return -EBADMSG;
		gone = true;
	}
	if (!force && pid != getpid() && pid_alive(pid)) {
		if (ret_live_pid)
			*ret_live_pid = pid;
		return 0;
	}
	/* and no owner left to finish with it: the file is all that remains */
	if (gone) {
		if (unlink(path) < 0 && errno != ENOENT)
			return negative_errno();
		return REPLAY_INSTANCE_GONE;
	}

	t->dirfd = open(t->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0)
		return negative_errno();
	t->state_path = strdup(path);
	if (!t->state_path)
		return -ENOMEM;
	t->state_dir = strdup(path);
	if (!t->state_dir)
		return -ENOMEM;
	*strrchr(t->state_dir, '/') = 0;

	r = ftrace_tracefs_restore(t);
	if (r < 0)
		return r;
	return 1;
}

int ftrace_tracefs_undo_file_replay(const char *path, bool force)
{
	int r = file_replay(path, force, NULL);

	return r == REPLAY_OTHER_BOOT || r == REPLAY_INSTANCE_GONE ? 1 : r;
}

int ftrace_tracefs_undo_replay_dir(const char *state_dir, char **ret_report)
{
	_cleanup_free_ char *report = NULL;
	size_t report_len = 0;
	int n = 0, first_error = 0, r;
	FILE *f = NULL;
	DIR *d;

	d = opendir(state_dir);
	if (!d)
		return errno == ENOENT ? 0 : negative_errno();
	if (ret_report)
		f = open_memstream(&report, &report_len);

	for (struct dirent *de; (de = readdir(d));) {
		_cleanup_free_ char *p = NULL;
		size_t l = strlen(de->d_name);
		int live = 0;

		if (strncmp(de->d_name, "ftrace", 6) != 0 || l < 11 || strcmp(de->d_name + l - 5, ".undo") != 0)
			continue;
		p = strdup_printf("%s/%s", state_dir, de->d_name);
		/* A malformed file (-EBADMSG) is never acted on and is kept for a human. */
		r = p ? file_replay(p, false, &live) : -ENOMEM;
		if (r == REPLAY_OTHER_BOOT || r == REPLAY_INSTANCE_GONE)
			continue;       /* removed, nothing was restored */
		if (r > 0)
			n++;
		else if (r < 0 && first_error == 0)
			first_error = r;
		if (!f || !p)
			continue;
		/* what a person asking for a cleanup must hear: one line per file not restored */
		if (r == 0 && live > 0)
			fprintf(f, "%s: not restored: it belongs to process %d, which is still "
				   "running (stop it first)\n", p, live);
		else if (r == -EBADMSG)
			fprintf(f, "%s: not restored: not a state file this program wrote "
				   "(malformed, or a directory that is not tracefs); left in place\n", p);
		else if (r < 0)
			fprintf(f, "%s: not restored: %s; left in place\n", p, strerror(-r));
	}
	closedir(d);
	if (f && fclose(f) == 0 && report && report[0] && ret_report)
		*ret_report = TAKE_PTR(report);
	return first_error < 0 ? first_error : n;
}
