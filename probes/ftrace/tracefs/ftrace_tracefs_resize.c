/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ring-buffer resize of a directory, on a thread of its own.
 *
 * A write to buffer_size_kb makes the kernel reallocate every CPU's
 * buffer: tens of milliseconds for a few MiB, seconds for hundreds of MiB
 * or on a loaded machine.  A write to buffer_subbuf_size_kb does the same
 * (every CPU's buffer rebuilt in the new sub-buffers: 40-75 ms for 8 MiB
 * per CPU on 6.18).  On the loop thread either would stop every other
 * session's drain and the answers to the service for as long.  So the
 * first attach of a directory only plans them (their undo entries are
 * already persisted), and this thread does the writes: the sub-buffer
 * size first, since the kernel sizes the buffer in whole sub-buffers.
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
	int efd;                        /* written once when the writes returned */
	uint32_t kb;                    /* buffer_size_kb; 0: not planned */
	uint32_t subbuf_kb;             /* buffer_subbuf_size_kb; 0: not planned */
	int result;                     /* 0 or -errno, read after the join */
	int subbuf_result;
	uint64_t ns;                    /* how long the kernel took */
};

static void *resize_main(void *arg)
{
	struct ftrace_tracefs_resize *w = arg;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	char v[16];

	/* Through the directory's fd only: nothing else of the controller is touched. */
	if (w->subbuf_kb > 0) {
		(void)snprintf(v, sizeof(v), "%u", w->subbuf_kb);
		w->subbuf_result = ftrace_tracefs_write_at(w->dirfd, "buffer_subbuf_size_kb", v);
	}
	if (w->kb > 0) {
		(void)snprintf(v, sizeof(v), "%u", w->kb);
		w->result = ftrace_tracefs_buffer_kb_write_at(w->dirfd, v);
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

/*
 * Write the planned sub-buffer size.  The kernel reallocates every CPU's
 * buffer at its current size in the new sub-buffers (and drops what it
 * held: we have just cleared it).  A refusal is not fatal: the session
 * reads the kernel's sub-buffers, only at a higher cost per event.
 */
void ftrace_tracefs_subbuf_write(struct ftrace_tracefs *t, uint32_t kb)
{
	char *err = NULL;
	char v[16];
	int r;

	(void)snprintf(v, sizeof(v), "%u", kb);
	r = ftrace_tracefs_write(t, "buffer_subbuf_size_kb", v, &err);
	if (r >= 0)
		return;
	ftrace_tracefs_subbuf_refused(t, err ? err : strdup(strerror(-r)));
}

void ftrace_tracefs_subbuf_refused(struct ftrace_tracefs *t, char *why)
{
	/* The kernel kept its size (it restores the old one on failure): nothing to put back. */
	ftrace_tracefs_forget(t, "buffer_subbuf_size_kb");
	(void)ftrace_tracefs_persist(t);
	t->subbuf_outcome = FTRACE_SUBBUF_REFUSED;
	free(t->subbuf_error);
	t->subbuf_error = why;
}

bool ftrace_tracefs_resize_planned(const struct ftrace_tracefs *t)
{
	return (t->resize_kb > 0 || t->resize_subbuf_kb > 0) && !t->resize;
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
	if (t->resize_kb == 0 && t->resize_subbuf_kb == 0)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->dirfd = t->dirfd;
	w->kb = t->resize_kb;
	w->subbuf_kb = t->resize_subbuf_kb;
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

int ftrace_tracefs_resize_finish(struct ftrace_tracefs *t, struct ftrace_tracefs_resized *ret,
				 char **ret_error)
{
	struct ftrace_tracefs_resize *w = t->resize;
	uint64_t t0;
	int r = 0;

	*ret = (struct ftrace_tracefs_resized){ .buffer_kb = t->resize_kb, .subbuf_kb = t->resize_subbuf_kb };
	if (!w) {
		/* Planned and never started: write them here (a caller with no loop). */
		t0 = now_ns(CLOCK_MONOTONIC);
		if (t->resize_subbuf_kb > 0)
			ftrace_tracefs_subbuf_write(t, t->resize_subbuf_kb);
		if (t->resize_kb > 0) {
			char v[16];

			(void)snprintf(v, sizeof(v), "%u", t->resize_kb);
			r = ftrace_tracefs_write_buffer_kb(t, v, ret_error);
			if (r >= 0)
				t->cached_buffer_kb = t->resize_kb;
		}
		ret->ns = now_ns(CLOCK_MONOTONIC) - t0;
		ret->subbuf_refused = ret->subbuf_kb > 0 && t->subbuf_outcome == FTRACE_SUBBUF_REFUSED;
		t->resize_kb = 0;
		t->resize_subbuf_kb = 0;
		return r;
	}
	(void)pthread_join(w->thread, NULL);
	t->resize = NULL;
	t->resize_kb = 0;
	t->resize_subbuf_kb = 0;
	ret->buffer_kb = w->kb;
	ret->subbuf_kb = w->subbuf_kb;
	ret->ns = w->ns;
	if (w->subbuf_kb > 0 && w->subbuf_result < 0) {
		ftrace_tracefs_subbuf_refused(t, strdup_printf("write '%u' to %s/buffer_subbuf_size_kb: %s",
							       w->subbuf_kb, t->path, strerror(-w->subbuf_result)));
		ret->subbuf_refused = true;
	}
	r = w->result;
	if (w->kb > 0 && r >= 0)
		t->cached_buffer_kb = w->kb;
	else if (r < 0)
		set_error_text(ret_error, strdup_printf("write '%u' to %s/buffer_size_kb: %s", w->kb, t->path,
							strerror(-r)));
	(void)close(w->efd);
	free(w);
	return r;
}

void ftrace_tracefs_resize_join(struct ftrace_tracefs *t)
{
	struct ftrace_tracefs_resize *w = t->resize;

	t->resize_kb = 0;
	t->resize_subbuf_kb = 0;
	if (!w)
		return;
	(void)pthread_join(w->thread, NULL);
	t->resize = NULL;
	(void)close(w->efd);
	free(w);
}
