/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * notify - the service manager's readiness protocol (sd_notify(3)): one
 * datagram of "KEY=VALUE" lines to the AF_UNIX socket named by
 * $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace).
 */
#include <stdint.h>

#include "util/util.h"

/**
 * notify_send() - send @state (e.g. "READY=1\nSTATUS=...").
 *
 * Return: 1 sent, 0 when not run by a service manager, -errno.
 */
int notify_send(const char *state);

/** notify_sendf() - notify_send() of a formatted state. */
int notify_sendf(const char *fmt, ...) _printf_(1, 2);

/**
 * notify_watchdog_usec() - the watchdog interval the service manager asks
 * for ($WATCHDOG_USEC, for this process when $WATCHDOG_PID is set).
 * @ret: the interval in µs.
 *
 * Return: 1 with *@ret set, 0 when no watchdog is wanted, -errno when the
 * variables are malformed.
 */
int notify_watchdog_usec(uint64_t *ret);
