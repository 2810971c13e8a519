/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * pbsys - this machine's SystemInfo, as traced writes it into a trace and
 * traced_relay hands it to the central service for a remote machine
 * (utsname, page size, CPUs, RAM, time zone).
 */

#include <sys/utsname.h>

#include "protos/perfetto/common/system_info.pb-c.h"

/* The storage the filled message points into; lives as long as it. */
struct pbsys {
	Perfetto__Protos__SystemInfo si;
	Perfetto__Protos__Utsname un;
	struct utsname u;
};

/**
 * pbsys_fill - fill @s->si with what this machine says of itself now;
 * what cannot be read is left out.
 */
void pbsys_fill(struct pbsys *s);
