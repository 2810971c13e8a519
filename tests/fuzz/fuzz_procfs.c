/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as the contents of /proc/<pid>/status,
 * smaps_rollup, stat, cmdline and comm, and as a /proc directory entry name.
 * The parsers must stay inside the buffer (ASan checks the reads) and what
 * they return must point into it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/procfs/procfs_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_in(const char *buf, size_t len, const char *p, size_t n)
{
	if (p < buf || p + n > buf + len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct procfs_status st;
	struct procfs_stat pst;
	const char *arg;
	size_t pos = 0, prev = 0, len, args = 0;
	char name[32], comm[2 * PROCFS_COMM_MAX];
	int64_t i64;
	uint64_t u64;

	if (procfs_status_parse(buf, size, &st) == 0) {
		if (st.has_name)
			check_in(buf, size, st.name, st.name_len);
		if (st.n_nspid > PROCFS_MAX_NS_LEVEL)
			abort();
		if (st.kthread < -1 || st.kthread > 1)
			abort();
		procfs_smaps_rollup_parse(buf, size, &st);
	}

	if (procfs_stat_parse(buf, size, &pst) == 0) {
		check_in(buf, size, pst.comm, pst.comm_len);
		if (memchr(pst.comm + pst.comm_len, ')', 1) == NULL)
			abort();
	}

	while (procfs_cmdline_next(buf, size, &pos, &arg, &len)) {
		check_in(buf, size, arg, len);
		if (len == 0 || memchr(arg, '\0', len) || pos <= prev || pos > size)
			abort();
		prev = pos;
		if (++args > size)
			abort();
	}

	len = procfs_comm_to_name(buf, size, comm, sizeof(comm));
	if (len > sizeof(comm) || len > 2 * size)
		abort();

	(void)procfs_parse_int_prefix(buf, buf + size, &i64);
	(void)procfs_parse_uint_prefix(buf, buf + size, &u64);

	len = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
	memcpy(name, buf, len);
	name[len] = '\0';
	if (procfs_parse_pid(name) < 0)
		abort();
	return 0;
}
