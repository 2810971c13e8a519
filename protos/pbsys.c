/* SPDX-License-Identifier: Apache-2.0 */
/* pbsys - this machine's SystemInfo (pbsys.h). */
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "protos/pbsys.h"

void pbsys_fill(struct pbsys *s)
{
	time_t now = time(NULL);
	struct tm lt;
	long v, pages;

	s->si = (Perfetto__Protos__SystemInfo)PERFETTO__PROTOS__SYSTEM_INFO__INIT;
	s->un = (Perfetto__Protos__Utsname)PERFETTO__PROTOS__UTSNAME__INIT;
	if (uname(&s->u) == 0) {
		s->un.sysname = s->u.sysname;
		s->un.version = s->u.version;
		s->un.release = s->u.release;
		s->un.machine = s->u.machine;
		s->si.utsname = &s->un;
	}
	/* minutes east of UTC, as traced computes timezone_off_mins */
	if (localtime_r(&now, &lt)) {
		s->si.has_timezone_off_mins = true;
		s->si.timezone_off_mins = (int32_t)(lt.tm_gmtoff / 60);
	}
	v = sysconf(_SC_PAGESIZE);
	if (v > 0) {
		s->si.has_page_size = true;
		s->si.page_size = (uint32_t)v;
	}
	pages = sysconf(_SC_PHYS_PAGES);
	if (pages > 0 && v > 0) {
		s->si.has_system_ram_bytes = true;
		s->si.system_ram_bytes = (uint64_t)pages * (uint64_t)v;
	}
	v = sysconf(_SC_NPROCESSORS_CONF);
	if (v > 0) {
		s->si.has_num_cpus = true;
		s->si.num_cpus = (uint32_t)v;
	}
}
