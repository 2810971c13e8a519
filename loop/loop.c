/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop - the objects: a loop and its sources, their references and
 * lifetimes, and the state the loop reads when it waits: which sources are
 * on (io sources in the epoll set, signals in the signalfd mask) and which
 * are pending.  A loop frees the sources it owns and a source held by its
 * caller keeps its loop, so both lifetimes live in this one file; the loop
 * itself (loop_run.c) and the kinds of sources (loop_source.c) sit on
 * top of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop/loop_internal.h"
#include "util/util.h"

static _Thread_local struct loop *default_event;

uint64_t loop_now_usec(void)
{
	return now_ns(CLOCK_MONOTONIC) / 1000u;
}

int loop_new(struct loop **ret)
{
	struct loop *e;

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

int loop_default(struct loop **ret)
{
	int r;

	if (!ret)
		return -EINVAL;
	if (default_event) {
		*ret = loop_ref(default_event);
		return 0;
	}
	r = loop_new(&default_event);
	if (r < 0)
		return r;
	*ret = default_event;
	return 0;
}

struct loop *loop_ref(struct loop *e)
{
	if (e)
		e->n_ref++;
	return e;
}

static void loop_free(struct loop *e)
{
	/* Only floating sources are left: the others hold references. */
	while (e->sources) {
		struct loop_source *s = e->sources;

		s->n_ref = 1;
		(void)loop_source_unref(s);
	}
	if (e->signal_fd >= 0)
		(void)close(e->signal_fd);
	if (e->epoll_fd >= 0)
		(void)close(e->epoll_fd);
	if (default_event == e)
		default_event = NULL;
	free(e);
}

struct loop *loop_unref(struct loop *e)
{
	if (!e)
		return NULL;
	if (--e->n_ref == 0)
		loop_free(e);
	return NULL;
}

void loop_unrefp(struct loop **e)
{
	if (*e)
		*e = loop_unref(*e);
}

void loop_pending_add(struct loop *e, struct loop_source *s)
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

void loop_pending_remove(struct loop *e, struct loop_source *s)
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

int loop_source_link(struct loop *e, struct loop_source **ret, enum loop_source_type type,
		     void *userdata, struct loop_source **out)
{
	struct loop_source *s;

	if (!e)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->n_ref = 1;
	s->e = e;
	s->type = type;
	s->enabled = LOOP_OFF;
	s->userdata = userdata;
	/* A source nobody holds belongs to the loop; one held keeps the loop. */
	s->floating = !ret;
	if (!s->floating)
		loop_ref(e);
	s->next = e->sources;
	if (e->sources)
		e->sources->prev = s;
	e->sources = s;
	*out = s;
	return 0;
}

int loop_signal_update(struct loop *e)
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

int loop_source_io_register(struct loop_source *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	if (epoll_ctl(s->e->epoll_fd, s->io.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s->io.fd,
		      &ev) < 0)
		return negative_errno();
	s->io.registered = true;
	return 0;
}

static void io_unregister(struct loop_source *s)
{
	if (!s->io.registered)
		return;
	/* The fd may be closed already: then the kernel dropped it for us. */
	(void)epoll_ctl(s->e->epoll_fd, EPOLL_CTL_DEL, s->io.fd, NULL);
	s->io.registered = false;
}

int loop_source_set_enabled(struct loop_source *s, int enabled)
{
	struct loop *e;
	int r;

	if (!s || (enabled != LOOP_ON && enabled != LOOP_OFF && enabled != LOOP_ONESHOT))
		return -EINVAL;
	e = s->e;
	if (enabled == LOOP_OFF) {
		loop_pending_remove(e, s);
		if (s->type == LOOP_SOURCE_IO) {
			io_unregister(s);
			s->io.revents = 0;
		}
	} else if (s->type == LOOP_SOURCE_IO && (s->enabled == LOOP_OFF || !s->io.registered)) {
		r = loop_source_io_register(s, s->io.events);
		if (r < 0)
			return r;
	}
	if (s->type == LOOP_SOURCE_DEFER) {
		if (s->enabled == LOOP_OFF && enabled != LOOP_OFF)
			e->n_defer_on++;
		else if (s->enabled != LOOP_OFF && enabled == LOOP_OFF)
			e->n_defer_on--;
	}
	s->enabled = enabled;
	return 0;
}

struct loop *loop_source_get_loop(struct loop_source *s)
{
	return s ? s->e : NULL;
}

struct loop_source *loop_source_ref(struct loop_source *s)
{
	if (s)
		s->n_ref++;
	return s;
}

static void source_free(struct loop_source *s)
{
	struct loop *e = s->e;
	bool floating = s->floating;

	(void)loop_source_set_enabled(s, LOOP_OFF);
	if (s->type == LOOP_SOURCE_SIGNAL && e->signals[s->signal.sig] == s) {
		e->signals[s->signal.sig] = NULL;
		(void)sigdelset(&e->sigmask, s->signal.sig);
		(void)loop_signal_update(e);
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
		(void)loop_unref(e);
}

struct loop_source *loop_source_unref(struct loop_source *s)
{
	if (s && --s->n_ref == 0)
		source_free(s);
	return NULL;
}

struct loop_source *loop_source_disable_unref(struct loop_source *s)
{
	if (s)
		(void)loop_source_set_enabled(s, LOOP_OFF);
	return loop_source_unref(s);
}
