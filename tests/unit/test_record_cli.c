/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `traced-probes record`'s command line, without a kernel: positional
 * words as `perfetto -t` reads them (and the config it sends for them),
 * --sys-stats lists, the check that what was asked for exists (against a
 * fixture tracefs), and error messages that name the wrong word.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probes/daemon.h"
#include "probes/recorder.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "util/util.h"

static char source_root[4096];

/* "argc, argv" for `record ARGS...` (getopt_long permutes the array: one per call) */
#define ARGS(...)                                                                       \
	(int)(sizeof((char *[]){ "record", __VA_ARGS__ }) / sizeof(char *)),            \
		((char *[]){ "record", __VA_ARGS__, NULL })

/* ---- stderr capture: what a user would read --------------------------- */

static int saved_stderr = -1;
static FILE *capture;

static void capture_begin(void)
{
	fflush(stderr);
	capture = tmpfile();
	ck_assert_ptr_nonnull(capture);
	saved_stderr = dup(STDERR_FILENO);
	ck_assert_int_ge(saved_stderr, 0);
	ck_assert_int_ge(dup2(fileno(capture), STDERR_FILENO), 0);
}

/* Returns: what was written to stderr since capture_begin(); free() it. */
static char *capture_end(void)
{
	char *text;
	long n;

	fflush(stderr);
	ck_assert_int_ge(dup2(saved_stderr, STDERR_FILENO), 0);
	close(saved_stderr);
	n = ftell(capture);
	text = calloc(1, (size_t)n + 1);
	ck_assert_ptr_nonnull(text);
	rewind(capture);
	ck_assert_uint_eq(fread(text, 1, (size_t)n, capture), (size_t)n);
	fclose(capture);
	return text;
}

/* parse @argv; on failure the message must name @word */
static void assert_refused(int argc, char **argv, const char *word)
{
	struct recorder_options o;
	_cleanup_free_ char *msg = NULL;
	int r;

	capture_begin();
	r = recorder_parse_args(argc, argv, &o);
	msg = capture_end();
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(strstr(msg, word) != NULL, "'%s' not named in: %s", word, msg);
	/* one line about the word and a pointer to --help, not the whole usage */
	ck_assert_msg(strstr(msg, "Usage:") == NULL, "usage printed: %s", msg);
	ck_assert_msg(strlen(msg) < 400, "%s", msg);
}

/* ---- words -------------------------------------------------------------- */

START_TEST(test_words_as_perfetto_t)
{
	struct recorder_options o;

	ck_assert_int_eq(recorder_parse_args(ARGS("-o", "x.pftrace", "-t", "10s", "sched", "freq", "idle",
						  "sched/sched_blocked_reason", "sched"), &o), 0);
	ck_assert_str_eq(o.output, "x.pftrace");
	ck_assert_uint_eq(o.duration_ms, 10000);
	/* bare words: categories, each once */
	ck_assert_uint_eq(o.n_categories, 3);
	ck_assert_str_eq(o.categories[0], "sched");
	ck_assert_str_eq(o.categories[1], "freq");
	ck_assert_str_eq(o.categories[2], "idle");
	/* GROUP/NAME: an event */
	ck_assert_uint_eq(o.n_events, 1);
	ck_assert_str_eq(o.events[0], "sched/sched_blocked_reason");
	ck_assert(!o.hypervisor);
}
END_TEST

START_TEST(test_options_words_mix)
{
	struct recorder_options o;

	ck_assert_int_eq(recorder_parse_args(ARGS("-e", "irq/irq_handler_entry", "-e", "sched_switch", "-o",
						  "y", "hyp", "-q", "--sys-stats=memory,cpufreq",
						  "--sys-stats-period", "100ms", "idle", "--no-system-info",
						  "--no-ksyms"), &o), 0);
	ck_assert_uint_eq(o.n_events, 2);
	ck_assert_str_eq(o.events[0], "irq/irq_handler_entry");
	/* -e takes a bare NAME as an event (looked up in every group) ... */
	ck_assert_str_eq(o.events[1], "sched_switch");
	/* ... and a bare word between options is a category */
	ck_assert_uint_eq(o.n_categories, 1);
	ck_assert_str_eq(o.categories[0], "idle");
	ck_assert(o.hypervisor);
	ck_assert(o.quiet);
	ck_assert_uint_eq(o.sys_stats, RECORDER_SYS_MEMINFO | RECORDER_SYS_VMSTAT | RECORDER_SYS_BUDDYINFO |
					RECORDER_SYS_PSI | RECORDER_SYS_CPUFREQ);
	ck_assert_uint_eq(o.sys_stats_period_ms, 100);
	ck_assert(!o.system_info);
	ck_assert(!o.symbolize_ksyms);
}
END_TEST

START_TEST(test_defaults)
{
	struct recorder_options o;

	ck_assert_int_eq(recorder_parse_args(ARGS("-o", "z"), &o), 0);
	ck_assert(o.system_info);
	ck_assert(o.symbolize_ksyms);
	ck_assert(o.process_names);
	ck_assert_uint_eq(o.sys_stats, 0);
	ck_assert_uint_eq(o.sys_stats_period_ms, 250);
	ck_assert_uint_eq(o.n_events + o.n_categories, 0);
}
END_TEST

START_TEST(test_subbuf_size_option)
{
	struct recorder_options o;

	ck_assert_int_eq(recorder_parse_args(ARGS("-o", "z"), &o), 0);
	ck_assert(!o.subbuf_given);
	ck_assert_int_eq(recorder_parse_args(ARGS("-o", "z", "--subbuf-size", "64k"), &o), 0);
	ck_assert(o.subbuf_given);
	ck_assert_uint_eq(o.subbuf_kb, 64);
	ck_assert_int_eq(recorder_parse_args(ARGS("-o", "z", "--subbuf-size", "4"), &o), 0);
	ck_assert_uint_eq(o.subbuf_kb, 4);
	ck_assert_int_eq(recorder_parse_args(ARGS("-o", "z", "--subbuf-size=512k"), &o), 0);
	ck_assert_uint_eq(o.subbuf_kb, 512);
	ck_assert_int_eq(recorder_parse_args(ARGS("-o", "z", "--subbuf-size", "0"), &o), 0);
	ck_assert(o.subbuf_given);
	ck_assert_uint_eq(o.subbuf_kb, 0);
	/* Not a power of two, below a page, above what the kernel takes, not a size. */
	assert_refused(ARGS("-o", "x", "--subbuf-size", "48k"), "'48k'");
	assert_refused(ARGS("-o", "x", "--subbuf-size", "2k"), "'2k'");
	assert_refused(ARGS("-o", "x", "--subbuf-size", "1m"), "'1m'");
	assert_refused(ARGS("-o", "x", "--subbuf-size", "big"), "'big'");
	assert_refused(ARGS("-o", "x", "--subbuf-size"), "'--subbuf-size'");
}
END_TEST

START_TEST(test_wrong_words_named)
{
	assert_refused(ARGS("-o", "x", "--bogus"), "'--bogus'");
	assert_refused(ARGS("-o", "x", "--bogus=3"), "'--bogus'");
	assert_refused(ARGS("-o", "x", "-Z"), "'-Z'");
	assert_refused(ARGS("-o", "x", "-t"), "'-t'");
	assert_refused(ARGS("-o", "x", "--time"), "'--time'");
	assert_refused(ARGS("-o", "x", "--quiet=yes"), "'--quiet'");
	assert_refused(ARGS("-o", "x", "-t", "soon"), "'soon'");
	assert_refused(ARGS("-o", "x", "-b", "lots"), "'lots'");
	assert_refused(ARGS("-o", "x", "sched/"), "'sched/'");
	assert_refused(ARGS("-o", "x", "/sched_switch"), "'/sched_switch'");
	assert_refused(ARGS("-o", "x", "a/b/c"), "'a/b/c'");
	assert_refused(ARGS("-o", "x", "sch\"ed"), "sch\"ed");
	assert_refused(ARGS("-o", "x", "--sys-stats=meminfo,bogus"), "'bogus'");
	assert_refused(ARGS("-o", "x", "--sys-stats-period", "fast"), "'fast'");
	assert_refused(ARGS("-o", "x", "-p", "0"), "'0'");
	assert_refused(ARGS("sched"), "-o FILE");
	assert_refused(ARGS("-o", "x", "-c", "cfg", "sched"), "'sched'");
}
END_TEST

START_TEST(test_sys_stats_lists)
{
	char err[256];
	uint32_t m;

	ck_assert_int_eq(recorder_parse_sys_stats(NULL, &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(m, RECORDER_SYS_DEFAULT);
	ck_assert_int_eq(recorder_parse_sys_stats("default", &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(m, RECORDER_SYS_MEMINFO | RECORDER_SYS_VMSTAT | RECORDER_SYS_STAT |
			     RECORDER_SYS_CPUFREQ);
	ck_assert_int_eq(recorder_parse_sys_stats("psi,thermal", &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(m, RECORDER_SYS_PSI | RECORDER_SYS_THERMAL);
	ck_assert_int_eq(recorder_parse_sys_stats("all", &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(__builtin_popcount(m), 12);
	ck_assert_int_eq(recorder_parse_sys_stats("meminfo,", &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(m, RECORDER_SYS_MEMINFO);
	ck_assert_int_eq(recorder_parse_sys_stats("mem", &m, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "'mem'"), "%s", err);
	ck_assert_int_eq(recorder_parse_sys_stats("meminfo,,vmstat", &m, err, sizeof(err)), -EINVAL);
}
END_TEST

/* ---- the config --------------------------------------------------------- */

static Perfetto__Protos__TraceConfig *config_of(int argc, char **argv)
{
	Perfetto__Protos__TraceConfig *cfg = NULL;
	struct recorder_options o;
	char err[256] = "";

	ck_assert_int_eq(recorder_parse_args(argc, argv, &o), 0);
	ck_assert_msg(recorder_config_from_options(&o, &cfg, err, sizeof(err)) == 0, "%s", err);
	return cfg;
}

static const Perfetto__Protos__DataSourceConfig *find_ds(const Perfetto__Protos__TraceConfig *c,
							  const char *name)
{
	for (size_t i = 0; i < c->n_data_sources; i++)
		if (strcmp(c->data_sources[i]->config->name, name) == 0)
			return c->data_sources[i]->config;
	return NULL;
}

static bool has_string(char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/*
 * `record -t 1s sched freq idle` asks for what `perfetto -t 1s sched freq
 * idle` sends (tests/data/configs/cmdline_sched_freq_idle.cfg): the same
 * data sources, categories, symbolize_ksyms, duration and flush period.
 * record adds its own kernel-buffer and drain settings, the process events
 * that keep names current, and a /proc scan in a second buffer.
 */
START_TEST(test_same_config_as_perfetto_t)
{
	Perfetto__Protos__TraceConfig *ours = config_of(ARGS("-o", "x", "-t", "1s", "sched", "freq", "idle"));
	Perfetto__Protos__TraceConfig *ref = NULL;
	const Perfetto__Protos__FtraceConfig *a, *b;
	char path[4200], err[256] = "";

	snprintf(path, sizeof(path), "%s/tests/data/configs/cmdline_sched_freq_idle.cfg", source_root);
	ck_assert_msg(recorder_config_load(path, &ref, err, sizeof(err)) == 0, "%s", err);

	/* the same data sources, and no other */
	ck_assert_uint_eq(ours->n_data_sources, ref->n_data_sources);
	for (size_t i = 0; i < ref->n_data_sources; i++)
		ck_assert_msg(find_ds(ours, ref->data_sources[i]->config->name), "%s missing",
			      ref->data_sources[i]->config->name);
	a = find_ds(ours, "linux.ftrace")->ftrace_config;
	b = find_ds(ref, "linux.ftrace")->ftrace_config;
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->n_atrace_categories, b->n_atrace_categories);
	for (size_t i = 0; i < b->n_atrace_categories; i++)
		ck_assert_str_eq(a->atrace_categories[i], b->atrace_categories[i]);
	ck_assert_uint_eq(a->n_atrace_apps, 0);
	for (size_t i = 0; i < b->n_ftrace_events; i++)
		ck_assert(has_string(a->ftrace_events, a->n_ftrace_events, b->ftrace_events[i]));
	/* no default sched_switch/sched_waking when categories were given */
	ck_assert(!has_string(a->ftrace_events, a->n_ftrace_events, "sched/sched_switch"));
	ck_assert(a->has_symbolize_ksyms && a->symbolize_ksyms == b->symbolize_ksyms);
	ck_assert_uint_eq(ours->duration_ms, ref->duration_ms);
	ck_assert_uint_eq(ours->flush_period_ms, ref->flush_period_ms);
	ck_assert(!ours->write_into_file);
	ck_assert_uint_ge(ours->buffers[0]->size_kb, ref->buffers[0]->size_kb);
	/* perfetto -t leaves the process_stats and system_info configs empty */
	ck_assert_ptr_null(find_ds(ref, "linux.process_stats")->process_stats_config);
	ck_assert_ptr_nonnull(find_ds(ours, "linux.system_info"));
	protobuf_c_message_free_unpacked(&ours->base, NULL);
	protobuf_c_message_free_unpacked(&ref->base, NULL);
}
END_TEST

START_TEST(test_events_and_categories_in_config)
{
	Perfetto__Protos__TraceConfig *c = config_of(ARGS("-o", "x", "irq", "sched/sched_blocked_reason",
							  "-e", "power/*", "--no-process-names"));
	const Perfetto__Protos__FtraceConfig *f = find_ds(c, "linux.ftrace")->ftrace_config;

	ck_assert_uint_eq(f->n_ftrace_events, 2);
	ck_assert_str_eq(f->ftrace_events[0], "power/*");
	ck_assert_str_eq(f->ftrace_events[1], "sched/sched_blocked_reason");
	ck_assert_uint_eq(f->n_atrace_categories, 1);
	ck_assert_str_eq(f->atrace_categories[0], "irq");
	ck_assert_ptr_null(find_ds(c, "linux.process_stats"));
	ck_assert_ptr_nonnull(find_ds(c, "linux.system_info"));
	ck_assert_ptr_null(find_ds(c, "linux.sys_stats"));
	ck_assert_uint_eq(c->n_buffers, 1);
	protobuf_c_message_free_unpacked(&c->base, NULL);
}
END_TEST

START_TEST(test_sys_stats_in_config)
{
	Perfetto__Protos__TraceConfig *c = config_of(ARGS("-o", "x", "--sys-stats"));
	const Perfetto__Protos__DataSourceConfig *ds = find_ds(c, "linux.sys_stats");
	const Perfetto__Protos__SysStatsConfig *s;

	ck_assert_ptr_nonnull(ds);
	s = ds->sys_stats_config;
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(s->meminfo_period_ms, 250);
	ck_assert_uint_eq(s->vmstat_period_ms, 250);
	ck_assert_uint_eq(s->stat_period_ms, 250);
	ck_assert_uint_eq(s->cpufreq_period_ms, 250);
	ck_assert(!s->has_psi_period_ms && !s->has_diskstat_period_ms);
	/* empty lists: every counter, as in Perfetto */
	ck_assert_uint_eq(s->n_meminfo_counters + s->n_vmstat_counters + s->n_stat_counters, 0);
	/* with the slow data sources, not in the ftrace buffer */
	ck_assert_uint_eq(ds->target_buffer, 1);
	protobuf_c_message_free_unpacked(&c->base, NULL);

	/* the disk category polls diskstats every second, as perfetto -t */
	c = config_of(ARGS("-o", "x", "--no-process-names", "disk"));
	ds = find_ds(c, "linux.sys_stats");
	ck_assert_ptr_nonnull(ds);
	ck_assert_uint_eq(ds->sys_stats_config->diskstat_period_ms, 1000);
	ck_assert(!ds->sys_stats_config->has_meminfo_period_ms);
	ck_assert_uint_eq(ds->target_buffer, 0);
	protobuf_c_message_free_unpacked(&c->base, NULL);

	/* and a chosen list at a chosen period keeps its own diskstat period */
	c = config_of(ARGS("-o", "x", "--sys-stats=psi,diskstat", "--sys-stats-period=2s", "disk",
			      "--no-system-info"));
	ds = find_ds(c, "linux.sys_stats");
	ck_assert_uint_eq(ds->sys_stats_config->psi_period_ms, 2000);
	ck_assert_uint_eq(ds->sys_stats_config->diskstat_period_ms, 2000);
	ck_assert_ptr_null(find_ds(c, "linux.system_info"));
	protobuf_c_message_free_unpacked(&c->base, NULL);
}
END_TEST

START_TEST(test_hypervisor_instance)
{
	Perfetto__Protos__TraceConfig *c = config_of(ARGS("-o", "x", "sched", "hyp"));
	size_t n = 0;

	for (size_t i = 0; i < c->n_data_sources; i++) {
		const Perfetto__Protos__FtraceConfig *f = c->data_sources[i]->config->ftrace_config;

		if (strcmp(c->data_sources[i]->config->name, "linux.ftrace") != 0)
			continue;
		n++;
		if (f->instance_name) {
			ck_assert_str_eq(f->instance_name, "hyp");
			ck_assert_uint_eq(f->n_ftrace_events, 1);
			ck_assert_str_eq(f->ftrace_events[0], "hyp/*");
		}
	}
	ck_assert_uint_eq(n, 2);
	protobuf_c_message_free_unpacked(&c->base, NULL);
}
END_TEST

/* --previous-boot: linux.frozen_ftrace of the instance, and nothing of this boot's ftrace. */
START_TEST(test_previous_boot)
{
	static const char *const want[][2] = { { NULL, "boot_mapped" }, { "--previous-boot=oops", "oops" } };

	for (size_t k = 0; k < ARRAY_SIZE(want); k++) {
		Perfetto__Protos__TraceConfig *c = want[k][0] ? config_of(ARGS("-o", "x", (char *)want[k][0]))
							       : config_of(ARGS("-o", "x", "--previous-boot"));
		size_t frozen = 0;

		for (size_t i = 0; i < c->n_data_sources; i++) {
			const Perfetto__Protos__DataSourceConfig *d = c->data_sources[i]->config;

			ck_assert_str_ne(d->name, "linux.ftrace");
			ck_assert_str_ne(d->name, "linux.process_stats");
			if (strcmp(d->name, "linux.frozen_ftrace") == 0) {
				frozen++;
				ck_assert_ptr_nonnull(d->frozen_ftrace_config);
				ck_assert_str_eq(d->frozen_ftrace_config->instance_name, want[k][1]);
			}
		}
		ck_assert_uint_eq(frozen, 1);
		/* a short session: its last flush reads the whole buffer */
		ck_assert(c->has_duration_ms && c->duration_ms > 0 && c->duration_ms <= 1000);
		protobuf_c_message_free_unpacked(&c->base, NULL);
	}
	assert_refused(ARGS("-o", "x", "--previous-boot", "sched/sched_switch"), "events or categories");
	assert_refused(ARGS("-o", "x", "--previous-boot", "-i", "foo"), "--previous-boot=NAME");
	assert_refused(ARGS("-o", "x", "--previous-boot", "-c", "cfg"), "-c config");
}
END_TEST

/* The daemon's options: the same one-line answers, before anything is touched. */
static void assert_daemon_refused(int argc, char **argv, const char *word)
{
	_cleanup_free_ char *msg = NULL;
	int rc;

	capture_begin();
	rc = daemon_main(argc, argv);
	msg = capture_end();
	ck_assert_int_eq(rc, 2);
	ck_assert_msg(strstr(msg, word) != NULL, "'%s' not named in: %s", word, msg);
	ck_assert_msg(strstr(msg, "Usage:") == NULL, "usage printed: %s", msg);
}

START_TEST(test_daemon_wrong_words_named)
{
	assert_daemon_refused(2, (char *[]){ "traced-probes", "--bogus", NULL }, "'--bogus'");
	assert_daemon_refused(2, (char *[]){ "traced-probes", "--bogus", NULL }, "'traced-probes --help'");
	assert_daemon_refused(2, (char *[]){ "traced-probes", "-s", NULL }, "'-s'");
	assert_daemon_refused(2, (char *[]){ "traced-probes", "-Q", NULL }, "'-Q'");
	assert_daemon_refused(2, (char *[]){ "traced-probes", "--help=1", NULL }, "'--help'");
	assert_daemon_refused(2, (char *[]){ "traced-probes", "frob", NULL }, "'frob'");
	assert_daemon_refused(3, (char *[]){ "traced-probes", "-l", "loud", NULL }, "'loud'");
}
END_TEST

/* ---- does it exist? (a fixture tracefs) --------------------------------- */

static char fixture[] = "/tmp/tp-record-cli-XXXXXX";

static void write_fixture(void)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/available_events", fixture);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("sched:sched_switch\nsched:sched_waking\nirq:irq_handler_entry\npower:cpu_idle\n", f);
	fclose(f);
}

static int check(int argc, char **argv, char **ret_error)
{
	struct recorder_options o;

	ck_assert_int_eq(recorder_parse_args(argc, argv, &o), 0);
	return recorder_check_events(&o, fixture, ret_error);
}

START_TEST(test_check_events)
{
	char *why = NULL;

	write_fixture();
	/* the defaults need no check */
	ck_assert_int_eq(check(ARGS("-o", "x", "-q"), &why), 0);
	ck_assert_int_eq(check(ARGS("-o", "x", "sched/sched_switch"), &why), 0);
	ck_assert_int_eq(check(ARGS("-o", "x", "sched/*"), &why), 0);
	ck_assert_int_eq(check(ARGS("-o", "x", "-e", "cpu_idle"), &why), 0);
	ck_assert_int_eq(check(ARGS("-o", "x", "sched"), &why), 0);
	/* some unknown: the data source reports those, the rest records */
	ck_assert_int_eq(check(ARGS("-o", "x", "sched/nope", "irq/irq_handler_entry"), &why), 0);
	ck_assert_ptr_null(why);

	/* nothing that exists: refused, with every unknown word listed */
	ck_assert_int_eq(check(ARGS("-o", "x", "-e", "sched/nope"), &why), -ENOENT);
	ck_assert_ptr_nonnull(why);
	ck_assert_msg(strstr(why, "sched/nope"), "%s", why);
	ck_assert_msg(strstr(why, "available_events"), "%s", why);
	free(why);
	why = NULL;
	ck_assert_int_eq(check(ARGS("-o", "x", "nosuchcat", "irq/nope", "nope/*"), &why), -ENOENT);
	ck_assert_msg(strstr(why, "nosuchcat") && strstr(why, "irq/nope") && strstr(why, "nope/*"), "%s",
		      why);
	free(why);
	why = NULL;
	/* a group name is not an event name */
	ck_assert_int_eq(check(ARGS("-o", "x", "-e", "sched"), &why), -ENOENT);
	free(why);
	why = NULL;
	/* a tracefs we cannot read: left to the data source */
	ck_assert_int_eq(check(ARGS("-o", "x", "sched/nope"), NULL) , -ENOENT);
	{
		struct recorder_options o;

		ck_assert_int_eq(recorder_parse_args(ARGS("-o", "x", "sched/nope"), &o), 0);
		ck_assert_int_eq(recorder_check_events(&o, "/nonexistent-tracefs", &why), 0);
		ck_assert_ptr_null(why);
	}
}
END_TEST

/* ---- configs that would record nothing: refused before anything starts -- */

/* @text (of @len bytes) as a config file in the fixture; returns its path in @path */
static void write_config(char *path, size_t path_len, const char *name, const char *text,
			 size_t len)
{
	int fd;

	snprintf(path, path_len, "%s/%s", fixture, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, text, len), 0);
	close(fd);
}

/* a linux.ftrace config with @n events, each "sched/" + @name_len bytes */
static char *ftrace_config_text(size_t n, size_t name_len, size_t *ret_len)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	fprintf(f, "buffers { size_kb: 1024 }\n"
		   "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n");
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "  ftrace_events: \"sched/");
		for (size_t k = 0; k < name_len; k++)
			fputc('a' + (int)((i + k) % 26), f);
		fprintf(f, "\"\n");
	}
	fprintf(f, "} } }\nduration_ms: 1000\n");
	ck_assert_int_eq(fclose(f), 0);
	*ret_len = len;
	return text;
}

/*
 * The inputs: 7,000 copies of an event, a 1 MB event name, a data
 * source config too large for one IPC frame, a file over the size limit, an
 * empty and a one-byte config, and one that names no data source of ours:
 * each is refused with its limit named, before the output file exists.
 */
START_TEST(test_record_refuses_configs)
{
	static const struct {
		size_t events, name_len;
		const char *raw;          /* instead of events */
		size_t raw_len;
		const char *want;
	} cases[] = {
		{ 7000, 12, NULL, 0, "lists 7000 ftrace_events, more than the limit of 4096" },
		{ 1, 1 << 20, NULL, 0, "has an ftrace_events[0] of 1048582 bytes, more than the limit of 255" },
		{ 3000, 45, NULL, 0, "more than the limit of 122880 (120 KiB)" },
		{ 0, 0, "", 0, "names no data source this program records (0 named)" },
		{ 0, 0, " ", 1, "names no data source this program records (0 named)" },
		{ 0, 0, "\x00", 1, "neither a text nor a binary TraceConfig" },
		{ 0, 0, "data_sources { config { name: \"android.power\" } }", 0,
		  "names no data source this program records (1 named); it records linux.ftrace" },
		{ 0, 0, "data_sources { config { name: \"linux.ftrace\" ftrace_config { instance_name: \""
			"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
			"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
			"0123456789012345678901234567890123456789012345678901234567890123456789\" } } }",
		  0, "has an instance_name of 270 bytes, more than the limit of 255" },
	};
	char cfg[512], out[512];
	struct stat st;

	snprintf(out, sizeof(out), "%s/refused.pftrace", fixture);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *text = NULL, *msg = NULL;
		struct recorder_options o;
		size_t len;
		int r;

		if (cases[i].raw) {
			len = cases[i].raw_len ? cases[i].raw_len : strlen(cases[i].raw);
			write_config(cfg, sizeof(cfg), "refused.cfg", cases[i].raw, len);
		} else {
			text = ftrace_config_text(cases[i].events, cases[i].name_len, &len);
			write_config(cfg, sizeof(cfg), "refused.cfg", text, len);
		}
		recorder_options_init(&o);
		o.config_path = cfg;
		o.output = out;
		o.quiet = true;
		capture_begin();
		r = recorder_run(&o);
		msg = capture_end();
		ck_assert_msg(r < 0, "case %zu accepted", i);
		ck_assert_msg(strstr(msg, cases[i].want), "case %zu: '%s' not in: %s", i, cases[i].want, msg);
		ck_assert_msg(stat(out, &st) < 0, "case %zu left an output file", i);
		(void)unlink(cfg);
	}
}
END_TEST

/* Over the file size limit: the limit is named, not "File too large". */
START_TEST(test_record_refuses_huge_file)
{
	_cleanup_free_ char *text = calloc(RECORDER_CONFIG_MAX_BYTES + 1, 1), *msg = NULL;
	struct recorder_options o;
	char cfg[512], out[512];
	int r;

	ck_assert_ptr_nonnull(text);
	memset(text, ' ', RECORDER_CONFIG_MAX_BYTES + 1);
	write_config(cfg, sizeof(cfg), "huge.pbtxt", text, RECORDER_CONFIG_MAX_BYTES + 1);
	snprintf(out, sizeof(out), "%s/huge.pftrace", fixture);
	recorder_options_init(&o);
	o.config_path = cfg;
	o.output = out;
	o.quiet = true;
	capture_begin();
	r = recorder_run(&o);
	msg = capture_end();
	ck_assert_int_eq(r, -E2BIG);
	ck_assert_msg(strstr(msg, "larger than 4 MiB, the limit for a config file"), "%s", msg);
	(void)unlink(cfg);
}
END_TEST

/* The example configs and the flags' own config pass the same checks. */
START_TEST(test_record_config_check_passes_examples)
{
	static const char *const examples[] = { "sched.pbtxt", "sched-process-names.pbtxt",
						"long-ring-buffer.pbtxt" };
	Perfetto__Protos__TraceConfig *cfg = NULL;
	struct recorder_options o;
	char path[4200], err[512] = "";

	for (size_t i = 0; i < ARRAY_SIZE(examples); i++) {
		snprintf(path, sizeof(path), "%s/config/%s", source_root, examples[i]);
		ck_assert_int_eq(recorder_config_load(path, &cfg, err, sizeof(err)), 0);
		ck_assert_msg(recorder_config_check(cfg, err, sizeof(err)) == 0, "%s: %s", examples[i], err);
		protobuf_c_message_free_unpacked(&cfg->base, NULL);
	}
	recorder_options_init(&o);
	ck_assert_int_eq(recorder_config_from_options(&o, &cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(recorder_config_check(cfg, err, sizeof(err)), 0);
	protobuf_c_message_free_unpacked(&cfg->base, NULL);
}
END_TEST

/* ---- --cleanup-after-crash says what it could not do ---------------------- */

/* `traced-probes --cleanup-after-crash` on @state_dir: exit status, output in @out */
static int run_cleanup(const char *state_dir, char *out, size_t len)
{
	const char *build = getenv("TP_BUILD_ROOT");
	_cleanup_free_ char *cmd = NULL;
	size_t n;
	FILE *f;
	int st;

	ck_assert_int_ge(asprintf(&cmd, "TRACED_PROBES_STATE_DIR=%s %s/probes/traced-probes "
				  "--cleanup-after-crash 2>&1", state_dir, build ? build : "."), 0);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	st = pclose(f);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/*
 * An unparseable state file, and one whose owner (this test) still runs:
 * each named with the reason, nothing touched, exit 1.  Nothing at all to
 * restore is not an error.
 */
START_TEST(test_cleanup_after_crash_reports)
{
	char dir[] = "/tmp/tp-cleanup-XXXXXX", bad[512], live[512], text[512], out[4096];
	struct statfs sfs;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(run_cleanup(dir, out, sizeof(out)), 0);

	snprintf(bad, sizeof(bad), "%s/ftrace-bad.undo", dir);
	{
		int fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write_all(fd, "not a state file\n", 17), 0);
		close(fd);
	}
	ck_assert_int_eq(run_cleanup(dir, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, bad) && strstr(out, "not a state file this program wrote"), "%s", out);
	ck_assert_msg(strstr(out, "could not restore everything"), "%s", out);
	(void)unlink(bad);

	/* the owner check comes after the directory is found to be tracefs */
	if (statfs("/sys/kernel/tracing", &sfs) == 0 && sfs.f_type == 0x74726163) {
		_cleanup_free_ char *on = NULL;
		int fd;

		/* the value it holds now: were the owner check ever skipped, the replay changes nothing */
		if (read_full_file_at(AT_FDCWD, "/sys/kernel/tracing/tracing_on", 16, &on, NULL) < 0)
			on = strdup("1");
		ck_assert_ptr_nonnull(on);
		on[strcspn(on, "\n")] = '\0';
		snprintf(live, sizeof(live), "%s/ftrace-live.undo", dir);
		snprintf(text, sizeof(text), "traced-probes-ftrace-undo 2\npid %d\n"
			 "dir /sys/kernel/tracing\ntruncate 0\nw tracing_on %s\n", (int)getpid(), on);
		fd = open(live, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write_all(fd, text, strlen(text)), 0);
		close(fd);
		ck_assert_int_eq(run_cleanup(dir, out, sizeof(out)), 1);
		ck_assert_msg(strstr(out, live) && strstr(out, "still running"), "%s", out);
		/* left in place for when its owner is gone */
		ck_assert_int_eq(access(live, F_OK), 0);
		(void)unlink(live);
	}
	(void)rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("record_cli");
	TCase *tc = tcase_create("record_cli");
	const char *root = getenv("TP_SOURCE_ROOT");
	char path[256];
	SRunner *sr;
	int failed;

	snprintf(source_root, sizeof(source_root), "%s", root ? root : ".");
	if (!mkdtemp(fixture))
		return 1;
	tcase_add_test(tc, test_words_as_perfetto_t);
	tcase_add_test(tc, test_options_words_mix);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_subbuf_size_option);
	tcase_add_test(tc, test_wrong_words_named);
	tcase_add_test(tc, test_sys_stats_lists);
	tcase_add_test(tc, test_same_config_as_perfetto_t);
	tcase_add_test(tc, test_events_and_categories_in_config);
	tcase_add_test(tc, test_sys_stats_in_config);
	tcase_add_test(tc, test_hypervisor_instance);
	tcase_add_test(tc, test_previous_boot);
	tcase_add_test(tc, test_check_events);
	tcase_add_test(tc, test_daemon_wrong_words_named);
	tcase_add_test(tc, test_record_refuses_configs);
	tcase_add_test(tc, test_record_refuses_huge_file);
	tcase_add_test(tc, test_record_config_check_passes_examples);
	tcase_add_test(tc, test_cleanup_after_crash_reports);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	snprintf(path, sizeof(path), "%s/available_events", fixture);
	(void)unlink(path);
	(void)rmdir(fixture);
	return failed ? 1 : 0;
}
