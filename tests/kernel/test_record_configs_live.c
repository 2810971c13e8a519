/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End to end on the real kernel: every config of tests/data/configs
 * (Perfetto's test/configs, its documentation's examples, what
 * `perfetto -t 1s sched freq idle` sends) recorded by `traced-probes
 * record -c` with a short duration, while a workload forks, renames and
 * exits processes, touches memory, opens files and writes trace_marker.
 * Each must give the kinds of data traced_probes gives for it (packet
 * types, ftrace event types, interned kernel symbols, syscall ids), and
 * leave tracefs as it found it.
 *
 * The configs record at the top level (atrace categories are refused in
 * instances, as in traced_probes), so the suite runs under the tracefs
 * lock like every kernel test.
 */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_record.h"
#include "util/util.h"

#define DURATION_MS 700
#define MAX_DURATION_MS (DURATION_MS * 16)

/* What a config must produce (FtraceEvent field numbers from ftrace_events.inc). */
enum {
	WANT_COMPACT = 1u << 0,         /* compact_sched bundles */
	WANT_NEWTASK = 1u << 1,         /* task/task_newtask (235) */
	WANT_RENAME = 1u << 2,          /* task/task_rename (236) */
	WANT_EXIT = 1u << 3,            /* sched/sched_process_exit (238) */
	WANT_PRINT = 1u << 4,           /* ftrace/print (3) */
	WANT_RSS = 1u << 5,             /* kmem/rss_stat (313) */
	WANT_FUTEX_ONLY = 1u << 6,      /* raw_syscalls of sys_futex only */
	WANT_SYSCALLS = 1u << 7,        /* raw_syscalls of several ids */
	WANT_KSYMS = 1u << 8,           /* the symbol map loaded; named workqueue functions */
	WANT_FUNCGRAPH = 1u << 9,       /* funcgraph events, or the reason in failed_ftrace_events */
	WANT_PROCESS_TREE = 1u << 10,   /* TracePacket.process_tree (2) */
	/* power/cpu_idle asked for: not failed (events only if this kernel emits them) */
	WANT_CPU_IDLE = 1u << 11,
	/* events this machine always has (sched, syscalls, memory); thermal
	 * zones, cpufreq and function_graph may be missing */
	WANT_BUNDLES = 1u << 12,
};

static const struct {
	const char *file;
	unsigned want;
} configs[] = {
	{ "cmdline_sched_freq_idle.cfg", WANT_BUNDLES |
	  WANT_COMPACT | WANT_NEWTASK | WANT_RENAME | WANT_EXIT | WANT_PRINT | WANT_KSYMS | WANT_PROCESS_TREE |
		  WANT_CPU_IDLE },
	{ "scheduling.cfg", WANT_BUNDLES | WANT_COMPACT | WANT_NEWTASK | WANT_RENAME | WANT_EXIT | WANT_PROCESS_TREE },
	{ "docs_cpu_scheduling.cfg", WANT_BUNDLES | WANT_COMPACT | WANT_NEWTASK | WANT_RENAME | WANT_EXIT | WANT_PROCESS_TREE },
	{ "long_trace.cfg", WANT_BUNDLES | WANT_COMPACT | WANT_NEWTASK | WANT_RENAME | WANT_EXIT | WANT_PROCESS_TREE },
	{ "summary.cfg", WANT_BUNDLES | WANT_COMPACT | WANT_PROCESS_TREE | WANT_CPU_IDLE },
	{ "ftrace.cfg", WANT_BUNDLES | WANT_COMPACT | WANT_EXIT | WANT_NEWTASK },
	{ "ftrace_with_ksyms.cfg", WANT_BUNDLES | WANT_RSS | WANT_KSYMS | WANT_PROCESS_TREE },
	{ "rss_stat.cfg", WANT_BUNDLES | WANT_COMPACT | WANT_RSS },
	{ "thermal.cfg", 0 },
	{ "docs_syscalls.cfg", WANT_BUNDLES | WANT_SYSCALLS },
	{ "docs_syscall_events.cfg", WANT_BUNDLES | WANT_COMPACT | WANT_FUTEX_ONLY | WANT_PRINT },
	{ "docs_funcgraph.cfg", WANT_FUNCGRAPH | WANT_KSYMS },
	{ "docs_memory_counters.cfg", WANT_BUNDLES | WANT_RSS | WANT_PROCESS_TREE },
	{ "memory-counters.cfg", WANT_BUNDLES | WANT_RSS | WANT_PROCESS_TREE },
	{ "cpu-freq.cfg", WANT_CPU_IDLE },
	{ "sys_stats.cfg", WANT_BUNDLES | WANT_COMPACT },
};

static char tmpdir[] = "/tmp/tp-cfgs-XXXXXX";
static char state_dir[600];
static struct tp_fixture fx;
static char *top_before;

static void setup(void)
{
	ck_assert_int_eq(tp_fixture_setup(&fx, "tp-cfgs"), 0);
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
	setenv(FTRACE_STATE_DIR_ENV, state_dir, 1);
	top_before = tp_feature_snapshot(TP_TRACEFS);
	ck_assert_ptr_nonnull(top_before);
}

static void teardown(void)
{
	(void)ftrace_host_recover(state_dir);
	tp_fixture_teardown(&fx);
	free(top_before);
}

/* ---- workload: fork, rename, touch memory, open, mark, exit ---------------- */

static volatile bool stop_work;

static void child_body(unsigned i)
{
	char marker[64];
	size_t len = 2u << 20;
	char *m;
	int fd;

	/*
	 * A fork copies the recorder's trace_pipe_raw descriptors, and while
	 * any is open the kernel refuses to change current_tracer (EBUSY): a
	 * child still faulting in its pages under function_graph would keep
	 * the recorder from putting nop back.  The child needs none of them.
	 */
	(void)close_range(3, ~0u, 0);
	/*
	 * Forked from a process with other threads: only system calls from
	 * here on (malloc, or a sanitizer's allocator behind it, could wait
	 * forever on a lock a recorder thread held at the fork), and a
	 * deadline so that the parent's waitpid() can never hang the suite.
	 */
	sigset_t none;

	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	(void)signal(SIGALRM, SIG_DFL);
	(void)alarm(10);
	(void)prctl(PR_SET_NAME, "tp-cfg-child");
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m != MAP_FAILED) {
		for (size_t k = 0; k < len; k += 4096)
			m[k] = (char)k;
		(void)munmap(m, len);
	}
	fd = open(TP_TRACEFS "/trace_marker", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		char digits[16];
		size_t n = 0, d = 0;

		memcpy(marker, "tp-cfg-marker ", 14);
		n = 14;
		do
			digits[d++] = (char)('0' + i % 10);
		while ((i /= 10) > 0);
		while (d > 0)
			marker[n++] = digits[--d];
		(void)!write(fd, marker, n);
		close(fd);
	}
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	_exit(0);
}

static void *work_loop(void *arg)
{
	(void)arg;
	for (unsigned i = 0; !stop_work; i++) {
		pid_t pid = fork();

		if (pid == 0)
			child_body(i);
		if (pid > 0)
			(void)waitpid(pid, NULL, 0);
		usleep(20000);
	}
	return NULL;
}

/* ---- config text ------------------------------------------------------------ */

/* Remove the data_sources block that configures @name (not ours to record). */
static void drop_data_source(char *text, const char *name)
{
	char *at = strstr(text, name), *start, *p;
	int depth = 0;

	if (!at)
		return;
	for (start = at; start > text && strncmp(start, "data_sources", 12) != 0; start--)
		;
	for (p = start; *p; p++) {
		if (*p == '{')
			depth++;
		else if (*p == '}' && --depth == 0)
			break;
	}
	if (*p)
		memmove(start, p + 1, strlen(p + 1) + 1);
}

/* Every "duration_ms: N" becomes @ms (same place, padded). */
static void shorten(char *text, unsigned ms)
{
	for (char *p = text; (p = strstr(p, "duration_ms:")); p++) {
		char *v = p + strlen("duration_ms:"), *e;

		while (*v == ' ')
			v++;
		e = v;
		while (*e >= '0' && *e <= '9')
			e++;
		if (e - v >= 3) {
			char num[16];
			int n = snprintf(num, sizeof(num), "%u", ms);

			if (n > e - v)
				continue;   /* the window never grows past the config's own */
			memset(v, ' ', (size_t)(e - v));
			memcpy(v, num, (size_t)n);
		}
	}
}

static void record_config(const char *file, unsigned ms, char *out, size_t out_len)
{
	const char *root = getenv("TP_SOURCE_ROOT");
	_cleanup_free_ char *src = NULL, *text = NULL;
	char cfg[700];
	pthread_t th;
	int r;

	src = strdup_printf("%s/tests/data/configs/%s", root ? root : ".", file);
	ck_assert_int_eq(read_full_file_at(AT_FDCWD, src, 1 << 20, &text, NULL), 0);
	drop_data_source(text, "\"perfetto.metatrace\"");
	shorten(text, ms);
	snprintf(cfg, sizeof(cfg), "%s/%s", tmpdir, file);
	ck_assert_int_eq(tp_write_file(cfg, text), 0);
	snprintf(out, out_len, "%s/%s.pftrace", tmpdir, file);

	stop_work = false;
	ck_assert_int_eq(pthread_create(&th, NULL, work_loop, NULL), 0);
	r = tp_record(cfg, out);
	stop_work = true;
	pthread_join(th, NULL);
	ck_assert_msg(r == 0, "%s: recording failed (%d)", file, r);
}

static bool kernel_has_graph(void)
{
	_cleanup_free_ char *t = NULL;

	return read_full_file_at(AT_FDCWD, TP_TRACEFS "/available_tracers", 1 << 16, &t, NULL) >= 0 &&
	       strstr(t, "function_graph");
}

/* Whether what the workload thread does (not what the kernel does by
 * itself) is in the trace as far as @want asks for it. */
static bool workload_seen(unsigned want, const struct tp_ftrace_scan *s)
{
	return (!(want & WANT_NEWTASK) || s->events_by_field[235] > 0) &&
	       (!(want & WANT_RENAME) || s->events_by_field[236] > 0) &&
	       (!(want & WANT_EXIT) || s->events_by_field[238] > 0) &&
	       (!(want & WANT_PRINT) || s->events_by_field[3] > 0);
}

static void check(const char *file, unsigned want, const struct tp_ftrace_scan *s)
{
	ck_assert_msg(s->stats_packets >= 2, "%s: no FtraceStats pair", file);
	if (want & WANT_BUNDLES)
		ck_assert_msg(s->bundles > 0, "%s: no ftrace bundle", file);
	if (want & WANT_CPU_IDLE)
		ck_assert_msg(!tp_scan_failed_has(s, "power/cpu_idle"), "%s: cpu_idle failed", file);
	if (want & WANT_COMPACT)
		ck_assert_msg(s->compact_bundles > 0, "%s: no compact_sched", file);
	if (want & WANT_NEWTASK)
		ck_assert_msg(s->events_by_field[235] > 0, "%s: no task_newtask", file);
	if (want & WANT_RENAME)
		ck_assert_msg(s->events_by_field[236] > 0, "%s: no task_rename", file);
	if (want & WANT_EXIT)
		ck_assert_msg(s->events_by_field[238] > 0, "%s: no sched_process_exit", file);
	if (want & WANT_PRINT)
		ck_assert_msg(s->events_by_field[3] > 0, "%s: no print", file);
	if (want & WANT_RSS)
		ck_assert_msg(s->events_by_field[313] > 0, "%s: no rss_stat", file);
	if (want & WANT_PROCESS_TREE)
		ck_assert_msg(s->packets_by_field[2] > 0, "%s: no process_tree", file);
	if (want & (WANT_FUTEX_ONLY | WANT_SYSCALLS)) {
		int futex = ftrace_syscall_by_name(ftrace_syscall_arch_current(), "sys_futex");
		unsigned ids = 0;
		uint64_t other = s->syscalls_other;

		ck_assert_int_ge(futex, 0);
		for (unsigned i = 0; i < ARRAY_SIZE(s->syscall_ids); i++) {
			ids += s->syscall_ids[i] > 0;
			if (i != (unsigned)futex)
				other += s->syscall_ids[i];
		}
		if (want & WANT_FUTEX_ONLY)
			ck_assert_msg(other == 0, "%s: %" PRIu64 " events of syscalls other than futex", file, other);
		else
			ck_assert_msg(ids > 3, "%s: only %u syscall ids", file, ids);
	}
	if ((want & WANT_KSYMS) && s->kernel_symbols_parsed > 0 && s->events_by_field[58] > 0)
		/* workqueue functions are named by interned symbols */
		ck_assert_msg(s->symbols > 0 && s->sequence_cleared > 0, "%s: workqueue functions without names", file);
	if (want & WANT_FUNCGRAPH) {
		if (kernel_has_graph())
			ck_assert_msg(s->events_by_field[437] > 0, "%s: no funcgraph_entry", file);
		else
			ck_assert_msg(tp_scan_failed_has(s, "ftrace/funcgraph_entry"),
				      "%s: no function_graph here, and failed_ftrace_events does not say so", file);
	}
}

START_TEST(test_config)
{
	const char *file = configs[_i].file;
	struct tp_ftrace_scan s;
	_cleanup_free_ char *top_after = NULL;
	char out[800];

	/*
	 * The workload's forks, renames, exits and prints must fall inside the
	 * recording window; a starved machine (an emulated guest beside other
	 * guests) can leave a short window without them.  So the window grows
	 * until they are there, bounded to catch a workload that never runs.
	 */
	for (unsigned ms = DURATION_MS;; ms *= 2) {
		record_config(file, ms, out, sizeof(out));
		top_after = tp_feature_snapshot(TP_TRACEFS);
		ck_assert_ptr_nonnull(top_after);
		if (strcmp(top_after, top_before) != 0) {
			char diff[600];

			tp_first_difference(top_before, top_after, diff, sizeof(diff));
			ck_abort_msg("%s: tracefs not restored: %s", file, diff);
		}
		free(top_after);
		top_after = NULL;
		tp_fixture_assert_restored(&fx);
		ck_assert_int_eq(tp_scan_trace(out, &s), 0);
		fprintf(stderr, "%s: %" PRIu64 " bundles (%" PRIu64 " compact), %" PRIu64 " kernel symbols, %zu failed, %u ms\n",
			file, s.bundles, s.compact_bundles, s.symbols, s.n_failed, ms);
		if (workload_seen(configs[_i].want, &s) || ms >= MAX_DURATION_MS)
			break;
		tp_scan_free(&s);
	}
	check(file, configs[_i].want, &s);
	tp_scan_free(&s);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	if (!mkdtemp(tmpdir))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("record_configs");
	tc = tcase_create("configs");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_config, 0, (int)ARRAY_SIZE(configs));
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
