/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * service - an in-process tracing service that treats producers exactly as
 * Perfetto v58.2's traced does on its producer socket: ProducerPort RPCs,
 * lazily created memfd SMBs, SetupTracing/SetupDataSource/StartDataSource,
 * flushes with acks and timeouts, StopDataSource with its ack, and a trace
 * file with the service's own packets and the trusted fields appended to
 * every producer packet.
 *
 * There is no consumer socket: the embedding program starts and stops
 * sessions through this API.  Everything runs on the caller's struct loop,
 * single-threaded, with no global state, so several services may run in one
 * process on different threads, each with its own loop.
 *
 * Producers are untrusted: malformed requests, chunks and packets are
 * counted and skipped, never fatal.  Because the tests read what this service
 * receives, it is deliberately as strict as traced (it rejects what traced
 * rejects and drops what traced drops).
 *
 * Output files are written while the session runs (packets are appended as
 * soon as they are complete), so memory stays bounded.  The service writes to
 * the file descriptor it is given and never truncates or renames; if a write
 * fails the session stops and its done hook gets the error.  A caller that
 * must never leave a half-written file under the final name writes to a
 * temporary name and renames only when the hook reports success (the test
 * tool tp-test-service does this).
 *
 * The folder and this header are named for what it is, a service; every
 * symbol, public or internal, carries the shorter prefix svc_.
 *
 * Where this service knowingly differs from traced v58.2:
 *  - Output is always streamed, as traced does with write_into_file: a
 *    DISCARD buffer does not cap the total, and size_kb only bounds what a
 *    producer may keep waiting for reassembly (gaps, pending patches).
 *    read_tracing_buffers_completed is written once, at the end; clock
 *    snapshots are written at every lifecycle event that asks for one (no
 *    drift-based dedup); the stats also every snapshot interval.
 *  - No consumer features: trigger_config, deferred_start (ignored: the
 *    session starts at once), cloning, detach, compression, trace filters,
 *    output_path, lockdown and statsd logging are not implemented.
 *  - A producer-provided SMB is never adopted; SMB scraping is not done (as
 *    traced_probes asks); inline (emulation) chunks flagged chunk_incomplete
 *    are dropped and counted.
 *  - A producer that stops reading is dropped when its send queue reaches
 *    the IPC layer's bound (1 MiB), not after traced's 10 ms send timeout.
 *  - BufferStats carry the counters this reader can tell (no overwrite,
 *    wrap or read-ahead counts); no chunk payload histograms; the trace
 *    provenance lists the buffers without their sequences.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/loop.h"

#include "protos/perfetto/config/trace_config.pb-c.h"

struct svc;
struct svc_session;

struct svc_options {
	/* 0: 65535 (traced's kMaxProducerID). */
	uint32_t max_producers;
	/*
	 * Bytes of chunks one producer may keep waiting for reassembly (gaps,
	 * pending patches).  0: the sum of the session buffers it writes to,
	 * at least 1 MiB.
	 */
	size_t max_pending_bytes_per_producer;
	/* 0: 10000 ms, as traced (clock snapshot / sync marker / stats). */
	uint32_t snapshot_interval_ms;
	/* Tests only: pretend the transport cannot pass fds (shmem emulation). */
	bool force_shmem_emulation;
	/*
	 * Serve RelayPort beside ProducerPort, as traced --enable-relay-endpoint:
	 * remote machines' SystemInfo and clock sync, written into each trace
	 * as SystemInfo and RemoteClockSync packets with their machine_id.
	 */
	bool relay_endpoint;
};

/**
 * svc_new - create a service on @e (a reference is taken).
 * @o: may be NULL for the defaults.
 * Returns: 0 or -ENOMEM/-EINVAL.
 */
int svc_new(struct loop *e, const struct svc_options *o, struct svc **ret);

/**
 * svc_free - close every connection and listening socket; sessions still
 * running are aborted (what was received is written out) and every done
 * hook not yet run is run from here (-ECANCELED for aborted ones).
 * Sessions stay allocated until svc_session_free().  Accepts NULL.
 * Returns: NULL.
 */
struct svc *svc_free(struct svc *s);

/**
 * svc_listen - accept producers on the AF_UNIX path @socket_path (an
 * existing socket file there is replaced; "@name" means abstract).
 * Returns: 0 or -errno.
 */
int svc_listen(struct svc *s, const char *socket_path);

/**
 * svc_adopt_connection - serve one producer on an already connected stream
 * socket (e.g. one end of a socketpair).  Takes ownership of @fd, also on
 * failure.
 * Returns: 0 or -errno.
 */
int svc_adopt_connection(struct svc *s, int fd);

struct svc_session_hooks {
	/*
	 * The session ended (after the final flush, the stop acks or their
	 * timeouts, and the last write), or failed: @error is 0 on success,
	 * -errno if writing the output failed (the file is then incomplete),
	 * -ECANCELED if the service was freed while it ran.  Runs from its own
	 * loop turn (or from svc_free()), so it may call svc_session_free().
	 * The session object stays valid until svc_session_free().
	 */
	void (*done)(struct svc_session *ss, int error, void *userdata);
	/*
	 * Optional: every data source instance of the session has started
	 * (traced's all_data_sources_started; at most once).  May run from
	 * inside svc_session_start() and from request handlers: it must not
	 * free the session or the service.
	 */
	void (*all_started)(struct svc_session *ss, void *userdata);
};

/**
 * svc_session_start - configure and start a tracing session, as traced's
 * EnableTracing + StartTracing.  @cfg is copied.  Matching data sources
 * of connected producers are set up and started now; producers that
 * register a matching data source later are set up and started then.
 * Output goes to @out_fd (not owned, not closed; a blocking file or pipe),
 * which must stay open until the done hook.
 * Returns: 0, -EINVAL for a config traced would reject (no buffers, a
 * zero-size buffer, target_buffer out of range, duration > 7 days),
 * -ENOSPC when out of buffer ids, -ENOMEM, or a write error.
 */
int svc_session_start(struct svc *s, const Perfetto__Protos__TraceConfig *cfg, int out_fd,
		      const struct svc_session_hooks *h, void *userdata,
		      struct svc_session **ret);

/**
 * svc_session_stop - flush and disable tracing, like traced when
 * duration_ms expires: Flush (reason trace-stop, initiator traced), wait
 * for the acks or flush_timeout_ms, StopDataSource, wait for the acks or
 * data_source_stop_timeout_ms, then finish the file.  Asynchronous: the done
 * hook reports the end.  Calling it again while stopping does nothing.
 * Returns: 0, -EALREADY if already done.
 */
int svc_session_stop(struct svc_session *ss);

/**
 * svc_session_flush - an explicit flush (reason explicit, initiator
 * traced).  @cb (may be NULL) runs when every producer acked (ok=true) or
 * at flush_timeout_ms (ok=false).
 * Returns: 0, -ESHUTDOWN if the session is not running, -EBUSY with more
 * than 1000 flushes pending, -ENOMEM.
 */
int svc_session_flush(struct svc_session *ss, void (*cb)(struct svc_session *ss, bool ok, void *userdata),
		      void *userdata);

/**
 * svc_session_free - release a session.  A session still running is
 * aborted first: data sources are stopped without waiting and what was
 * received is written out.  The done hook does not run from here.
 * Accepts NULL.
 * Returns: NULL.
 */
struct svc_session *svc_session_free(struct svc_session *ss);

struct svc_session_stats {
	uint64_t packets;           /* producer packets written to the file */
	uint64_t bytes;             /* bytes written to the file, framing included */
	uint64_t invalid_packets;   /* dropped by the packet validator */
	uint64_t commits;           /* CommitData requests of its producers */
	uint64_t chunks_read;
	uint64_t chunks_discarded;  /* not Complete, bad page, forbidden buffer */
	uint64_t abi_violations;
	uint64_t patches_applied;
	uint64_t patches_failed;
	uint64_t packets_lost;      /* reassembly failures seen by the reader */
	uint64_t producer_dropped;  /* drop markers written by producers */
	uint64_t flushes_requested;
	uint64_t flushes_acked;
	uint64_t flushes_timed_out;
	uint64_t data_sources;      /* instances ever set up */
	uint64_t data_sources_stop_timed_out;
};

/**
 * svc_session_get_stats - counters of @ss so far.
 * Returns: 0.
 */
int svc_session_get_stats(const struct svc_session *ss, struct svc_session_stats *ret);

/**
 * svc_session_id - the tracing_session_id producers see (> 0).
 */
uint64_t svc_session_id(const struct svc_session *ss);

/**
 * svc_session_is_done - true once the done hook has run.
 */
bool svc_session_is_done(const struct svc_session *ss);

/**
 * svc_producer_count - producers that completed InitializeConnection.
 */
size_t svc_producer_count(const struct svc *s);

/**
 * svc_data_source_registered - true if a connected producer registered a
 * data source named @name.
 */
bool svc_data_source_registered(const struct svc *s, const char *name);

/**
 * svc_data_sources_available - true if every data source named in @cfg is
 * registered by some producer (what a recorder waits for before starting).
 */
bool svc_data_sources_available(const struct svc *s, const Perfetto__Protos__TraceConfig *cfg);

/**
 * svc_set_producer_hook - called after every producer connect, disconnect,
 * RegisterDataSource and UnregisterDataSource, so that a caller can wait
 * for data sources without polling.  @cb may be NULL.
 */
void svc_set_producer_hook(struct svc *s, void (*cb)(struct svc *s, void *userdata), void *userdata);
