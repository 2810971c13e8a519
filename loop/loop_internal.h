/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Shared by the files of loop/, bottom up: loop.c (the loop and source
 * objects: references, lifetimes, on/off, the pending queue),
 * loop_source.c (the kinds of sources) and loop_run.c (waiting and
 * dispatching).  The two upper files call loop.c only.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "loop/loop.h"

enum loop_source_type {
	LOOP_SOURCE_IO,
	LOOP_SOURCE_TIME,
	LOOP_SOURCE_SIGNAL,
	LOOP_SOURCE_DEFER,
};

struct loop_source {
	unsigned n_ref;
	struct loop *e;
	enum loop_source_type type;
	int enabled;
	bool floating;          /* owned by the loop, freed with it */
	bool pending;
	char *description;
	void *userdata;

	/* Every source of the loop, and the pending ones in dispatch order. */
	struct loop_source *next, *prev;
	struct loop_source *pending_next, *pending_prev;

	union {
		struct {
			loop_io_handler_t cb;
			int fd;
			uint32_t events, revents;
			bool registered;        /* in the epoll set */
		} io;
		struct {
			loop_time_handler_t cb;
			uint64_t usec;
			uint32_t period_ms;     /* periodic: re-armed before each dispatch; 0: not */
		} time;
		struct {
			loop_signal_handler_t cb;
			int sig;
			struct signalfd_siginfo info;
		} signal;
		struct {
			loop_handler_t cb;
		} defer;
	};
};

struct loop {
	unsigned n_ref;
	int epoll_fd;
	int signal_fd;          /* -EBADF until the first signal source */
	sigset_t sigmask;
	struct loop_source *signals[_NSIG];
	struct loop_source *sources;
	struct loop_source *pending_head, *pending_tail;
	unsigned n_defer_on;    /* enabled defer sources: the loop must not sleep */
	bool no_pwait2;         /* the kernel lacks epoll_pwait2() */
	bool exit_requested;
	int exit_code;
};

/* ---- loop.c ----------------------------------------------------------- */
uint64_t loop_now_usec(void);
void loop_pending_add(struct loop *e, struct loop_source *s);
void loop_pending_remove(struct loop *e, struct loop_source *s);
/* Point the signalfd at e->sigmask, creating it (and its epoll entry) first. */
int loop_signal_update(struct loop *e);
/* Allocate a source of @type, OFF, linked into @e's list; floating (owned by
 * the loop) when @ret is NULL, else it holds a reference on @e.  The caller
 * fills in the kind's fields and switches it on. */
int loop_source_link(struct loop *e, struct loop_source **ret, enum loop_source_type type,
		     void *userdata, struct loop_source **out);
/* Add @s's fd to the epoll set, or change its events there. */
int loop_source_io_register(struct loop_source *s, uint32_t events);
