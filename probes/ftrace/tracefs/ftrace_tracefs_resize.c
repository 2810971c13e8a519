/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ring-buffer resize of a directory, on a thread of its own.
 *
 * A write to buffer_size_kb makes the kernel reallocate every CPU's
 * buffer: tens of milliseconds for a few MiB, seconds for hundreds of MiB
 * or on a loaded machine.  On the loop thread that write would stop every
 * other session's drain and the answers to the service for as long.  So
 * the first attach of a directory only plans the size (its undo entry is
 * already persisted), and this thread does the one write.
 *
 * What the thread shares with the loop: the directory's fd (read-only
 * while the thread runs: ftrace_tracefs_free() and the restore wait for it
 * first) and its own struct, which the loop reads only after joining.  It
 * touches no other field of the controller, so no lock of ours is needed.
 *
 * The kernel's side: it holds trace_types_lock for the whole resize, and
 * every open() of a tracefs file, of any instance, takes that lock (on
 * 6.18 an open of another instance's stats file waited 4.3 s beside a
 * 1 GiB-per-CPU resize), while read() on a descriptor already open does
 * not.  So the loop keeps draining (its per-CPU readers are open), and
 * the setup starts the thread only after its last tracefs step; what
 * still opens a file while it runs (another session's setup, a flush's
 * stats, a drain on a clock other than boot) waits for the resize:
 * bounded by it, not removed.
 */

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"
#include "util/util.h"

struct ftrace_tracefs_resize {
	pthread_t thread;
	int dirfd;                      /* the controller's, borrowed */
	int efd;                        /* written once when the write returned */
	uint32_t kb;
	char value[16];
	int result;                     /* 0 or -errno, read after the join */
	uint64_t ns;                    /* how long the kernel took */
};

static void *resize_main(void *arg)
{
	struct ftrace_tracefs_resize *w = arg;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	int fd;

	fd = openat(w->dirfd, "buffer_size_kb", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		w->result = -errno;
	} else {
		w->result = write_all(fd, w->value, strlen(w->value));
		if (close(fd) < 0 && w->result == 0)
			w->result = -errno;
	}
	w->ns = now_ns(CLOCK_MONOTONIC) - t0;
	/*
	 * An eventfd write of 1 cannot block or fail short of a bug;
	 * eventfd_write() because a (void) cast does not quiet
	 * write()'s warn_unused_result under _FORTIFY_SOURCE.
	 */
	(void)eventfd_write(w->efd, 1);
	return NULL;
}

bool ftrace_tracefs_resize_planned(const struct ftrace_tracefs *t)
{
	return t->resize_kb > 0 && !t->resize;
}

bool ftrace_tracefs_resizing(const struct ftrace_tracefs *t)
{
	return t->resize != NULL;
}

int ftrace_tracefs_resize_start(struct ftrace_tracefs *t, int *ret_fd)
{
	struct ftrace_tracefs_resize *w;
	pthread_attr_t attr;
	sigset_t all, old;
	int r;

	if (t->resize) {
		*ret_fd = t->resize->efd;
		return 1;
	}
	if (t->resize_kb == 0)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->dirfd = t->dirfd;
	w->kb = t->resize_kb;
	(void)snprintf(w->value, sizeof(w->value), "%u", w->kb);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		r = -errno;
		free(w);
		return r;
	}
	/* No signal is ever delivered to the thread: the loop's signalfd keeps them. */
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_attr_init(&attr);
	if (r == 0) {
		(void)pthread_attr_setstacksize(&attr, 64 * 1024);
		r = -pthread_create(&w->thread, &attr, resize_main, w);
		(void)pthread_attr_destroy(&attr);
	}
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		(void)close(w->efd);
		free(w);
		return r;
	}
	t->resize = w;
	*ret_fd = w->efd;
	return 1;
}

int ftrace_tracefs_resize_finish(struct ftrace_tracefs *t, uint32_t *ret_kb, uint64_t *ret_ns,
				 char **ret_error)
{
	struct ftrace_tracefs_resize *w = t->resize;
	uint64_t t0;
	char v[16];
	int r;

	if (!w) {
		/* Planned and never started: write it here (a caller with no loop). */
		if (t->resize_kb == 0)
			return 0;
		t0 = now_ns(CLOCK_MONOTONIC);
		(void)snprintf(v, sizeof(v), "%u", t->resize_kb);
		r = ftrace_tracefs_write(t, "buffer_size_kb", v, ret_error);
		if (ret_ns)
			*ret_ns = now_ns(CLOCK_MONOTONIC) - t0;
		if (ret_kb)
			*ret_kb = t->resize_kb;
		if (r >= 0)
			t->cached_buffer_kb = t->resize_kb;
		t->resize_kb = 0;
		return r;
	}
	(void)pthread_join(w->thread, NULL);
	t->resize = NULL;
	t->resize_kb = 0;
	r = w->result;
	if (ret_kb)
		*ret_kb = w->kb;
	if (ret_ns)
		*ret_ns = w->ns;
	if (r >= 0)
		t->cached_buffer_kb = w->kb;
	else
		set_error_text(ret_error, strdup_printf("write %s to %s/buffer_size_kb: %s", w->value, t->path,
							strerror(-r)));
	(void)close(w->efd);
	free(w);
	return r;
}

void ftrace_tracefs_resize_join(struct ftrace_tracefs *t)
{
	struct ftrace_tracefs_resize *w = t->resize;

	t->resize_kb = 0;
	if (!w)
		return;
	(void)pthread_join(w->thread, NULL);
	t->resize = NULL;
	(void)close(w->efd);
	free(w);
}
