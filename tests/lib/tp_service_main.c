/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tp-test-service - run the in-process tracing service on its own, as a
 * stand-in for Perfetto's traced when testing a producer by hand or from a
 * script:
 *
 *   tp-test-service [-s SOCKET[,SOCKET...]] [--relay] -c CONFIG [--txt] -o OUT [-w MS]
 *
 * It listens on each SOCKET (default $PERFETTO_PRODUCER_SOCK_NAME; a UNIX
 * path, host:port...), with --relay also serving RelayPort as traced
 * --enable-relay-endpoint does (remote machines' clock sync), waits until
 * producers have registered every data source named in CONFIG (a binary or
 * text TraceConfig; binary is tried first unless --txt), starts the session,
 * and stops after the config's duration_ms or on SIGTERM/SIGINT.  The trace
 * goes to OUT.tmp and is renamed to OUT only when the session ended without
 * error, so OUT is never a half-written file.  With -w MS the session starts
 * after MS milliseconds even if some data source is still missing.
 *
 * Prints "ready" on stdout once listening.  Exit status 0 on success.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protos/pbtxt.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "service/service.h"
#include "util/util.h"

#define MAX_CONFIG_SIZE (16u << 20)

struct ctx {
	struct loop *e;
	struct svc *svc;
	Perfetto__Protos__TraceConfig *cfg;
	int out_fd;
	struct svc_session *ss;
	struct loop_source *wait_timer;
	int result;
	bool finished;
};

static void finish(struct ctx *c, int result)
{
	c->result = result;
	c->finished = true;
	(void)loop_exit(c->e, 0);
}

static void on_done(struct svc_session *ss, int error, void *userdata)
{
	struct ctx *c = userdata;
	struct svc_session_stats st;

	if (svc_session_get_stats(ss, &st) >= 0)
		log_info("session done: %llu packets, %llu bytes, %llu commits, %llu chunks discarded, "
			 "%llu abi violations, %llu packets lost, %llu invalid packets, "
			 "flushes %llu acked / %llu timed out",
			 (unsigned long long)st.packets, (unsigned long long)st.bytes,
			 (unsigned long long)st.commits,
			 (unsigned long long)st.chunks_discarded, (unsigned long long)st.abi_violations,
			 (unsigned long long)st.packets_lost, (unsigned long long)st.invalid_packets,
			 (unsigned long long)st.flushes_acked, (unsigned long long)st.flushes_timed_out);
	if (error < 0)
		log_error_errno(error, "The tracing session failed: %m");
	finish(c, error);
}

static void start_session(struct ctx *c)
{
	const struct svc_session_hooks h = { .done = on_done };
	int r;

	if (c->ss || c->finished)
		return;
	c->wait_timer = loop_source_disable_unref(c->wait_timer);
	r = svc_session_start(c->svc, c->cfg, c->out_fd, &h, c, &c->ss);
	if (r < 0) {
		log_error_errno(r, "Failed to start the tracing session: %m");
		finish(c, r);
		return;
	}
	log_info("session %llu started", (unsigned long long)svc_session_id(c->ss));
}

static void on_producers(struct svc *s, void *userdata)
{
	struct ctx *c = userdata;

	if (!c->ss && svc_data_sources_available(s, c->cfg))
		start_session(c);
}

static int on_wait_timeout(struct loop_source *es, uint64_t usec, void *userdata)
{
	log_warning("Not every data source registered in time; starting anyway");
	start_session(userdata);
	return 0;
}

static int on_signal(struct loop_source *es, const struct signalfd_siginfo *si, void *userdata)
{
	struct ctx *c = userdata;

	if (c->ss && !svc_session_is_done(c->ss)) {
		log_info("stopping on signal %u", si->ssi_signo);
		(void)svc_session_stop(c->ss);
	} else if (!c->ss) {
		finish(c, -ECANCELED);
	}
	return 0;
}

static int load_config(const char *path, bool text, Perfetto__Protos__TraceConfig **ret)
{
	_cleanup_free_ char *buf = NULL;
	char err[256] = "";
	ProtobufCMessage *m = NULL;
	size_t len;
	int r;

	r = read_full_file_at(AT_FDCWD, path, MAX_CONFIG_SIZE, &buf, &len);
	if (r < 0)
		return log_error_errno(r, "Failed to read %s: %m", path);
	if (!text) {
		*ret = perfetto__protos__trace_config__unpack(NULL, len, (const uint8_t *)buf);
		if (*ret)
			return 0;
	}
	r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, buf, len, &m, err, sizeof(err));
	if (r < 0)
		return log_error_errno(r, "%s is not a TraceConfig (%s): %m", path, err);
	*ret = (Perfetto__Protos__TraceConfig *)m;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: tp-test-service [-s SOCKET[,SOCKET...]] [--relay] -c CONFIG [--txt] -o OUT [-w MS]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "txt", no_argument, NULL, 't' },
		{ "out", required_argument, NULL, 'o' },
		{ "wait-ms", required_argument, NULL, 'w' },
		{ "relay", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct ctx c = { .out_fd = -EBADF };
	const char *sock = getenv("PERFETTO_PRODUCER_SOCK_NAME"), *cfg_path = NULL, *out = NULL;
	_cleanup_free_ char *tmp = NULL;
	uint32_t wait_ms = 0;
	struct svc_options so = { 0 };
	bool text = false;
	sigset_t ss;
	int r, o;

	while ((o = getopt_long(argc, argv, "s:c:o:w:rh", opts, NULL)) >= 0) {
		switch (o) {
		case 's':
			sock = optarg;
			break;
		case 'c':
			cfg_path = optarg;
			break;
		case 't':
			text = true;
			break;
		case 'r':
			so.relay_endpoint = true;
			break;
		case 'o':
			out = optarg;
			break;
		case 'w':
			if (safe_atou32(optarg, &wait_ms) < 0) {
				usage(stderr);
				return EXIT_FAILURE;
			}
			break;
		case 'h':
			usage(stdout);
			return EXIT_SUCCESS;
		default:
			usage(stderr);
			return EXIT_FAILURE;
		}
	}
	if (!sock || !*sock || !cfg_path || !out || optind != argc) {
		usage(stderr);
		return EXIT_FAILURE;
	}
	if (load_config(cfg_path, text, &c.cfg) < 0)
		return EXIT_FAILURE;
	if (asprintf(&tmp, "%s.tmp", out) < 0) {
		r = log_error_errno(-ENOMEM, "Out of memory: %m");
		goto out;
	}
	c.out_fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (c.out_fd < 0) {
		r = log_error_errno(-errno, "Failed to create %s: %m", tmp);
		goto out;
	}

	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	(void)sigprocmask(SIG_BLOCK, &ss, NULL);
	r = loop_default(&c.e);
	if (r >= 0)
		r = loop_add_signal(c.e, NULL, SIGTERM, on_signal, &c);
	if (r >= 0)
		r = loop_add_signal(c.e, NULL, SIGINT, on_signal, &c);
	if (r >= 0)
		r = svc_new(c.e, &so, &c.svc);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the service: %m");
		goto out;
	}
	svc_set_producer_hook(c.svc, on_producers, &c);
	/* as traced: a comma-separated list of addresses, each listened on */
	{
		_cleanup_free_ char *list = strdup(sock);
		char *save = NULL;

		r = list ? 0 : -ENOMEM;
		for (char *a = list ? strtok_r(list, ",", &save) : NULL; a && r >= 0; a = strtok_r(NULL, ",", &save)) {
			r = svc_listen(c.svc, a);
			if (r < 0)
				log_error_errno(r, "Failed to listen on %s: %m", a);
		}
		if (r < 0)
			goto out;
	}
	if (wait_ms) {
		r = loop_add_time_relative(c.e, &c.wait_timer, CLOCK_MONOTONIC, (uint64_t)wait_ms * 1000, 0,
					   on_wait_timeout, &c);
		if (r < 0)
			goto out;
	}
	log_info("listening on %s", sock);
	printf("ready\n");
	fflush(stdout);
	/* A config naming no data source needs nobody. */
	on_producers(c.svc, &c);

	r = loop_run(c.e);
	if (r < 0)
		log_error_errno(r, "Event loop failed: %m");
	else
		r = c.result;
	if (r >= 0 && fsync(c.out_fd) < 0)
		r = log_error_errno(-errno, "Failed to sync %s: %m", tmp);
	if (r >= 0 && rename(tmp, out) < 0)
		r = log_error_errno(-errno, "Failed to rename %s to %s: %m", tmp, out);
out:
	c.ss = svc_session_free(c.ss);
	c.svc = svc_free(c.svc);
	c.wait_timer = loop_source_disable_unref(c.wait_timer);
	c.e = loop_unref(c.e);
	closep(&c.out_fd);
	if (r < 0 && tmp)
		(void)unlink(tmp);
	if (c.cfg)
		perfetto__protos__trace_config__free_unpacked(c.cfg, NULL);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
