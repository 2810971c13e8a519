/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_start - start latency of linux.ftrace: from the service's
 * StartDataSource (a session started on the in-process service) to the
 * data source's NotifyDataSourceStarted (the service's "all data sources
 * started") and to the first event drained from the kernel, in an
 * instance of its own, optionally beside `stress-ng --switch 2`.
 *
 *   bench_start [-r runs] [-b buffer_size_kb] [-s]
 *
 * -s runs stress-ng --switch 2 for the whole bench.  Each run sets the
 * instance's buffer back to 1408 KiB first, so every setup resizes it.
 * Prints one line per run and the median; not a test: nothing is asserted.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "probes/ds/ds.h"
#include "probes/producer.h"
#include "protos/pbtxt.h"
#include "service/service.h"
#include "util/util.h"

#define POLL_USEC 1000ull
#define MAX_RUNS 64u

struct run {
	struct loop *e;
	struct svc *svc;
	const char *dir;
	uint64_t asked, acked, first;   /* CLOCK_MONOTONIC ns */
	uint64_t read_at_start;
	bool all_started, done;
};

static uint64_t read_events(const char *dir)
{
	uint64_t total = 0, v;

	for (unsigned cpu = 0; bench_cpu_stat(dir, cpu, "read events", &v) == 0; cpu++)
		total += v;
	return total;
}

static void on_all_started(struct svc_session *ss, void *userdata)
{
	struct run *t = userdata;

	t->acked = bench_mono_ns();
	t->all_started = true;
}

static void on_done(struct svc_session *ss, int error, void *userdata)
{
	struct run *t = userdata;

	t->done = true;
}

/* Polls only after the start was acked: a tracefs open waits for a resize in flight. */
static int poll_first(struct loop_source *src, uint64_t usec, void *userdata)
{
	struct run *t = userdata;

	if (t->all_started && !t->first && read_events(t->dir) > t->read_at_start) {
		t->first = bench_mono_ns();
		return 0;
	}
	(void)loop_source_set_time(src, usec + POLL_USEC);
	(void)loop_source_set_enabled(src, LOOP_ONESHOT);
	return 0;
}

int main(int argc, char **argv)
{
	const struct svc_session_hooks hooks = { .done = on_done, .all_started = on_all_started };
	unsigned runs = 5, buffer_kb = 0;
	uint64_t ack_ms[MAX_RUNS], first_ms[MAX_RUNS];
	char name[64], dir[512], state[] = "/tmp/bench-start-XXXXXX", text[1024], err[256];
	struct bench_child stress = { 0 };
	bool with_stress = false;
	void **shared = NULL;
	struct producer *p = NULL;
	struct run t = {};
	int opt, sv[2], r;

	while ((opt = getopt(argc, argv, "r:b:s")) != -1) {
		if (opt == 'r')
			runs = (unsigned)MIN(strtoul(optarg, NULL, 10), (unsigned long)MAX_RUNS);
		else if (opt == 'b')
			buffer_kb = (unsigned)strtoul(optarg, NULL, 10);
		else if (opt == 's')
			with_stress = true;
		else
			return 2;
	}
	if (runs == 0 || bench_tracefs_ready() < 0 || !mkdtemp(state)) {
		fprintf(stderr, "bench_start: needs root and tracefs\n");
		return 77;
	}
	snprintf(name, sizeof(name), "bench-start-%d", (int)getpid());
	if (bench_instance_create(name, dir, sizeof(dir)) < 0)
		return 1;
	t.dir = dir;
	if (with_stress) {
		char *const args[] = { "stress-ng", "--switch", "2", "--quiet", NULL };

		if (bench_spawn(args, false, &stress) < 0) {
			fprintf(stderr, "bench_start: cannot run stress-ng\n");
			goto out;
		}
	}
	snprintf(text, sizeof(text),
		 "buffers { size_kb: 8192 fill_policy: DISCARD }\n"
		 "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		 "  ftrace_config { ftrace_events: \"sched/sched_switch\" instance_name: \"%s\" buffer_size_kb: %u } } }\n"
		 "duration_ms: 100000\n",
		 name, buffer_kb);

	setenv("TRACED_PROBES_STATE_DIR", state, 1);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || loop_new(&t.e) < 0 ||
	    svc_new(t.e, NULL, &t.svc) < 0 || svc_adopt_connection(t.svc, sv[1]) < 0 ||
	    ds_shared_new_all(t.e, &shared) < 0 || producer_new(t.e, ds_registry, shared, NULL, NULL, &p) < 0 ||
	    producer_adopt_fd(p, sv[0]) < 0)
		goto out;
	while (!svc_data_source_registered(t.svc, "linux.ftrace"))
		if (loop_run_once(t.e, UINT64_MAX) < 0)
			goto out;

	for (unsigned i = 0; i < runs; i++) {
		ProtobufCMessage *cfg = NULL;
		struct svc_session *ss = NULL;
		struct loop_source *poll = NULL;
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		(void)bench_file_write(dir, "buffer_size_kb", "1408", false);
		r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), &cfg, err, sizeof(err));
		if (r < 0 || fd < 0) {
			fprintf(stderr, "bench_start: %s\n", err);
			goto out;
		}
		t.all_started = t.done = false;
		t.first = 0;
		t.read_at_start = read_events(dir);
		t.asked = bench_mono_ns();
		r = svc_session_start(t.svc, (Perfetto__Protos__TraceConfig *)cfg, fd, &hooks, &t, &ss);
		if (r >= 0)
			r = loop_add_time_relative(t.e, &poll, CLOCK_MONOTONIC, POLL_USEC, 0, poll_first, &t);
		while (r >= 0 && !t.first)
			r = loop_run_once(t.e, UINT64_MAX);
		poll = loop_source_unref(poll);
		ack_ms[i] = (t.acked - t.asked) / 1000000;
		first_ms[i] = t.first ? (t.first - t.asked) / 1000000 : UINT64_MAX;
		printf("run %u: StartDataSource -> started %llu ms, -> first drained event %llu ms\n", i,
		       (unsigned long long)ack_ms[i], (unsigned long long)first_ms[i]);
		if (ss && svc_session_stop(ss) >= 0)
			while (!t.done && loop_run_once(t.e, UINT64_MAX) >= 0)
				;
		ss = svc_session_free(ss);
		protobuf_c_message_free_unpacked(cfg, NULL);
		close(fd);
		if (r < 0)
			goto out;
	}
	qsort(ack_ms, runs, sizeof(ack_ms[0]), bench_cmp_u64);
	qsort(first_ms, runs, sizeof(first_ms[0]), bench_cmp_u64);
	printf("median of %u (buffer_size_kb %u%s): started %llu ms, first drained event %llu ms\n", runs,
	       buffer_kb, with_stress ? ", stress-ng --switch 2" : "", (unsigned long long)ack_ms[runs / 2],
	       (unsigned long long)first_ms[runs / 2]);

out:
	p = producer_free(p);
	shared = ds_shared_free_all(shared);
	t.svc = svc_free(t.svc);
	t.e = loop_unref(t.e);
	if (with_stress && stress.pid > 0) {
		bench_child_signal(&stress, SIGTERM);
		(void)bench_child_finish(&stress, NULL, NULL, NULL, 0);
	}
	(void)bench_instance_remove(name);
	(void)rmdir(state);
	return 0;
}
