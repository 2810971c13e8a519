/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure half of linux.sys_stats: counter names, and the parsers that turn
 * the text of /proc and /sys files into SysStats fields.  No I/O, no
 * allocation: what is parsed is written straight into the caller's pbw.
 */
#include <errno.h>
#include <string.h>

#include "probes/sys_stats/sys_stats_internal.h"
#include "util/util.h"

/* ---- counter names ------------------------------------------------------ */

struct sys_stats_counter {
	const char *key;
	uint16_t number;
	uint8_t file;
	uint8_t key_len;
};

static const struct sys_stats_counter counters[] = {
#define SYS_STATS_COUNTER(file, key, number, name) { key, number, SYS_STATS_FILE_##file, sizeof(key) - 1 },
#include "probes/sys_stats/sys_stats_counters.inc"
#undef SYS_STATS_COUNTER
};

_Static_assert(ARRAY_SIZE(counters) < UINT16_MAX, "slot type too small");
_Static_assert(ARRAY_SIZE(counters) < SYS_STATS_KEYMAP_SLOTS / 2, "keymap too full");

/* FNV-1a: keys are short, and one multiply per byte is cheap enough. */
static uint32_t key_hash(const char *key, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)key[i]) * 16777619u;
	return h;
}

void sys_stats_keymap_init(struct sys_stats_keymap *m, enum sys_stats_counter_file file, const uint64_t *enabled)
{
	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < ARRAY_SIZE(counters); i++) {
		const struct sys_stats_counter *c = &counters[i];
		uint32_t s;

		if (c->file != file)
			continue;
		if (enabled && !(enabled[c->number / 64] & (UINT64_C(1) << (c->number % 64))))
			continue;
		s = key_hash(c->key, c->key_len) & (SYS_STATS_KEYMAP_SLOTS - 1);
		while (m->slot[s])
			s = (s + 1) & (SYS_STATS_KEYMAP_SLOTS - 1);
		m->slot[s] = (uint16_t)(i + 1);
		m->n++;
	}
}

unsigned sys_stats_keymap_find(const struct sys_stats_keymap *m, const char *key, size_t len)
{
	uint32_t s = key_hash(key, len) & (SYS_STATS_KEYMAP_SLOTS - 1);

	for (; m->slot[s]; s = (s + 1) & (SYS_STATS_KEYMAP_SLOTS - 1)) {
		const struct sys_stats_counter *c = &counters[m->slot[s] - 1];

		if (c->key_len == len && memcmp(c->key, key, len) == 0)
			return c->number;
	}
	return 0;
}

unsigned sys_stats_counter_number(enum sys_stats_counter_file file, const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
		if (counters[i].file == file && strcmp(counters[i].key, key) == 0)
			return counters[i].number;
	return 0;
}

/* ---- tokens ------------------------------------------------------------- */

/* The next line of [*pos, end) without its '\n'; false at the end. */
static bool next_line(const char **pos, const char *end, const char **ret_s, const char **ret_e)
{
	const char *p = *pos, *nl;

	if (p >= end)
		return false;
	nl = memchr(p, '\n', (size_t)(end - p));
	*ret_s = p;
	*ret_e = nl ? nl : end;
	*pos = nl ? nl + 1 : end;
	return true;
}

/* The next run of non-blank bytes of [*pos, end); false when none is left. */
static bool next_token(const char **pos, const char *end, const char **ret_t, size_t *ret_len)
{
	const char *p = *pos, *t;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p >= end)
		return false;
	t = p;
	while (p < end && *p != ' ' && *p != '\t')
		p++;
	*ret_t = t;
	*ret_len = (size_t)(p - t);
	*pos = p;
	return true;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * The leading decimal digits of a token, saturating; false when it does not
 * start with one.  (strtoll() would also take a sign and blanks; the kernel
 * writes neither in these files.)
 */
static bool token_u64(const char *t, size_t len, uint64_t *ret)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < len && is_digit(t[i]); i++) {
		unsigned d = (unsigned)(t[i] - '0');

		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
	}
	*ret = v;
	return i > 0;
}

/* As token_u64(), 0 for a token that is not a number (strtoll's answer). */
static uint64_t token_u64_or0(const char *t, size_t len)
{
	uint64_t v;

	return token_u64(t, len, &v) ? v : 0;
}

static bool token_is(const char *t, size_t len, const char *s)
{
	return strlen(s) == len && memcmp(t, s, len) == 0;
}

/* ---- meminfo, vmstat ------------------------------------------------------ */

/*
 * A { key = 1, value = 2 } message whose size is known before it is
 * written: its length goes in front directly, without the reserve-and-
 * back-fill of pbw_begin_nested().  This is most of what a vmstat poll
 * writes.
 */
static void put_key_value(struct pbw *w, uint32_t field, unsigned key, uint64_t v)
{
	size_t len = 1 + pbw_varint_len(key) + 1 + pbw_varint_len(v);

	/* tag (1) + length (1) + at most 1 + 2 + 1 + 10 bytes */
	pbw_reserve(w, 2 + len);
	*w->cur++ = (uint8_t)((field << 3) | PBW_WIRE_LEN);
	*w->cur++ = (uint8_t)len;
	*w->cur++ = (uint8_t)((SYS_STATS_KV_KEY << 3) | PBW_WIRE_VARINT);
	w->cur = pbw_put_varint_raw(w->cur, key);
	*w->cur++ = (uint8_t)((SYS_STATS_KV_VALUE << 3) | PBW_WIRE_VARINT);
	w->cur = pbw_put_varint_raw(w->cur, v);
}

static size_t parse_key_value(const char *buf, size_t len, const struct sys_stats_keymap *m,
			      bool colon, uint32_t field, struct pbw *w)
{
	const char *pos = buf, *end = buf + len, *ls, *le;
	size_t n = 0;

	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tl;
		unsigned key;
		uint64_t v;

		if (!next_token(&ls, le, &t, &tl))
			continue;
		if (colon) {
			/* "MemTotal:" */
			if (t[tl - 1] != ':')
				continue;
			tl--;
		}
		key = sys_stats_keymap_find(m, t, tl);
		if (!key)
			continue;
		/* A value that is not a number is left out rather than sent as 0. */
		if (!next_token(&ls, le, &t, &tl) || !token_u64(t, tl, &v))
			continue;
		put_key_value(w, field, key, v);
		n++;
	}
	return n;
}

size_t sys_stats_parse_meminfo(const char *buf, size_t len, const struct sys_stats_keymap *m, struct pbw *w)
{
	return parse_key_value(buf, len, m, /* colon= */ true, SYS_STATS_MEMINFO, w);
}

size_t sys_stats_parse_vmstat(const char *buf, size_t len, const struct sys_stats_keymap *m, struct pbw *w)
{
	return parse_key_value(buf, len, m, /* colon= */ false, SYS_STATS_VMSTAT, w);
}

/* ---- stat ------------------------------------------------------------------ */

/* The whole token is a number. */
static bool token_is_u64(const char *t, size_t len, uint64_t *ret)
{
	uint64_t v;

	for (size_t i = 0; i < len; i++)
		if (!is_digit(t[i]))
			return false;
	if (!token_u64(t, len, &v))
		return false;
	*ret = v;
	return true;
}

/*
 * "cpuN user nice system idle iowait irq softirq steal ...".  A "cpu"
 * followed by anything but digits is skipped (traced_probes would file it
 * under CPU 0).
 */
static bool write_cpu_times(const char *t, size_t tl, const char *pos, const char *end,
			    uint64_t ns_per_tick, struct pbw *w)
{
	uint64_t cpu;

	if (!token_is_u64(t + 3, tl - 3, &cpu) || cpu > UINT32_MAX)
		return false;
	pbw_begin_nested(w, SYS_STATS_CPU_STAT);
	pbw_varint(w, 1, cpu);
	/* CpuTimes fields 2..9; a missing column is 0, as traced_probes has it. */
	for (uint32_t f = 2; f <= 9; f++) {
		uint64_t v = 0;

		if (next_token(&pos, end, &t, &tl))
			v = token_u64_or0(t, tl);
		pbw_varint(w, f, v * ns_per_tick);
	}
	(void)pbw_end_nested(w);
	return true;
}

/*
 * "intr total n0 n1 ..." / "softirq total n0 n1 ...": the total, then one
 * InterruptCount per number (per non-zero number when @skip_zero).
 */
static size_t write_irq_counts(const char *pos, const char *end, uint32_t total_field,
			       uint32_t field, bool skip_zero, struct pbw *w)
{
	const char *t;
	size_t tl, n = 0;
	int64_t i;

	for (i = -1; next_token(&pos, end, &t, &tl); i++) {
		uint64_t v = token_u64_or0(t, tl);

		if (i < 0) {
			pbw_varint(w, total_field, v);
			continue;
		}
		if (skip_zero && v == 0)
			continue;
		pbw_begin_nested(w, field);
		pbw_int(w, 1, (int32_t)i);
		pbw_varint(w, 2, v);
		(void)pbw_end_nested(w);
		n++;
	}
	return n;
}

size_t sys_stats_parse_stat(const char *buf, size_t len, unsigned mask, uint64_t ns_per_tick,
			    struct pbw *w)
{
	const char *pos = buf, *end = buf + len, *ls, *le;
	size_t n = 0;

	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tl;

		if (!next_token(&ls, le, &t, &tl))
			continue;
		/* "cpu" alone is the sum over CPUs: traced_probes leaves it out. */
		if ((mask & SYS_STATS_STAT_CPU_TIMES) && tl > 3 && memcmp(t, "cpu", 3) == 0) {
			n += write_cpu_times(t, tl, ls, le, ns_per_tick, w);
		} else if ((mask & SYS_STATS_STAT_IRQ_COUNTS) && token_is(t, tl, "intr")) {
			n += write_irq_counts(ls, le, SYS_STATS_NUM_IRQ_TOTAL, SYS_STATS_NUM_IRQ, true, w);
		} else if ((mask & SYS_STATS_STAT_SOFTIRQ_COUNTS) && token_is(t, tl, "softirq")) {
			n += write_irq_counts(ls, le, SYS_STATS_NUM_SOFTIRQ_TOTAL, SYS_STATS_NUM_SOFTIRQ, false, w);
		} else if ((mask & SYS_STATS_STAT_FORK_COUNT) && token_is(t, tl, "processes")) {
			uint64_t v;

			/* a count that is not a number is left out rather than sent as 0 */
			if (next_token(&ls, le, &t, &tl) && token_u64(t, tl, &v)) {
				pbw_varint(w, SYS_STATS_NUM_FORKS, v);
				n++;
			}
		}
	}
	return n;
}

/* ---- buddyinfo, diskstats, psi, slabinfo ------------------------------------ */

size_t sys_stats_parse_buddyinfo(const char *buf, size_t len, struct pbw *w)
{
	const char *pos = buf, *end = buf + len, *ls, *le;
	size_t n = 0;

	/* "Node 0, zone   Normal    701    344 ..." */
	while (next_line(&pos, end, &ls, &le)) {
		const char *t, *comma;
		size_t tl;
		unsigned i;

		if (!next_token(&ls, le, &t, &tl))
			continue;
		pbw_begin_nested(w, SYS_STATS_BUDDY_INFO);
		for (i = 1; next_token(&ls, le, &t, &tl); i++) {
			if (i == 1) {
				comma = memchr(t, ',', tl);
				pbw_bytes(w, 1, t, comma ? (size_t)(comma - t) : tl);
			} else if (i == 3) {
				pbw_bytes(w, 2, t, tl);
			} else if (i > 3) {
				pbw_varint(w, 3, (uint32_t)token_u64_or0(t, tl));
			}
		}
		(void)pbw_end_nested(w);
		n++;
	}
	return n;
}

/* DiskStat field of each /proc/diskstats column (0: not sent). */
static const uint8_t disk_field[20] = {
	[5] = 2, [6] = 3, [9] = 4, [10] = 5, [16] = 6, [17] = 7, [18] = 8, [19] = 9,
};

size_t sys_stats_parse_diskstats(const char *buf, size_t len, struct pbw *w)
{
	const char *pos = buf, *end = buf + len, *ls, *le;
	size_t n = 0;

	/* "major minor name reads merged sectors ms writes ..." */
	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tl;
		unsigned i;

		if (!next_token(&ls, le, &t, &tl))
			continue;
		pbw_begin_nested(w, SYS_STATS_DISK_STAT);
		for (i = 1; i < ARRAY_SIZE(disk_field) && next_token(&ls, le, &t, &tl); i++) {
			if (i == 2)
				pbw_bytes(w, 1, t, tl);
			else if (disk_field[i])
				pbw_varint(w, disk_field[i], token_u64_or0(t, tl));
		}
		(void)pbw_end_nested(w);
		n++;
	}
	return n;
}

size_t sys_stats_parse_psi(const char *buf, size_t len, unsigned some, struct pbw *w)
{
	const char *pos = buf, *end = buf + len, *ls, *le;
	size_t n = 0;

	/* "some avg10=0.00 avg60=0.00 avg300=0.00 total=12345" (total in us) */
	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tl;
		unsigned i, resource = 0;

		if (!next_token(&ls, le, &t, &tl))
			continue;
		if (token_is(t, tl, "some"))
			resource = some;
		else if (token_is(t, tl, "full"))
			resource = some + 1;
		pbw_begin_nested(w, SYS_STATS_PSI);
		pbw_varint(w, 1, resource);
		for (i = 1; i <= 4 && next_token(&ls, le, &t, &tl); i++) {
			if (i < 4)
				continue;
			if (tl >= 6 && memcmp(t, "total=", 6) == 0) {
				t += 6;
				tl -= 6;
			}
			pbw_varint(w, 2, token_u64_or0(t, tl) * 1000);
		}
		(void)pbw_end_nested(w);
		n++;
	}
	return n;
}

size_t sys_stats_parse_slabinfo(const char *buf, size_t len, struct pbw *w)
{
	const char *pos = buf, *end = buf + len, *ls, *le;
	size_t n = 0;
	unsigned line = 0;

	/*
	 * "name active_objs num_objs objsize objperslab pagesperslab : tunables
	 *  limit batchcount sharedfactor : slabdata active_slabs num_slabs ..."
	 */
	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tl;
		unsigned i;

		/* a version line and a column header */
		if (line++ < 2)
			continue;
		if (!next_token(&ls, le, &t, &tl))
			continue;
		pbw_begin_nested(w, SYS_STATS_SLAB_INFO);
		pbw_bytes(w, 1, t, tl);
		for (i = 1; i <= 14 && next_token(&ls, le, &t, &tl); i++) {
			if (i == 5)
				pbw_varint(w, 2, (uint32_t)token_u64_or0(t, tl));
			else if (i == 14)
				pbw_varint(w, 3, (uint32_t)token_u64_or0(t, tl));
		}
		(void)pbw_end_nested(w);
		n++;
	}
	return n;
}

/* ---- single values ------------------------------------------------------------ */

int sys_stats_parse_u64(const char *buf, size_t len, uint64_t *ret)
{
	return token_u64(buf, len, ret) ? 0 : -EINVAL;
}

int sys_stats_parse_amd_sclk(const char *buf, size_t len, uint64_t *ret)
{
	const char *pos = buf, *end = buf + len, *ls, *le;

	/* "0: 500Mhz \n1: 1800Mhz *\n" */
	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tl;

		while (le > ls && (le[-1] == ' ' || le[-1] == '\t'))
			le--;
		if (le == ls || le[-1] != '*')
			continue;
		while (next_token(&ls, le, &t, &tl))
			if (tl > 3 && memcmp(t + tl - 3, "Mhz", 3) == 0 &&
			    token_u64(t, tl - 3, ret))
				return 0;
	}
	return -ENOENT;
}
