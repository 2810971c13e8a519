/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The undo list of a tracefs directory: the old value of every file we
 * change, persisted to a state file before the change so that a restart
 * after SIGKILL can put tracefs back (ftrace_tracefs_undo_replay_dir(), for
 * ftrace_host_recover()).
 *
 * State file (text, one record per line, written atomically):
 *   traced-probes-ftrace-undo 1
 *   pid <owner pid>
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
#include <sys/stat.h>
#include <sys/vfs.h>

#include "probes/ftrace/ftrace.h"
#include "probes/ftrace/ftrace_control.h"
#include "probes/ftrace/ftrace_tracefs_internal.h"

#define UNDO_MAGIC "traced-probes-ftrace-undo 1"
#define UNDO_VALUE_MAX 63u
#define UNDO_FILE_MAX (8u << 20)
#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif

static bool value_valid(const char *v)
{
	size_t n = 0;

	for (const char *c = v; *c; c++, n++) {
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '_' || *c == '-' || *c == '.'))
			return false;
	}
	return n > 0 && n <= UNDO_VALUE_MAX;
}

/* The only files an undo record may name. */
static bool undo_file_allowed(const char *f)
{
	static const char *const plain[] = { "tracing_on", "trace_clock", "buffer_size_kb", "buffer_percent" };
	char g[FTRACE_NAME_MAX + 1], n[FTRACE_NAME_MAX + 1];
	const char *a, *b;
	unsigned cpu;
	int end = 0;

	for (size_t i = 0; i < ARRAY_SIZE(plain); i++)
		if (strcmp(f, plain[i]) == 0)
			return true;
	if (sscanf(f, "per_cpu/cpu%u/buffer_size_kb%n", &cpu, &end) == 1 && f[end] == 0 &&
	    cpu < FTRACE_MAX_CPUS && strncmp(f, "per_cpu/cpu", 11) == 0 && f[11] >= '0' && f[11] <= '9')
		return true;
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
	if (!b || (size_t)(b - a) > FTRACE_NAME_MAX || strcmp(b, "/enable") != 0)
		return false;
	memcpy(n, a, (size_t)(b - a));
	n[b - a] = 0;
	return ftrace_name_valid(g) && ftrace_name_valid(n);
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

	if (!undo_file_allowed(file) || !value_valid(old_value))
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

int ftrace_tracefs_remember(struct ftrace_tracefs *t, const char *file)
{
	_cleanup_free_ char *s = NULL;
	char v[UNDO_VALUE_MAX + 1];
	int r;

	if (!undo_file_allowed(file))
		return -EINVAL;
	if (undo_find(t, file) >= 0)
		return 0;
	r = ftrace_tracefs_read(t, file, 4096, &s, NULL);
	if (r < 0)
		return r;
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
	if (r >= 0 && fsync(fd) < 0)
		r = negative_errno();
	if (r >= 0 && rename(tmp, path) < 0)
		r = negative_errno();
	if (r < 0)
		(void)unlink(tmp);
	return r;
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
	fprintf(f, UNDO_MAGIC "\npid %d\ndir %s\ntruncate %d\n", (int)getpid(), t->path, t->truncated ? 1 : 0);
	for (size_t i = 0; i < t->n_undo; i++)
		fprintf(f, "w %s %s\n", t->undo[i].file, t->undo[i].value);
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

int ftrace_tracefs_restore(struct ftrace_tracefs *t)
{
	int tracing_on = undo_find(t, "tracing_on");
	int r = 0, k;

	/* Quiet the buffer first so nothing is recorded half-way through. */
	if (tracing_on >= 0)
		(void)ftrace_tracefs_write(t, "tracing_on", "0", NULL);

	for (size_t i = t->n_undo; i > 0; i--) {
		struct ftrace_undo_entry *e = &t->undo[i - 1];

		if ((int)(i - 1) == tracing_on)
			continue;
		k = ftrace_tracefs_write(t, e->file, e->value, NULL);
		if (k < 0 && r == 0)
			r = k;
		if (k >= 0) {
			ftrace_tracefs_forget(t, e->file);
			if (tracing_on > (int)(i - 1))
				tracing_on--;
		}
	}
	if (t->truncated) {
		k = ftrace_tracefs_truncate(t);
		if (k < 0 && r == 0)
			r = k;
		if (k >= 0)
			t->truncated = false;
	}
	if (tracing_on >= 0) {
		k = ftrace_tracefs_write(t, "tracing_on", t->undo[tracing_on].value, NULL);
		if (k < 0 && r == 0)
			r = k;
		if (k >= 0)
			ftrace_tracefs_forget(t, "tracing_on");
	}

	t->undo_dirty = true;
	k = ftrace_tracefs_persist(t);
	if (k < 0 && r == 0)
		r = k;
	return r;
}

/* ---- recovery ------------------------------------------------------------ */

static bool pid_alive(pid_t pid)
{
	if (pid <= 0)
		return false;
	return kill(pid, 0) == 0 || errno == EPERM;
}

static bool dir_valid(const char *d)
{
	struct statfs sfs;

	if (d[0] != '/' || strstr(d, "/../") || strstr(d, "/./") || strlen(d) > 4095)
		return false;
	return statfs(d, &sfs) == 0 && (unsigned long)sfs.f_type == TRACEFS_MAGIC;
}

int ftrace_tracefs_undo_file_replay(const char *path, bool force)
{
	_cleanup_(ftrace_tracefs_freep) struct ftrace_tracefs *t = NULL;
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL;
	int pid = 0, truncate = 0, r;
	size_t len;

	r = read_full_file_at(AT_FDCWD, path, UNDO_FILE_MAX, &text, &len);
	if (r < 0)
		return r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->dirfd = -EBADF;
	t->clock = -1;

	line = strtok_r(text, "\n", &save);
	if (!line || strcmp(line, UNDO_MAGIC) != 0)
		return -EBADMSG;
	while ((line = strtok_r(NULL, "\n", &save))) {
		if (strncmp(line, "pid ", 4) == 0) {
			int32_t v;

			if (safe_atoi32(line + 4, &v) < 0)
				return -EBADMSG;
			pid = v;
		} else if (strncmp(line, "dir ", 4) == 0) {
			if (t->path || !dir_valid(line + 4))
				return -EBADMSG;
			t->path = strdup(line + 4);
			if (!t->path)
				return -ENOMEM;
		} else if (strncmp(line, "truncate ", 9) == 0) {
			truncate = strcmp(line + 9, "1") == 0;
		} else if (strncmp(line, "w ", 2) == 0) {
			char *file = line + 2, *value = strchr(file, ' ');

			if (!value)
				return -EBADMSG;
			*value++ = 0;
			r = ftrace_tracefs_remember_value(t, file, value);
			if (r < 0)
				return r == -EINVAL ? -EBADMSG : r;
		} else {
			return -EBADMSG;
		}
	}
	if (!t->path)
		return -EBADMSG;
	if (!force && pid != getpid() && pid_alive(pid))
		return 0;

	t->dirfd = open(t->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0)
		return negative_errno();
	t->truncated = truncate;
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

int ftrace_tracefs_undo_replay_dir(const char *state_dir)
{
	int n = 0, first_error = 0, r;
	DIR *d;

	d = opendir(state_dir);
	if (!d)
		return errno == ENOENT ? 0 : negative_errno();

	for (struct dirent *de; (de = readdir(d));) {
		_cleanup_free_ char *p = NULL;
		size_t l = strlen(de->d_name);

		if (strncmp(de->d_name, "ftrace", 6) != 0 || l < 11 || strcmp(de->d_name + l - 5, ".undo") != 0)
			continue;
		p = strdup_printf("%s/%s", state_dir, de->d_name);
		/* A malformed file (-EBADMSG) is never acted on and is kept for a human. */
		r = p ? ftrace_tracefs_undo_file_replay(p, false) : -ENOMEM;
		if (r > 0)
			n++;
		else if (r < 0 && first_error == 0)
			first_error = r;
	}
	closedir(d);
	return first_error < 0 ? first_error : n;
}
