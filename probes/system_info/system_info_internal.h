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
	SYSTEM_INFO_PKT_TIMESTAMP = 8,
	SYSTEM_INFO_PKT_CPU_INFO = 67,
	SYSTEM_INFO_PKT_INTERRUPT_INFO = 130,

	SYSTEM_INFO_CPUINFO_CPUS = 1,
	SYSTEM_INFO_CPU_PROCESSOR = 1,
	SYSTEM_INFO_CPU_FREQUENCIES = 2,
	SYSTEM_INFO_CPU_CAPACITY = 3,
	SYSTEM_INFO_CPU_ARM_IDENTIFIER = 4,
	SYSTEM_INFO_CPU_FEATURES = 5,

	SYSTEM_INFO_IRQ_MAPPING = 1,
	SYSTEM_INFO_IRQ_ID = 1,
	SYSTEM_INFO_IRQ_NAME = 2,
};

/* One "processor" block of /proc/cpuinfo. */
struct system_info_cpu {
	uint32_t index;               /* "processor" */
	const char *processor;        /* "Processor" (Arm) so far, or "unknown"; in @buf */
	size_t processor_len;
	/* "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision" */
	uint32_t arm[5];
	uint8_t has_arm;              /* bit i: arm[i] was read */
	uint64_t features;            /* bit i: system_info_cpu_features[i] in "Features" or "Flags" */
};

#define SYSTEM_INFO_ARM_ALL 0x1f

/* The flags CpuInfo.Cpu.features has a bit for, by bit number. */
extern const char *const system_info_cpu_features[2];

/**
 * system_info_cpuinfo_next - the next CPU block of /proc/cpuinfo from *@pos.
 * Returns: true and @ret filled, false at the end.  @ret->processor
 * carries over from earlier blocks (Arm prints "Processor" once, first).
 */
bool system_info_cpuinfo_next(const char *buf, size_t len, size_t *pos, struct system_info_cpu *ret);

/**
 * system_info_freqs_parse - add the numbers of a space-separated list of kHz to
 * @freqs (sorted, each once), at most @max in all.
 * Returns: the new count.
 */
size_t system_info_freqs_parse(const char *buf, size_t len, uint32_t *freqs, size_t n, size_t max);

/* One hardware IRQ of /proc/interrupts: its number and name words. */
struct system_info_irq {
	uint32_t irq;
	const char *name;             /* from the first name word to the end of the line */
	size_t name_len;              /* the words are separated by runs of blanks */
};

/**
 * system_info_interrupts_next - the next numbered IRQ of /proc/interrupts that has
 * a name.  *@pos starts at 0; *@n_cpus is read from the header line.
 * Returns: true and @ret filled, false at the end.
 */
bool system_info_interrupts_next(const char *buf, size_t len, size_t *pos, unsigned *n_cpus,
				 struct system_info_irq *ret);
