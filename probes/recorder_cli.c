/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `traced-probes record`'s command line: options, the positional words
 * `perfetto -t` takes (ftrace events and atrace categories), --sys-stats
 * lists, and a check, before tracefs is touched, that what was asked for
 * exists on this kernel.  Every refusal names the word that was wrong.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "probes/recorder.h"
#include "util/util.h"

#define AVAILABLE_EVENTS_MAX (16u << 20)

/* ---- words -------------------------------------------------------------- */

static bool event_word_ok(const char *w)
{
	const char *slash = strchr(w, '/');

	/* GROUP/NAME: one slash, neither half empty */
	if (!slash || slash == w || !slash[1] || strchr(slash + 1, '/'))
		return false;
	/*
	 * '-' too and no length bound, where event_name_ok() in
	 * recorder_config.c takes neither: this check only tells an event word
	 * from a category; the config step decides (-EINVAL) before anything
	 * is written.  Kept apart so that the messages stay as they were.
	 */
	return name_valid(w, SIZE_MAX, NAME_SLASH | NAME_STAR | NAME_DASH);
}

static bool category_word_ok(const char *w)
{
	return name_valid(w, 64, NAME_DASH);
}

int recorder_add_specifier(struct recorder_options *o, const char *word, char *err, size_t err_len)
{
	if (strchr(word, '/')) {
		if (!event_word_ok(word)) {
			snprintf(err, err_len, "'%s' is not an ftrace event (GROUP/NAME or GROUP/*)", word);
			return -EINVAL;
		}
		if (o->n_events >= RECORDER_MAX_EVENTS) {
			snprintf(err, err_len, "'%s': too many events (at most %d)", word,
				 RECORDER_MAX_EVENTS);
			return -E2BIG;
		}
		o->events[o->n_events++] = word;
		return 0;
	}
	if (strcmp(word, "hyp") == 0 || strcmp(word, "hypervisor") == 0) {
		o->hypervisor = true;
		return 0;
	}
	if (!category_word_ok(word)) {
		snprintf(err, err_len, "'%s' is neither an atrace category nor an ftrace event "
			 "(GROUP/NAME)", word);
		return -EINVAL;
	}
	if (o->n_categories >= RECORDER_MAX_CATEGORIES) {
		snprintf(err, err_len, "'%s': too many categories (at most %d)", word,
			 RECORDER_MAX_CATEGORIES);
		return -E2BIG;
	}
	for (size_t i = 0; i < o->n_categories; i++)
		if (strcmp(o->categories[i], word) == 0)
			return 0;
	o->categories[o->n_categories++] = word;
	return 0;
}

static const struct {
	const char *name;
	uint32_t mask;
} sys_stats_words[] = {
	{ "meminfo", RECORDER_SYS_MEMINFO },
	{ "vmstat", RECORDER_SYS_VMSTAT },
	{ "stat", RECORDER_SYS_STAT },
	{ "cpufreq", RECORDER_SYS_CPUFREQ },
	{ "devfreq", RECORDER_SYS_DEVFREQ },
	{ "buddyinfo", RECORDER_SYS_BUDDYINFO },
	{ "diskstat", RECORDER_SYS_DISKSTAT },
	{ "psi", RECORDER_SYS_PSI },
	{ "thermal", RECORDER_SYS_THERMAL },
	{ "cpuidle", RECORDER_SYS_CPUIDLE },
	{ "gpufreq", RECORDER_SYS_GPUFREQ },
	{ "slab", RECORDER_SYS_SLAB },
	/* presets */
	{ "default", RECORDER_SYS_DEFAULT },
	{ "memory", RECORDER_SYS_MEMINFO | RECORDER_SYS_VMSTAT | RECORDER_SYS_BUDDYINFO | RECORDER_SYS_PSI },
	{ "cpu", RECORDER_SYS_STAT | RECORDER_SYS_CPUFREQ | RECORDER_SYS_CPUIDLE | RECORDER_SYS_THERMAL |
		 RECORDER_SYS_PSI },
	{ "io", RECORDER_SYS_DISKSTAT | RECORDER_SYS_PSI | RECORDER_SYS_VMSTAT },
	{ "all", RECORDER_SYS_MEMINFO | RECORDER_SYS_VMSTAT | RECORDER_SYS_STAT | RECORDER_SYS_CPUFREQ |
		 RECORDER_SYS_DEVFREQ | RECORDER_SYS_BUDDYINFO | RECORDER_SYS_DISKSTAT | RECORDER_SYS_PSI |
		 RECORDER_SYS_THERMAL | RECORDER_SYS_CPUIDLE | RECORDER_SYS_GPUFREQ | RECORDER_SYS_SLAB },
};

int recorder_parse_sys_stats(const char *list, uint32_t *ret, char *err, size_t err_len)
{
	uint32_t mask = 0;
	const char *p = list;

	if (!list || !*list) {
		*ret = RECORDER_SYS_DEFAULT;
		return 0;
	}
	while (*p) {
		size_t n = strcspn(p, ",");
		bool found = false;

		for (size_t i = 0; i < ARRAY_SIZE(sys_stats_words); i++)
			if (strlen(sys_stats_words[i].name) == n && strncmp(sys_stats_words[i].name, p, n) == 0) {
				mask |= sys_stats_words[i].mask;
				found = true;
				break;
			}
		if (!found) {
			snprintf(err, err_len, "unknown --sys-stats source '%.*s' (meminfo, vmstat, stat, "
				 "cpufreq, devfreq, buddyinfo, diskstat, psi, thermal, cpuidle, gpufreq, slab; "
				 "presets default, memory, cpu, io, all)", (int)MIN(n, (size_t)64), p);
			return -EINVAL;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	*ret = mask;
	return 0;
}

/* ---- does what was asked for exist? --------------------------------------- */

/* The mount point of tracefs, from /proc/self/mounts; NULL if none. */
static char *find_tracefs(void)
{
	_cleanup_free_ char *mounts = NULL;
	size_t len;
	char *line, *save = NULL;

	if (read_full_file_at(AT_FDCWD, "/proc/self/mounts", 1u << 20, &mounts, &len) < 0)
		return NULL;
	for (line = strtok_r(mounts, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char dev[256], dir[4096], type[64];

		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 && strcmp(type, "tracefs") == 0)
			return strdup(dir);
	}
	return NULL;
}

/*
 * @spec as the data source resolves it against "group:name" lines:
 * GROUP/NAME, GROUP/ * (any event of the group), or a bare NAME in any group.
 */
static bool event_available(const char *avail, const char *spec)
{
	const char *slash = strchr(spec, '/');
	size_t glen = slash ? (size_t)(slash - spec) : 0;
	const char *name = slash ? slash + 1 : spec;
	bool any_name = strcmp(name, "*") == 0;

	/* other wildcards are the data source's to resolve */
	if (strchr(name, '*') && !any_name)
		return true;
	for (const char *line = avail; *line;) {
		const char *end = strchrnul(line, '\n');
		const char *colon = memchr(line, ':', (size_t)(end - line));

		if (colon) {
			size_t lg = (size_t)(colon - line), ln = (size_t)(end - colon - 1);
			bool group_ok = !slash || (lg == glen && strncmp(line, spec, glen) == 0);
			bool name_ok = any_name || (ln == strlen(name) && strncmp(colon + 1, name, ln) == 0);

			if (group_ok && name_ok)
				return true;
		}
		line = *end ? end + 1 : end;
	}
	return false;
}

int recorder_check_events(const struct recorder_options *o, const char *tracefs_root,
			  char **ret_error)
{
	_cleanup_free_ char *root = NULL, *path = NULL, *avail = NULL, *unknown = NULL;
	size_t len, usable = 0, asked = o->n_events + o->n_categories;
	FILE *f;
	int r;

	/* the defaults exist everywhere; a -c config is the data source's to check */
	if (asked == 0 || o->config_path)
		return 0;
	if (!tracefs_root) {
		root = find_tracefs();
		if (!root)
			return 0;
		tracefs_root = root;
	}
	path = strdup_printf("%s/available_events", tracefs_root);
	if (!path)
		return -ENOMEM;
	r = read_full_file_at(AT_FDCWD, path, AVAILABLE_EVENTS_MAX, &avail, &len);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0;       /* no access: the data source says what it can */

	f = open_memstream(&unknown, &len);
	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < o->n_events; i++) {
		if (event_available(avail, o->events[i]))
			usable++;
		else
			fprintf(f, "%s%s", ftell(f) ? ", " : "", o->events[i]);
	}
	for (size_t i = 0; i < o->n_categories; i++) {
		if (ftrace_atrace_category_known(o->categories[i]))
			usable++;
		else
			fprintf(f, "%s%s (not a kernel atrace category)", ftell(f) ? ", " : "",
				o->categories[i]);
	}
	if (fclose(f) != 0 || !unknown)
		return -ENOMEM;
	if (usable > 0)
		return 0;
	if (ret_error)
		*ret_error = strdup_printf("nothing to record: no event asked for exists on this kernel: %s "
					   "(see %s)", unknown, path);
	return -ENOENT;
}

/* ---- options ------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: traced-probes record -o FILE [options] [EVENT|CATEGORY]...\n"
		"Record a trace to FILE (Perfetto format) without a Perfetto install.\n\n"
		"Words after the options are read as `perfetto -t` reads them: GROUP/NAME (or\n"
		"GROUP/*) is an ftrace event, any other word an atrace category (sched, freq,\n"
		"idle, irq, disk, memory, workq, ...), e.g.\n"
		"  traced-probes record -o x.pftrace -t 10s sched freq idle sched/sched_blocked_reason\n"
		"With none, sched/sched_switch and sched/sched_waking are recorded.\n\n"
		"  -o, --output FILE        where to write the trace (required)\n"
		"  -t, --time DURATION      how long to record once tracing is on: 500ms, 10s, 2m\n"
		"                           (default 10s)\n"
		"  -b, --buffer SIZE        per-CPU kernel ring buffer: 4096, 8m (default 8m)\n"
		"  -e, --event GROUP/NAME   an ftrace event to record, repeatable (as a word)\n"
		"      --sys-stats[=LIST]   poll /proc and /sys counters (linux.sys_stats): a comma\n"
		"                           list of meminfo, vmstat, stat, cpufreq, devfreq,\n"
		"                           buddyinfo, diskstat, psi, thermal, cpuidle, gpufreq,\n"
		"                           slab, or the presets default (meminfo,vmstat,stat,\n"
		"                           cpufreq), memory, cpu, io, all\n"
		"      --sys-stats-period DURATION\n"
		"                           how often to poll them (default 250ms)\n"
		"      --no-system-info     leave out linux.system_info (the CPU table)\n"
		"      --no-ksyms           do not ask for kernel symbol names (symbolize_ksyms)\n"
		"      --compact-sched      columnar sched_switch/sched_waking (the default)\n"
		"      --no-compact-sched   one message per sched event\n"
		"      --process-names      scan /proc for process and thread names (default)\n"
		"      --no-process-names   do not\n"
		"  -p, --drain-period MS    how often to read the kernel buffers (default 100)\n"
		"      --drain-buffer-percent N\n"
		"                           read a CPU's buffer at once when it is N %% full\n"
		"                           (default 50; 0: only every drain period)\n"
		"      --subbuf-size SIZE   ring-buffer sub-buffer size, a power of two from 4k\n"
		"                           to 512k (Linux 6.8+; default 64k, no more than a\n"
		"                           32nd of -b; 0: leave the kernel's)\n"
		"  -i, --instance NAME      record from the tracefs instance NAME (must exist)\n"
		"      --previous-boot[=NAME]\n"
		"                           save the previous boot's trace instead: the\n"
		"                           persistent ring buffer of the boot-mapped instance\n"
		"                           NAME (default boot_mapped; Linux 6.12+ booted with\n"
		"                           e.g. reserve_mem=20M:2M:trace\n"
		"                           trace_instance=boot_mapped^traceoff@trace), read\n"
		"                           whole, with kernel symbols, then cleared\n"
		"  -c, --config FILE        a Perfetto TraceConfig (text or binary) instead of\n"
		"                           the options above\n"
		"  -q, --quiet              no progress or summary\n"
		"  -h, --help\n");
}

int recorder_parse_args(int argc, char **argv, struct recorder_options *o)
{
	enum {
		OPT_COMPACT = 256, OPT_NO_COMPACT, OPT_PROCESS, OPT_NO_PROCESS, OPT_WAKE, OPT_SYS_STATS,
		OPT_SYS_PERIOD, OPT_NO_SYSINFO, OPT_NO_KSYMS, OPT_PREVIOUS_BOOT, OPT_SUBBUF,
	};
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "time", required_argument, NULL, 't' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "event", required_argument, NULL, 'e' },
		{ "drain-period", required_argument, NULL, 'p' },
		{ "drain-buffer-percent", required_argument, NULL, OPT_WAKE },
		{ "subbuf-size", required_argument, NULL, OPT_SUBBUF },
		{ "instance", required_argument, NULL, 'i' },
		{ "previous-boot", optional_argument, NULL, OPT_PREVIOUS_BOOT },
		{ "config", required_argument, NULL, 'c' },
		{ "sys-stats", optional_argument, NULL, OPT_SYS_STATS },
		{ "sys-stats-period", required_argument, NULL, OPT_SYS_PERIOD },
		{ "no-system-info", no_argument, NULL, OPT_NO_SYSINFO },
		{ "no-ksyms", no_argument, NULL, OPT_NO_KSYMS },
		{ "compact-sched", no_argument, NULL, OPT_COMPACT },
		{ "no-compact-sched", no_argument, NULL, OPT_NO_COMPACT },
		{ "process-names", no_argument, NULL, OPT_PROCESS },
		{ "no-process-names", no_argument, NULL, OPT_NO_PROCESS },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	char err[512];
	int c;

	recorder_options_init(o);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:t:b:e:p:i:c:qh", longopts, NULL)) >= 0) {
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case 't':
			o->duration_given = true;
			if (recorder_parse_duration_ms(optarg, &o->duration_ms) < 0 || o->duration_ms == 0) {
				log_error("Invalid duration '%s' for -t (e.g. 500ms, 10s, 2m)", optarg);
				return -EINVAL;
			}
			break;
		case 'b':
			if (recorder_parse_size_kb(optarg, &o->buffer_size_kb) < 0) {
				log_error("Invalid buffer size '%s' for -b (e.g. 4096, 8m)", optarg);
				return -EINVAL;
			}
			break;
		case 'e':
			if (!strchr(optarg, '/')) {
				/* -e takes events only; a bare NAME is looked up in every group */
				if (!category_word_ok(optarg)) {
					log_error("'%s' is not an ftrace event (GROUP/NAME)", optarg);
					return -EINVAL;
				}
				if (o->n_events >= RECORDER_MAX_EVENTS) {
					log_error("'%s': too many events (at most %d)", optarg, RECORDER_MAX_EVENTS);
					return -EINVAL;
				}
				o->events[o->n_events++] = optarg;
			} else if (recorder_add_specifier(o, optarg, err, sizeof(err)) < 0) {
				log_error("%s", err);
				return -EINVAL;
			}
			break;
		case 'p': {
			uint32_t ms;

			if (safe_atou32(optarg, &ms) < 0 || ms == 0 || ms > 60000) {
				log_error("Invalid drain period '%s' for -p (1..60000 ms)", optarg);
				return -EINVAL;
			}
			o->drain_period_ms = ms;
			break;
		}
		case OPT_WAKE:
			if (safe_atou32(optarg, &o->drain_buffer_percent) < 0 || o->drain_buffer_percent > 100) {
				log_error("Invalid value '%s' for --drain-buffer-percent (0..100)", optarg);
				return -EINVAL;
			}
			break;
		case OPT_SUBBUF:
			if (strcmp(optarg, "0") == 0) {
				o->subbuf_kb = 0;
			} else if (recorder_parse_size_kb(optarg, &o->subbuf_kb) < 0 || o->subbuf_kb < 4 ||
				   o->subbuf_kb > 512 || (o->subbuf_kb & (o->subbuf_kb - 1))) {
				log_error("Invalid sub-buffer size '%s' for --subbuf-size (4k, 8k, ... 512k; "
					  "0: the kernel's)", optarg);
				return -EINVAL;
			}
			o->subbuf_given = true;
			break;
		case OPT_PREVIOUS_BOOT:
			o->previous_boot = optarg ? optarg : "boot_mapped";
			break;
		case 'i':
			o->instance = optarg;
			break;
		case 'c':
			o->config_path = optarg;
			break;
		case OPT_SYS_STATS: {
			uint32_t mask;

			if (recorder_parse_sys_stats(optarg, &mask, err, sizeof(err)) < 0) {
				log_error("%s", err);
				return -EINVAL;
			}
			o->sys_stats |= mask;
			break;
		}
		case OPT_SYS_PERIOD: {
			uint64_t ms;

			if (recorder_parse_duration_ms(optarg, &ms) < 0 || ms == 0 || ms > 3600000) {
				log_error("Invalid period '%s' for --sys-stats-period (e.g. 100ms, 1s)", optarg);
				return -EINVAL;
			}
			o->sys_stats_period_ms = (uint32_t)ms;
			break;
		}
		case OPT_NO_SYSINFO:
			o->system_info = false;
			break;
		case OPT_NO_KSYMS:
			o->symbolize_ksyms = false;
			break;
		case OPT_COMPACT:
			o->compact_sched = 1;
			break;
		case OPT_NO_COMPACT:
			o->compact_sched = 0;
			break;
		case OPT_PROCESS:
			o->process_names = true;
			break;
		case OPT_NO_PROCESS:
			o->process_names = false;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			log_option_error(c, argv, "traced-probes record --help");
			return -EINVAL;
		}
	}
	for (int i = optind; i < argc; i++)
		if (recorder_add_specifier(o, argv[i], err, sizeof(err)) < 0) {
			log_error("%s", err);
			return -EINVAL;
		}
	if (!o->output) {
		log_error("No output file: record needs -o FILE");
		log_error("Try 'traced-probes record --help'");
		return -EINVAL;
	}
	if (o->config_path && (o->n_events || o->n_categories || o->hypervisor)) {
		log_error("Events and categories come from the -c config: '%s' was given too",
			  o->n_events ? o->events[0] : o->n_categories ? o->categories[0] : "hyp");
		return -EINVAL;
	}
	if (o->previous_boot) {
		if (o->config_path || o->n_events || o->n_categories || o->hypervisor || o->instance) {
			log_error("--previous-boot saves what the previous boot traced: it takes no %s",
				  o->config_path ? "-c config" : o->instance ? "-i instance (use --previous-boot=NAME)"
								 : "events or categories");
			return -EINVAL;
		}
		/* the last flush reads the whole buffer, however short the session */
		if (!o->duration_given)
			o->duration_ms = 100;
		o->process_names = false;
	}
	return 0;
}

int recorder_main(int argc, char **argv)
{
	_cleanup_free_ char *why = NULL;
	struct recorder_options o;
	int r;

	r = recorder_parse_args(argc, argv, &o);
	if (r != 0)
		return r > 0 ? 0 : 2;
	r = recorder_check_events(&o, NULL, &why);
	if (r < 0) {
		log_error("%s", why ? why : strerror(-r));
		return 1;
	}
	r = recorder_run(&o);
	return r < 0 ? 1 : 0;
}
