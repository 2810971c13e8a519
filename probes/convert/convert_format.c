/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Event formats for the page parser, from the tep handle libtracecmd filled
 * while opening the file.  libtracecmd keeps no copy of the format texts it
 * read, and ftrace_format_table learns events from text only, so each
 * event's text is written back from libtraceevent's parsed layout: the
 * parser needs names, types, offsets, sizes and signedness, all of which
 * round-trip; the print format is not needed to encode and is left empty.
 */
#include <stdio.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "probes/convert/convert_internal.h"
#include "probes/ftrace/parse/ftrace_parse.h"
#include "util/util.h"

int convert_format_header_page(unsigned page_size, unsigned commit_size, char **ret)
{
	unsigned data_off = 8 + commit_size;

	if ((commit_size != 4 && commit_size != 8) || page_size <= data_off)
		return -EINVAL;
	/* The kernel's events/header_page, for this commit size. */
	if (asprintf(ret,
		     "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
		     "\tfield: local_t commit;\toffset:8;\tsize:%u;\tsigned:1;\n"
		     "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
		     "\tfield: char data;\toffset:%u;\tsize:%u;\tsigned:1;\n",
		     commit_size, data_off, page_size - data_off) < 0)
		return -ENOMEM;
	return 0;
}

/*
 * libtraceevent stores an array's bounds in the type ("char[16]"); tracefs
 * writes them after the name ("char comm[16]").  Dynamic arrays
 * ("__data_loc char[]") keep theirs in the type.
 */
static void put_field(FILE *f, const struct tep_format_field *fld)
{
	const char *br = strchr(fld->type, '[');

	if (br && !(fld->flags & (TEP_FIELD_IS_DYNAMIC | TEP_FIELD_IS_RELATIVE)))
		fprintf(f, "\tfield:%.*s %s%s;", (int)(br - fld->type), fld->type, fld->name, br);
	else
		fprintf(f, "\tfield:%s %s;", fld->type, fld->name);
	fprintf(f, "\toffset:%d;\tsize:%d;\tsigned:%d;\n", fld->offset, fld->size,
		!!(fld->flags & TEP_FIELD_IS_SIGNED));
}

int convert_format_event_text(const struct tep_event *ev, char **ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *f;

	f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	fprintf(f, "name: %s\nID: %d\nformat:\n", ev->name, ev->id);
	for (const struct tep_format_field *fld = ev->format.common_fields; fld; fld = fld->next)
		put_field(f, fld);
	fputc('\n', f);
	for (const struct tep_format_field *fld = ev->format.fields; fld; fld = fld->next)
		put_field(f, fld);
	fputs("\nprint fmt: \"\"\n", f);
	if (fclose(f) != 0 || !buf)
		return -ENOMEM;
	*ret = TAKE_PTR(buf);
	return 0;
}

/*
 * libtraceevent keeps the file's printk formats but lists them only through
 * tep_print_printk(), which printf()s "ADDR FORMAT" lines (the quotes and a
 * trailing "\n" already taken off when the file was read).  glibc lets
 * stdout be assigned: it points at a memory stream for that one call.  The
 * lines are then given back printk_formats' own layout.
 */
int convert_format_printk_text(struct tep_handle *tep, char **ret)
{
	_cleanup_free_ char *dump = NULL, *buf = NULL;
	size_t dump_len = 0, len = 0;
	FILE *mem, *saved, *f;

	mem = open_memstream(&dump, &dump_len);
	if (!mem)
		return -ENOMEM;
	(void)fflush(stdout);
	saved = stdout;
	stdout = mem;
	tep_print_printk(tep);
	stdout = saved;
	if (fclose(mem) != 0 || !dump)
		return -ENOMEM;

	f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	for (char *line = dump, *next; line && *line; line = next) {
		char *sp;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		sp = strchr(line, ' ');
		if (sp)
			fprintf(f, "0x%.*s : \"%s\"\n", (int)(sp - line), line, sp + 1);
	}
	if (fclose(f) != 0 || !buf)
		return -ENOMEM;
	*ret = TAKE_PTR(buf);
	return 0;
}

int convert_format_load_all(struct tep_handle *tep, struct ftrace_format_table *t,
			    int **ret_ids, size_t *ret_failed)
{
	int n = tep_get_events_count(tep), k = 0;
	_cleanup_free_ int *ids = NULL;
	size_t failed = 0;
	int r;

	ids = calloc((size_t)MAX(n, 1), sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct tep_event *ev = tep_get_event(tep, i);
		_cleanup_free_ char *text = NULL;
		int id;

		if (!ev || !ev->system || !ev->name)
			continue;
		r = convert_format_event_text(ev, &text);
		if (r < 0)
			return r;
		r = ftrace_format_table_add_format(t, ev->system, ev->name, text, &id);
		if (r == -ENOMEM)
			return r;
		if (r < 0 || id != ev->id) {
			failed++;
			continue;
		}
		ids[k++] = id;
	}
	*ret_ids = TAKE_PTR(ids);
	*ret_failed = failed;
	return k;
}
