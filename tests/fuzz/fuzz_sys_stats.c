/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as the contents of /proc/meminfo,
 * vmstat, stat, buddyinfo, diskstats, pressure/{cpu,io,memory}, slabinfo and of the
 * single-value sysfs files linux.sys_stats reads.  The parsers must stay
 * inside the buffer (ASan checks the reads) and what they write must
 * decode as a SysStats message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "probes/sys_stats/sys_stats_internal.h"
#include "protos/perfetto/trace/sys_stats/sys_stats.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[1 << 22];

static void check_decodes(struct pbw *w)
{
	Perfetto__Protos__SysStats *m;

	if (pbw_overflowed(w))
		return;
	m = perfetto__protos__sys_stats__unpack(NULL, pbw_position(w), out);
	if (!m)
		abort();
	perfetto__protos__sys_stats__free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ss_keymap meminfo, vmstat;
	static bool init;
	const char *buf = (const char *)data;
	struct pbw w;
	uint64_t v;

	if (!init) {
		ss_keymap_init(&meminfo, SS_FILE_MEMINFO, NULL);
		ss_keymap_init(&vmstat, SS_FILE_VMSTAT, NULL);
		init = true;
	}
	pbw_init(&w, out, sizeof(out), NULL, NULL);
	(void)ss_parse_meminfo(buf, size, &meminfo, &w);
	(void)ss_parse_vmstat(buf, size, &vmstat, &w);
	(void)ss_parse_stat(buf, size, SS_STAT_ALL, 10000000, &w);
	(void)ss_parse_buddyinfo(buf, size, &w);
	(void)ss_parse_diskstats(buf, size, &w);
	(void)ss_parse_psi(buf, size, SS_PSI_MEMORY_SOME, &w);
	(void)ss_parse_slabinfo(buf, size, &w);
	check_decodes(&w);
	(void)ss_parse_u64(buf, size, &v);
	(void)ss_parse_amd_sclk(buf, size, &v);
	return 0;
}
