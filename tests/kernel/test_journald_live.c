/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linux.systemd_journald end to end, against a real systemd-journald: a
 * session of the in-process service with the producer over a socketpair,
 * lines written to the journal while it runs with systemd-cat (transport
 * "stdout") and `logger --journald` (transport "journal"), at several
 * priorities and identifiers, each with a nonce of its own.  The session
 * ends once journalctl shows every line and the data source reports having
 * written what passes its filters; the trace must then hold exactly the
 * lines that pass (priority, tag, message, pid, uid, gid, hostname,
 * transport, and the unit where one is asked for), each once, on the
 * monotonic clock, between the first write and journalctl seeing the last,
 * in order; nothing written before the session started, and a counts packet
 * whose num_total is the number of entries written and num_failed 0.
 *
 *  - filters: min_prio 4 and two identifiers; a third identifier and the
 *    priorities 5 and 6 are written too, and a line that would pass, before
 *    the start (the data source starts at the journal's tail: its last
 *    matching entry is that line);
 *  - tail: no entry matches the filters before the start, so the start
 *    finds no last match to read on from (left at the tail, sd-journal 252
 *    skipped new entries; the data source now reads on from the head);
 *  - units: filter_units, with lines from a cgroup of a unit's name (below).
 *
 * _SYSTEMD_UNIT is a trusted field: journald derives it from the sender's
 * cgroup path and drops one a client sends (logger --journald with a
 * "_SYSTEMD_UNIT=" line gets none).  Without systemd as PID 1 the path is
 * all it looks at, so a cgroup named "<unit>.service" at the root of the
 * cgroup2 hierarchy journald reads (/sys/fs/cgroup, or /sys/fs/cgroup/unified
 * on a hybrid layout, found the way systemd finds it) makes its processes
 * that unit's.  Where no such cgroup can be made, the unit case checks that
 * the filter lets none of its lines through.
 *
 * The journal: the running journald if its socket takes a connection,
 * otherwise /lib/systemd/systemd-journald started here (it keeps a runtime
 * journal under /run/log/journal), stopped at the end, from an atexit()
 * handler and on SIGTERM/SIGINT/SIGHUP too, and only the directories it
 * made are removed; after a SIGKILL, journald dies with this process
 * (PR_SET_PDEATHSIG) and the directories stay.
 * No systemd-journald at all: SKIP (77).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loop/loop.h"
#include "probes/ds/ds.h"
#include "probes/journald/journald.h"
#include "probes/producer.h"
#include "protos/pbtxt.h"
#include "service/service.h"
#include "tests/lib/tp_kernel.h"
#include "tests/lib/tp_trace.h"
#include "util/util.h"

#define JOURNALD_BIN "/lib/systemd/systemd-journald"
#define JOURNAL_SOCKET "/run/systemd/journal/socket"
#define DS_JOURNALD "linux.systemd_journald"
#define TICK_USEC (20 * 1000ull)
#define CGROUP2_SUPER_MAGIC 0x63677270
/* Perfetto's builtin clocks */
#define CLOCK_ID_MONOTONIC 3u
#define CLOCK_ID_BOOTTIME 6u

static char tmpdir[] = "/tmp/tp-journald-XXXXXX";
static char hostname[256];
/* the unit of the units case: "tp-journald-<pid>.service" */
static char unit_name[64];

/* ---- the journal: the running one, or a journald of our own ---------------- */

/*
 * What journal_prepare(), journal_start() and the cases made, for
 * journal_down(): read from a signal handler too, so the removal there
 * forks rm rather than walking directories.
 */
static struct {
	pid_t pid;                   /* our journald, 0 if none */
	int log_fd;                  /* its stdout and stderr (a memfd) */
	const char *made[4];         /* directories it made, outermost first */
	size_t n_made;
	char cgroup[256];            /* the unit's cgroup, "" if none was made */
	pid_t writers[64];           /* writer processes not yet reaped */
	pid_t test_pid;              /* this process, not a child between fork and exec */
} env = { .log_fd = -1 };

static bool journal_socket_live(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = JOURNAL_SOCKET };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	/* a socket file left by a dead journald refuses (ECONNREFUSED) */
	ok = connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* rm -rf @path, with calls a signal handler may make. */
static void remove_tree(const char *path)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/rm", "rm", "-rf", "--", path, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
}

/* Writers a failed case left behind; safe from a signal handler (kill, waitpid). */
static void kill_writers(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(env.writers); i++)
		if (env.writers[i] > 0) {
			(void)kill(env.writers[i], SIGKILL);
			(void)waitpid(env.writers[i], NULL, 0);
			env.writers[i] = 0;
		}
}

/* Idempotent, and safe from a signal handler (kill, waitpid, rmdir, fork, exec). */
static void journal_down(void)
{
	kill_writers();
	if (env.cgroup[0]) {
		(void)rmdir(env.cgroup);
		env.cgroup[0] = 0;
	}
	if (env.pid > 0) {
		struct timespec pause = { .tv_nsec = 10 * 1000 * 1000 };
		int tries = 0;

		/* journald syncs and exits on SIGTERM; one that hangs is killed */
		(void)kill(env.pid, SIGTERM);
		while (waitpid(env.pid, NULL, WNOHANG) == 0) {
			if (++tries == 1000)
				(void)kill(env.pid, SIGKILL);
			(void)nanosleep(&pause, NULL);
		}
		env.pid = 0;
	}
	while (env.n_made > 0)
		remove_tree(env.made[--env.n_made]);
}

static void on_fatal_signal(int sig)
{
	if (getpid() != env.test_pid)
		_exit(128 + sig);
	journal_down();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_fatal_signals(void)
{
	static const int fatal[] = { SIGTERM, SIGINT, SIGHUP };

	for (size_t i = 0; i < ARRAY_SIZE(fatal); i++)
		signal(fatal[i], on_fatal_signal);
}

/* mkdir @path, remembered for journal_down() if it is new.  0 or -errno. */
static int make_dir(const char *path)
{
	if (mkdir(path, 0755) == 0) {
		env.made[env.n_made++] = path;
		return 0;
	}
	return errno == EEXIST ? 0 : negative_errno();
}

/* A directory journald makes itself, remembered if it is not there yet. */
static void will_make(const char *path)
{
	if (access(path, F_OK) < 0)
		env.made[env.n_made++] = path;
}

static void track_writer(pid_t pid)
{
	for (size_t i = 0; i < ARRAY_SIZE(env.writers); i++)
		if (env.writers[i] == 0) {
			env.writers[i] = pid;
			return;
		}
	ck_abort_msg("more than %zu writers at once", ARRAY_SIZE(env.writers));
}

/* Waits for writer @pid and returns its exit status. */
static int reap_writer(pid_t pid, const char *what)
{
	for (size_t i = 0; i < ARRAY_SIZE(env.writers); i++)
		if (env.writers[i] == pid)
			env.writers[i] = 0;
	return tp_assert_exit(NULL, pid, what);
}

/*
 * One journal line, and how it was written.  @pass is what the filters
 * must do with it (for a unit line, once journalctl said whether journald
 * put it in the unit).
 */
enum via { VIA_CAT, VIA_LOGGER };

struct jline {
	const char *tag;
	unsigned prio;
	enum via via;
	bool in_unit;       /* written from the unit's cgroup */
	bool fake_unit;     /* logger sends "_SYSTEMD_UNIT=<unit>" itself */
	bool before;        /* written before the session started */
	bool pass;
	/* the run's */
	char msg[128];
	pid_t pid;          /* the writer: journald's _PID */
	bool reaped;
	int fd;             /* VIA_CAT: its stdin, kept open until the journal has the line */
	bool in_journal;    /* journalctl shows it */
	bool in_unit_journal;   /* ... under _SYSTEMD_UNIT=<unit> */
};

/* Writes @l to the journal from a child (systemd-cat or logger); returns at once. */
static void write_line(struct jline *l, const char *cgroup)
{
	static uint64_t serial;
	int p[2];
	uint64_t nonce = 0;
	pid_t pid;

	ck_assert_int_eq(getrandom(&nonce, sizeof(nonce), 0), (ssize_t)sizeof(nonce));
	snprintf(l->msg, sizeof(l->msg), "tp-journald line %" PRIu64 " prio %u nonce %016" PRIx64, ++serial,
		 l->prio, nonce);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char prio[4];

		if (l->in_unit && cgroup) {
			char procs[300], self[16];
			int fd;

			snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
			snprintf(self, sizeof(self), "%d\n", (int)getpid());
			fd = open(procs, O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, self, strlen(self)) != (ssize_t)strlen(self))
				_exit(125);
			close(fd);
		}
		if (dup2(p[0], STDIN_FILENO) < 0)
			_exit(126);
		snprintf(prio, sizeof(prio), "%u", l->prio);
		if (l->via == VIA_CAT)
			/* no command: it runs cat with its output on a journal stream */
			execlp("systemd-cat", "systemd-cat", "-t", l->tag, "-p", prio, (char *)NULL);
		else
			execlp("logger", "logger", "--journald", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	track_writer(pid);
	l->pid = pid;
	l->fd = p[1];
	if (l->via == VIA_CAT) {
		_cleanup_free_ char *text = strdup_printf("%s\n", l->msg);

		ck_assert_int_eq(write_all(l->fd, text, strlen(text)), 0);
	} else {
		_cleanup_free_ char *text = strdup_printf(
			"MESSAGE=%s\nPRIORITY=%u\nSYSLOG_IDENTIFIER=%s\n%s%s%s", l->msg, l->prio, l->tag,
			l->fake_unit ? "_SYSTEMD_UNIT=" : "", l->fake_unit ? unit_name : "",
			l->fake_unit ? "\n" : "");

		/* logger sends once its input ends */
		ck_assert_int_eq(write_all(l->fd, text, strlen(text)), 0);
		close(l->fd);
		l->fd = -1;
	}
}

/* Lets a systemd-cat writer end (its cat reads end of file) and reaps it. */
static void finish_line(struct jline *l)
{
	int status;

	if (l->fd >= 0) {
		close(l->fd);
		l->fd = -1;
	}
	if (l->pid <= 0 || l->reaped)
		return;
	status = reap_writer(l->pid, l->via == VIA_CAT ? "systemd-cat" : "logger --journald");
	ck_assert_msg(status == 0, "%s for \"%s\" exited with status %d",
		      l->via == VIA_CAT ? "systemd-cat" : "logger --journald", l->msg, status);
	l->reaped = true;
}

/*
 * journalctl's MESSAGEs for @args (matches): marks each line of @lines it
 * shows, in_unit_journal if @unit, else in_journal.  Returns how many are
 * marked.
 */
static size_t journal_mark(const char *args, struct jline *lines, size_t n, bool unit)
{
	_cleanup_free_ char *cmd = strdup_printf("journalctl --no-pager -q -o cat %s 2>/dev/null", args);
	_cleanup_free_ char *buf = NULL;
	size_t cap = 0, marked = 0;
	FILE *f;

	ck_assert_ptr_nonnull(cmd);
	f = popen(cmd, "re");
	ck_assert_ptr_nonnull(f);
	while (getline(&buf, &cap, f) > 0) {
		buf[strcspn(buf, "\n")] = 0;
		for (size_t i = 0; i < n; i++)
			if (lines[i].msg[0] && strcmp(buf, lines[i].msg) == 0)
				*(unit ? &lines[i].in_unit_journal : &lines[i].in_journal) = true;
	}
	(void)pclose(f);
	for (size_t i = 0; i < n; i++)
		marked += unit ? lines[i].in_unit_journal : lines[i].in_journal;
	return marked;
}

static size_t journal_has_tagged(struct jline *lines, size_t n)
{
	char args[512] = "";
	size_t len = 0;

	/* -t repeated: any of the tags */
	for (size_t i = 0; i < n; i++) {
		bool dup = false;

		for (size_t k = 0; k < i; k++)
			dup |= strcmp(lines[k].tag, lines[i].tag) == 0;
		if (!dup)
			len += (size_t)snprintf(args + len, sizeof(args) - len, " -t %s", lines[i].tag);
		ck_assert_uint_lt(len, sizeof(args));
	}
	return journal_mark(args, lines, n, /* unit= */ false);
}

/* Waits until the journal shows @l (journald is watched when it is ours). */
static bool line_in_journal(void *arg)
{
	return journal_has_tagged(arg, 1) == 1;
}

static void wait_in_journal(struct jline *l)
{
	struct tp_watch w = {};

	if (env.pid > 0)
		tp_watch_add(&w, "systemd-journald", env.pid);
	tp_assert_wait(&w, line_in_journal, l, "the journal shows a line written before the session");
	finish_line(l);
}

static void print_journald_log(void)
{
	char buf[4096];
	ssize_t n;

	if (env.log_fd < 0 || lseek(env.log_fd, 0, SEEK_SET) < 0)
		return;
	while ((n = read(env.log_fd, buf, sizeof(buf))) > 0)
		(void)!write(STDERR_FILENO, buf, (size_t)n);
}

struct ready {
	struct jline line;
	bool written;
};

/* The socket takes a connection and journalctl shows a line written to it. */
static bool journal_ready(void *arg)
{
	struct ready *r = arg;

	if (!journal_socket_live())
		return false;
	if (!r->written) {
		write_line(&r->line, NULL);
		r->written = true;
	}
	return journal_has_tagged(&r->line, 1) == 1;
}

/*
 * Before the suite, with no Check assertion: is there a journal, or a
 * journald to start and the directories it needs?  Returns: 1 to start
 * our own (journal_start()), 0 to use the running one, -errno for SKIP
 * with @why.
 */
static int journal_prepare(char *why, size_t len)
{
	int r;

	if (journal_socket_live()) {
		fprintf(stderr, "using the running journald (%s)\n", JOURNAL_SOCKET);
		return 0;
	}
	if (access(JOURNALD_BIN, X_OK) < 0) {
		snprintf(why, len, "no journald is running and there is no %s to start", JOURNALD_BIN);
		return -ENOENT;
	}
	r = make_dir("/run/systemd");
	if (r >= 0)
		r = make_dir("/run/systemd/journal");
	if (r < 0) {
		snprintf(why, len, "cannot make /run/systemd/journal for a journald: %s", strerror(-r));
		return r;
	}
	if (access("/run/log", F_OK) < 0)
		will_make("/run/log");
	else
		will_make("/run/log/journal");
	return 1;
}

static bool own_journald;

/*
 * The suite's unchecked setup: our journald, if one is needed, up once its
 * socket takes a connection and journalctl shows a line written to it; the
 * running one is checked the same way.
 */
static void journal_start(void)
{
	char ready_tag[32];
	struct ready ready = { .line = { .tag = ready_tag, .prio = 6, .via = VIA_LOGGER, .fd = -1 } };
	struct tp_watch w = {};
	char why[256];

	/*
	 * The suite runner has put in handlers of its own for SIGTERM and
	 * SIGINT, which signal the whole process group (SIGINT as SIGKILL, and
	 * nothing is removed then): ours again, for the time the cases run.
	 */
	catch_fatal_signals();
	snprintf(ready_tag, sizeof(ready_tag), "tp-jd-ready-%d", (int)getpid());
	if (own_journald && env.pid == 0) {
		env.log_fd = memfd_create("journald-log", MFD_CLOEXEC);
		ck_assert_int_ge(env.log_fd, 0);
		env.pid = fork();
		ck_assert_int_ge(env.pid, 0);
		if (env.pid == 0) {
			int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

			/* gone with this process, even if it is killed */
			(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(env.log_fd, STDOUT_FILENO) < 0 ||
			    dup2(env.log_fd, STDERR_FILENO) < 0)
				_exit(126);
			execl(JOURNALD_BIN, "systemd-journald", (char *)NULL);
			_exit(127);
		}
		fprintf(stderr, "started %s (pid %d)\n", JOURNALD_BIN, (int)env.pid);
	}
	if (env.pid > 0)
		tp_watch_add(&w, "systemd-journald", env.pid);
	if (tp_wait_until_or_exit(journal_ready, &ready, &w, TP_WAIT_HANG_MS, why, sizeof(why)) < 0) {
		print_journald_log();
		ck_abort_msg("no journal to write to: %s", why);
	}
	finish_line(&ready.line);
}

/* ---- the unit's cgroup --------------------------------------------------------- */

/*
 * The cgroup2 hierarchy journald reads units from, as systemd finds it:
 * /sys/fs/cgroup itself, or /sys/fs/cgroup/unified beside v1 controllers.
 */
static const char *cgroup2_root(void)
{
	static const char *const roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	struct statfs fs;

	for (size_t i = 0; i < ARRAY_SIZE(roots); i++)
		if (statfs(roots[i], &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC)
			return roots[i];
	return NULL;
}

/* Makes <root>/<unit>; true if it can be used, else @why says why not. */
static bool cgroup_up(char *why, size_t len)
{
	const char *root = cgroup2_root();

	if (!root) {
		snprintf(why, len, "no cgroup2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified");
		return false;
	}
	snprintf(env.cgroup, sizeof(env.cgroup), "%s/%s", root, unit_name);
	if (mkdir(env.cgroup, 0755) < 0 && errno != EEXIST) {
		snprintf(why, len, "cannot make %.180s: %s", env.cgroup, strerror(errno));
		env.cgroup[0] = 0;
		return false;
	}
	return true;
}

static void cgroup_down(void)
{
	if (env.cgroup[0] && rmdir(env.cgroup) < 0)
		fprintf(stderr, "cannot remove %s: %s\n", env.cgroup, strerror(errno));
	env.cgroup[0] = 0;
}

/* ---- one session ----------------------------------------------------------------- */

enum phase {
	PHASE_REGISTER,     /* the producer registers its data source */
	PHASE_START,        /* the session starts */
	PHASE_JOURNAL,      /* the lines are written: until journalctl shows them all */
	PHASE_READ,         /* until the data source reports what passes */
	PHASE_STOP,         /* until the session is done */
	_PHASE_MAX,
};

static const char *const phase_what[_PHASE_MAX] = {
	[PHASE_REGISTER] = "the producer registering " DS_JOURNALD,
	[PHASE_START] = "the data source starting",
	[PHASE_JOURNAL] = "journalctl showing every line",
	[PHASE_READ] = "the data source writing the lines that pass",
	[PHASE_STOP] = "the session stopping",
};

struct jcase {
	const char *name;
	const char *journald_config;     /* the body of journald_config { } */
	struct jline *lines;
	size_t n;
	bool units;                      /* in_unit lines pass if journald put them in the unit */
	const char *cgroup;              /* the unit's cgroup, or NULL */
};

struct run {
	struct jcase *c;
	struct loop *e;
	struct svc *svc;
	struct producer *p;
	struct svc_session *ss;
	Perfetto__Protos__TraceConfig *cfg;
	int out_fd;
	enum phase phase;
	uint64_t phase_at;               /* CLOCK_MONOTONIC ns */
	bool all_started, done;
	int done_error;
	size_t n_pass;
	uint64_t written_at, seen_at;    /* CLOCK_MONOTONIC ns */
	uint64_t live_events;            /* the data source's report while it runs */
	uint64_t stopped_events;         /* ... and when it stopped */
	bool stopped;
};

static void on_all_started(struct svc_session *ss, void *userdata)
{
	((struct run *)userdata)->all_started = true;
}

static void on_done(struct svc_session *ss, int error, void *userdata)
{
	struct run *t = userdata;

	t->done = true;
	t->done_error = error;
	(void)loop_exit(t->e, 0);
}

static void on_ds_stopped(struct producer *p, const struct ds_report *r, void *userdata)
{
	struct run *t = userdata;

	if (r->name && strcmp(r->name, DS_JOURNALD) == 0) {
		t->stopped = true;
		t->stopped_events = r->events;
	}
}

static void on_live_report(const struct ds_report *r, void *userdata)
{
	struct run *t = userdata;

	if (r->name && strcmp(r->name, DS_JOURNALD) == 0)
		t->live_events = r->events;
}

static void enter(struct run *t, enum phase phase)
{
	t->phase = phase;
	t->phase_at = now_ns(CLOCK_MONOTONIC);
}

static void fail_hung(struct run *t)
{
	char missing[1024] = "";
	size_t len = 0;

	for (size_t i = 0; i < t->c->n; i++)
		if (!t->c->lines[i].before && !t->c->lines[i].in_journal && len < sizeof(missing))
			len += (size_t)snprintf(missing + len, sizeof(missing) - len, " [%s: %s]",
						t->c->lines[i].tag, t->c->lines[i].msg);
	ck_abort_msg("%s: waited %u s for %s (the data source wrote %" PRIu64 " of %zu lines; not in the "
		     "journal:%s)", t->c->name, TP_WAIT_HANG_MS / 1000, phase_what[t->phase], t->live_events,
		     t->n_pass, len ? missing : " none");
}

/* What the filters must let through, once the journal holds every line. */
static void decide(struct run *t)
{
	struct jcase *c = t->c;
	char args[128];

	if (c->units) {
		snprintf(args, sizeof(args), "_SYSTEMD_UNIT=%s", unit_name);
		(void)journal_mark(args, c->lines, c->n, /* unit= */ true);
	}
	t->n_pass = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct jline *l = &c->lines[i];

		if (c->units) {
			/*
			 * A process that lives until the journal has its line is
			 * always resolved to its cgroup's unit; a claimed unit never
			 * is.  Only what journald stored can pass.
			 */
			if (l->in_unit && c->cgroup)
				ck_assert_msg(l->in_unit_journal, "%s: journald did not put the line of a "
					      "process in %s in unit %s", c->name, c->cgroup, unit_name);
			ck_assert_msg(!l->fake_unit || !l->in_unit_journal,
				      "%s: journald took the _SYSTEMD_UNIT a client sent", c->name);
			l->pass = l->in_unit_journal;
		}
		if (l->before)
			l->pass = false;
		t->n_pass += l->pass;
	}
}

static int tick(struct loop_source *src, uint64_t usec, void *userdata)
{
	const struct svc_session_hooks hooks = { .done = on_done, .all_started = on_all_started };
	struct run *t = userdata;
	struct jcase *c = t->c;

	if (t->done)
		return 0;
	if (now_ns(CLOCK_MONOTONIC) - t->phase_at > TP_WAIT_HANG_MS * 1000000ull)
		fail_hung(t);
	switch (t->phase) {
	case PHASE_REGISTER:
		if (svc_data_source_registered(t->svc, DS_JOURNALD)) {
			enter(t, PHASE_START);
			ck_assert_int_ge(svc_session_start(t->svc, t->cfg, t->out_fd, &hooks, t, &t->ss), 0);
		}
		break;
	case PHASE_START:
		if (!t->all_started)
			break;
		/* the data source is at the journal's tail: write */
		t->written_at = now_ns(CLOCK_MONOTONIC);
		for (size_t i = 0; i < c->n; i++)
			if (!c->lines[i].before)
				write_line(&c->lines[i], c->cgroup);
		enter(t, PHASE_JOURNAL);
		break;
	case PHASE_JOURNAL:
		if (journal_has_tagged(c->lines, c->n) < c->n)
			break;
		t->seen_at = now_ns(CLOCK_MONOTONIC);
		decide(t);
		for (size_t i = 0; i < c->n; i++)
			finish_line(&c->lines[i]);
		enter(t, PHASE_READ);
		/* fall through */
	case PHASE_READ:
		(void)producer_report_live(t->p, on_live_report, t);
		if (t->live_events < t->n_pass)
			break;
		enter(t, PHASE_STOP);
		ck_assert_int_ge(svc_session_stop(t->ss), 0);
		break;
	case PHASE_STOP:
	case _PHASE_MAX:
		break;
	}
	ck_assert_int_ge(loop_source_set_time(src, usec + TICK_USEC), 0);
	ck_assert_int_ge(loop_source_set_enabled(src, LOOP_ONESHOT), 0);
	return 0;
}

static Perfetto__Protos__TraceConfig *make_config(const char *journald_config)
{
	_cleanup_free_ char *text = strdup_printf(
		"buffers { size_kb: 4096 fill_policy: DISCARD }\n"
		"data_sources { config { name: \"" DS_JOURNALD "\" target_buffer: 0\n"
		"  journald_config { %s } } }\n"
		"duration_ms: 3600000\n",
		journald_config);
	ProtobufCMessage *m = NULL;
	char err[256];

	ck_assert_ptr_nonnull(text);
	ck_assert_msg(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), &m, err,
				  sizeof(err)) == 0, "config: %s", err);
	return (Perfetto__Protos__TraceConfig *)m;
}

/* Runs @c's session into @out; the lines marked before are written first. */
static void run_session(struct jcase *c, struct run *t, const char *out)
{
	static const struct ds_ops *const kinds[] = { &journald_ds_ops, NULL };
	const struct producer_hooks ph = { .ds_stopped = on_ds_stopped };
	struct loop_source *ticker = NULL;
	struct svc_session_stats st;
	int sv[2];

	memset(t, 0, sizeof(*t));
	t->c = c;
	for (size_t i = 0; i < c->n; i++) {
		c->lines[i].fd = -1;
		if (c->lines[i].before) {
			write_line(&c->lines[i], c->cgroup);
			wait_in_journal(&c->lines[i]);
		}
	}
	t->cfg = make_config(c->journald_config);
	t->out_fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(t->out_fd, 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_ge(loop_new(&t->e), 0);
	ck_assert_int_ge(svc_new(t->e, NULL, &t->svc), 0);
	ck_assert_int_ge(svc_adopt_connection(t->svc, sv[1]), 0);
	ck_assert_int_ge(producer_new(t->e, kinds, NULL, &ph, t, &t->p), 0);
	ck_assert_int_ge(producer_adopt_fd(t->p, sv[0]), 0);
	enter(t, PHASE_REGISTER);
	ck_assert_int_ge(loop_add_time_relative(t->e, &ticker, CLOCK_MONOTONIC, TICK_USEC, 0, tick, t), 0);
	ck_assert_int_ge(loop_run(t->e), 0);
	ck_assert(t->done);
	ck_assert_int_eq(t->done_error, 0);
	ck_assert_int_eq(svc_session_get_stats(t->ss, &st), 0);
	ck_assert_uint_eq(st.flushes_timed_out, 0);
	ck_assert_uint_eq(st.invalid_packets, 0);
	ck_assert(t->stopped);

	ticker = loop_source_disable_unref(ticker);
	t->ss = svc_session_free(t->ss);
	t->p = producer_free(t->p);
	t->svc = svc_free(t->svc);
	t->e = loop_unref(t->e);
	close(t->out_fd);
	protobuf_c_message_free_unpacked(&t->cfg->base, NULL);
}

/* ---- what the trace must hold ----------------------------------------------------- */

static void check_entry(const struct jcase *c, const struct run *t, const Perfetto__Protos__TracePacket *p,
			unsigned *seen)
{
	const Perfetto__Protos__SystemdJournaldEvent *ev = p->journald_event;
	const struct jline *l = NULL;
	size_t i;

	for (i = 0; i < c->n; i++)
		if (ev->message && strcmp(ev->message, c->lines[i].msg) == 0) {
			l = &c->lines[i];
			break;
		}
	ck_assert_msg(l, "%s: an entry no line of the test wrote: tag %s, prio %u, message \"%s\"", c->name,
		      ev->tag ? ev->tag : "(none)", ev->prio, ev->message ? ev->message : "(none)");
	ck_assert_msg(!l->before, "%s: a line written before the session started: %s", c->name, l->msg);
	ck_assert_msg(l->pass, "%s: a line the filters refuse: tag %s, prio %u, %s", c->name, l->tag, l->prio,
		      l->msg);
	seen[i]++;

	ck_assert(p->has_timestamp && p->has_timestamp_clock_id);
	ck_assert_uint_eq(p->timestamp_clock_id, CLOCK_ID_MONOTONIC);
	/* journald's time is in us: the first write's, rounded down, is the floor */
	ck_assert_msg(p->timestamp >= t->written_at / 1000 * 1000 && p->timestamp <= t->seen_at,
		      "%s: \"%s\" at %" PRIu64 " ns, outside [%" PRIu64 ", %" PRIu64 "] (CLOCK_MONOTONIC)",
		      c->name, l->msg, p->timestamp, t->written_at, t->seen_at);
	ck_assert(ev->has_prio);
	ck_assert_uint_eq(ev->prio, l->prio);
	ck_assert_str_eq(ev->tag, l->tag);
	ck_assert(ev->has_pid);
	ck_assert_int_eq((pid_t)ev->pid, l->pid);
	ck_assert(ev->has_uid && ev->has_gid);
	ck_assert_uint_eq(ev->uid, getuid());
	ck_assert_uint_eq(ev->gid, getgid());
	ck_assert_ptr_nonnull(ev->transport);
	ck_assert_str_eq(ev->transport, l->via == VIA_CAT ? "stdout" : "journal");
	ck_assert_ptr_nonnull(ev->hostname);
	ck_assert_str_eq(ev->hostname, hostname);
	if (c->units) {
		ck_assert_ptr_nonnull(ev->systemd_unit);
		ck_assert_str_eq(ev->systemd_unit, unit_name);
	}
	ck_assert(!ev->has_num_total && !ev->has_num_failed);
}

static void check_trace(const struct jcase *c, const struct run *t, const char *path)
{
	unsigned seen[16] = {};
	struct tp_trace_summary s;
	uint64_t entries = 0, counts = 0, last_ts = 0, total = 0;

	ck_assert_uint_le(c->n, ARRAY_SIZE(seen));
	ck_assert_int_eq(tp_trace_load(path, &s), 0);
	for (size_t i = 0; i < s.trace->n_packet; i++) {
		const Perfetto__Protos__TracePacket *p = s.trace->packet[i];
		const Perfetto__Protos__SystemdJournaldEvent *ev;

		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_JOURNALD_EVENT)
			continue;
		ev = p->journald_event;
		if (ev->has_num_total) {
			/* a flush's counts: the entries written so far, on the boot clock */
			ck_assert(!ev->message && !ev->tag && !ev->has_pid);
			ck_assert(p->has_timestamp_clock_id);
			ck_assert_uint_eq(p->timestamp_clock_id, CLOCK_ID_BOOTTIME);
			ck_assert_msg(ev->num_total >= total, "num_total went back from %" PRIu64
				      " to %" PRIu64, total, ev->num_total);
			ck_assert_msg(ev->num_total <= entries, "num_total %" PRIu64 " with %" PRIu64
				      " entries before it", ev->num_total, entries);
			ck_assert(ev->has_num_failed);
			ck_assert_uint_eq(ev->num_failed, 0);
			total = ev->num_total;
			counts++;
			continue;
		}
		check_entry(c, t, p, seen);
		ck_assert_msg(p->timestamp >= last_ts, "%s: entries out of time order", c->name);
		last_ts = p->timestamp;
		entries++;
	}
	for (size_t i = 0; i < c->n; i++)
		ck_assert_msg(seen[i] == (c->lines[i].pass ? 1u : 0u),
			      "%s: \"%s\" (tag %s, prio %u) is in the trace %u times", c->name,
			      c->lines[i].msg, c->lines[i].tag, c->lines[i].prio, seen[i]);
	ck_assert_uint_eq(entries, t->n_pass);
	/* the last flush (the trace-stop one) read everything first */
	ck_assert_uint_ge(counts, 1);
	ck_assert_uint_eq(total, entries);
	ck_assert_uint_eq(t->stopped_events, entries);
	fprintf(stderr, "%s: %" PRIu64 " of %zu lines in the trace, %" PRIu64 " counts packets\n", c->name,
		entries, c->n, counts);
	tp_trace_free(&s);
}

static void run_case(struct jcase *c)
{
	char out[600];
	struct run t;

	snprintf(out, sizeof(out), "%s/%s.pftrace", tmpdir, c->name);
	run_session(c, &t, out);
	check_trace(c, &t, out);
}

/* ---- the cases ---------------------------------------------------------------------- */

static char tag_a[32], tag_b[32], tag_x[32], tag_t[32], tag_u[32];

static void setup(void)
{
	int pid = (int)getpid();

	snprintf(tag_a, sizeof(tag_a), "tp-jd-a-%d", pid);
	snprintf(tag_b, sizeof(tag_b), "tp-jd-b-%d", pid);
	snprintf(tag_x, sizeof(tag_x), "tp-jd-x-%d", pid);
	snprintf(tag_t, sizeof(tag_t), "tp-jd-t-%d", pid);
	snprintf(tag_u, sizeof(tag_u), "tp-jd-u-%d", pid);
	snprintf(unit_name, sizeof(unit_name), "tp-journald-%d.service", pid);
}

static void teardown(void)
{
	/* writers a failed case left behind, then the cgroup they were in */
	kill_writers();
	cgroup_down();
}

/*
 * Priorities 3 to 6 only: journald syncs its files to disk at once after a
 * line of priority crit (2), alert or emerg, and on a loaded machine that
 * held it up for minutes (emerg also goes to every terminal).
 */
START_TEST(test_filters)
{
	char cfg[256];
	struct jline lines[] = {
		/* passes, but was written before the start */
		{ .tag = tag_a, .prio = 3, .via = VIA_LOGGER, .before = true, .pass = true },
		{ .tag = tag_a, .prio = 4, .via = VIA_CAT, .pass = true },      /* min_prio itself */
		{ .tag = tag_a, .prio = 3, .via = VIA_LOGGER, .pass = true },
		{ .tag = tag_b, .prio = 3, .via = VIA_CAT, .pass = true },
		{ .tag = tag_b, .prio = 4, .via = VIA_LOGGER, .pass = true },
		{ .tag = tag_a, .prio = 5, .via = VIA_CAT },                   /* priority */
		{ .tag = tag_b, .prio = 6, .via = VIA_LOGGER },                /* priority */
		{ .tag = tag_x, .prio = 3, .via = VIA_CAT },                   /* identifier */
		{ .tag = tag_x, .prio = 4, .via = VIA_LOGGER },                /* identifier */
	};
	struct jcase c = { .name = "filters", .journald_config = cfg, .lines = lines,
			   .n = ARRAY_SIZE(lines) };

	snprintf(cfg, sizeof(cfg), "min_prio: 4 filter_identifiers: \"%s\" filter_identifiers: \"%s\"", tag_a,
		 tag_b);
	run_case(&c);
}
END_TEST

START_TEST(test_from_tail_without_match)
{
	char cfg[128];
	struct jline lines[] = {
		/* matches nothing the config asks for: the start finds no last match */
		{ .tag = tag_t, .prio = 6, .via = VIA_LOGGER, .before = true },
		{ .tag = tag_t, .prio = 3, .via = VIA_LOGGER, .pass = true },
		{ .tag = tag_t, .prio = 3, .via = VIA_CAT, .pass = true },
		{ .tag = tag_t, .prio = 4, .via = VIA_LOGGER },
		{ .tag = tag_t, .prio = 6, .via = VIA_CAT },
	};
	struct jcase c = { .name = "tail", .journald_config = cfg, .lines = lines, .n = ARRAY_SIZE(lines) };

	snprintf(cfg, sizeof(cfg), "min_prio: 3 filter_identifiers: \"%s\"", tag_t);
	run_case(&c);
}
END_TEST

START_TEST(test_units)
{
	char cfg[128], why[256];
	struct jline lines[] = {
		{ .tag = tag_u, .prio = 6, .via = VIA_CAT, .in_unit = true, .before = true },
		{ .tag = tag_u, .prio = 6, .via = VIA_CAT, .in_unit = true },
		{ .tag = tag_u, .prio = 5, .via = VIA_CAT, .in_unit = true },
		/* the same identifier outside the unit */
		{ .tag = tag_u, .prio = 6, .via = VIA_CAT },
		/* a unit claimed by the client: journald drops it */
		{ .tag = tag_u, .prio = 3, .via = VIA_LOGGER, .fake_unit = true },
	};
	struct jcase c = { .name = "units", .journald_config = cfg, .lines = lines, .n = ARRAY_SIZE(lines),
			   .units = true };

	snprintf(cfg, sizeof(cfg), "filter_units: \"%s\"", unit_name);
	if (cgroup_up(why, sizeof(why)))
		c.cgroup = env.cgroup;
	else
		/* journald then gives none of the lines a unit: none may pass */
		fprintf(stderr, "units: %s; the unit filter must let nothing through\n", why);
	run_case(&c);
	for (size_t i = 0; i < c.n; i++)
		ck_assert(!c.cgroup || lines[i].pass == (lines[i].in_unit && !lines[i].before));
}
END_TEST

int main(void)
{
	char why[512];
	Suite *s;
	TCase *tc;
	int r;

	if (geteuid() != 0) {
		fprintf(stderr, "needs root (the system journal, a journald of its own, a cgroup): "
			"skipped\n");
		return 77;
	}
	if (system("command -v systemd-cat >/dev/null && command -v logger >/dev/null && "
		   "command -v journalctl >/dev/null") != 0) {
		fprintf(stderr, "needs systemd-cat, logger and journalctl: skipped\n");
		return 77;
	}
	if (gethostname(hostname, sizeof(hostname)) < 0 || !mkdtemp(tmpdir))
		return 1;
	env.test_pid = getpid();
	signal(SIGPIPE, SIG_IGN);
	catch_fatal_signals();
	atexit(journal_down);
	r = journal_prepare(why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "%s: skipped\n", why);
		journal_down();
		rmdir(tmpdir);
		return 77;
	}
	own_journald = r > 0;
	s = suite_create("journald_live");
	tc = tcase_create("journal");
	tcase_add_unchecked_fixture(tc, journal_start, journal_down);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_filters);
	tcase_add_test(tc, test_from_tail_without_match);
	tcase_add_test(tc, test_units);
	suite_add_tcase(s, tc);
	r = tp_run_suite(s, tmpdir);
	journal_down();
	return r;
}
