/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Test helpers for the real kernel: tracefs snapshots (to prove we leave it
 * as found), private instances, and a context-switch workload whose tids
 * are known.
 */

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <sys/types.h>

#include <check.h>

#define TP_TRACEFS "/sys/kernel/tracing"

/* true if root with tracefs mounted (mounting it if needed) */
bool tp_kernel_available(void);

/* tracing_on, set_event, buffer_size_kb, trace_clock, buffer_percent, current_tracer of @dir */
char *tp_tracefs_snapshot(const char *dir);
/*
 * Drops what no one can put back from the text of tracefs @file, in place:
 * an instance's buffer_size_kb may read "N (expanded: M)" until tracing is
 * first used, then "N".  (The top level's first expansion changes N too:
 * tp_kernel_available() takes that step before any snapshot.)
 */
void tp_tracefs_text_normalize(const char *file, char *text);

/* create /sys/kernel/tracing/instances/<name>; removed by tp_instance_remove or at exit */
int tp_instance_create(const char *name, char *ret_path, size_t len);
void tp_instance_remove(const char *name);

struct tp_workload {
	pid_t pid;          /* the workload process (tgid) */
	pid_t tids[64];
	size_t n_tids;
	char comm[16];
};

/*
 * Start @pairs pairs of threads (in a child process named @comm) that pass a
 * byte back and forth over pipes for @ms milliseconds: two context switches
 * and a wakeup per round trip on each pair.
 */
int tp_workload_start(const char *comm, unsigned pairs, unsigned ms, struct tp_workload *ret);
/* wait for it to finish; returns its exit status */
int tp_workload_wait(struct tp_workload *w);

/*
 * Stop it now (it runs until then, however long the recorder took to
 * start: tests stay meaningful on a loaded machine).  Returns 0 if it was
 * still running or had finished cleanly.
 */
int tp_workload_stop(struct tp_workload *w);

/* long enough to outlast any recording a test makes; stopped with tp_workload_stop() */
#define TP_WORKLOAD_UNTIL_STOPPED 120000u

/* ---- processes, for tests that run the daemon and the service ---------- */

/*
 * Polls @cond(@arg) every few ms until it holds or @ms have passed on
 * CLOCK_MONOTONIC: for state another process changes on its own schedule
 * that no fd reports (tracefs files, /proc).  Returns: whether it held.
 */
bool tp_wait_until(bool (*cond)(void *arg), void *arg, unsigned ms);

/* tp_wait_until() of a condition without an argument */
bool tp_wait_for(bool (*cond)(void), unsigned ms);

/*
 * Waiting on another process: how long it takes says nothing on a shared
 * machine (a loaded CPU, a slow tracefs write), so a wait ends when its
 * condition holds, or at once when a process it depends on has exited
 * (that is the failure, and its exit status says why), and otherwise only
 * after TP_WAIT_HANG_MS, a bound that catches a hang and measures no speed.
 */
#define TP_WAIT_HANG_MS 180000u

/* the processes a test's waits depend on, with names for the messages */
struct tp_watch {
	size_t n;
	pid_t pid[8];
	const char *name[8];
};

void tp_watch_add(struct tp_watch *w, const char *name, pid_t pid);
/* before stopping @pid on purpose: its exit is no longer a failure */
void tp_watch_drop(struct tp_watch *w, pid_t pid);
/*
 * True if a watched process has exited (it is left for tp_wait_exit() to
 * reap); @ret says which and how ("the daemon exited with status 1").
 */
bool tp_watch_exited(const struct tp_watch *w, char *ret, size_t len);

/*
 * Polls @cond(@arg) until it holds (0), a process of @w (may be NULL) has
 * exited (-ECHILD, described in @ret) or @ms have passed (-ETIMEDOUT).
 */
int tp_wait_until_or_exit(bool (*cond)(void *arg), void *arg, const struct tp_watch *w,
			  unsigned ms, char *ret, size_t len);

/*
 * The test-facing form: fails the test, with @what in the message, when a
 * process of @w exits first or nothing happens for TP_WAIT_HANG_MS.
 */
void tp_assert_wait(const struct tp_watch *w, bool (*cond)(void *arg), void *arg, const char *what);

/*
 * Waits for @pid (of @w or not) to exit and reaps it, failing the test with
 * @what after TP_WAIT_HANG_MS; returns its exit status, or 128 + signal.
 */
int tp_assert_exit(struct tp_watch *w, pid_t pid, const char *what);

/* conditions for tp_assert_wait() */
/* @instance_dir traces sched_switch with tracing_on (see tp_wait_recording()) */
bool tp_is_recording(void *instance_dir);
struct tp_read_events_goal {
	const char *dir;
	uint64_t n;
};
/* tp_read_events(goal->dir) >= goal->n */
bool tp_read_events_reached(void *goal);

/*
 * The number after the line key @key ("bytes: ", "overrun: "...) in
 * per_cpu/cpu@cpu/stats of @instance_dir, in *@ret.
 * Returns: 0, -ENOENT (no such CPU), -EBADMSG (no such line), -errno.
 */
int tp_cpu_stat(const char *instance_dir, unsigned cpu, const char *key, uint64_t *ret);

/*
 * "read events" of every per_cpu/cpuN/stats of @instance_dir, summed: the
 * events a reader has taken out of the ring buffer so far.
 */
uint64_t tp_read_events(const char *instance_dir);

/*
 * The "ctxt" line of /proc/stat: context switches on all CPUs since boot,
 * counted where the kernel emits sched_switch (0 if unreadable).
 */
uint64_t tp_context_switches(void);

/* waits until tp_read_events(@instance_dir) >= @n; true if within @ms */
bool tp_wait_read_events(const char *instance_dir, uint64_t n, unsigned ms);

/* waitpid; returns the exit status, or 128 + signal */
int tp_wait_exit(pid_t pid);

/*
 * waits until a session is recording in @instance_dir: sched_switch enabled
 * (setup, with tracing off) and then tracing_on (start).  Returns: true if so
 * within @ms.
 */
bool tp_wait_recording(const char *instance_dir, unsigned ms);

/* true if @instance_dir/set_event lists @event */
bool tp_event_enabled(const char *instance_dir, const char *event);

/*
 * tp-test-service on @sock recording @cfg (text) into @out; returns once it
 * listens.  @quiet sends its log to /dev/null.
 */
pid_t tp_spawn_service(const char *bin, const char *sock, const char *cfg, const char *out,
		       bool quiet);
/* the same with one more argument (e.g. "--relay"), or none when NULL */
pid_t tp_spawn_service_ex(const char *bin, const char *sock, const char *cfg, const char *out,
			  bool quiet, const char *extra_arg);

/* the daemon on @sock with its state in @state_dir; stderr to @stderr_fd if >= 0 */
pid_t tp_spawn_daemon(const char *bin, const char *sock, const char *state_dir, int stderr_fd,
		      const char *extra_arg);

/* SIGKILLs whatever tp_spawn_*() started (or tp_note_spawned() was told of) that was not waited for */
void tp_kill_spawned(void);
/* a child of the test's own making, for tp_kill_spawned() to kill if the test fails first */
void tp_note_spawned(pid_t pid);

/* runs @s in this process (fixtures keep their meaning), then removes @tmpdir */
int tp_run_suite(Suite *s, const char *tmpdir);

/*
 * A private tracefs instance plus snapshots of it and of the top level, so
 * a test can prove it left both exactly as it found them.
 */
struct tp_fixture {
	char instance[64];
	char path[256];
	char *top_before;
	char *inst_before;
};

/* creates "<prefix>-<pid>" and takes the snapshots; 0 or -errno */
int tp_fixture_setup(struct tp_fixture *f, const char *prefix);
void tp_fixture_teardown(struct tp_fixture *f);
/* tracefs byte-for-byte as at setup, top level and instance */
bool tp_fixture_restored(const struct tp_fixture *f);
/* The same, as a Check assertion comparing the texts, so a failure shows what changed. */
void tp_fixture_assert_restored(const struct tp_fixture *f);
/* "before X, after Y": the first line where snapshot a and b differ. */
void tp_first_difference(const char *a, const char *b, char *ret, size_t len);

/*
 * A workload started from a thread once @instance_dir traces sched_switch,
 * so that a recording's events come from a workload that ran while it was
 * on, however long the recorder took to start.
 */
struct tp_deferred_workload {
	pthread_t thread;
	char instance_dir[256];
	char comm[16];
	unsigned pairs;
	struct tp_workload w;
	int r;
	/*
	 * tp_context_switches() when the workload started (tracing was on)
	 * and once the recording stopped (0 if it never did): the kernel's
	 * own count of what a complete trace of the window holds, give or
	 * take a poll interval at the end.
	 */
	uint64_t ctxt_start, ctxt_end;
};

int tp_workload_start_deferred(struct tp_deferred_workload *d, const char *instance_dir,
			       const char *comm, unsigned pairs);
/* joins the thread and stops the workload; returns what tp_workload_start() returned */
int tp_workload_finish_deferred(struct tp_deferred_workload *d);
