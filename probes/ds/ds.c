/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parts of the contract that know no data source: the packet sink over
 * an SMB trace writer, and reports.  Data sources write through struct
 * ds_sink only, so that they need not know the writer, and tests can
 * capture their packets in a plain buffer instead.
 */
#include <stdlib.h>

#include "probes/ds/ds.h"
#include "smb/smb.h"

static struct pbw *writer_begin(void *userdata)
{
	return smb_writer_begin_packet(userdata);
}

static int writer_end(void *userdata)
{
	return smb_writer_end_packet(userdata);
}

static void writer_flush(void *userdata)
{
	smb_writer_flush(userdata);
}

struct ds_sink ds_sink_for_writer(struct smb_writer *w)
{
	return (struct ds_sink){
		.begin_packet = writer_begin,
		.end_packet = writer_end,
		.flush = writer_flush,
		.userdata = w,
	};
}

void ds_report_done(struct ds_report *r)
{
	if (!r)
		return;
	free(r->cpu);
	r->cpu = NULL;
	r->n_cpus = 0;
}
