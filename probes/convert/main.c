/* SPDX-License-Identifier: Apache-2.0 */
/*
 * traced-probes-convert: the program `traced-probes convert` runs, so that
 * libtracecmd and libzstd are mapped into conversions only, never into the
 * daemon (see probes/main.c).  argv[0] is "convert", as it was when the
 * converter was called in-process.
 */
#include <malloc.h>

#include "probes/convert/convert.h"

int main(int argc, char **argv)
{
	/* The same allocator setting as the traced-probes it is run from. */
	(void)mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	return convert_main(argc, argv);
}
