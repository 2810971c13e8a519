/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop_source - the kinds of sources: creating an io, time, signal or
 * defer source, and the settings of each kind.  What all sources share
 * (references, on/off, the pending queue) is in loop.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "loop/loop_internal.h"
#include "util/util.h"

static int finish_new(struct loop_source *s, struct loop_source **ret, int enabled)
{
	int r = loop_source_set_enabled(s, enabled);

	if (r < 0) {
		(void)loop_source_unref(s);
		return r;
	}
	if (ret)
		*ret = s;
	return 0;
}

int loop_add_io(struct loop *e, struct loop_source **ret, int fd, uint32_t events,
		loop_io_handler_t cb, void *userdata)
{
	struct loop_source *s;
	int r;

	if (fd < 0 || !cb)
		return -EINVAL;
	r = loop_source_link(e, ret, LOOP_SOURCE_IO, userdata, &s);
	if (r < 0)
		return r;
	s->io.cb = cb;
	s->io.fd = fd;
	s->io.events = events;
	return finish_new(s, ret, LOOP_ON);
}

int loop_add_time(struct loop *e, struct loop_source **ret, clockid_t clock, uint64_t usec,
		  uint64_t accuracy, loop_time_handler_t cb, void *userdata)
{
	struct loop_source *s;
	int r;

	if (!cb)
		return -EINVAL;
	if (clock != CLOCK_MONOTONIC)
		return -EOPNOTSUPP;
	r = loop_source_link(e, ret, LOOP_SOURCE_TIME, userdata, &s);
	if (r < 0)
		return r;
	s->time.cb = cb;
	s->time.usec = usec;
	(void)accuracy;
	return finish_new(s, ret, LOOP_ONESHOT);
}

int loop_add_time_relative(struct loop *e, struct loop_source **ret, clockid_t clock,
			   uint64_t usec, uint64_t accuracy, loop_time_handler_t cb,
			   void *userdata)
{
	uint64_t now = loop_now_usec();

	return loop_add_time(e, ret, clock, usec > UINT64_MAX - now ? UINT64_MAX : now + usec,
			     accuracy, cb, userdata);
}

uint64_t loop_next_aligned_usec(uint32_t period_ms)
{
	uint64_t wall_ms = now_ns(CLOCK_REALTIME) / 1000000u;
	uint64_t delay_ms = period_ms ? period_ms - wall_ms % period_ms : 0;

	return loop_now_usec() + delay_ms * 1000u;
}

int loop_add_periodic(struct loop *e, struct loop_source **ret, uint32_t period_ms,
		      bool first_now, loop_time_handler_t cb, void *userdata)
{
	struct loop_source *s;
	int r;

	if (!cb || period_ms == 0)
		return -EINVAL;
	r = loop_source_link(e, ret, LOOP_SOURCE_TIME, userdata, &s);
	if (r < 0)
		return r;
	s->time.cb = cb;
	s->time.usec = first_now ? loop_now_usec() : loop_next_aligned_usec(period_ms);
	s->time.period_ms = period_ms;
	return finish_new(s, ret, LOOP_ON);
}

int loop_add_signal(struct loop *e, struct loop_source **ret, int sig, loop_signal_handler_t cb,
		    void *userdata)
{
	struct loop_source *s;
	sigset_t cur;
	int r;

	if (!e || sig <= 0 || sig >= _NSIG || !cb)
		return -EINVAL;
	/* A signal that is not blocked would be delivered, not queued for the fd. */
	if (pthread_sigmask(SIG_SETMASK, NULL, &cur) != 0 || !sigismember(&cur, sig))
		return -EBUSY;
	if (e->signals[sig])
		return -EBUSY;
	r = loop_source_link(e, ret, LOOP_SOURCE_SIGNAL, userdata, &s);
	if (r < 0)
		return r;
	s->signal.cb = cb;
	s->signal.sig = sig;
	e->signals[sig] = s;
	(void)sigaddset(&e->sigmask, sig);
	r = loop_signal_update(e);
	if (r < 0) {
		(void)loop_source_unref(s);
		return r;
	}
	return finish_new(s, ret, LOOP_ON);
}

int loop_add_defer(struct loop *e, struct loop_source **ret, loop_handler_t cb, void *userdata)
{
	struct loop_source *s;
	int r;

	if (!cb)
		return -EINVAL;
	r = loop_source_link(e, ret, LOOP_SOURCE_DEFER, userdata, &s);
	if (r < 0)
		return r;
	s->defer.cb = cb;
	return finish_new(s, ret, LOOP_ONESHOT);
}

int loop_source_set_time(struct loop_source *s, uint64_t usec)
{
	if (!s || s->type != LOOP_SOURCE_TIME)
		return -EINVAL;
	loop_pending_remove(s->e, s);
	s->time.usec = usec;
	return 0;
}

int loop_source_set_time_relative(struct loop_source *s, uint64_t usec)
{
	uint64_t now = loop_now_usec();

	return loop_source_set_time(s, usec > UINT64_MAX - now ? UINT64_MAX : now + usec);
}

int loop_source_set_period(struct loop_source *s, uint32_t period_ms)
{
	if (!s || s->type != LOOP_SOURCE_TIME || period_ms == 0)
		return -EINVAL;
	loop_pending_remove(s->e, s);
	s->time.period_ms = period_ms;
	s->time.usec = loop_next_aligned_usec(period_ms);
	return 0;
}

int loop_source_set_io_events(struct loop_source *s, uint32_t events)
{
	int r;

	if (!s || s->type != LOOP_SOURCE_IO)
		return -EINVAL;
	if (s->io.registered && events != s->io.events) {
		r = loop_source_io_register(s, events);
		if (r < 0)
			return r;
	}
	s->io.events = events;
	return 0;
}

int loop_source_set_description(struct loop_source *s, const char *description)
{
	char *d = NULL;

	if (!s)
		return -EINVAL;
	if (description) {
		d = strdup(description);
		if (!d)
			return -ENOMEM;
	}
	free(s->description);
	s->description = d;
	return 0;
}

