/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ftrace_parser - one session's view of a format table: which events it
 * records, how generic events are encoded, whether compact_sched applies.
 * Everything the drain loop needs is resolved here, at setup.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/parse/ftrace_parse_internal.h"
#include "util/util.h"

int ftrace_parser_new(struct ftrace_format_table *t, const struct ftrace_parser_opts *o,
		      struct ftrace_parser **ret)
{
	struct ftrace_parser *p;
	int r;

	if (!t || !ret)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->t = t;
	p->opts = o ? *o : FTRACE_PARSER_OPTS_DEFAULT;
	p->compact_switch_id = -1;
	p->compact_waking_id = -1;
	p->print_id = -1;
	r = ftrace_compact_buf_new(&p->cb);
	if (r >= 0)
		r = ftrace_parser_batch_alloc(p);
	if (r < 0) {
		ftrace_parser_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

struct ftrace_parser *ftrace_parser_free(struct ftrace_parser *p)
{
	if (!p)
		return NULL;
	ftrace_compact_buf_free(p->cb);
	ftrace_parser_batch_free(p);
	free(p->by_id);
	free(p->dyn_trs);
	free(p->dyn_used);
	free(p->kprobe_type);
	free(p);
	return NULL;
}

static int grow_by_id(struct ftrace_parser *p, int id)
{
	const struct ftrace_event_tr **n;
	size_t want = (size_t)id + 1;

	if (want <= p->n_ids)
		return 0;
	n = realloc(p->by_id, want * sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + p->n_ids, 0, (want - p->n_ids) * sizeof(*n));
	p->by_id = n;
	p->n_ids = want;
	return 0;
}

static int grow_dyn(struct ftrace_parser *p, size_t count)
{
	const struct ftrace_event_tr **trs;
	size_t words = (count + 63) / 64, old_words = (p->n_dyn + 63) / 64;
	uint64_t *used;

	if (count <= p->n_dyn)
		return 0;
	trs = realloc(p->dyn_trs, count * sizeof(*trs));
	if (!trs)
		return -ENOMEM;
	memset(trs + p->n_dyn, 0, (count - p->n_dyn) * sizeof(*trs));
	p->dyn_trs = trs;
	if (words > old_words) {
		used = realloc(p->dyn_used, words * sizeof(*used));
		if (!used)
			return -ENOMEM;
		memset(used + old_words, 0, (words - old_words) * sizeof(*used));
		p->dyn_used = used;
	}
	p->n_dyn = count;
	return 0;
}

/* Perfetto's rule: compact mode needs sched_switch in the session and both
 * kernel formats as expected; waking is compacted only alongside switch. */
static void update_compact(struct ftrace_parser *p)
{
	const struct ftrace_compact_format *cf;

	p->compact_switch_id = -1;
	p->compact_waking_id = -1;
	if (!p->opts.compact_sched)
		return;
	cf = ftrace_translate_compact(p->t);
	if (!cf->valid || (size_t)cf->switch_id >= p->n_ids || !p->by_id[cf->switch_id])
		return;
	p->cf = cf;
	p->compact_switch_id = cf->switch_id;
	if ((size_t)cf->waking_id < p->n_ids && p->by_id[cf->waking_id])
		p->compact_waking_id = cf->waking_id;
}

int ftrace_parser_enable(struct ftrace_parser *p, int event_id)
{
	const struct ftrace_event_tr *tr;
	const char *group;
	int r;

	if (!p)
		return -EINVAL;
	r = ftrace_translate_get(p->t, event_id, &tr);
	if (r < 0)
		return r;
	if (tr->type == FTRACE_TR_GENERIC && p->opts.disable_generic_events)
		return -EOPNOTSUPP;
	r = grow_by_id(p, event_id);
	if (r < 0)
		return r;
	if (tr->type == FTRACE_TR_GENERIC) {
		size_t idx = tr->proto_field - FTRACE_DYN_FIELD_BASE;

		r = grow_dyn(p, idx + 1);
		if (r < 0)
			return r;
		p->dyn_trs[idx] = tr;
	}
	p->by_id[event_id] = tr;

	group = ftrace_format_table_group(p->t, event_id);
	if (group && strcmp(group, "sched") == 0 &&
	    (strcmp(tr->name, "sched_switch") == 0 || strcmp(tr->name, "sched_waking") == 0))
		update_compact(p);
	return 0;
}

int ftrace_parser_enable_kprobe(struct ftrace_parser *p, int event_id, int trace_type)
{
	const struct ftrace_event_tr *tr;
	uint8_t *n;
	int r;

	if (!p || trace_type < 1 || trace_type > 3)
		return -EINVAL;
	r = ftrace_translate_get(p->t, event_id, &tr);
	if (r < 0)
		return r;
	if (tr->type != FTRACE_TR_KPROBE)
		return -EINVAL;
	if ((size_t)event_id >= p->n_kprobe_type) {
		n = realloc(p->kprobe_type, (size_t)event_id + 1);
		if (!n)
			return -ENOMEM;
		memset(n + p->n_kprobe_type, 0, (size_t)event_id + 1 - p->n_kprobe_type);
		p->kprobe_type = n;
		p->n_kprobe_type = (size_t)event_id + 1;
	}
	r = grow_by_id(p, event_id);
	if (r < 0)
		return r;
	p->kprobe_type[event_id] = (uint8_t)trace_type;
	p->by_id[event_id] = tr;
	return 0;
}

void ftrace_parser_set_bundle_hook(struct ftrace_parser *p, ftrace_parser_bundle_hook fn, void *ctx)
{
	p->bundle_hook = fn;
	p->bundle_hook_ctx = ctx;
}

bool ftrace_parser_compact_sched_active(const struct ftrace_parser *p)
{
	return p->compact_switch_id >= 0;
}

bool ftrace_parser_has_kernel_addresses(const struct ftrace_parser *p)
{
	for (size_t id = 0; id < p->n_ids; id++) {
		const struct ftrace_event_tr *tr = p->by_id[id];

		for (uint16_t i = 0; tr && i < tr->n_fields; i++)
			if (tr->fields[i].kind == FTRACE_FK_SYM32 || tr->fields[i].kind == FTRACE_FK_SYM64)
				return true;
	}
	return false;
}

void ftrace_parser_set_print_filter(struct ftrace_parser *p, const struct ftrace_print_filter *f)
{
	p->print_id = -1;
	p->print_filter = NULL;
	if (!f)
		return;
	/* ftrace/print is the typed event at FtraceEvent field 3; its text is "buf" */
	for (size_t id = 0; id < p->n_ids; id++) {
		const struct ftrace_event_tr *tr = p->by_id[id];

		if (!tr || tr->type != FTRACE_TR_TYPED || tr->proto_field != 3)
			continue;
		for (uint16_t i = 0; i < tr->n_fields; i++)
			if (tr->fields[i].name_len == 3 && memcmp(tr->fields[i].name, "buf", 3) == 0) {
				p->print_id = (int)id;
				p->print_buf_off = tr->fields[i].offset;
				p->print_filter = f;
				return;
			}
	}
}

void ftrace_parser_set_clock(struct ftrace_parser *p, enum ftrace_clock clock, int64_t ftrace_ts,
			     int64_t boot_ts)
{
	p->clock = clock;
	p->clock_ftrace_ts = ftrace_ts;
	p->clock_boot_ts = boot_ts;
}
