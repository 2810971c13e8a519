/* SPDX-License-Identifier: Apache-2.0 */
/* The event loop (loop/). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop/loop.h"
#include "loop/loop_internal.h"
#include "util/util.h"

struct rec {
	char log[64];
	size_t n;
	uint32_t revents;
	int ret;                        /* what handlers return */
	struct loop_source *victim;    /* freed by the first handler that runs */
	struct loop_source **victim_ref;
};

static void rec_add(struct rec *r, char c)
{
	if (r->n + 1 < sizeof(r->log))
		r->log[r->n++] = c;
	r->log[r->n] = '\0';
}

static int on_io(struct loop_source *s, int fd, uint32_t revents, void *userdata)
{
	struct rec *r = userdata;
	uint64_t v;

	rec_add(r, 'i');
	r->revents = revents;
	(void)read(fd, &v, sizeof(v));
	if (r->victim_ref && *r->victim_ref)
		*r->victim_ref = loop_source_disable_unref(*r->victim_ref);
	return r->ret;
}

static int on_time_a(struct loop_source *s, uint64_t usec, void *userdata)
{
	rec_add(userdata, 'a');
	return 0;
}

static int on_time_b(struct loop_source *s, uint64_t usec, void *userdata)
{
	rec_add(userdata, 'b');
	return 0;
}

static int on_defer(struct loop_source *s, void *userdata)
{
	struct rec *r = userdata;

	rec_add(r, 'd');
	return r->ret;
}

static int on_defer_exit(struct loop_source *s, void *userdata)
{
	rec_add(userdata, 'x');
	return loop_exit(loop_source_get_loop(s), 42);
}

static int on_signal(struct loop_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct rec *r = userdata;

	rec_add(r, 's');
	r->revents = si->ssi_signo;
	return 0;
}

static int on_self_unref(struct loop_source *s, void *userdata)
{
	struct loop_source **self = userdata;

	*self = loop_source_disable_unref(*self);
	return 0;
}

/* Runs until nothing more is dispatched within @ms. */
static void run_idle(struct loop *e, unsigned ms)
{
	while (loop_run_once(e, (uint64_t)ms * 1000) > 0)
		;
}

START_TEST(test_io)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct loop_source *s = NULL;
	struct rec r = {};
	uint64_t one = 1;
	int efd;

	ck_assert_int_eq(loop_new(&e), 0);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(efd, 0);
	ck_assert_int_eq(loop_add_io(e, &s, efd, EPOLLIN, on_io, &r), 0);
	ck_assert_int_eq(loop_run_once(e, 1000), 0); /* nothing ready: times out */
	ck_assert_int_eq(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	ck_assert_int_eq(loop_run_once(e, 1000000), 1);
	ck_assert_str_eq(r.log, "i");
	ck_assert_uint_eq(r.revents & EPOLLIN, EPOLLIN);

	/* ONESHOT: once, then off until enabled again */
	ck_assert_int_eq(loop_source_set_enabled(s, LOOP_ONESHOT), 0);
	ck_assert_int_eq(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	ck_assert_int_eq(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	run_idle(e, 10);
	ck_assert_str_eq(r.log, "ii");
	ck_assert_int_eq(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	run_idle(e, 10);
	ck_assert_str_eq(r.log, "ii");
	ck_assert_int_eq(loop_source_set_enabled(s, LOOP_ON), 0);
	run_idle(e, 10);
	ck_assert_str_eq(r.log, "iii");

	/* a failing handler switches its source off */
	r.ret = -EIO;
	ck_assert_int_eq(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	run_idle(e, 10);
	ck_assert_int_eq(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	run_idle(e, 10);
	ck_assert_str_eq(r.log, "iiii");

	/* EPOLLOUT through set_io_events */
	r.ret = 0;
	ck_assert_int_eq(loop_source_set_io_events(s, EPOLLOUT), 0);
	ck_assert_int_eq(loop_source_set_enabled(s, LOOP_ONESHOT), 0);
	ck_assert_int_eq(loop_run_once(e, 1000000), 1);
	ck_assert_uint_eq(r.revents & EPOLLOUT, EPOLLOUT);

	s = loop_source_disable_unref(s);
	ck_assert_ptr_null(s);
	close(efd);
}
END_TEST

/* a due after @a_us, b a third of that: b fires first although added after. */
static void run_two_timers(struct loop *e, struct loop_source **a, struct loop_source **b,
			   struct rec *r, uint64_t a_us)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);

	ck_assert_int_eq(loop_add_time_relative(e, a, CLOCK_MONOTONIC, a_us, 0, on_time_a, r), 0);
	ck_assert_int_eq(loop_add_time_relative(e, b, CLOCK_MONOTONIC, a_us / 3, 0, on_time_b, r), 0);
	while (r->n < 2)
		ck_assert_int_ge(loop_run_once(e, 1000000), 0);
	ck_assert_str_eq(r->log, "ba");
	ck_assert_uint_ge(now_ns(CLOCK_MONOTONIC) - t0, a_us * 1000);
}

START_TEST(test_time_order_and_rearm)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct loop_source *a = NULL, *b = NULL;
	struct rec r = {};

	ck_assert_int_eq(loop_new(&e), 0);
	run_two_timers(e, &a, &b, &r, 30000);
	/* timers are ONESHOT: nothing more */
	run_idle(e, 50);
	ck_assert_str_eq(r.log, "ba");

	/* re-armed in the past: due at once; a moved deadline cancels a pending one */
	ck_assert_int_eq(loop_source_set_time(a, 1), 0);
	ck_assert_int_eq(loop_source_set_enabled(a, LOOP_ONESHOT), 0);
	ck_assert_int_eq(loop_run_once(e, 1000000), 1);
	ck_assert_str_eq(r.log, "baa");
	ck_assert_int_eq(loop_source_set_time_relative(b, 3600ull * 1000000), 0);
	ck_assert_int_eq(loop_source_set_enabled(b, LOOP_ONESHOT), 0);
	ck_assert_int_eq(loop_run_once(e, 20000), 0);
	ck_assert_str_eq(r.log, "baa");

	ck_assert_int_eq(loop_add_time(e, NULL, CLOCK_REALTIME, 0, 0, on_time_a, &r), -EOPNOTSUPP);
	a = loop_source_disable_unref(a);
	b = loop_source_disable_unref(b);
}
END_TEST

/* Where a deadline falls on the wall clock, in µs past a multiple of @period_ms. */
static uint64_t wall_phase_usec(uint64_t deadline_usec, uint32_t period_ms)
{
	uint64_t mono = now_ns(CLOCK_MONOTONIC) / 1000u;
	uint64_t wall = now_ns(CLOCK_REALTIME) / 1000u;

	return (wall + deadline_usec - mono) % ((uint64_t)period_ms * 1000u);
}

struct ticks {
	unsigned n;
	uint64_t deadline[4];
	uint64_t armed[4];      /* the next deadline, as the handler sees it */
};

static int on_tick(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct ticks *t = userdata;

	if (t->n < 4) {
		t->deadline[t->n] = usec;
		t->armed[t->n] = s->time.usec;
	}
	t->n++;
	return 0;
}

/*
 * A periodic timer: first tick at once on request, then on the wall-clock
 * multiples of the period, re-armed before its handler runs.  The checks
 * use the deadlines, not the moments of dispatch, so a loaded machine does
 * not make them flaky; the slack covers the wall clock's ms rounding and
 * the two clock reads.
 */
START_TEST(test_periodic_aligned)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct loop_source *p = NULL;
	struct ticks t = {};
	uint64_t d, t0 = now_ns(CLOCK_MONOTONIC) / 1000u;

	d = loop_next_aligned_usec(40);
	ck_assert_uint_ge(d, t0);
	ck_assert_uint_le(d, t0 + 40000 + 2000);
	ck_assert_uint_lt((wall_phase_usec(d, 40) + 2000) % 40000, 4000);

	ck_assert_int_eq(loop_new(&e), 0);
	ck_assert_int_eq(loop_add_periodic(e, NULL, 0, true, on_tick, &t), -EINVAL);
	ck_assert_int_eq(loop_add_periodic(e, &p, 20, /* first_now= */ true, on_tick, &t), 0);
	while (t.n < 3)
		ck_assert_int_ge(loop_run_once(e, 1000000), 0);
	/* the first tick is a posted task: due when it was added */
	ck_assert_uint_le(t.deadline[0], now_ns(CLOCK_MONOTONIC) / 1000u);
	ck_assert_uint_ge(t.deadline[0], t0);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_uint_gt(t.armed[i], t.deadline[i]);
		ck_assert_uint_lt((wall_phase_usec(t.armed[i], 20) + 2000) % 20000, 4000);
	}
	for (unsigned i = 1; i < 3; i++)
		ck_assert_uint_eq(t.deadline[i], t.armed[i - 1]);

	/* a new period re-aligns; the handler may still move the next tick */
	ck_assert_int_eq(loop_source_set_period(p, 0), -EINVAL);
	ck_assert_int_eq(loop_source_set_period(p, 30), 0);
	ck_assert_uint_lt((wall_phase_usec(p->time.usec, 30) + 2000) % 30000, 4000);
	ck_assert_int_eq(loop_source_set_time(p, 1), 0);
	t.n = 0;
	ck_assert_int_eq(loop_run_once(e, 1000000), 1);
	ck_assert_uint_eq(t.n, 1);
	ck_assert_uint_eq(t.deadline[0], 1);
	ck_assert_uint_lt((wall_phase_usec(t.armed[0], 30) + 2000) % 30000, 4000);

	/* off stays off */
	ck_assert_int_eq(loop_source_set_enabled(p, LOOP_OFF), 0);
	run_idle(e, 50);
	ck_assert_uint_eq(t.n, 1);
	p = loop_source_disable_unref(p);
}
END_TEST

/* Kernels without epoll_pwait2(): millisecond waits, same order. */
START_TEST(test_epoll_wait_fallback)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct loop_source *a = NULL, *b = NULL;
	struct rec r = {};

	ck_assert_int_eq(loop_new(&e), 0);
	e->no_pwait2 = true;
	run_two_timers(e, &a, &b, &r, 20500);
	ck_assert_int_eq(loop_run_once(e, 1500), 0); /* a sub-millisecond wait still returns */
	a = loop_source_disable_unref(a);
	b = loop_source_disable_unref(b);
}
END_TEST

START_TEST(test_defer_and_exit)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct loop_source *d = NULL, *x = NULL;
	struct rec r = {};

	ck_assert_int_eq(loop_new(&e), 0);
	/* defer sources start ONESHOT */
	ck_assert_int_eq(loop_add_defer(e, &d, on_defer, &r), 0);
	run_idle(e, 10);
	ck_assert_str_eq(r.log, "d");
	/* ON: every iteration, and the loop does not sleep meanwhile */
	ck_assert_int_eq(loop_source_set_enabled(d, LOOP_ON), 0);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(loop_run_once(e, 10ull * 1000000), 1);
	ck_assert_str_eq(r.log, "dddddd");
	ck_assert_int_eq(loop_source_set_enabled(d, LOOP_OFF), 0);
	ck_assert_int_eq(loop_run_once(e, 1000), 0);

	/* loop_run() returns the exit code */
	ck_assert_int_eq(loop_add_defer(e, &x, on_defer_exit, &r), 0);
	ck_assert_int_eq(loop_run(e), 42);
	ck_assert_str_eq(r.log, "ddddddx");
	ck_assert_int_eq(loop_run_once(e, 1000), 0); /* exit requested: nothing runs */
	d = loop_source_disable_unref(d);
	x = loop_source_disable_unref(x);
}
END_TEST

START_TEST(test_signal)
{
	_cleanup_(loop_unrefp) struct loop *e = NULL;
	struct loop_source *s = NULL;
	struct rec r = {};
	sigset_t mask, old;

	ck_assert_int_eq(loop_new(&e), 0);
	/* not blocked: it would be delivered, not read */
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR2);
	ck_assert_int_eq(pthread_sigmask(SIG_UNBLOCK, &mask, NULL), 0);
	ck_assert_int_eq(loop_add_signal(e, NULL, SIGUSR2, on_signal, &r), -EBUSY);

	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &mask, &old), 0);
	ck_assert_int_eq(loop_add_signal(e, &s, SIGUSR1, on_signal, &r), 0);
	ck_assert_int_eq(loop_add_signal(e, NULL, SIGUSR1, on_signal, &r), -EBUSY);
	ck_assert_int_eq(kill(getpid(), SIGUSR1), 0);
	ck_assert_int_eq(loop_run_once(e, 1000000), 1);
	ck_assert_str_eq(r.log, "s");
	ck_assert_uint_eq(r.revents, SIGUSR1);
	/* gone with its source: a new one can be added */
	s = loop_source_disable_unref(s);
	ck_assert_int_eq(loop_add_signal(e, NULL, SIGUSR1, on_signal, &r), 0);
	ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
}
END_TEST

START_TEST(test_free_while_pending)
{
	struct loop *e = NULL;
	struct loop_source *a = NULL, *b = NULL, *self = NULL;
	struct rec ra = {}, rb = {};
	uint64_t one = 1;
	int fa, fb;

	ck_assert_int_eq(loop_new(&e), 0);
	fa = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fb = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(fa, 0);
	ck_assert_int_ge(fb, 0);
	ck_assert_int_eq(loop_add_io(e, &a, fa, EPOLLIN, on_io, &ra), 0);
	ck_assert_int_eq(loop_add_io(e, &b, fb, EPOLLIN, on_io, &rb), 0);
	/* both ready in one poll; whichever runs first frees the other */
	ra.victim_ref = &b;
	rb.victim_ref = &a;
	ck_assert_int_eq(write(fa, &one, sizeof(one)), (ssize_t)sizeof(one));
	ck_assert_int_eq(write(fb, &one, sizeof(one)), (ssize_t)sizeof(one));
	run_idle(e, 10);
	ck_assert_uint_eq(ra.n + rb.n, 1);
	ck_assert(!a != !b);

	/* a source freeing itself from its own handler */
	ck_assert_int_eq(loop_add_defer(e, &self, on_self_unref, &self), 0);
	run_idle(e, 10);
	ck_assert_ptr_null(self);

	/* a floating source goes with the loop; the held one keeps the loop alive */
	ck_assert_int_eq(loop_add_defer(e, NULL, on_defer, &ra), 0);
	a = loop_source_disable_unref(a);
	e = loop_unref(e);
	b = loop_source_disable_unref(b);
	close(fa);
	close(fb);
}
END_TEST

static void *default_in_thread(void *arg)
{
	struct loop *e = NULL;

	if (loop_default(&e) < 0)
		return NULL;
	*(struct loop **)arg = e;
	(void)loop_unref(e);
	return NULL;
}

START_TEST(test_default_per_thread)
{
	struct loop *a = NULL, *b = NULL, *t = NULL;
	pthread_t th;

	ck_assert_int_eq(loop_default(&a), 0);
	ck_assert_int_eq(loop_default(&b), 0);
	ck_assert_ptr_eq(a, b);
	ck_assert_int_eq(pthread_create(&th, NULL, default_in_thread, &t), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_ne(t, a);
	(void)loop_unref(b);
	(void)loop_unref(a);
}
END_TEST

static Suite *loop_suite(void)
{
	Suite *s = suite_create("loop");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_io);
	tcase_add_test(tc, test_time_order_and_rearm);
	tcase_add_test(tc, test_periodic_aligned);
	tcase_add_test(tc, test_epoll_wait_fallback);
	tcase_add_test(tc, test_defer_and_exit);
	tcase_add_test(tc, test_signal);
	tcase_add_test(tc, test_free_while_pending);
	tcase_add_test(tc, test_default_per_thread);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(loop_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
