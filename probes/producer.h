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

#include "loop/loop.h"
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
	/* A data-source instance of kind @name started (StartDataSource succeeded). */
	void (*ds_started)(struct producer *p, const char *name, void *userdata);
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
int producer_new(struct loop *e, const struct ds_ops *const *kinds, void *const *shared,
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
 * producer_set_machine - identify this machine to a service reached over
 * TCP or vsock (nothing changes on a UNIX socket, where a local traced or
 * traced_relay knows who we are): each connection then starts with a
 * SetPeerIdentity frame (pid, uid, this boot's id as the machine id hint,
 * @machine_name), and a second connection keeps this machine's clocks in
 * step with the service's through its RelayPort, as traced_relay does.
 * @machine_name: NULL for the host name.
 * @relay_address: where that second connection goes; NULL: the producer's
 *   own address (a second address is for links that carry one stream
 *   each, such as a serial port).
 * Call before producer_connect().
 * Returns: 0 or -ENOMEM.
 */
int producer_set_machine(struct producer *p, const char *machine_name, const char *relay_address);

/* Clock-sync rounds completed with the service (0 without a relay connection). */
uint64_t producer_clock_sync_rounds(const struct producer *p);

/**
 * producer_adopt_fd - use an already connected stream socket (socketpair).
 */
int producer_adopt_fd(struct producer *p, int fd);

/**
 * producer_set_final_flush - treat a Flush whose reason is "trace stop" as
 * the last one of its session: instances whose kind has flush_final() stop
 * producing before they flush (probes/ds/ds.h).  For a producer that
 * serves only sessions it controls (`record`).  Off by default: the
 * daemon keeps traced_probes' order (a data source produces until
 * StopDataSource, and its end-of-trace counts are sampled just before).
 */
void producer_set_final_flush(struct producer *p, bool on);

/**
 * producer_report_live - a report of every started instance, now, as
 * ds_stopped would give it at the end: for a progress display.  @cb gets
 * each report during the call only.
 * Returns: the number of instances reported.
 */
size_t producer_report_live(struct producer *p,
			    void (*cb)(const struct ds_report *r, void *userdata), void *userdata);

/**
 * producer_is_active - true while any data-source instance exists.
 */
bool producer_is_active(const struct producer *p);

/**
 * producer_starting - the name of a data source set up and not yet started
 * (its StartDataSource still to come, or its start going on off the loop: a
 * buffer resize on its own thread); NULL once each has started or failed.
 */
const char *producer_starting(const struct producer *p);

/**
 * producer_default_socket - the producer socket Perfetto's traced listens on:
 * $PERFETTO_PRODUCER_SOCK_NAME, else /run/perfetto/traced-producer.sock when
 * /run/perfetto/ exists, else /tmp/perfetto-producer.
 */
const char *producer_default_socket(void);
