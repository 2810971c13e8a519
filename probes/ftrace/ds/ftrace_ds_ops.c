/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.ftrace behind the data-source contract (probes/ds/ds.h): the ops
 * table is a thin adapter over ftrace_ds.h, so that the producer needs no
 * knowledge of ftrace and ftrace none of the producer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "probes/ftrace/plan/ftrace_plan.h"
#include "protos/perfetto/common/data_source_descriptor.pb-c.h"
#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "util/util.h"

/* One instance: the data source and the host to tell about its passes. */
struct ftrace_ops_ds {
	struct ftrace_ds *ds;
	struct ds_host host;
};

static int ops_shared_new(struct loop *e, void **ret)
{
	struct ftrace_host *h = NULL;
	int r;

	r = ftrace_host_new(e, &h);
	if (r < 0)
		return r;
	*ret = h;
	return 0;
}

static void *ops_shared_free(void *shared)
{
	return ftrace_host_free(shared);
}

static int ops_recover(char **ret_report)
{
	return ftrace_host_recover_report(NULL, ret_report);
}

/* Perfetto's traced_probes registers linux.ftrace with an (empty) FtraceDescriptor. */
static void ops_describe(Perfetto__Protos__DataSourceDescriptor *d)
{
	static Perfetto__Protos__FtraceDescriptor fd = PERFETTO__PROTOS__FTRACE_DESCRIPTOR__INIT;

	d->ftrace_descriptor = &fd;
}

/* After every read pass: the pids it saw go to the session's other instances. */
static void on_pass_done(struct ftrace_ds *ds, const struct ftrace_pidset *pids, void *userdata)
{
	struct ftrace_ops_ds *o = userdata;
	struct ds_notice n = { .kind = DS_NOTICE_PIDS };

	n.n_pids = ftrace_pidset_pids(pids, &n.pids);
	n.n_renamed = ftrace_pidset_renamed(pids, &n.renamed);
	/* sent even when empty: the host commits what the pass wrote */
	if (o->host.notice)
		o->host.notice(o->host.host, &n);
}

/* A start held by the buffer resize is over: the producer acks it now. */
static void on_started(struct ftrace_ds *ds, int error, const char *why, void *userdata)
{
	struct ftrace_ops_ds *o = userdata;

	(void)ds;
	if (o->host.started)
		o->host.started(o->host.host, error, why);
}

static int ops_check_config(const Perfetto__Protos__DataSourceConfig *cfg, char *err, size_t err_len)
{
	return ftrace_plan_check(cfg ? cfg->ftrace_config : NULL, err, err_len);
}

static int ops_setup(const struct ds_env *env, const Perfetto__Protos__DataSourceConfig *cfg,
		     void **ret, char **ret_error, char **ret_warnings)
{
	static const Perfetto__Protos__FtraceConfig empty = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
	const struct ftrace_ds_hooks hooks = { .pass_done = on_pass_done, .started = on_started };
	struct ftrace_ops_ds *o;
	const char *warnings;
	int r;

	if (!env || !env->shared || !cfg || !ret)
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->host = env->host;
	r = ftrace_ds_setup(env->shared, env->instance_id, env->tracing_session_id,
			    cfg->ftrace_config ? cfg->ftrace_config : &empty, &env->sink, &hooks, o,
			    &o->ds, ret_error);
	if (r < 0) {
		free(o);
		return r;
	}
	warnings = ftrace_ds_get_warnings(o->ds);
	if (warnings && ret_warnings)
		*ret_warnings = strdup(warnings);
	*ret = o;
	return 0;
}

static int ops_start(void *ds)
{
	struct ftrace_ops_ds *o = ds;
	int r = ftrace_ds_start(o->ds);

	return r == FTRACE_DS_START_LATER ? DS_START_LATER : r;
}

static int ops_flush(void *ds)
{
	struct ftrace_ops_ds *o = ds;

	return ftrace_ds_flush(o->ds);
}

static int ops_flush_final(void *ds)
{
	struct ftrace_ops_ds *o = ds;

	return ftrace_ds_flush_final(o->ds);
}

static int ops_flush_last(void *ds)
{
	struct ftrace_ops_ds *o = ds;

	return ftrace_ds_flush_last(o->ds);
}

static int ops_report(void *ds, struct ds_report *r)
{
	_cleanup_free_ struct ftrace_ds_summary *s = NULL;
	struct ftrace_ops_ds *o = ds;
	int ret;

	ret = ftrace_ds_get_summary(o->ds, &s);
	if (ret < 0)
		return ret;
	r->cpu = calloc(s->n_cpus ? s->n_cpus : 1, sizeof(*r->cpu));
	if (!r->cpu)
		return -ENOMEM;
	r->n_cpus = s->n_cpus;
	r->first_ts = s->first_ts;
	r->last_ts = s->last_ts;
	for (unsigned i = 0; i < s->n_cpus; i++)
		r->cpu[i] = (struct ds_cpu_report){
			.events = s->cpu[i].events,
			.lost_events = s->cpu[i].lost_events,
			.pages_with_loss = s->cpu[i].pages_with_loss,
			.overrun = s->cpu[i].overrun,
			.skipped_events = s->cpu[i].skipped_events,
			.read_events = s->cpu[i].read_events,
		};
	return 0;
}

static void ops_free(void *ds)
{
	struct ftrace_ops_ds *o = ds;

	if (!o)
		return;
	ftrace_ds_free(o->ds);
	free(o);
}

const struct ds_ops ftrace_ds_ops = {
	.name = "linux.ftrace",
	.describe = ops_describe,
	.shared_new = ops_shared_new,
	.shared_free = ops_shared_free,
	.recover = ops_recover,
	.check_config = ops_check_config,
	.setup = ops_setup,
	.start = ops_start,
	.flush = ops_flush,
	.flush_final = ops_flush_final,
	.flush_last = ops_flush_last,
	.report = ops_report,
	.free = ops_free,
};
