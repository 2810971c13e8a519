/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure half of linux.system_info: /proc/cpuinfo blocks, cpufreq
 * frequency lists and /proc/interrupts names, read the way traced_probes
 * reads them.
 */
#include <string.h>

#include "probes/system_info/system_info_internal.h"
#include "util/util.h"

const char *const system_info_cpu_features[2] = { "mte", "mte3" };

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool next_line(const char *buf, size_t len, size_t *pos, const char **ret_s,
		      const char **ret_e)
{
	const char *p, *end = buf + len, *nl;

	if (*pos >= len)
		return false;
	p = buf + *pos;
	nl = memchr(p, '\n', (size_t)(end - p));
	*ret_s = p;
	*ret_e = nl ? nl : end;
	*pos = nl ? (size_t)(nl + 1 - buf) : len;
	return true;
}

static bool next_token(const char **pos, const char *end, const char **ret_t, size_t *ret_len)
{
	const char *p = *pos, *t;

	while (p < end && is_blank(*p))
		p++;
	if (p >= end)
		return false;
	t = p;
	while (p < end && !is_blank(*p))
		p++;
	*ret_t = t;
	*ret_len = (size_t)(p - t);
	*pos = p;
	return true;
}

/* The whole of [s, s+len) as a number in @base (16 takes a "0x" prefix). */
static bool parse_u32(const char *s, size_t len, unsigned base, uint32_t *ret)
{
	uint64_t v = 0;
	size_t i = 0;

	if (base == 16 && len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		i = 2;
	if (i == len)
		return false;
	for (; i < len; i++) {
		int d = hex_digit_value(s[i]);

		if (d < 0 || (unsigned)d >= base)
			return false;
		v = v * base + (unsigned)d;
		if (v > UINT32_MAX)
			return false;
	}
	*ret = (uint32_t)v;
	return true;
}

static bool key_is(const char *k, size_t kl, const char *s)
{
	return strlen(s) == kl && memcmp(k, s, kl) == 0;
}

/*
 * "key\t: value": one blank before the ':' and one space after it are
 * dropped; a line with no ':' or more than one is not a key/value line.
 */
static bool split_key_value(const char *s, const char *e, const char **k, size_t *kl,
			    const char **v, size_t *vl)
{
	const char *colon = memchr(s, ':', (size_t)(e - s));
	const char *ke;

	if (!colon || colon == s || colon + 1 >= e || memchr(colon + 1, ':', (size_t)(e - colon - 1)))
		return false;
	/* one blank before the ':' (a second one makes the key not match) */
	ke = colon;
	if (ke > s && (ke[-1] == ' ' || ke[-1] == '\t'))
		ke--;
	*k = s;
	*kl = (size_t)(ke - s);
	*v = colon + 1;
	if (*v < e && **v == ' ')
		(*v)++;
	*vl = (size_t)(e - *v);
	return *kl > 0;
}

static const char *const arm_keys[5] = {
	"CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision",
};
static const unsigned arm_base[5] = { 16, 10, 16, 16, 10 };

bool system_info_cpuinfo_next(const char *buf, size_t len, size_t *pos, struct system_info_cpu *cpu)
{
	const char *ls, *le, *k, *v;
	size_t kl, vl;
	bool has_index = false;

	/* what the previous block set is not carried over, except "Processor" */
	cpu->has_arm = 0;
	cpu->features = 0;
	if (!cpu->processor) {
		cpu->processor = "unknown";
		cpu->processor_len = strlen("unknown");
	}

	while (next_line(buf, len, pos, &ls, &le)) {
		if (ls == le) {
			if (has_index)
				return true;
			continue;
		}
		if (!split_key_value(ls, le, &k, &kl, &v, &vl))
			continue;
		if (key_is(k, kl, "Processor")) {
			cpu->processor = v;
			cpu->processor_len = vl;
		} else if (key_is(k, kl, "processor")) {
			has_index = parse_u32(v, vl, 10, &cpu->index);
		} else if (key_is(k, kl, "Features") || key_is(k, kl, "Flags")) {
			const char *p = v, *t;
			size_t tl;

			while (next_token(&p, v + vl, &t, &tl))
				for (size_t i = 0; i < sizeof(system_info_cpu_features) / sizeof(system_info_cpu_features[0]); i++)
					if (key_is(t, tl, system_info_cpu_features[i]))
						cpu->features |= UINT64_C(1) << i;
		} else {
			for (size_t i = 0; i < 5; i++)
				if (key_is(k, kl, arm_keys[i])) {
					if (parse_u32(v, vl, arm_base[i], &cpu->arm[i]))
						cpu->has_arm |= (uint8_t)(1u << i);
					else
						cpu->has_arm &= (uint8_t)~(1u << i);
				}
		}
	}
	return has_index;
}

size_t system_info_freqs_parse(const char *buf, size_t len, uint32_t *freqs, size_t n, size_t max)
{
	const char *p = buf, *t;
	size_t tl;

	while (next_token(&p, buf + len, &t, &tl)) {
		uint32_t f;
		size_t i;

		if (!parse_u32(t, tl, 10, &f))
			continue;
		/* insertion into a sorted set: the lists are a few dozen long */
		for (i = 0; i < n && freqs[i] < f; i++)
			;
		if (i < n && freqs[i] == f)
			continue;
		if (n == max)
			break;
		memmove(&freqs[i + 1], &freqs[i], (n - i) * sizeof(*freqs));
		freqs[i] = f;
		n++;
	}
	return n;
}

/* A trigger column: Arm GIC "Level"/"Edge", x86 "<hwirq>-edge", "-fasteoi", ... */
static bool is_trigger(const char *t, size_t tl)
{
	static const char *const suffixes[] = { "-edge", "-fasteoi", "-level", "-fasteoi-level" };

	if (key_is(t, tl, "Level") || key_is(t, tl, "Edge"))
		return true;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t sl = strlen(suffixes[i]);

		if (tl >= sl && memcmp(t + tl - sl, suffixes[i], sl) == 0)
			return true;
	}
	return false;
}

bool system_info_interrupts_next(const char *buf, size_t len, size_t *pos, unsigned *n_cpus,
				 struct system_info_irq *ret)
{
	const char *ls, *le, *t;
	size_t tl;

	if (*pos == 0) {
		/* "           CPU0       CPU1" */
		*n_cpus = 0;
		if (!next_line(buf, len, pos, &ls, &le))
			return false;
		while (next_token(&ls, le, &t, &tl))
			if (tl >= 3 && memcmp(t, "CPU", 3) == 0)
				(*n_cpus)++;
	}
	if (*n_cpus == 0)
		return false;

	/* "  9:   0   0   IO-APIC   9-fasteoi   acpi" */
	while (next_line(buf, len, pos, &ls, &le)) {
		const char *p = ls, *last = NULL, *after_trigger = NULL, *name;
		size_t n = 0, last_trigger = 0, name_idx;
		bool want_next = false;
		uint32_t irq;

		if (!next_token(&p, le, &t, &tl) || tl < 2 || t[tl - 1] != ':' ||
		    !parse_u32(t, tl - 1, 10, &irq))
			continue;
		n = 1;
		while (next_token(&p, le, &t, &tl)) {
			if (want_next) {
				after_trigger = t;
				want_next = false;
			}
			if (n > *n_cpus && is_trigger(t, tl)) {
				last_trigger = n;
				after_trigger = NULL;
				want_next = true;
			}
			last = t;
			n++;
		}
		if (n <= *n_cpus)
			continue;
		/* the name follows the last trigger column, or is the last word */
		if (last_trigger) {
			name_idx = last_trigger + 1;
			name = after_trigger;
		} else {
			name_idx = n - 1;
			name = last;
		}
		if (name_idx >= n || name_idx < *n_cpus + 2 || !name)
			continue;
		while (le > name && is_blank(le[-1]))
			le--;
		ret->irq = irq;
		ret->name = name;
		ret->name_len = (size_t)(le - name);
		return true;
	}
	return false;
}
