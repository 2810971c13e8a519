/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The fixture the kprobe and function-graph kernel tests share: a private
 * instance, a state directory for the undo lists, snapshots of every file
 * the options change (top level included: kprobe_events lives there), and
 * a recording child that a failed test does not leave running.  Header
 * only: each test program includes it once.
 */

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/ftrace/ds/ftrace_ds.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_record.h"
#include "util/util.h"

static char tmpdir[] = "/tmp/tp-ftfeat-XXXXXX";
static char state_dir[600];
static struct tp_fixture fx;
static char *feat_before, *top_feat_before;
static pid_t child;

static void setup(void)
{
	ck_assert_int_eq(tp_fixture_setup(&fx, "tp-ftfeat"), 0);
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
	setenv(FTRACE_STATE_DIR_ENV, state_dir, 1);
	feat_before = tp_feature_snapshot(fx.path);
	top_feat_before = tp_feature_snapshot(TP_TRACEFS);
	ck_assert_ptr_nonnull(feat_before);
	ck_assert_ptr_nonnull(top_feat_before);
}

static void teardown(void)
{
	if (child > 0) {
		(void)kill(child, SIGKILL);
		(void)tp_wait_exit(child);
		child = 0;
	}
	(void)ftrace_host_recover(state_dir);
	tp_fixture_teardown(&fx);
	free(feat_before);
	free(top_feat_before);
}

/* Whether @after is @before; if not, the first line that differs, on stderr. */
static bool same_snapshot(const char *what, const char *before, const char *after)
{
	char diff[600];

	if (!after)
		return false;
	if (strcmp(before, after) == 0)
		return true;
	tp_first_difference(before, after, diff, sizeof(diff));
	fprintf(stderr, "%s not restored: %s\n", what, diff);
	return false;
}

static bool features_restored(void)
{
	_cleanup_free_ char *a = tp_feature_snapshot(fx.path), *b = tp_feature_snapshot(TP_TRACEFS),
			    *top = tp_tracefs_snapshot(TP_TRACEFS), *inst = tp_tracefs_snapshot(fx.path);
	bool ok = same_snapshot(fx.path, feat_before, a);

	ok = same_snapshot("top-level tracefs", top_feat_before, b) && ok;
	ok = same_snapshot("top-level tracefs", fx.top_before, top) && ok;
	ok = same_snapshot(fx.path, fx.inst_before, inst) && ok;
	return ok && tp_fixture_restored(&fx);
}

/* A kernel function that opening a file always goes through, or NULL. */
static const char *open_function(void)
{
	static const char *const candidates[] = { "do_sys_openat2", "do_sys_open", "do_filp_open" };
	_cleanup_free_ char *ks = NULL;

	if (read_full_file_at(AT_FDCWD, "/proc/kallsyms", 64u << 20, &ks, NULL) < 0)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
		char pat[64];

		snprintf(pat, sizeof(pat), " T %s\n", candidates[i]);
		if (strstr(ks, pat))
			return candidates[i];
		snprintf(pat, sizeof(pat), " t %s\n", candidates[i]);
		if (strstr(ks, pat))
			return candidates[i];
	}
	return NULL;
}

static volatile bool stop_opens;

/* Opens files until stopped: every open goes through open_function(). */
static void *open_loop(void *arg)
{
	(void)arg;
	while (!stop_opens) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (fd >= 0)
			close(fd);
		usleep(500);
	}
	return NULL;
}

/* Record @cfg_text (a TraceConfig) into @out while open_loop() runs. */
static int record_with_opens(const char *cfg_text, const char *out)
{
	char cfg[700];
	pthread_t th;
	int r;

	snprintf(cfg, sizeof(cfg), "%s/cfg-%d.cfg", tmpdir, (int)getpid());
	ck_assert_int_eq(tp_write_file(cfg, cfg_text), 0);
	stop_opens = false;
	ck_assert_int_eq(pthread_create(&th, NULL, open_loop, NULL), 0);
	r = tp_record(cfg, out);
	stop_opens = true;
	pthread_join(th, NULL);
	return r;
}
