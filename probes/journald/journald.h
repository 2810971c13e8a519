/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * journald - the linux.systemd_journald data source, as Perfetto v58.2's
 * traced_probes defines it: the local journal, from its tail at start on,
 * each new entry one TracePacket { timestamp = the entry's CLOCK_MONOTONIC
 * time, timestamp_clock_id = MONOTONIC, journald_event { pid, tid, uid,
 * gid, prio, tag, message, comm, exe, systemd_unit, hostname, transport } }
 * (each field only when the entry has it), limited to the priorities up to
 * min_prio (default: all) and, when the config lists them, to the
 * SYSLOG_IDENTIFIERs and units named; every flush first reads what is new,
 * then writes one packet with the counts (num_total, num_failed).
 *
 * libsystemd is loaded with dlopen() at the first setup of this data
 * source, not linked: a daemon whose sessions never ask for the journal
 * does not map it, and one on a machine without it still runs (the setup
 * then fails and says why).
 */

#include <stddef.h>
#include <stdint.h>

#include "probes/ds/ds.h"


/* The ops of "linux.systemd_journald", for probes/ds/ds_registry.c. */
extern const struct ds_ops journald_ds_ops;

/* What one journal entry's fields became (journald_entry_field()). */
struct journald_entry {
	uint32_t pid, tid, uid, gid, prio;
	/* bit i: field i of the numbers above is set */
	unsigned has_num;
	/* pointers into the journal's data, with their lengths; NULL: absent */
	const char *str[7];
	size_t str_len[7];
};

/* journald_entry.str[] slots, in SystemdJournaldEvent field order */
enum journald_str {
	JOURNALD_TAG,        /* SYSLOG_IDENTIFIER */
	JOURNALD_MESSAGE,    /* MESSAGE */
	JOURNALD_COMM,       /* _COMM */
	JOURNALD_EXE,        /* _EXE */
	JOURNALD_UNIT,       /* _SYSTEMD_UNIT */
	JOURNALD_HOSTNAME,   /* _HOSTNAME */
	JOURNALD_TRANSPORT,  /* _TRANSPORT */
	_JOURNALD_STR_MAX,
};

/**
 * journald_entry_field - take one "KEY=value" field of a journal entry into
 * @e, if it is one of those written; other fields are ignored.  Numbers
 * that are not a whole uint32 are left out.
 * @data: the field, as the journal hands it out (not NUL-terminated).
 * @len: its length.
 * @e: the entry so far; its strings point into @data.
 * Returns: 1 if the field was taken, 0 if ignored.
 */
int journald_entry_field(const void *data, size_t len, struct journald_entry *e);
