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
	static struct sys_stats_keymap meminfo, vmstat;
	static bool init;
	const char *buf = (const char *)data;
	struct pbw w;
	uint64_t v;

	if (!init) {
		sys_stats_keymap_init(&meminfo, SYS_STATS_FILE_MEMINFO, NULL);
		sys_stats_keymap_init(&vmstat, SYS_STATS_FILE_VMSTAT, NULL);
		init = true;
	}
	pbw_init(&w, out, sizeof(out), NULL, NULL);
	(void)sys_stats_parse_meminfo(buf, size, &meminfo, &w);
	(void)sys_stats_parse_vmstat(buf, size, &vmstat, &w);
	(void)sys_stats_parse_stat(buf, size, SYS_STATS_STAT_ALL, 10000000, &w);
	(void)sys_stats_parse_buddyinfo(buf, size, &w);
	(void)sys_stats_parse_diskstats(buf, size, &w);
	(void)sys_stats_parse_psi(buf, size, SYS_STATS_PSI_MEMORY_SOME, &w);
	(void)sys_stats_parse_slabinfo(buf, size, &w);
	check_decodes(&w);
	(void)sys_stats_parse_u64(buf, size, &v);
	(void)sys_stats_parse_amd_sclk(buf, size, &v);
	return 0;
}
