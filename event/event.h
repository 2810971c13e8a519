/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * event - the single-threaded event loop every part of the daemon runs on:
 * fd readiness, CLOCK_MONOTONIC timers, signals (signalfd) and deferred
 * work.  The API and its semantics follow sd-event, the loop this code was
 * first written against: sources are reference counted, ON / OFF /
 * ONESHOT, a handler returning < 0 turns its source off, one pending source
 * is dispatched per iteration, oldest first.
 *
 * Why not sd-event itself: linking libsystemd maps it and the six
 * libraries it needs (gcrypt, gpg-error, zstd, lzma, lz4, cap), about
 * 1.1 MiB of resident pages in a daemon whose own working set is well under
 * that.  The loop needs a few hundred lines of epoll.
 *
 * A loop and its sources belong to one thread.  Other threads wake it
 * through an fd (an eventfd with an io source).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>

struct event;
struct event_source;

/* Values of event_source_set_enabled(); ONESHOT turns OFF before the dispatch. */
enum {
	EVENT_OFF = 0,
	EVENT_ON = 1,
	EVENT_ONESHOT = -1,
};

typedef int (*event_handler_t)(struct event_source *s, void *userdata);
typedef int (*event_io_handler_t)(struct event_source *s, int fd, uint32_t revents, void *userdata);
typedef int (*event_time_handler_t)(struct event_source *s, uint64_t usec, void *userdata);
typedef int (*event_signal_handler_t)(struct event_source *s, const struct signalfd_siginfo *si,
				      void *userdata);

/**
 * event_new() - create a loop.
 * @ret: the loop, one reference.
 *
 * Return: 0 or -errno.
 */
int event_new(struct event **ret);

/**
 * event_default() - the calling thread's default loop, created on first use.
 * @ret: a new reference to it.
 *
 * Return: 0 or -errno.
 */
int event_default(struct event **ret);

/** event_ref() - take a reference; NULL is passed through. */
struct event *event_ref(struct event *e);

/**
 * event_unref() - drop a reference.  Sources hold references of their own,
 * so the loop lives until its last source is gone too.
 *
 * Return: NULL.
 */
struct event *event_unref(struct event *e);

/** event_unrefp() - for _cleanup_(event_unrefp). */
void event_unrefp(struct event **e);

/**
 * event_add_io() - watch an fd (level-triggered).
 * @e: the loop.
 * @ret: the source, or NULL for one the loop owns until it is freed.
 * @fd: the fd; the caller keeps it open while the source exists.
 * @events: EPOLLIN, EPOLLOUT, ...
 * @cb: called with the ready events.
 * @userdata: passed to @cb.
 *
 * Return: 0 or -errno.
 */
int event_add_io(struct event *e, struct event_source **ret, int fd, uint32_t events,
		 event_io_handler_t cb, void *userdata);

/**
 * event_add_time() - a timer that fires once @usec (absolute, µs of @clock)
 * has passed; a ONESHOT source.  Re-arm it with event_source_set_time() and
 * event_source_set_enabled().
 * @e: the loop.
 * @ret: the source, or NULL for one the loop owns.
 * @clock: CLOCK_MONOTONIC (the only clock supported: -EOPNOTSUPP otherwise).
 * @usec: the deadline.
 * @accuracy: ignored (kept for the sd-event signature).
 * @cb: called with the deadline.
 * @userdata: passed to @cb.
 *
 * Return: 0 or -errno.
 */
int event_add_time(struct event *e, struct event_source **ret, clockid_t clock, uint64_t usec,
		   uint64_t accuracy, event_time_handler_t cb, void *userdata);

/**
 * event_add_time_relative() - event_add_time() @usec from now.
 *
 * Return: 0 or -errno.
 */
int event_add_time_relative(struct event *e, struct event_source **ret, clockid_t clock,
			    uint64_t usec, uint64_t accuracy, event_time_handler_t cb,
			    void *userdata);

/**
 * event_add_periodic() - a timer that fires on every multiple of
 * @period_ms on the wall clock (CLOCK_REALTIME), as Perfetto aligns its
 * polls: data sources with the same period tick together, and a trace
 * shows its samples at round times.  The loop re-arms the source to the
 * next multiple before it calls @cb, so a slow handler does not shift the
 * next tick; @cb may still move it with event_source_set_time() (e.g. to
 * go again at once).  The source is EVENT_ON.
 * @e: the loop.
 * @ret: the source, or NULL for one the loop owns.
 * @period_ms: the period, > 0.
 * @first_now: true: the first dispatch is on the next iteration (a posted
 *	task); false: at the first multiple.
 * @cb: called with the deadline that fired.
 * @userdata: passed to @cb.
 *
 * Return: 0 or -errno.
 */
int event_add_periodic(struct event *e, struct event_source **ret, uint32_t period_ms,
		       bool first_now, event_time_handler_t cb, void *userdata);

/**
 * event_next_aligned_usec() - the next multiple of @period_ms on the wall
 * clock, as a CLOCK_MONOTONIC deadline in µs (what event_add_periodic()
 * arms).  Wall-clock milliseconds: the deadline is within 1 ms after the
 * multiple.
 * @period_ms: the period, > 0.
 *
 * Return: the deadline.
 */
uint64_t event_next_aligned_usec(uint32_t period_ms);

/**
 * event_add_signal() - deliver @sig through a signalfd.  The signal must be
 * blocked in the calling thread (-EBUSY otherwise), and one source per
 * signal per loop (-EBUSY).
 * @e: the loop.
 * @ret: the source, or NULL for one the loop owns.
 * @sig: the signal.
 * @cb: called with its siginfo.
 * @userdata: passed to @cb.
 *
 * Return: 0 or -errno.
 */
int event_add_signal(struct event *e, struct event_source **ret, int sig, event_signal_handler_t cb,
		     void *userdata);

/**
 * event_add_defer() - work run on every iteration while the source is on
 * (ONESHOT: once per enabling).  The loop does not sleep while one is on.
 * @e: the loop.
 * @ret: the source, or NULL for one the loop owns.
 * @cb: the work.
 * @userdata: passed to @cb.
 *
 * Return: 0 or -errno.
 */
int event_add_defer(struct event *e, struct event_source **ret, event_handler_t cb, void *userdata);

/**
 * event_run() - one iteration: wait up to @timeout_usec (UINT64_MAX: no
 * limit) for something to happen, then dispatch one pending source.
 * @e: the loop.
 * @timeout_usec: longest wait.
 *
 * Return: 1 when a source was dispatched, 0 when none was (timeout or
 * exit requested), -errno when waiting failed.
 */
int event_run(struct event *e, uint64_t timeout_usec);

/**
 * event_loop() - run until event_exit().
 *
 * Return: the code given to event_exit(), or -errno.
 */
int event_loop(struct event *e);

/**
 * event_exit() - make event_loop() return @code once the current dispatch
 * is over.
 *
 * Return: 0 or -EINVAL.
 */
int event_exit(struct event *e, int code);

/** event_source_ref() - take a reference; NULL is passed through. */
struct event_source *event_source_ref(struct event_source *s);

/**
 * event_source_unref() - drop a reference; the last one stops and frees
 * the source, also from inside its own handler.
 *
 * Return: NULL.
 */
struct event_source *event_source_unref(struct event_source *s);

/**
 * event_source_disable_unref() - turn @s off, then drop the caller's
 * reference: nothing dispatches it any more even if someone else holds one.
 *
 * Return: NULL.
 */
struct event_source *event_source_disable_unref(struct event_source *s);

/**
 * event_source_set_enabled() - EVENT_ON, EVENT_OFF or EVENT_ONESHOT.
 *
 * Return: 0 or -errno (epoll_ctl failures, for io sources).
 */
int event_source_set_enabled(struct event_source *s, int enabled);

/**
 * event_source_set_time() - a timer's new deadline (absolute µs); a pending
 * dispatch is cancelled.
 *
 * Return: 0 or -EINVAL when @s is not a timer.
 */
int event_source_set_time(struct event_source *s, uint64_t usec);

/**
 * event_source_set_time_relative() - a timer's new deadline, @usec from now.
 *
 * Return: 0 or -EINVAL.
 */
int event_source_set_time_relative(struct event_source *s, uint64_t usec);

/**
 * event_source_set_period() - a periodic timer's new period; its next
 * deadline is the next multiple of it (a pending dispatch is cancelled).
 * A plain timer becomes periodic.
 *
 * Return: 0 or -EINVAL when @s is not a timer or @period_ms is 0.
 */
int event_source_set_period(struct event_source *s, uint32_t period_ms);

/**
 * event_source_set_io_events() - the events an io source waits for.
 *
 * Return: 0 or -errno.
 */
int event_source_set_io_events(struct event_source *s, uint32_t events);

/**
 * event_source_set_description() - a name for debugging (copied).
 *
 * Return: 0 or -ENOMEM.
 */
int event_source_set_description(struct event_source *s, const char *description);

/** event_source_get_event() - the loop of @s (no new reference). */
struct event *event_source_get_event(struct event_source *s);
