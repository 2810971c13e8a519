/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the trace.dat converter, in two parts.
 *
 * Most inputs drive our side of the reader in process, with no libtracecmd
 * in the way: a tep handle filled as libtracecmd fills it (fixture event
 * formats, one event whose layout the input makes up, printk formats), a
 * page size (4 to 64 KiB), a commit field of 4 or 8 bytes, the input's
 * pages standing for the file, and a stream of records the input steers
 * (next page, same page, forward past pages read back from the file,
 * backwards, data outside its page, CPU and buffer changes, data sizes past
 * the file's end).  That is the page copy and offset logic, the hand read
 * of skipped pages, the timestamp fix-up, the format rebuild, the printk
 * map and the page parser, all instrumented.
 *
 * Inputs starting with 0xff instead patch a real trace.dat's page area and
 * converts the whole file through convert_file_isolated(), as the command
 * line does: libtracecmd 3.1.6 trusts the file's layout and crashes on
 * some damaged pages, and that must end as the clean error the command
 * line gives, never take the caller down.  (Coverage from that child is
 * not seen by the fuzzer; it checks the isolation, not the code.)
 *
 * Whatever was written must decode as a Trace.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include <trace-cmd/trace-cmd.h>
#include <traceevent/event-parse.h>

#include "probes/convert/convert_internal.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "tests/lib/ftrace_fixtures.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__lsan_default_suppressions(void);
const char *__asan_default_options(void);

/* libtracecmd sizes some allocations from the file unchecked (in the
 * child of the whole-file part); a NULL is what a real allocator gives. */
const char *__asan_default_options(void)
{
	/* A small quarantine and short allocation stacks: inputs allocate a lot. */
	return "allocator_may_return_null=1:quarantine_size_mb=16:malloc_context_size=8";
}

#define MAX_PAGE_BYTES (256u << 10)
#define FUZZ_EVENT_ID 900

/*
 * libtracecmd and libtraceevent leak on some malformed input; ours must
 * not.  Their sscanf("%ms") strings are caught by the glibc frame (the
 * stack is not unwound past glibc): nothing of ours allocates that way.
 */
const char *__lsan_default_suppressions(void)
{
	return "leak:libtracecmd.so\nleak:libtraceevent.so\nleak:__isoc99_vsscanf\n";
}

static const char fmt_bprint[] =
	"name: bprint\nID: 6\nformat:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
	"\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
	"\tfield:const char * fmt;\toffset:16;\tsize:8;\tsigned:0;\n"
	"\tfield:u32 buf[];\toffset:24;\tsize:0;\tsigned:0;\n\n"
	"print fmt: \"%ps: %s\", (void *)REC->ip, REC->fmt\n";

static const char fmt_bputs[] =
	"name: bputs\nID: 15\nformat:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
	"\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
	"\tfield:const char * str;\toffset:16;\tsize:8;\tsigned:0;\n\n"
	"print fmt: \"%ps: %s\", (void *)REC->ip, REC->str\n";

static char printk_text[] = "0xffffffff81000010 : \"hello %d\\n\"\n"
			    "0xffffffff81000020 : \"rcu_preempt\"\n"
			    "0x20 : \"low\"\n";

/* Field types the made-up event picks from, with their natural sizes. */
static const struct {
	const char *type;
	int size;       /* 0: the input's choice */
	bool array;     /* written "type name[N]" */
} field_types[] = {
	{ "u8", 1, false },          { "u16", 2, false },          { "u32", 4, false },
	{ "u64", 8, false },         { "int", 4, false },          { "long", 8, false },
	{ "pid_t", 4, false },       { "char", 0, true },          { "u32", 0, true },
	{ "__data_loc char[]", 4, false }, { "__rel_loc char[]", 4, false },
	{ "__data_loc u8[]", 4, false },   { "const char *", 8, false },
	{ "void *", 8, false },      { "unsigned long", 4, false }, { "dev_t", 4, false },
	{ "unsigned long", 0, true },
};

struct input {
	const uint8_t *p;
	size_t n;
};

static uint8_t take(struct input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

/* An event of FUZZ_EVENT_ID with up to 6 fields the input describes. */
static void add_made_up_event(struct tep_handle *tep, struct input *in)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	unsigned n = take(in) % 7, off = 8;

	if (!f)
		abort();
	fprintf(f, "name: made_up\nID: %d\nformat:\n"
		   "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
		   "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
		   "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
		   "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n",
		FUZZ_EVENT_ID);
	for (unsigned i = 0; i < n; i++) {
		uint8_t k = take(in), s = take(in);
		unsigned t = k % ARRAY_SIZE(field_types);
		int size = field_types[t].size ? field_types[t].size : 1 + s % 32;

		if (field_types[t].array)
			fprintf(f, "\tfield:%s f%u[%d];", field_types[t].type, i,
				strcmp(field_types[t].type, "char") == 0 ? size : MAX(size / 4, 1));
		else
			fprintf(f, "\tfield:%s f%u;", field_types[t].type, i);
		/* Mostly packed; now and then overlapping or far out. */
		if (k & 0x80)
			off = s;
		fprintf(f, "\toffset:%u;\tsize:%d;\tsigned:%d;\n", off, size, !!(k & 0x40));
		off += (unsigned)size;
	}
	fputs("\nprint fmt: \"\"\n", f);
	if (fclose(f) != 0)
		abort();
	(void)tep_parse_event(tep, text, len, "fuzz");
}

static struct tep_handle *make_tep(int long_size, struct input *in)
{
	static const struct {
		const char *sys, *fmt;
	} fx[] = {
		{ "sched", fx_fmt_sched_switch },   { "sched", fx_fmt_sched_waking },
		{ "sched", fx_fmt_sched_stat_runtime }, { "ipi", fx_fmt_ipi_send_cpu },
		{ "ftrace", fx_fmt_print },         { "task", fx_fmt_task_rename },
		{ "sched", fx_fmt_sched_process_exec }, { "raw_syscalls", fx_fmt_sys_enter },
		{ "timer", fx_fmt_hrtimer_expire_entry }, { "ftrace", fmt_bprint },
		{ "ftrace", fmt_bputs },
	};
	struct tep_handle *tep = tep_alloc();
	_cleanup_free_ char *pk = strdup(printk_text);

	if (!tep || !pk)
		abort();
	tep_set_long_size(tep, long_size);
	tep_set_file_bigendian(tep, TEP_LITTLE_ENDIAN);
	for (size_t i = 0; i < ARRAY_SIZE(fx); i++)
		if (tep_parse_event(tep, fx[i].fmt, strlen(fx[i].fmt), fx[i].sys) != 0)
			abort();
	add_made_up_event(tep, in);
	if (tep_parse_printk_formats(tep, pk) < 0)
		abort();
	tep_register_comm(tep, "fuzz", 100);
	return tep;
}

static void check_output(int out)
{
	off_t len = lseek(out, 0, SEEK_END);
	_cleanup_free_ uint8_t *buf = NULL;
	Perfetto__Protos__Trace *t;

	if (len <= 0)
		return;
	buf = malloc((size_t)len);
	if (!buf || pread(out, buf, (size_t)len, 0) != len)
		abort();
	t = perfetto__protos__trace__unpack(NULL, (size_t)len, buf);
	if (!t)
		abort();
	perfetto__protos__trace__free_unpacked(t, NULL);
}

/*
 * Records over the pages, steered by the control bytes: each names the next
 * record's page relative to the last one and where its data lies.
 */
static int feed(struct convert_ctx *c, struct input *ctl, const uint8_t *pages, size_t n_pages,
		size_t ps, uint64_t base, unsigned n_cpus)
{
	unsigned cpu = 0;
	size_t idx = 0;
	int r;

	r = convert_ctx_cpu_begin(c, cpu);
	if (r < 0)
		return r;
	while (ctl->n > 0) {
		uint8_t b = take(ctl), arg = take(ctl);
		struct convert_rec rec;
		uint64_t raw_ts;
		size_t in_page;

		switch (b & 7) {
		case 0: case 1: case 2:
			idx++;
			break;
		case 3:
			break;
		case 4:
			idx += 2 + arg % 5;
			break;
		case 5:
			idx = arg;
			break;
		case 6:
			/* Next CPU, the data size the file would have claimed. */
			r = convert_ctx_cpu_end(c, (b & 8) ? (int64_t)arg * (int64_t)ps * 64 :
							     (int64_t)(n_pages * ps));
			if (r < 0)
				return r;
			cpu = (cpu + 1) % n_cpus;
			r = convert_ctx_cpu_begin(c, cpu);
			if (r < 0)
				return r;
			idx = 0;
			continue;
		default:
			break;
		}
		idx %= n_pages;
		in_page = 16 + ((size_t)arg * 8) % (ps - 16);
		rec = (struct convert_rec){
			.offset = base + idx * ps + in_page - 4,
			.page = pages + idx * ps,
			.data = pages + idx * ps + in_page,
		};
		/* Data outside its page: a reader's bug, to be ignored. */
		if ((b & 7) == 7)
			rec.data = pages + ((idx + 1) % n_pages) * ps + in_page;
		memcpy(&raw_ts, rec.page, 8);
		rec.ts = raw_ts + ((b & 0x10) ? arg : 0);
		r = convert_ctx_record(c, &rec);
		if (r < 0)
			return r;
	}
	return convert_ctx_cpu_end(c, (int64_t)(n_pages * ps));
}

static void fuzz_context(const uint8_t *data, size_t size)
{
	static const int page_sizes[] = { 4096, 8192, 16384, 65536 };
	struct input in = { data, size };
	uint8_t flags = take(&in), ctl_len = take(&in);
	int ps = page_sizes[flags & 3], word = (flags & 4) ? 4 : 8;
	unsigned n_cpus = 1 + ((flags >> 3) & 3), n_buffers = 1 + ((flags >> 5) & 1);
	struct convert_opts o = CONVERT_OPTS_DEFAULT;
	struct convert_layout l = {
		.n_cpus = n_cpus, .page_size = ps, .commit_size = word, .long_size = word,
		.trace_clock = (flags & 0x40) ? "local" : "boot", .t0 = 1000,
	};
	_cleanup_close_ int raw = -EBADF, out = -EBADF;
	_cleanup_free_ uint8_t *pages = NULL;
	struct convert_ctx *c = NULL;
	struct tep_handle *tep;
	struct input ctl;
	size_t n_pages;
	uint64_t base;
	int r;

	tep = make_tep(word, &in);
	ctl = (struct input){ in.p, MIN((size_t)ctl_len * 2, in.n) };
	in.p += ctl.n;
	in.n -= ctl.n;
	n_pages = MIN(MAX((in.n + (size_t)ps - 1) / (size_t)ps, 1), MAX_PAGE_BYTES / (size_t)ps);
	pages = calloc(n_pages, (size_t)ps);
	if (!pages)
		abort();
	memcpy(pages, in.p, MIN(in.n, n_pages * (size_t)ps));
	/* The "file": the pages at a page-aligned offset, as a v6 file has them. */
	base = (uint64_t)ps * (1 + (flags >> 7));
	raw = memfd_create("in.dat", MFD_CLOEXEC);
	out = memfd_create("out", MFD_CLOEXEC);
	if (raw < 0 || out < 0 ||
	    pwrite(raw, pages, n_pages * (size_t)ps, (off_t)base) != (ssize_t)(n_pages * (size_t)ps))
		abort();
	l.raw_fd = (flags & 0x80) ? raw : -EBADF;
	o.compact_sched = ctl_len & 1;

	if (convert_ctx_new(&l, &o, &c) < 0)
		abort();
	r = convert_ctx_start(c, out);
	for (unsigned b = 0; r >= 0 && b < n_buffers; b++) {
		struct input ctl_b = ctl;

		r = convert_ctx_buffer_begin(c, tep);
		if (r < 0)
			break;
		r = feed(c, &ctl_b, pages, n_pages, (size_t)ps, base, n_cpus);
		if (r < 0)
			break;
		r = convert_ctx_buffer_end(c);
	}
	if (r >= 0)
		r = convert_ctx_finish(c);
	/* Only damaged pages may fail a conversion of well-formed records. */
	if (r < 0 && r != -EBADMSG)
		abort();
	convert_ctx_free(c, NULL);
	tep_free(tep);
	check_output(out);
}

/* ---- the whole file, isolated ------------------------------------------ */

static uint8_t *golden;
static size_t golden_len;
static uint64_t golden_pages; /* where the first CPU's pages start */

static void load_golden(void)
{
	struct tracecmd_input *h, *ih;
	struct tep_record *rec;
	_cleanup_close_ int fd = -EBADF;
	char *buf = NULL;

	fd = open(FUZZ_CONVERT_GOLDEN, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read_full_fd(fd, 64u << 20, &buf, &golden_len) < 0)
		abort();
	golden = (uint8_t *)buf;
	h = tracecmd_open(FUZZ_CONVERT_GOLDEN, TRACECMD_FL_LOAD_NO_PLUGINS);
	if (!h)
		abort();
	ih = tracecmd_buffer_instances(h) > 0 ? tracecmd_buffer_instance_handle(h, 0) : NULL;
	rec = tracecmd_read_data(ih ? ih : h, 0);
	if (!rec)
		abort();
	golden_pages = rec->offset & ~4095ull;
	tracecmd_free_record(rec);
	if (ih)
		tracecmd_close(ih);
	tracecmd_close(h);
}

/*
 * The conversion's child is a copy of this process, libFuzzer's and the
 * sanitizers' crash handlers included: left alone, a crash inside
 * libtracecmd there would be reported as this fuzzer's.  The child gets the
 * plain dispositions a command-line process has, and a sanitizer report
 * ends it by a signal too, which its parent turns into an error.
 */
static void child_death(void)
{
	signal(SIGSEGV, SIG_DFL);
	raise(SIGSEGV);
}

static void child_plain(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE };
	struct sigaction sa = { .sa_handler = SIG_DFL };

	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		(void)sigaction(sigs[i], &sa, NULL);
	__sanitizer_set_death_callback(child_death);
}

static void fuzz_file(const uint8_t *data, size_t size)
{
	struct convert_summary *sum = NULL;
	struct convert_opts o = CONVERT_OPTS_DEFAULT;
	_cleanup_close_ int in = -EBADF, out = -EBADF;
	_cleanup_free_ uint8_t *copy = NULL;
	char path[64];
	size_t at;
	int r;

	if (!golden) {
		load_golden();
		if (pthread_atfork(NULL, NULL, child_plain) != 0)
			abort();
	}
	if (size < 3 || golden_pages >= golden_len)
		return;
	/* Two bytes place the patch in the page area, the rest is the patch. */
	at = golden_pages + ((size_t)data[1] << 8 | data[2]) % (golden_len - golden_pages);
	data += 3;
	size -= 3;
	copy = malloc(golden_len);
	if (!copy)
		abort();
	memcpy(copy, golden, golden_len);
	memcpy(copy + at, data, MIN(size, golden_len - at));
	in = memfd_create("in.dat", MFD_CLOEXEC);
	out = memfd_create("out", MFD_CLOEXEC);
	if (in < 0 || out < 0 || write_all(in, copy, golden_len) < 0)
		abort();
	(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", in);
	o.compact_sched = size & 1;
	/* A reader that loops on a damaged page is cut short, well within libFuzzer's -timeout. */
	o.stall_ms = 2000;
	r = convert_file_isolated(path, out, &o, &sum);
	if (r != 0 && r != -EBADMSG && r != -ENODATA && r != -EPROTONOSUPPORT)
		abort();
	/* A crash in the child is reported with a reason. */
	if (r == -EBADMSG && (!sum || (!sum->reason[0] && sum->parse_errors == 0)))
		abort();
	free(sum);
	check_output(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;

	if (!quiet) {
		tracecmd_set_loglevel(TEP_LOG_NONE);
		tep_set_loglevel(TEP_LOG_NONE);
		quiet = true;
	}
	if (size >= 1 && data[0] == 0xff)
		fuzz_file(data, size);
	else
		fuzz_context(data, size);
	return 0;
}
