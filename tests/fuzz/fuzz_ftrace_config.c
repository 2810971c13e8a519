/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as a serialized FtraceConfig, through
 * the same validation SetupDataSource runs, against a fixed list of
 * "available" events (no tracefs involved).  Whatever is accepted must be
 * safe to put in a tracefs path and within every bound.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/ftrace/plan/ftrace_plan.h"
#include "protos/perfetto/config/ftrace/ftrace_config.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char avail_text[] =
	"sched:sched_switch\nsched:sched_waking\nsched:sched_wakeup\nsched:sched_process_exit\n"
	"sched:sched_process_fork\ntask:task_newtask\ntask:task_rename\nirq:irq_handler_entry\n"
	"irq:irq_handler_exit\npower:cpu_frequency\npower:cpu_idle\nraw_syscalls:sys_enter\n"
	"raw_syscalls:sys_exit\nfoo:sched_waking\nuniq:only_here\ndup1:twice\ndup2:twice\n";

static struct ftrace_event_list *avail(void)
{
	static struct ftrace_event_list *l;

	if (!l) {
		if (ftrace_event_list_new(&l) < 0 || ftrace_event_list_parse(l, avail_text, sizeof(avail_text) - 1) < 0 ||
		    ftrace_event_list_add(l, "ftrace", "print", FTRACE_EVENT_ALWAYS_ON) < 0)
			abort();
		ftrace_event_list_sort(l);
	}
	return l;
}

static void check(const struct ftrace_config *c)
{
	if (c->n_events > FTRACE_MAX_EVENTS || c->buffer_size_kb == 0 || c->buffer_size_kb > FTRACE_BUFFER_KB_MAX ||
	    c->drain_period_ms < FTRACE_DRAIN_MS_MIN || c->drain_period_ms > FTRACE_DRAIN_MS_MAX ||
	    c->drain_buffer_percent > 100)
		abort();
	for (size_t i = 0; i < c->n_events; i++) {
		if (!ftrace_name_valid(c->events[i]->group) || !ftrace_name_valid(c->events[i]->name))
			abort();
		for (size_t j = 0; j < i; j++)
			if (c->events[j] == c->events[i])
				abort(); /* not deduplicated */
	}
	for (size_t i = 0; i < c->n_unknown; i++) {
		size_t n = strlen(c->unknown[i]);

		if (n > FTRACE_MAX_REPORTED_NAME)
			abort();
		for (size_t k = 0; k < n; k++)
			if ((unsigned char)c->unknown[i][k] < 0x20 || (unsigned char)c->unknown[i][k] >= 0x7f)
				abort();
	}
	if (c->instance_name && !ftrace_instance_name_valid(c->instance_name))
		abort();
	if (c->compact_sched && !c->has_sched_switch)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Perfetto__Protos__FtraceConfig *cfg;
	struct ftrace_config *c = NULL;
	const char *inst = NULL;
	char *err = NULL;
	int r;

	cfg = perfetto__protos__ftrace_config__unpack(NULL, size, data);
	if (!cfg)
		return 0;

	r = ftrace_config_instance_name(cfg, &inst, &err);
	if (r == 0 && inst && !ftrace_instance_name_valid(inst))
		abort();
	free(err);
	err = NULL;

	/* The limits record checks first: a refusal names its limit. */
	char why[256] = "";
	int checked = ftrace_plan_check(cfg, why, sizeof(why));

	if (checked != 0 && (checked != -E2BIG || !strstr(why, "more than the limit of")))
		abort();

	/* The RAM size picks the default buffer; let the input reach both. */
	r = ftrace_config_resolve(cfg, avail(), size & 1 ? 16ull << 30 : 1ull << 30, &c, &err);
	if (r == 0) {
		check(c);
		/* what the early check refused, resolve must not accept */
		if (checked < 0 && cfg->n_ftrace_events > FTRACE_MAX_CONFIG_EVENTS)
			abort();
		if (cfg->instance_name && strlen(cfg->instance_name) > FTRACE_INSTANCE_NAME_MAX)
			abort();
	} else if (r != -EINVAL && r != -ENOMEM)
		abort();
	ftrace_config_free(c);
	free(err);
	perfetto__protos__ftrace_config__free_unpacked(cfg, NULL);
	return 0;
}
