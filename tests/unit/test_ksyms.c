/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kallsyms symbol map: fixture texts (tests/data/kallsyms: the
 * filtering rules, kptr_restrict, nothing to keep), lookups at and around
 * symbol boundaries, a random model comparison, and this machine's
 * /proc/kallsyms when its addresses are visible.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ksyms/ksyms.h"
#include "util/util.h"

static char *fixture_path(const char *name)
{
	const char *root = getenv("TP_SOURCE_ROOT");
	char *p = NULL;

	ck_assert_int_ge(asprintf(&p, "%s/tests/data/kallsyms/%s", root ? root : ".", name), 0);
	return p;
}

static struct ksyms *load_fixture(const char *name)
{
	_cleanup_free_ char *p = fixture_path(name);
	struct ksyms *k = NULL;

	ck_assert_int_eq(ksyms_load(p, &k), 0);
	return k;
}

static void expect_name(const struct ksyms *k, uint64_t addr, const char *want)
{
	char buf[KSYMS_NAME_MAX + 1];
	int r = ksyms_lookup(k, addr, buf, sizeof(buf));

	ck_assert_msg(r >= 0, "0x%llx: %d", (unsigned long long)addr, r);
	ck_assert_str_eq(buf, want);
	ck_assert_int_eq(r, (int)strlen(want));
}

static void expect_none(const struct ksyms *k, uint64_t addr)
{
	char buf[64];

	ck_assert_int_eq(ksyms_lookup(k, addr, buf, sizeof(buf)), -ENOENT);
}

START_TEST(test_fixture_text)
{
	struct ksyms *k = load_fixture("text.kallsyms");

	/* t/T only, '$' and data symbols out, one per address */
	ck_assert_uint_eq(ksyms_count(k), 10);
	ck_assert_uint_gt(ksyms_mem_bytes(k), 0);
	expect_name(k, 0xffffffff81000000ull, "_stext");        /* first of the alias pair */
	expect_name(k, 0xffffffff8100003full, "_stext");
	expect_name(k, 0xffffffff81000040ull, "secondary_startup_64_no_verify");
	expect_name(k, 0xffffffff81000900ull, "schedule");      /* listed out of order */
	expect_name(k, 0xffffffff81001000ull, "__x64_sys_read");
	expect_name(k, 0xffffffff81001080ull, "vfs_read");      /* .cfi_jt dropped */
	expect_name(k, 0xffffffff81001100ull, "do_sys_open");   /* .cfi dropped */
	expect_name(k, 0xffffffff81001250ull, "__foo__bar_");   /* empty tokens survive */
	/* '$x', D and r entries do not end the symbol before them */
	expect_name(k, 0xffffffff81001450ull, "__foo__bar_");
	expect_name(k, 0xffffffff81003000ull, "handle_mm_fault");
	expect_name(k, 0xffffffff81003000ull + KSYMS_MAX_SYM_SIZE, "handle_mm_fault");
	expect_none(k, 0xffffffff81003000ull + KSYMS_MAX_SYM_SIZE + 1);
	expect_name(k, 0xffffffffc0000000ull, "e1000_xmit");    /* module symbols */
	expect_name(k, 0xffffffffc0000150ull, "e1000_probe");
	expect_none(k, 0xffffffff80ffffffull);
	expect_none(k, 0);
	ksyms_free(k);
}
END_TEST

START_TEST(test_fixture_restricted)
{
	_cleanup_free_ char *p = fixture_path("restricted.kallsyms");
	_cleanup_free_ char *q = fixture_path("nodata.kallsyms");
	struct ksyms *k = NULL;

	/* kptr_restrict: every address 0 */
	ck_assert_int_eq(ksyms_load(p, &k), -EPERM);
	ck_assert_ptr_null(k);
	/* addresses, but no text symbol */
	ck_assert_int_eq(ksyms_load(q, &k), -ENODATA);
	ck_assert_int_eq(ksyms_parse("", 0, &k), -ENODATA);
	ck_assert_int_eq(ksyms_parse("garbage\n\n\n", 10, &k), -ENODATA);
	ck_assert_int_eq(ksyms_load("/nonexistent/kallsyms", &k), -ENOENT);
	ck_assert_ptr_null(k);
}
END_TEST

START_TEST(test_lookup_buffer)
{
	static const char text[] = "ffffffff81000000 t a_long_symbol_name\n";
	struct ksyms *k = NULL;
	char buf[32];

	ck_assert_int_eq(ksyms_parse(text, sizeof(text) - 1, &k), 0);
	ck_assert_int_eq(ksyms_lookup(k, 0xffffffff81000001ull, buf, 18), -ENOBUFS);
	ck_assert_int_eq(ksyms_lookup(k, 0xffffffff81000001ull, buf, 19), 18);
	ck_assert_str_eq(buf, "a_long_symbol_name");
	ck_assert_int_eq(ksyms_lookup(NULL, 0xffffffff81000001ull, buf, sizeof(buf)), -ENOENT);
	ksyms_free(k);

	/* no trailing newline, a name at the size limit and one past it */
	{
		char *big = malloc(2 * (KSYMS_NAME_MAX + 40));
		char name[KSYMS_NAME_MAX + 2];
		int n;

		memset(name, 'x', sizeof(name) - 1);
		name[KSYMS_NAME_MAX] = 0;
		n = sprintf(big, "ffffffff81000000 t %s\nffffffff82000000 t %sy", name, name);
		ck_assert_int_eq(ksyms_parse(big, (size_t)n, &k), 0);
		ck_assert_uint_eq(ksyms_count(k), 1);
		ck_assert_int_eq(ksyms_lookup(k, 0xffffffff81000000ull, big, KSYMS_NAME_MAX + 1), KSYMS_NAME_MAX);
		ksyms_free(k);
		free(big);
	}
}
END_TEST

/* Random symbols against a sorted list searched by brute force. */
struct msym {
	uint64_t addr;
	char name[24];
};

static int msym_cmp(const void *a, const void *b)
{
	const struct msym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

START_TEST(test_model)
{
	unsigned seed = 1234u + (unsigned)_i;
	size_t n = 1 + (size_t)rand_r(&seed) % 3000;
	struct msym *m = calloc(n, sizeof(*m));
	char *text = malloc(n * 64 + 1), *p = text;
	size_t w = 0;
	struct ksyms *k = NULL;
	char buf[64];

	for (size_t i = 0; i < n; i++) {
		static const char *const parts[] = { "do", "sys", "", "read", "x", "__", "irq", "tlb" };
		uint64_t addr = 0xffffffff81000000ull + ((uint64_t)rand_r(&seed) % (n * 40)) * 16;
		int np = 1 + rand_r(&seed) % 3;

		m[i].addr = addr;
		for (int t = 0; t < np; t++) {
			if (t)
				strcat(m[i].name, "_");
			strcat(m[i].name, parts[rand_r(&seed) % ARRAY_SIZE(parts)]);
		}
		if (!m[i].name[0])
			strcpy(m[i].name, "s");
		p += sprintf(p, "%016llx %c %s\n", (unsigned long long)addr, rand_r(&seed) % 2 ? 't' : 'T',
			     m[i].name);
	}
	/* the model keeps the first symbol (in file order) of each address */
	for (size_t i = 0; i < n; i++) {
		bool dup = false;

		for (size_t j = 0; j < w && !dup; j++)
			dup = m[j].addr == m[i].addr;
		if (!dup)
			m[w++] = m[i];
	}
	qsort(m, w, sizeof(*m), msym_cmp);
	ck_assert_int_eq(ksyms_parse(text, (size_t)(p - text), &k), 0);
	ck_assert_uint_eq(ksyms_count(k), w);
	for (int q = 0; q < 4000; q++) {
		uint64_t a = 0xffffffff80fff000ull + (uint64_t)rand_r(&seed) % (n * 640 + 8192);
		long best = -1;
		int r;

		for (size_t j = 0; j < w && m[j].addr <= a; j++)
			best = (long)j;
		r = ksyms_lookup(k, a, buf, sizeof(buf));
		if (best < 0 || a - m[best].addr > KSYMS_MAX_SYM_SIZE) {
			ck_assert_int_eq(r, -ENOENT);
		} else {
			ck_assert_int_ge(r, 0);
			ck_assert_str_eq(buf, m[best].name);
		}
	}
	ksyms_free(k);
	free(text);
	free(m);
}
END_TEST

/* This machine's kallsyms: within budget, every text symbol resolves, and
 * all but the aliases (a second name at the same address) to their own
 * name. */
START_TEST(test_live_kallsyms)
{
	_cleanup_free_ char *text = NULL;
	struct ksyms *k = NULL;
	size_t len, candidates = 0, same = 0, nline = 0;
	char buf[KSYMS_NAME_MAX + 1];
	int r;

	if (read_full_file_at(AT_FDCWD, "/proc/kallsyms", KSYMS_TEXT_MAX, &text, &len) < 0)
		return;
	r = ksyms_parse(text, len, &k);
	if (r == -EPERM)
		return;         /* not root: the kernel shows zeros, which is what -EPERM is for */
	ck_assert_int_eq(r, 0);
	ck_assert_uint_gt(ksyms_count(k), 1000);
	ck_assert_msg(ksyms_mem_bytes(k) <= 2u << 20, "%zu bytes", ksyms_mem_bytes(k));

	/* every 37th line */
	for (char *line = text, *next; line && *line; line = next) {
		unsigned long long addr;
		char type, name[KSYMS_NAME_MAX + 1];

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (nline++ % 37 || sscanf(line, "%llx %c %511s", &addr, &type, name) != 3)
			continue;
		if ((type != 't' && type != 'T') || name[0] == '$' || strstr(name, ".cfi") || addr == 0)
			continue;
		candidates++;
		ck_assert_msg(ksyms_lookup(k, addr, buf, sizeof(buf)) > 0, "%s", line);
		same += strcmp(buf, name) == 0;
	}
	ck_assert_uint_gt(candidates, 1000);
	ck_assert_msg(same * 100 >= candidates * 95, "%zu of %zu", same, candidates);
	ksyms_free(k);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ksyms");
	TCase *tc = tcase_create("pure");

	tcase_add_test(tc, test_fixture_text);
	tcase_add_test(tc, test_fixture_restricted);
	tcase_add_test(tc, test_lookup_buffer);
	tcase_add_loop_test(tc, test_model, 0, 16);
	tcase_add_test(tc, test_live_kallsyms);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
