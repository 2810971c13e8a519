/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every data source this build serves.  Adding one: a folder under probes/
 * whose public header declares its `const struct ds_ops`, its library in
 * ds_deps (probes/ds/meson.build), and one line in ds_registry[]
 * below.  The order is the order of registration with the service
 * (linux.ftrace first, as Perfetto's traced_probes).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/procfs/procfs.h"
#include "probes/sys_stats/sys_stats.h"
#include "probes/system_info/system_info.h"

const struct ds_ops *const ds_registry[] = {
	&ftrace_ds_ops,
	&procfs_ds_ops,
	&sys_stats_ds_ops,
	&system_info_ds_ops,
	NULL,
};

const struct ds_ops *ds_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; ds_registry[i]; i++)
		if (strcmp(ds_registry[i]->name, name) == 0)
			return ds_registry[i];
	return NULL;
}

static size_t registry_len(void)
{
	size_t n = 0;

	while (ds_registry[n])
		n++;
	return n;
}

int ds_shared_new_all(struct event *e, void ***ret)
{
	size_t n = registry_len();
	void **shared;
	int r;

	if (!ret)
		return -EINVAL;
	/* one spare slot so that an empty registry still gets an array */
	shared = calloc(n + 1, sizeof(*shared));
	if (!shared)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!ds_registry[i]->shared_new)
			continue;
		r = ds_registry[i]->shared_new(e, &shared[i]);
		if (r < 0) {
			ds_shared_free_all(shared);
			return r;
		}
	}
	*ret = shared;
	return 0;
}

void **ds_shared_free_all(void **shared)
{
	if (!shared)
		return NULL;
	/* in reverse: a later kind may lean on an earlier one's state */
	for (size_t i = registry_len(); i-- > 0;)
		if (shared[i] && ds_registry[i]->shared_free)
			shared[i] = ds_registry[i]->shared_free(shared[i]);
	free(shared);
	return NULL;
}
