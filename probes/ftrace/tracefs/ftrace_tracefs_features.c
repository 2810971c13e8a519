/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Directory-wide tracefs state the FtraceConfig options beyond events
 * change: the raw_syscalls filter, the function_graph tracer and its
 * filters, kprobes, and the list files (set_event_pid).  Each change is
 * remembered and persisted before it is made, so that the last data source
 * to leave (or crash recovery) puts everything back exactly.
 *
 * Several data sources share a directory: the syscall filter is the union
 * of theirs (as traced_probes keeps it), function filters only grow while
 * function_graph is on (the kernel collates them; so does traced_probes).
 */

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"

static const char *const syscall_filter_files[] = {
	"events/raw_syscalls/sys_enter/filter",
	"events/raw_syscalls/sys_exit/filter",
};

static int write_syscall_filter(struct ftrace_tracefs *t, const char *filter, char **ret_error)
{
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(syscall_filter_files); i++) {
		r = ftrace_tracefs_set(t, syscall_filter_files[i], filter, ret_error);
		if (r < 0)
			return r;
	}
	return 0;
}

int ftrace_tracefs_syscall_filter(struct ftrace_tracefs *t, const char *filter, char **ret_error)
{
	_cleanup_free_ char *merged = NULL;
	int r;

	if (t->syscalls_all)
		return 0;
	if (!filter) {
		/* Someone records every syscall: no filter at all ("0" clears it). */
		r = write_syscall_filter(t, "0", ret_error);
		if (r >= 0) {
			t->syscalls_all = true;
			free(t->syscall_filter);
			t->syscall_filter = NULL;
		}
		return r;
	}
	if (t->syscall_filter && strcmp(t->syscall_filter, filter) == 0)
		return 0;
	if (t->syscall_filter) {
		merged = strdup_printf("(%s) || (%s)", t->syscall_filter, filter);
		if (!merged)
			return -ENOMEM;
		/* Too long for the kernel: the union is then every syscall. */
		if (strlen(merged) > FTRACE_SYSCALL_FILTER_TEXT_MAX)
			return ftrace_tracefs_syscall_filter(t, NULL, ret_error);
	} else {
		merged = strdup(filter);
		if (!merged)
			return -ENOMEM;
	}
	r = write_syscall_filter(t, merged, ret_error);
	if (r < 0)
		return r;
	free(t->syscall_filter);
	t->syscall_filter = TAKE_PTR(merged);
	return 0;
}

/* Whether @word is one of the blank-separated words of @text. */
static bool has_word(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; (p = strstr(p, word)); p += n)
		if ((p == text || p[-1] == ' ' || p[-1] == '\n' || p[-1] == '\t') &&
		    (p[n] == 0 || p[n] == ' ' || p[n] == '\n' || p[n] == '\t'))
			return true;
	return false;
}

bool ftrace_tracefs_has_tracer(struct ftrace_tracefs *t, const char *tracer)
{
	_cleanup_free_ char *s = NULL;

	return ftrace_tracefs_read(t, "available_tracers", 4096, &s, NULL) >= 0 && has_word(s, tracer);
}

/*
 * Each entry is its own write(): the kernel refuses an unknown function
 * with EINVAL, and one bad entry must not take the others with it.
 */
static int append_each(struct ftrace_tracefs *t, const char *file, const char *entries, char **ret_refused)
{
	_cleanup_close_ int fd = -EBADF;
	int n_ok = 0;

	fd = openat(t->dirfd, file, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	for (const char *p = entries; *p;) {
		size_t len = strcspn(p, "\n");

		if (len > 0) {
			if (write_all(fd, p, len) >= 0) {
				n_ok++;
			} else if (ret_refused) {
				_cleanup_free_ char *name = strndup(p, len);

				if (!name || str_append_line(ret_refused, name) < 0)
					return -ENOMEM;
			}
		}
		p += len + (p[len] == '\n');
	}
	return n_ok;
}

/*
 * Whether @t has @file: 0 yes, -ENOENT no (the kernel does not create it
 * in this directory), another -errno when it could not be told.
 */
static int has_file(struct ftrace_tracefs *t, const char *file)
{
	return faccessat(t->dirfd, file, F_OK, 0) == 0 ? 0 : negative_errno();
}

/*
 * What the config asks of the graph that this directory cannot give.
 * 6.12's instances list function_graph in available_tracers and have
 * set_ftrace_filter, but set_graph_function, set_graph_notrace and
 * max_graph_depth exist only at the top level, where they act on every
 * function_graph tracer of the machine.  Writing them there from an
 * instance's session would change tracing that is not ours, and
 * ignoring them would record every function under the graph (or a
 * deeper graph than asked): the graph is refused instead, before
 * anything is changed, and the reason ends in failed_ftrace_events.
 */
static int check_graph_files(struct ftrace_tracefs *t, const char *roots, uint32_t max_depth, char **ret_error)
{
	int r;

	if (roots && *roots) {
		r = has_file(t, "set_graph_function");
		if (r == -ENOENT) {
			set_error_text(ret_error, strdup_printf("%s has no set_graph_function for function_graph_roots "
								"(the kernel keeps it at the top level only)", t->path));
			return -EOPNOTSUPP;
		}
		if (r < 0)
			return r;
	}
	if (max_depth > 0) {
		r = has_file(t, "max_graph_depth");
		if (r == -ENOENT) {
			set_error_text(ret_error, strdup_printf("%s has no max_graph_depth for function_graph_max_depth "
								"(the kernel keeps it at the top level only)", t->path));
			return -EOPNOTSUPP;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int ftrace_tracefs_function_graph(struct ftrace_tracefs *t, const char *filters, const char *roots,
				  uint32_t max_depth, char **ret_refused, char **ret_error)
{
	char depth[16];
	int r;

	/* The tracer first: without it (6.1's instances) the files do not matter. */
	if (!t->funcgraph_on && !ftrace_tracefs_has_tracer(t, "function_graph")) {
		set_error_text(ret_error, strdup_printf("%s has no function_graph tracer (available_tracers)", t->path));
		return -EOPNOTSUPP;
	}
	r = check_graph_files(t, roots, max_depth, ret_error);
	if (r < 0)
		return r;
	if (!t->funcgraph_on) {
		_cleanup_free_ char *cur = NULL;
		char tok[64] = "";

		r = ftrace_tracefs_read(t, "current_tracer", 4096, &cur, NULL);
		if (r < 0)
			return r;
		(void)sscanf(cur, "%63s", tok);
		if (strcmp(tok, "nop") != 0) {
			set_error_text(ret_error, strdup_printf("%s/current_tracer is '%s', not nop", t->path, tok));
			return -EBUSY;
		}
		/*
		 * Everything we are about to change, saved first; the tracer
		 * last, so that the restore (newest first) puts it back before
		 * the filters: an emptied filter under a live function_graph
		 * would trace every function for a moment.
		 */
		r = ftrace_tracefs_remember(t, "set_ftrace_filter");
		if (r >= 0 && has_file(t, "set_graph_function") == 0)
			r = ftrace_tracefs_remember(t, "set_graph_function");
		if (r >= 0 && has_file(t, "max_graph_depth") == 0)
			r = ftrace_tracefs_remember(t, "max_graph_depth");
		if (r >= 0)
			r = ftrace_tracefs_remember(t, "current_tracer");
		if (r == -EOPNOTSUPP || r == -E2BIG) {
			set_error_text(ret_error, strdup_printf("%s holds function filters or commands that could not be "
								"put back exactly; left alone", t->path));
			return r;
		}
		if (r < 0)
			return r;
		r = ftrace_tracefs_persist(t);
		if (r < 0)
			return r;
		r = ftrace_tracefs_write_trunc(t, "set_ftrace_filter", "", ret_error);
		if (r >= 0 && has_file(t, "set_graph_function") == 0)
			r = ftrace_tracefs_write_trunc(t, "set_graph_function", "", ret_error);
		if (r < 0)
			return r;
	}
	if (filters && *filters) {
		r = append_each(t, "set_ftrace_filter", filters, ret_refused);
		if (r < 0)
			return r;
	}
	if (roots && *roots) {
		r = append_each(t, "set_graph_function", roots, ret_refused);
		if (r == -ENOENT) {
			set_error_text(ret_error, strdup_printf("%s has no set_graph_function", t->path));
			return -EOPNOTSUPP;
		}
		if (r < 0)
			return r;
	}
	/*
	 * Without the file (an instance; @max_depth is 0 then) the top level's
	 * depth applies, unlimited unless someone else set it there.
	 */
	if (has_file(t, "max_graph_depth") == 0) {
		(void)snprintf(depth, sizeof(depth), "%u", max_depth);
		r = ftrace_tracefs_write(t, "max_graph_depth", depth, ret_error);
		if (r < 0)
			return r;
	}
	if (!t->funcgraph_on) {
		r = ftrace_tracefs_write(t, "current_tracer", "function_graph", ret_error);
		if (r < 0)
			return r;
		t->funcgraph_on = true;
	}
	return 0;
}

int ftrace_tracefs_kprobe_create(struct ftrace_tracefs *t, const char *group, const char *name,
				 const char *line, char **ret_error)
{
	char key[2 * FTRACE_NAME_MAX + 16];
	bool ours_already;
	int r;

	if (!ftrace_name_valid(group) || !ftrace_name_valid(name))
		return -EINVAL;
	(void)snprintf(key, sizeof(key), "kprobe:%s/%s", group, name);
	ours_already = ftrace_tracefs_remembered(t, key);
	if (!ours_already) {
		r = ftrace_tracefs_remember_value(t, key, "-");
		if (r < 0)
			return r;
		r = ftrace_tracefs_persist(t);
		if (r < 0) {
			ftrace_tracefs_forget(t, key);
			return r;
		}
	}
	r = ftrace_tracefs_kprobe_write(t, line, ret_error);
	if (r == -EEXIST && ours_already)
		return 0;
	if (r < 0 && !ours_already) {
		/* Not created by us (EEXIST: someone else's, which we leave), or not at all. */
		ftrace_tracefs_forget(t, key);
		(void)ftrace_tracefs_persist(t);
	}
	return r == -EEXIST ? 0 : r;
}

int ftrace_tracefs_set_list(struct ftrace_tracefs *t, const char *file, const char *value, char **ret_error)
{
	int r;

	r = ftrace_tracefs_remember(t, file);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("save %s/%s: %s", t->path, file, strerror(-r)));
		return r;
	}
	r = ftrace_tracefs_persist(t);
	if (r < 0)
		return r;
	return ftrace_tracefs_write_trunc(t, file, value, ret_error);
}

bool ftrace_tracefs_exclusive(const struct ftrace_tracefs *t)
{
	return t->exclusive;
}

void ftrace_tracefs_set_exclusive(struct ftrace_tracefs *t, bool on)
{
	t->exclusive = on;
}

void ftrace_tracefs_features_reset(struct ftrace_tracefs *t)
{
	free(t->syscall_filter);
	t->syscall_filter = NULL;
	t->syscalls_all = false;
	t->funcgraph_on = false;
	t->exclusive = false;
}
