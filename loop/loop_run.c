/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop_run - the loop: wait in epoll_pwait2() until an fd is ready, a
 * signal arrives or the nearest timer is due, queue what is ready, dispatch
 * the oldest pending source.  Sources are few (tens), so timers and defer
 * sources are found by walking the list; no heap to keep in order.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop/loop_internal.h"
#include "util/util.h"

#define EPOLL_BATCH 64

/* The earliest deadline of an enabled timer not yet queued; UINT64_MAX: none. */
static uint64_t next_deadline(const struct loop *e)
{
	uint64_t t = UINT64_MAX;

	for (const struct loop_source *s = e->sources; s; s = s->next)
		if (s->type == LOOP_SOURCE_TIME && s->enabled != LOOP_OFF && !s->pending &&
		    s->time.usec < t)
			t = s->time.usec;
	return t;
}

static void read_signals(struct loop *e)
{
	struct signalfd_siginfo si;

	while (read(e->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		struct loop_source *s;

		if (si.ssi_signo >= _NSIG)
			continue;
		s = e->signals[si.ssi_signo];
		if (!s || s->enabled == LOOP_OFF)
			continue;
		s->signal.info = si;
		loop_pending_add(e, s);
	}
}

static void queue_timers(struct loop *e, uint64_t now)
{
	/* Due timers are queued earliest first. */
	for (;;) {
		struct loop_source *best = NULL;

		for (struct loop_source *s = e->sources; s; s = s->next)
			if (s->type == LOOP_SOURCE_TIME && s->enabled != LOOP_OFF && !s->pending &&
			    s->time.usec <= now && (!best || s->time.usec < best->time.usec))
				best = s;
		if (!best)
			return;
		loop_pending_add(e, best);
	}
}

static void queue_defers(struct loop *e)
{
	if (e->n_defer_on == 0)
		return;
	for (struct loop_source *s = e->sources; s; s = s->next)
		if (s->type == LOOP_SOURCE_DEFER && s->enabled != LOOP_OFF)
			loop_pending_add(e, s);
}

static int wait_events(struct loop *e, uint64_t timeout_usec)
{
	struct epoll_event evs[EPOLL_BATCH];
	struct timespec ts, *tsp = NULL;
	uint64_t deadline, now = loop_now_usec();
	int n;

	if (e->pending_head || e->n_defer_on > 0)
		timeout_usec = 0;
	deadline = next_deadline(e);
	if (deadline != UINT64_MAX)
		timeout_usec = MIN(timeout_usec, deadline > now ? deadline - now : 0);
	if (timeout_usec != UINT64_MAX) {
		ts.tv_sec = (time_t)(timeout_usec / 1000000u);
		ts.tv_nsec = (long)(timeout_usec % 1000000u) * 1000;
		tsp = &ts;
	}
	n = e->no_pwait2 ? -1 : epoll_pwait2(e->epoll_fd, evs, EPOLL_BATCH, tsp, NULL);
	if (n < 0 && (e->no_pwait2 || errno == ENOSYS)) {
		/* Kernels before 5.11: millisecond timeouts, rounded up. */
		e->no_pwait2 = true;
		n = epoll_wait(e->epoll_fd, evs, EPOLL_BATCH,
			       !tsp ? -1 : (int)MIN((timeout_usec + 999) / 1000, (uint64_t)INT32_MAX));
	}
	if (n < 0) {
		if (errno != EINTR)
			return negative_errno();
		n = 0;
	}
	/* Sources are queued before any handler runs: no pointer here goes stale. */
	for (int i = 0; i < n; i++) {
		struct loop_source *s = evs[i].data.ptr;

		if (!s) {
			read_signals(e);
			continue;
		}
		if (s->enabled == LOOP_OFF)
			continue;
		s->io.revents |= evs[i].events;
		loop_pending_add(e, s);
	}
	queue_timers(e, loop_now_usec());
	queue_defers(e);
	return 0;
}

static int dispatch(struct loop_source *s)
{
	uint32_t revents = 0;
	uint64_t usec = 0;
	int r;

	if (s->type == LOOP_SOURCE_IO) {
		revents = s->io.revents;
		s->io.revents = 0;
	}
	if (s->type == LOOP_SOURCE_TIME) {
		usec = s->time.usec;
		/* Re-armed before the handler, so a slow one does not shift the next tick. */
		if (s->time.period_ms)
			s->time.usec = loop_next_aligned_usec(s->time.period_ms);
	}
	if (s->enabled == LOOP_ONESHOT)
		(void)loop_source_set_enabled(s, LOOP_OFF);
	(void)loop_source_ref(s);
	switch (s->type) {
	case LOOP_SOURCE_IO:
		r = s->io.cb(s, s->io.fd, revents, s->userdata);
		break;
	case LOOP_SOURCE_TIME:
		r = s->time.cb(s, usec, s->userdata);
		break;
	case LOOP_SOURCE_SIGNAL:
		r = s->signal.cb(s, &s->signal.info, s->userdata);
		break;
	default:
		r = s->defer.cb(s, s->userdata);
		break;
	}
	/* As in sd-event: a failing handler switches its source off. */
	if (r < 0)
		(void)loop_source_set_enabled(s, LOOP_OFF);
	(void)loop_source_unref(s);
	return 1;
}

int loop_run_once(struct loop *e, uint64_t timeout_usec)
{
	struct loop_source *s;
	int r;

	if (!e)
		return -EINVAL;
	if (e->exit_requested)
		return 0;
	r = wait_events(e, timeout_usec);
	if (r < 0)
		return r;
	s = e->pending_head;
	if (!s)
		return 0;
	loop_pending_remove(e, s);
	if (s->enabled == LOOP_OFF)
		return 0;
	loop_ref(e);
	r = dispatch(s);
	loop_unref(e);
	return r;
}

int loop_run(struct loop *e)
{
	int r = 0;

	if (!e)
		return -EINVAL;
	loop_ref(e);
	while (!e->exit_requested) {
		r = loop_run_once(e, UINT64_MAX);
		if (r < 0)
			break;
	}
	if (r >= 0)
		r = e->exit_code;
	loop_unref(e);
	return r;
}

int loop_exit(struct loop *e, int code)
{
	if (!e)
		return -EINVAL;
	e->exit_requested = true;
	e->exit_code = code;
	return 0;
}
