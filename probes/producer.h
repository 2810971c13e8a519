/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * producer - the Perfetto producer: one connection to a tracing service,
 * the SMB it hands us, and the data-source instances it asks for.  Speaks
 * ProducerPort through ipc/, writes through smb/, and drives the linux.ftrace
 * and linux.process_stats data sources.
 */

#include <stdbool.h>
#include <stdint.h>

#include "event/event.h"

struct ftrace_host;
struct producer;

/* What one data-source instance did, reported when it stops. */
struct producer_ds_report {
	const char *name;                /* "linux.ftrace", "linux.process_stats" */
	bool failed;                     /* setup failed: nothing was recorded */
	uint64_t instance_id;
	uint64_t tracing_session_id;
	unsigned n_cpus;
	uint64_t events;                 /* events written */
	uint64_t lost_events;            /* counted from page headers */
	uint64_t pages_with_loss;        /* pages flagged by the kernel, count unknown or not */
	uint64_t overrun;                /* kernel END - START overrun */
	uint64_t packets_dropped;        /* no SMB chunk was free */
	uint64_t bytes;
	struct {
		uint64_t events, lost_events, pages_with_loss, overrun;
	} cpu[256];
};

struct producer_hooks {
	/* the service went away (or never answered); the producer is dead */
	void (*disconnected)(struct producer *p, int error, void *userdata);
	/* every data source is registered with the service */
	void (*registered)(struct producer *p, void *userdata);
	/* a data-source instance stopped; the report is valid during the call */
	void (*ds_stopped)(struct producer *p, const struct producer_ds_report *r, void *userdata);
};

/**
 * producer_new - a producer on event loop @e.  @fh is the process-wide ftrace
 * host (tracefs state shared by every connection's sessions).
 */
int producer_new(struct event *e, struct ftrace_host *fh, const struct producer_hooks *hooks,
		 void *userdata, struct producer **ret);

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
