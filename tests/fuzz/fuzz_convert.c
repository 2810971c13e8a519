/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as a trace.dat through the whole
 * converter (libtracecmd's reader, the format write-back, the page batches,
 * the parser and the file writer), in process so that faults in our code
 * are caught.  libtracecmd itself is not instrumented and trusts the
 * file's layout; crashes inside it are its own (the command line runs the
 * conversion in a child process for that reason, convert_file_isolated()).
 * Whatever was written must decode as a Trace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <trace-cmd/trace-cmd.h>

#include "probes/convert/convert.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__lsan_default_suppressions(void);
const char *__asan_default_options(void);

/* libtracecmd sizes some allocations from the file unchecked; a NULL is
 * what it would get from a real allocator for those. */
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

/* libtracecmd and libtraceevent leak on some malformed files; ours must not. */
const char *__lsan_default_suppressions(void)
{
	return "leak:libtracecmd.so\nleak:libtraceevent.so\n";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct convert_summary *sum = NULL;
	struct convert_opts o = CONVERT_OPTS_DEFAULT;
	int in = memfd_create("in.dat", MFD_CLOEXEC), out = memfd_create("out", MFD_CLOEXEC);
	char path[64];
	off_t len;

	if (in < 0 || out < 0)
		abort();
	tracecmd_set_loglevel(TEP_LOG_NONE);
	if (write_all(in, data, size) < 0)
		abort();
	(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", in);
	o.compact_sched = size & 1;
	(void)convert_file(path, out, &o, &sum);
	free(sum);
	len = lseek(out, 0, SEEK_END);
	if (len > 0) {
		uint8_t *buf = malloc((size_t)len);
		Perfetto__Protos__Trace *t;

		if (!buf || pread(out, buf, (size_t)len, 0) != len)
			abort();
		t = perfetto__protos__trace__unpack(NULL, (size_t)len, buf);
		if (!t)
			abort();
		perfetto__protos__trace__free_unpacked(t, NULL);
		free(buf);
	}
	close(in);
	close(out);
	return 0;
}
