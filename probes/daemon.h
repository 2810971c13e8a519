/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/**
 * daemon_main - the default mode: serve a Perfetto tracing service until
 * SIGTERM/SIGINT, reconnecting whenever it goes away.
 * Returns: a process exit code.
 */
int daemon_main(int argc, char **argv);
