/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.frozen_ftrace on a real boot-mapped instance that holds the
 * previous boot's events (tests/vm/frozen.sh traces into it, reboots the
 * guest and runs this): the events `cat trace` of the instance shows, one
 * for one by CPU and timestamp, must be the events of the trace, recorded
 * with `traced-probes record --previous-boot` (TP_FROZEN_VIA=record, the
 * default) or through the
 * daemon beside the test service (TP_FROZEN_VIA=daemon).  The work
 * functions: `trace` shows the old boot's raw addresses (6.12 does not
 * name them); the old boot's own kallsyms (a copy, TP_FROZEN_OLD_KALLSYMS)
 * names those of the core kernel, and the trace's interned kernel symbols,
 * found through this boot's kallsyms and last_boot_info, must be exactly
 * those names (module addresses stay unnamed).  The START stats say
 * preserve_ftrace_buffer, and the instance is empty afterwards.
 *
 * Skipped (77) where there is no such instance with events in it: every
 * kernel matrix run but the one that reboots.  TP_FROZEN_INSTANCE names
 * the instance (default boot_mapped).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_record.h"
#include "util/util.h"

static char tmpdir[] = "/tmp/tp-frozen-live-XXXXXX";
static char bin_daemon[4096], bin_service[4096];
static const char *instance = "boot_mapped";

struct expected {
	struct tp_scan_event *ev;      /* ts in µs, as `trace` prints them */
	size_t n, cap;
	/* workqueue_execute_start's function: "function NAME" where the kernel
	 * names it, else "function=0xADDR" (the previous boot's address) */
	char *functions[256];
	size_t n_functions;
	uint64_t addrs[4096];
	size_t n_addrs;
};

/* ---- the previous boot's own kallsyms: what its addresses were ------------- */

struct old_sym {
	uint64_t addr;
	char *name;
};

static struct old_sym *old_syms;
static size_t n_old_syms;
static uint64_t old_text, old_etext;

static int old_sym_cmp(const void *a, const void *b)
{
	const struct old_sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The core kernel's text symbols of the kallsyms copy at @path. */
static int load_old_kallsyms(const char *path)
{
	_cleanup_free_ char *text = NULL;
	char *save = NULL;
	size_t cap = 0;

	if (read_full_file_at(AT_FDCWD, path, 256u << 20, &text, NULL) < 0)
		return -EIO;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char type, name[512];
		unsigned long long a;

		if (sscanf(line, "%llx %c %511s", &a, &type, name) != 3 || strchr(line, '['))
			continue;
		if (!strcmp(name, "_text"))
			old_text = a;
		if (!strcmp(name, "_etext"))
			old_etext = a;
		if (type != 't' && type != 'T')
			continue;
		if (n_old_syms == cap) {
			cap = cap * 2 + 4096;
			old_syms = realloc(old_syms, cap * sizeof(*old_syms));
			if (!old_syms)
				return -ENOMEM;
		}
		old_syms[n_old_syms++] = (struct old_sym){ a, strdup(name) };
	}
	qsort(old_syms, n_old_syms, sizeof(*old_syms), old_sym_cmp);
	return old_text && old_etext > old_text ? 0 : -EBADMSG;
}

/* The name the previous boot had at @addr, NULL outside its core text. */
static const char *old_name(uint64_t addr)
{
	size_t lo = 0, hi = n_old_syms;

	if (addr < old_text || addr >= old_etext)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (old_syms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	return n_old_syms && old_syms[lo].addr <= addr ? old_syms[lo].name : NULL;
}

static void instance_path(const char *file, char *buf, size_t len)
{
	snprintf(buf, len, "%s/instances/%s/%s", TP_TRACEFS, instance, file);
}

static char *read_text(const char *file)
{
	char path[512];
	char *text = NULL;
	int r;

	instance_path(file, path, sizeof(path));
	r = read_full_file_at(AT_FDCWD, path, 1u << 30, &text, NULL);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-r));
		return NULL;
	}
	return text;
}

/*
 * One event line of `trace`: "  COMM-PID  [CPU] FLAGS  SECS.USECS: NAME: ...".
 * Returns: true with the CPU, the timestamp in µs and the text after it.
 */
static bool parse_line(const char *line, uint32_t *cpu, uint64_t *ts_us, const char **rest)
{
	const char *b = strchr(line, '['), *p;
	unsigned long long secs, usecs;
	char *end;

	if (line[0] == '#' || !b)
		return false;
	*cpu = (uint32_t)strtoul(b + 1, &end, 10);
	if (*end != ']')
		return false;
	/* the timestamp: the first "digits.digits:" after the CPU */
	for (p = end; *p; p++) {
		if (*p < '0' || *p > '9' || p[-1] != ' ')
			continue;
		secs = strtoull(p, &end, 10);
		if (*end != '.')
			continue;
		usecs = strtoull(end + 1, &end, 10);
		if (*end != ':')
			continue;
		*ts_us = secs * 1000000ull + usecs;
		*rest = end + 1;
		return true;
	}
	return false;
}

/* Returns: 0, or -EIO when the instance's trace cannot be read. */
static int expected_from_trace(struct expected *x)
{
	_cleanup_free_ char *text = read_text("trace");
	char *save = NULL;

	memset(x, 0, sizeof(*x));
	if (!text)
		return -EIO;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *rest, *fn;
		uint32_t cpu;
		uint64_t ts;

		if (!parse_line(line, &cpu, &ts, &rest))
			continue;
		if (x->n == x->cap) {
			void *n = realloc(x->ev, (x->cap * 2 + 1024) * sizeof(*x->ev));

			if (!n)
				return -ENOMEM;
			x->ev = n;
			x->cap = x->cap * 2 + 1024;
		}
		x->ev[x->n++] = (struct tp_scan_event){ cpu, ts };
		if (strstr(rest, " workqueue_execute_start:") == rest && (fn = strstr(rest, "function=0x")) &&
		    x->n_addrs < ARRAY_SIZE(x->addrs)) {
			x->addrs[x->n_addrs++] = strtoull(fn + 11, NULL, 16);
		} else if (strstr(rest, " workqueue_execute_start:") == rest && (fn = strstr(rest, "function ")) &&
			   x->n_functions < ARRAY_SIZE(x->functions)) {
			size_t len = strcspn(fn + 9, " \t");
			bool seen = false;

			for (size_t i = 0; i < x->n_functions; i++)
				seen |= strlen(x->functions[i]) == len && !strncmp(x->functions[i], fn + 9, len);
			if (!seen)
				x->functions[x->n_functions++] = strndup(fn + 9, len);
		}
	}
	return 0;
}

/* The names the old boot's kallsyms gives the addresses `trace` showed. */
static void names_of_addrs(struct expected *x)
{
	for (size_t i = 0; i < x->n_addrs; i++) {
		const char *name = old_name(x->addrs[i]);
		bool seen = false;

		if (!name)
			continue;       /* a module's: not named */
		for (size_t j = 0; j < x->n_functions; j++)
			seen |= !strcmp(x->functions[j], name);
		if (!seen && x->n_functions < ARRAY_SIZE(x->functions))
			x->functions[x->n_functions++] = strdup(name);
	}
}

static int ev_cmp(const void *a, const void *b)
{
	const struct tp_scan_event *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static bool instance_has_events(void)
{
	struct expected x;
	bool any;

	any = expected_from_trace(&x) == 0 && x.n > 0;
	free(x.ev);
	for (size_t i = 0; i < x.n_functions; i++)
		free(x.functions[i]);
	return any;
}

static void write_config(const char *path)
{
	char text[512];

	snprintf(text, sizeof(text),
		 "buffers { size_kb: 65536 fill_policy: DISCARD }\n"
		 "data_sources { config { name: \"linux.frozen_ftrace\" target_buffer: 0\n"
		 "  frozen_ftrace_config { instance_name: \"%s\" } } }\n"
		 "duration_ms: 100\n",
		 instance);
	ck_assert_int_eq(tp_write_file(path, text), 0);
}

static void record_via_daemon(const char *cfg, const char *out)
{
	struct tp_watch watch = { 0 };
	char sock[512], state[512];
	pid_t svc, daemon;

	snprintf(sock, sizeof(sock), "%s/producer.sock", tmpdir);
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	svc = tp_spawn_service(bin_service, sock, cfg, out, false);
	ck_assert_int_gt(svc, 0);
	tp_watch_add(&watch, "the service", svc);
	daemon = tp_spawn_daemon(bin_daemon, sock, state, -1, NULL);
	ck_assert_int_gt(daemon, 0);
	tp_watch_add(&watch, "the daemon", daemon);
	ck_assert_int_eq(tp_assert_exit(&watch, svc, "the service's session"), 0);
	kill(daemon, SIGTERM);
	ck_assert_int_eq(tp_assert_exit(&watch, daemon, "the daemon"), 0);
}

/* The one command a user types: traced-probes record --previous-boot=NAME -o OUT. */
static void record_via_cli(const char *out)
{
	char arg[128];
	pid_t pid;

	snprintf(arg, sizeof(arg), "--previous-boot=%s", instance);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(bin_daemon, bin_daemon, "record", arg, "-o", out, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(tp_assert_exit(NULL, pid, "traced-probes record --previous-boot"), 0);
}

START_TEST(test_frozen_read_back)
{
	const char *via = getenv("TP_FROZEN_VIA");
	struct tp_ftrace_scan s;
	struct expected x;
	char cfg[512], out[512];
	size_t mismatch = SIZE_MAX;

	ck_assert_int_eq(expected_from_trace(&x), 0);
	ck_assert_uint_gt(x.n, 0);
	if (x.n_addrs) {
		const char *old = getenv("TP_FROZEN_OLD_KALLSYMS");

		ck_assert_msg(old, "`trace` shows the old boot's addresses: TP_FROZEN_OLD_KALLSYMS must name "
				   "that boot's kallsyms");
		ck_assert_int_eq(load_old_kallsyms(old), 0);
		names_of_addrs(&x);
	}
	snprintf(cfg, sizeof(cfg), "%s/frozen.cfg", tmpdir);
	snprintf(out, sizeof(out), "%s/frozen.pftrace", tmpdir);
	write_config(cfg);
	if (via && strcmp(via, "daemon") == 0)
		record_via_daemon(cfg, out);
	else
		record_via_cli(out);

	ck_assert_int_eq(tp_scan_trace_events(out, &s), 0);
	fprintf(stderr, "frozen_ftrace via %s: `trace` shows %zu events, the trace holds %zu; %zu work function "
			"calls, %zu distinct functions of the core kernel, %zu symbols interned\n",
		via ? via : "record", x.n, s.n_events, x.n_addrs, x.n_functions, s.n_symbol_names);
	ck_assert(s.preserve_ftrace_buffer);
	ck_assert_uint_ge(s.stats_packets, 2);
	/* `trace` prints the nearest µs (the kernel's ns2usecs() adds 500 ns) */
	for (size_t i = 0; i < s.n_events; i++)
		s.events[i].ts = (s.events[i].ts + 500) / 1000;
	qsort(s.events, s.n_events, sizeof(*s.events), ev_cmp);
	qsort(x.ev, x.n, sizeof(*x.ev), ev_cmp);
	for (size_t i = 0; i < x.n && i < s.n_events && mismatch == SIZE_MAX; i++)
		if (ev_cmp(&x.ev[i], &s.events[i]) != 0)
			mismatch = i;
	ck_assert_msg(mismatch == SIZE_MAX, "event %zu differs: `trace` has cpu %u at %llu us, the trace cpu %u at %llu us",
		      mismatch, x.ev[mismatch].cpu, (unsigned long long)x.ev[mismatch].ts,
		      s.events[mismatch].cpu, (unsigned long long)s.events[mismatch].ts);
	ck_assert_uint_eq(s.n_events, x.n);
	for (size_t i = 0; i < x.n_functions; i++)
		ck_assert_msg(tp_scan_has_symbol(&s, x.functions[i]), "work function %s is not named in the trace",
			      x.functions[i]);
	/* and no other name: a module's address must stay unnamed, not misnamed */
	for (size_t i = 0; i < s.n_symbol_names; i++) {
		bool known = false;

		for (size_t j = 0; j < x.n_functions; j++)
			known |= !strcmp(x.functions[j], s.symbol_names[i]);
		ck_assert_msg(known, "the trace names %s, which no work function of `trace` was",
			      s.symbol_names[i]);
	}
	/* the clean-up: nothing of the previous boot is left for the next */
	ck_assert_msg(!instance_has_events(), "the instance still holds events after the read");

	for (size_t i = 0; i < x.n_functions; i++)
		free(x.functions[i]);
	free(x.ev);
	tp_scan_free(&s);
}
END_TEST

int main(void)
{
	const char *build = getenv("TP_BUILD_ROOT");
	char path[512];
	Suite *s;
	TCase *tc;

	if (getenv("TP_FROZEN_INSTANCE"))
		instance = getenv("TP_FROZEN_INSTANCE");
	if (!tp_kernel_available()) {
		fprintf(stderr, "needs root and tracefs: skipped\n");
		return 77;
	}
	instance_path("last_boot_info", path, sizeof(path));
	if (access(path, F_OK) < 0) {
		fprintf(stderr, "no boot-mapped instance '%s' (tests/vm/frozen.sh makes one): skipped\n", instance);
		return 77;
	}
	if (!instance_has_events()) {
		fprintf(stderr, "instance '%s' holds no previous boot's events: skipped\n", instance);
		return 77;
	}
	if (!build || !mkdtemp(tmpdir))
		return 1;
	snprintf(bin_daemon, sizeof(bin_daemon), "%s/probes/traced-probes", build);
	snprintf(bin_service, sizeof(bin_service), "%s/tests/tp-test-service", build);
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("frozen_ftrace_live");
	tc = tcase_create("read_back");
	tcase_set_timeout(tc, 4 * TP_WAIT_HANG_MS / 1000);
	tcase_add_test(tc, test_frozen_read_back);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
