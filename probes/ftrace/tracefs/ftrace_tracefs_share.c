/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Several data sources on one tracefs directory: the first one configures
 * it, events are reference-counted so that the enabled set is the union of
 * what the data sources asked for, tracing_on is 1 while any of them is
 * started, and the last one to leave restores everything from the undo
 * list.
 *
 * Unlike Perfetto we never write events/enable=0 at setup: events someone
 * else enabled stay on (the parsers skip what their data source did not
 * ask for), and we only ever turn off what we turned on.
 */

#include <stdio.h>
#include <string.h>

#include "probes/ftrace/tracefs/ftrace_tracefs.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ftrace/tracefs/ftrace_tracefs_internal.h"

static int setup_clock(struct ftrace_tracefs *t, bool mono_raw, char **ret_error)
{
	static const char *const preferred[] = { "boot", "global", "local" };
	_cleanup_free_ char *text = NULL;
	const char *want = NULL;
	char cur[64];
	int r;

	r = ftrace_tracefs_read(t, "trace_clock", 4096, &text, NULL);
	if (r < 0)
		return r;
	r = ftrace_clock_selected(text, cur, sizeof(cur));
	if (r < 0)
		return r;
	if (mono_raw && ftrace_clock_listed(text, "mono_raw"))
		want = "mono_raw";
	for (size_t i = 0; !want && i < ARRAY_SIZE(preferred); i++)
		if (ftrace_clock_listed(text, preferred[i]))
			want = preferred[i];
	if (want && strcmp(want, cur) != 0) {
		r = ftrace_tracefs_write(t, "trace_clock", want, ret_error);
		if (r < 0)
			return r;
		t->clock = ftrace_clock_from_name(want);
	} else {
		t->clock = ftrace_clock_from_name(cur);
	}
	return 0;
}

static uint32_t page_kb(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps >= 1024 ? (uint32_t)(ps / 1024) : 4;
}

/* What we write for a wanted size: whole pages, at least one. */
static uint32_t buffer_kb_to_write(uint32_t want_kb)
{
	return MAX(want_kb / page_kb(), 1u) * page_kb();
}

/*
 * The kernel rounds a size up to whole pages of event data (a page holds
 * a little less than 4 KiB), so 8192 reads back as 8195.  Writing the same
 * size again still rebuilds every CPU's buffer, tens of milliseconds: a
 * uniform size within a page above what we would write is left alone.
 */
static bool buffer_already(struct ftrace_tracefs *t, uint32_t want_kb)
{
	_cleanup_free_ char *s = NULL;
	uint32_t kb = buffer_kb_to_write(want_kb), cur;
	char tok[32];

	if (ftrace_tracefs_read(t, "buffer_size_kb", 256, &s, NULL) < 0 ||
	    sscanf(s, "%31s", tok) != 1 || safe_atou32(tok, &cur) < 0)
		return false; /* "X": the CPUs differ */
	if (cur < kb || cur >= kb + page_kb())
		return false;
	t->cached_buffer_kb = cur;
	return true;
}

uint32_t ftrace_tracefs_subbuf_kb(uint32_t want_kb, uint32_t buffer_kb)
{
	/* The kernel takes 1 to 128 system pages (order 0 to 7). */
	uint32_t kb = page_kb(), max = MIN(FTRACE_SUBBUF_MAX_KB, 128 * page_kb());

	if (want_kb == 0)
		return 0;
	while (kb * 2 <= want_kb && kb * 2 <= max &&
	       (buffer_kb == 0 || kb * 2 <= buffer_kb / FTRACE_SUBBUF_MIN_COUNT))
		kb *= 2;
	return kb;
}

/*
 * Whether the first attach changes the sub-buffer size to @want_kb:
 * FTRACE_SUBBUF_SET (to be written), _KEPT (already that size, or the file
 * does not read), _ABSENT (a kernel without the file).
 */
static enum ftrace_subbuf_outcome subbuf_plan(struct ftrace_tracefs *t, uint32_t want_kb)
{
	_cleanup_free_ char *s = NULL;
	uint32_t cur;
	int r;

	r = ftrace_tracefs_read(t, "buffer_subbuf_size_kb", 64, &s, NULL);
	if (r == -ENOENT)
		return FTRACE_SUBBUF_ABSENT;
	if (r < 0 || safe_atou32(s, &cur) < 0 || cur == want_kb)
		return FTRACE_SUBBUF_KEPT;
	return FTRACE_SUBBUF_SET;
}

enum ftrace_subbuf_outcome ftrace_tracefs_subbuf_outcome(const struct ftrace_tracefs *t)
{
	return t ? t->subbuf_outcome : _FTRACE_SUBBUF_OUTCOME_INVALID;
}

const char *ftrace_tracefs_subbuf_error(const struct ftrace_tracefs *t)
{
	return t ? t->subbuf_error : NULL;
}

static void read_clock(struct ftrace_tracefs *t)
{
	_cleanup_free_ char *text = NULL;
	char cur[64];

	if (ftrace_tracefs_read(t, "trace_clock", 4096, &text, NULL) >= 0 &&
	    ftrace_clock_selected(text, cur, sizeof(cur)) >= 0)
		t->clock = ftrace_clock_from_name(cur);
	else
		t->clock = FTRACE_CLOCK_UNKNOWN;
}

static int first_attach(struct ftrace_tracefs *t, const struct ftrace_tracefs_params *p, char **ret_error)
{
	_cleanup_free_ char *tracer = NULL;
	char tok[64];
	bool resize;
	int r;

	ftrace_tracefs_note_kernel_error(t);

	/*
	 * An undo list for this directory already on disk: a process that
	 * died before restoring (put its changes back first, or we would
	 * record its values as the originals), or one still running (the
	 * directory is taken).
	 */
	if (t->state_path && access(t->state_path, F_OK) == 0) {
		r = ftrace_tracefs_undo_file_replay(t->state_path, false);
		if (r == 0) {
			set_error_text(ret_error, strdup_printf("%s is in use by another process (see %s)",
									 t->path, t->state_path));
			return -EBUSY;
		}
		if (r == -EBADMSG) {
			/* Never act on it, keep it for a human, and do not let it block us. */
			_cleanup_free_ char *bad = strdup_printf("%s.bad", t->state_path);

			if (!bad || rename(t->state_path, bad) < 0)
				return -EBADMSG;
		} else if (r < 0) {
			set_error_text(ret_error, strdup_printf("restore %s from the leftover %s: %s",
									 t->path, t->state_path, strerror(-r)));
			return r;
		}
	}

	if (!p->preserve) {
		r = ftrace_tracefs_read(t, "current_tracer", 4096, &tracer, NULL);
		if (r < 0) {
			set_error_text(ret_error, strdup_printf("read %s/current_tracer: %s", t->path,
									 strerror(-r)));
			return r;
		}
		(void)sscanf(tracer, "%63s", tok);
		if (tracer[0] && tracer[0] != '\n' && strcmp(tok, "nop") != 0) {
			set_error_text(ret_error, strdup_printf("ftrace is in use: %s/current_tracer is '%s'"
									 " (expected nop)", t->path, tok));
			return -EBUSY;
		}
	}

	resize = !p->preserve && p->buffer_size_kb > 0 && !buffer_already(t, p->buffer_size_kb);
	t->subbuf_outcome = FTRACE_SUBBUF_KEPT;
	free(t->subbuf_error);
	t->subbuf_error = NULL;
	if (!p->preserve && p->subbuf_kb > 0)
		t->subbuf_outcome = subbuf_plan(t, p->subbuf_kb);

	/* Record everything we may change and persist it before the first write. */
	r = ftrace_tracefs_remember(t, "tracing_on");
	if (r >= 0 && !p->preserve) {
		r = ftrace_tracefs_remember(t, "trace_clock");
		if (r >= 0 && (resize || t->subbuf_outcome == FTRACE_SUBBUF_SET))
			r = ftrace_tracefs_remember(t, "buffer_size_kb");
		/*
		 * After buffer_size_kb, so that the restore (newest first) puts
		 * the sub-buffer size back first and then buffer_size_kb, which
		 * sets the number of pages exactly as it was: the kernel keeps
		 * a buffer's bytes, not its page count, across a sub-buffer
		 * change, and buffer_size_kb does not read the difference.
		 */
		if (r >= 0 && t->subbuf_outcome == FTRACE_SUBBUF_SET)
			r = ftrace_tracefs_remember(t, "buffer_subbuf_size_kb");
		if (r >= 0)
			ftrace_tracefs_note_truncated(t);
	}
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("read the current state of %s: %s", t->path,
								 strerror(-r)));
		return r;
	}
	r = ftrace_tracefs_persist(t);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("save undo state to %s: %s", t->state_path,
								 strerror(-r)));
		return r;
	}

	t->preserve = p->preserve;
	if (p->preserve) {
		read_clock(t);
		return 0;
	}

	r = ftrace_tracefs_write(t, "tracing_on", "0", ret_error);
	if (r < 0)
		return r;
	r = ftrace_tracefs_truncate(t);
	if (r < 0) {
		set_error_text(ret_error, strdup_printf("clear %s/trace: %s", t->path, strerror(-r)));
		return r;
	}
	r = setup_clock(t, p->mono_raw, ret_error);
	if (r < 0)
		return r;
	/*
	 * The sub-buffer size before the resize: the kernel sizes the buffer
	 * in whole sub-buffers of the new size.  Deferred, both go to the
	 * resize thread, which keeps that order.
	 */
	if (t->subbuf_outcome == FTRACE_SUBBUF_SET && p->defer_resize)
		t->resize_subbuf_kb = p->subbuf_kb;
	else if (t->subbuf_outcome == FTRACE_SUBBUF_SET)
		ftrace_tracefs_subbuf_write(t, p->subbuf_kb);
	if (resize && p->defer_resize) {
		t->resize_kb = buffer_kb_to_write(p->buffer_size_kb);
	} else if (resize) {
		char v[32];
		uint32_t kb = buffer_kb_to_write(p->buffer_size_kb);

		(void)snprintf(v, sizeof(v), "%u", kb);
		r = ftrace_tracefs_write_buffer_kb(t, v, ret_error);
		if (r < 0)
			return r;
		t->cached_buffer_kb = kb;
	}
	return 0;
}

int ftrace_tracefs_attach(struct ftrace_tracefs *t, const struct ftrace_tracefs_params *p, char **ret_error)
{
	int r;

	if (t->n_attached == 0) {
		r = first_attach(t, p, ret_error);
		if (r < 0) {
			/* Only what we changed: a state file that is not ours stays. */
			if (t->n_undo > 0 || t->truncated)
				(void)ftrace_tracefs_restore(t);
			t->clock = -1;
			t->cached_buffer_kb = 0;
			t->resize_kb = 0;
			t->resize_subbuf_kb = 0;
			t->subbuf_outcome = FTRACE_SUBBUF_KEPT;
			return r;
		}
	}
	t->n_attached++;
	return 0;
}

int ftrace_tracefs_detach(struct ftrace_tracefs *t)
{
	if (t->n_attached == 0)
		return -EINVAL;
	if (--t->n_attached > 0)
		return 0;
	/* A resize still running writes the file the restore puts back: wait for it. */
	(void)ftrace_tracefs_resize_join(t);
	t->n_active = 0;
	t->cached_buffer_kb = 0;
	t->buffer_percent = 0;
	t->clock = -1;
	ftrace_tracefs_features_reset(t);
	return ftrace_tracefs_restore(t);
}

int ftrace_tracefs_activate(struct ftrace_tracefs *t, uint32_t drain_buffer_percent)
{
	char v[16];
	int r;

	if (drain_buffer_percent > 0 && drain_buffer_percent <= 100 &&
	    (t->buffer_percent == 0 || drain_buffer_percent < t->buffer_percent) &&
	    faccessat(t->dirfd, "buffer_percent", W_OK, 0) == 0) {
		(void)snprintf(v, sizeof(v), "%u", drain_buffer_percent);
		/* Optional: kernels without it are still traced, only woken later. */
		if (ftrace_tracefs_set(t, "buffer_percent", v, NULL) >= 0)
			t->buffer_percent = drain_buffer_percent;
	}
	if (t->n_active == 0) {
		r = ftrace_tracefs_write(t, "tracing_on", "1", NULL);
		if (r < 0)
			return r;
	}
	t->n_active++;
	return 0;
}

int ftrace_tracefs_deactivate(struct ftrace_tracefs *t)
{
	if (t->n_active == 0)
		return -EINVAL;
	if (--t->n_active > 0)
		return 0;
	return ftrace_tracefs_write(t, "tracing_on", "0", NULL);
}

unsigned ftrace_tracefs_n_attached(const struct ftrace_tracefs *t)
{
	return t->n_attached;
}

unsigned ftrace_tracefs_n_active(const struct ftrace_tracefs *t)
{
	return t->n_active;
}

int ftrace_tracefs_clock(const struct ftrace_tracefs *t)
{
	return t->clock < 0 ? FTRACE_CLOCK_UNKNOWN : t->clock;
}

uint32_t ftrace_tracefs_cached_buffer_kb(const struct ftrace_tracefs *t)
{
	return t->cached_buffer_kb;
}

int ftrace_tracefs_read_buffer_kb(struct ftrace_tracefs *t, uint32_t *ret_kb)
{
	_cleanup_free_ char *s = NULL;
	char tok[32];
	uint32_t v;
	int r;

	r = ftrace_tracefs_read(t, "buffer_size_kb", 256, &s, NULL);
	if (r < 0)
		return r;
	if (sscanf(s, "%31s", tok) != 1)
		return -EBADMSG;
	if (strcmp(tok, "X") == 0) {
		/* CPUs differ: report cpu0's. */
		free(s);
		s = NULL;
		r = ftrace_tracefs_read(t, "per_cpu/cpu0/buffer_size_kb", 256, &s, NULL);
		if (r < 0)
			return r;
		if (sscanf(s, "%31s", tok) != 1)
			return -EBADMSG;
	}
	r = safe_atou32(tok, &v);
	if (r < 0)
		return r;
	*ret_kb = v;
	return 0;
}

/* ---- event references --------------------------------------------------- */

static int ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ftrace_event_ref *)a)->key, ((const struct ftrace_event_ref *)b)->key);
}

static struct ftrace_event_ref *ref_find(struct ftrace_tracefs *t, const char *key)
{
	struct ftrace_event_ref k = { .key = (char *)key };

	if (t->n_refs == 0)
		return NULL;
	return bsearch(&k, t->refs, t->n_refs, sizeof(k), ref_cmp);
}

static int ref_add(struct ftrace_tracefs *t, const char *key, bool ours)
{
	size_t lo = 0, hi = t->n_refs;
	char *k;

	if (t->n_refs == t->cap_refs) {
		size_t cap = t->cap_refs ? t->cap_refs * 2 : 32;
		struct ftrace_event_ref *n = reallocarray(t->refs, cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->refs = n;
		t->cap_refs = cap;
	}
	k = strdup(key);
	if (!k)
		return -ENOMEM;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(t->refs[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&t->refs[lo + 1], &t->refs[lo], (t->n_refs - lo) * sizeof(t->refs[0]));
	t->refs[lo] = (struct ftrace_event_ref){ .key = k, .refs = 1, .ours = ours };
	t->n_refs++;
	return 0;
}

static void ref_remove(struct ftrace_tracefs *t, struct ftrace_event_ref *r)
{
	size_t i = (size_t)(r - t->refs);

	free(r->key);
	memmove(&t->refs[i], &t->refs[i + 1], (t->n_refs - i - 1) * sizeof(t->refs[0]));
	t->n_refs--;
}

static void event_key(const struct ftrace_event_name *e, char *key, size_t size)
{
	(void)snprintf(key, size, "%s/%s", e->group, e->name);
}

static void enable_path(const struct ftrace_event_name *e, char *path, size_t size)
{
	(void)snprintf(path, size, "events/%s/%s/enable", e->group, e->name);
}

#define KEY_MAX (2 * FTRACE_NAME_MAX + 2)
#define PATH_LEN (2 * FTRACE_NAME_MAX + 32)

/* Undo a partly done ftrace_tracefs_enable_events(). */
static void enable_rollback(struct ftrace_tracefs *t, const struct ftrace_event_name *const *ev, size_t n,
			    bool *ok, const bool *pending)
{
	char path[PATH_LEN];

	for (size_t i = 0; i < n; i++)
		if (pending[i]) {
			enable_path(ev[i], path, sizeof(path));
			ftrace_tracefs_forget(t, path);
		}
	ftrace_tracefs_release_events(t, ev, n, ok);
	for (size_t i = 0; i < n; i++)
		ok[i] = false;
}

int ftrace_tracefs_enable_events(struct ftrace_tracefs *t, const struct ftrace_event_name *const *ev,
				 size_t n, bool *ret_ok, char **ret_errors)
{
	_cleanup_free_ bool *pending = NULL;
	char key[KEY_MAX], path[PATH_LEN];
	int n_ok = 0, r;

	pending = calloc(n ? n : 1, sizeof(bool));
	if (!pending)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ret_ok[i] = false;

	/* Pass 1: events already on (by us or by someone else) only gain a reference. */
	for (size_t i = 0; i < n; i++) {
		struct ftrace_event_ref *ref;
		_cleanup_free_ char *state = NULL;

		if (!ftrace_name_valid(ev[i]->group) || !ftrace_name_valid(ev[i]->name))
			continue;
		event_key(ev[i], key, sizeof(key));
		ref = ref_find(t, key);
		if (ref) {
			ref->refs++;
			ret_ok[i] = true;
			continue;
		}
		if (ev[i]->flags & FTRACE_EVENT_ALWAYS_ON) {
			r = ref_add(t, key, false);
			if (r < 0)
				goto fail;
			ret_ok[i] = true;
			continue;
		}
		enable_path(ev[i], path, sizeof(path));
		r = ftrace_tracefs_read(t, path, 64, &state, NULL);
		if (r < 0) {
			_cleanup_free_ char *line = strdup_printf("%s/%s: %s", ev[i]->group, ev[i]->name,
									 strerror(-r));
			if (ret_errors && line)
				(void)str_append_line(ret_errors, line);
			continue;
		}
		if (state[0] == '1') {
			r = ref_add(t, key, false);
			if (r < 0)
				goto fail;
			ret_ok[i] = true;
			continue;
		}
		r = ftrace_tracefs_remember_value(t, path, "0");
		if (r < 0)
			goto fail;
		pending[i] = true;
	}

	/* Pass 2: persist what we are about to turn on, then turn it on. */
	r = ftrace_tracefs_persist(t);
	if (r < 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *err = NULL;

		if (!pending[i])
			continue;
		pending[i] = false;
		enable_path(ev[i], path, sizeof(path));
		r = ftrace_tracefs_write(t, path, "1", &err);
		if (r < 0) {
			ftrace_tracefs_forget(t, path);
			if (ret_errors && err)
				(void)str_append_line(ret_errors, err);
			continue;
		}
		event_key(ev[i], key, sizeof(key));
		r = ref_add(t, key, true);
		if (r < 0) {
			(void)ftrace_tracefs_write(t, path, "0", NULL);
			ftrace_tracefs_forget(t, path);
			goto fail;
		}
		ret_ok[i] = true;
	}
	/* Failed events dropped their entries: keep the file exact. */
	(void)ftrace_tracefs_persist(t);
	for (size_t i = 0; i < n; i++)
		n_ok += ret_ok[i];
	return n_ok;

fail:
	enable_rollback(t, ev, n, ret_ok, pending);
	return r;
}

void ftrace_tracefs_release_events(struct ftrace_tracefs *t, const struct ftrace_event_name *const *ev,
				   size_t n, const bool *ok)
{
	char key[KEY_MAX], path[PATH_LEN];

	for (size_t i = 0; i < n; i++) {
		struct ftrace_event_ref *ref;

		if (!ok[i])
			continue;
		event_key(ev[i], key, sizeof(key));
		ref = ref_find(t, key);
		if (!ref || --ref->refs > 0)
			continue;
		if (ref->ours) {
			enable_path(ev[i], path, sizeof(path));
			/* On failure the undo entry stays, so the final restore retries. */
			if (ftrace_tracefs_write(t, path, "0", NULL) >= 0)
				ftrace_tracefs_forget(t, path);
		}
		ref_remove(t, ref);
	}
	(void)ftrace_tracefs_persist(t);
}
