/* SPDX-License-Identifier: Apache-2.0 */
/*
 * event_source - the kinds of sources: creating an io, time, signal or
 * defer source, and the settings of each kind.  What all sources share
 * (references, on/off, the pending queue) is in event.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "event/event_internal.h"
#include "util/util.h"

static int finish_new(struct event_source *s, struct event_source **ret, int enabled)
{
	int r = event_source_set_enabled(s, enabled);

	if (r < 0) {
		(void)event_source_unref(s);
		return r;
	}
	if (ret)
		*ret = s;
	return 0;
}

int event_add_io(struct event *e, struct event_source **ret, int fd, uint32_t events,
		 event_io_handler_t cb, void *userdata)
{
	struct event_source *s;
	int r;

	if (fd < 0 || !cb)
		return -EINVAL;
	r = event_source_link(e, ret, EVENT_SOURCE_IO, userdata, &s);
	if (r < 0)
		return r;
	s->io.cb = cb;
	s->io.fd = fd;
	s->io.events = events;
	return finish_new(s, ret, EVENT_ON);
}

int event_add_time(struct event *e, struct event_source **ret, clockid_t clock, uint64_t usec,
		   uint64_t accuracy, event_time_handler_t cb, void *userdata)
{
	struct event_source *s;
	int r;

	if (!cb)
		return -EINVAL;
	if (clock != CLOCK_MONOTONIC)
		return -EOPNOTSUPP;
	r = event_source_link(e, ret, EVENT_SOURCE_TIME, userdata, &s);
	if (r < 0)
		return r;
	s->time.cb = cb;
	s->time.usec = usec;
	(void)accuracy;
	return finish_new(s, ret, EVENT_ONESHOT);
}

int event_add_time_relative(struct event *e, struct event_source **ret, clockid_t clock,
			    uint64_t usec, uint64_t accuracy, event_time_handler_t cb,
			    void *userdata)
{
	uint64_t now = event_now_usec();

	return event_add_time(e, ret, clock, usec > UINT64_MAX - now ? UINT64_MAX : now + usec,
			      accuracy, cb, userdata);
}

uint64_t event_next_aligned_usec(uint32_t period_ms)
{
	uint64_t wall_ms = now_ns(CLOCK_REALTIME) / 1000000u;
	uint64_t delay_ms = period_ms ? period_ms - wall_ms % period_ms : 0;

	return event_now_usec() + delay_ms * 1000u;
}

int event_add_periodic(struct event *e, struct event_source **ret, uint32_t period_ms,
		       bool first_now, event_time_handler_t cb, void *userdata)
{
	struct event_source *s;
	int r;

	if (!cb || period_ms == 0)
		return -EINVAL;
	r = event_source_link(e, ret, EVENT_SOURCE_TIME, userdata, &s);
	if (r < 0)
		return r;
	s->time.cb = cb;
	s->time.usec = first_now ? event_now_usec() : event_next_aligned_usec(period_ms);
	s->time.period_ms = period_ms;
	return finish_new(s, ret, EVENT_ON);
}

int event_add_signal(struct event *e, struct event_source **ret, int sig, event_signal_handler_t cb,
		     void *userdata)
{
	struct event_source *s;
	sigset_t cur;
	int r;

	if (!e || sig <= 0 || sig >= _NSIG || !cb)
		return -EINVAL;
	/* A signal that is not blocked would be delivered, not queued for the fd. */
	if (pthread_sigmask(SIG_SETMASK, NULL, &cur) != 0 || !sigismember(&cur, sig))
		return -EBUSY;
	if (e->signals[sig])
		return -EBUSY;
	r = event_source_link(e, ret, EVENT_SOURCE_SIGNAL, userdata, &s);
	if (r < 0)
		return r;
	s->signal.cb = cb;
	s->signal.sig = sig;
	e->signals[sig] = s;
	(void)sigaddset(&e->sigmask, sig);
	r = event_signal_update(e);
	if (r < 0) {
		(void)event_source_unref(s);
		return r;
	}
	return finish_new(s, ret, EVENT_ON);
}

int event_add_defer(struct event *e, struct event_source **ret, event_handler_t cb, void *userdata)
{
	struct event_source *s;
	int r;

	if (!cb)
		return -EINVAL;
	r = event_source_link(e, ret, EVENT_SOURCE_DEFER, userdata, &s);
	if (r < 0)
		return r;
	s->defer.cb = cb;
	return finish_new(s, ret, EVENT_ONESHOT);
}

int event_source_set_time(struct event_source *s, uint64_t usec)
{
	if (!s || s->type != EVENT_SOURCE_TIME)
		return -EINVAL;
	event_pending_remove(s->e, s);
	s->time.usec = usec;
	return 0;
}

int event_source_set_time_relative(struct event_source *s, uint64_t usec)
{
	uint64_t now = event_now_usec();

	return event_source_set_time(s, usec > UINT64_MAX - now ? UINT64_MAX : now + usec);
}

int event_source_set_period(struct event_source *s, uint32_t period_ms)
{
	if (!s || s->type != EVENT_SOURCE_TIME || period_ms == 0)
		return -EINVAL;
	event_pending_remove(s->e, s);
	s->time.period_ms = period_ms;
	s->time.usec = event_next_aligned_usec(period_ms);
	return 0;
}

int event_source_set_io_events(struct event_source *s, uint32_t events)
{
	int r;

	if (!s || s->type != EVENT_SOURCE_IO)
		return -EINVAL;
	if (s->io.registered && events != s->io.events) {
		r = event_source_io_register(s, events);
		if (r < 0)
			return r;
	}
	s->io.events = events;
	return 0;
}

int event_source_set_description(struct event_source *s, const char *description)
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

