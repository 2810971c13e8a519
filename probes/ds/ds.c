/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parts of the contract that know no data source: reports.  (Data
 * sources write through the struct pbw_sink of their ds_env, so that they
 * need not know the writer; the producer's is smb_writer_sink().)
 */
#include <stdlib.h>

#include "probes/ds/ds.h"

void ds_report_done(struct ds_report *r)
{
	if (!r)
		return;
	free(r->cpu);
	r->cpu = NULL;
	r->n_cpus = 0;
}
