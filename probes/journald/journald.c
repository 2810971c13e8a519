/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.systemd_journald: new journal entries as SystemdJournaldEvent
 * packets (see journald.h).
 *
 * libsystemd's sd-journal does the journal reading (file formats, rotation,
 * the inotify fd); we load it with dlopen() and resolve the dozen calls we
 * make, checked against its own header's prototypes, rather than link it
 * (see journald.h for why).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <systemd/sd-journal.h>
#include <time.h>

#include "loop/loop.h"
#include "probes/journald/journald.h"
#include "protos/pbw.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "protos/perfetto/config/linux/journald_config.pb-c.h"
#include "util/util.h"

/* TracePacket and SystemdJournaldEvent field numbers (Perfetto v58.2). */
enum {
	JOURNALD_PKT_TIMESTAMP = 8,
	JOURNALD_PKT_CLOCK_ID = 58,
	JOURNALD_PKT_EVENT = 132,
	JOURNALD_EV_PID = 1,
	JOURNALD_EV_TAG = 6,
	JOURNALD_EV_NUM_TOTAL = 20,
	JOURNALD_EV_NUM_FAILED = 21,
	JOURNALD_CLOCK_MONOTONIC = 3,
	JOURNALD_CLOCK_BOOTTIME = 6,
};

/* Syslog's lowest priority (debug): the default, every entry. */
#define JOURNALD_PRIO_MAX 7u
/* Identifiers and units in one config: each is a match term. */
#define JOURNALD_FILTERS_MAX 256u
/* "_SYSTEMD_UNIT=" and a unit name: systemd's names are at most 255. */
#define JOURNALD_MATCH_MAX 512u
/* Entries read in one wake-up before the loop gets a turn. */
#define JOURNALD_BATCH_MAX 4096u

/* The calls of libsystemd we make, typed by its header. */
struct sd_api {
	__typeof__(sd_journal_open) *open;
	__typeof__(sd_journal_close) *close;
	__typeof__(sd_journal_add_match) *add_match;
	__typeof__(sd_journal_add_disjunction) *add_disjunction;
	__typeof__(sd_journal_add_conjunction) *add_conjunction;
	__typeof__(sd_journal_seek_head) *seek_head;
	__typeof__(sd_journal_seek_tail) *seek_tail;
	__typeof__(sd_journal_previous) *previous;
	__typeof__(sd_journal_next) *next;
	__typeof__(sd_journal_get_fd) *get_fd;
	__typeof__(sd_journal_process) *process;
	__typeof__(sd_journal_get_monotonic_usec) *get_monotonic_usec;
	__typeof__(sd_journal_restart_data) *restart_data;
	__typeof__(sd_journal_enumerate_available_data) *enumerate_available_data;
};

struct journald {
	const struct sd_api *sd;
	struct pbw_sink sink;
	struct ds_host host;
	struct loop *loop;
	struct loop_source *io;
	struct loop_source *more;       /* a batch stopped at the cap: the rest on the next turn */
	sd_journal *j;
	bool started;
	uint64_t total, failed;
};

/* Loaded once per process, on first use; never unloaded. */
static struct sd_api api;
static bool api_loaded;

static int api_load(char **ret_error)
{
	static const char soname[] = "libsystemd.so.0";
	void *h;

	if (api_loaded)
		return 0;
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		if (ret_error)
			*ret_error = strdup_printf("linux.systemd_journald: cannot load %s: %s", soname,
						   dlerror());
		return -ENOENT;
	}
#define SYM(field, name)                                                                        \
	do {                                                                                     \
		api.field = (__typeof__(api.field))dlsym(h, #name);                              \
		if (!api.field) {                                                                \
			if (ret_error)                                                           \
				*ret_error = strdup_printf("linux.systemd_journald: %s has no %s", \
							   soname, #name);                       \
			dlclose(h);                                                              \
			return -ENOENT;                                                          \
		}                                                                                \
	} while (0)
	SYM(open, sd_journal_open);
	SYM(close, sd_journal_close);
	SYM(add_match, sd_journal_add_match);
	SYM(add_disjunction, sd_journal_add_disjunction);
	SYM(add_conjunction, sd_journal_add_conjunction);
	SYM(seek_head, sd_journal_seek_head);
	SYM(seek_tail, sd_journal_seek_tail);
	SYM(previous, sd_journal_previous);
	SYM(next, sd_journal_next);
	SYM(get_fd, sd_journal_get_fd);
	SYM(process, sd_journal_process);
	SYM(get_monotonic_usec, sd_journal_get_monotonic_usec);
	SYM(restart_data, sd_journal_restart_data);
	SYM(enumerate_available_data, sd_journal_enumerate_available_data);
#undef SYM
	api_loaded = true;
	return 0;
}

/* ---- one entry ------------------------------------------------------------- */

static const struct {
	const char *key;
	int str;        /* enum journald_str, or -1 */
	int num;        /* bit in has_num, or -1 */
} fields[] = {
	{ "_PID", -1, 0 },  { "_TID", -1, 1 },  { "_UID", -1, 2 },  { "_GID", -1, 3 },
	{ "PRIORITY", -1, 4 },
	{ "SYSLOG_IDENTIFIER", JOURNALD_TAG, -1 }, { "MESSAGE", JOURNALD_MESSAGE, -1 },
	{ "_COMM", JOURNALD_COMM, -1 },            { "_EXE", JOURNALD_EXE, -1 },
	{ "_SYSTEMD_UNIT", JOURNALD_UNIT, -1 },    { "_HOSTNAME", JOURNALD_HOSTNAME, -1 },
	{ "_TRANSPORT", JOURNALD_TRANSPORT, -1 },
};

/* A whole uint32 in decimal, nothing else. */
static bool parse_u32(const char *p, size_t n, uint32_t *ret)
{
	uint64_t v = 0;

	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	if (v > UINT32_MAX)
		return false;
	*ret = (uint32_t)v;
	return true;
}

int journald_entry_field(const void *data, size_t len, struct journald_entry *e)
{
	const char *f = data;
	const char *eq = f ? memchr(f, '=', len) : NULL;
	size_t klen, vlen;

	if (!eq || !e)
		return 0;
	klen = (size_t)(eq - f);
	vlen = len - klen - 1;
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		uint32_t *nums[] = { &e->pid, &e->tid, &e->uid, &e->gid, &e->prio };

		if (strlen(fields[i].key) != klen || memcmp(fields[i].key, f, klen) != 0)
			continue;
		/* as v58.2: an empty value is no value */
		if (vlen == 0)
			return 0;
		if (fields[i].str >= 0) {
			e->str[fields[i].str] = eq + 1;
			e->str_len[fields[i].str] = vlen;
			return 1;
		}
		if (!parse_u32(eq + 1, vlen, nums[fields[i].num]))
			return 0;
		e->has_num |= 1u << fields[i].num;
		return 1;
	}
	return 0;
}

static void write_entry(struct journald *jd, uint64_t monotonic_us)
{
	struct journald_entry e = {};
	const void *data;
	size_t len;
	struct pbw *w;

	jd->sd->restart_data(jd->j);
	while (jd->sd->enumerate_available_data(jd->j, &data, &len) > 0)
		(void)journald_entry_field(data, len, &e);

	w = jd->sink.begin_packet(jd->sink.userdata);
	if (!w) {
		jd->failed++;
		return;
	}
	pbw_varint(w, JOURNALD_PKT_TIMESTAMP, monotonic_us * 1000);
	pbw_varint(w, JOURNALD_PKT_CLOCK_ID, JOURNALD_CLOCK_MONOTONIC);
	pbw_begin_nested(w, JOURNALD_PKT_EVENT);
	{
		const uint32_t v[] = { e.pid, e.tid, e.uid, e.gid, e.prio };

		for (unsigned i = 0; i < ARRAY_SIZE(v); i++)
			if (e.has_num & (1u << i))
				pbw_varint(w, JOURNALD_EV_PID + i, v[i]);
	}
	for (unsigned i = 0; i < _JOURNALD_STR_MAX; i++)
		if (e.str[i])
			pbw_bytes(w, JOURNALD_EV_TAG + i, e.str[i], e.str_len[i]);
	(void)pbw_end_nested(w);
	if (jd->sink.end_packet(jd->sink.userdata) < 0)
		jd->failed++;
	else
		jd->total++;
}

/*
 * What is new since the last call, up to a batch.  Returns: true when it
 * stopped at the cap with more perhaps left (the caller reads on: a burst
 * of entries is never left for a journal change that may not come).
 */
static bool read_entries(struct journald *jd)
{
	unsigned n = 0;

	if (!jd->j)
		return false;
	(void)jd->sd->process(jd->j);
	while (n < JOURNALD_BATCH_MAX && jd->sd->next(jd->j) > 0) {
		uint64_t us;

		n++;
		if (jd->sd->get_monotonic_usec(jd->j, &us, NULL) < 0) {
			jd->failed++;
			continue;
		}
		write_entry(jd, us);
	}
	if (n && jd->host.commit_soon)
		jd->host.commit_soon(jd->host.host);
	return n == JOURNALD_BATCH_MAX;
}

static int on_more(struct loop_source *s, void *userdata)
{
	struct journald *jd = userdata;

	if (read_entries(jd))
		return loop_source_set_enabled(s, LOOP_ONESHOT);
	return 0;
}

/* Read a batch; past the cap, the rest in later turns of the loop. */
static void read_and_continue(struct journald *jd)
{
	if (!read_entries(jd))
		return;
	if (!jd->more && loop_add_defer(jd->loop, &jd->more, on_more, jd) < 0)
		return;
	(void)loop_source_set_enabled(jd->more, LOOP_ONESHOT);
}

static int on_readable(struct loop_source *s, int fd, uint32_t revents, void *userdata)
{
	read_and_continue(userdata);
	return 0;
}

/* ---- setup ----------------------------------------------------------------- */

static int add_match(struct journald *jd, const char *key, const char *value)
{
	char m[JOURNALD_MATCH_MAX];
	int n = snprintf(m, sizeof(m), "%s=%s", key, value);

	if (n < 0 || (size_t)n >= sizeof(m))
		return -ENAMETOOLONG;
	return jd->sd->add_match(jd->j, m, (size_t)n);
}

/* @key=any of @values, ANDed with what came before. */
static int add_any_of(struct journald *jd, const char *key, char **values, size_t n)
{
	int r;

	if (n == 0)
		return 0;
	r = jd->sd->add_conjunction(jd->j);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		r = add_match(jd, key, values[i] ? values[i] : "");
		if (r >= 0 && i + 1 < n)
			r = jd->sd->add_disjunction(jd->j);
	}
	return r;
}

static int add_matches(struct journald *jd, const Perfetto__Protos__SystemdJournaldConfig *cfg)
{
	uint32_t min_prio = JOURNALD_PRIO_MAX;
	int r = 0;

	/* as v58.2: a min_prio that is set, even 0, is the bound */
	if (cfg && cfg->has_min_prio)
		min_prio = MIN(cfg->min_prio, JOURNALD_PRIO_MAX);
	/*
	 * Every priority (min_prio 7): no PRIORITY match at all, so that
	 * entries without the field (the native protocol does not require it)
	 * pass too, which v58.2's "PRIORITY=0 or ... or 7" loses.
	 */
	for (uint32_t p = 0; r >= 0 && min_prio < JOURNALD_PRIO_MAX && p <= min_prio; p++) {
		char v[4];

		snprintf(v, sizeof(v), "%u", p);
		r = add_match(jd, "PRIORITY", v);
		if (r >= 0 && p < min_prio)
			r = jd->sd->add_disjunction(jd->j);
	}
	if (r >= 0 && cfg)
		r = add_any_of(jd, "SYSLOG_IDENTIFIER", cfg->filter_identifiers, cfg->n_filter_identifiers);
	if (r >= 0 && cfg)
		r = add_any_of(jd, "_SYSTEMD_UNIT", cfg->filter_units, cfg->n_filter_units);
	return r;
}

static void journald_free(struct journald *jd)
{
	if (!jd)
		return;
	jd->io = loop_source_disable_unref(jd->io);
	jd->more = loop_source_disable_unref(jd->more);
	if (jd->j)
		jd->sd->close(jd->j);
	free(jd);
}

static int check_config(const Perfetto__Protos__SystemdJournaldConfig *cfg, char *err, size_t err_len)
{
	if (!cfg)
		return 0;
	if (cfg->n_filter_identifiers > JOURNALD_FILTERS_MAX || cfg->n_filter_units > JOURNALD_FILTERS_MAX) {
		snprintf(err, err_len, "lists %zu filter_identifiers and %zu filter_units, more than "
			 "the limit of %u each", cfg->n_filter_identifiers, cfg->n_filter_units,
			 JOURNALD_FILTERS_MAX);
		return -E2BIG;
	}
	for (size_t i = 0; i < cfg->n_filter_identifiers + cfg->n_filter_units; i++) {
		const char *v = i < cfg->n_filter_identifiers ? cfg->filter_identifiers[i] :
			cfg->filter_units[i - cfg->n_filter_identifiers];

		if (v && strlen(v) > JOURNALD_MATCH_MAX - sizeof("SYSLOG_IDENTIFIER=")) {
			snprintf(err, err_len, "has a filter of %zu bytes, more than the limit of %zu",
				 strlen(v), JOURNALD_MATCH_MAX - sizeof("SYSLOG_IDENTIFIER="));
			return -E2BIG;
		}
	}
	return 0;
}

/* ---- ds_ops ------------------------------------------------------------------ */

static int op_check_config(const struct Perfetto__Protos__DataSourceConfig *cfg, char *err, size_t err_len)
{
	return check_config(cfg ? cfg->journald_config : NULL, err, err_len);
}

static int op_setup(const struct ds_env *env, const struct Perfetto__Protos__DataSourceConfig *cfg,
		    void **ret, char **ret_error, char **ret_warnings)
{
	const Perfetto__Protos__SystemdJournaldConfig *jc = cfg ? cfg->journald_config : NULL;
	struct journald *jd;
	char why[256];
	int r;

	if (!env || !env->sink.begin_packet || !env->sink.end_packet || !ret)
		return -EINVAL;
	r = check_config(jc, why, sizeof(why));
	if (r < 0) {
		if (ret_error)
			*ret_error = strdup_printf("linux.systemd_journald: the config %s", why);
		return r;
	}
	r = api_load(ret_error);
	if (r < 0)
		return r;
	jd = calloc(1, sizeof(*jd));
	if (!jd)
		return -ENOMEM;
	jd->sd = &api;
	jd->sink = env->sink;
	jd->host = env->host;
	jd->loop = env->event;
	r = jd->sd->open(&jd->j, SD_JOURNAL_LOCAL_ONLY);
	if (r < 0) {
		jd->j = NULL;
		if (ret_error)
			*ret_error = strdup_printf("linux.systemd_journald: cannot open the journal: %s",
						   strerror(-r));
		journald_free(jd);
		return r;
	}
	r = add_matches(jd, jc);
	if (r < 0) {
		if (ret_error)
			*ret_error = strdup_printf("linux.systemd_journald: the journal refused a filter: %s",
						   strerror(-r));
		journald_free(jd);
		return r;
	}
	*ret = jd;
	return 0;
}

static int op_start(void *ds)
{
	struct journald *jd = ds;
	int fd, r;

	if (!jd)
		return -EINVAL;
	if (jd->started)
		return -EALREADY;
	jd->started = true;
	/*
	 * From the tail on: the entries written while the session runs.  The
	 * last matching entry is the place to read on from.  When none
	 * matches, sd-journal (252) stays "at the tail", and a next() from
	 * there returns at most the last of the entries that arrived since,
	 * skipping the others; the head is then the same place, since
	 * everything that matches from there on is new.
	 */
	r = jd->sd->seek_tail(jd->j);
	if (r >= 0 && jd->sd->previous(jd->j) == 0)
		r = jd->sd->seek_head(jd->j);
	if (r >= 0)
		r = fd = jd->sd->get_fd(jd->j);
	if (r >= 0)
		r = loop_add_io(jd->loop, &jd->io, fd, EPOLLIN, on_readable, jd);
	if (r < 0)
		return r;
	(void)loop_source_set_description(jd->io, "journald");
	read_and_continue(jd);
	return 0;
}

static int op_flush(void *ds)
{
	struct journald *jd = ds;
	struct pbw *w;

	if (!jd)
		return -EINVAL;
	/* everything new first, however much: the counts below cover it */
	while (read_entries(jd))
		;
	w = jd->sink.begin_packet(jd->sink.userdata);
	if (w) {
		pbw_varint(w, JOURNALD_PKT_TIMESTAMP, now_ns(CLOCK_BOOTTIME));
		pbw_varint(w, JOURNALD_PKT_CLOCK_ID, JOURNALD_CLOCK_BOOTTIME);
		pbw_begin_nested(w, JOURNALD_PKT_EVENT);
		pbw_varint(w, JOURNALD_EV_NUM_TOTAL, jd->total);
		pbw_varint(w, JOURNALD_EV_NUM_FAILED, jd->failed);
		(void)pbw_end_nested(w);
		(void)jd->sink.end_packet(jd->sink.userdata);
	}
	if (jd->sink.flush)
		jd->sink.flush(jd->sink.userdata);
	return 0;
}

static int op_report(void *ds, struct ds_report *r)
{
	struct journald *jd = ds;

	if (!jd || !r)
		return -EINVAL;
	r->events = jd->total;
	return 0;
}

static void op_free(void *ds)
{
	journald_free(ds);
}

const struct ds_ops journald_ds_ops = {
	.name = "linux.systemd_journald",
	.check_config = op_check_config,
	.setup = op_setup,
	.start = op_start,
	.flush = op_flush,
	.report = op_report,
	.free = op_free,
};
