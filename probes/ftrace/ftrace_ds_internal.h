/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared by ftrace_host.c and ftrace_ds.c: the host, the per-directory
 * state it keeps, and the data sources attached to it.
 */

#include "event/event.h"

#include "probes/ds/ds.h"
#include "probes/ftrace/ftrace.h"
#include "probes/ftrace/ftrace_control.h"
#include "probes/ftrace/ftrace_parse.h"

/* Per pass and CPU, at most this many pages (Perfetto: 256). */
#define FTRACE_PASS_MAX_PAGES 256u
/* Pages per batch, one bundle each (as Perfetto); read and parsed one at a time. */
#define FTRACE_BATCH_PAGES 32u
/* Distinct pids one data source can note in one pass. */
#define FTRACE_PIDSET_CAPACITY 32768u

/* One tracefs directory in use: top level or an instance. */
struct ftrace_inst {
	struct ftrace_host *host;
	struct ftrace_inst *next;
	struct ftrace_tracefs *tfs;
	struct ftrace_format_table *table;
	size_t page_size;
	unsigned commit_size;
	unsigned n_cpus;                /* _SC_NPROCESSORS_CONF */
	struct ftrace_cpu **cpus;       /* [n_cpus]; NULL: not opened or not present */
	bool cpus_open;
	uint8_t *pages;                 /* one page: read, then parsed at once */
	struct ftrace_ds *sessions;     /* attached data sources */
	/* [n_cpus]: wake-ups when a CPU's buffer reaches buffer_percent */
	struct event_source **wake;
	bool wake_on;
};

struct ftrace_host {
	struct event *event;
	struct event_source *timer;
	char *root;                     /* tracefs mount, found on first use */
	char *state_dir;
	struct ftrace_inst *insts;
	uint32_t period_ms;             /* of the armed timer, 0 if off */
};

/* ftrace_host.c: (re)arm or stop the buffer_percent wake-ups of @in */
void ftrace_inst_arm_wake(struct ftrace_inst *in);

struct ftrace_ds {
	struct ftrace_host *host;
	struct ftrace_inst *inst;
	struct ftrace_ds *next;         /* in inst->sessions */
	uint64_t instance_id;
	uint64_t tracing_session_id;

	struct ftrace_event_list *avail;  /* cfg->events point into it */
	struct ftrace_config *cfg;
	bool *enabled;                  /* per cfg->events: we hold a tracefs reference */
	char **failed;                  /* failed_ftrace_events */
	size_t n_failed;
	char *warnings;

	struct ds_sink sink;
	struct ftrace_ds_hooks hooks;
	void *userdata;
	struct ftrace_parser *parser;
	struct ftrace_print_filter *print_filter;
	struct ftrace_pidset *pids;
	struct ftrace_cpu_state *cpu_state;     /* [inst->n_cpus] */
	struct ftrace_pass_stats *cpu_pass;     /* [inst->n_cpus], cumulative */
	struct ftrace_cpu_stats *start_stats;   /* [inst->n_cpus], at start */

	bool attached;
	bool started;
	bool ever_started;
	uint64_t passes;
	uint32_t read_errors_mask;      /* 1u << FtraceParseStatus for read failures */
};

/* ftrace_host.c */
int ftrace_host_get_inst(struct ftrace_host *h, const char *instance_name, struct ftrace_inst **ret,
			 char **ret_error);
/* Free @in if no data source is attached any more. */
void ftrace_host_put_inst(struct ftrace_inst *in);
int ftrace_inst_open_cpus(struct ftrace_inst *in);
/*
 * Read every CPU of @in once and feed each started data source; then
 * pass_done for each.  @flush reads up to the whole buffer.
 * Returns: 0 or the first -errno; *ret_more if a CPU hit the per-pass bound.
 */
int ftrace_inst_read_pass(struct ftrace_inst *in, bool flush, bool *ret_more);
/* Arm, re-period or stop the drain timer after a start or a stop. */
int ftrace_host_update_timer(struct ftrace_host *h);
