/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Trace configs: every example in config/ parses, the text-format reader
 * rejects what it must with a line number, and the recorder's flags produce
 * the same config shape as config/sched-process-names.pbtxt.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "protos/pbcheck.h"
#include "protos/pbtxt.h"
#include "probes/recorder.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "util/util_varint.h"
#include "protos/perfetto/common/descriptor.pb-c.h"
#include "protos/perfetto/config/trace_config.pb-c.h"
#include "util/util.h"

static char source_root[4096];

static Perfetto__Protos__TraceConfig *parse_text(const char *text, char *err, size_t err_len)
{
	ProtobufCMessage *m = NULL;
	int r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), &m, err,
			    err_len);
	return r < 0 ? NULL : (Perfetto__Protos__TraceConfig *)m;
}

START_TEST(test_examples_parse)
{
	char dir[4200];
	DIR *d;
	struct dirent *de;
	unsigned n = 0;

	snprintf(dir, sizeof(dir), "%s/config", source_root);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		char path[4500], err[256];
		Perfetto__Protos__TraceConfig *cfg = NULL;
		size_t len = strlen(de->d_name);
		int r;

		if (len < 6 || strcmp(de->d_name + len - 6, ".pbtxt") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		r = recorder_config_load(path, &cfg, err, sizeof(err));
		ck_assert_msg(r == 0, "%s: %s", de->d_name, err);
		/* every example records ftrace into a buffer it declares */
		ck_assert_uint_ge(cfg->n_buffers, 1);
		ck_assert_uint_ge(cfg->n_data_sources, 1);
		ck_assert_str_eq(cfg->data_sources[0]->config->name, "linux.ftrace");
		ck_assert_ptr_nonnull(cfg->data_sources[0]->config->ftrace_config);
		ck_assert_uint_ge(cfg->data_sources[0]->config->ftrace_config->n_ftrace_events, 2);
		for (size_t i = 0; i < cfg->n_data_sources; i++)
			ck_assert_uint_lt(cfg->data_sources[i]->config->target_buffer, cfg->n_buffers);
		ck_assert(cfg->has_duration_ms && cfg->duration_ms > 0);
		protobuf_c_message_free_unpacked(&cfg->base, NULL);
		n++;
	}
	closedir(d);
	ck_assert_uint_ge(n, 3);
}
END_TEST

START_TEST(test_pbtxt_values)
{
	char err[256];
	Perfetto__Protos__TraceConfig *cfg = parse_text(
		"# comment\n"
		"buffers: { size_kb: 1024, fill_policy: RING_BUFFER }\n"
		"buffers < size_kb: 0x10 fill_policy: 2 >\n"
		"data_sources { config { name: 'linux.ftrace' target_buffer: 1\n"
		"  ftrace_config { ftrace_events: [\"sched/sched_switch\", \"a\" \"b\\x63\"]\n"
		"    compact_sched { enabled: false } } } }\n"
		"duration_ms: 4294967295;\n",
		err, sizeof(err));

	ck_assert_msg(cfg != NULL, "%s", err);
	ck_assert_uint_eq(cfg->n_buffers, 2);
	ck_assert_uint_eq(cfg->buffers[0]->size_kb, 1024);
	ck_assert_int_eq(cfg->buffers[0]->fill_policy,
			 PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER);
	ck_assert_uint_eq(cfg->buffers[1]->size_kb, 16);
	ck_assert_int_eq(cfg->buffers[1]->fill_policy,
			 PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD);
	ck_assert_str_eq(cfg->data_sources[0]->config->name, "linux.ftrace");
	ck_assert_uint_eq(cfg->data_sources[0]->config->ftrace_config->n_ftrace_events, 2);
	ck_assert_str_eq(cfg->data_sources[0]->config->ftrace_config->ftrace_events[1], "abc");
	ck_assert(cfg->data_sources[0]->config->ftrace_config->compact_sched->has_enabled);
	ck_assert(!cfg->data_sources[0]->config->ftrace_config->compact_sched->enabled);
	ck_assert_uint_eq(cfg->duration_ms, 4294967295u);
	protobuf_c_message_free_unpacked(&cfg->base, NULL);
}
END_TEST

START_TEST(test_pbtxt_errors)
{
	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
		{ "no_such_field: 1", "line 1: perfetto.protos.TraceConfig has no field 'no_such_field'" },
		{ "duration_ms: -1", "line 1:" },
		{ "duration_ms: 4294967296", "out of range" },
		{ "\n\nbuffers { fill_policy: SOMETIMES }", "line 3:" },
		{ "buffers { size_kb: 1", "missing '}'" },
		{ "data_sources { config { name: \"x } }", "unterminated string" },
		{ "duration_ms 5", "expected ':'" },
		{ "buffers: 5", "expected '{'" },
		{ "duration_ms: [1, 2]", "not repeated" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[256] = "";
		Perfetto__Protos__TraceConfig *cfg = parse_text(cases[i].text, err, sizeof(err));

		ck_assert_msg(cfg == NULL, "'%s' was accepted", cases[i].text);
		ck_assert_msg(strstr(err, cases[i].want) != NULL, "'%s': got '%s', want '%s'",
			      cases[i].text, err, cases[i].want);
	}
}
END_TEST

START_TEST(test_pbtxt_depth_bounded)
{
	char *text = malloc(400000);
	char err[256] = "";
	ProtobufCMessage *m = NULL;
	size_t n = 0;
	int r;

	ck_assert_ptr_nonnull(text);
	/* a recursive type nested far deeper than any config: refused, no stack overflow */
	for (int i = 0; i < 20000; i++) {
		memcpy(text + n, "nested_type { ", 14);
		n += 14;
	}
	text[n] = '\0';
	r = pbtxt_parse(&perfetto__protos__descriptor_proto__descriptor, text, n, &m, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(strstr(err, "deeply") != NULL, "%s", err);
	/* and a reasonable depth works */
	ck_assert_int_eq(pbtxt_parse(&perfetto__protos__descriptor_proto__descriptor,
				     "name: 'a' nested_type { nested_type { name: 'c' } }", 51, &m, err,
				     sizeof(err)), 0);
	protobuf_c_message_free_unpacked(m, NULL);
	free(text);
}
END_TEST

START_TEST(test_flags_match_example)
{
	struct recorder_options o;
	char err[256], path[4200];
	Perfetto__Protos__TraceConfig *from_flags = NULL, *from_file = NULL;
	Perfetto__Protos__FtraceConfig *a, *b;

	recorder_options_init(&o);
	o.compact_sched = 1;
	o.buffer_size_kb = 8192;
	o.drain_period_ms = 250;
	o.service_buffer_kb = 65536;
	ck_assert_int_eq(recorder_config_from_options(&o, &from_flags, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/config/sched-process-names.pbtxt", source_root);
	ck_assert_int_eq(recorder_config_load(path, &from_file, err, sizeof(err)), 0);

	ck_assert_uint_eq(from_flags->n_buffers, from_file->n_buffers);
	ck_assert_uint_eq(from_flags->n_data_sources, from_file->n_data_sources);
	a = from_flags->data_sources[0]->config->ftrace_config;
	b = from_file->data_sources[0]->config->ftrace_config;
	ck_assert_uint_eq(a->n_ftrace_events, b->n_ftrace_events);
	for (size_t i = 0; i < a->n_ftrace_events; i++) {
		bool found = false;
		for (size_t j = 0; j < b->n_ftrace_events; j++)
			found |= strcmp(a->ftrace_events[i], b->ftrace_events[j]) == 0;
		ck_assert_msg(found, "%s missing from the example", a->ftrace_events[i]);
	}
	ck_assert_uint_eq(a->buffer_size_kb, b->buffer_size_kb);
	ck_assert_uint_eq(a->drain_period_ms, b->drain_period_ms);
	ck_assert_uint_eq(a->drain_buffer_percent, b->drain_buffer_percent);
	ck_assert_uint_eq(a->drain_buffer_percent, 50);
	ck_assert_int_eq(a->compact_sched->enabled, b->compact_sched->enabled);
	ck_assert_str_eq(from_flags->data_sources[1]->config->name, "linux.process_stats");
	ck_assert(from_flags->data_sources[1]->config->process_stats_config->scan_all_processes_on_start);
	ck_assert(from_flags->data_sources[1]->config->process_stats_config->record_thread_names);
	protobuf_c_message_free_unpacked(&from_flags->base, NULL);
	protobuf_c_message_free_unpacked(&from_file->base, NULL);
}
END_TEST

START_TEST(test_binary_config)
{
	char err[256], path[] = "/tmp/tp-config-bin-XXXXXX";
	struct recorder_options o;
	Perfetto__Protos__TraceConfig *text = NULL, *bin = NULL;
	uint8_t *buf;
	size_t len;
	int fd;

	/* the same config, written as binary protobuf, loads to the same thing */
	recorder_options_init(&o);
	ck_assert_int_eq(recorder_config_from_options(&o, &text, err, sizeof(err)), 0);
	len = perfetto__protos__trace_config__get_packed_size(text);
	buf = malloc(len);
	ck_assert_ptr_nonnull(buf);
	perfetto__protos__trace_config__pack(text, buf);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, buf, len), 0);
	close(fd);
	ck_assert_int_eq(recorder_config_load(path, &bin, err, sizeof(err)), 0);
	ck_assert_uint_eq(perfetto__protos__trace_config__get_packed_size(bin), len);
	ck_assert_uint_eq(bin->n_data_sources, text->n_data_sources);
	ck_assert_uint_eq(bin->duration_ms, text->duration_ms);
	protobuf_c_message_free_unpacked(&bin->base, NULL);
	bin = NULL;
	/* and bytes that are neither: a clear error */
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, "\xff\xff\xff\x00garbage", 11), 0);
	close(fd);
	ck_assert_int_lt(recorder_config_load(path, &bin, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "neither"));
	unlink(path);
	free(buf);
	protobuf_c_message_free_unpacked(&text->base, NULL);
}
END_TEST

START_TEST(test_flags_reject_bad_names)
{
	struct recorder_options o;
	char err[256];
	Perfetto__Protos__TraceConfig *cfg = NULL;

	recorder_options_init(&o);
	o.events[o.n_events++] = "sched/sched_switch\" } } } duration_ms: 1 #";
	ck_assert_int_lt(recorder_config_from_options(&o, &cfg, err, sizeof(err)), 0);
	recorder_options_init(&o);
	o.instance = "../../etc";
	ck_assert_int_lt(recorder_config_from_options(&o, &cfg, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_durations_and_sizes)
{
	uint64_t ms;
	uint32_t kb;

	ck_assert_int_eq(recorder_parse_duration_ms("500ms", &ms), 0);
	ck_assert_uint_eq(ms, 500);
	ck_assert_int_eq(recorder_parse_duration_ms("10s", &ms), 0);
	ck_assert_uint_eq(ms, 10000);
	ck_assert_int_eq(recorder_parse_duration_ms("2m", &ms), 0);
	ck_assert_uint_eq(ms, 120000);
	ck_assert_int_eq(recorder_parse_duration_ms("1.5", &ms), 0);
	ck_assert_uint_eq(ms, 1500);
	ck_assert_int_lt(recorder_parse_duration_ms("10x", &ms), 0);
	ck_assert_int_lt(recorder_parse_duration_ms("-1s", &ms), 0);
	ck_assert_int_lt(recorder_parse_duration_ms("5000000h", &ms), 0);
	ck_assert_int_eq(recorder_parse_size_kb("8m", &kb), 0);
	ck_assert_uint_eq(kb, 8192);
	ck_assert_int_eq(recorder_parse_size_kb("4096", &kb), 0);
	ck_assert_uint_eq(kb, 4096);
	ck_assert_int_lt(recorder_parse_size_kb("0", &kb), 0);
	ck_assert_int_lt(recorder_parse_size_kb("5000000g", &kb), 0);
	ck_assert_int_lt(recorder_parse_size_kb("-4", &kb), 0);
}
END_TEST

/* ---- wire bytes built by hand, for what protobuf-c cannot express -------- */

struct wire {
	uint8_t b[4096];
	size_t n;
};

static void wire_put_varint(struct wire *w, uint64_t v)
{
	w->n += (size_t)(varint_put(w->b + w->n, v) - (w->b + w->n));
}

static void wire_bytes(struct wire *w, uint32_t id, const void *data, size_t len)
{
	ck_assert_uint_lt(w->n + len + 2 * VARINT_PUT_ROOM, sizeof(w->b));
	wire_put_varint(w, ((uint64_t)id << 3) | 2);
	wire_put_varint(w, len);
	memcpy(w->b + w->n, data, len);
	w->n += len;
}

static void wire_str(struct wire *w, uint32_t id, const char *s, size_t len)
{
	wire_bytes(w, id, s, len);
}

static void wire_msg(struct wire *w, uint32_t id, const struct wire *m)
{
	wire_bytes(w, id, m->b, m->n);
}

static void wire_varint(struct wire *w, uint32_t id, uint64_t v)
{
	wire_put_varint(w, (uint64_t)id << 3);
	wire_put_varint(w, v);
}

/* A TraceConfig with one linux.ftrace data source around FtraceConfig bytes @ft. */
static void trace_config_with(struct wire *out, const struct wire *ft, const char *name,
			      size_t name_len)
{
	struct wire buffer = {}, dsc = {}, ds = {};

	wire_varint(&buffer, 1, 1024);                /* BufferConfig.size_kb */
	wire_str(&dsc, 1, name, name_len);            /* DataSourceConfig.name */
	wire_msg(&dsc, 100, ft);                      /* .ftrace_config */
	wire_msg(&ds, 1, &dsc);                       /* DataSource.config */
	*out = (struct wire){};
	wire_msg(out, 1, &buffer);                    /* TraceConfig.buffers */
	wire_msg(out, 2, &ds);                        /* .data_sources */
	wire_varint(out, 3, 1000);                    /* .duration_ms */
}

#define S(lit) lit, sizeof(lit) - 1

/* The issue's names: a NUL inside an event name, an instance name of "\0". */
START_TEST(test_pbcheck_nul_in_strings)
{
	const ProtobufCMessageDescriptor *tc = &perfetto__protos__trace_config__descriptor;
	struct wire ft = {}, cfg = {}, sd = {}, cmd = {};
	char err[256];

	/* clean: accepted, and protobuf-c agrees */
	wire_str(&ft, 1, S("sched/sched_switch"));
	trace_config_with(&cfg, &ft, S("linux.ftrace"));
	ck_assert_int_eq(pbcheck_strings(tc, cfg.b, cfg.n, err, sizeof(err)), 0);

	/* "sched/sched_switch\0foo" as the second event */
	wire_str(&ft, 1, S("sched/sched_switch\0foo"));
	trace_config_with(&cfg, &ft, S("linux.ftrace"));
	ck_assert_int_eq(pbcheck_strings(tc, cfg.b, cfg.n, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "field 'data_sources[0].config.ftrace_config.ftrace_events[1]' has a "
			      "NUL byte at offset 18 of its 22 bytes");

	/* instance_name: "\0" */
	ft = (struct wire){};
	wire_str(&ft, 1, S("sched/sched_switch"));
	wire_str(&ft, 25, S("\0"));
	trace_config_with(&cfg, &ft, S("linux.ftrace"));
	ck_assert_int_eq(pbcheck_strings(tc, cfg.b, cfg.n, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "field 'data_sources[0].config.ftrace_config.instance_name' has a NUL "
			      "byte at offset 0 of its 1 bytes");

	/* the data source's own name */
	ft = (struct wire){};
	trace_config_with(&cfg, &ft, S("linux.ftrace\0x"));
	ck_assert_int_eq(pbcheck_strings(tc, cfg.b, cfg.n, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "'data_sources[0].config.name'"));

	/* an unknown field may hold anything: it never reaches a check or a path */
	cfg = (struct wire){};
	wire_str(&cfg, 999, S("a\0b"));
	ck_assert_int_eq(pbcheck_strings(tc, cfg.b, cfg.n, err, sizeof(err)), 0);

	/* what the producer gets: SetupDataSource{config{ftrace_config{instance_name "\0"}}} */
	ft = (struct wire){};
	wire_str(&ft, 25, S("\0"));
	cfg = (struct wire){};
	wire_str(&cfg, 1, S("linux.ftrace"));
	wire_msg(&cfg, 100, &ft);
	wire_varint(&sd, 1, 7);                       /* new_instance_id */
	wire_msg(&sd, 2, &cfg);                       /* config */
	wire_msg(&cmd, 6, &sd);                       /* GetAsyncCommandResponse.setup_data_source */
	ck_assert_int_eq(pbcheck_strings(&perfetto__protos__get_async_command_response__descriptor,
					 cmd.b, cmd.n, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "field 'setup_data_source.config.ftrace_config.instance_name' has a NUL "
			      "byte at offset 0 of its 1 bytes");
}
END_TEST

/* Bytes that are not a message: refused, never read past; depth bounded. */
START_TEST(test_pbcheck_malformed)
{
	const ProtobufCMessageDescriptor *tc = &perfetto__protos__trace_config__descriptor;
	const ProtobufCMessageDescriptor *dp = &perfetto__protos__descriptor_proto__descriptor;
	static const struct {
		const char *bytes;
		size_t len;
		const char *want;
	} cases[] = {
		{ S("\x12\x05\x0a\x03"), "runs past the end" },          /* length past the end */
		{ S("\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"), "runs past the end" },
		{ S("\x18"), "runs past the end" },                      /* varint missing */
		{ S("\x18\x80\x80"), "runs past the end" },              /* varint cut */
		{ S("\x80"), "tag is cut short" },
		{ S("\x00\x01"), "out of range" },                       /* field 0 */
		{ S("\x13"), "wire type 3" },                            /* a group */
		{ S("\x11\x01\x02"), "runs past the end" },              /* fixed64 cut */
		{ S("\x12\x04\x0a\x02\x0a\x05"), "field 1 at byte 4 runs past the end (in field 'data_sources[0].config')" },
	};
	uint8_t *deep;
	char err[256];
	size_t n;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		err[0] = '\0';
		ck_assert_int_eq(pbcheck_strings(tc, (const uint8_t *)cases[i].bytes, cases[i].len, err,
						 sizeof(err)), -EBADMSG);
		ck_assert_msg(strstr(err, cases[i].want), "case %zu: got '%s', want '%s'", i, err,
			      cases[i].want);
	}
	/* empty: a valid empty message (whether it is a useful config is record's to say) */
	ck_assert_int_eq(pbcheck_strings(tc, NULL, 0, err, sizeof(err)), 0);

	/* DescriptorProto.nested_type (3) nested 20 and 40 deep: the bound, not the stack */
	for (unsigned depth = 20; depth <= 40; depth += 20) {
		deep = calloc(depth * 2 + 1, 1);
		ck_assert_ptr_nonnull(deep);
		n = 0;
		for (unsigned d = 0; d < depth; d++) {
			deep[n++] = 3 << 3 | 2;
			deep[n++] = (uint8_t)(2 * (depth - d - 1));
		}
		ck_assert_int_eq(pbcheck_strings(dp, deep, n, err, sizeof(err)),
				 depth <= PBCHECK_MAX_DEPTH ? 0 : -EBADMSG);
		if (depth > PBCHECK_MAX_DEPTH)
			ck_assert_ptr_nonnull(strstr(err, "nest deeper"));
		free(deep);
	}
	/* a short error buffer is cut, still terminated */
	ck_assert_int_eq(pbcheck_strings(tc, (const uint8_t *)"\x12\x02\x0a\x05", 4, err, 8), -EBADMSG);
	ck_assert_uint_eq(strlen(err), 7);
}
END_TEST

/* record -c: a binary config with a NUL in a name, and a text one with any escape of 0. */
START_TEST(test_config_nul_refused)
{
	static const char *const texts[] = {
		"data_sources { config { name: \"linux.ftrace\" ftrace_config { "
		"ftrace_events: \"sched/sched_switch\\0foo\" } } }",
		"data_sources { config { name: \"linux.ftrace\" ftrace_config { instance_name: \"\\0\" } } }",
		"data_sources { config { name: \"linux.ftrace\" ftrace_config { instance_name: \"a\\x00\" } } }",
		"data_sources { config { name: \"linux.ftrace\" ftrace_config { instance_name: \"a\\000\" } } }",
		"data_sources { config { name: \"linux.ftrace\" ftrace_config { instance_name: \"a\\400\" } } }",
		"data_sources { config { name: \"linux.ftrace\\0\" } }",
	};
	char err[256], path[] = "/tmp/tp-config-nul-XXXXXX";
	Perfetto__Protos__TraceConfig *cfg = NULL;
	struct wire ft = {}, bin = {};
	int fd;

	for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
		err[0] = '\0';
		ck_assert_ptr_null(parse_text(texts[i], err, sizeof(err)));
		ck_assert_msg(strstr(err, "has a NUL byte"), "'%s': got '%s'", texts[i], err);
	}
	/* and the same decoded into a string field that is not a name still fails;
	 * a printable escape still works */
	cfg = parse_text("data_sources { config { name: \"linux.\\x66trace\" } }", err, sizeof(err));
	ck_assert_ptr_nonnull(cfg);
	ck_assert_str_eq(cfg->data_sources[0]->config->name, "linux.ftrace");
	protobuf_c_message_free_unpacked(&cfg->base, NULL);
	cfg = NULL;

	wire_str(&ft, 1, S("sched/sched_switch\0foo"));
	trace_config_with(&bin, &ft, S("linux.ftrace"));
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, bin.b, bin.n), 0);
	close(fd);
	ck_assert_int_eq(recorder_config_load(path, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strstr(err, "field 'data_sources[0].config.ftrace_config.ftrace_events[0]' has "
				  "a NUL byte"), "%s", err);
	unlink(path);
}
END_TEST

int main(void)
{
	const char *root = getenv("TP_SOURCE_ROOT");
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	SRunner *sr;
	int failed;

	snprintf(source_root, sizeof(source_root), "%s", root ? root : ".");
	tcase_add_test(tc, test_examples_parse);
	tcase_add_test(tc, test_pbtxt_values);
	tcase_add_test(tc, test_pbtxt_errors);
	tcase_add_test(tc, test_pbtxt_depth_bounded);
	tcase_add_test(tc, test_flags_match_example);
	tcase_add_test(tc, test_flags_reject_bad_names);
	tcase_add_test(tc, test_binary_config);
	tcase_add_test(tc, test_durations_and_sizes);
	tcase_add_test(tc, test_pbcheck_nul_in_strings);
	tcase_add_test(tc, test_pbcheck_malformed);
	tcase_add_test(tc, test_config_nul_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
