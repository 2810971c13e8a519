/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_format - event formats of one tracefs instance, parsed once with
 * libtraceevent, and the printk_formats map.  What is derived from the
 * formats (translations, generic field ids, the compact_sched layout) is
 * ftrace_translate.c's: the table only keeps it, as an opaque cache freed
 * with the table.  Setup-time code: allocates and reads files freely.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "util/util.h"

/* Larger format files exist (long print fmts) but 1 MiB is far beyond any. */
#define FORMAT_FILE_MAX (1u << 20)
#define PRINTK_FILE_MAX (64u << 20)

struct printk_entry {
	uint64_t addr;
	const char *str;
	uint32_t len;
};

struct ftrace_format_table {
	int dirfd;                      /* -EBADF for text-only tables */
	struct tep_handle *tep;
	unsigned commit_size;

	/* Highest kernel event id loaded: ids above were never added. */
	int max_id;

	/* Owned by the layer above (ftrace_translate.c), freed with the table. */
	void *cache;
	void (*free_cache)(void *cache);

	bool printk_loaded;
	char *printk_text;
	struct printk_entry *printk;
	size_t n_printk;
};

static void tep_freep(struct tep_handle **p)
{
	if (*p)
		tep_free(*p);
}

static int table_alloc(const char *header_page, size_t len, int dirfd,
		       struct ftrace_format_table **ret)
{
	_cleanup_(tep_freep) struct tep_handle *tep = NULL;
	_cleanup_free_ char *copy = NULL;
	struct ftrace_format_table *t;
	int commit_size;

	tep = tep_alloc();
	if (!tep)
		return -ENOMEM;
	/* libtraceevent's parser takes a mutable buffer. */
	copy = strndup(header_page, len);
	if (!copy)
		return -ENOMEM;
	if (tep_parse_header_page(tep, copy, len, (int)sizeof(long)) < 0)
		return -EBADMSG;
	commit_size = tep_get_header_page_size(tep);
	if (commit_size != 4 && commit_size != 8)
		return -EBADMSG;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->dirfd = dirfd;
	t->tep = TAKE_PTR(tep);
	t->commit_size = (unsigned)commit_size;
	*ret = t;
	return 0;
}

int ftrace_format_table_new(const char *tracefs_dir, struct ftrace_format_table **ret)
{
	_cleanup_close_ int dirfd = -EBADF;
	_cleanup_free_ char *hdr = NULL;
	size_t len;
	int r;

	if (!tracefs_dir || !ret)
		return -EINVAL;
	dirfd = open(tracefs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	r = read_full_file_at(dirfd, "events/header_page", FORMAT_FILE_MAX, &hdr, &len);
	if (r < 0)
		return r;
	r = table_alloc(hdr, len, dirfd, ret);
	if (r < 0)
		return r;
	TAKE_FD(dirfd);
	return 0;
}

int ftrace_format_table_new_from_text(const char *header_page, struct ftrace_format_table **ret)
{
	if (!header_page || !ret)
		return -EINVAL;
	return table_alloc(header_page, strlen(header_page), -EBADF, ret);
}

struct ftrace_format_table *ftrace_format_table_free(struct ftrace_format_table *t)
{
	if (!t)
		return NULL;
	if (t->free_cache)
		t->free_cache(t->cache);
	free(t->printk);
	free(t->printk_text);
	if (t->tep)
		tep_free(t->tep);
	if (t->dirfd >= 0)
		(void)close(t->dirfd);
	free(t);
	return NULL;
}

unsigned ftrace_format_table_commit_size(const struct ftrace_format_table *t)
{
	return t->commit_size;
}

static bool name_ok(const char *s)
{
	/* Becomes a path component: no separators, no dot-dot. */
	return s && *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

int ftrace_format_table_add_format(struct ftrace_format_table *t, const char *group,
				   const char *name, const char *format_text, int *ret_event_id)
{
	_cleanup_free_ char *copy = NULL;
	struct tep_event *ev = NULL;
	size_t len;

	if (!t || !name_ok(group) || !name_ok(name) || !format_text)
		return -EINVAL;

	ev = tep_find_event_by_name(t->tep, group, name);
	if (!ev) {
		len = strlen(format_text);
		copy = strndup(format_text, len);
		if (!copy)
			return -ENOMEM;
		if (tep_parse_format(t->tep, &ev, copy, len, group) != 0 || !ev)
			return -EBADMSG;
		/* A failed print fmt still leaves usable fields; a failed field
		 * list does not. */
		if (ev->format.nr_common == 0 || strcmp(ev->name, name) != 0)
			return -EBADMSG;
	}
	if (ev->id <= 0 || ev->id > FTRACE_MAX_EVENT_ID)
		return -EBADMSG;
	t->max_id = MAX(t->max_id, ev->id);
	if (ret_event_id)
		*ret_event_id = ev->id;
	return 0;
}

int ftrace_format_table_load_event(struct ftrace_format_table *t, const char *group,
				   const char *name, int *ret_event_id)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	int r;

	if (!t || !name_ok(group) || !name_ok(name))
		return -EINVAL;
	/* Known already: add_format returns the cached id without the text. */
	if (tep_find_event_by_name(t->tep, group, name))
		return ftrace_format_table_add_format(t, group, name, "", ret_event_id);
	if (t->dirfd < 0)
		return -ENOENT;
	if (asprintf(&path, "events/%s/%s/format", group, name) < 0)
		return -ENOMEM;
	r = read_full_file_at(t->dirfd, path, FORMAT_FILE_MAX, &text, NULL);
	if (r < 0)
		return r == -ENOTDIR ? -ENOENT : r;
	return ftrace_format_table_add_format(t, group, name, text, ret_event_id);
}

struct tep_event *ftrace_format_table_tep_event(const struct ftrace_format_table *t, int id)
{
	if (id <= 0 || id > t->max_id)
		return NULL;
	return tep_find_event(t->tep, id);
}

const char *ftrace_format_table_group(const struct ftrace_format_table *t, int id)
{
	struct tep_event *ev = ftrace_format_table_tep_event(t, id);

	return ev ? ev->system : NULL;
}

int ftrace_format_table_max_id(const struct ftrace_format_table *t)
{
	return t->max_id;
}

void *ftrace_format_table_cache(const struct ftrace_format_table *t)
{
	return t->cache;
}

void ftrace_format_table_set_cache(struct ftrace_format_table *t, void *cache,
				   void (*free_cache)(void *cache))
{
	if (t->free_cache)
		t->free_cache(t->cache);
	t->cache = cache;
	t->free_cache = free_cache;
}

/* ---- printk_formats ------------------------------------------------------ */

static int printk_cmp(const void *a, const void *b)
{
	const struct printk_entry *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Lines look like `0xffffffff8297a3b8 : "rcu_sched"`.  The string runs to
 * the last quote of the line; it is stored as is (no unescaping), which is
 * what Perfetto writes too.
 */
static int printk_parse(struct ftrace_format_table *t)
{
	size_t cap = 0;
	char *line = t->printk_text;

	while (line && *line) {
		char *nl = strchr(line, '\n'), *end, *q1, *q2;
		unsigned long long addr;

		if (nl)
			*nl = '\0';
		errno = 0;
		addr = strtoull(line, &end, 16);
		q1 = strchr(line, '"');
		q2 = strrchr(line, '"');
		if (errno == 0 && end != line && q1 && q2 > q1) {
			if (t->n_printk == cap) {
				size_t ncap = cap ? cap * 2 : 256;
				struct printk_entry *n = realloc(t->printk, ncap * sizeof(*n));

				if (!n)
					return -ENOMEM;
				t->printk = n;
				cap = ncap;
			}
			*q2 = '\0';
			t->printk[t->n_printk++] = (struct printk_entry){
				.addr = addr,
				.str = q1 + 1,
				.len = (uint32_t)(q2 - q1 - 1),
			};
		}
		line = nl ? nl + 1 : NULL;
	}
	/* qsort() must not be given the NULL of an empty map. */
	if (t->n_printk > 1)
		qsort(t->printk, t->n_printk, sizeof(*t->printk), printk_cmp);
	return 0;
}

int ftrace_format_table_load_printk(struct ftrace_format_table *t)
{
	int r;

	if (t->printk_loaded)
		return 0;
	t->printk_loaded = true;
	if (t->dirfd < 0)
		return 0;
	/* Instances have no printk_formats of their own: try the root. */
	r = read_full_file_at(t->dirfd, "printk_formats", PRINTK_FILE_MAX, &t->printk_text, NULL);
	if (r == -ENOENT)
		r = read_full_file_at(t->dirfd, "../../printk_formats", PRINTK_FILE_MAX,
				      &t->printk_text, NULL);
	if (r < 0)
		return r;
	return printk_parse(t);
}

int ftrace_format_table_set_printk_text(struct ftrace_format_table *t, const char *text)
{
	char *copy;

	if (!t || !text)
		return -EINVAL;
	copy = strdup(text);
	if (!copy)
		return -ENOMEM;
	free(t->printk);
	free(t->printk_text);
	t->printk = NULL;
	t->n_printk = 0;
	t->printk_text = copy;
	t->printk_loaded = true;
	return printk_parse(t);
}

const char *ftrace_format_table_printk_lookup(const struct ftrace_format_table *t,
					      uint64_t addr, size_t *ret_len)
{
	size_t lo = 0, hi = t->n_printk;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->printk[mid].addr == addr) {
			*ret_len = t->printk[mid].len;
			return t->printk[mid].str;
		}
		if (t->printk[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*ret_len = 0;
	return "";
}
