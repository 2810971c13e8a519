/* SPDX-License-Identifier: Apache-2.0 */
/*
 * event - the objects: a loop and its sources, their references and
 * lifetimes, and the state the loop reads when it waits: which sources are
 * on (io sources in the epoll set, signals in the signalfd mask) and which
 * are pending.  A loop frees the sources it owns and a source held by its
 * caller keeps its loop, so both lifetimes live in this one file; the loop
 * itself (event_loop.c) and the kinds of sources (event_source.c) sit on
 * top of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "event/event_internal.h"
#include "util/util.h"

static _Thread_local struct event *default_event;

uint64_t event_now_usec(void)
{
	return now_ns(CLOCK_MONOTONIC) / 1000u;
}

int event_new(struct event **ret)
{
	struct event *e;

	if (!ret)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->n_ref = 1;
	e->signal_fd = -EBADF;
	sigemptyset(&e->sigmask);
	e->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (e->epoll_fd < 0) {
		int r = negative_errno();

		free(e);
		return r;
	}
	*ret = e;
	return 0;
}

int event_default(struct event **ret)
{
	int r;

	if (!ret)
		return -EINVAL;
	if (default_event) {
		*ret = event_ref(default_event);
		return 0;
	}
	r = event_new(&default_event);
	if (r < 0)
		return r;
	*ret = default_event;
	return 0;
}

struct event *event_ref(struct event *e)
{
	if (e)
		e->n_ref++;
	return e;
}

static void event_free(struct event *e)
{
	/* Only floating sources are left: the others hold references. */
	while (e->sources) {
		struct event_source *s = e->sources;

		s->n_ref = 1;
		(void)event_source_unref(s);
	}
	if (e->signal_fd >= 0)
		(void)close(e->signal_fd);
	if (e->epoll_fd >= 0)
		(void)close(e->epoll_fd);
	if (default_event == e)
		default_event = NULL;
	free(e);
}

struct event *event_unref(struct event *e)
{
	if (!e)
		return NULL;
	if (--e->n_ref == 0)
		event_free(e);
	return NULL;
}

void event_unrefp(struct event **e)
{
	if (*e)
		*e = event_unref(*e);
}

void event_pending_add(struct event *e, struct event_source *s)
{
	if (s->pending)
		return;
	s->pending = true;
	s->pending_next = NULL;
	s->pending_prev = e->pending_tail;
	if (e->pending_tail)
		e->pending_tail->pending_next = s;
	else
		e->pending_head = s;
	e->pending_tail = s;
}

void event_pending_remove(struct event *e, struct event_source *s)
{
	if (!s->pending)
		return;
	if (s->pending_prev)
		s->pending_prev->pending_next = s->pending_next;
	else
		e->pending_head = s->pending_next;
	if (s->pending_next)
		s->pending_next->pending_prev = s->pending_prev;
	else
		e->pending_tail = s->pending_prev;
	s->pending = false;
	s->pending_next = s->pending_prev = NULL;
}

int event_source_link(struct event *e, struct event_source **ret, enum event_source_type type,
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

int event_source_io_register(struct event_source *s, uint32_t events)
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
		r = event_source_io_register(s, s->io.events);
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
