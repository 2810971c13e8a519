/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The pure parsers of linux.system_info, shared with its tests and fuzz
 * target.  They read @len bytes at @buf (no NUL needed) and allocate
 * nothing.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	SI_PKT_TIMESTAMP = 8,
	SI_PKT_CPU_INFO = 67,
	SI_PKT_INTERRUPT_INFO = 130,

	SI_CPUINFO_CPUS = 1,
	SI_CPU_PROCESSOR = 1,
	SI_CPU_FREQUENCIES = 2,
	SI_CPU_CAPACITY = 3,
	SI_CPU_ARM_IDENTIFIER = 4,
	SI_CPU_FEATURES = 5,

	SI_IRQ_MAPPING = 1,
	SI_IRQ_ID = 1,
	SI_IRQ_NAME = 2,
};

/* One "processor" block of /proc/cpuinfo. */
struct si_cpu {
	uint32_t index;               /* "processor" */
	const char *processor;        /* "Processor" (Arm) so far, or "unknown"; in @buf */
	size_t processor_len;
	/* "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision" */
	uint32_t arm[5];
	uint8_t has_arm;              /* bit i: arm[i] was read */
	uint64_t features;            /* bit i: si_cpu_features[i] in "Features" or "Flags" */
};

#define SI_ARM_ALL 0x1f

/* The flags CpuInfo.Cpu.features has a bit for, by bit number. */
extern const char *const si_cpu_features[2];

/**
 * si_cpuinfo_next - the next CPU block of /proc/cpuinfo from *@pos.
 * Returns: true and @ret filled, false at the end.  @ret->processor
 * carries over from earlier blocks (Arm prints "Processor" once, first).
 */
bool si_cpuinfo_next(const char *buf, size_t len, size_t *pos, struct si_cpu *ret);

/**
 * si_freqs_parse - add the numbers of a space-separated list of kHz to
 * @freqs (sorted, each once), at most @max in all.
 * Returns: the new count.
 */
size_t si_freqs_parse(const char *buf, size_t len, uint32_t *freqs, size_t n, size_t max);

/* One hardware IRQ of /proc/interrupts: its number and name words. */
struct si_irq {
	uint32_t irq;
	const char *name;             /* from the first name word to the end of the line */
	size_t name_len;              /* the words are separated by runs of blanks */
};

/**
 * si_interrupts_next - the next numbered IRQ of /proc/interrupts that has
 * a name.  *@pos starts at 0; *@n_cpus is read from the header line.
 * Returns: true and @ret filled, false at the end.
 */
bool si_interrupts_next(const char *buf, size_t len, size_t *pos, unsigned *n_cpus,
			struct si_irq *ret);
