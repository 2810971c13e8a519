/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon: one producer connected to a Perfetto tracing service, rebuilt
 * from scratch whenever the service goes away, with backoff while it is not
 * there.  tracefs is restored whenever the producer is torn down, and at
 * start from whatever a killed predecessor left behind.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "loop/loop.h"
#include "ipc/ipc.h"
#include "probes/daemon.h"
#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/recorder.h"
#include "probes/producer.h"
#include "util/notify.h"
#include "util/util.h"

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 30000u

struct daemon {
	struct loop *event;
	const char *address;
	const char *machine_name;       /* --machine-name, $PERFETTO_MACHINE_NAME, else the host name */
	const char *relay_address;      /* --relay-socket, else the producer socket */
	void **shared;                  /* each data-source kind's state (ds_registry) */
	struct producer *producer;
	struct loop_source *retry;
	struct loop_source *reap;       /* frees a dead producer outside its callbacks */
	struct loop_source *watchdog;
	uint64_t watchdog_usec;
	unsigned backoff_ms;
	unsigned connections;
};

static int connect_now(struct daemon *d);

static int on_retry(struct loop_source *s, uint64_t usec, void *userdata)
{
	(void)connect_now(userdata);
	return 0;
}

static void schedule_retry(struct daemon *d, unsigned delay_ms)
{
	int r;

	d->retry = loop_source_disable_unref(d->retry);
	r = loop_add_time_relative(d->event, &d->retry, CLOCK_MONOTONIC,
				   (uint64_t)delay_ms * 1000, 10 * 1000, on_retry, d);
	if (r < 0)
		log_error_errno(r, "Failed to arm the reconnect timer: %m");
}

static int on_reap(struct loop_source *s, void *userdata)
{
	struct daemon *d = userdata;

	d->reap = loop_source_disable_unref(d->reap);
	/* tears down every session: tracefs goes back to how we found it */
	d->producer = producer_free(d->producer);
	(void)notify_send("STATUS=Waiting for the tracing service");
	schedule_retry(d, d->backoff_ms);
	return 0;
}

static void on_disconnected(struct producer *p, int error, void *userdata)
{
	struct daemon *d = userdata;

	if (d->connections > 0) {
		log_notice_errno(error, "Lost the tracing service (%m); sessions stopped, reconnecting");
		d->backoff_ms = BACKOFF_MIN_MS;
	} else {
		log_debug_errno(error, "Tracing service not reachable at %s: %m", d->address);
		/* doubles before each retry, as Perfetto's traced_probes */
		d->backoff_ms = MIN(d->backoff_ms * 2, BACKOFF_MAX_MS);
	}
	d->connections = 0;
	if (!d->reap && loop_add_defer(d->event, &d->reap, on_reap, d) < 0)
		log_error("Failed to schedule the producer teardown");
}

static void on_registered(struct producer *p, void *userdata)
{
	struct daemon *d = userdata;

	d->connections++;
	d->backoff_ms = BACKOFF_MIN_MS;
	log_info("Connected to the tracing service at %s; data sources registered", d->address);
	/* Ready means serving: tracefs sane, loop running and traced connected. */
	(void)notify_sendf("READY=1\nSTATUS=Connected to %s", d->address);
}

/* Per-CPU data sources (ftrace) get a line: what they lost is worth knowing. */
static void on_ds_stopped(struct producer *p, const struct ds_report *r, void *userdata)
{
	if (!r->failed && r->n_cpus > 0)
		log_info("%s session %llu stopped: %llu events on %u CPUs, %llu skipped (not asked for), "
			 "%llu lost in the kernel, %llu packets dropped (buffer full)",
			 r->name, (unsigned long long)r->tracing_session_id,
			 (unsigned long long)r->events, r->n_cpus, (unsigned long long)r->skipped_events,
			 (unsigned long long)r->lost_events, (unsigned long long)r->packets_dropped);
}

/*
 * What a killed predecessor left behind (tracefs state, for ftrace), put
 * back by every data source that has something to put back.  What could
 * not be put back is said line by line: at a daemon's start a state file
 * of a process still running is expected (a `record` beside it); asked for
 * with --cleanup-after-crash (@cleanup), anything left undone is an error.
 * Returns: 0, the first -errno, or with @cleanup -EBUSY when something was
 * left undone.
 */
static int recover_all(bool cleanup)
{
	unsigned restored = 0;
	int ret = 0;

	for (size_t i = 0; ds_registry[i]; i++) {
		const struct ds_ops *ops = ds_registry[i];
		_cleanup_free_ char *report = NULL;
		const char *line;
		int r;

		if (!ops->recover)
			continue;
		r = ops->recover(&report);
		if (r > 0) {
			restored += (unsigned)r;
			log_notice("Restored the state a previous run of %s left behind (%d saved state%s)",
				   ops->name, r, r == 1 ? "" : "s");
		} else if (r < 0 && !report) {
			log_warning_errno(r, "Could not restore the state a previous run of %s left behind: %m",
					  ops->name);
		}
		for (line = report; line && *line;) {
			const char *end = strchrnul(line, '\n');

			if (cleanup)
				log_error("%s: %.*s", ops->name, (int)(end - line), line);
			else
				log_notice("%s: %.*s", ops->name, (int)(end - line), line);
			line = *end ? end + 1 : end;
		}
		if (r < 0 && ret == 0)
			ret = r;
		if (cleanup && report && ret == 0)
			ret = -EBUSY;
	}
	if (cleanup && ret == 0 && restored == 0)
		log_notice("Nothing to restore: no run of ours left state behind");
	return ret;
}

static void on_ds_started(struct producer *p, const char *name, void *userdata)
{
	log_info("%s started", name);
}

static int connect_now(struct daemon *d)
{
	const struct producer_hooks hooks = {
		.disconnected = on_disconnected,
		.registered = on_registered,
		.ds_started = on_ds_started,
		.ds_stopped = on_ds_stopped,
	};
	int r;

	d->retry = loop_source_disable_unref(d->retry);
	if (d->producer)
		return 0;
	r = producer_new(d->event, ds_registry, d->shared, &hooks, d, &d->producer);
	if (r >= 0)
		r = producer_set_machine(d->producer, d->machine_name, d->relay_address);
	if (r >= 0)
		r = producer_connect(d->producer, d->address);
	if (r < 0) {
		log_debug_errno(r, "Cannot connect to %s: %m; retrying in %u ms", d->address,
				d->backoff_ms);
		d->producer = producer_free(d->producer);
		schedule_retry(d, d->backoff_ms);
		d->backoff_ms = MIN(d->backoff_ms * 2, BACKOFF_MAX_MS);
	}
	return r;
}

/* Pinged at half the interval, as the service manager's own loops do. */
static int on_watchdog(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct daemon *d = userdata;

	(void)notify_send("WATCHDOG=1");
	(void)loop_source_set_time(s, usec + d->watchdog_usec / 2);
	return loop_source_set_enabled(s, LOOP_ONESHOT);
}

static int setup_watchdog(struct daemon *d)
{
	int r = notify_watchdog_usec(&d->watchdog_usec);

	if (r <= 0)
		return r;
	return loop_add_time_relative(d->event, &d->watchdog, CLOCK_MONOTONIC, d->watchdog_usec / 2,
				      0, on_watchdog, d);
}

static int on_terminate(struct loop_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	log_info("Received %s, stopping", strsignal((int)si->ssi_signo));
	(void)notify_send("STOPPING=1");
	return loop_exit(loop_source_get_loop(s), 0);
}

static int on_hup(struct loop_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct daemon *d = userdata;

	/* nothing to reload: report where we are instead */
	log_info("SIGHUP: %s, %s", d->producer ? "connected or connecting" : "waiting to reconnect",
		 producer_is_active(d->producer) ? "tracing" : "idle");
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: traced-probes [options]\n"
		"       traced-probes record -o FILE [options]   (see traced-probes record --help)\n\n"
		"Serve linux.ftrace, linux.process_stats and the other data sources to a Perfetto\n"
		"tracing service.\n\n"
		"  -s, --socket ADDR       producer socket of the service (default:\n"
		"                          $PERFETTO_PRODUCER_SOCK_NAME, /run/perfetto/traced-producer.sock\n"
		"                          or /tmp/perfetto-producer); also host:port, vsock://cid:port\n"
		"      --machine-name NAME this machine's name in a multi-machine trace, when\n"
		"                          connected over TCP or vsock (default:\n"
		"                          $PERFETTO_MACHINE_NAME, else the host name)\n"
		"      --relay-socket ADDR where this machine's clock sync goes (the service's\n"
		"                          RelayPort; default: the producer socket)\n"
		"      --subbuf-size SIZE  ring-buffer sub-buffers for the directories a session\n"
		"                          sets up: 4k ... 512k, 0 for the kernel's (default 64k,\n"
		"                          or $TRACED_PROBES_FTRACE_SUBBUF_KB)\n"
		"      --cleanup-after-crash  restore tracefs from a killed run's saved state and exit\n"
		"  -l, --log-level LEVEL   error, warning, notice, info (default), debug\n"
		"  -v, --version\n"
		"  -h, --help\n");
}

int daemon_main(int argc, char **argv)
{
	enum { OPT_CLEANUP = 256, OPT_MACHINE_NAME, OPT_RELAY_SOCKET, OPT_SUBBUF };
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "machine-name", required_argument, NULL, OPT_MACHINE_NAME },
		{ "relay-socket", required_argument, NULL, OPT_RELAY_SOCKET },
		{ "subbuf-size", required_argument, NULL, OPT_SUBBUF },
		{ "log-level", required_argument, NULL, 'l' },
		{ "cleanup-after-crash", no_argument, NULL, OPT_CLEANUP },
		{ "version", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct daemon d = { .backoff_ms = BACKOFF_MIN_MS };
	struct loop_source *sigs[4] = {};
	bool cleanup_only = false;
	sigset_t mask;
	int c, r;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:l:vh", longopts, NULL)) >= 0) {
		switch (c) {
		case 's':
			d.address = optarg;
			break;
		case 'l':
			r = log_level_from_string(optarg);
			if (r < 0) {
				log_error("Unknown log level '%s' for -l (error, warning, notice, info, debug)",
					  optarg);
				return 2;
			}
			log_set_max_level(r);
			break;
		case OPT_CLEANUP:
			cleanup_only = true;
			break;
		case OPT_MACHINE_NAME:
			if (!*optarg || strlen(optarg) > IPC_MACHINE_NAME_MAX) {
				log_error("--machine-name: 1 to %u characters", IPC_MACHINE_NAME_MAX);
				return 2;
			}
			d.machine_name = optarg;
			break;
		case OPT_SUBBUF: {
			uint32_t kb = 0;

			if (strcmp(optarg, "0") != 0 &&
			    (recorder_parse_size_kb(optarg, &kb) < 0 || kb < 4 || kb > 512 || (kb & (kb - 1)))) {
				log_error("Invalid sub-buffer size '%s' for --subbuf-size (4k, 8k, ... 512k; "
					  "0: the kernel's)", optarg);
				return 2;
			}
			ftrace_host_set_subbuf_kb(kb);
			break;
		}
		case OPT_RELAY_SOCKET:
			if (ipc_addr_kind_from_string(optarg) < 0) {
				log_error("--relay-socket: '%s' is not an address", optarg);
				return 2;
			}
			d.relay_address = optarg;
			break;
		case 'v':
			printf("traced-probes %s\n", TP_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			log_option_error(c, argv, "traced-probes --help");
			return 2;
		}
	}
	if (optind < argc) {
		log_error("Unexpected argument '%s' (the daemon takes options only; to record, "
			  "'traced-probes record')", argv[optind]);
		log_error("Try 'traced-probes --help'");
		return 2;
	}
	if (!d.address)
		d.address = producer_default_socket();
	if (!d.machine_name && getenv("PERFETTO_MACHINE_NAME") && *getenv("PERFETTO_MACHINE_NAME"))
		d.machine_name = getenv("PERFETTO_MACHINE_NAME");

	r = recover_all(cleanup_only);
	if (cleanup_only) {
		if (r < 0)
			log_error("--cleanup-after-crash could not restore everything (see above)");
		return r < 0 ? 1 : 0;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGPIPE);
	(void)sigprocmask(SIG_BLOCK, &mask, NULL);

	r = loop_default(&d.event);
	if (r >= 0)
		r = loop_add_signal(d.event, &sigs[0], SIGTERM, on_terminate, &d);
	if (r >= 0)
		r = loop_add_signal(d.event, &sigs[1], SIGINT, on_terminate, &d);
	if (r >= 0)
		r = loop_add_signal(d.event, &sigs[2], SIGHUP, on_hup, &d);
	if (r >= 0)
		r = setup_watchdog(&d);
	if (r >= 0)
		r = ds_shared_new_all(d.event, &d.shared);
	if (r < 0) {
		log_error_errno(r, "Failed to set up: %m");
		goto out;
	}
	log_info("traced-probes %s starting; producer socket %s", TP_VERSION, d.address);
	(void)notify_sendf("STATUS=Waiting for the tracing service at %s", d.address);
	(void)connect_now(&d);
	r = loop_run(d.event);
	if (r < 0)
		log_error_errno(r, "Event loop failed: %m");
out:
	d.reap = loop_source_disable_unref(d.reap);
	d.retry = loop_source_disable_unref(d.retry);
	d.watchdog = loop_source_disable_unref(d.watchdog);
	d.producer = producer_free(d.producer);
	d.shared = ds_shared_free_all(d.shared);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigs[i] = loop_source_disable_unref(sigs[i]);
	d.event = loop_unref(d.event);
	return r < 0 ? 1 : 0;
}
