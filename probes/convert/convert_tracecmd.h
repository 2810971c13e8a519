/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * libtracecmd functions that libtracecmd.so.1 exports (since trace-cmd 2.x)
 * but declares in trace-cmd-private.h, which Debian does not install.  The
 * installed trace-cmd.h is record-level only; the whole kernel page a record
 * lies on (tracecmd_record_page) and the page size are what let the
 * converter hand pages, not records, to our page parser: the same bytes a
 * live drain reads, page headers (lost-event flags, commit) included.
 * meson checks that these link.
 */

#include <trace-cmd/trace-cmd.h>

void *tracecmd_record_page(struct tracecmd_input *handle, struct tep_record *record);
int tracecmd_page_size(struct tracecmd_input *handle);
int tracecmd_cpus(struct tracecmd_input *handle);
const char *tracecmd_get_trace_clock(struct tracecmd_input *handle);
unsigned long tracecmd_get_in_file_version(struct tracecmd_input *handle);
off_t tracecmd_get_cpu_file_size(struct tracecmd_input *handle, int cpu);
int tracecmd_get_file_compress_proto(struct tracecmd_input *handle, const char **name,
				     const char **version);
