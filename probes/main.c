/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "probes/daemon.h"
#include "probes/recorder.h"

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "record") == 0)
		return recorder_main(argc - 1, argv + 1);
	return daemon_main(argc, argv);
}
