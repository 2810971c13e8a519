/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The converter's page path without a file: records over hand-built pages
 * fed to convert_ctx_*, the way convert_file() feeds libtracecmd's.  Covers
 * what no trace.dat on this machine has: pages of 8 and 64 KiB, and the
 * 4-byte commit field of 32-bit kernels (with their 4-byte missed-events
 * count), and the layouts the converter refuses.
 */
#include <traceevent/event-parse.h>

#include "probes/convert/convert_internal.h"
#include "tests/lib/convert_check.h"
#include "tests/lib/ftrace_fixtures.h"

#define N_PAGES 3
#define N_CPUS 2
#define LOST_COUNT 77u

struct layout_case {
	int page_size, word;
};

static const struct layout_case cases[] = {
	{ 4096, 8 }, { 8192, 8 }, { 65536, 8 }, { 4096, 4 }, { 8192, 4 }, { 65536, 4 },
};

static struct tep_handle *make_tep(int word)
{
	struct tep_handle *tep = tep_alloc();

	ck_assert_ptr_nonnull(tep);
	tep_set_long_size(tep, word);
	ck_assert_int_eq(tep_parse_event(tep, fx_fmt_sched_switch, strlen(fx_fmt_sched_switch),
					 "sched"), 0);
	ck_assert_int_eq(tep_parse_event(tep, fx_fmt_sched_waking, strlen(fx_fmt_sched_waking),
					 "sched"), 0);
	/* Names for the ProcessTree, as a file's saved cmdlines give them. */
	tep_register_comm(tep, "next", 1);
	return tep;
}

/*
 * Fills the page with sched_switch records (4-byte headers) up to a few
 * records short of its end, so that pages larger than 4 KiB hold events
 * past 4 KiB, then feeds each one as a record (the context copies a page at
 * its first record, as libtracecmd's pages are complete when read) and adds
 * it to @want.
 */
static void fill_page(struct convert_ctx *c, uint8_t *page, const struct layout_case *lc,
		      unsigned cpu, unsigned idx, uint64_t file_off, bool lost, struct cc_list *want)
{
	size_t hdr = 8 + (size_t)lc->word, pos = hdr;
	uint64_t ts0 = 1000000000ull * (idx + 1) + cpu * 1000, ts = ts0;
	uint32_t commit;

	memset(page, 0, (size_t)lc->page_size);
	memcpy(page, &ts0, 8);
	for (int32_t k = 0; pos + 4 + 64 + 2 * lc->word <= (size_t)lc->page_size; k++) {
		uint32_t h = fx_rec_hdr(64 / 4, 10);

		memcpy(page + pos, &h, 4);
		(void)fx_sched_switch(page + pos + 4, 1000, "worker", 1000, 120, 1, "next",
				      (int32_t)(cpu * 100000 + idx * 10000) + 1 + k % 5000, 120);
		pos += 4 + 64;
	}
	commit = (uint32_t)(pos - hdr);
	if (lost) {
		uint64_t count = LOST_COUNT;

		commit |= 1u << 31 | 1u << 30;
		memcpy(page + pos, &count, (size_t)lc->word);
	}
	/* The whole word: 4 bytes on 32-bit kernels, 8 with zero high bits. */
	memset(page + 8, 0, (size_t)lc->word);
	memcpy(page + 8, &commit, 4);

	for (size_t at = hdr; at < pos; at += 4 + 64) {
		struct cc_ev e = { .cpu = cpu, .kind = 'S', .b = 1 };
		int32_t next;
		const struct convert_rec rec = {
			.offset = file_off + at,
			.page = page,
			.data = page + at + 4,
			.ts = ts + 10,
		};

		ts += 10;
		memcpy(&next, page + at + 4 + 56, 4);
		e.ts = ts;
		e.a = next;
		strcpy(e.comm, "next");
		cc_push(want, &e);
		ck_assert_int_eq(convert_ctx_record(c, &rec), 0);
	}
}

START_TEST(test_layouts)
{
	const struct layout_case *lc = &cases[_i];
	const size_t ps = (size_t)lc->page_size;
	struct convert_layout l = {
		.n_cpus = N_CPUS, .page_size = lc->page_size, .commit_size = lc->word,
		.long_size = lc->word, .raw_fd = -EBADF, .trace_clock = "local", .t0 = 1000000000ull,
	};
	struct convert_opts o = CONVERT_OPTS_DEFAULT;
	struct convert_summary *sum = NULL;
	struct convert_ctx *c = NULL;
	struct cc_list want = {}, got = {};
	struct tep_handle *tep = make_tep(lc->word);
	uint8_t *pages = calloc(N_CPUS * N_PAGES, ps);
	int fd = memfd_create("out", MFD_CLOEXEC);
	struct cc_pf pf = {};
	struct stat st;

	ck_assert_ptr_nonnull(pages);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(convert_ctx_new(&l, &o, &c), 0);
	ck_assert_int_eq(convert_ctx_start(c, fd), 0);
	ck_assert_int_eq(convert_ctx_buffer_begin(c, tep), 0);
	for (unsigned cpu = 0; cpu < N_CPUS; cpu++) {
		ck_assert_int_eq(convert_ctx_cpu_begin(c, cpu), 0);
		for (unsigned i = 0; i < N_PAGES; i++) {
			unsigned n = cpu * N_PAGES + i;

			/* The second page of CPU 0 follows a loss of LOST_COUNT events. */
			fill_page(c, pages + n * ps, lc, cpu, i, (uint64_t)(n + 1) * ps,
				  cpu == 0 && i == 1, &want);
		}
		ck_assert_int_eq(convert_ctx_cpu_end(c, 0), 0);
	}
	ck_assert_int_eq(convert_ctx_buffer_end(c), 0);
	ck_assert_int_eq(convert_ctx_finish(c), 0);
	convert_ctx_free(c, &sum);

	ck_assert_int_eq(fstat(fd, &st), 0);
	pf.len = (size_t)st.st_size;
	pf.buf = malloc(pf.len);
	ck_assert_ptr_nonnull(pf.buf);
	ck_assert_int_eq(pread(fd, pf.buf, pf.len, 0), (ssize_t)pf.len);
	cc_from_pftrace(pf.buf, pf.len, &got, &pf);
	qsort(want.v, want.n, sizeof(*want.v), cc_cmp);
	/* Pages past 4 KiB hold more than 4 KiB of records: all of them came out. */
	ck_assert_uint_gt(want.n, N_CPUS * N_PAGES * ((ps - 16) / 68 - 2));
	cc_expect_same(&want, &got);

	ck_assert_uint_eq(sum->page_size, ps);
	ck_assert_uint_eq(sum->events, want.n);
	ck_assert_uint_eq(sum->parse_errors, 0);
	ck_assert_uint_eq(pf.errors, 0);
	ck_assert_uint_eq(sum->cpu[0].pages, N_PAGES);
	ck_assert_uint_eq(sum->cpu[0].lost_pages, 1);
	ck_assert_uint_eq(sum->cpu[0].lost_events, LOST_COUNT);
	ck_assert(!sum->cpu[0].lost_unknown);
	ck_assert_uint_eq(sum->cpu[1].lost_pages, 0);
	ck_assert_uint_eq(pf.lost_bundles, 1);
	ck_assert_uint_eq(pf.threads, 1);

	free(want.v);
	free(got.v);
	free(sum);
	cc_pf_done(&pf);
	free(pages);
	tep_free(tep);
	close(fd);
}
END_TEST

/* A damaged commit on a 64 KiB, 4-byte-commit page: an FtraceError, -EBADMSG. */
START_TEST(test_commit_past_end_64k_32bit)
{
	struct convert_layout l = {
		.n_cpus = 1, .page_size = 65536, .commit_size = 4, .long_size = 4, .raw_fd = -EBADF,
	};
	struct convert_summary *sum = NULL;
	struct convert_ctx *c = NULL;
	struct tep_handle *tep = make_tep(4);
	uint8_t *page = calloc(1, 65536);
	int fd = memfd_create("out", MFD_CLOEXEC);
	uint32_t commit = 65536; /* past the page's 65524 data bytes */
	const struct convert_rec rec = { .offset = 65536 + 12, .page = page, .data = page + 16 };

	ck_assert_ptr_nonnull(page);
	memcpy(page + 8, &commit, 4);
	ck_assert_int_eq(convert_ctx_new(&l, NULL, &c), 0);
	ck_assert_int_eq(convert_ctx_start(c, fd), 0);
	ck_assert_int_eq(convert_ctx_buffer_begin(c, tep), 0);
	ck_assert_int_eq(convert_ctx_cpu_begin(c, 0), 0);
	ck_assert_int_eq(convert_ctx_record(c, &rec), 0);
	ck_assert_int_eq(convert_ctx_cpu_end(c, 0), 0);
	ck_assert_int_eq(convert_ctx_buffer_end(c), 0);
	ck_assert_int_eq(convert_ctx_finish(c), -EBADMSG);
	convert_ctx_free(c, &sum);
	ck_assert_uint_eq(sum->parse_errors, 1);
	ck_assert(sum->parse_errors_mask & (1u << FTRACE_STATUS_ABI_INVALID_PAGE_HEADER));
	free(sum);
	free(page);
	tep_free(tep);
	close(fd);
}
END_TEST

/* Layouts the converter refuses, each with its reason. */
START_TEST(test_refused)
{
	static const struct {
		struct convert_layout l;
		const char *reason;
	} refused[] = {
		{ { .n_cpus = 1, .page_size = 3000, .commit_size = 8, .long_size = 8 },
		  "unsupported kernel page size 3000" },
		{ { .n_cpus = 1, .page_size = 32, .commit_size = 8, .long_size = 8 },
		  "unsupported kernel page size 32" },
		{ { .n_cpus = 1, .page_size = 2 << 20, .commit_size = 8, .long_size = 8 },
		  "unsupported kernel page size 2097152" },
		{ { .n_cpus = 1, .page_size = 4096, .commit_size = 2, .long_size = 8 },
		  "unsupported page header (commit field of 2 bytes)" },
		{ { .n_cpus = 1, .page_size = 4096, .commit_size = 8, .long_size = 2 },
		  "unsupported kernel word size of 2 bytes" },
		{ { .n_cpus = 1, .page_size = 4096, .commit_size = 8, .long_size = 8,
		    .big_endian = true },
		  "the file was recorded on a big-endian machine" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		struct convert_summary *sum = NULL;
		struct convert_ctx *c = NULL;
		int fd = memfd_create("out", MFD_CLOEXEC);
		struct stat st;

		ck_assert_int_eq(convert_ctx_new(&refused[i].l, NULL, &c), 0);
		ck_assert_int_eq(convert_ctx_start(c, fd), -EPROTONOSUPPORT);
		/* Nothing can be fed to a refused context. */
		ck_assert_int_eq(convert_ctx_buffer_begin(c, NULL), -EINVAL);
		convert_ctx_free(c, &sum);
		ck_assert_str_eq(sum->reason, refused[i].reason);
		ck_assert_int_eq(fstat(fd, &st), 0);
		ck_assert_int_eq(st.st_size, 0);
		free(sum);
		close(fd);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("convert_ctx");
	TCase *tc = tcase_create("pages");

	tcase_add_loop_test(tc, test_layouts, 0, (int)ARRAY_SIZE(cases));
	tcase_add_test(tc, test_commit_past_end_64k_32bit);
	tcase_add_test(tc, test_refused);
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
