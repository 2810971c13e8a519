/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data source instances of sessions: matching registered data sources
 * against a session's config, SetupDataSource and StartDataSource, and
 * what the producers report (registered, unregistered, started, stopped).
 * Stopping goes through svc_session_disable.c.
 */
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>

#include "protos/perfetto/config/data_source_config.pb-c.h"
#include "service/svc_internal.h"
#include "util/util.h"

static bool name_matches(const char *name, char **names, size_t n, char **regexes, size_t n_re)
{
	if (n == 0 && n_re == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (names[i] && streq(names[i], name))
			return true;
	for (size_t i = 0; i < n_re; i++) {
		_cleanup_free_ char *anchored = NULL;
		regex_t re;
		bool m;

		/* std::regex_match(extended) matches the whole name. */
		if (!regexes[i] || asprintf(&anchored, "^(%s)$", regexes[i]) < 0)
			continue;
		if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) != 0)
			continue;
		m = regexec(&re, name, 0, NULL, 0) == 0;
		regfree(&re);
		if (m)
			return true;
	}
	return false;
}

int svc_session_ds_target_buffer(const Perfetto__Protos__TraceConfig *cfg,
				 const Perfetto__Protos__DataSourceConfig *dc, uint32_t *ret)
{
	uint32_t target = dc->target_buffer;

	if (dc->target_buffer_name && *dc->target_buffer_name) {
		size_t i;

		for (i = 0; i < cfg->n_buffers; i++)
			if (cfg->buffers[i]->name && streq(cfg->buffers[i]->name, dc->target_buffer_name))
				break;
		if (i == cfg->n_buffers)
			return -ENOENT;
		/* Both set: they must agree (0 counts as unset). */
		if (target > 0 && target != i)
			return -EINVAL;
		target = (uint32_t)i;
	}
	if (target >= cfg->n_buffers)
		return -ERANGE;
	*ret = target;
	return 0;
}

static uint64_t session_buffer_bytes(const struct svc_session *ss)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < ss->n_buffers; i++)
		sum += ss->buffers[i].size;
	return sum;
}

struct svc_ds_inst *svc_session_ds_free(struct svc_ds_inst *i)
{
	if (!i)
		return NULL;
	if (i->config)
		perfetto__protos__data_source_config__free_unpacked(i->config, NULL);
	free(i->name);
	free(i);
	return NULL;
}

static void inst_insert(struct svc_session *ss, struct svc_ds_inst *inst)
{
	/* traced keeps instances in a multimap keyed by producer id. */
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->producer && i->producer->id > inst->producer->id) {
			SVC_LIST_INSERT_BEFORE(insts, ss, i, inst);
			return;
		}
	SVC_LIST_APPEND(insts, ss, inst);
}

struct svc_ds_inst *svc_session_ds_setup(struct svc_session *ss,
					 const Perfetto__Protos__TraceConfig__DataSource *cds,
					 struct svc_ds_reg *reg)
{
	Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
	Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource sd =
		PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_DATA_SOURCE__INIT;
	struct svc *s = ss->svc;
	struct svc_producer *p = reg->producer;
	const Perfetto__Protos__TraceConfig *cfg = ss->config;
	Perfetto__Protos__DataSourceConfig *dc;
	struct svc_ds_inst *inst;
	uint32_t rel;
	int r;

	if (!p->initialized || p->disconnected)
		return NULL;
	/*
	 * Machines, as v58.2: a machine_name_filter names the machines (and
	 * "host" always matches this one); without one, a remote machine's
	 * producers get data sources only with trace_all_machines.
	 */
	if (cds->n_machine_name_filter) {
		bool match = p->machine_name && name_matches(p->machine_name, cds->machine_name_filter,
							     cds->n_machine_name_filter, NULL, 0);

		if (!match && !(p->machine_id == 0 && name_matches("host", cds->machine_name_filter,
								   cds->n_machine_name_filter, NULL, 0)))
			return NULL;
	} else if (p->machine_id != 0 && !(cfg->has_trace_all_machines && cfg->trace_all_machines)) {
		return NULL;
	}
	if (!name_matches(p->name, cds->producer_name_filter, cds->n_producer_name_filter,
			  cds->producer_name_regex_filter, cds->n_producer_name_regex_filter))
		return NULL;
	if (svc_session_ds_target_buffer(cfg, cds->config, &rel) < 0)
		return NULL;

	inst = calloc(1, sizeof(*inst));
	if (!inst)
		return NULL;
	inst->session = ss;
	inst->producer = p;
	inst->id = ++s->last_ds_instance_id;
	inst->name = strdup(reg->name);
	inst->config = svc_copy_message(&cds->config->base);
	inst->will_notify_on_start = reg->will_notify_on_start;
	inst->will_notify_on_stop = reg->will_notify_on_stop;
	inst->handles_incremental_state_clear = reg->handles_incremental_state_clear;
	inst->no_flush = reg->no_flush;
	inst->state = SVC_DS_CONFIGURED;
	if (!inst->name || !inst->config)
		return svc_session_ds_free(inst);

	/* The fields traced fills in (it always sets them, so they are on the
	 * wire even when zero). */
	dc = inst->config;
	dc->has_trace_duration_ms = true;
	dc->trace_duration_ms = cfg->duration_ms;
	if (cfg->prefer_suspend_clock_for_duration) {
		dc->has_prefer_suspend_clock_for_duration = true;
		dc->prefer_suspend_clock_for_duration = true;
	}
	dc->has_stop_timeout_ms = true;
	dc->stop_timeout_ms = ss->stop_timeout_ms;
	dc->has_enable_extra_guardrails = true;
	dc->enable_extra_guardrails = cfg->enable_extra_guardrails;
	dc->has_session_initiator = true;
	dc->session_initiator = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__SESSION_INITIATOR__SESSION_INITIATOR_UNSPECIFIED;
	dc->has_tracing_session_id = true;
	dc->tracing_session_id = ss->id;
	dc->has_target_buffer = true;
	dc->target_buffer = ss->buffers[rel].id;

	inst_insert(ss, inst);
	ss->stats.data_sources++;

	/* The SMB comes with the first data source of this producer, and its
	 * SetupTracing goes out before this SetupDataSource. */
	r = svc_producer_ensure_smb(p, cfg, session_buffer_bytes(ss));
	if (r >= 0)
		r = svc_producer_allow_buffer(p, ss->buffers[rel].id);
	if (r < 0) {
		log_debug_errno(r, "service: setting up the SMB of producer %u failed: %m", p->id);
		SVC_LIST_REMOVE(insts, ss, inst);
		return svc_session_ds_free(inst);
	}
	sd.has_new_instance_id = true;
	sd.new_instance_id = inst->id;
	sd.config = inst->config;
	cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE;
	cmd.setup_data_source = &sd;
	(void)svc_producer_send(p, &cmd);
	return inst;
}

void svc_session_ds_all_started(struct svc_session *ss)
{
	if (ss->all_started_notified || ss->state != SVC_SESSION_STARTED)
		return;
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->state != SVC_DS_STARTED)
			return;
	ss->all_started_notified = true;
	svc_packets_event_now(ss, SVC_EVENT_ALL_DATA_SOURCES_STARTED, /* snapshot_clocks= */ true);
	if (ss->hooks.all_started)
		ss->hooks.all_started(ss, ss->userdata);
}

void svc_session_ds_start(struct svc_session *ss, struct svc_ds_inst *inst)
{
	Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
	Perfetto__Protos__GetAsyncCommandResponse__StartDataSource sd =
		PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT;

	inst->state = inst->will_notify_on_start ? SVC_DS_STARTING : SVC_DS_STARTED;
	sd.has_new_instance_id = true;
	sd.new_instance_id = inst->id;
	sd.config = inst->config;
	cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
	cmd.start_data_source = &sd;
	(void)svc_producer_send(inst->producer, &cmd);
	if (inst->state == SVC_DS_STARTED)
		svc_session_ds_all_started(ss);
}

void svc_session_on_register(struct svc *s, struct svc_ds_reg *reg)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		if (ss->state != SVC_SESSION_STARTED)
			continue;
		for (size_t i = 0; i < ss->config->n_data_sources; i++) {
			const Perfetto__Protos__TraceConfig__DataSource *cds = ss->config->data_sources[i];
			struct svc_ds_inst *inst;

			if (!cds->config || !cds->config->name || !streq(cds->config->name, reg->name))
				continue;
			inst = svc_session_ds_setup(ss, cds, reg);
			if (inst)
				svc_session_ds_start(ss, inst);
		}
	}
}

void svc_session_on_unregister(struct svc *s, struct svc_ds_reg *reg)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		struct svc_ds_inst *i, *next;
		bool removed = false;

		for (i = ss->insts_head; i; i = next) {
			next = i->insts_next;
			if (i->producer != reg->producer || !streq(i->name, reg->name))
				continue;
			if (i->state != SVC_DS_STOPPED) {
				if (i->state != SVC_DS_STOPPING)
					svc_session_disable_ds(i, /* immediately= */ false);
				if (i->state == SVC_DS_STOPPING)
					svc_session_disable_ds_done(ss, i);
			}
			/* next may have been... no: svc_session_disable_finish never frees instances. */
			SVC_LIST_REMOVE(insts, ss, i);
			svc_session_ds_free(i);
			removed = true;
		}
		if (removed)
			svc_session_ds_all_started(ss);
	}
}

static struct svc_ds_inst *find_inst(struct svc_session *ss, const struct svc_producer *p, uint64_t id)
{
	for (struct svc_ds_inst *i = ss->insts_head; i; i = i->insts_next)
		if (i->producer == p && i->id == id)
			return i;
	return NULL;
}

void svc_session_on_ds_started(struct svc *s, struct svc_producer *p, uint64_t inst_id)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		struct svc_ds_inst *i = find_inst(ss, p, inst_id);

		if (!i || ss->state != SVC_SESSION_STARTED)
			continue;
		if (i->state != SVC_DS_STARTING) {
			log_debug("service: data source %" PRIu64 " started in state %d", inst_id, i->state);
			continue;
		}
		i->state = SVC_DS_STARTED;
		svc_session_ds_all_started(ss);
	}
}

void svc_session_on_ds_stopped(struct svc *s, struct svc_producer *p, uint64_t inst_id)
{
	for (struct svc_session *ss = s->sessions_head; ss; ss = ss->sessions_next) {
		struct svc_ds_inst *i = find_inst(ss, p, inst_id);

		if (!i)
			continue;
		if (i->state != SVC_DS_STOPPING) {
			log_debug("service: data source %" PRIu64 " stopped in state %d", inst_id, i->state);
			continue;
		}
		svc_session_disable_ds_done(ss, i);
	}
}
