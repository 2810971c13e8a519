/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * loop - the single-threaded event loop every part of the daemon runs on:
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

struct loop;
struct loop_source;

/* Values of loop_source_set_enabled(); ONESHOT turns OFF before the dispatch. */
enum {
	LOOP_OFF = 0,
	LOOP_ON = 1,
	LOOP_ONESHOT = -1,
};

typedef int (*loop_handler_t)(struct loop_source *s, void *userdata);
typedef int (*loop_io_handler_t)(struct loop_source *s, int fd, uint32_t revents, void *userdata);
typedef int (*loop_time_handler_t)(struct loop_source *s, uint64_t usec, void *userdata);
typedef int (*loop_signal_handler_t)(struct loop_source *s, const struct signalfd_siginfo *si,
				     void *userdata);

/**
 * loop_new() - create a loop.
 * @ret: the loop, one reference.
 *
 * Return: 0 or -errno.
 */
int loop_new(struct loop **ret);

/**
 * loop_default() - the calling thread's default loop, created on first use.
 * @ret: a new reference to it.
 *
 * Return: 0 or -errno.
 */
int loop_default(struct loop **ret);

/** loop_ref() - take a reference; NULL is passed through. */
struct loop *loop_ref(struct loop *e);

/**
 * loop_unref() - drop a reference.  Sources hold references of their own,
 * so the loop lives until its last source is gone too.
 *
 * Return: NULL.
 */
struct loop *loop_unref(struct loop *e);

/** loop_unrefp() - for _cleanup_(loop_unrefp). */
void loop_unrefp(struct loop **e);

/**
 * loop_add_io() - watch an fd (level-triggered).
 * @e: the loop.
 * @ret: the source, or NULL for one the loop owns until it is freed.
 * @fd: the fd; the caller keeps it open while the source exists.
 * @events: EPOLLIN, EPOLLOUT, ...
 * @cb: called with the ready events.
 * @userdata: passed to @cb.
 *
 * Return: 0 or -errno.
 */
int loop_add_io(struct loop *e, struct loop_source **ret, int fd, uint32_t events,
		loop_io_handler_t cb, void *userdata);

/**
 * loop_add_time() - a timer that fires once @usec (absolute, µs of @clock)
 * has passed; a ONESHOT source.  Re-arm it with loop_source_set_time() and
 * loop_source_set_enabled().
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
int loop_add_time(struct loop *e, struct loop_source **ret, clockid_t clock, uint64_t usec,
		  uint64_t accuracy, loop_time_handler_t cb, void *userdata);

/**
 * loop_add_time_relative() - loop_add_time() @usec from now.
 *
 * Return: 0 or -errno.
 */
int loop_add_time_relative(struct loop *e, struct loop_source **ret, clockid_t clock,
			   uint64_t usec, uint64_t accuracy, loop_time_handler_t cb,
			   void *userdata);

/**
 * loop_add_periodic() - a timer that fires on every multiple of
 * @period_ms on the wall clock (CLOCK_REALTIME), as Perfetto aligns its
 * polls: data sources with the same period tick together, and a trace
 * shows its samples at round times.  The loop re-arms the source to the
 * next multiple before it calls @cb, so a slow handler does not shift the
 * next tick; @cb may still move it with loop_source_set_time() (e.g. to
 * go again at once).  The source is LOOP_ON.
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
int loop_add_periodic(struct loop *e, struct loop_source **ret, uint32_t period_ms,
		      bool first_now, loop_time_handler_t cb, void *userdata);

/**
 * loop_next_aligned_usec() - the next multiple of @period_ms on the wall
 * clock, as a CLOCK_MONOTONIC deadline in µs (what loop_add_periodic()
 * arms).  Wall-clock milliseconds: the deadline is within 1 ms after the
 * multiple.
 * @period_ms: the period, > 0.
 *
 * Return: the deadline.
 */
uint64_t loop_next_aligned_usec(uint32_t period_ms);

/**
 * loop_add_signal() - deliver @sig through a signalfd.  The signal must be
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
int loop_add_signal(struct loop *e, struct loop_source **ret, int sig, loop_signal_handler_t cb,
		    void *userdata);

/**
 * loop_add_defer() - work run on every iteration while the source is on
 * (ONESHOT: once per enabling).  The loop does not sleep while one is on.
 * @e: the loop.
 * @ret: the source, or NULL for one the loop owns.
 * @cb: the work.
 * @userdata: passed to @cb.
 *
 * Return: 0 or -errno.
 */
int loop_add_defer(struct loop *e, struct loop_source **ret, loop_handler_t cb, void *userdata);

/**
 * loop_run_once() - one iteration: wait up to @timeout_usec (UINT64_MAX: no
 * limit) for something to happen, then dispatch one pending source.
 * @e: the loop.
 * @timeout_usec: longest wait.
 *
 * Return: 1 when a source was dispatched, 0 when none was (timeout or
 * exit requested), -errno when waiting failed.
 */
int loop_run_once(struct loop *e, uint64_t timeout_usec);

/**
 * loop_run() - run until loop_exit().
 *
 * Return: the code given to loop_exit(), or -errno.
 */
int loop_run(struct loop *e);

/**
 * loop_exit() - make loop_run() return @code once the current dispatch
 * is over.
 *
 * Return: 0 or -EINVAL.
 */
int loop_exit(struct loop *e, int code);

/** loop_source_ref() - take a reference; NULL is passed through. */
struct loop_source *loop_source_ref(struct loop_source *s);

/**
 * loop_source_unref() - drop a reference; the last one stops and frees
 * the source, also from inside its own handler.
 *
 * Return: NULL.
 */
struct loop_source *loop_source_unref(struct loop_source *s);

/**
 * loop_source_disable_unref() - turn @s off, then drop the caller's
 * reference: nothing dispatches it any more even if someone else holds one.
 *
 * Return: NULL.
 */
struct loop_source *loop_source_disable_unref(struct loop_source *s);

/**
 * loop_source_set_enabled() - LOOP_ON, LOOP_OFF or LOOP_ONESHOT.
 *
 * Return: 0 or -errno (epoll_ctl failures, for io sources).
 */
int loop_source_set_enabled(struct loop_source *s, int enabled);

/**
 * loop_source_set_time() - a timer's new deadline (absolute µs); a pending
 * dispatch is cancelled.
 *
 * Return: 0 or -EINVAL when @s is not a timer.
 */
int loop_source_set_time(struct loop_source *s, uint64_t usec);

/**
 * loop_source_set_time_relative() - a timer's new deadline, @usec from now.
 *
 * Return: 0 or -EINVAL.
 */
int loop_source_set_time_relative(struct loop_source *s, uint64_t usec);

/**
 * loop_source_set_period() - a periodic timer's new period; its next
 * deadline is the next multiple of it (a pending dispatch is cancelled).
 * A plain timer becomes periodic.
 *
 * Return: 0 or -EINVAL when @s is not a timer or @period_ms is 0.
 */
int loop_source_set_period(struct loop_source *s, uint32_t period_ms);

/**
 * loop_source_set_io_events() - the events an io source waits for.
 *
 * Return: 0 or -errno.
 */
int loop_source_set_io_events(struct loop_source *s, uint32_t events);

/**
 * loop_source_set_description() - a name for debugging (copied).
 *
 * Return: 0 or -ENOMEM.
 */
int loop_source_set_description(struct loop_source *s, const char *description);

/** loop_source_get_loop() - the loop of @s (no new reference). */
struct loop *loop_source_get_loop(struct loop_source *s);
