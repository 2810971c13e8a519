/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every data source this build serves, from the data_sources list in
 * probes/meson.build (ds_registry_list.h is generated from it).  The order
 * is the order of registration with the service (linux.ftrace first, as
 * Perfetto's traced_probes).  Each data source's folder defines
 * `const struct ds_ops NAME_ds_ops`; its declaration here comes from the
 * same list, so the registry needs none of their headers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ds/ds.h"
#include "ds_registry_list.h"

#define DS_DECLARE(name) extern const struct ds_ops name##_ds_ops;
DS_REGISTRY(DS_DECLARE)
#undef DS_DECLARE

const struct ds_ops *const ds_registry[] = {
#define DS_ENTRY(name) &name##_ds_ops,
	DS_REGISTRY(DS_ENTRY)
#undef DS_ENTRY
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

int ds_shared_new_all(struct loop *e, void ***ret)
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
