/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two machines in one trace: the daemon on this machine (a UNIX socket) and
 * one in a network namespace the test makes, joined to this one by a veth
 * pair with addresses of its own (10.213.N.0/30), reaching the test
 * service over TCP, as a guest's daemon reaches a central traced.  The
 * namespace shares the kernel, so each daemon records from a tracefs
 * instance of its own, chosen for it by machine_name_filter.
 *
 *   - the remote daemon identifies itself: its packets carry the machine id
 *     traced makes of its boot id, the host's carry none; the trace has the
 *     remote machine's SystemInfo; with the relay endpoint, a
 *     RemoteClockSync whose pairs are ordered (each host snapshot taken
 *     after the client's, within the round trip);
 *   - data sources reach a remote machine only when the config asks
 *     (machine_name_filter), as v58.2;
 *   - a service without a relay endpoint: identity, no clock sync, and the
 *     daemon says why once.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_record.h"
#include "util/util.h"

static char tmpdir[] = "/tmp/tp-machines-XXXXXX";
static char bin_daemon[4096], bin_service[4096];

#define REMOTE_NAME "tp-remote-machine"

struct machines {
	char ns[64], veth_host[16], veth_ns[16];
	char addr_host[32], addr_ns[32], tcp[64], unix_sock[512], both[600];
	char inst_host[64], inst_remote[64];
	char dir_host[256], dir_remote[256];
	char remote_log[512];
	struct tp_watch watch;
};

static struct machines m;

static int run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void setup(void)
{
	char cmd[1024];
	unsigned n = (unsigned)getpid() % 250;

	memset(&m, 0, sizeof(m));
	snprintf(m.ns, sizeof(m.ns), "tp-machine-%d", (int)getpid());
	snprintf(m.veth_host, sizeof(m.veth_host), "tpvh%d", (int)getpid() % 100000);
	snprintf(m.veth_ns, sizeof(m.veth_ns), "tpvn%d", (int)getpid() % 100000);
	snprintf(m.addr_host, sizeof(m.addr_host), "10.213.%u.1", n);
	snprintf(m.addr_ns, sizeof(m.addr_ns), "10.213.%u.2", n);
	snprintf(m.tcp, sizeof(m.tcp), "%s:%u", m.addr_host, 40000u + (unsigned)getpid() % 20000u);
	snprintf(m.unix_sock, sizeof(m.unix_sock), "%s/producer.sock", tmpdir);
	snprintf(m.both, sizeof(m.both), "%s,%s", m.unix_sock, m.tcp);
	snprintf(m.remote_log, sizeof(m.remote_log), "%s/remote.log", tmpdir);
	snprintf(cmd, sizeof(cmd),
		 "ip netns add %s && ip link add %s type veth peer name %s && "
		 "ip link set %s netns %s && ip addr add %s/30 dev %s && ip link set %s up && "
		 "ip -n %s addr add %s/30 dev %s && ip -n %s link set %s up && ip -n %s link set lo up",
		 m.ns, m.veth_host, m.veth_ns, m.veth_ns, m.ns, m.addr_host, m.veth_host, m.veth_host, m.ns,
		 m.addr_ns, m.veth_ns, m.ns, m.veth_ns, m.ns);
	ck_assert_msg(run(cmd) == 0, "could not make the network namespace: %s", cmd);

	snprintf(m.inst_host, sizeof(m.inst_host), "tp-mach-host-%d", (int)getpid());
	snprintf(m.inst_remote, sizeof(m.inst_remote), "tp-mach-remote-%d", (int)getpid());
	ck_assert_int_eq(tp_instance_create(m.inst_host, m.dir_host, sizeof(m.dir_host)), 0);
	ck_assert_int_eq(tp_instance_create(m.inst_remote, m.dir_remote, sizeof(m.dir_remote)), 0);
}

static void teardown(void)
{
	char cmd[256];

	tp_kill_spawned();
	snprintf(cmd, sizeof(cmd), "ip netns del %s 2>/dev/null; ip link del %s 2>/dev/null", m.ns, m.veth_host);
	(void)run(cmd);
	tp_instance_remove(m.inst_host);
	tp_instance_remove(m.inst_remote);
}

/* The daemon inside the namespace, its log in m.remote_log. */
static pid_t spawn_remote(void)
{
	char state[512];
	pid_t pid;

	snprintf(state, sizeof(state), "%s/state-remote", tmpdir);
	pid = fork();
	if (pid == 0) {
		int fd = open(m.remote_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		setenv("TRACED_PROBES_STATE_DIR", state, 1);
		execlp("ip", "ip", "netns", "exec", m.ns, bin_daemon, "-s", m.tcp, "--machine-name", REMOTE_NAME,
		       "-l", "info", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_gt(pid, 0);
	tp_note_spawned(pid);
	tp_watch_add(&m.watch, "the remote daemon", pid);
	return pid;
}

/* How many times the remote daemon's log says @needle. */
static unsigned log_count(const char *needle)
{
	_cleanup_free_ char *text = NULL;
	unsigned n = 0;

	if (read_full_file_at(AT_FDCWD, m.remote_log, 1u << 20, &text, NULL) < 0)
		return 0;
	for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static bool log_has(const char *needle)
{
	return log_count(needle) > 0;
}

static bool remote_registered(void *unused)
{
	return log_has("data sources registered");
}

static bool remote_synced(void *unused)
{
	return log_has("Clocks synchronised");
}

static bool remote_said_no_endpoint(void *unused)
{
	return log_has("has no relay endpoint");
}

static void write_config(const char *path, const char *remote_filter, bool all_machines)
{
	char text[2048];

	snprintf(text, sizeof(text),
		 "buffers { size_kb: 16384 fill_policy: DISCARD }\n"
		 "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		 "  ftrace_config { ftrace_events: \"sched/sched_switch\" instance_name: \"%s\" } }\n"
		 "  machine_name_filter: \"host\" }\n"
		 "data_sources { config { name: \"linux.ftrace\" target_buffer: 0\n"
		 "  ftrace_config { ftrace_events: \"sched/sched_switch\" instance_name: \"%s\" } }\n"
		 "  %s%s%s }\n"
		 "duration_ms: %u\n%s",
		 m.inst_host, m.inst_remote, remote_filter ? "machine_name_filter: \"" : "",
		 remote_filter ? remote_filter : "", remote_filter ? "\"" : "", 4 * TP_WAIT_HANG_MS,
		 all_machines ? "trace_all_machines: true\n" : "");
	ck_assert_int_eq(tp_write_file(path, text), 0);
}

/* The machine id traced gives a connection whose hint is this boot's id. */
static uint32_t expected_machine_id(void)
{
	_cleanup_free_ char *boot = NULL;
	uint64_t h = 14695981039346656037ull;
	uint32_t id;

	ck_assert_int_ge(read_full_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &boot, NULL), 0);
	boot[strcspn(boot, "\n")] = '\0';
	for (const char *p = boot; *p; p++) {
		h ^= (uint8_t)*p;
		h *= 1099511628211ull;
	}
	id = (uint32_t)h;
	return id ? id : 1;
}

struct summary {
	uint64_t host_bundles, remote_bundles, other_bundles;
	bool remote_system_info;
	size_t clock_pairs;
	bool pairs_ordered;
	bool all_started;       /* the service said: every data source of the session started */
};

static uint64_t clock_of(const Perfetto__Protos__ClockSnapshot *s, uint32_t id)
{
	for (size_t i = 0; s && i < s->n_clocks; i++)
		if (s->clocks[i]->clock_id == id)
			return s->clocks[i]->timestamp;
	return 0;
}

static void summarize(const char *path, uint32_t remote_id, struct summary *ret)
{
	_cleanup_free_ char *data = NULL;
	Perfetto__Protos__Trace *t;
	size_t len;

	memset(ret, 0, sizeof(*ret));
	ret->pairs_ordered = true;
	ck_assert_int_ge(read_full_file_at(AT_FDCWD, path, 1u << 30, &data, &len), 0);
	t = perfetto__protos__trace__unpack(NULL, len, (const uint8_t *)data);
	ck_assert_ptr_nonnull(t);
	for (size_t i = 0; i < t->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = t->packet[i];
		uint32_t mid = p->has_machine_id ? p->machine_id : 0;

		if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS) {
			if (mid == 0)
				ret->host_bundles++;
			else if (mid == remote_id)
				ret->remote_bundles++;
			else
				ret->other_bundles++;
		}
		if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT &&
		    p->service_event->event_type_case ==
					     PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_ALL_DATA_SOURCES_STARTED)
			ret->all_started = true;
		if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO && mid == remote_id &&
		    p->system_info->utsname)
			ret->remote_system_info = true;
		if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_REMOTE_CLOCK_SYNC && mid == remote_id) {
			const Perfetto__Protos__RemoteClockSync *r = p->remote_clock_sync;

			for (size_t k = 0; k < r->n_synced_clocks; k++) {
				/* the same kernel: both sides read one BOOTTIME, the
				 * service's after the client's and within the round trip */
				uint64_t c = clock_of(r->synced_clocks[k]->client_clocks, 6);
				uint64_t h = clock_of(r->synced_clocks[k]->host_clocks, 6);

				ret->clock_pairs++;
				if (!c || h < c || h - c > (uint64_t)TP_WAIT_HANG_MS * 1000000ull)
					ret->pairs_ordered = false;
			}
		}
	}
	perfetto__protos__trace__free_unpacked(t, NULL);
}

/*
 * A session with both daemons: the remote one connected (and synced, with
 * @relay) before the session starts; it ends once each instance that
 * should record has read @n events.
 */
static void record(const char *remote_filter, bool all_machines, bool relay, const char *out)
{
	char cfg[512], state[512];
	struct tp_read_events_goal gh = { .dir = m.dir_host, .n = 500 }, gr = { .dir = m.dir_remote, .n = 500 };
	pid_t svc, host, remote;

	snprintf(cfg, sizeof(cfg), "%s/machines.cfg", tmpdir);
	snprintf(state, sizeof(state), "%s/state-host", tmpdir);
	write_config(cfg, remote_filter, all_machines);
	svc = tp_spawn_service_ex(bin_service, m.both, cfg, out, false, relay ? "--relay" : NULL);
	ck_assert_int_gt(svc, 0);
	tp_watch_add(&m.watch, "the service", svc);
	remote = spawn_remote();
	tp_assert_wait(&m.watch, remote_registered, NULL, "the remote daemon registered over TCP");
	if (relay)
		tp_assert_wait(&m.watch, remote_synced, NULL, "the remote daemon synchronised its clocks");
	else
		tp_assert_wait(&m.watch, remote_said_no_endpoint, NULL, "the remote daemon said: no relay endpoint");
	host = tp_spawn_daemon(bin_daemon, m.unix_sock, state, -1, NULL);
	ck_assert_int_gt(host, 0);
	tp_watch_add(&m.watch, "the host daemon", host);
	tp_assert_wait(&m.watch, tp_read_events_reached, &gh, "the host's instance read events");
	/* the remote data source is named only by its filter */
	if (remote_filter)
		tp_assert_wait(&m.watch, tp_read_events_reached, &gr, "the remote machine's instance read events");
	kill(svc, SIGTERM);
	ck_assert_int_eq(tp_assert_exit(&m.watch, svc, "the service's session"), 0);
	kill(host, SIGTERM);
	kill(remote, SIGTERM);
	ck_assert_int_eq(tp_assert_exit(&m.watch, host, "the host daemon"), 0);
	ck_assert_int_eq(tp_assert_exit(&m.watch, remote, "the remote daemon"), 0);
}

START_TEST(test_two_machines_relay)
{
	struct summary s;
	char out[512];
	uint32_t id = expected_machine_id();

	snprintf(out, sizeof(out), "%s/two.pftrace", tmpdir);
	record(REMOTE_NAME, false, true, out);
	summarize(out, id, &s);
	fprintf(stderr, "two machines: %llu host bundles, %llu on machine %u, %zu clock pairs\n",
		(unsigned long long)s.host_bundles, (unsigned long long)s.remote_bundles, id, s.clock_pairs);
	ck_assert_uint_gt(s.host_bundles, 0);
	ck_assert_uint_gt(s.remote_bundles, 0);
	ck_assert_uint_eq(s.other_bundles, 0);
	ck_assert(s.remote_system_info);
	/* at least the first round: PING and UPDATE */
	ck_assert_uint_ge(s.clock_pairs, 2);
	ck_assert(s.pairs_ordered);
}
END_TEST

START_TEST(test_remote_needs_asking)
{
	struct summary s;
	char out[512];
	uint32_t id = expected_machine_id();

	/* no filter naming it, no trace_all_machines: the remote daemon records nothing */
	snprintf(out, sizeof(out), "%s/host-only.pftrace", tmpdir);
	record(NULL, false, true, out);
	summarize(out, id, &s);
	ck_assert_uint_gt(s.host_bundles, 0);
	ck_assert_uint_eq(s.remote_bundles, 0);
	/*
	 * Not a start the session ended too soon for: every data source the
	 * session gave out started (a remote one would hold that back until
	 * it had), and the remote daemon never started one.
	 */
	ck_assert(s.all_started);
	ck_assert_uint_eq(log_count("linux.ftrace started"), 0);
}
END_TEST

START_TEST(test_no_relay_endpoint)
{
	struct summary s;
	char out[512];
	uint32_t id = expected_machine_id();

	/* a service like traced without --enable-relay-endpoint: identity
	 * without clock sync (trace_all_machines set too, which a filter
	 * overrides: the host's data source stays on the host) */
	snprintf(out, sizeof(out), "%s/no-relay.pftrace", tmpdir);
	record(REMOTE_NAME, true, false, out);
	summarize(out, id, &s);
	ck_assert_uint_gt(s.host_bundles, 0);
	ck_assert_uint_gt(s.remote_bundles, 0);
	ck_assert_uint_eq(s.clock_pairs, 0);
	ck_assert(!s.remote_system_info);
	/* the filter wins over trace_all_machines: the remote got its own data source only */
	ck_assert(s.all_started);
	ck_assert_uint_eq(log_count("linux.ftrace started"), 1);
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
	if (run("ip netns list >/dev/null 2>&1") != 0) {
		fprintf(stderr, "needs iproute2 with network namespaces: skipped\n");
		return 77;
	}
	/* a kernel without veth (a test guest's pared-down modules) cannot link the machines */
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "ip link add tpvprobe%d type veth peer name tpvprobe%dp >/dev/null 2>&1 && "
					   "ip link del tpvprobe%d", (int)getpid() % 100000, (int)getpid() % 100000,
			 (int)getpid() % 100000);
		if (run(cmd) != 0) {
			fprintf(stderr, "needs veth pairs (CONFIG_VETH): skipped\n");
			return 77;
		}
	}
	if (!build || !mkdtemp(tmpdir))
		return 1;
	snprintf(bin_daemon, sizeof(bin_daemon), "%s/probes/traced-probes", build);
	snprintf(bin_service, sizeof(bin_service), "%s/tests/tp-test-service", build);
	signal(SIGPIPE, SIG_IGN);
	s = suite_create("machines");
	tc = tcase_create("machines");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 6 * TP_WAIT_HANG_MS / 1000);
	tcase_add_test(tc, test_two_machines_relay);
	tcase_add_test(tc, test_remote_needs_asking);
	tcase_add_test(tc, test_no_relay_endpoint);
	suite_add_tcase(s, tc);
	return tp_run_suite(s, tmpdir);
}
