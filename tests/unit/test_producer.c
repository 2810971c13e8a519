/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The producer against the in-process service, with data sources of the
 * test's own (a registry of fakes, no kernel): reports are summed over every
 * CPU however many there are (512 here, past the 256 an old fixed array
 * held), a notice reaches the other started instances of its session and
 * only those, and a kind's shared state reaches its instances.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "loop/loop.h"
#include "probes/ds/ds.h"
#include "probes/producer.h"
#include "protos/pbtxt.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "service/service.h"
#include "protos/pbw.h"
#include "util/util.h"
#include "util/util_varint.h"

#define FAKE_CPUS 512u
#define MAX_REPORTS 8

static const int32_t notice_pids[] = { 11, 22, 33 };

/* What the fakes and the hooks saw, for the test to check. */
static struct seen {
	struct ds_report reports[MAX_REPORTS];   /* copies; cpu[] owned */
	size_t n_reports;
	unsigned notices[2];         /* per listener instance, by session index */
	size_t notice_pids;          /* pids in the last notice received */
	unsigned shared_ok;          /* setups that got the kind's shared state */
	unsigned done;
} seen;

static int shared_token = 42;

/* ---- "test.percpu": a per-CPU data source that sends a notice on flush ---- */

struct percpu {
	struct ds_env env;
};

static int percpu_shared_new(struct loop *e, void **ret)
{
	*ret = &shared_token;
	return 0;
}

static void *percpu_shared_free(void *shared)
{
	return NULL;
}

static int percpu_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
			void **ret, char **ret_error, char **ret_warnings)
{
	struct percpu *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->env = *env;
	if (env->shared == &shared_token)
		seen.shared_ok++;
	*ret = d;
	return 0;
}

static int percpu_start(void *ds)
{
	struct percpu *d = ds;
	struct pbw *pw = d->env.sink.begin_packet(d->env.sink.userdata);

	/* one packet, so that the writer has something to count */
	if (pw) {
		pbw_varint(pw, 8, 1);
		(void)d->env.sink.end_packet(d->env.sink.userdata);
	}
	return 0;
}

static int percpu_flush(void *ds)
{
	struct percpu *d = ds;
	const struct ds_notice n = {
		.kind = DS_NOTICE_PIDS,
		.pids = notice_pids,
		.n_pids = ARRAY_SIZE(notice_pids),
	};

	d->env.host.notice(d->env.host.host, &n);
	d->env.sink.flush(d->env.sink.userdata);
	return 0;
}

/* CPU c: c + 1 events, 2 lost, 1 page with loss; overruns only past CPU 255. */
static int percpu_report(void *ds, struct ds_report *r)
{
	r->cpu = calloc(FAKE_CPUS, sizeof(*r->cpu));
	if (!r->cpu)
		return -ENOMEM;
	r->n_cpus = FAKE_CPUS;
	for (unsigned c = 0; c < FAKE_CPUS; c++)
		r->cpu[c] = (struct ds_cpu_report){
			.events = c + 1,
			.lost_events = 2,
			.pages_with_loss = 1,
			.overrun = c >= 256 ? 3 : 0,
		};
	return 0;
}

static void fake_free(void *ds)
{
	free(ds);
}

static const struct ds_ops percpu_ops = {
	.name = "test.percpu",
	.shared_new = percpu_shared_new,
	.shared_free = percpu_shared_free,
	.setup = percpu_setup,
	.start = percpu_start,
	.flush = percpu_flush,
	.report = percpu_report,
	.free = fake_free,
};

/* ---- "test.listener": counts the notices it gets, per session ----------- */

struct listener {
	unsigned session_index;
};

static uint64_t first_session_id;

static int listener_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
			  void **ret, char **ret_error, char **ret_warnings)
{
	struct listener *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	if (!first_session_id)
		first_session_id = env->tracing_session_id;
	l->session_index = env->tracing_session_id == first_session_id ? 0 : 1;
	*ret = l;
	return 0;
}

static int listener_start(void *ds)
{
	return 0;
}

static int listener_flush(void *ds)
{
	return 0;
}

static void listener_on_notice(void *ds, const struct ds_notice *n)
{
	struct listener *l = ds;

	if (n->kind != DS_NOTICE_PIDS)
		return;
	seen.notices[l->session_index]++;
	seen.notice_pids = n->n_pids;
}

static const struct ds_ops listener_ops = {
	.name = "test.listener",
	.setup = listener_setup,
	.start = listener_start,
	.flush = listener_flush,
	.on_notice = listener_on_notice,
	.free = fake_free,
};

static const struct ds_ops *const fake_kinds[] = { &percpu_ops, &listener_ops, NULL };

/* ---- producer hooks and the session ------------------------------------- */

static void on_ds_stopped(struct producer *p, const struct ds_report *r, void *userdata)
{
	struct ds_report *copy;

	ck_assert_uint_lt(seen.n_reports, MAX_REPORTS);
	copy = &seen.reports[seen.n_reports++];
	*copy = *r;
	copy->cpu = NULL;
	if (r->n_cpus) {
		copy->cpu = malloc(r->n_cpus * sizeof(*r->cpu));
		ck_assert_ptr_nonnull(copy->cpu);
		memcpy(copy->cpu, r->cpu, r->n_cpus * sizeof(*r->cpu));
	}
}

static void on_session_done(struct svc_session *ss, int error, void *userdata)
{
	struct loop *e = userdata;

	ck_assert_int_eq(error, 0);
	if (++seen.done == 2)
		(void)loop_exit(e, 0);
}

static Perfetto__Protos__TraceConfig *parse_config(const char *text)
{
	ProtobufCMessage *m = NULL;
	char err[256] = "";

	ck_assert_msg(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), &m,
				  err, sizeof(err)) == 0, "%s", err);
	return (Perfetto__Protos__TraceConfig *)m;
}

static const struct ds_report *find_report(const char *name, size_t nth)
{
	for (size_t i = 0; i < seen.n_reports; i++)
		if (strcmp(seen.reports[i].name, name) == 0 && nth-- == 0)
			return &seen.reports[i];
	return NULL;
}

/*
 * Two sessions: the first has a per-CPU source and a listener, the second
 * only a listener.  Each session ends with a Flush (the notice) and a Stop
 * (the report).
 */
START_TEST(test_reports_and_notices)
{
	const struct svc_session_hooks hooks = { .done = on_session_done };
	const struct producer_hooks phooks = { .ds_stopped = on_ds_stopped };
	Perfetto__Protos__TraceConfig *cfg_a = parse_config(
		"buffers { size_kb: 1024 fill_policy: DISCARD }\n"
		"data_sources { config { name: \"test.percpu\" } }\n"
		"data_sources { config { name: \"test.listener\" } }\n"
		"duration_ms: 200\n");
	Perfetto__Protos__TraceConfig *cfg_b = parse_config(
		"buffers { size_kb: 1024 fill_policy: DISCARD }\n"
		"data_sources { config { name: \"test.listener\" } }\n"
		"duration_ms: 200\n");
	char dir[] = "/tmp/tp-producer-XXXXXX", out_a[64], out_b[64];
	struct svc_session *a = NULL, *b = NULL;
	const struct ds_report *r;
	struct producer *p = NULL;
	struct loop *e = NULL;
	struct svc *svc = NULL;
	void **shared = NULL;
	uint64_t sum = 0;
	int sv[2], fd_a, fd_b;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out_a, sizeof(out_a), "%s/a", dir);
	snprintf(out_b, sizeof(out_b), "%s/b", dir);
	fd_a = open(out_a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fd_b = open(out_b, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert(fd_a >= 0 && fd_b >= 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_ge(loop_new(&e), 0);
	ck_assert_int_ge(svc_new(e, NULL, &svc), 0);
	ck_assert_int_ge(svc_adopt_connection(svc, sv[1]), 0);

	/* the per-kind shared states, as ds_shared_new_all makes them for the registry */
	shared = calloc(ARRAY_SIZE(fake_kinds), sizeof(*shared));
	ck_assert_ptr_nonnull(shared);
	ck_assert_int_eq(percpu_ops.shared_new(e, &shared[0]), 0);

	ck_assert_int_ge(producer_new(e, fake_kinds, shared, &phooks, NULL, &p), 0);
	ck_assert_int_ge(producer_adopt_fd(p, sv[0]), 0);
	ck_assert_int_ge(svc_session_start(svc, cfg_a, fd_a, &hooks, e, &a), 0);
	ck_assert_int_ge(svc_session_start(svc, cfg_b, fd_b, &hooks, e, &b), 0);
	ck_assert_int_ge(loop_run(e), 0);
	ck_assert_uint_eq(seen.done, 2);

	/* every CPU counts, not only the first 256 */
	r = find_report("test.percpu", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert(!r->failed);
	ck_assert_uint_eq(r->n_cpus, FAKE_CPUS);
	ck_assert_ptr_nonnull(r->cpu);
	ck_assert_uint_eq(r->cpu[FAKE_CPUS - 1].events, FAKE_CPUS);
	for (unsigned c = 0; c < FAKE_CPUS; c++)
		sum += r->cpu[c].events;
	ck_assert_uint_eq(r->events, sum);
	ck_assert_uint_eq(r->events, (uint64_t)FAKE_CPUS * (FAKE_CPUS + 1) / 2);
	ck_assert_uint_eq(r->lost_events, 2u * FAKE_CPUS);
	ck_assert_uint_eq(r->pages_with_loss, FAKE_CPUS);
	ck_assert_uint_eq(r->overrun, 3u * (FAKE_CPUS - 256));
	ck_assert_uint_gt(r->bytes, 0);
	ck_assert_uint_eq(seen.shared_ok, 1);

	/* the listener without a per-CPU view reports no CPUs */
	r = find_report("test.listener", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->n_cpus, 0);
	ck_assert_ptr_null(r->cpu);

	/* the notice reached the first session's listener, never the second's */
	ck_assert_uint_ge(seen.notices[0], 1);
	ck_assert_uint_eq(seen.notice_pids, ARRAY_SIZE(notice_pids));
	ck_assert_uint_eq(seen.notices[1], 0);

	a = svc_session_free(a);
	b = svc_session_free(b);
	p = producer_free(p);
	svc = svc_free(svc);
	free(shared);
	e = loop_unref(e);
	close(fd_a);
	close(fd_b);
	(void)unlink(out_a);
	(void)unlink(out_b);
	(void)rmdir(dir);
	for (size_t i = 0; i < seen.n_reports; i++)
		ds_report_done(&seen.reports[i]);
	protobuf_c_message_free_unpacked(&cfg_a->base, NULL);
	protobuf_c_message_free_unpacked(&cfg_b->base, NULL);
}
END_TEST

/* The registry's helpers, on the real registry: names are unique and found. */
START_TEST(test_registry)
{
	size_t n = 0;

	for (; ds_registry[n]; n++) {
		ck_assert_ptr_nonnull(ds_registry[n]->name);
		ck_assert_ptr_nonnull(ds_registry[n]->setup);
		ck_assert_ptr_nonnull(ds_registry[n]->start);
		ck_assert_ptr_nonnull(ds_registry[n]->flush);
		ck_assert_ptr_nonnull(ds_registry[n]->free);
		ck_assert_ptr_eq(ds_find(ds_registry[n]->name), ds_registry[n]);
		for (size_t k = 0; k < n; k++)
			ck_assert_str_ne(ds_registry[k]->name, ds_registry[n]->name);
	}
	ck_assert_uint_ge(n, 2);
	/* linux.ftrace registers first, as Perfetto's traced_probes */
	ck_assert_str_eq(ds_registry[0]->name, "linux.ftrace");
	ck_assert_ptr_nonnull(ds_find("linux.process_stats"));
	ck_assert_ptr_null(ds_find("linux.nothing"));
	ck_assert_ptr_null(ds_find(NULL));
}
END_TEST

/* ---- a NUL inside a config string, from a service that sends one -------- */

/*
 * A stand-in for traced that sends commands as raw bytes (the in-process
 * service cannot: its configs are protobuf-c structs, whose strings end at
 * a NUL).  It answers the handshake, then sends SetupTracing, a clean
 * SetupDataSource for test.listener (1), one for test.percpu whose
 * ftrace_config.instance_name is "\0" (2), and StartDataSource for both.
 */
static const char *const port_methods[] = {
	"InitializeConnection", "RegisterDataSource", "UnregisterDataSource", "CommitData",
	"GetAsyncCommand", "RegisterTraceWriter", "UnregisterTraceWriter",
	"NotifyDataSourceStarted", "NotifyDataSourceStopped",
};

struct raw_port {
	struct loop *e;
	struct ipc_reply *stream;
	unsigned started_notices;
	unsigned setups;
	char started[4][32];
	unsigned n_started;
};

static struct raw_port *raw_port;

struct raw_msg {
	uint8_t b[256];
	size_t n;
};

static void raw_put(struct raw_msg *m, uint64_t v)
{
	m->n += (size_t)(varint_put(m->b + m->n, v) - (m->b + m->n));
}

static void raw_bytes(struct raw_msg *m, uint32_t id, const void *data, size_t len)
{
	raw_put(m, ((uint64_t)id << 3) | 2);
	raw_put(m, len);
	memcpy(m->b + m->n, data, len);
	m->n += len;
}

/* GetAsyncCommandResponse.setup_data_source (6) {new_instance_id, config{name, ftrace_config?}} */
static void raw_setup(struct raw_msg *cmd, uint64_t id, const char *name, bool nul_instance)
{
	struct raw_msg cfg = {}, sd = {}, ft = {};

	raw_bytes(&cfg, 1, name, strlen(name));
	if (nul_instance) {
		raw_bytes(&ft, 25, "\0", 1);
		raw_bytes(&cfg, 100, ft.b, ft.n);
	}
	raw_put(&sd, 1 << 3);
	raw_put(&sd, id);
	raw_bytes(&sd, 2, cfg.b, cfg.n);
	*cmd = (struct raw_msg){};
	raw_bytes(cmd, 6, sd.b, sd.n);
}

static void raw_send_commands(struct raw_port *rp)
{
	struct raw_msg cmd = {}, st = {};

	/* SetupTracing (3) {shared_buffer_page_size_kb (1): 4} */
	raw_put(&st, 1 << 3);
	raw_put(&st, 4);
	raw_bytes(&cmd, 3, st.b, st.n);
	ck_assert_int_eq(ipc_reply_send(rp->stream, cmd.b, cmd.n, true, -EBADF), 0);
	raw_setup(&cmd, 1, "test.listener", false);
	ck_assert_int_eq(ipc_reply_send(rp->stream, cmd.b, cmd.n, true, -EBADF), 0);
	raw_setup(&cmd, 2, "test.percpu", true);
	ck_assert_int_eq(ipc_reply_send(rp->stream, cmd.b, cmd.n, true, -EBADF), 0);
	for (uint64_t id = 1; id <= 2; id++) {
		struct raw_msg start = {};

		/* StartDataSource (1) {new_instance_id (1)} */
		raw_put(&start, 1 << 3);
		raw_put(&start, id);
		cmd = (struct raw_msg){};
		raw_bytes(&cmd, 1, start.b, start.n);
		ck_assert_int_eq(ipc_reply_send(rp->stream, cmd.b, cmd.n, true, -EBADF), 0);
	}
}

static int raw_invoke(struct ipc_conn *conn, uint32_t method_id, const uint8_t *args, size_t len,
		      struct ipc_reply *reply, void *userdata)
{
	struct raw_port *rp = userdata;
	const char *m = port_methods[method_id - 1];

	if (strcmp(m, "InitializeConnection") == 0) {
		/* use_shmem_emulation (3): the producer brings its own buffer */
		static const uint8_t resp[] = { 3 << 3, 1 };

		return ipc_reply_send(reply, resp, sizeof(resp), false, -EBADF);
	}
	if (strcmp(m, "GetAsyncCommand") == 0) {
		rp->stream = reply;
		raw_send_commands(rp);
		return 0;
	}
	if (strcmp(m, "NotifyDataSourceStarted") == 0 && ++rp->started_notices == 2)
		(void)loop_exit(rp->e, 0);
	return ipc_reply_send(reply, NULL, 0, false, -EBADF);
}

static int counting_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
			  void **ret, char **ret_error, char **ret_warnings)
{
	raw_port->setups++;
	return listener_setup(env, cfg, ret, ret_error, ret_warnings);
}

static void on_raw_started(struct producer *p, const char *name, void *userdata)
{
	struct raw_port *rp = userdata;

	if (rp->n_started < ARRAY_SIZE(rp->started))
		snprintf(rp->started[rp->n_started++], sizeof(rp->started[0]), "%s", name);
}

/*
 * The refused instance never reaches its data source's setup, is answered
 * as started (as traced_probes answers a failed one) and reports failed;
 * the clean one of the same connection records as usual.
 */
START_TEST(test_nul_in_config_refused)
{
	static const struct ds_ops listener_counting = {
		.name = "test.listener", .setup = counting_setup, .start = listener_start,
		.flush = listener_flush, .free = fake_free,
	};
	static const struct ds_ops percpu_counting = {
		.name = "test.percpu", .setup = counting_setup, .start = listener_start,
		.flush = listener_flush, .free = fake_free,
	};
	static const struct ds_ops *const kinds[] = { &listener_counting, &percpu_counting, NULL };
	const struct producer_hooks hooks = { .ds_started = on_raw_started, .ds_stopped = on_ds_stopped };
	struct raw_port rp = {};
	struct ipc_host *h = NULL;
	struct producer *p = NULL;
	const struct ds_report *r;
	int sv[2];

	memset(&seen, 0, sizeof(seen));
	raw_port = &rp;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_ge(loop_new(&rp.e), 0);
	ck_assert_int_eq(ipc_host_new(&h), 0);
	ck_assert_int_eq(ipc_host_attach_event(h, rp.e), 0);
	ck_assert_int_eq(ipc_host_register_service(h, "ProducerPort", port_methods,
						   ARRAY_SIZE(port_methods), raw_invoke, NULL, &rp,
						   NULL), 0);
	ck_assert_int_eq(ipc_host_adopt(h, sv[1], NULL), 0);
	ck_assert_int_ge(producer_new(rp.e, kinds, NULL, &hooks, &rp, &p), 0);
	ck_assert_int_ge(producer_adopt_fd(p, sv[0]), 0);
	ck_assert_int_ge(loop_run(rp.e), 0);

	ck_assert_uint_eq(rp.started_notices, 2);
	/* only the clean instance was set up and started */
	ck_assert_uint_eq(rp.setups, 1);
	ck_assert_uint_eq(rp.n_started, 1);
	ck_assert_str_eq(rp.started[0], "test.listener");
	p = producer_free(p);
	r = find_report("test.percpu", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert(r->failed);
	r = find_report("test.listener", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert(!r->failed);
	rp.stream = ipc_reply_forget(rp.stream);
	h = ipc_host_free(h);
	rp.e = loop_unref(rp.e);
	for (size_t i = 0; i < seen.n_reports; i++)
		ds_report_done(&seen.reports[i]);
	raw_port = NULL;
}
END_TEST

/* ---- shared memory emulation against a service that does not read ------- */

/*
 * Over TCP the chunks travel inside CommitData, and the socket's send queue
 * is all that stands between the producer and the service.  A data source
 * writes FLOOD_PACKETS of FLOOD_BYTES (4 MiB, four times the emulated SMB)
 * in one go while the service's loop does not run, over sockets with small
 * kernel buffers: the producer must hold chunks back rather than let the
 * queue overflow (which drops the connection and every session on it),
 * drop and count what does not fit in the SMB, and once the service reads
 * again deliver every packet it kept, before the flush ack.
 */
#define FLOOD_PACKETS 4096u
#define FLOOD_BYTES 1024u
#define FLOOD_FIELD 1001u

static struct flood {
	bool started, disconnected, done;
	int done_error;
	uint64_t dropped;
	bool reported;
} flood;

static int flood_start(void *ds)
{
	static uint8_t payload[FLOOD_BYTES];
	struct percpu *d = ds;

	memset(payload, 0x5a, sizeof(payload));
	for (unsigned i = 0; i < FLOOD_PACKETS; i++) {
		struct pbw *pw = d->env.sink.begin_packet(d->env.sink.userdata);

		if (!pw)
			continue;
		pbw_bytes(pw, FLOOD_FIELD, payload, sizeof(payload));
		(void)d->env.sink.end_packet(d->env.sink.userdata);
	}
	flood.started = true;
	return 0;
}

static int flood_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
		       void **ret, char **ret_error, char **ret_warnings)
{
	struct percpu *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->env = *env;
	*ret = d;
	return 0;
}

static void on_flood_disconnected(struct producer *p, int error, void *userdata)
{
	flood.disconnected = true;
}

static void on_flood_stopped(struct producer *p, const struct ds_report *r, void *userdata)
{
	flood.dropped = r->packets_dropped;
	flood.reported = true;
}

static void on_flood_done(struct svc_session *ss, int error, void *userdata)
{
	flood.done = true;
	flood.done_error = error;
}

/* A connected loopback TCP pair with small kernel buffers on both ends. */
static void tcp_pair(int *ret_client, int *ret_server)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int small = 16384, l, c, a;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(c, 0);
	ck_assert_int_eq(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(a, 0);
	close(l);
	*ret_client = c;
	*ret_server = a;
}

static uint64_t mono_ms_now(void)
{
	return now_ns(CLOCK_MONOTONIC) / 1000000u;
}

static size_t count_flood_packets(const char *path)
{
	Perfetto__Protos__Trace *t;
	char *buf = NULL;
	size_t len = 0, n = 0;

	ck_assert_int_eq(read_full_file_at(AT_FDCWD, path, 64u << 20, &buf, &len), 0);
	t = perfetto__protos__trace__unpack(NULL, len, (const uint8_t *)buf);
	ck_assert_ptr_nonnull(t);
	for (size_t i = 0; i < t->n_packet; i++)
		for (unsigned u = 0; u < t->packet[i]->base.n_unknown_fields; u++)
			/* protobuf-c keeps the length prefix: 2 bytes for 1024 */
			if (t->packet[i]->base.unknown_fields[u].tag == FLOOD_FIELD &&
			    t->packet[i]->base.unknown_fields[u].len == FLOOD_BYTES + 2)
				n++;
	perfetto__protos__trace__free_unpacked(t, NULL);
	free(buf);
	return n;
}

START_TEST(test_emulation_holds_back_for_a_slow_service)
{
	static const struct ds_ops flood_ops = {
		.name = "test.flood", .setup = flood_setup, .start = flood_start,
		.flush = listener_flush, .free = fake_free,
	};
	static const struct ds_ops *const kinds[] = { &flood_ops, NULL };
	const struct producer_hooks phooks = { .disconnected = on_flood_disconnected,
					       .ds_stopped = on_flood_stopped };
	const struct svc_session_hooks shooks = { .done = on_flood_done };
	Perfetto__Protos__TraceConfig *cfg = parse_config(
		"buffers { size_kb: 16384 fill_policy: DISCARD }\n"
		"data_sources { config { name: \"test.flood\" } }\n"
		"duration_ms: 300\n");
	char dir[] = "/tmp/tp-producer-XXXXXX", out[64];
	struct loop *pe = NULL, *se = NULL;
	struct svc_session *ss = NULL;
	struct producer *p = NULL;
	struct svc *svc = NULL;
	uint64_t deadline;
	size_t kept;
	int c, a, fd;

	memset(&flood, 0, sizeof(flood));
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out, sizeof(out), "%s/flood", dir);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	tcp_pair(&c, &a);
	ck_assert_int_ge(loop_new(&pe), 0);
	ck_assert_int_ge(loop_new(&se), 0);
	ck_assert_int_ge(svc_new(se, NULL, &svc), 0);
	ck_assert_int_ge(svc_adopt_connection(svc, a), 0);
	ck_assert_int_ge(producer_new(pe, kinds, NULL, &phooks, NULL, &p), 0);
	ck_assert_int_ge(producer_adopt_fd(p, c), 0);
	ck_assert_int_ge(svc_session_start(svc, cfg, fd, &shooks, NULL, &ss), 0);

	/* both sides take turns until the flood has been written (inside the producer's turn) */
	deadline = mono_ms_now() + 60000;
	while (!flood.started && !flood.disconnected && mono_ms_now() < deadline) {
		ck_assert_int_ge(loop_run_once(pe, 1000), 0);
		if (!flood.started)
			ck_assert_int_ge(loop_run_once(se, 1000), 0);
	}
	ck_assert(flood.started);
	/* the producer alone for a while: its retries must not overflow the queue either */
	for (int i = 0; i < 50; i++)
		ck_assert_int_ge(loop_run_once(pe, 2000), 0);
	ck_assert_msg(!flood.disconnected, "the producer dropped the connection to a slow service");

	/* the service reads again: everything kept arrives, then the session ends */
	deadline = mono_ms_now() + 60000;
	while (!(flood.done && flood.reported) && !flood.disconnected && mono_ms_now() < deadline) {
		ck_assert_int_ge(loop_run_once(pe, 1000), 0);
		ck_assert_int_ge(loop_run_once(se, 1000), 0);
	}
	ck_assert(!flood.disconnected);
	ck_assert(flood.done && flood.reported);
	ck_assert_int_eq(flood.done_error, 0);
	kept = count_flood_packets(out);
	fprintf(stderr, "flood: %zu packets in the trace, %llu dropped and counted\n", kept,
		(unsigned long long)flood.dropped);
	/* the SMB holds a quarter of the flood: the rest was dropped, and counted */
	ck_assert_uint_gt(flood.dropped, 0);
	ck_assert_uint_gt(kept, FLOOD_PACKETS / 8);
	ck_assert_uint_eq(kept + flood.dropped, FLOOD_PACKETS);

	ss = svc_session_free(ss);
	p = producer_free(p);
	svc = svc_free(svc);
	pe = loop_unref(pe);
	se = loop_unref(se);
	close(fd);
	(void)unlink(out);
	(void)rmdir(dir);
	protobuf_c_message_free_unpacked(&cfg->base, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("producer");
	TCase *tc = tcase_create("producer");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_reports_and_notices);
	tcase_add_test(tc, test_registry);
	tcase_add_test(tc, test_nul_in_config_refused);
	tcase_add_test(tc, test_emulation_holds_back_for_a_slow_service);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
