/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Shared by the files of event/, bottom up: event.c (the loop and source
 * objects: references, lifetimes, on/off, the pending queue),
 * event_source.c (the kinds of sources) and event_loop.c (waiting and
 * dispatching).  The two upper files call event.c only.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "event/event.h"

enum event_source_type {
	EVENT_SOURCE_IO,
	EVENT_SOURCE_TIME,
	EVENT_SOURCE_SIGNAL,
	EVENT_SOURCE_DEFER,
};

struct event_source {
	unsigned n_ref;
	struct event *e;
	enum event_source_type type;
	int enabled;
	bool floating;          /* owned by the loop, freed with it */
	bool pending;
	char *description;
	void *userdata;

	/* Every source of the loop, and the pending ones in dispatch order. */
	struct event_source *next, *prev;
	struct event_source *pending_next, *pending_prev;

	union {
		struct {
			event_io_handler_t cb;
			int fd;
			uint32_t events, revents;
			bool registered;        /* in the epoll set */
		} io;
		struct {
			event_time_handler_t cb;
			uint64_t usec;
			uint32_t period_ms;     /* periodic: re-armed before each dispatch; 0: not */
		} time;
		struct {
			event_signal_handler_t cb;
			int sig;
			struct signalfd_siginfo info;
		} signal;
		struct {
			event_handler_t cb;
		} defer;
	};
};

struct event {
	unsigned n_ref;
	int epoll_fd;
	int signal_fd;          /* -EBADF until the first signal source */
	sigset_t sigmask;
	struct event_source *signals[_NSIG];
	struct event_source *sources;
	struct event_source *pending_head, *pending_tail;
	unsigned n_defer_on;    /* enabled defer sources: the loop must not sleep */
	bool no_pwait2;         /* the kernel lacks epoll_pwait2() */
	bool exit_requested;
	int exit_code;
};

/* ---- event.c ----------------------------------------------------------- */
uint64_t event_now_usec(void);
void event_pending_add(struct event *e, struct event_source *s);
void event_pending_remove(struct event *e, struct event_source *s);
/* Point the signalfd at e->sigmask, creating it (and its epoll entry) first. */
int event_signal_update(struct event *e);
/* Allocate a source of @type, OFF, linked into @e's list; floating (owned by
 * the loop) when @ret is NULL, else it holds a reference on @e.  The caller
 * fills in the kind's fields and switches it on. */
int event_source_link(struct event *e, struct event_source **ret, enum event_source_type type,
		      void *userdata, struct event_source **out);
/* Add @s's fd to the epoll set, or change its events there. */
int event_source_io_register(struct event_source *s, uint32_t events);
