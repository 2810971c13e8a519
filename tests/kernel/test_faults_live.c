/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Faults: the service killed and restarted 100 times under a running
 * daemon (every reconnect made, no fd leaked, tracefs restored each time);
 * the daemon itself SIGKILLed mid-recording while it maps the ring buffer
 * (the next start puts tracefs back and says so, and read() works on the
 * buffer again); the recorder's disk filling up (an error, and no file
 * that looks complete); tracefs not mounted (mounted again, in a private
 * mount namespace).
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/recorder.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

#define RESTARTS 100

static char tmpdir[] = "/tmp/tp-faults-XXXXXX";
static char bin_daemon[4096], bin_service[4096];
static struct tp_fixture fx;
static char sock[512], state_dir[512];
/* the daemon and service of the running test: a wait ends when one exits (tp_assert_wait()) */
static struct tp_watch watch;

static void setup(void)
{
	memset(&watch, 0, sizeof(watch));
	ck_assert_int_eq(tp_fixture_setup(&fx, "tp-faults"), 0);
	snprintf(sock, sizeof(sock), "%s/producer.sock", tmpdir);
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
}

/* the small disk of test_recorder_disk_full, while mounted */
static char small_mnt[600];

/* Runs after a failed assertion too (the suite runs without fork). */
static void teardown(void)
{
	tp_fixture_teardown(&fx);
	if (small_mnt[0]) {
		(void)umount2(small_mnt, MNT_DETACH);
		small_mnt[0] = '\0';
	}
}

static bool tracefs_restored(void)
{
	return tp_fixture_restored(&fx);
}

static bool restored(void *unused)
{
	return tracefs_restored();
}

static bool tracing_in_instance(void *unused)
{
	return tp_event_enabled(fx.path, "sched_switch");
}

/* until the daemon has taken @n more events out of the instance than now */
static void wait_read_events(uint64_t n, const char *what)
{
	struct tp_read_events_goal g = { .dir = fx.path, .n = tp_read_events(fx.path) + n };

	tp_assert_wait(&watch, tp_read_events_reached, &g, what);
}

static void write_config(const char *path, unsigned duration_ms, unsigned buffer_kb)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "buffers { size_kb: 4096 fill_policy: DISCARD }\n"
		   "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		   "  ftrace_config { ftrace_events: \"sched/sched_switch\" buffer_size_kb: %u "
		   "instance_name: \"%s\" } } }\n"
		   "duration_ms: %u\n",
		buffer_kb, fx.instance, duration_ms);
	fclose(f);
}

static pid_t g_daemon;

/* trace_pipe_raw has an mmap on Linux 6.10 and later. */
static bool kernel_maps_ring_buffers(void)
{
	char path[700];
	bool ok;
	void *m;
	int fd;

	snprintf(path, sizeof(path), "%s/per_cpu/cpu0/trace_pipe_raw", fx.path);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	m = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
	ok = m != MAP_FAILED;
	if (ok)
		(void)munmap(m, (size_t)sysconf(_SC_PAGESIZE));
	close(fd);
	return ok;
}

static bool daemon_maps_buffer(void *unused)
{
	_cleanup_free_ char *maps = NULL;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)g_daemon);
	if (read_full_file_at(AT_FDCWD, path, 1 << 22, &maps, NULL) < 0)
		return false;
	return strstr(maps, "trace_pipe_raw") != NULL;
}

/* A marker written on CPU 0 comes back through read() of cpu0's trace_pipe_raw. */
/* The instance's buffer_subbuf_size_kb, -1 on a kernel without it. */
static int subbuf_kb(void)
{
	_cleanup_free_ char *v = NULL;
	char path[700];
	int32_t kb;

	snprintf(path, sizeof(path), "%s/buffer_subbuf_size_kb", fx.path);
	if (read_full_file_at(AT_FDCWD, path, 64, &v, NULL) < 0)
		return -1;
	v[strcspn(v, "\n")] = 0;
	return safe_atoi32(v, &kb) < 0 ? -1 : kb;
}

static bool buffer_readable_by_read(void)
{
	char path[700];
	uint8_t page[65536];
	cpu_set_t old, one;
	ssize_t k = -1;
	int fd, mk;

	snprintf(path, sizeof(path), "%s/trace_marker", fx.path);
	mk = open(path, O_WRONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/per_cpu/cpu0/trace_pipe_raw", fx.path);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (mk >= 0 && fd >= 0 && sched_getaffinity(0, sizeof(old), &old) == 0) {
		CPU_ZERO(&one);
		CPU_SET(0, &one);
		if (sched_setaffinity(0, sizeof(one), &one) == 0 &&
		    write(mk, "tp-after-kill", 13) == 13)
			k = read(fd, page, sizeof(page));
		(void)sched_setaffinity(0, sizeof(old), &old);
	}
	if (mk >= 0)
		close(mk);
	if (fd >= 0)
		close(fd);
	return k > 0 && memmem(page, (size_t)k, "tp-after-kill", 13) != NULL;
}

static pid_t spawn_service(const char *cfg, const char *out)
{
	pid_t pid = tp_spawn_service(bin_service, sock, cfg, out, true);

	ck_assert_int_gt(pid, 0);
	tp_watch_add(&watch, "the service", pid);
	return pid;
}

static pid_t spawn_daemon(int stderr_fd, const char *extra)
{
	pid_t pid = tp_spawn_daemon(bin_daemon, sock, state_dir, stderr_fd, extra);

	ck_assert_int_gt(pid, 0);
	tp_watch_add(&watch, "the daemon", pid);
	return pid;
}

static unsigned count_fds(pid_t pid)
{
	char path[64];
	unsigned n = 0;
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(test_service_restarted_100_times)
{
	char cfg[600], out[600];
	unsigned fds_before = 0, fds_after;
	pid_t daemon;

	snprintf(cfg, sizeof(cfg), "%s/long.pbtxt", tmpdir);
	snprintf(out, sizeof(out), "%s/killed.pftrace", tmpdir);
	write_config(cfg, 600000, 64);
	daemon = spawn_daemon(-1, NULL);
	for (int i = 0; i < RESTARTS; i++) {
		pid_t svc = spawn_service(cfg, out);
		char what[64];

		snprintf(what, sizeof(what), "cycle %d: no reconnect", i);
		tp_assert_wait(&watch, tracing_in_instance, NULL, what);
		if (i == 0) {
			/* draining: per-CPU readers and timers open */
			wait_read_events(1, "the daemon never read an event");
			fds_before = count_fds(daemon);
		}
		tp_watch_drop(&watch, svc);
		ck_assert_int_eq(kill(svc, SIGKILL), 0);
		ck_assert_int_eq(tp_wait_exit(svc), 128 + SIGKILL);
		snprintf(what, sizeof(what), "cycle %d: tracefs not restored", i);
		tp_assert_wait(&watch, restored, NULL, what);
	}
	/* connected once more, as in the first cycle */
	{
		pid_t svc = spawn_service(cfg, out);

		tp_assert_wait(&watch, tracing_in_instance, NULL, "no reconnect after the last cycle");
		wait_read_events(1, "the daemon never read an event after the last cycle");
		fds_after = count_fds(daemon);
		tp_watch_drop(&watch, svc);
		ck_assert_int_eq(kill(svc, SIGKILL), 0);
		(void)tp_wait_exit(svc);
	}
	ck_assert_uint_gt(fds_before, 0);
	/* one fd leaked per restart would show as a hundred more; allow for a
	 * connection attempt in flight at either count */
	ck_assert_msg(fds_after <= fds_before + 2, "fds: %u before, %u after %d restarts", fds_before,
		      fds_after, RESTARTS);
	tp_assert_wait(&watch, restored, NULL, "tracefs not restored after the last cycle");
	/* under the sanitizer build a leak makes this exit non-zero */
	ck_assert_int_eq(kill(daemon, SIGTERM), 0);
	ck_assert_int_eq(tp_assert_exit(&watch, daemon, "the daemon did not exit on SIGTERM"), 0);
	ck_assert(tracefs_restored());
}
END_TEST

START_TEST(test_daemon_sigkill_recovered)
{
	char cfg[600], out[600], log_path[600];
	_cleanup_free_ char *log = NULL;
	pid_t svc, daemon;
	int log_fd;
	bool maps;

	snprintf(cfg, sizeof(cfg), "%s/sigkill.pbtxt", tmpdir);
	snprintf(out, sizeof(out), "%s/sigkill.pftrace", tmpdir);
	snprintf(log_path, sizeof(log_path), "%s/recover.log", tmpdir);
	/* 2 MiB: large enough for the default sub-buffers (a 32nd of it) */
	write_config(cfg, 600000, 2048);
	/*
	 * Asked before the daemon starts: the probe maps the buffer, and a
	 * mapping while the daemon sets its sub-buffer size makes the kernel
	 * refuse it (EBUSY).
	 */
	maps = kernel_maps_ring_buffers();
	svc = spawn_service(cfg, out);
	/* The daemon reads through the ring buffer's mapping where the kernel
	 * has one (asked for: it is off by default). */
	(void)setenv("TRACED_PROBES_FTRACE_MMAP", "1", 1);
	daemon = spawn_daemon(-1, NULL);
	(void)unsetenv("TRACED_PROBES_FTRACE_MMAP");
	tp_assert_wait(&watch, tracing_in_instance, NULL, "the daemon never started tracing");
	/* Wait until it maps, so that the kill hits a mapped reader. */
	g_daemon = daemon;
	if (maps)
		tp_assert_wait(&watch, daemon_maps_buffer, NULL, "no trace_pipe_raw mapping");
	/* Its sub-buffers (Linux 6.8+) are the default size; put back below. */
	if (subbuf_kb() >= 0)
		ck_assert_int_eq(subbuf_kb(), FTRACE_SUBBUF_DEFAULT_KB);
	/* no chance to clean up: tracefs stays changed */
	tp_watch_drop(&watch, daemon);
	ck_assert_int_eq(kill(daemon, SIGKILL), 0);
	ck_assert_int_eq(tp_wait_exit(daemon), 128 + SIGKILL);
	ck_assert(!tracefs_restored());
	tp_watch_drop(&watch, svc);
	ck_assert_int_eq(kill(svc, SIGKILL), 0);
	(void)tp_wait_exit(svc);

	/* the next start puts back what the killed run found, and says so */
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(log_fd, 0);
	daemon = spawn_daemon(log_fd, "--cleanup-after-crash");
	close(log_fd);
	ck_assert_int_eq(tp_assert_exit(&watch, daemon, "the cleanup did not finish"), 0);
	ck_assert(tracefs_restored());
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, log_path, 1 << 16, &log, NULL), 0);
	ck_assert_msg(strstr(log, "Restored") != NULL, "log: %s", log);
	/* The kernel dropped the killed daemon's mapping with the process: the
	 * buffer was resized back (restored above, EBUSY while mapped), and
	 * read() takes pages from it again. */
	ck_assert_msg(buffer_readable_by_read(), "ring buffer not readable by read() after the kill");
}
END_TEST

struct disk_full_goal {
	pid_t recorder;
	struct tp_read_events_goal events;
};

/* The recorder stopped on its own (the disk filled), or it has had enough events. */
static bool recorder_full_or_done(void *arg)
{
	struct disk_full_goal *g = arg;
	siginfo_t si = { 0 };

	if (waitid(P_PID, (id_t)g->recorder, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == g->recorder)
		return true;
	return tp_read_events_reached(&g->events);
}

START_TEST(test_recorder_disk_full)
{
	char mnt[600], out[700];
	struct tp_workload w;
	DIR *d;
	struct dirent *de;
	unsigned files = 0;
	pid_t pid;
	int status;

	/*
	 * 16 KiB of disk, and a recording that stops when it fills it, or is
	 * stopped (Ctrl-C) once the kernel handed out more events than fit in
	 * it (7.4 bytes each): the outcome must not depend on how fast a busy
	 * machine runs the workload.
	 */
	snprintf(mnt, sizeof(mnt), "%s/small", tmpdir);
	ck_assert_int_eq(mkdir(mnt, 0700), 0);
	ck_assert_int_eq(mount("tmpfs", mnt, "tmpfs", 0, "size=16k"), 0);
	snprintf(small_mnt, sizeof(small_mnt), "%s", mnt);
	snprintf(out, sizeof(out), "%s/full.pftrace", mnt);
	ck_assert_int_eq(tp_workload_start("tp-diskfull", 2, TP_WORKLOAD_UNTIL_STOPPED, &w), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct recorder_options o;

		recorder_options_init(&o);
		o.output = out;
		o.instance = fx.instance;
		o.quiet = true;
		o.process_names = false;
		o.duration_ms = 4 * TP_WAIT_HANG_MS;
		_exit(recorder_run(&o) < 0 ? 1 : 0);
	}
	{
		struct disk_full_goal g = { pid, { .dir = fx.path, .n = 20000 } };

		tp_assert_wait(&watch, recorder_full_or_done, &g, "the recording to outgrow 16 KiB");
	}
	(void)kill(pid, SIGINT);
	status = tp_assert_exit(NULL, pid, "the recorder did not stop on SIGINT");
	ck_assert_msg(status == 1, "the recorder's exit status: %d, not 1 (a trace that did not fit)", status);
	(void)tp_workload_stop(&w);
	ck_assert(tracefs_restored());
	/* nothing is left that could pass for a trace */
	d = opendir(mnt);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		files += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	ck_assert_uint_eq(files, 0);
	ck_assert_int_eq(umount(mnt), 0);
	small_mnt[0] = '\0';
}
END_TEST

START_TEST(test_recorder_tracefs_unmounted)
{
	pid_t pid;

	/* in a mount namespace of its own, where tracefs is gone */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct recorder_options o;
		char out[600];
		struct tp_trace_summary s;

		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(2);
		(void)umount2("/sys/kernel/debug/tracing", MNT_DETACH);
		if (umount2(TP_TRACEFS, MNT_DETACH) < 0 || access(TP_TRACEFS "/trace", F_OK) == 0)
			_exit(3);
		snprintf(out, sizeof(out), "%s/unmounted.pftrace", tmpdir);
		recorder_options_init(&o);
		o.output = out;
		o.instance = fx.instance;
		o.quiet = true;
		o.process_names = false;
		o.duration_ms = 300;
		if (recorder_run(&o) < 0)
			_exit(4);
		if (access(TP_TRACEFS "/trace", F_OK) != 0)
			_exit(5);
		if (tp_trace_load(out, &s) < 0 || s.stats_pairs < 1)
			_exit(6);
		tp_trace_free(&s);
		_exit(0);
	}
	ck_assert_int_eq(tp_wait_exit(pid), 0);
	ck_assert(tracefs_restored());
}
END_TEST

static void cpu1_online(void)
{
	int fd = open("/sys/devices/system/cpu/cpu1/online", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		(void)!write(fd, "1", 1);
		close(fd);
	}
}

START_TEST(test_recorder_cpu_offline)
{
	char out[600];
	struct recorder_options o;
	struct tp_trace_summary s;
	int fd;

	fd = open("/sys/devices/system/cpu/cpu1/online", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "no CPU hotplug here: not tested\n");
		return;
	}
	atexit(cpu1_online);
	ck_assert_int_eq(write(fd, "0", 1), 1);
	close(fd);

	/* one CPU gone: the recording works on the others and says what it saw */
	snprintf(out, sizeof(out), "%s/offline.pftrace", tmpdir);
	recorder_options_init(&o);
	o.output = out;
	o.instance = fx.instance;
	o.quiet = true;
	o.process_names = false;
	o.duration_ms = 500;
	ck_assert_int_eq(recorder_run(&o), 0);
	cpu1_online();
	ck_assert(tracefs_restored());
	ck_assert_int_eq(tp_trace_load(out, &s), 0);
	ck_assert_uint_gt(s.cpu[0].bundles, 0);
	ck_assert_uint_eq(s.cpu[1].bundles, 0);
	ck_assert_uint_ge(s.stats_pairs, 1);
	tp_trace_free(&s);
}
END_TEST

int main(void)
{
	const char *build = getenv("TP_BUILD_ROOT");
	Suite *s;
	TCase *tc;

	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	if (!build || !mkdtemp(tmpdir))
		return 1;
	snprintf(bin_daemon, sizeof(bin_daemon), "%s/probes/traced-probes", build);
	snprintf(bin_service, sizeof(bin_service), "%s/tests/tp-test-service", build);
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("faults");
	tc = tcase_create("faults");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_service_restarted_100_times);
	tcase_add_test(tc, test_daemon_sigkill_recovered);
	tcase_add_test(tc, test_recorder_disk_full);
	tcase_add_test(tc, test_recorder_tracefs_unmounted);
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
		tcase_add_test(tc, test_recorder_cpu_offline);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
