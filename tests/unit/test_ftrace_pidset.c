/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_pidset against a plain reference model: random adds (small pids,
 * negative and huge ones that bypass the bitmap), renames, addresses and
 * clears, with a capacity small enough to overflow often.  Every answer and
 * the lists in insertion order must match the model's.
 */
#include <check.h>
#include <stdlib.h>

#include "probes/ftrace/parse/ftrace_parse.h"
#include "util/util.h"

#define CAP 40u

struct model {
	int64_t pids[CAP], renamed[CAP];
	uint64_t addrs[CAP];
	size_t n_pids, n_renamed, n_addrs;
	bool overflowed;
};

static long find(const int64_t *v, size_t n, int64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return (long)i;
	return -1;
}

static bool model_add(struct model *m, int64_t *v, size_t *n, int64_t x)
{
	if (find(v, *n, x) >= 0)
		return false;
	if (*n >= CAP) {
		m->overflowed = true;
		return false;
	}
	v[(*n)++] = x;
	return true;
}

static uint32_t model_addr(struct model *m, uint64_t a)
{
	for (size_t i = 0; i < m->n_addrs; i++)
		if (m->addrs[i] == a)
			return (uint32_t)i + 1;
	if (m->n_addrs >= CAP) {
		m->overflowed = true;
		return 0;
	}
	m->addrs[m->n_addrs++] = a;
	return (uint32_t)m->n_addrs;
}

static int32_t random_pid(unsigned *seed)
{
	switch (rand_r(seed) % 8) {
	case 0:
		return -(int32_t)(rand_r(seed) % 4) - 1;           /* negative */
	case 1:
		return (int32_t)((1u << 22) + rand_r(seed) % 4);   /* past the bitmap */
	case 2:
		return (int32_t)((1u << 22) - 1 - rand_r(seed) % 2); /* its last bits */
	default:
		return (int32_t)(rand_r(seed) % 64);                /* mostly repeats */
	}
}

static void check_same(const struct ftrace_pidset *s, const struct model *m)
{
	const int32_t *v;
	const uint64_t *a;
	size_t n;

	n = ftrace_pidset_pids(s, &v);
	ck_assert_uint_eq(n, m->n_pids);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(v[i], m->pids[i]);
	n = ftrace_pidset_renamed(s, &v);
	ck_assert_uint_eq(n, m->n_renamed);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(v[i], m->renamed[i]);
	n = ftrace_pidset_addrs(s, &a);
	ck_assert_uint_eq(n, m->n_addrs);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(a[i], m->addrs[i]);
	ck_assert(ftrace_pidset_overflowed(s) == m->overflowed);
}

START_TEST(test_pidset_model)
{
	struct ftrace_pidset *s = NULL;
	struct model m = {};
	unsigned seed = 12345u + (unsigned)_i;

	ck_assert_int_eq(ftrace_pidset_new(CAP, &s), 0);
	for (int step = 0; step < 20000; step++) {
		unsigned op = (unsigned)rand_r(&seed) % 100;

		if (op < 70) {
			int32_t pid = random_pid(&seed);

			ck_assert(ftrace_pidset_add(s, pid) == model_add(&m, m.pids, &m.n_pids, pid));
		} else if (op < 80) {
			int32_t pid = random_pid(&seed);

			ck_assert(ftrace_pidset_add_renamed(s, pid) ==
				  model_add(&m, m.renamed, &m.n_renamed, pid));
		} else if (op < 90) {
			uint64_t a = 0xffffffff81000000ull + (uint64_t)(rand_r(&seed) % 64) * 16;

			ck_assert_uint_eq(ftrace_pidset_intern_addr(s, a), model_addr(&m, a));
		} else if (op < 98) {
			int32_t pid = random_pid(&seed);

			ck_assert(ftrace_pidset_contains(s, pid) == (find(m.pids, m.n_pids, pid) >= 0));
		} else {
			check_same(s, &m);
			ftrace_pidset_clear(s);
			m = (struct model){};
		}
	}
	check_same(s, &m);
	ftrace_pidset_free(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ftrace_pidset");
	TCase *tc = tcase_create("model");

	tcase_add_loop_test(tc, test_pidset_model, 0, 8);
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
