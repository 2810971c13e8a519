/* SPDX-License-Identifier: Apache-2.0 */
#include <malloc.h>
#include <string.h>

#include "probes/convert/convert.h"
#include "probes/daemon.h"
#include "probes/recorder.h"

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
		return convert_main(argc - 1, argv + 1);
	return daemon_main(argc, argv);
}
