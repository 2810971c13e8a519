/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One tracefs directory (the top level or an instance): finding and mounting
 * the root, and the single validated read/write path every tracefs file goes
 * through.
 */

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <tracefs.h>
#include <unistd.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"
#include "util/util.h"

#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif

#define TRACEFS_PRIMARY "/sys/kernel/tracing"
#define TRACEFS_DEBUGFS "/sys/kernel/debug/tracing"

static bool is_tracefs(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && (unsigned long)sfs.f_type == TRACEFS_MAGIC;
}

int ftrace_tracefs_find_root(char **ret_root, char **ret_error)
{
	const char *root = NULL;

	if (is_tracefs(TRACEFS_PRIMARY))
		root = TRACEFS_PRIMARY;
	else if (geteuid() == 0 && access(TRACEFS_PRIMARY, F_OK) == 0 &&
		 mount("nodev", TRACEFS_PRIMARY, "tracefs", 0, NULL) == 0 && is_tracefs(TRACEFS_PRIMARY))
		root = TRACEFS_PRIMARY;
	else if (is_tracefs(TRACEFS_DEBUGFS))
		root = TRACEFS_DEBUGFS;

	if (!root) {
		if (geteuid() != 0) {
			set_error_text(ret_error, strdup_printf("tracefs is not mounted at " TRACEFS_PRIMARY
							   " and only root can mount it"));
			return -EACCES;
		}
		set_error_text(ret_error, strdup_printf("no tracefs at " TRACEFS_PRIMARY " or " TRACEFS_DEBUGFS
						   " and mounting it failed"));
		return -ENODEV;
	}

	/*
	 * Probe a file every configuration writes; reading "trace" (what
	 * Perfetto opens) would pause recording while it is open.
	 */
	_cleanup_free_ char *probe = strdup_printf("%s/tracing_on", root);
	if (!probe)
		return -ENOMEM;
	if (access(probe, W_OK) < 0) {
		int r = negative_errno();

		if (r == -EACCES || r == -EPERM) {
			set_error_text(ret_error, strdup_printf("no permission to write to %s: running as uid %u, "
							   "tracefs needs root",
							   root, (unsigned)geteuid()));
			return r;
		}
		/* Anything else shows up again, with the file name, when the directory is opened. */
	}

	char *p = strdup(root);
	if (!p)
		return -ENOMEM;
	*ret_root = p;
	return 0;
}

static char *state_file_name(const char *state_dir, const char *path)
{
	_cleanup_free_ char *esc = strdup(path);
	if (!esc)
		return NULL;
	for (char *c = esc; *c; c++)
		if (*c == '/')
			*c = '_';
	return strdup_printf("%s/ftrace%s.undo", state_dir, esc);
}

int ftrace_tracefs_open(const char *root, const char *instance_name, const char *state_dir,
			struct ftrace_tracefs **ret, char **ret_error)
{
	_cleanup_(ftrace_tracefs_freep) struct ftrace_tracefs *t = NULL;
	int r;

	if (!root || root[0] != '/')
		return -EINVAL;
	if (instance_name && !ftrace_instance_name_valid(instance_name)) {
		set_error_text(ret_error, strdup_printf("invalid ftrace instance name"));
		return -EINVAL;
	}

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->dirfd = -EBADF;
	t->clock = -1;

	t->path = instance_name ? strdup_printf("%s/instances/%s", root, instance_name) : strdup(root);
	if (!t->path)
		return -ENOMEM;
	if (instance_name) {
		t->instance_name = strdup(instance_name);
		if (!t->instance_name)
			return -ENOMEM;
	}

	t->dirfd = open(t->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0) {
		r = negative_errno();
		if (r == -ENOENT && instance_name)
			set_error_text(ret_error, strdup_printf("ftrace instance '%s' does not exist (create %s first)",
							   instance_name, t->path));
		else
			set_error_text(ret_error, strdup_printf("cannot open %s: %s", t->path, strerror(-r)));
		return r;
	}
	if (faccessat(t->dirfd, "tracing_on", W_OK, 0) < 0) {
		r = negative_errno();
		set_error_text(ret_error, strdup_printf("cannot write to %s/tracing_on: %s%s", t->path, strerror(-r),
						   r == -EACCES || r == -EPERM ? " (tracefs needs root)" : ""));
		return r;
	}

	/* Only for tracefs_error_last(): the kernel's error_log of this directory. */
	t->inst = tracefs_instance_alloc(root, instance_name);
	if (!t->inst)
		return -ENOMEM;

	if (state_dir) {
		t->state_path = state_file_name(state_dir, t->path);
		if (!t->state_path)
			return -ENOMEM;
		t->state_dir = strdup(state_dir);
		if (!t->state_dir)
			return -ENOMEM;
	}

	*ret = TAKE_PTR(t);
	return 0;
}

struct ftrace_tracefs *ftrace_tracefs_free(struct ftrace_tracefs *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n_undo; i++) {
		free(t->undo[i].file);
		free(t->undo[i].value);
	}
	free(t->undo);
	free(t->syscall_filter);
	for (size_t i = 0; i < t->n_refs; i++)
		free(t->refs[i].key);
	free(t->refs);
	if (t->inst)
		tracefs_instance_free(t->inst);
	if (t->dirfd >= 0)
		(void)close(t->dirfd);
	free(t->last_kernel_error);
	free(t->restore_error);
	free(t->subbuf_error);
	free(t->state_path);
	free(t->state_dir);
	free(t->instance_name);
	free(t->path);
	free(t);
	return NULL;
}

const char *ftrace_tracefs_path(const struct ftrace_tracefs *t)
{
	return t->path;
}

const char *ftrace_tracefs_instance_name(const struct ftrace_tracefs *t)
{
	return t->instance_name;
}

int ftrace_tracefs_dirfd(const struct ftrace_tracefs *t)
{
	return t->dirfd;
}

const char *ftrace_tracefs_state_path(const struct ftrace_tracefs *t)
{
	return t->state_path;
}

int ftrace_tracefs_read(struct ftrace_tracefs *t, const char *file, size_t max, char **ret,
			size_t *ret_len)
{
	_cleanup_close_ int fd = -EBADF;

	fd = openat(t->dirfd, file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	return read_full_fd(fd, max, ret, ret_len);
}

int ftrace_tracefs_root_dirfd(const struct ftrace_tracefs *t)
{
	_cleanup_free_ char *root = strdup(t->path);
	char *inst;
	int fd;

	if (!root)
		return -ENOMEM;
	inst = strstr(root, "/instances/");
	if (inst && !strchr(inst + strlen("/instances/"), '/'))
		*inst = 0;
	fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
}

int ftrace_tracefs_read_root(struct ftrace_tracefs *t, const char *file, size_t max, char **ret)
{
	_cleanup_close_ int dfd = ftrace_tracefs_root_dirfd(t), fd = -EBADF;

	if (dfd < 0)
		return dfd;
	fd = openat(dfd, file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	return read_full_fd(fd, max, ret, NULL);
}

/*
 * The last entry of error_log, if it is new since we last looked: the kernel
 * explains EINVAL there for filters, triggers and probes.  An entry we saw
 * before belongs to an older failure, not to this one.
 */
static char *kernel_error_text(struct ftrace_tracefs *t)
{
	char *e = tracefs_error_last(t->inst);

	if (!e)
		return NULL;
	if (t->last_kernel_error && strcmp(e, t->last_kernel_error) == 0) {
		free(e);
		return NULL;
	}
	free(t->last_kernel_error);
	t->last_kernel_error = strdup(e);
	return e;
}

void ftrace_tracefs_note_kernel_error(struct ftrace_tracefs *t)
{
	/* Remember what is already in error_log so old entries are not blamed on us. */
	free(kernel_error_text(t));
}

int ftrace_tracefs_write(struct ftrace_tracefs *t, const char *file, const char *value,
			 char **ret_error)
{
	_cleanup_close_ int fd = -EBADF;
	int r;

	fd = openat(t->dirfd, file, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = negative_errno();
		set_error_text(ret_error, strdup_printf("open %s/%s: %s", t->path, file, strerror(-r)));
		return r;
	}
	r = write_all(fd, value, strlen(value));
	if (r < 0) {
		_cleanup_free_ char *ktext = r == -EINVAL ? kernel_error_text(t) : NULL;

		set_error_text(ret_error, strdup_printf("write '%s' to %s/%s: %s%s%s%s", value, t->path, file,
						   strerror(-r), ktext ? " (kernel: " : "",
						   ktext ? ktext : "", ktext ? ")" : ""));
		return r;
	}
	return 0;
}

int ftrace_tracefs_write_at(int dirfd, const char *file, const char *value)
{
	int fd, r;

	fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	r = write_all(fd, value, strlen(value));
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

/*
 * buffer_size_kb = @value, each CPU's buffer resized from that CPU.
 *
 * Given the directory's buffer_size_kb, the kernel resizes every other
 * CPU's buffer from a kworker bound to that CPU and waits for each: behind
 * a work item that holds a CPU's worker pool (a "workqueue lockup": 30 to
 * 110 s seen on a busy 2-CPU VM, minutes in CI) the write waits as long,
 * and the session with it.  A write to per_cpu/cpuN/buffer_size_kb made on
 * CPU N resizes right there, with no kworker.  So the calling thread moves
 * to each CPU in turn (its affinity is put back after).  A CPU it may not
 * run on (offline, outside its cpuset) or a per-CPU file refused leaves the
 * rest to the directory-wide write, which skips the CPUs already resized.
 * Returns 0 or -errno; touches only @dirfd.
 */
int ftrace_tracefs_buffer_kb_write_at(int dirfd, const char *value)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);
	bool all = n <= 0 || n > CPU_SETSIZE;
	cpu_set_t old, one;

	if (!all && sched_getaffinity(0, sizeof(old), &old) < 0)
		all = true;
	for (long cpu = 0; !all && cpu < n; cpu++) {
		char file[64];

		CPU_ZERO(&one);
		CPU_SET((int)cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) < 0) {
			all = true;
			break;
		}
		(void)snprintf(file, sizeof(file), "per_cpu/cpu%ld/buffer_size_kb", cpu);
		all = ftrace_tracefs_write_at(dirfd, file, value) < 0;
	}
	if (n > 0 && n <= CPU_SETSIZE)
		(void)sched_setaffinity(0, sizeof(old), &old);
	return all ? ftrace_tracefs_write_at(dirfd, "buffer_size_kb", value) : 0;
}

int ftrace_tracefs_write_buffer_kb(struct ftrace_tracefs *t, const char *value, char **ret_error)
{
	int r = ftrace_tracefs_buffer_kb_write_at(t->dirfd, value);

	if (r < 0)
		set_error_text(ret_error, strdup_printf("write '%s' to %s/buffer_size_kb: %s", value, t->path,
							strerror(-r)));
	return r;
}

int ftrace_tracefs_truncate(struct ftrace_tracefs *t)
{
	_cleanup_close_ int fd = -EBADF;

	fd = openat(t->dirfd, "trace", O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	return 0;
}

int ftrace_tracefs_clear_frozen(struct ftrace_tracefs *t)
{
	if (!t)
		return -EINVAL;
	return ftrace_tracefs_truncate(t);
}

int ftrace_tracefs_page_size(struct ftrace_tracefs *t, size_t *ret)
{
	_cleanup_free_ char *s = NULL;
	uint32_t kb;
	long ps;

	if (ftrace_tracefs_read(t, "buffer_subbuf_size_kb", 64, &s, NULL) >= 0 && safe_atou32(s, &kb) >= 0 &&
	    kb > 0 && kb <= 1024) {
		*ret = (size_t)kb * 1024;
		return 0;
	}
	ps = sysconf(_SC_PAGESIZE);
	if (ps <= 0)
		return -EINVAL;
	*ret = (size_t)ps;
	return 0;
}

static bool is_dir_entry(int dfd, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_DIR;
	return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Which events a config can name: all of a group it names ("group/x", or
 * the whole-group wildcard), and in every group the events called like a
 * bare "name" (resolving one needs to know whether another group has it
 * too).  A kernel has thousands of events; a config wants a few.
 */
struct wanted {
	const char *const *reqs;        /* NULL: every event */
	size_t n;
};

static bool wants_group(const struct wanted *w, const char *group)
{
	size_t glen = strlen(group);

	if (!w->reqs)
		return true;
	for (size_t i = 0; i < w->n; i++)
		if (w->reqs[i] && strncmp(w->reqs[i], group, glen) == 0 && w->reqs[i][glen] == '/')
			return true;
	return false;
}

static bool wants_bare(const struct wanted *w, const char *name)
{
	for (size_t i = 0; w->reqs && i < w->n; i++)
		if (w->reqs[i] && strcmp(w->reqs[i], name) == 0)
			return true;
	return false;
}

static bool any_bare(const struct wanted *w)
{
	for (size_t i = 0; w->reqs && i < w->n; i++)
		if (w->reqs[i] && !strchr(w->reqs[i], '/'))
			return true;
	return false;
}

/* The wanted events/<group>/<event>/ directories of one group. */
static int add_group(struct ftrace_event_list *l, int events_fd, const char *group,
		     const struct wanted *w)
{
	_cleanup_close_ int fd = -EBADF;
	unsigned flags = strcmp(group, "ftrace") == 0 ? FTRACE_EVENT_ALWAYS_ON : 0;
	bool whole = wants_group(w, group);
	DIR *d;
	int r = 0;

	if (!whole && !any_bare(w))
		return 0;
	fd = openat(events_fd, group, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : negative_errno();
	d = fdopendir(fd);
	if (!d)
		return negative_errno();
	TAKE_FD(fd);
	for (struct dirent *de; r >= 0 && (de = readdir(d));) {
		if (!ftrace_name_valid(de->d_name) || (!whole && !wants_bare(w, de->d_name)) ||
		    !is_dir_entry(dirfd(d), de))
			continue;
		r = ftrace_event_list_add(l, group, de->d_name, flags);
	}
	closedir(d);
	return r < 0 ? r : 0;
}

/*
 * The events of this directory, from its events/ tree rather than
 * available_events: instances have no available_events file, and the tree
 * also lists the always-on ftrace/ events (print, bputs...).
 */
int ftrace_tracefs_read_available(struct ftrace_tracefs *t, const char *const *reqs, size_t n_reqs,
				  struct ftrace_event_list **ret)
{
	const struct wanted w = { reqs, n_reqs };
	_cleanup_(ftrace_event_list_freep) struct ftrace_event_list *l = NULL;
	_cleanup_close_ int fd = -EBADF;
	DIR *d;
	int r;

	r = ftrace_event_list_new(&l);
	if (r < 0)
		return r;
	fd = openat(t->dirfd, "events", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	d = fdopendir(fd);
	if (!d)
		return negative_errno();
	TAKE_FD(fd);
	r = 0;
	for (struct dirent *de; r >= 0 && (de = readdir(d));) {
		if (!ftrace_name_valid(de->d_name) || !is_dir_entry(dirfd(d), de))
			continue;
		r = add_group(l, dirfd(d), de->d_name, &w);
	}
	closedir(d);
	if (r < 0)
		return r;
	ftrace_event_list_sort(l);
	*ret = TAKE_PTR(l);
	return 0;
}
