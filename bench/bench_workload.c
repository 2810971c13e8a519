/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_workload - pairs of threads bouncing one byte over two pipes.  The
 * densest source of sched_switch/sched_waking there is, with no package to
 * install, and it measures itself: round trips per second is the figure a
 * tracer slows down.  Both threads of a pair share one CPU (pair i on the
 * i-th allowed CPU): wakeups stay local, so the rate does not swing with
 * where the scheduler happens to put the threads or with the cost of
 * cross-CPU wakeups in a VM, and a tracer's CPU time shows as slowdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/util.h"

struct bench_pair {
	struct bench_workload *w;
	int ping[2];                    /* a -> b */
	int pong[2];                    /* b -> a */
	pthread_t a, b;
	bool a_started, b_started;
	uint64_t trips;
};

struct bench_workload {
	atomic_bool stop;
	unsigned n_pairs;
	uint64_t start_ns;
	struct bench_pair *pairs;
};

static void *pinger(void *arg)
{
	struct bench_pair *p = arg;
	char c = 0;

	(void)pthread_setname_np(pthread_self(), "bench-ping");
	while (!atomic_load_explicit(&p->w->stop, memory_order_relaxed)) {
		if (write(p->ping[1], &c, 1) != 1 || read(p->pong[0], &c, 1) != 1)
			break;
		p->trips++;
	}
	/* EOF is how the partner learns to stop. */
	(void)close(p->ping[1]);
	p->ping[1] = -EBADF;
	return NULL;
}

static void *ponger(void *arg)
{
	struct bench_pair *p = arg;
	char c;

	(void)pthread_setname_np(pthread_self(), "bench-pong");
	while (read(p->ping[0], &c, 1) == 1)
		if (write(p->pong[1], &c, 1) != 1)
			break;
	return NULL;
}

static void close_pair(struct bench_pair *p)
{
	int *fds[] = { &p->ping[0], &p->ping[1], &p->pong[0], &p->pong[1] };

	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			(void)close(*fds[i]);
			*fds[i] = -EBADF;
		}
}

void bench_workload_stop(struct bench_workload *w, uint64_t *ret_trips, uint64_t *ret_ns)
{
	uint64_t trips = 0, ns;

	if (!w)
		return;
	atomic_store(&w->stop, true);
	for (unsigned i = 0; i < w->n_pairs; i++) {
		struct bench_pair *p = &w->pairs[i];

		if (p->a_started)
			(void)pthread_join(p->a, NULL);
		else if (p->ping[1] >= 0) {
			(void)close(p->ping[1]);
			p->ping[1] = -EBADF;
		}
		if (p->b_started)
			(void)pthread_join(p->b, NULL);
		trips += p->trips;
	}
	ns = now_ns(CLOCK_MONOTONIC) - w->start_ns;
	for (unsigned i = 0; i < w->n_pairs; i++)
		close_pair(&w->pairs[i]);
	free(w->pairs);
	free(w);
	if (ret_trips)
		*ret_trips = trips;
	if (ret_ns)
		*ret_ns = ns;
}

int bench_workload_start(unsigned pairs, struct bench_workload **ret)
{
	struct bench_workload *w;
	cpu_set_t allowed;
	unsigned n_allowed;
	int r = 0;

	if (pairs == 0)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->pairs = calloc(pairs, sizeof(*w->pairs));
	if (!w->pairs) {
		free(w);
		return -ENOMEM;
	}
	w->n_pairs = pairs;
	for (unsigned i = 0; i < pairs; i++) {
		struct bench_pair *p = &w->pairs[i];

		p->w = w;
		p->ping[0] = p->ping[1] = p->pong[0] = p->pong[1] = -EBADF;
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		CPU_ZERO(&allowed);
	n_allowed = (unsigned)CPU_COUNT(&allowed);
	w->start_ns = now_ns(CLOCK_MONOTONIC);
	for (unsigned i = 0; i < pairs && r == 0; i++) {
		struct bench_pair *p = &w->pairs[i];
		pthread_attr_t attr;

		if (pipe2(p->ping, O_CLOEXEC) < 0 || pipe2(p->pong, O_CLOEXEC) < 0) {
			r = negative_errno();
			break;
		}
		r = -pthread_attr_init(&attr);
		if (r < 0)
			break;
		if (n_allowed > 0) {
			unsigned want = i % n_allowed, seen = 0;
			cpu_set_t one;

			CPU_ZERO(&one);
			for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
				if (CPU_ISSET(cpu, &allowed) && seen++ == want) {
					CPU_SET(cpu, &one);
					break;
				}
			(void)pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
		}
		r = -pthread_create(&p->b, &attr, ponger, p);
		if (r >= 0) {
			p->b_started = true;
			r = -pthread_create(&p->a, &attr, pinger, p);
			p->a_started = r >= 0;
		}
		(void)pthread_attr_destroy(&attr);
	}
	if (r < 0) {
		bench_workload_stop(w, NULL, NULL);
		return r;
	}
	*ret = w;
	return 0;
}
