/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "probes/daemon.h"
#include "probes/recorder.h"
#include "util/util.h"

#define CONVERT_EXE "traced-probes-convert"

/*
 * `traced-probes convert` runs a separate program, traced-probes-convert
 * (probes/convert/main.c).  The converter needs libtracecmd and, through it,
 * libzstd: linked here, they would be mapped into the daemon and `record`
 * too, which never use them (about half a MiB of file-backed RSS on a
 * daemon of under 4 MiB).  dlopen() would keep them out as well, but
 * means resolving some twenty symbols by hand, seven of them from
 * trace-cmd's private header; an exec keeps the converter an ordinary
 * program linked (and checked) by the toolchain.  It is looked for beside
 * this executable first (the build tree), then where the package installs
 * it.  argv is handed on from "convert", so options, messages and exit
 * statuses are the converter's own, exactly as when it was built in.
 */
static int convert_exec(char **argv)
{
	char self[PATH_MAX], path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash && snprintf(path, sizeof(path), "%.*s/" CONVERT_EXE,
				      (int)(slash - self), self) < (int)sizeof(path)) {
			execv(path, argv);
			if (errno != ENOENT)
				return log_error_errno(-errno, "Cannot run '%s': %m", path), 1;
		}
	}
	execv(TP_LIBEXECDIR "/" CONVERT_EXE, argv);
	return log_error_errno(-errno, "Cannot run '%s': %m", TP_LIBEXECDIR "/" CONVERT_EXE), 1;
}

int main(int argc, char **argv)
{
	/*
	 * Big tables (pid sets, frame buffers) are sized for the worst case
	 * and rely on mmap()ed, lazily backed memory.  glibc raises its mmap
	 * threshold after the first large free(), and from then on such
	 * callocs come from the heap and are zeroed page by page: a fixed
	 * threshold keeps the RSS at what is used.
	 */
	(void)mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	if (argc > 1 && strcmp(argv[1], "record") == 0)
		return recorder_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "convert") == 0)
		return convert_exec(argv + 1);
	return daemon_main(argc, argv);
}
