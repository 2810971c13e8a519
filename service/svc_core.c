/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service object, the top of service/: the IPC host with the
 * ProducerPort service (calls go to svc_port.c), the producer connections,
 * the loop turn that sends what handlers queued (traced posts those sends
 * as tasks; see struct svc_out), and the queries of service.h.
 */
#include <string.h>
#include <time.h>

#include "ipc/ipc.h"
#include "service/svc_internal.h"
#include "util/util.h"

static void on_connect(struct ipc_conn *conn, void *userdata)
{
	struct svc *s = userdata;
	struct svc_producer *p;
	int r;

	r = svc_producer_new(s, conn, &p);
	if (r < 0) {
		log_debug_errno(r, "service: dropping connection: %m");
		ipc_conn_disconnect(conn);
		return;
	}
	ipc_conn_set_userdata(conn, p);
}

static void on_disconnect(struct ipc_conn *conn, void *userdata)
{
	struct svc_producer *p = ipc_conn_get_userdata(conn);

	(void)userdata;
	if (!p)
		return;
	ipc_conn_set_userdata(conn, NULL);
	svc_port_disconnected(p);
	svc_producer_free(p);
}

static int on_invoke(struct ipc_conn *conn, uint32_t method_id, const uint8_t *args, size_t len,
		     struct ipc_reply *reply, void *userdata)
{
	struct svc_producer *p = ipc_conn_get_userdata(conn);

	(void)userdata;
	/* Returning < 0 makes the host reject the call and release @reply. */
	if (!p || method_id == 0 || method_id > svc_port_n_methods)
		return -EINVAL;
	return svc_port_call(p, method_id, args, len, reply);
}

static int on_relay_invoke(struct ipc_conn *conn, uint32_t method_id, const uint8_t *args, size_t len,
			   struct ipc_reply *reply, void *userdata)
{
	struct svc_producer *p = ipc_conn_get_userdata(conn);

	(void)userdata;
	if (!p || method_id == 0 || method_id > svc_relay_n_methods)
		return -EINVAL;
	return svc_relay_call(p, method_id, args, len, reply);
}

static int on_out_defer(struct loop_source *es, void *userdata)
{
	struct svc *s = userdata;
	struct svc_producer *p, *next;

	(void)loop_source_set_enabled(es, LOOP_OFF);
	for (p = s->producers_head; p; p = next) {
		next = p->producers_next;
		svc_producer_flush_outbox(p);
	}
	return 0;
}

int svc_new(struct loop *e, const struct svc_options *o, struct svc **ret)
{
	_cleanup_(svc_freep) struct svc *s = NULL;
	int r;

	if (!e || !ret)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->event = loop_ref(e);
	if (o)
		s->opts = *o;
	if (s->opts.max_producers == 0 || s->opts.max_producers > SVC_MAX_PRODUCER_ID)
		s->opts.max_producers = SVC_MAX_PRODUCER_ID;
	if (s->opts.snapshot_interval_ms == 0)
		s->opts.snapshot_interval_ms = SVC_DEFAULT_SNAPSHOT_MS;

	r = loop_add_defer(e, &s->out_defer, on_out_defer, s);
	if (r < 0)
		return r;
	(void)loop_source_set_enabled(s->out_defer, LOOP_OFF);
	(void)loop_source_set_description(s->out_defer, "svc-out");

	r = ipc_host_new(&s->host);
	if (r < 0)
		return r;
	r = ipc_host_register_service(s->host, "ProducerPort", svc_port_methods,
				      svc_port_n_methods, on_invoke, on_disconnect, s, NULL);
	if (r < 0)
		return r;
	/* after ProducerPort, whose disconnect frees the connection's state */
	if (s->opts.relay_endpoint) {
		r = ipc_host_register_service(s->host, "RelayPort", svc_relay_methods, svc_relay_n_methods,
					      on_relay_invoke, NULL, s, NULL);
		if (r < 0)
			return r;
	}
	ipc_host_set_connect_callback(s->host, on_connect, s);
	r = ipc_host_attach_event(s->host, e);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}

struct svc *svc_free(struct svc *s)
{
	if (!s)
		return NULL;
	svc_session_abort_all(s);
	/* Close every connection first, like traced exiting: producers see
	 * the socket go away, never a rejected command stream. */
	s->host = ipc_host_free(s->host);
	while (s->producers_head) {
		struct svc_producer *p = s->producers_head;

		if (p->conn)
			ipc_conn_set_userdata(p->conn, NULL);
		svc_port_disconnected(p);
		svc_producer_free(p);
	}
	/* Sessions stay owned by their callers; unlink them from us. */
	while (s->sessions_head) {
		struct svc_session *ss = s->sessions_head;

		SVC_LIST_REMOVE(sessions, s, ss);
		ss->svc = NULL;
	}
	s->out_defer = loop_source_disable_unref(s->out_defer);
	loop_unref(s->event);
	free(s);
	return NULL;
}

int svc_listen(struct svc *s, const char *socket_path)
{
	if (!s || !socket_path || !*socket_path)
		return -EINVAL;
	/* traced makes its producer socket world-connectable. */
	return ipc_host_listen(s->host, socket_path, 0666);
}

int svc_adopt_connection(struct svc *s, int fd)
{
	if (!s) {
		closep(&fd);
		return -EINVAL;
	}
	return ipc_host_adopt(s->host, fd, NULL);
}

void svc_set_producer_hook(struct svc *s, void (*cb)(struct svc *s, void *userdata), void *userdata)
{
	s->producer_hook = cb;
	s->producer_hook_userdata = userdata;
}

size_t svc_producer_count(const struct svc *s)
{
	return s ? s->n_producers : 0;
}

bool svc_data_source_registered(const struct svc *s, const char *name)
{
	if (!s || !name)
		return false;
	for (struct svc_ds_reg *r = s->regs_head; r; r = r->regs_next)
		if (streq(r->name, name))
			return true;
	return false;
}

bool svc_data_sources_available(const struct svc *s, const Perfetto__Protos__TraceConfig *cfg)
{
	if (!s || !cfg)
		return false;
	for (size_t i = 0; i < cfg->n_data_sources; i++) {
		const Perfetto__Protos__TraceConfig__DataSource *d = cfg->data_sources[i];

		if (!d->config || !d->config->name || !svc_data_source_registered(s, d->config->name))
			return false;
	}
	return true;
}
