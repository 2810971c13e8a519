/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * producer - the Perfetto producer: one connection to a tracing service,
 * the SMB it hands us, and the data-source instances it asks for.  Speaks
 * ProducerPort through ipc/, writes through smb/, and drives data sources
 * only through their ops (probes/ds/ds.h): it knows no kind of data source.
 */

#include <stdbool.h>
#include <stdint.h>

#include "event/event.h"
#include "probes/ds/ds.h"

struct producer;

struct producer_hooks {
	/* the service went away (or never answered); the producer is dead */
	void (*disconnected)(struct producer *p, int error, void *userdata);
	/* every data source is registered with the service */
	void (*registered)(struct producer *p, void *userdata);
	/*
	 * A data-source instance stopped.  The report (and its per-CPU array)
	 * is valid during the call only: copy what you keep.
	 */
	void (*ds_stopped)(struct producer *p, const struct ds_report *r, void *userdata);
};

/**
 * producer_new - a producer on event loop @e.
 * @kinds: the data sources to register, NULL-terminated (ds_registry, or a
 *   test's own list); must outlive the producer.
 * @shared: each kind's process-wide state, indexed like @kinds (NULL
 *   entries where a kind has none; NULL if none has any), as made by
 *   ds_shared_new_all(); shared by every producer of the process and freed
 *   after the last of them.
 */
int producer_new(struct event *e, const struct ds_ops *const *kinds, void *const *shared,
		 const struct producer_hooks *hooks, void *userdata, struct producer **ret);

/**
 * producer_free - tear down every data source (tracefs restored), close the
 * connection and unmap the SMB.  Sends nothing further to the service.
 */
struct producer *producer_free(struct producer *p);

/**
 * producer_connect - connect to @address (a socket path, "@abstract",
 * "host:port" or "vsock://cid:port") and start the handshake.
 * Returns: 0 once the connection is under way, -errno if it failed at once.
 */
int producer_connect(struct producer *p, const char *address);

/**
 * producer_adopt_fd - use an already connected stream socket (socketpair).
 */
int producer_adopt_fd(struct producer *p, int fd);

/**
 * producer_is_active - true while any data-source instance exists.
 */
bool producer_is_active(const struct producer *p);

/**
 * producer_default_socket - the producer socket Perfetto's traced listens on:
 * $PERFETTO_PRODUCER_SOCK_NAME, else /run/perfetto/traced-producer.sock when
 * /run/perfetto/ exists, else /tmp/perfetto-producer.
 */
const char *producer_default_socket(void);
