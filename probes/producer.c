/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The producer's side of ProducerPort: handshake, data-source registration
 * and the GetAsyncCommand stream, whose commands go down to producer_ds.c.  The order of the handshake and of
 * every reply follows what the service expects from Perfetto's own
 * traced_probes (see the fact sheet, 2.6 and 8.1).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "probes/producer_internal.h"
#include "protos/pbcheck.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "util/util.h"

#define PRODUCER_NAME "perfetto.traced_probes"
/* What Perfetto's traced_probes asks for: 2 MiB of 32 KiB pages. */
#define SMB_SIZE_HINT (2u << 20)
#define SMB_PAGE_HINT (32u << 10)
/* The emulated SMB for transports that cannot pass fds (TCP, vsock). */
#define EMULATION_SMB_SIZE (1u << 20)
#define SMB_STALL_US 10000u
#define COMMIT_BATCH_BYTES (128u * 1024)

const char *producer_default_socket(void)
{
	const char *env = getenv("PERFETTO_PRODUCER_SOCK_NAME");

	if (env && *env)
		return env;
	if (access("/run/perfetto/", X_OK) == 0)
		return "/run/perfetto/traced-producer.sock";
	return "/tmp/perfetto-producer";
}

int producer_new(struct loop *e, const struct ds_ops *const *kinds, void *const *shared,
		 const struct producer_hooks *hooks, void *userdata, struct producer **ret)
{
	struct producer *p;

	if (!e || !kinds || !ret)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->event = loop_ref(e);
	p->kinds = kinds;
	p->shared = shared;
	if (hooks)
		p->hooks = *hooks;
	p->userdata = userdata;
	*ret = p;
	return 0;
}

struct producer *producer_free(struct producer *p)
{
	if (!p)
		return NULL;
	/* every data source first: they restore tracefs and need the SMB */
	producer_ds_destroy_all(p);
	p->commit_source = loop_source_disable_unref(p->commit_source);
	p->em_retry = loop_source_disable_unref(p->em_retry);
	free(p->em_moves);
	free(p->em_patches);
	p->client = ipc_client_free(p->client);
	p->relay = producer_relay_free(p->relay);
	p->smb = smb_free(p->smb);
	free(p->emulation_buf);
	free(p->machine_id_hint);
	free(p->machine_name);
	free(p->relay_address);
	p->event = loop_unref(p->event);
	free(p);
	return NULL;
}

void producer_set_final_flush(struct producer *p, bool on)
{
	p->final_flush = on;
}

bool producer_is_active(const struct producer *p)
{
	return p && p->instances;
}

static void producer_fail(struct producer *p, int error)
{
	if (p->dead)
		return;
	p->dead = true;
	if (p->hooks.disconnected)
		p->hooks.disconnected(p, error, p->userdata);
}

static void on_disconnect(struct ipc_client *c, int error, void *userdata)
{
	struct producer *p = userdata;

	log_debug_errno(error, "Connection to the tracing service closed: %m");
	producer_fail(p, error ? error : -ECONNRESET);
}

static void on_register_reply(struct ipc_client *c, int error, const uint8_t *reply, size_t len,
			      bool has_more, int fd, void *userdata)
{
	struct producer *p = userdata;

	if (error < 0)
		log_warning_errno(error, "The service refused a data source registration: %m");
	if (++p->registered_replies == p->registered_sent && p->hooks.registered)
		p->hooks.registered(p, p->userdata);
}

static int register_data_source(struct producer *p, const struct ds_ops *ops)
{
	Perfetto__Protos__RegisterDataSourceRequest req =
		PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
	Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
	int r;

	if (ops->describe)
		ops->describe(&d);
	d.name = (char *)ops->name;
	d.has_will_notify_on_start = d.will_notify_on_start = true;
	d.has_will_notify_on_stop = d.will_notify_on_stop = true;
	if (ops->clear_incremental)
		d.has_handles_incremental_state_clear = d.handles_incremental_state_clear = true;
	req.data_source_descriptor = &d;
	r = producer_invoke(p, PRODUCER_METHOD_REGISTER_DATA_SOURCE, &req.base, on_register_reply);
	if (r >= 0)
		p->registered_sent++;
	return r;
}

static void on_initialize_reply(struct ipc_client *c, int error, const uint8_t *reply, size_t len,
				bool has_more, int fd, void *userdata)
{
	struct producer *p = userdata;
	Perfetto__Protos__InitializeConnectionResponse *resp;
	int r;

	if (error < 0) {
		log_error_errno(error, "The tracing service refused InitializeConnection: %m");
		producer_fail(p, error);
		return;
	}
	resp = perfetto__protos__initialize_connection_response__unpack(NULL, len, reply);
	if (!resp) {
		log_error("The tracing service sent an undecodable InitializeConnection reply");
		producer_fail(p, -EBADMSG);
		return;
	}
	p->emulation = resp->use_shmem_emulation || !ipc_client_can_pass_fds(p->client);
	perfetto__protos__initialize_connection_response__free_unpacked(resp, NULL);
	log_debug("Connected to the tracing service%s",
		  p->emulation ? " (shared memory emulated over the socket)" : "");

	/* in the order of the list: the registry follows Perfetto's traced_probes */
	r = 0;
	for (size_t i = 0; r >= 0 && p->kinds[i]; i++)
		r = register_data_source(p, p->kinds[i]);
	if (r < 0)
		producer_fail(p, r);
	else if (p->registered_sent == 0 && p->hooks.registered)
		p->hooks.registered(p, p->userdata);
}

/* SetupTracing: the service's memfd, or our own buffer when emulating. */
static int setup_smb(struct producer *p, uint32_t page_size_kb, int fd)
{
	size_t page_size = (size_t)page_size_kb * 1024;
	int r;

	if (p->smb) {
		log_debug("Ignoring a second SetupTracing: the SMB lives as long as the connection");
		return 0;
	}
	if (page_size < 4096 || page_size > 65536 || (page_size & (page_size - 1)))
		return log_error_errno(-EINVAL, "The service sent an invalid SMB page size (%u KiB)",
				       page_size_kb);
	if (fd >= 0) {
		r = smb_new_from_fd(fd, page_size, &p->smb);
		if (r < 0)
			return log_error_errno(r, "Failed to map the shared memory buffer: %m");
	} else if (p->emulation) {
		r = posix_memalign(&p->emulation_buf, 4096, EMULATION_SMB_SIZE);
		if (r != 0)
			return -r;
		memset(p->emulation_buf, 0, EMULATION_SMB_SIZE);
		r = smb_new(p->emulation_buf, EMULATION_SMB_SIZE, page_size, &p->smb);
		if (r < 0)
			return log_error_errno(r, "Failed to set up the emulated buffer: %m");
	} else {
		return log_error_errno(-EBADF, "SetupTracing arrived without the shared memory fd");
	}
	smb_set_commit_hook(p->smb, producer_commit_hook, p);
	/*
	 * A pass of a busy machine writes hundreds of KiB: commit every few
	 * chunks rather than at half the buffer, so the service frees them as
	 * we go and the buffer's pages we ever touch (our RSS) stay few.
	 */
	smb_set_commit_threshold(p->smb, MAX((size_t)1, (size_t)COMMIT_BATCH_BYTES / page_size));
	/*
	 * Full: commit, then give the service up to 10 ms to free a chunk
	 * before dropping.  Not when emulating: only our own sends free a
	 * chunk, and they happen on this thread, so the wait could never end
	 * well and would only stop the loop (every other drain) for 10 ms
	 * each time the socket is behind; the commit threshold above already
	 * sends and frees chunks as they complete, while the socket has room.
	 */
	smb_set_stall(p->smb, p->emulation ? 0 : SMB_STALL_US);
	log_debug("Shared memory buffer: %zu KiB in %zu KiB pages", smb_size(p->smb) / 1024,
		  page_size / 1024);
	return 0;
}

/*
 * The command stream: every command for a data source goes down to
 * producer_ds.c; SetupTracing (the SMB) is the connection's own.
 */
static void on_async_command(struct ipc_client *c, int error, const uint8_t *reply, size_t len,
			     bool has_more, int fd, void *userdata)
{
	struct producer *p = userdata;
	Perfetto__Protos__GetAsyncCommandResponse *cmd;
	char why[256];
	const char *refusal = NULL;

	if (error < 0 || !has_more) {
		/* the stream never ends while the service is alive */
		if (error < 0)
			log_debug_errno(error, "Command stream failed: %m");
		producer_fail(p, error < 0 ? error : -ECONNRESET);
		return;
	}
	cmd = perfetto__protos__get_async_command_response__unpack(NULL, len, reply);
	if (!cmd) {
		log_warning("Undecodable command from the tracing service, ignoring");
		return;
	}
	/* the unpacked strings end at their first NUL: only the bytes show one */
	if (pbcheck_strings(&perfetto__protos__get_async_command_response__descriptor, reply, len,
			    why, sizeof(why)) < 0)
		refusal = why;
	switch (cmd->cmd_case) {
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING: {
		_cleanup_close_ int smb_fd = ipc_client_take_fd(c);

		if (setup_smb(p, cmd->setup_tracing->shared_buffer_page_size_kb, smb_fd) < 0)
			log_error("Without a shared memory buffer no data can be recorded");
		break;
	}
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE:
		(void)producer_ds_setup(p, cmd->setup_data_source, refusal);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
		producer_ds_start(p, cmd->start_data_source->new_instance_id, refusal);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE:
		producer_ds_stop(p, cmd->stop_data_source->instance_id);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
		producer_ds_flush(p, cmd->flush);
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE:
		producer_ds_clear_incremental(p, cmd->clear_incremental_state);
		break;
	default:
		log_debug("Ignoring unknown command %d from the tracing service", cmd->cmd_case);
		break;
	}
	perfetto__protos__get_async_command_response__free_unpacked(cmd, NULL);
}

static void on_bind(struct ipc_client *c, int error, uint32_t service_id, void *userdata)
{
	Perfetto__Protos__InitializeConnectionRequest init =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
	Perfetto__Protos__GetAsyncCommandRequest cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
	struct producer *p = userdata;
	int r;

	if (error < 0) {
		/* a refused bind is the service's answer; a connection that never
		 * came up (TCP connects in the background) is the daemon's retry */
		if (error == -ENOENT || error == -EPROTO)
			log_error_errno(error, "The service refused ProducerPort: %m");
		else
			log_debug_errno(error, "Failed to bind ProducerPort: %m");
		producer_fail(p, error);
		return;
	}
	p->service_id = service_id;
	for (int i = 0; i < _PRODUCER_METHOD_MAX; i++) {
		const char *name = producer_method_name(i);

		p->method_ids[i] = ipc_client_get_method_id(c, service_id, name);
		if (p->method_ids[i] < 0) {
			log_error("The tracing service has no ProducerPort.%s", name);
			producer_fail(p, -EPROTO);
			return;
		}
	}

	init.producer_name = (char *)PRODUCER_NAME;
	init.has_shared_memory_size_hint_bytes = true;
	init.shared_memory_size_hint_bytes = p->smb_size_hint ? p->smb_size_hint : SMB_SIZE_HINT;
	init.has_shared_memory_page_size_hint_bytes = true;
	init.shared_memory_page_size_hint_bytes = SMB_PAGE_HINT;
	init.has_smb_scraping_mode = true;
	init.smb_scraping_mode =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__PRODUCER_SMBSCRAPING_MODE__SMB_SCRAPING_DISABLED;
	init.sdk_version = (char *)"traced-probes " TP_VERSION;
	r = producer_invoke(p, PRODUCER_METHOD_INITIALIZE_CONNECTION, &init.base, on_initialize_reply);
	/* the command stream is opened at once, without waiting for the reply */
	if (r >= 0)
		r = producer_invoke(p, PRODUCER_METHOD_GET_ASYNC_COMMAND, &cmd.base,
				    on_async_command);
	if (r < 0)
		producer_fail(p, r);
}

static bool identify(const struct producer *p, const char *address);

/*
 * The one connect path: a client from @address, or over @fd when @address
 * is NULL (the fd is ours from here on, also on failure), then the
 * handshake.  On failure nothing is left behind and producer_connect() may
 * be tried again.
 */
static int producer_open(struct producer *p, const char *address, int fd)
{
	const struct ipc_identity id = { .pid = (int32_t)getpid(), .uid = (int32_t)geteuid(),
					 .machine_id_hint = p->machine_id_hint, .machine_name = p->machine_name };
	bool remote = identify(p, address);
	struct ipc_client *c = NULL;
	int r;

	if (p->client) {
		closep(&fd);
		return -EALREADY;
	}
	r = address ? ipc_client_new(address, &c) : ipc_client_new_from_fd(fd, &c);
	if (r < 0)
		return r;
	p->client = c;
	ipc_client_set_disconnect_callback(c, on_disconnect, p);
	r = ipc_client_attach_event(c, p->event);
	if (r >= 0 && remote)
		r = ipc_client_send_identity(c, &id);
	if (r >= 0)
		r = ipc_client_bind_service(c, "ProducerPort", on_bind, p, NULL);
	if (r < 0) {
		p->client = ipc_client_free(p->client);
		return r;
	}
	if (remote && !p->relay) {
		int k = producer_relay_new(p->event, p->relay_address ? p->relay_address : address, &id,
					   &p->relay);

		if (k < 0)
			log_notice_errno(k, "No relay connection to %s (%m): no clock sync with the service",
					 address);
	}
	return r;
}

/* Whether the connection to @address says who we are: TCP or vsock, with a machine set. */
static bool identify(const struct producer *p, const char *address)
{
	int kind;

	if (!p->has_identity || !address)
		return false;
	kind = ipc_addr_kind_from_string(address);
	return kind >= 0 && !ipc_addr_kind_can_pass_fds((enum ipc_addr_kind)kind);
}

int producer_set_machine(struct producer *p, const char *machine_name, const char *relay_address)
{
	char host[256], boot_id[BOOT_ID_LEN + 1];

	if (!p)
		return -EINVAL;
	if (!machine_name || !*machine_name) {
		if (gethostname(host, sizeof(host)) < 0)
			snprintf(host, sizeof(host), "linux");
		host[sizeof(host) - 1] = '\0';
		machine_name = host;
	}
	/* as traced_relay: this boot's id tells the machines apart */
	boot_id_read(boot_id);
	free(p->machine_name);
	free(p->machine_id_hint);
	p->machine_name = strdup(machine_name);
	p->machine_id_hint = strdup(boot_id);
	free(p->relay_address);
	p->relay_address = relay_address ? strdup(relay_address) : NULL;
	if (!p->machine_name || !p->machine_id_hint || (relay_address && !p->relay_address))
		return -ENOMEM;
	p->has_identity = true;
	return 0;
}

uint64_t producer_clock_sync_rounds(const struct producer *p)
{
	return p ? producer_relay_rounds(p->relay) : 0;
}

int producer_connect(struct producer *p, const char *address)
{
	if (!address)
		return -EINVAL;
	return producer_open(p, address, -EBADF);
}

int producer_adopt_fd(struct producer *p, int fd)
{
	return producer_open(p, NULL, fd);
}
