/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binds a procfs data source to an SMB trace writer.  Kept apart from
 * procfs_ds.c so that users of procfs_ds_setup_sink() (tests, tools) do
 * not pull in the SMB writer.
 */
#include <errno.h>

#include "probes/procfs/procfs.h"
#include "smb/smb.h"

static struct pbw *smb_begin(void *userdata)
{
	return smb_writer_begin_packet(userdata);
}

static int smb_end(void *userdata)
{
	return smb_writer_end_packet(userdata);
}

static void smb_flush(void *userdata)
{
	smb_writer_flush(userdata);
}

int procfs_ds_setup(struct event *e, uint64_t instance_id, uint64_t tracing_session_id,
		    const struct Perfetto__Protos__ProcessStatsConfig *cfg, struct smb_writer *w,
		    struct procfs_ds **ret)
{
	const struct procfs_sink sink = {
		.begin_packet = smb_begin,
		.end_packet = smb_end,
		.flush = smb_flush,
		.userdata = w,
	};

	if (!w)
		return -EINVAL;
	return procfs_ds_setup_sink(e, instance_id, tracing_session_id, cfg, &sink, ret);
}
