/* SPDX-License-Identifier: Apache-2.0 */
/*
 * event_source - what the loop waits on: creating sources, switching them
 * on and off (which is where io sources enter and leave the epoll set and
 * signals the signalfd mask), references, freeing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "event/event_internal.h"
#include "util/util.h"

static int source_new(struct event *e, struct event_source **ret, enum event_source_type type,
		      void *userdata, struct event_source **out)
{
	struct event_source *s;

	if (!e)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->n_ref = 1;
	s->e = e;
	s->type = type;
	s->enabled = EVENT_OFF;
	s->userdata = userdata;
	/* A source nobody holds belongs to the loop; one held keeps the loop. */
	s->floating = !ret;
	if (!s->floating)
		event_ref(e);
	s->next = e->sources;
	if (e->sources)
		e->sources->prev = s;
	e->sources = s;
	*out = s;
	return 0;
}

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
	r = source_new(e, ret, EVENT_SOURCE_IO, userdata, &s);
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
	r = source_new(e, ret, EVENT_SOURCE_TIME, userdata, &s);
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
	r = source_new(e, ret, EVENT_SOURCE_SIGNAL, userdata, &s);
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
	r = source_new(e, ret, EVENT_SOURCE_DEFER, userdata, &s);
	if (r < 0)
		return r;
	s->defer.cb = cb;
	return finish_new(s, ret, EVENT_ONESHOT);
}

int event_signal_update(struct event *e)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int fd;

	fd = signalfd(e->signal_fd >= 0 ? e->signal_fd : -1, &e->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (e->signal_fd >= 0)
		return 0;
	/* The signalfd is the one epoll entry without a source (data.ptr NULL). */
	if (epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int r = negative_errno();

		(void)close(fd);
		return r;
	}
	e->signal_fd = fd;
	return 0;
}

static int io_register(struct event_source *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	if (epoll_ctl(s->e->epoll_fd, s->io.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s->io.fd,
		      &ev) < 0)
		return negative_errno();
	s->io.registered = true;
	return 0;
}

static void io_unregister(struct event_source *s)
{
	if (!s->io.registered)
		return;
	/* The fd may be closed already: then the kernel dropped it for us. */
	(void)epoll_ctl(s->e->epoll_fd, EPOLL_CTL_DEL, s->io.fd, NULL);
	s->io.registered = false;
}

int event_source_set_enabled(struct event_source *s, int enabled)
{
	struct event *e;
	int r;

	if (!s || (enabled != EVENT_ON && enabled != EVENT_OFF && enabled != EVENT_ONESHOT))
		return -EINVAL;
	e = s->e;
	if (enabled == EVENT_OFF) {
		event_pending_remove(e, s);
		if (s->type == EVENT_SOURCE_IO) {
			io_unregister(s);
			s->io.revents = 0;
		}
	} else if (s->type == EVENT_SOURCE_IO && (s->enabled == EVENT_OFF || !s->io.registered)) {
		r = io_register(s, s->io.events);
		if (r < 0)
			return r;
	}
	if (s->type == EVENT_SOURCE_DEFER) {
		if (s->enabled == EVENT_OFF && enabled != EVENT_OFF)
			e->n_defer_on++;
		else if (s->enabled != EVENT_OFF && enabled == EVENT_OFF)
			e->n_defer_on--;
	}
	s->enabled = enabled;
	return 0;
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

int event_source_set_io_events(struct event_source *s, uint32_t events)
{
	int r;

	if (!s || s->type != EVENT_SOURCE_IO)
		return -EINVAL;
	if (s->io.registered && events != s->io.events) {
		r = io_register(s, events);
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

struct event *event_source_get_event(struct event_source *s)
{
	return s ? s->e : NULL;
}

struct event_source *event_source_ref(struct event_source *s)
{
	if (s)
		s->n_ref++;
	return s;
}

static void source_free(struct event_source *s)
{
	struct event *e = s->e;
	bool floating = s->floating;

	(void)event_source_set_enabled(s, EVENT_OFF);
	if (s->type == EVENT_SOURCE_SIGNAL && e->signals[s->signal.sig] == s) {
		e->signals[s->signal.sig] = NULL;
		(void)sigdelset(&e->sigmask, s->signal.sig);
		(void)event_signal_update(e);
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		e->sources = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s->description);
	free(s);
	if (!floating)
		(void)event_unref(e);
}

struct event_source *event_source_unref(struct event_source *s)
{
	if (s && --s->n_ref == 0)
		source_free(s);
	return NULL;
}

struct event_source *event_source_disable_unref(struct event_source *s)
{
	if (s)
		(void)event_source_set_enabled(s, EVENT_OFF);
	return event_source_unref(s);
}
