/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ftrace control side against the real tracefs: kernel error text on
 * failed writes, the undo list, sharing one directory between data
 * sources, persistence and crash recovery.  The pure parts of the control
 * side (names, config resolution, stats text, trace_clock text) are in
 * tests/unit/test_ftrace_control.c and run as any user.
 *
 * Kernel cases run in a tracefs instance of their own (tp-test-<pid>),
 * created before and removed after the test case (in the parent process, so
 * even a crashed or failed test is cleaned up).  The files we could touch,
 * of the instance and of the top level, are snapshotted first and must be
 * byte-identical at the end: the test case's teardown checks that, after
 * every test has run, whatever their order.
 */

#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"
#include "util/util.h"

static char g_root[256];
static char g_inst_name[64];
static char g_inst_dir[512];
static char g_state_dir[256];
static char *g_snap_inst;
static char *g_snap_top;

static const char *const snap_files[] = {
	"tracing_on", "set_event", "buffer_size_kb", "trace_clock", "buffer_percent", "current_tracer",
	"buffer_subbuf_size_kb",
};

static char *read_text(const char *dir, const char *file)
{
	char p[1024];
	char *buf = NULL;
	size_t len;

	(void)snprintf(p, sizeof(p), "%s/%s", dir, file);
	if (read_full_file_at(AT_FDCWD, p, 1 << 20, &buf, &len) < 0)
		return strdup("<unreadable>");
	return buf;
}

static int write_text(const char *dir, const char *file, const char *v)
{
	char p[1024];
	int fd, r;

	(void)snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = write_all(fd, v, strlen(v));
	close(fd);
	return r;
}

/*
 * Until the first user of tracing since boot, buffer_size_kb reads
 * "N (expanded: M)"; the first event enabled anywhere expands every buffer
 * for good and it reads "N" after.  N is the size in both: the suffix is
 * state no one can put back, so snapshots leave it out.
 */
static void strip_unexpanded(const char *file, char *text)
{
	char *p;

	if (strcmp(file, "buffer_size_kb") == 0 && (p = strstr(text, " (expanded:")))
		strcpy(p, "\n");
}

static char *snapshot(const char *dir)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	for (size_t i = 0; i < ARRAY_SIZE(snap_files); i++) {
		char *v = read_text(dir, snap_files[i]);

		strip_unexpanded(snap_files[i], v);
		fprintf(f, "== %s\n%s", snap_files[i], v);
		free(v);
	}
	fclose(f);
	return out;
}

/* The value of @file in the fixture's snapshot, first token. */
static void snap_value(const char *file, char *buf, size_t size)
{
	char key[64];
	const char *p;

	(void)snprintf(key, sizeof(key), "== %s\n", file);
	p = strstr(g_snap_inst, key);
	ck_assert_ptr_nonnull(p);
	p += strlen(key);
	if (strcmp(file, "trace_clock") == 0) {
		p = strchr(p, '[');
		ck_assert_ptr_nonnull(p);
		p++;
	}
	(void)snprintf(buf, size, "%.*s", (int)strcspn(p, " ]\n"), p);
}

/* Put back what a test changed on purpose (not through the code under test). */
static void fixture_reset(void)
{
	static const char *const files[] = { "trace_clock", "buffer_size_kb", "tracing_on" };
	char v[64];

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snap_value(files[i], v, sizeof(v));
		ck_assert_int_eq(write_text(g_inst_dir, files[i], v), 0);
	}
}

static bool file_exists(const char *p)
{
	return access(p, F_OK) == 0;
}

static char *state_file_path(void)
{
	char *p = NULL, esc[512];

	(void)snprintf(esc, sizeof(esc), "%s", g_inst_dir);
	for (char *c = esc; *c; c++)
		if (*c == '/')
			*c = '_';
	if (asprintf(&p, "%s/ftrace%s.undo", g_state_dir, esc) < 0)
		return NULL;
	return p;
}

/* ---- per test case fixture (parent process) ------------------------------ */

static void kernel_setup(void)
{
	char *root = NULL, *err = NULL;
	char p[600];

	ck_assert_int_eq(ftrace_tracefs_find_root(&root, &err), 0);
	(void)snprintf(g_root, sizeof(g_root), "%s", root);
	free(root);
	(void)snprintf(g_inst_name, sizeof(g_inst_name), "tp-test-%d", (int)getpid());
	(void)snprintf(g_inst_dir, sizeof(g_inst_dir), "%s/instances/%s", g_root, g_inst_name);
	(void)snprintf(p, sizeof(p), "%s", g_inst_dir);
	(void)rmdir(p); /* a stale one of ours */
	ck_assert_int_eq(mkdir(p, 0755), 0);

	(void)snprintf(g_state_dir, sizeof(g_state_dir), "/tmp/tp-test-state-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(g_state_dir));
	setenv(FTRACE_STATE_DIR_ENV, g_state_dir, 1);

	g_snap_inst = snapshot(g_inst_dir);
	g_snap_top = snapshot(g_root);
}

/*
 * After the last test of the case (Check runs an unchecked teardown once,
 * after all of them): everything we touched is back, byte for byte.  The
 * comparison comes before the cleanup, which would hide a leak, and the
 * assertion after it, so that tracefs is put back even when it fails (a
 * failure here ends the runner with a non-zero status).
 */
static void kernel_teardown(void)
{
	char *inst = snapshot(g_inst_dir), *top = snapshot(g_root);
	bool inst_same = inst && g_snap_inst && strcmp(inst, g_snap_inst) == 0;
	bool top_same = top && g_snap_top && strcmp(top, g_snap_top) == 0;
	char cmd[600];

	if (!inst_same)
		fprintf(stderr, "instance not restored:\n--- before\n%s--- after\n%s", g_snap_inst, inst);
	if (!top_same)
		fprintf(stderr, "top level not restored:\n--- before\n%s--- after\n%s", g_snap_top, top);
	free(inst);
	free(top);

	/* A test that died half-way left its undo list: put things back. */
	(void)ftrace_host_recover(g_state_dir);
	(void)rmdir(g_inst_dir);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_state_dir);
	(void)system(cmd);
	free(g_snap_inst);
	free(g_snap_top);
	ck_assert_msg(inst_same && top_same, "tracefs not restored after the kernel test case");
}

static void assert_untouched(void)
{
	char *a = snapshot(g_inst_dir), *b = snapshot(g_root);

	ck_assert_str_eq(a, g_snap_inst);
	ck_assert_str_eq(b, g_snap_top);
	free(a);
	free(b);
}

static struct ftrace_tracefs *open_inst(const char *state_dir)
{
	struct ftrace_tracefs *t = NULL;
	char *err = NULL;
	int r = ftrace_tracefs_open(g_root, g_inst_name, state_dir, &t, &err);

	ck_assert_msg(r == 0, "open: %d %s", r, err ? err : "");
	free(err);
	return t;
}

static struct ftrace_event_name ev_switch = { "sched", "sched_switch", 0 };
static struct ftrace_event_name ev_waking = { "sched", "sched_waking", 0 };
static struct ftrace_event_name ev_exit = { "sched", "sched_process_exit", 0 };
static struct ftrace_event_name ev_print = { "ftrace", "print", FTRACE_EVENT_ALWAYS_ON };

static char *event_enable(const char *g, const char *n)
{
	char f[300];

	(void)snprintf(f, sizeof(f), "events/%s/%s/enable", g, n);
	return read_text(g_inst_dir, f);
}

START_TEST(test_write_einval_has_kernel_text)
{
	struct ftrace_tracefs *t = open_inst(NULL);
	char *err = NULL;

	/* A value the kernel refuses: EINVAL and a message naming the file. */
	ck_assert_int_eq(ftrace_tracefs_write(t, "trace_clock", "no_such_clock", &err), -EINVAL);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_nonnull(strstr(err, "trace_clock"));
	ck_assert_ptr_nonnull(strstr(err, "no_such_clock"));
	free(err);
	err = NULL;

	/* Filters explain themselves in error_log: the text is attached. */
	ck_assert_int_eq(ftrace_tracefs_write(t, "events/sched/sched_switch/filter", "no_such_field == 1", &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "kernel:") != NULL, "no kernel text in: %s", err);
	free(err);
	err = NULL;
	ck_assert_int_eq(ftrace_tracefs_write(t, "events/sched/sched_switch/filter", "0", &err), 0);

	/* Missing file: -ENOENT, and nothing created. */
	ck_assert_int_eq(ftrace_tracefs_write(t, "no_such_file", "1", &err), -ENOENT);
	free(err);
	ftrace_tracefs_free(t);
	assert_untouched();
}
END_TEST

/* ---- undo list ------------------------------------------------------------ */

START_TEST(test_undo_restores_exactly)
{
	struct ftrace_tracefs *t;
	const struct ftrace_event_name *evs[] = { &ev_switch, &ev_waking, &ev_print };
	struct ftrace_tracefs_params p = { .buffer_size_kb = 1024 };
	bool ok[3];
	char *err = NULL, *v, *before;
	char *state = state_file_path();

	/* Make the starting state unusual, to see that it comes back as it was. */
	ck_assert_int_eq(write_text(g_inst_dir, "trace_clock", "global"), 0);
	ck_assert_int_eq(write_text(g_inst_dir, "buffer_size_kb", "300"), 0);
	ck_assert_int_eq(write_text(g_inst_dir, "events/irq/irq_handler_entry/enable", "1"), 0);
	ck_assert_int_eq(write_text(g_inst_dir, "tracing_on", "1"), 0);
	before = snapshot(g_inst_dir);

	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_int_eq(ftrace_tracefs_enable_events(t, evs, 3, ok, &err), 3);
	ck_assert(ok[0] && ok[1] && ok[2]);
	ck_assert_ptr_null(err);

	/* Changed as asked, and the undo list is on disk. */
	v = read_text(g_inst_dir, "tracing_on");
	ck_assert_str_eq(v, "0\n");
	free(v);
	v = read_text(g_inst_dir, "trace_clock");
	ck_assert_ptr_nonnull(strstr(v, "[boot]"));
	free(v);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_int_ge(atoi(v), 1024);
	ck_assert_int_lt(atoi(v), 1100);
	free(v);
	v = event_enable("sched", "sched_switch");
	ck_assert_str_eq(v, "1\n");
	free(v);
	ck_assert(file_exists(state));
	v = read_text(g_state_dir, strrchr(state, '/') + 1);
	ck_assert_ptr_nonnull(strstr(v, "w tracing_on 1\n"));
	ck_assert_ptr_nonnull(strstr(v, "w trace_clock global\n"));
	ck_assert_ptr_nonnull(strstr(v, "w buffer_size_kb 30"));
	ck_assert_ptr_nonnull(strstr(v, "w events/sched/sched_switch/enable 0\n"));
	ck_assert_ptr_null(strstr(v, "irq_handler_entry"));
	free(v);

	/* drain_buffer_percent: buffer_percent written at start, remembered first. */
	ck_assert_int_eq(ftrace_tracefs_activate(t, 30), 0);
	v = read_text(g_inst_dir, "tracing_on");
	ck_assert_str_eq(v, "1\n");
	free(v);
	v = read_text(g_inst_dir, "buffer_percent");
	ck_assert_str_eq(v, "30\n");
	free(v);
	v = read_text(g_state_dir, strrchr(state, '/') + 1);
	ck_assert_ptr_nonnull(strstr(v, "w buffer_percent 50\n"));
	free(v);
	ck_assert_int_eq(ftrace_tracefs_deactivate(t), 0);
	ftrace_tracefs_release_events(t, evs, 3, ok);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ck_assert_uint_eq(ftrace_tracefs_undo_count(t), 0);
	ftrace_tracefs_free(t);

	/* Exactly as before, the event someone else enabled included; no state file left. */
	v = snapshot(g_inst_dir);
	ck_assert_str_eq(v, before);
	free(v);
	v = event_enable("irq", "irq_handler_entry");
	ck_assert_str_eq(v, "1\n");
	free(v);
	ck_assert(!file_exists(state));

	/* Back to the fixture's state. */
	ck_assert_int_eq(write_text(g_inst_dir, "events/irq/irq_handler_entry/enable", "0"), 0);
	fixture_reset();
	assert_untouched();
	free(before);
	free(state);
}
END_TEST

/* A buffer already of the asked size (as the kernel rounds it) is not rebuilt. */
START_TEST(test_buffer_size_left_alone)
{
	struct ftrace_tracefs *t;
	struct ftrace_tracefs_params p = { .buffer_size_kb = 2048 };
	char *err = NULL, *v, *rounded, *state = state_file_path();

	ck_assert_int_eq(write_text(g_inst_dir, "buffer_size_kb", "2048"), 0);
	rounded = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_int_ge(atoi(rounded), 2048); /* 2051 here: whole pages of data */

	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_uint_eq(ftrace_tracefs_cached_buffer_kb(t), (unsigned)atoi(rounded));
	v = read_text(g_state_dir, strrchr(state, '/') + 1);
	ck_assert_ptr_null(strstr(v, "buffer_size_kb")); /* nothing to put back */
	free(v);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_str_eq(v, rounded);
	free(v);

	/* One page more is a real change: made, and undone. */
	p.buffer_size_kb = 2048 + 8;
	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_int_ge(atoi(v), 2056);
	free(v);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_str_eq(v, rounded);
	free(v);

	free(rounded);
	free(state);
	fixture_reset();
	assert_untouched();
}
END_TEST

/*
 * defer_resize: the attach only plans the size (its undo entry persisted
 * first), a thread writes it and signals an eventfd; a detach while the
 * thread runs waits for it and puts the old size back.
 */
/* A bound only to catch a hang: the wait ends when the eventfd fires. */
#define RESIZE_HANG_MS 90000

START_TEST(test_deferred_resize)
{
	struct ftrace_tracefs_params p = { .buffer_size_kb = 4096, .defer_resize = true };
	char *err = NULL, *v, *before = read_text(g_inst_dir, "buffer_size_kb"), *state = state_file_path();
	struct ftrace_tracefs *t;
	struct ftrace_tracefs_resized rs;
	struct pollfd pfd;
	int fd = -1;

	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_str_eq(v, before); /* not yet */
	free(v);
	v = read_text(g_state_dir, strrchr(state, '/') + 1);
	ck_assert_ptr_nonnull(strstr(v, "buffer_size_kb")); /* but already undoable */
	free(v);
	ck_assert(ftrace_tracefs_resize_planned(t));
	ck_assert_int_eq(ftrace_tracefs_resize_start(t, &fd), 1);
	ck_assert(ftrace_tracefs_resizing(t));
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, RESIZE_HANG_MS), 1);
	ck_assert_int_eq(ftrace_tracefs_resize_finish(t, &rs, &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_uint_eq(rs.buffer_kb, 4096);
	ck_assert_uint_eq(rs.subbuf_kb, 0);
	ck_assert(!ftrace_tracefs_resizing(t) && !ftrace_tracefs_resize_planned(t));
	ck_assert_uint_eq(ftrace_tracefs_cached_buffer_kb(t), 4096);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_int_ge(atoi(v), 4096);
	free(v);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_str_eq(v, before);
	free(v);

	/* Left while the thread writes: the detach joins it, then restores. */
	p.buffer_size_kb = 65536;
	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_int_eq(ftrace_tracefs_resize_start(t, &fd), 1);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ck_assert(!ftrace_tracefs_resizing(t));
	ftrace_tracefs_free(t);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_str_eq(v, before);
	free(v);
	ck_assert(!file_exists(state));

	free(before);
	free(state);
	fixture_reset();
	assert_untouched();
}
END_TEST

START_TEST(test_unexpanded_and_percpu_buffer_sizes)
{
	struct ftrace_tracefs *t = open_inst(NULL);
	char *v;

	/* "N (expanded: M)" is remembered as M: the size the next user would get. */
	ck_assert_int_eq(ftrace_tracefs_remember_value(t, "buffer_size_kb", "1408"), 1);
	ck_assert_int_eq(ftrace_tracefs_remember(t, "buffer_size_kb"), 0); /* already there */
	ftrace_tracefs_forget(t, "buffer_size_kb");

	/* Different per-CPU sizes: each CPU is remembered and restored. */
	if (file_exists("/sys/devices/system/cpu/cpu1")) {
		char f[600];

		(void)snprintf(f, sizeof(f), "%s/per_cpu/cpu0", g_inst_dir);
		if (file_exists(f)) {
			ck_assert_int_eq(write_text(g_inst_dir, "per_cpu/cpu0/buffer_size_kb", "200"), 0);
			v = read_text(g_inst_dir, "buffer_size_kb");
			if (strncmp(v, "X", 1) == 0) {
				char *before = read_text(g_inst_dir, "per_cpu/cpu0/buffer_size_kb");

				ck_assert_int_eq(ftrace_tracefs_remember(t, "buffer_size_kb"), 1);
				ck_assert_int_ge(ftrace_tracefs_undo_count(t), 2);
				ck_assert_int_eq(ftrace_tracefs_write(t, "buffer_size_kb", "500", NULL), 0);
				ck_assert_int_eq(ftrace_tracefs_restore(t), 0);
				char *after = read_text(g_inst_dir, "per_cpu/cpu0/buffer_size_kb");
				ck_assert_str_eq(after, before);
				free(after);
				free(before);
				char *top = read_text(g_inst_dir, "buffer_size_kb");
				ck_assert_str_eq(top, "X\n");
				free(top);
			}
			free(v);
		}
	}
	ftrace_tracefs_free(t);
	fixture_reset();
	assert_untouched();
}
END_TEST

START_TEST(test_persist_failure_changes_nothing)
{
	struct ftrace_tracefs *t;
	struct ftrace_tracefs_params p = { .buffer_size_kb = 512 };
	char *err = NULL;

	/* A state dir that cannot be created: setup must stop before any write. */
	t = open_inst("/proc/version/nope");
	ck_assert_int_lt(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_nonnull(strstr(err, "undo"));
	free(err);
	ftrace_tracefs_free(t);
	assert_untouched();
}
END_TEST

START_TEST(test_busy_tracer_rejected)
{
	struct ftrace_tracefs *t;
	struct ftrace_tracefs_params p = { .buffer_size_kb = 512 };
	char *avail = read_text(g_inst_dir, "available_tracers");
	char *err = NULL;

	if (!strstr(avail, "function")) {
		free(avail);
		return; /* no other tracer on this kernel */
	}
	free(avail);
	if (write_text(g_inst_dir, "current_tracer", "function") < 0)
		return; /* not allowed in an instance on this kernel */
	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), -EBUSY);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_nonnull(strstr(err, "current_tracer"));
	free(err);
	ftrace_tracefs_free(t);
	ck_assert_int_eq(write_text(g_inst_dir, "current_tracer", "nop"), 0);
	assert_untouched();
}
END_TEST

/* ---- two data sources on one directory ------------------------------------ */

START_TEST(test_two_sessions_union)
{
	struct ftrace_tracefs *t = open_inst(g_state_dir);
	const struct ftrace_event_name *a[] = { &ev_switch, &ev_waking };
	const struct ftrace_event_name *b[] = { &ev_waking, &ev_exit };
	struct ftrace_tracefs_params p = { .buffer_size_kb = 512 };
	bool oka[2], okb[2];
	char *v;

	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, NULL), 0);
	ck_assert_int_eq(ftrace_tracefs_enable_events(t, a, 2, oka, NULL), 2);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, NULL), 0);
	ck_assert_int_eq(ftrace_tracefs_enable_events(t, b, 2, okb, NULL), 2);
	ck_assert_int_eq(ftrace_tracefs_activate(t, 0), 0);
	ck_assert_int_eq(ftrace_tracefs_activate(t, 0), 0);

	v = read_text(g_inst_dir, "set_event");
	ck_assert_ptr_nonnull(strstr(v, "sched:sched_switch"));
	ck_assert_ptr_nonnull(strstr(v, "sched:sched_waking"));
	ck_assert_ptr_nonnull(strstr(v, "sched:sched_process_exit"));
	free(v);

	/* A stops: only what nobody else needs goes off; tracing stays on for B. */
	ck_assert_int_eq(ftrace_tracefs_deactivate(t), 0);
	ftrace_tracefs_release_events(t, a, 2, oka);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	v = read_text(g_inst_dir, "set_event");
	ck_assert_ptr_null(strstr(v, "sched:sched_switch"));
	ck_assert_ptr_nonnull(strstr(v, "sched:sched_waking"));
	ck_assert_ptr_nonnull(strstr(v, "sched:sched_process_exit"));
	free(v);
	v = read_text(g_inst_dir, "tracing_on");
	ck_assert_str_eq(v, "1\n");
	free(v);

	/* B stops: everything as it was. */
	ck_assert_int_eq(ftrace_tracefs_deactivate(t), 0);
	ftrace_tracefs_release_events(t, b, 2, okb);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	assert_untouched();
}
END_TEST

/* ---- crash recovery --------------------------------------------------------- */

START_TEST(test_recover_replays_leftover)
{
	char *state = state_file_path();
	pid_t pid;
	int status;

	/* A child sets things up and dies by SIGKILL: nothing restored. */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ftrace_tracefs *t = NULL;
		const struct ftrace_event_name *a[] = { &ev_switch, &ev_waking };
		struct ftrace_tracefs_params p = { .buffer_size_kb = 700, .mono_raw = true };
		bool ok[2];

		if (ftrace_tracefs_open(g_root, g_inst_name, g_state_dir, &t, NULL) < 0 ||
		    ftrace_tracefs_attach(t, &p, NULL) < 0 || ftrace_tracefs_enable_events(t, a, 2, ok, NULL) != 2 ||
		    ftrace_tracefs_activate(t, 0) < 0)
			_exit(1);
		raise(SIGKILL);
		_exit(2);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert(file_exists(state));
	{
		char *v = event_enable("sched", "sched_switch");
		ck_assert_str_eq(v, "1\n");
		free(v);
	}

	ck_assert_int_eq(ftrace_host_recover(g_state_dir), 1);
	ck_assert(!file_exists(state));
	assert_untouched();
	/* Nothing left to do the second time. */
	ck_assert_int_eq(ftrace_host_recover(g_state_dir), 0);
	free(state);
}
END_TEST

/* ---- sub-buffer size ---------------------------------------------------------- */

/* The work the kernel queued while @fn ran, as the recorder instance @wq saw it. */
static char *queued_during(const char *wq, void (*fn)(const char *), const char *arg)
{
	char p[700];
	int fd;

	(void)snprintf(p, sizeof(p), "%s/trace", wq);
	fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(write_text(wq, "events/workqueue/workqueue_queue_work/enable", "1"), 0);
	fn(arg);
	ck_assert_int_eq(write_text(wq, "events/workqueue/workqueue_queue_work/enable", "0"), 0);
	return read_text(wq, "trace");
}

/* @file of the control instance written from CPU 0 */
static const char *ctl_dir;

static void write_from_cpu0(const char *file)
{
	cpu_set_t old, one;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(old), &old), 0);
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	ck_assert_int_eq(write_text(ctl_dir, file, "2048"), 0);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(old), &old), 0);
}

static void session_resize(const char *unused)
{
	struct ftrace_tracefs_params p = { .buffer_size_kb = 6144, .defer_resize = true };
	struct ftrace_tracefs_resized rs;
	struct ftrace_tracefs *t;
	struct pollfd pfd;
	char *err = NULL, *v;
	int fd = -1;

	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_int_eq(ftrace_tracefs_resize_start(t, &fd), 1);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, RESIZE_HANG_MS), 1);
	ck_assert_int_eq(ftrace_tracefs_resize_finish(t, &rs, &err), 0);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_int_ge(atoi(v), 6144);
	free(v);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
}

/*
 * The resize on its thread and the restore on the caller's resize each
 * CPU's buffer from that CPU: no kworker is queued for it (the kernel's
 * update_pages_handler), so a stalled worker pool (a "workqueue lockup")
 * cannot hold a session's start or end.  A second instance records the
 * work queued meanwhile; a third is the control: a directory-wide write
 * from CPU 0 queues the other CPUs' resizes, and the recorder sees them.
 * Kernels that queue even a CPU's resize asked from that CPU (it is done
 * right there since 6.x) cannot be spared the kworker: said, not failed.
 */
START_TEST(test_resize_queues_no_kworker)
{
	char *before = read_text(g_inst_dir, "buffer_size_kb"), *text, *v;
	char wq[600], ctl[640];
	bool direct;

	(void)snprintf(wq, sizeof(wq), "%s/instances/tp-test-wq-%d", g_root, (int)getpid());
	(void)snprintf(ctl, sizeof(ctl), "%s-ctl", wq);
	(void)rmdir(wq);
	(void)rmdir(ctl);
	ck_assert_int_eq(mkdir(wq, 0755), 0);
	ck_assert_int_eq(mkdir(ctl, 0755), 0);
	ctl_dir = ctl;

	text = queued_during(wq, write_from_cpu0, "per_cpu/cpu0/buffer_size_kb");
	direct = strstr(text, "update_pages_handler") == NULL;
	free(text);

	text = queued_during(wq, session_resize, NULL);
	if (direct)
		ck_assert_msg(strstr(text, "update_pages_handler") == NULL, "%s", text);
	else
		fprintf(stderr, "this kernel queues a kworker even for a CPU's own resize: not checked\n");
	free(text);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_str_eq(v, before);
	free(v);

	if (sysconf(_SC_NPROCESSORS_ONLN) > 1) {
		text = queued_during(wq, write_from_cpu0, "buffer_size_kb");
		ck_assert_msg(strstr(text, "update_pages_handler") != NULL, "%s", text);
		free(text);
	}
	ck_assert_int_eq(rmdir(ctl), 0);
	ck_assert_int_eq(rmdir(wq), 0);
	free(before);
	fixture_reset();
	assert_untouched();
}
END_TEST

static bool has_subbuf(void)
{
	char p[600];

	(void)snprintf(p, sizeof(p), "%s/buffer_subbuf_size_kb", g_inst_dir);
	return file_exists(p);
}

/*
 * How many events CPU 0's buffer holds: 200,000 trace_marker writes of one
 * size from CPU 0 overfill it, and the kernel's entries count is what
 * stayed.  It depends on the number of pages, which buffer_size_kb does
 * not always show: after a sub-buffer change and back, the kernel keeps the
 * bytes, not the page count, and buffer_size_kb reads as before.
 */
static uint64_t cpu0_capacity(void)
{
	cpu_set_t old, one;
	char p[600], *stats, *on = read_text(g_inst_dir, "tracing_on");
	uint64_t entries = 0;
	int fd;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(old), &old), 0);
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	(void)snprintf(p, sizeof(p), "%s/trace", g_inst_dir);
	fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(write_text(g_inst_dir, "tracing_on", "1"), 0);
	(void)snprintf(p, sizeof(p), "%s/trace_marker", g_inst_dir);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 200000; i++)
		ck_assert_int_eq(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
	close(fd);
	ck_assert_int_eq(write_text(g_inst_dir, "tracing_on", "0"), 0);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(old), &old), 0);
	on[strcspn(on, "\n")] = 0;
	ck_assert_int_eq(write_text(g_inst_dir, "tracing_on", on), 0);
	free(on);
	stats = read_text(g_inst_dir, "per_cpu/cpu0/stats");
	ck_assert_int_eq(sscanf(stats, "entries: %" SCNu64, &entries), 1);
	free(stats);
	(void)snprintf(p, sizeof(p), "%s/trace", g_inst_dir);
	fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_uint_gt(entries, 1000);
	return entries;
}

/* The buffer's sub-buffer size now, in KiB. */
static uint32_t subbuf_now(void)
{
	char *v = read_text(g_inst_dir, "buffer_subbuf_size_kb");
	uint32_t kb = (uint32_t)atoi(v);

	free(v);
	return kb;
}

/*
 * The first session sets the sub-buffer size, a second one on the same
 * directory leaves it, and the last one to leave puts back the size and
 * the page count exactly, whether the buffer was resized too or kept its
 * size (then buffer_size_kb reads the same before and after, and only its
 * undo entry sets the pages right again).
 */
static void subbuf_round_trip(uint32_t buffer_kb)
{
	struct ftrace_tracefs_params p = { .buffer_size_kb = buffer_kb, .subbuf_kb = 64 };
	struct ftrace_tracefs_params p2 = { .buffer_size_kb = buffer_kb, .subbuf_kb = 16 };
	struct ftrace_tracefs *t = open_inst(g_state_dir);
	char *state = state_file_path(), *v, *err = NULL;
	uint64_t before = cpu0_capacity(), after;
	size_t ps = 0;

	ck_assert_uint_eq(subbuf_now(), 4);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_int_eq(ftrace_tracefs_subbuf_outcome(t), FTRACE_SUBBUF_SET);
	ck_assert_uint_eq(subbuf_now(), 64);
	ck_assert_int_eq(ftrace_tracefs_page_size(t, &ps), 0);
	ck_assert_uint_eq(ps, 65536);
	v = read_text(g_state_dir, strrchr(state, '/') + 1);
	ck_assert_ptr_nonnull(strstr(v, "w buffer_subbuf_size_kb 4\n"));
	/* Put back first (the list replays newest first), then the size. */
	ck_assert_ptr_nonnull(strstr(v, "w buffer_size_kb "));
	ck_assert(strstr(v, "w buffer_size_kb ") < strstr(v, "w buffer_subbuf_size_kb "));
	free(v);

	/* A second session on the directory changes nothing of it. */
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p2, &err), 0);
	ck_assert_uint_eq(subbuf_now(), 64);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ck_assert_uint_eq(subbuf_now(), 64);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ck_assert_ptr_null(err);
	ck_assert_uint_eq(ftrace_tracefs_undo_count(t), 0);
	ftrace_tracefs_free(t);

	ck_assert_uint_eq(subbuf_now(), 4);
	ck_assert(!file_exists(state));
	assert_untouched();
	after = cpu0_capacity();
	ck_assert_msg(after == before, "CPU 0 holds %" PRIu64 " events after, %" PRIu64 " before", after, before);
	free(state);
}

START_TEST(test_subbuf_set_and_restored)
{
	struct ftrace_tracefs_params p = { .buffer_size_kb = 2048, .subbuf_kb = 64 };
	struct ftrace_tracefs *t;
	char *err = NULL;

	if (!has_subbuf()) {
		/* Before 6.8: said, nothing changed, the pages are the system's. */
		size_t ps = 0;

		t = open_inst(g_state_dir);
		ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
		ck_assert_int_eq(ftrace_tracefs_subbuf_outcome(t), FTRACE_SUBBUF_ABSENT);
		ck_assert_int_eq(ftrace_tracefs_page_size(t, &ps), 0);
		ck_assert_uint_eq(ps, (size_t)sysconf(_SC_PAGESIZE));
		ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
		ftrace_tracefs_free(t);
		fixture_reset();
		assert_untouched();
		return;
	}
	/* Resized as well, and kept at its size (1408 KiB reads 1410: within a page). */
	subbuf_round_trip(2048);
	subbuf_round_trip(1408);

	/* Already at the size asked: nothing to remember, nothing written. */
	t = open_inst(g_state_dir);
	p.subbuf_kb = 4;
	p.buffer_size_kb = 1408;
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_int_eq(ftrace_tracefs_subbuf_outcome(t), FTRACE_SUBBUF_KEPT);
	ck_assert(!ftrace_tracefs_remembered(t, "buffer_subbuf_size_kb"));
	ck_assert(!ftrace_tracefs_remembered(t, "buffer_size_kb"));
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	/* With preserve_ftrace_buffer, never. */
	t = open_inst(g_state_dir);
	p = (struct ftrace_tracefs_params){ .subbuf_kb = 64, .preserve = true };
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert_uint_eq(subbuf_now(), 4);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	ck_assert_ptr_null(err);
	fixture_reset();
	assert_untouched();
}
END_TEST

/* The last detach: 4 KiB sub-buffers, @before's buffer size and no state file again. */
static void detach_and_check_restored(struct ftrace_tracefs *t, const char *before)
{
	char *v;

	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	ck_assert_uint_eq(subbuf_now(), 4);
	v = read_text(g_inst_dir, "buffer_size_kb");
	ck_assert_str_eq(v, before);
	free(v);
	v = state_file_path();
	ck_assert(!file_exists(v));
	free(v);
}

/*
 * Deferred (the daemon's way), the sub-buffer write goes to the resize
 * thread with the buffer_size_kb one, before it: the attach on the loop
 * changes neither, the thread writes both, the restore puts both back.
 * A sub-buffer size alone (buffer already at its size) still needs the
 * thread.
 */
START_TEST(test_subbuf_deferred_to_resize_thread)
{
	struct ftrace_tracefs_params p = { .buffer_size_kb = 2048, .subbuf_kb = 64, .defer_resize = true };
	char *err = NULL, *before = read_text(g_inst_dir, "buffer_size_kb"), *v;
	struct ftrace_tracefs_resized rs;
	struct ftrace_tracefs *t;
	struct pollfd pfd;
	size_t ps = 0;
	int fd = -1;

	if (!has_subbuf()) {
		free(before);
		return;
	}
	for (int round = 0; round < 2; round++) {
		t = open_inst(g_state_dir);
		ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
		ck_assert_int_eq(ftrace_tracefs_subbuf_outcome(t), FTRACE_SUBBUF_SET);
		ck_assert_uint_eq(subbuf_now(), 4); /* not on the attach */
		ck_assert(ftrace_tracefs_remembered(t, "buffer_subbuf_size_kb"));
		ck_assert(ftrace_tracefs_resize_planned(t));
		ck_assert_int_eq(ftrace_tracefs_resize_start(t, &fd), 1);
		pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
		ck_assert_int_eq(poll(&pfd, 1, RESIZE_HANG_MS), 1);
		ck_assert_int_eq(ftrace_tracefs_resize_finish(t, &rs, &err), 0);
		ck_assert_ptr_null(err);
		ck_assert_uint_eq(rs.subbuf_kb, 64);
		ck_assert(!rs.subbuf_refused);
		ck_assert_uint_eq(subbuf_now(), 64);
		ck_assert_int_eq(ftrace_tracefs_page_size(t, &ps), 0);
		ck_assert_uint_eq(ps, 65536);
		if (round == 0) {
			ck_assert_uint_eq(rs.buffer_kb, 2048);
			v = read_text(g_inst_dir, "buffer_size_kb");
			ck_assert_int_ge(atoi(v), 2048);
			free(v);
		} else {
			ck_assert_uint_eq(rs.buffer_kb, 0); /* the size was already right */
		}
		detach_and_check_restored(t, before);
		/* The second round asks for the size the buffer has. */
		p.buffer_size_kb = (uint32_t)atoi(before);
	}
	/* Left before the thread ran: nothing was written, nothing is left. */
	p.buffer_size_kb = 2048;
	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	detach_and_check_restored(t, before);
	free(before);
	fixture_reset();
	assert_untouched();
}
END_TEST

/*
 * The kernel refuses a sub-buffer change while a CPU's buffer is mapped
 * (EBUSY, Linux 6.10+): on the resize thread, the refusal comes back with
 * the join, the session reads the kernel's sub-buffers, the undo entry is
 * gone, and the detach leaves the directory as it was.
 */
START_TEST(test_subbuf_refused_on_resize_thread)
{
	struct ftrace_tracefs_params p = { .subbuf_kb = 64, .defer_resize = true };
	char *err = NULL, *before = read_text(g_inst_dir, "buffer_size_kb"), path[600];
	struct ftrace_tracefs_resized rs;
	struct ftrace_tracefs *t;
	struct pollfd pfd;
	void *map;
	int fd = -1, raw;

	if (!has_subbuf()) {
		free(before);
		return;
	}
	(void)snprintf(path, sizeof(path), "%s/per_cpu/cpu0/trace_pipe_raw", g_inst_dir);
	raw = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(raw, 0);
	map = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, raw, 0);
	if (map == MAP_FAILED) {
		/* 6.8 and 6.9 have the file but no mapping (ENODEV): nothing here refuses the size */
		ck_assert_msg(errno == ENODEV, "mapping %s: %s", path, strerror(errno));
		fprintf(stderr, "sub-buffer refusal not tried: trace_pipe_raw does not map here\n");
		close(raw);
		free(before);
		return;
	}
	t = open_inst(g_state_dir);
	ck_assert_int_eq(ftrace_tracefs_attach(t, &p, &err), 0);
	ck_assert(ftrace_tracefs_remembered(t, "buffer_subbuf_size_kb"));
	ck_assert_int_eq(ftrace_tracefs_resize_start(t, &fd), 1);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, RESIZE_HANG_MS), 1);
	ck_assert_int_eq(ftrace_tracefs_resize_finish(t, &rs, &err), 0);
	ck_assert(rs.subbuf_refused);
	fprintf(stderr, "refused on the resize thread: %s\n", ftrace_tracefs_subbuf_error(t));
	ck_assert_int_eq(ftrace_tracefs_subbuf_outcome(t), FTRACE_SUBBUF_REFUSED);
	ck_assert_ptr_nonnull(strstr(ftrace_tracefs_subbuf_error(t), "buffer_subbuf_size_kb"));
	ck_assert(!ftrace_tracefs_remembered(t, "buffer_subbuf_size_kb"));
	ck_assert_uint_eq(subbuf_now(), 4);
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	munmap(map, (size_t)sysconf(_SC_PAGESIZE));
	close(raw);
	{
		char *v = read_text(g_inst_dir, "buffer_size_kb");

		ck_assert_str_eq(v, before);
		free(v);
	}
	free(before);
	free(err);
	fixture_reset();
	assert_untouched();
}
END_TEST

/* A process killed with the sub-buffers changed: the next start puts them back, pages too. */
START_TEST(test_subbuf_recovered_after_sigkill)
{
	char *state = state_file_path();
	uint64_t before, after;
	pid_t pid;
	int status;

	if (!has_subbuf())
		return;
	before = cpu0_capacity();
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ftrace_tracefs *t = NULL;
		struct ftrace_tracefs_params p = { .buffer_size_kb = 1408, .subbuf_kb = 32 };

		if (ftrace_tracefs_open(g_root, g_inst_name, g_state_dir, &t, NULL) < 0 ||
		    ftrace_tracefs_attach(t, &p, NULL) < 0 || ftrace_tracefs_activate(t, 0) < 0)
			_exit(1);
		raise(SIGKILL);
		_exit(2);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert(file_exists(state));
	ck_assert_uint_eq(subbuf_now(), 32);

	ck_assert_int_eq(ftrace_host_recover(g_state_dir), 1);
	ck_assert(!file_exists(state));
	ck_assert_uint_eq(subbuf_now(), 4);
	assert_untouched();
	after = cpu0_capacity();
	ck_assert_msg(after == before, "CPU 0 holds %" PRIu64 " events after, %" PRIu64 " before", after, before);
	free(state);
}
END_TEST

/* A whole session on the instance: attach, detach, and no state file left. */
static void attach_detach_clean(const struct ftrace_tracefs_params *p, const char *state)
{
	struct ftrace_tracefs *t = open_inst(g_state_dir);
	char *err = NULL;

	ck_assert_msg(ftrace_tracefs_attach(t, p, &err) == 0, "attach: %s", err ? err : "?");
	ck_assert_int_eq(ftrace_tracefs_detach(t), 0);
	ftrace_tracefs_free(t);
	ck_assert(!file_exists(state));
}

/* A session that finds the directory taken: EBUSY, said, and the owner's list left alone. */
static void attach_busy(const struct ftrace_tracefs_params *p, const char *state)
{
	struct ftrace_tracefs *t = open_inst(g_state_dir);
	char *err = NULL;

	ck_assert_int_eq(ftrace_tracefs_attach(t, p, &err), -EBUSY);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_nonnull(strstr(err, "in use"));
	free(err);
	ftrace_tracefs_free(t);
	ck_assert(file_exists(state));
}

/* A leftover list is replayed before a new setup records "original" values. */
START_TEST(test_attach_replays_leftover_first)
{
	char *state = state_file_path(), *v;
	struct ftrace_tracefs_params p = { .buffer_size_kb = 512 };
	pid_t live;
	int fd;

	/* A dead owner's list (pid 0x7ffffff0 is never a live pid here) */
	ck_assert_int_eq(write_text(g_inst_dir, "trace_clock", "global"), 0);
	fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	v = strchr(strstr(g_snap_inst, "== trace_clock\n"), '[') + 1;
	dprintf(fd, "traced-probes-ftrace-undo 1\npid 2147483632\ndir %s\ntruncate 1\nw trace_clock %.*s\n", g_inst_dir,
		(int)strcspn(v, "]"), v);
	close(fd);

	/* what we will restore is the clock from before the dead process */
	attach_detach_clean(&p, state);
	assert_untouched();

	/* A live owner: the directory is busy and its list is left alone. */
	live = fork();
	if (live == 0) {
		pause();
		_exit(0);
	}
	fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	dprintf(fd, "traced-probes-ftrace-undo 1\npid %d\ndir %s\ntruncate 0\nw tracing_on 1\n", (int)live, g_inst_dir);
	close(fd);
	attach_busy(&p, state);
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	(void)unlink(state);
	free(state);
	assert_untouched();
}
END_TEST

/*
 * A list left by another boot (a state directory that is not a tmpfs keeps
 * it across the reboot): its pid is now anybody's, here a live process, and
 * tracefs has started afresh.  It must neither make the directory busy nor
 * be replayed: it is removed and nothing is written.
 */
START_TEST(test_attach_drops_other_boots_list)
{
	char *state = state_file_path(), *v, *saved;
	struct ftrace_tracefs_params p = { .buffer_size_kb = 512 };
	char now[64] = "";
	pid_t live;
	int fd;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, now, sizeof(now) - 1), 0);
	close(fd);
	live = fork();
	if (live == 0) {
		pause();
		_exit(0);
	}
	saved = read_text(g_inst_dir, "trace_clock");
	fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	/* another boot's id: this one's with its first digit changed */
	dprintf(fd, "traced-probes-ftrace-undo 3\npid %d\nboot %c%.35s\ndir %s\ntruncate 0\nw trace_clock mono\n",
		(int)live, now[0] == '0' ? '1' : '0', now + 1, g_inst_dir);
	close(fd);

	attach_detach_clean(&p, state);
	/* the old boot's value was never written: the detach put back this boot's */
	v = read_text(g_inst_dir, "trace_clock");
	ck_assert_str_eq(v, saved);
	free(v);

	/* The same list from this boot, with its owner alive: the directory is busy. */
	fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	dprintf(fd, "traced-probes-ftrace-undo 3\npid %d\nboot %.36s\ndir %s\ntruncate 0\nw trace_clock mono\n",
		(int)live, now, g_inst_dir);
	close(fd);
	attach_busy(&p, state);
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	(void)unlink(state);
	free(state);
	free(saved);
	assert_untouched();
}
END_TEST

START_TEST(test_recover_refuses_bad_files)
{
	char p[400];
	char *v;
	int fd;
	pid_t live;

	/* A list naming a file outside the whitelist is never acted on. */
	(void)snprintf(p, sizeof(p), "%s/ftrace_bad.undo", g_state_dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	dprintf(fd, "traced-probes-ftrace-undo 1\npid 1\ndir %s\ntruncate 0\nw current_tracer function\n",
		g_inst_dir);
	close(fd);
	ck_assert_int_eq(ftrace_tracefs_undo_file_replay(p, true), -EBADMSG);
	ck_assert(file_exists(p));
	(void)unlink(p);

	/* A path escaping tracefs is refused too. */
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	dprintf(fd, "traced-probes-ftrace-undo 1\npid 1\ndir /tmp\ntruncate 0\nw tracing_on 1\n");
	close(fd);
	ck_assert_int_eq(ftrace_tracefs_undo_file_replay(p, true), -EBADMSG);
	(void)unlink(p);

	/* A list whose owner is alive belongs to a running daemon: skipped. */
	live = fork();
	if (live == 0) {
		pause();
		_exit(0);
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	dprintf(fd, "traced-probes-ftrace-undo 1\npid %d\ndir %s\ntruncate 0\nw tracing_on 0\n", (int)live,
		g_inst_dir);
	close(fd);
	ck_assert_int_eq(ftrace_tracefs_undo_file_replay(p, false), 0);
	ck_assert(file_exists(p));
	v = read_text(g_inst_dir, "tracing_on");
	ck_assert_str_eq(v, "1\n");
	free(v);
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	(void)unlink(p);
	assert_untouched();
}
END_TEST

/*
 * A list whose instance was removed since (rmdir by hand after a SIGKILL) has
 * nothing left to put back: while its owner runs it is left to it, then it
 * is removed, and replaying the directory reports nothing.  A directory that
 * is not tracefs still keeps its file.
 */
START_TEST(test_recover_drops_gone_instance)
{
	char p[400], gone[300], bad[400];
	char *report = NULL;
	pid_t live;
	int fd;

	(void)snprintf(gone, sizeof(gone), "%s/instances/tp-gone-%d", g_root, (int)getpid());
	ck_assert(!file_exists(gone));
	(void)snprintf(p, sizeof(p), "%s/ftrace_gone.undo", g_state_dir);
	live = fork();
	if (live == 0) {
		pause();
		_exit(0);
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	dprintf(fd, "traced-probes-ftrace-undo 3\npid %d\ndir %s\ntruncate 1\nw tracing_on 1\n", (int)live,
		gone);
	close(fd);
	ck_assert_int_eq(ftrace_tracefs_undo_file_replay(p, false), 0);
	ck_assert(file_exists(p));
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	ck_assert_int_eq(ftrace_tracefs_undo_replay_dir(g_state_dir, &report), 0);
	ck_assert_msg(report == NULL, "reported: %s", report);
	ck_assert(!file_exists(p));
	ck_assert(!file_exists(gone));

	/* the same name under a directory that is not tracefs: malformed, kept */
	(void)snprintf(bad, sizeof(bad), "%s/instances/tp-gone", g_state_dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	dprintf(fd, "traced-probes-ftrace-undo 3\npid 1\ndir %s\ntruncate 1\nw tracing_on 1\n", bad);
	close(fd);
	ck_assert_int_eq(ftrace_tracefs_undo_file_replay(p, true), -EBADMSG);
	ck_assert(file_exists(p));
	(void)unlink(p);
	assert_untouched();
}
END_TEST

/* ---- the data-source API: validation and reporting ------------------------- */

static struct pbw *no_packet_begin(void *userdata)
{
	ck_abort_msg("setup wrote a packet");
	return NULL;
}

static int no_packet_end(void *userdata)
{
	ck_abort_msg("setup wrote a packet");
	return -ENOSPC;
}

/* Setup writes no packet: a sink that fails the test if it is used. */
static const struct pbw_sink no_packet_sink = { .begin_packet = no_packet_begin,
						.end_packet = no_packet_end };

static int setup_ds(const char *instance, char **events, size_t n, struct ftrace_host **ret_host,
		    struct ftrace_ds **ret, char **err)
{
	Perfetto__Protos__FtraceConfig cfg = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	struct ftrace_host *h = NULL;
	struct loop *e = NULL;
	int r;

	cfg.instance_name = (char *)instance;
	cfg.ftrace_events = events;
	cfg.n_ftrace_events = n;
	cfg.has_buffer_size_kb = true;
	cfg.buffer_size_kb = 256;
	ck_assert_int_ge(loop_default(&e), 0);
	ck_assert_int_eq(ftrace_host_new(e, &h), 0);
	r = ftrace_ds_setup(h, 1, 1, &cfg, &no_packet_sink, NULL, NULL, ret, err);
	if (r < 0)
		h = ftrace_host_free(h);
	*ret_host = h;
	loop_unref(e);
	return r;
}

START_TEST(test_ds_setup_rejects_bad_instance_names)
{
	const char *bad[] = { "../x", "a/b/c", "..", ".", "", "x y" };
	char longname[400];
	struct ftrace_host *h = NULL;
	struct ftrace_ds *ds = NULL;
	char *err = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (!bad[i][0])
			continue; /* empty means top level, not an error */
		ck_assert_int_eq(setup_ds(bad[i], NULL, 0, &h, &ds, &err), -EINVAL);
		ck_assert_ptr_nonnull(err);
		free(err);
		err = NULL;
	}
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	ck_assert_int_eq(setup_ds(longname, NULL, 0, &h, &ds, &err), -EINVAL);
	free(err);
	err = NULL;

	/* Perfetto's rule: the instance must exist. */
	ck_assert_int_eq(setup_ds("tp-test-does-not-exist", NULL, 0, &h, &ds, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "does not exist"));
	free(err);
	assert_untouched();
}
END_TEST

START_TEST(test_ds_unknown_events_not_fatal)
{
	char *events[] = { "sched/sched_switch", "sched/no_such_event", "../x", "a/b/c", "sched_waking",
			   "nogroup/*" };
	struct ftrace_ds *ds = NULL;
	char *err = NULL, *v;
	const char *w;
	struct ftrace_host *h = NULL;
	int r;

	r = setup_ds(g_inst_name, events, ARRAY_SIZE(events), &h, &ds, &err);
	ck_assert_msg(r == 0, "setup: %d %s", r, err ? err : "");
	w = ftrace_ds_get_warnings(ds);
	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_nonnull(strstr(w, "sched/no_such_event"));
	ck_assert_ptr_nonnull(strstr(w, "'../x'"));
	ck_assert_ptr_nonnull(strstr(w, "a/b/c"));
	ck_assert_ptr_nonnull(strstr(w, "nogroup/*"));
	v = event_enable("sched", "sched_switch");
	ck_assert_str_eq(v, "1\n");
	free(v);
	v = event_enable("sched", "sched_waking");
	ck_assert_str_eq(v, "1\n");
	free(v);
	/* The host frees what is still attached and restores tracefs. */
	ftrace_host_free(h);
	assert_untouched();
}
END_TEST

/* Only what a config can name is listed, and it resolves as the full list does. */
START_TEST(test_available_filtered)
{
	struct ftrace_tracefs *t = open_inst(NULL);
	struct ftrace_event_list *all = NULL, *some = NULL, *bare = NULL;
	const char *reqs[] = { "sched/*", "ftrace/print" };
	const char *bare_reqs[] = { "sched_switch" };

	ck_assert_int_eq(ftrace_tracefs_read_available(t, NULL, 0, &all), 0);
	ck_assert_int_eq(ftrace_tracefs_read_available(t, reqs, 2, &some), 0);
	ck_assert_int_eq(ftrace_tracefs_read_available(t, bare_reqs, 1, &bare), 0);
	ck_assert_ptr_nonnull(ftrace_event_list_find(all, "sched", "sched_switch"));
	ck_assert_ptr_nonnull(ftrace_event_list_find(all, "irq", "irq_handler_entry"));
	/* a named group comes whole, the rest not at all */
	ck_assert_ptr_nonnull(ftrace_event_list_find(some, "sched", "sched_switch"));
	ck_assert_ptr_nonnull(ftrace_event_list_find(some, "sched", "sched_process_exit"));
	ck_assert_ptr_nonnull(ftrace_event_list_find(some, "ftrace", "print"));
	ck_assert_ptr_null(ftrace_event_list_find(some, "irq", "irq_handler_entry"));
	ck_assert_uint_lt(ftrace_event_list_size(some) * 4, ftrace_event_list_size(all));
	/* a bare name: that name in whatever group has it */
	ck_assert_ptr_nonnull(ftrace_event_list_find(bare, "sched", "sched_switch"));
	ck_assert_ptr_null(ftrace_event_list_find(bare, "sched", "sched_waking"));
	ck_assert_uint_ge(ftrace_event_list_size(bare), 1);
	ftrace_event_list_free(all);
	ftrace_event_list_free(some);
	ftrace_event_list_free(bare);
	ftrace_tracefs_free(t);
}
END_TEST

/* Without root: a clear error, not a crash or a half setup. */
START_TEST(test_not_root)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *root = NULL, *err = NULL;
		struct ftrace_tracefs *t = NULL;
		int r;

		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(10);
		r = ftrace_tracefs_find_root(&root, &err);
		if (r != -EACCES && r != -EPERM)
			_exit(11);
		if (!err || !strstr(err, "root"))
			_exit(12);
		free(err);
		err = NULL;
		r = ftrace_tracefs_open(g_root, g_inst_name, NULL, &t, &err);
		if ((r != -EACCES && r != -EPERM) || !err)
			_exit(13);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d", WEXITSTATUS(status));
	assert_untouched();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_tracefs");
	TCase *k = tcase_create("kernel");

	tcase_add_unchecked_fixture(k, kernel_setup, kernel_teardown);
	tcase_add_test(k, test_write_einval_has_kernel_text);
	tcase_add_test(k, test_undo_restores_exactly);
	tcase_add_test(k, test_unexpanded_and_percpu_buffer_sizes);
	tcase_add_test(k, test_buffer_size_left_alone);
	tcase_add_test(k, test_deferred_resize);
	tcase_add_test(k, test_resize_queues_no_kworker);
	tcase_add_test(k, test_persist_failure_changes_nothing);
	tcase_add_test(k, test_busy_tracer_rejected);
	tcase_add_test(k, test_two_sessions_union);
	tcase_add_test(k, test_recover_replays_leftover);
	tcase_add_test(k, test_subbuf_set_and_restored);
	tcase_add_test(k, test_subbuf_deferred_to_resize_thread);
	tcase_add_test(k, test_subbuf_refused_on_resize_thread);
	tcase_add_test(k, test_subbuf_recovered_after_sigkill);
	tcase_add_test(k, test_recover_refuses_bad_files);
	tcase_add_test(k, test_attach_replays_leftover_first);
	tcase_add_test(k, test_attach_drops_other_boots_list);
	tcase_add_test(k, test_recover_drops_gone_instance);
	tcase_add_test(k, test_ds_setup_rejects_bad_instance_names);
	tcase_add_test(k, test_ds_unknown_events_not_fatal);
	tcase_add_test(k, test_available_filtered);
	tcase_add_test(k, test_not_root);
	suite_add_tcase(s, k);
	return s;
}

int main(void)
{
	char *root = NULL;
	SRunner *sr;
	int failed;

	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root for tracefs\n");
		return 77;
	}
	if (ftrace_tracefs_find_root(&root, NULL) < 0) {
		fprintf(stderr, "skipped: no tracefs\n");
		return 77;
	}
	free(root);

	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
