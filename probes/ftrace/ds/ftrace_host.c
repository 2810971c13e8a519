/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process-wide ftrace state: one drain per tracefs directory in use,
 * the drain timer that runs their read passes, and the recovery of undo
 * lists left by a dead process.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/ds/ftrace_ds_internal.h"
#include "probes/ksyms/ksyms.h"
#include "util/util.h"

/* One tracefs directory in use, in the host's list. */
struct host_dir {
	struct host_dir *next;
	struct ftrace_drain *drain;
};

struct ftrace_host {
	struct loop *event;
	struct loop_source *timer;
	char *root;                     /* tracefs mount, found on first use */
	char *state_dir;
	struct host_dir *dirs;
	uint32_t period_ms;             /* of the armed timer, 0 if off */
	struct ksyms *ksyms;            /* symbolize_ksyms, shared */
	unsigned ksyms_users;
	bool ksyms_retain;              /* KSYMS_RETAIN was asked: keep it loaded */
	unsigned once;                  /* FTRACE_HOST_ONCE_* already said */
};

/* What ftrace_host_set_subbuf_kb() set; FTRACE_SUBBUF_UNSET: nothing. */
static uint32_t subbuf_kb_set = FTRACE_SUBBUF_UNSET;

void ftrace_host_set_subbuf_kb(uint32_t kb)
{
	subbuf_kb_set = kb;
}

uint32_t ftrace_host_subbuf_kb(void)
{
	const char *e;
	uint32_t kb;

	if (subbuf_kb_set != FTRACE_SUBBUF_UNSET)
		return subbuf_kb_set;
	e = secure_getenv(FTRACE_SUBBUF_ENV);
	if (e && safe_atou32(e, &kb) >= 0)
		return kb;
	return FTRACE_SUBBUF_DEFAULT_KB;
}

/* $TRACED_PROBES_STATE_DIR if absolute, else the default. */
static const char *state_dir_default(void)
{
	const char *e = secure_getenv(FTRACE_STATE_DIR_ENV);

	return e && e[0] == '/' ? e : FTRACE_STATE_DIR_DEFAULT;
}

int ftrace_host_recover_report(const char *state_dir, char **ret_report)
{
	return ftrace_tracefs_undo_replay_dir(state_dir ? state_dir : state_dir_default(),
					      ret_report);
}

int ftrace_host_recover(const char *state_dir)
{
	return ftrace_host_recover_report(state_dir, NULL);
}

int ftrace_host_new(struct loop *e, struct ftrace_host **ret)
{
	struct ftrace_host *h;

	if (!e || !ret)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->state_dir = strdup(state_dir_default());
	if (!h->state_dir) {
		free(h);
		return -ENOMEM;
	}
	h->event = loop_ref(e);
	*ret = h;
	return 0;
}

static struct host_dir *dir_free(struct host_dir *hd)
{
	if (!hd)
		return NULL;
	ftrace_drain_free(hd->drain);
	free(hd);
	return NULL;
}

struct ftrace_host *ftrace_host_free(struct ftrace_host *h)
{
	if (!h)
		return NULL;
	/* Freeing the last data source of a directory frees that directory too. */
	while (h->dirs) {
		struct ftrace_drain *d = h->dirs->drain;
		struct ftrace_drain_reader *r = ftrace_drain_first_reader(d);

		if (r)
			r->ops->release(r);
		else
			ftrace_host_put_drain(h, d);
	}
	h->timer = loop_source_disable_unref(h->timer);
	ksyms_free(h->ksyms);
	loop_unref(h->event);
	free(h->root);
	free(h->state_dir);
	free(h);
	return NULL;
}

int ftrace_host_get_drain(struct ftrace_host *h, const char *instance_name, struct ftrace_drain **ret,
			  char **ret_error)
{
	struct ftrace_tracefs *tfs = NULL;
	struct host_dir *hd;
	int r;

	for (hd = h->dirs; hd; hd = hd->next) {
		const char *n = ftrace_tracefs_instance_name(ftrace_drain_tracefs(hd->drain));

		if ((!n && !instance_name) || (n && instance_name && strcmp(n, instance_name) == 0)) {
			*ret = hd->drain;
			return 0;
		}
	}

	if (!h->root) {
		r = ftrace_tracefs_find_root(&h->root, ret_error);
		if (r < 0)
			return r;
	}

	hd = calloc(1, sizeof(*hd));
	if (!hd)
		return -ENOMEM;
	r = ftrace_tracefs_open(h->root, instance_name, h->state_dir, &tfs, ret_error);
	if (r >= 0)
		r = ftrace_drain_new(h->event, tfs, &hd->drain, ret_error);
	if (r < 0) {
		free(hd);
		return r;
	}
	hd->next = h->dirs;
	h->dirs = hd;
	*ret = hd->drain;
	return 0;
}

void ftrace_host_put_drain(struct ftrace_host *h, struct ftrace_drain *d)
{
	if (ftrace_drain_first_reader(d))
		return;
	for (struct host_dir **p = &h->dirs; *p; p = &(*p)->next)
		if ((*p)->drain == d) {
			struct host_dir *hd = *p;

			*p = hd->next;
			dir_free(hd);
			return;
		}
}

/* ---- drain timer --------------------------------------------------------- */

static uint32_t wanted_period(const struct ftrace_host *h)
{
	uint32_t p = 0;

	for (struct host_dir *hd = h->dirs; hd; hd = hd->next) {
		uint32_t q = ftrace_drain_period_ms(hd->drain);

		if (q && (p == 0 || q < p))
			p = q;
	}
	return p;
}

static int on_timer(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct ftrace_host *h = userdata;
	bool more = false;

	for (struct host_dir *hd = h->dirs; hd; hd = hd->next) {
		(void)ftrace_drain_pass(hd->drain, /* flush= */ false, &more);
		ftrace_drain_arm_wake(hd->drain);
	}

	/* A CPU still had data: go again at once instead of waiting a period. */
	if (more && h->period_ms)
		(void)loop_source_set_time(s, now_ns(CLOCK_MONOTONIC) / 1000u);
	return 0;
}

int ftrace_host_update_timer(struct ftrace_host *h)
{
	uint32_t p = wanted_period(h);
	int r;

	if (p == 0) {
		h->period_ms = 0;
		if (h->timer)
			(void)loop_source_set_enabled(h->timer, LOOP_OFF);
		return 0;
	}
	if (p == h->period_ms && h->timer)
		return 0;
	if (!h->timer) {
		/* Like Perfetto: wake on multiples of the period on the wall clock. */
		r = loop_add_periodic(h->event, &h->timer, p, /* first_now= */ false, on_timer, h);
		if (r < 0) {
			h->timer = NULL;
			return r;
		}
		(void)loop_source_set_description(h->timer, "ftrace-drain");
	} else {
		r = loop_source_set_period(h->timer, p);
		if (r < 0)
			return r;
	}
	r = loop_source_set_enabled(h->timer, LOOP_ON);
	if (r < 0)
		return r;
	h->period_ms = p;
	return 0;
}

/* ---- kernel symbols -------------------------------------------------------- */

int ftrace_host_ksyms_get(struct ftrace_host *h, const struct ksyms **ret)
{
	int r;

	if (!h->ksyms) {
		r = ksyms_load(NULL, &h->ksyms);
		if (r < 0) {
			h->ksyms = NULL;
			return r;
		}
	}
	h->ksyms_users++;
	*ret = h->ksyms;
	return 0;
}

void ftrace_host_ksyms_put(struct ftrace_host *h, bool retain)
{
	if (h->ksyms_users == 0)
		return;
	h->ksyms_retain |= retain;
	if (--h->ksyms_users > 0 || h->ksyms_retain)
		return;
	h->ksyms = ksyms_free(h->ksyms);
}

bool ftrace_host_once(struct ftrace_host *h, unsigned what)
{
	bool first = !(h->once & what);

	h->once |= what;
	return first;
}
