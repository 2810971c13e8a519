/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.process_stats behind the data-source contract (probes/ds/ds.h): an
 * adapter over procfs.h.  The pids an ftrace instance of the same session
 * saw arrive as DS_NOTICE_PIDS notices.
 */
#include <errno.h>

#include "probes/ds/ds.h"
#include "probes/procfs/procfs.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"

static int ops_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
		     void **ret, char **ret_error, char **ret_warnings)
{
	struct procfs_ds *ds = NULL;
	int r;

	if (!env || !cfg || !ret)
		return -EINVAL;
	r = procfs_ds_setup(env->event, env->instance_id, env->tracing_session_id,
			    cfg->process_stats_config, &env->sink, &ds);
	if (r < 0)
		return r;
	*ret = ds;
	return 0;
}

static int ops_start(void *ds)
{
	return procfs_ds_start(ds);
}

static int ops_flush(void *ds)
{
	return procfs_ds_flush(ds);
}

static int ops_clear_incremental(void *ds)
{
	return procfs_ds_clear_incremental_state(ds);
}

static void ops_on_notice(void *ds, const struct ds_notice *n)
{
	if (n->kind != DS_NOTICE_PIDS || (n->n_pids == 0 && n->n_renamed == 0))
		return;
	(void)procfs_ds_on_ftrace_pids(ds, n->pids, n->n_pids, n->renamed, n->n_renamed);
}

static int ops_report(void *ds, struct ds_report *r)
{
	struct procfs_ds_stats st;

	procfs_ds_get_stats(ds, &st);
	r->events = st.processes + st.threads;
	return 0;
}

static void ops_free(void *ds)
{
	procfs_ds_free(ds);
}

const struct ds_ops procfs_ds_ops = {
	.name = "linux.process_stats",
	.setup = ops_setup,
	.start = ops_start,
	.flush = ops_flush,
	.clear_incremental = ops_clear_incremental,
	.on_notice = ops_on_notice,
	.report = ops_report,
	.free = ops_free,
};
