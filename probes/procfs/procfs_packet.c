/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Packet framing shared by the ProcessTree and ProcessStats writers
 * (procfs_tree.c, procfs_stats.c): one TracePacket at a time, opened on
 * first use, split when large.  Below procfs_ds.c, which drives those
 * writers, so that neither has to call back into it.
 */
#include <time.h>

#include "probes/procfs/procfs_internal.h"
#include "util/util.h"

void procfs_packet_mark_scan_start(struct procfs_ds *ds)
{
	if (!ds->scan_start_ns)
		ds->scan_start_ns = now_ns(CLOCK_BOOTTIME);
}

struct pbw *procfs_packet_open_msg(struct procfs_ds *ds, uint32_t field)
{
	if (!ds->pkt) {
		procfs_packet_mark_scan_start(ds);
		ds->pkt = ds->sink.begin_packet(ds->sink.userdata);
		ds->pkt_start = pbw_position(ds->pkt);
		pbw_varint(ds->pkt, PROCFS_PKT_TIMESTAMP, ds->scan_start_ns);
		if (ds->clear_pending) {
			pbw_varint(ds->pkt, PROCFS_PKT_INCREMENTAL_STATE_CLEARED, 1);
			ds->clear_pending = false;
		}
	}
	if (ds->open_msg != (int)field) {
		if (ds->stats_proc_open) {
			(void)pbw_end_nested(ds->pkt);
			ds->stats_proc_open = false;
		}
		if (ds->open_msg)
			(void)pbw_end_nested(ds->pkt);
		pbw_begin_nested(ds->pkt, field);
		ds->open_msg = (int)field;
	}
	return ds->pkt;
}

void procfs_packet_end(struct procfs_ds *ds)
{
	if (ds->pkt) {
		uint64_t end = now_ns(CLOCK_BOOTTIME);

		if (ds->stats_proc_open)
			(void)pbw_end_nested(ds->pkt);
		if (ds->open_msg == PROCFS_PKT_PROCESS_TREE)
			pbw_varint(ds->pkt, PROCFS_TREE_COLLECTION_END, end);
		else if (ds->open_msg == PROCFS_PKT_PROCESS_STATS)
			pbw_varint(ds->pkt, PROCFS_STATS_COLLECTION_END, end);
		if (ds->open_msg)
			(void)pbw_end_nested(ds->pkt);
		ds->stats.packets++;
		if (ds->sink.end_packet(ds->sink.userdata) < 0)
			ds->stats.packets_dropped++;
	}
	ds->pkt = NULL;
	ds->open_msg = 0;
	ds->stats_proc_open = false;
	ds->scan_start_ns = 0;
}

void procfs_packet_maybe_split(struct procfs_ds *ds)
{
	uint64_t ts = ds->scan_start_ns;

	if (!ds->pkt || pbw_position(ds->pkt) - ds->pkt_start < ds->packet_split_bytes)
		return;
	procfs_packet_end(ds);
	/* the next part belongs to the same scan */
	ds->scan_start_ns = ts;
}
