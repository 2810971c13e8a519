/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `traced-probes record`: the producer on the main thread, the in-process
 * service on its own thread, joined by a socketpair.  The service creates
 * the memfd SMB and sends it with SetupTracing exactly as traced would, so
 * what lands in the file went through the same protocol as in production.
 */
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probes/ds/ds.h"
#include "probes/ftrace/ds/ftrace_ds.h"
#include "probes/producer.h"
#include "probes/recorder.h"
#include "service/service.h"
#include "util/util.h"

#define RECORDER_MAX_REPORTS 8
/* The session starts once our data sources are registered, or after this. */
#define REGISTER_TIMEOUT_US (5 * 1000000ull)
/* How often the bound above looks again while a start goes on off the loop. */
#define START_RECHECK_US (100 * 1000ull)
/* ... and says so this often while it lasts. */
#define START_WAIT_NOTICE_NS (10 * 1000000000ull)
/* The live status line on a terminal is redrawn this often. */
#define STATUS_PERIOD_US 1000000ull
/* A second Ctrl-C sooner than this after the first is the same keypress relayed. */
#define SIGNAL_REPEAT_NS 1000000000ull

struct recorder {
	const struct recorder_options *opts;
	Perfetto__Protos__TraceConfig *cfg;
	int out_fd;
	char *tmp_path;

	/* service thread */
	pthread_t svc_thread;
	bool svc_thread_started;
	int svc_sock;
	int stop_efd;            /* main -> service: stop the session now */
	int done_efd;            /* service -> main: the session is over */
	int session_error;
	bool session_started;
	struct svc_session_stats svc_stats;
	uint64_t svc_cpu_ns;

	/* main thread */
	struct loop *event;
	void **shared;           /* each data-source kind's state (ds_registry) */
	struct producer *producer;
	int producer_error;
	struct ds_report reports[RECORDER_MAX_REPORTS];   /* each owns its cpu[] */
	size_t n_reports;
	unsigned stop_requests;  /* Ctrl-C / SIGTERM */
	uint64_t first_signal_ns; /* CLOCK_MONOTONIC of the first */
	bool stopping;           /* a stop was requested, by -t or a signal */
	uint64_t start_ns, end_ns;
	/*
	 * -t runs on this thread, from the moment the data sources are on
	 * (setup such as a clock change or a buffer resize can take seconds);
	 * the service is given no duration of its own.
	 */
	uint64_t duration_ms;
	struct loop_source *duration_timer;
	uint64_t tracing_ns;     /* CLOCK_MONOTONIC when the last data source started; 0: not yet */
	uint64_t start_wait_ns;  /* when -t ran out with a start still going on */
	unsigned start_wait_notices;
	struct loop_source *status_timer;
	bool status_shown;       /* a status line is on the terminal */
};

struct svc_ctx {
	struct recorder *rec;
	struct loop *event;
	struct svc *svc;
	struct svc_session *session;
	struct loop_source *register_timeout;
};

void recorder_options_init(struct recorder_options *o)
{
	memset(o, 0, sizeof(*o));
	o->duration_ms = 10000;
	o->compact_sched = -1;
	/* a burst is drained when it comes, not at the next tick */
	o->drain_buffer_percent = 50;
	o->process_names = true;
	/* enough for a busy 2-CPU machine between two drains, without overruns */
	o->buffer_size_kb = 8192;
	o->service_buffer_kb = 65536;
	/* as perfetto -t */
	o->symbolize_ksyms = true;
	o->system_info = true;
	o->sys_stats_period_ms = RECORDER_SYS_STATS_PERIOD_MS;
}

/* ---- service thread ----------------------------------------------------- */

static void on_session_done(struct svc_session *ss, int error, void *userdata)
{
	struct svc_ctx *ctx = userdata;

	ctx->rec->session_error = error;
	(void)svc_session_get_stats(ss, &ctx->rec->svc_stats);
	(void)loop_exit(ctx->event, 0);
	(void)eventfd_write(ctx->rec->done_efd, 1);
}

static void start_session(struct svc_ctx *ctx)
{
	const struct svc_session_hooks hooks = { .done = on_session_done };
	int r;

	if (ctx->session)
		return;
	ctx->register_timeout = loop_source_disable_unref(ctx->register_timeout);
	r = svc_session_start(ctx->svc, ctx->rec->cfg, ctx->rec->out_fd, &hooks, ctx, &ctx->session);
	if (r < 0) {
		log_error_errno(r, "Failed to start the tracing session: %m");
		ctx->rec->session_error = r;
		(void)loop_exit(ctx->event, 0);
		(void)eventfd_write(ctx->rec->done_efd, 1);
		return;
	}
	ctx->rec->session_started = true;
}

static void on_producer_change(struct svc *s, void *userdata)
{
	struct svc_ctx *ctx = userdata;

	if (!ctx->session && svc_data_sources_available(s, ctx->rec->cfg))
		start_session(ctx);
}

static int on_register_timeout(struct loop_source *src, uint64_t usec, void *userdata)
{
	log_warning("Not every data source of the config registered in time; recording what is there");
	start_session(userdata);
	return 0;
}

static int on_stop_request(struct loop_source *src, int fd, uint32_t revents, void *userdata)
{
	struct svc_ctx *ctx = userdata;
	eventfd_t v;

	(void)eventfd_read(fd, &v);
	if (ctx->session)
		(void)svc_session_stop(ctx->session);
	else
		on_session_done(NULL, -ECANCELED, ctx);
	return 0;
}

static void *svc_thread_main(void *userdata)
{
	struct svc_ctx ctx = { .rec = userdata };
	struct loop_source *stop_src = NULL;
	struct timespec ts;
	int r;

	r = loop_new(&ctx.event);
	if (r >= 0)
		r = svc_new(ctx.event, NULL, &ctx.svc);
	if (r >= 0) {
		svc_set_producer_hook(ctx.svc, on_producer_change, &ctx);
		r = svc_adopt_connection(ctx.svc, TAKE_FD(ctx.rec->svc_sock));
	}
	if (r >= 0)
		r = loop_add_io(ctx.event, &stop_src, ctx.rec->stop_efd, EPOLLIN, on_stop_request, &ctx);
	if (r >= 0)
		r = loop_add_time_relative(ctx.event, &ctx.register_timeout, CLOCK_MONOTONIC,
					   REGISTER_TIMEOUT_US, 0, on_register_timeout, &ctx);
	if (r >= 0)
		r = loop_run(ctx.event);
	if (r < 0) {
		log_error_errno(r, "The in-process tracing service failed: %m");
		ctx.rec->session_error = r;
		(void)eventfd_write(ctx.rec->done_efd, 1);
	}
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		ctx.rec->svc_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	ctx.session = svc_session_free(ctx.session);
	ctx.register_timeout = loop_source_disable_unref(ctx.register_timeout);
	stop_src = loop_source_disable_unref(stop_src);
	ctx.svc = svc_free(ctx.svc);
	ctx.event = loop_unref(ctx.event);
	return NULL;
}

/* ---- main thread -------------------------------------------------------- */

/*
 * The eventfd pokes here cannot fail short of a bug; eventfd_write() and
 * eventfd_read() because a (void) cast does not quiet write()'s and
 * read()'s warn_unused_result under _FORTIFY_SOURCE (the package's build).
 */
static void request_stop(struct recorder *rec)
{
	(void)eventfd_write(rec->stop_efd, 1);
}

static void status_erase(struct recorder *rec)
{
	if (!rec->status_shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	rec->status_shown = false;
}

struct live_totals {
	uint64_t events, lost;
};

static void add_live(const struct ds_report *r, void *userdata)
{
	struct live_totals *t = userdata;

	/* events: the per-CPU kind (ftrace); the others count records, not events */
	if (r->n_cpus == 0)
		return;
	t->events += r->events;
	t->lost += r->lost_events;
}

/* One line, redrawn in place: how far the recording has come. */
static int on_status(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct recorder *rec = userdata;
	struct live_totals t = { 0 };
	struct stat st;

	(void)usec;
	if (!rec->stopping && rec->tracing_ns) {
		double secs = (double)(now_ns(CLOCK_MONOTONIC) - rec->tracing_ns) / 1e9;
		char of[32] = "";

		(void)producer_report_live(rec->producer, add_live, &t);
		if (fstat(rec->out_fd, &st) < 0)
			st.st_size = 0;
		if (rec->duration_ms)
			snprintf(of, sizeof(of), " / %.0f s", (double)rec->duration_ms / 1000.0);
		fprintf(stderr, "\r\033[K  %.0f s%s   %llu events   %.1f MB written   %llu lost in the kernel",
			secs, of, (unsigned long long)t.events, (double)st.st_size / 1e6,
			(unsigned long long)t.lost);
		fflush(stderr);
		rec->status_shown = true;
	}
	(void)loop_source_set_time_relative(s, STATUS_PERIOD_US);
	(void)loop_source_set_enabled(s, LOOP_ONESHOT);
	return 0;
}

static int on_duration(struct loop_source *s, uint64_t usec, void *userdata)
{
	struct recorder *rec = userdata;
	const char *starting;

	(void)s;
	(void)usec;
	/*
	 * Before any data source is on, this is only the bound on the wait for
	 * them to register.  One already set up and on its way to starting (a
	 * slow setup just done, a buffer resize on its own thread: seconds for a
	 * large buffer or an emulated machine) is not a data source that never
	 * came: its start re-arms the timer for the whole duration; a start that
	 * fails ends the wait at the next look.
	 */
	starting = rec->tracing_ns ? NULL : producer_starting(rec->producer);
	if (starting) {
		uint64_t now = now_ns(CLOCK_MONOTONIC);

		/* a wait with no end in sight says what it waits for */
		if (!rec->start_wait_ns)
			rec->start_wait_ns = now;
		else if (now - rec->start_wait_ns >= START_WAIT_NOTICE_NS * (rec->start_wait_notices + 1)) {
			rec->start_wait_notices++;
			log_notice("Still waiting for %s to start (%.0f s past the recording's end)", starting,
				   (double)(now - rec->start_wait_ns) / 1e9);
		}
		(void)loop_source_set_time_relative(s, START_RECHECK_US);
		(void)loop_source_set_enabled(s, LOOP_ONESHOT);
		return 0;
	}
	if (!rec->stopping) {
		rec->stopping = true;
		status_erase(rec);
		request_stop(rec);
	}
	return 0;
}

/*
 * Each start moves the end: -t counts from the moment the last data source
 * is on, however long the setup before it took.
 */
static void on_ds_started(struct producer *p, const char *name, void *userdata)
{
	struct recorder *rec = userdata;

	(void)p;
	(void)name;
	rec->tracing_ns = now_ns(CLOCK_MONOTONIC);
	if (rec->duration_timer && rec->duration_ms && !rec->stopping) {
		(void)loop_source_set_time_relative(rec->duration_timer, rec->duration_ms * 1000);
		(void)loop_source_set_enabled(rec->duration_timer, LOOP_ONESHOT);
	}
}

static int on_signal(struct loop_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct recorder *rec = userdata;

	/*
	 * One Ctrl-C can arrive twice: the terminal signals the whole foreground
	 * process group, and a wrapper in it (sudo, a shell script's trap,
	 * timeout) may relay its own copy.  Taken as the second Ctrl-C, that
	 * copy aborted a recording the user only meant to stop; so the abort
	 * wants a signal that comes later than a relay would.
	 */
	if (rec->stop_requests > 0 &&
	    now_ns(CLOCK_MONOTONIC) - rec->first_signal_ns < SIGNAL_REPEAT_NS) {
		log_debug("Signal %u repeated within a second of the first, taken as the same stop",
			  si->ssi_signo);
		return 0;
	}
	if (rec->stop_requests++ == 0) {
		rec->first_signal_ns = now_ns(CLOCK_MONOTONIC);
		rec->stopping = true;
		status_erase(rec);
		if (!rec->opts->quiet)
			fprintf(stderr, "\nStopping: flushing what was recorded (Ctrl-C again to abort)...\n");
		request_stop(rec);
	} else {
		log_warning("Aborting: the trace file will be incomplete");
		rec->session_error = -EINTR;
		(void)loop_exit(loop_source_get_loop(s), 0);
	}
	return 0;
}

static int on_done(struct loop_source *s, int fd, uint32_t revents, void *userdata)
{
	eventfd_t v;

	(void)eventfd_read(fd, &v);
	return loop_exit(loop_source_get_loop(s), 0);
}

/* The report lives only during the call: keep a copy with its own cpu[]. */
static void on_ds_stopped(struct producer *p, const struct ds_report *r, void *userdata)
{
	struct recorder *rec = userdata;
	struct ds_report *copy;

	if (rec->n_reports >= RECORDER_MAX_REPORTS)
		return;
	copy = &rec->reports[rec->n_reports++];
	*copy = *r;
	copy->cpu = NULL;
	copy->n_cpus = 0;
	if (r->n_cpus == 0)
		return;
	copy->cpu = malloc(r->n_cpus * sizeof(*r->cpu));
	if (!copy->cpu)
		return;         /* the totals are kept; only the per-CPU rows are lost */
	memcpy(copy->cpu, r->cpu, r->n_cpus * sizeof(*r->cpu));
	copy->n_cpus = r->n_cpus;
}

static void on_producer_disconnected(struct producer *p, int error, void *userdata)
{
	struct recorder *rec = userdata;

	/* the service closes the connection only when it goes away */
	rec->producer_error = error;
	request_stop(rec);
}

static int open_output(struct recorder *rec, const char *output)
{
	_cleanup_free_ char *dir_copy = strdup(output), *base_copy = strdup(output);
	char *tmp;
	int fd;

	if (!dir_copy || !base_copy)
		return -ENOMEM;
	/*
	 * A device or a FIFO (-o /dev/null) is written in place: renaming the
	 * temporary file over it would replace it with a regular file.
	 */
	fd = open_output_in_place(output);
	if (fd != -ENOTSUP) {
		if (fd < 0)
			return fd;
		rec->out_fd = fd;
		return 0;
	}
	if (asprintf(&tmp, "%s/.%s.XXXXXX", dirname(dir_copy), basename(base_copy)) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;
		free(tmp);
		return r;
	}
	(void)fchmod(fd, 0644);
	rec->out_fd = fd;
	rec->tmp_path = tmp;
	return 0;
}

/*
 * Only a complete trace gets the name the user asked for.  Without a
 * temporary name (a device or a FIFO) there is nothing to sync or rename.
 */
static int finish_output(struct recorder *rec, bool ok)
{
	int r = 0;

	if (ok && rec->tmp_path && fsync(rec->out_fd) < 0)
		r = -errno;
	if (close(rec->out_fd) < 0 && r == 0)
		r = -errno;
	rec->out_fd = -EBADF;
	if (!rec->tmp_path)
		return r;
	if (ok && r == 0 && rename(rec->tmp_path, rec->opts->output) < 0)
		r = -errno;
	if (!ok || r < 0)
		(void)unlink(rec->tmp_path);
	return r;
}

/* first to last event, over the data sources that keep timestamps; 0: none */
static double data_span_s(const struct recorder *rec)
{
	uint64_t first = 0, last = 0;

	for (size_t i = 0; i < rec->n_reports; i++) {
		const struct ds_report *r = &rec->reports[i];

		if (!r->first_ts || r->last_ts < r->first_ts)
			continue;
		if (!first || r->first_ts < first)
			first = r->first_ts;
		if (r->last_ts > last)
			last = r->last_ts;
	}
	return first ? (double)(last - first) / 1e9 : 0.0;
}

static void print_summary(const struct recorder *rec, uint64_t file_bytes)
{
	double wall = (double)(rec->end_ns - rec->start_ns) / 1e9;

	fprintf(stderr, "Recorded %.1f s of data (first to last event; %.1f s in all with setup and"
		" teardown) into %s (%.1f MiB)\n", data_span_s(rec), wall, rec->opts->output,
		(double)file_bytes / (1024.0 * 1024.0));
	for (size_t i = 0; i < rec->n_reports; i++) {
		const struct ds_report *r = &rec->reports[i];

		if (r->failed) {
			fprintf(stderr, "  %s: failed to set up, nothing recorded\n", r->name);
		} else if (r->n_cpus > 0) {
			/* per-CPU data sources (ftrace): what the kernel lost, CPU by CPU */
			fprintf(stderr, "  %s: %llu events, %.1f bytes/event in the SMB\n", r->name,
				(unsigned long long)r->events,
				r->events ? (double)r->bytes / (double)r->events : 0.0);
			/*
			 * read: the kernel's read_events END - START, every event taken
			 * out of the buffer, this session's or not, so that each row
			 * adds up: events + skipped = read.  What the kernel lost it
			 * never handed out: lost is beside read, not in it.
			 */
			fprintf(stderr, "    cpu       events      skipped   read(kernel)   lost(kernel)  pages-with-loss\n");
			for (unsigned c = 0; c < r->n_cpus; c++)
				fprintf(stderr, "    %3u %12llu %12llu %14llu %14llu %16llu\n", c,
					(unsigned long long)r->cpu[c].events,
					(unsigned long long)r->cpu[c].skipped_events,
					(unsigned long long)r->cpu[c].read_events,
					(unsigned long long)r->cpu[c].lost_events,
					(unsigned long long)r->cpu[c].pages_with_loss);
			for (unsigned c = 0; c < r->n_cpus; c++)
				if (r->cpu[c].events + r->cpu[c].skipped_events != r->cpu[c].read_events)
					fprintf(stderr, "  cpu %u: events + skipped differ from the kernel's read by"
						" %lld (a page that could not be read or parsed)\n", c,
						(long long)(r->cpu[c].events + r->cpu[c].skipped_events -
							    r->cpu[c].read_events));
			if (r->skipped_events)
				fprintf(stderr, "  skipped %llu events this session did not ask for (trace_marker"
					" writes, other sessions' events) or its print filter refused\n",
					(unsigned long long)r->skipped_events);
			if (r->lost_events)
				fprintf(stderr, "  LOST: the kernel dropped %llu events (ring buffer full);"
					" try a larger -b or a shorter drain period\n",
					(unsigned long long)r->lost_events);
			else
				fprintf(stderr, "  no events lost in the kernel\n");
		} else {
			fprintf(stderr, "  %s: %llu entries\n", r->name, (unsigned long long)r->events);
		}
		if (r->packets_dropped)
			fprintf(stderr, "  LOST: %llu packets found the shared memory buffer full\n",
				(unsigned long long)r->packets_dropped);
	}
	if (rec->svc_stats.packets_lost || rec->svc_stats.chunks_discarded ||
	    rec->svc_stats.abi_violations || rec->svc_stats.invalid_packets)
		fprintf(stderr, "  LOST in the service: %llu packets, %llu chunks discarded,"
			" %llu ABI violations, %llu invalid packets\n",
			(unsigned long long)rec->svc_stats.packets_lost,
			(unsigned long long)rec->svc_stats.chunks_discarded,
			(unsigned long long)rec->svc_stats.abi_violations,
			(unsigned long long)rec->svc_stats.invalid_packets);
}

int recorder_run(const struct recorder_options *o)
{
	struct recorder rec = { .opts = o, .out_fd = -EBADF, .svc_sock = -EBADF, .stop_efd = -EBADF,
				.done_efd = -EBADF };
	struct loop_source *sig_int = NULL, *sig_term = NULL, *done_src = NULL;
	bool status = !o->quiet && isatty(STDERR_FILENO);
	char err[512] = "";
	int sv[2] = { -EBADF, -EBADF };
	sigset_t mask;
	struct stat st;
	int r;

	r = o->config_path ? recorder_config_load(o->config_path, &rec.cfg, err, sizeof(err))
			   : recorder_config_from_options(o, &rec.cfg, err, sizeof(err));
	/* what would record nothing, or never reach the data source, ends here */
	if (r >= 0)
		r = recorder_config_check(rec.cfg, err, sizeof(err));
	if (r < 0) {
		log_error("Invalid trace config: %s", err[0] ? err : strerror(-r));
		if (rec.cfg)
			protobuf_c_message_free_unpacked(&rec.cfg->base, NULL);
		return r;
	}
	/* FtraceConfig has no field for it: the sessions of this process take it. */
	if (o->subbuf_given)
		ftrace_host_set_subbuf_kb(o->subbuf_kb);
	rec.duration_ms = rec.cfg->has_duration_ms ? rec.cfg->duration_ms : 0;
	rec.cfg->duration_ms = 0;
	rec.cfg->has_duration_ms = false;
	r = open_output(&rec, o->output);
	if (r < 0) {
		log_error_errno(r, "Cannot create the output file next to '%s': %m", o->output);
		goto out;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGPIPE);
	/* blocked before the service thread starts, so it inherits the mask */
	(void)pthread_sigmask(SIG_BLOCK, &mask, NULL);

	rec.stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rec.done_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rec.stop_efd < 0 || rec.done_efd < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = log_error_errno(-errno, "Failed to set up the in-process service: %m");
		goto out;
	}
	rec.svc_sock = sv[1];

	r = loop_new(&rec.event);
	if (r >= 0)
		r = loop_add_signal(rec.event, &sig_int, SIGINT, on_signal, &rec);
	if (r >= 0)
		r = loop_add_signal(rec.event, &sig_term, SIGTERM, on_signal, &rec);
	if (r >= 0)
		r = loop_add_io(rec.event, &done_src, rec.done_efd, EPOLLIN, on_done, &rec);
	/*
	 * -t counts from the moment a data source starts (the timer is re-armed
	 * then).  Until then it is a bound on the whole wait: the session only
	 * starts once every data source of the config registered, or after
	 * REGISTER_TIMEOUT_US if one never does, and that wait must not eat the
	 * recording.
	 */
	if (r >= 0 && rec.duration_ms)
		r = loop_add_time_relative(rec.event, &rec.duration_timer, CLOCK_MONOTONIC,
					   rec.duration_ms * 1000 + REGISTER_TIMEOUT_US, 0,
					   on_duration, &rec);
	if (r >= 0 && status)
		r = loop_add_time_relative(rec.event, &rec.status_timer, CLOCK_MONOTONIC,
					   STATUS_PERIOD_US, 0, on_status, &rec);
	if (r >= 0)
		r = ds_shared_new_all(rec.event, &rec.shared);
	if (r >= 0) {
		const struct producer_hooks hooks = {
			.disconnected = on_producer_disconnected,
			.ds_stopped = on_ds_stopped,
			.ds_started = on_ds_started,
		};
		r = producer_new(rec.event, ds_registry, rec.shared, &hooks, &rec, &rec.producer);
	}
	/* stop before the last read, so the end-of-trace counts are exact */
	if (r >= 0)
		producer_set_final_flush(rec.producer, true);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the recorder: %m");
		goto out;
	}
	r = pthread_create(&rec.svc_thread, NULL, svc_thread_main, &rec);
	if (r != 0) {
		r = log_error_errno(-r, "Failed to start the service thread: %m");
		goto out;
	}
	rec.svc_thread_started = true;
	r = producer_adopt_fd(rec.producer, TAKE_FD(sv[0]));
	if (r < 0) {
		log_error_errno(r, "Failed to connect to the in-process service: %m");
		request_stop(&rec);
	}
	if (!o->quiet && rec.duration_ms)
		fprintf(stderr, "Recording for %.1f s into %s (Ctrl-C to stop early)...\n",
			(double)rec.duration_ms / 1000.0, o->output);
	else if (!o->quiet)
		fprintf(stderr, "Recording into %s until Ctrl-C...\n", o->output);
	rec.start_ns = now_ns(CLOCK_MONOTONIC);
	r = loop_run(rec.event);
	rec.end_ns = now_ns(CLOCK_MONOTONIC);
	status_erase(&rec);
	if (r < 0)
		log_error_errno(r, "Event loop failed: %m");
	/* the service thread ends on its own once the session is done */
	if (rec.session_error == -EINTR)
		request_stop(&rec);
	(void)pthread_join(rec.svc_thread, NULL);
	rec.svc_thread_started = false;
	rec.producer = producer_free(rec.producer);
	rec.shared = ds_shared_free_all(rec.shared);

	/* a data source asked for and not set up makes a trace that misleads */
	for (size_t i = 0; i < rec.n_reports && rec.session_error >= 0; i++)
		if (rec.reports[i].failed) {
			log_error("%s could not be set up (see above)", rec.reports[i].name);
			rec.session_error = -ENODATA;
		}
	/* --previous-boot asked for one thing: a buffer with nothing in it saved nothing */
	for (size_t i = 0; o->previous_boot && i < rec.n_reports && rec.session_error >= 0; i++)
		if (!strcmp(rec.reports[i].name, "linux.frozen_ftrace") && rec.reports[i].events == 0) {
			log_error("Instance '%s' held no event of a previous boot", o->previous_boot);
			rec.session_error = -ENODATA;
		}
	/*
	 * A stop (Ctrl-C, SIGTERM, -t) before any data source started leaves a
	 * file with no data in it: say so rather than write it.
	 */
	if ((rec.session_error >= 0 || rec.session_error == -ECANCELED) && !rec.tracing_ns) {
		log_error("%s before any data source started: nothing was recorded; no trace was written",
			  rec.stop_requests ? "Stopped" : "Ended");
		r = -ENODATA;
		(void)finish_output(&rec, false);
		goto out;
	}
	if (rec.session_error < 0) {
		r = rec.session_error;
		if (r == -ENODATA)
			log_error("Nothing usable was recorded: no trace was written");
		else if (r == -EINTR)
			log_error("Aborted by a second Ctrl-C or SIGTERM: no trace was written");
		else
			log_error_errno(r, "The recording failed: %m; no trace was written");
		(void)finish_output(&rec, false);
		goto out;
	}
	if (fstat(rec.out_fd, &st) < 0)
		st.st_size = 0;
	r = finish_output(&rec, true);
	if (r < 0) {
		log_error_errno(r, "Failed to write '%s': %m", o->output);
		goto out;
	}
	if (!o->quiet)
		print_summary(&rec, (uint64_t)st.st_size);
	r = 0;
out:
	if (rec.svc_thread_started) {
		request_stop(&rec);
		(void)pthread_join(rec.svc_thread, NULL);
	}
	if (rec.out_fd >= 0)
		(void)finish_output(&rec, false);
	rec.producer = producer_free(rec.producer);
	rec.shared = ds_shared_free_all(rec.shared);
	for (size_t i = 0; i < rec.n_reports; i++)
		ds_report_done(&rec.reports[i]);
	rec.duration_timer = loop_source_disable_unref(rec.duration_timer);
	rec.status_timer = loop_source_disable_unref(rec.status_timer);
	sig_int = loop_source_disable_unref(sig_int);
	sig_term = loop_source_disable_unref(sig_term);
	done_src = loop_source_disable_unref(done_src);
	rec.event = loop_unref(rec.event);
	if (sv[0] >= 0)
		(void)close(sv[0]);
	if (rec.svc_sock >= 0)
		(void)close(rec.svc_sock);
	if (rec.stop_efd >= 0)
		(void)close(rec.stop_efd);
	if (rec.done_efd >= 0)
		(void)close(rec.done_efd);
	free(rec.tmp_path);
	if (rec.cfg)
		protobuf_c_message_free_unpacked(&rec.cfg->base, NULL);
	return r;
}
