/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/* Shared by the loop (event.c) and its sources (event_source.c). */
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

void event_pending_add(struct event *e, struct event_source *s);
void event_pending_remove(struct event *e, struct event_source *s);
int event_signal_update(struct event *e);
uint64_t event_now_usec(void);
