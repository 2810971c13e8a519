/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared between the files of probes/procfs/ (and the module's own tests):
 * pure parsers over /proc file contents, the /proc reader bound to a root
 * directory fd, the pid set, the counter cache and the data source struct.
 * Nothing outside probes/procfs/ and tests/unit/test_procfs.c includes this.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop/loop.h"

#include "probes/ds/ds.h"
#include "probes/procfs/procfs.h"
#include "protos/pbw.h"

/* ---- field numbers (trace_packet.proto, ps/process_tree.proto, ps/process_stats.proto) ---- */

enum {
	PROCFS_PKT_PROCESS_TREE = 2,
	PROCFS_PKT_TIMESTAMP = 8,
	PROCFS_PKT_PROCESS_STATS = 9,
	PROCFS_PKT_INCREMENTAL_STATE_CLEARED = 41,

	PROCFS_TREE_PROCESSES = 1,
	PROCFS_TREE_THREADS = 2,
	PROCFS_TREE_COLLECTION_END = 3,

	PROCFS_PROC_PID = 1,
	PROCFS_PROC_PPID = 2,
	PROCFS_PROC_CMDLINE = 3,
	PROCFS_PROC_UID = 5,
	PROCFS_PROC_NSPID = 6,
	PROCFS_PROC_START_FROM_BOOT = 7,
	PROCFS_PROC_IS_KTHREAD = 8,
	PROCFS_PROC_CMDLINE_IS_COMM = 9,

	PROCFS_THREAD_TID = 1,
	PROCFS_THREAD_NAME = 2,
	PROCFS_THREAD_TGID = 3,
	PROCFS_THREAD_NSTID = 4,

	PROCFS_STATS_PROCESSES = 1,
	PROCFS_STATS_COLLECTION_END = 2,
};

/*
 * ProcessStats.Process counters, in the order Perfetto writes them (the
 * order of the lines in status, then smaps_rollup).  The value of each enum
 * entry is its index; procfs_counter_field[] maps it to the proto field.
 */
enum procfs_counter {
	PROCFS_CNT_RUNTIME_USER,      /* 21, ns, from stat */
	PROCFS_CNT_RUNTIME_KERNEL,    /* 22, ns, from stat */
	PROCFS_CNT_DMABUF_RSS,        /* 24, from dmabuf_rss (bytes / 1024) */
	PROCFS_CNT_VM_SIZE,           /* 2  VmSize: */
	PROCFS_CNT_VM_LOCKED,         /* 8  VmLck: */
	PROCFS_CNT_VM_HWM,            /* 9  VmHWM: */
	PROCFS_CNT_VM_RSS,            /* 3  VmRSS: */
	PROCFS_CNT_RSS_ANON,          /* 4  RssAnon: */
	PROCFS_CNT_RSS_FILE,          /* 5  RssFile: */
	PROCFS_CNT_RSS_SHMEM,         /* 6  RssShmem: */
	PROCFS_CNT_VM_SWAP,           /* 7  VmSwap: */
	PROCFS_CNT_SMR_RSS,           /* 16 smaps_rollup Rss: */
	PROCFS_CNT_SMR_PSS,           /* 17 Pss: */
	PROCFS_CNT_SMR_PSS_ANON,      /* 18 Pss_Anon: */
	PROCFS_CNT_SMR_PSS_FILE,      /* 19 Pss_File: */
	PROCFS_CNT_SMR_PSS_SHMEM,     /* 20 Pss_Shmem: */
	PROCFS_CNT_SMR_SWAP_PSS,      /* 23 SwapPss: */
	PROCFS_CNT_OOM_SCORE_ADJ,     /* 10 (int64) oom_score_adj */
	_PROCFS_CNT_MAX,
	_PROCFS_CNT_INVALID = -22,
};

extern const uint8_t procfs_counter_field[_PROCFS_CNT_MAX];

/* ---- pure parsers (procfs_parse.c) -------------------------------------- */

/* The kernel allows 32 nested pid namespaces (MAX_PID_NS_LEVEL). */
#define PROCFS_MAX_NS_LEVEL 32

struct procfs_status {
	/* Name: value, pointing into the parsed buffer (not NUL-terminated) */
	const char *name;
	size_t name_len;
	int32_t tgid;
	int32_t pid;
	int32_t ppid;
	int32_t uid;                 /* real uid: the first value of Uid: */
	bool has_name, has_tgid, has_pid;
	/* NSpid: without its first entry (the pid in our namespace) */
	unsigned n_nspid;
	int32_t nspid[PROCFS_MAX_NS_LEVEL];
	int8_t kthread;              /* Kthread: 0/1, -1 when absent (< 6.4) */
	bool has_mem;                /* VmSize: present: not a kernel thread */
	uint32_t mem_present;        /* bit (1 << enum procfs_counter) */
	uint64_t mem[_PROCFS_CNT_MAX];
};

/**
 * procfs_status_parse - parse /proc/<pid>/status contents in @buf/@len
 * (need not be NUL-terminated).  Keys are matched at the start of a line
 * only.  Malformed or missing values leave the field unset (zero) rather
 * than failing: the caller decides what is required.
 * Returns: 0, or -EINVAL when neither Tgid: nor Pid: could be read.
 */
int procfs_status_parse(const char *buf, size_t len, struct procfs_status *ret);

/**
 * procfs_smaps_rollup_parse - add the smaps_rollup counters of @buf to @st
 * (mem[] and mem_present).
 */
void procfs_smaps_rollup_parse(const char *buf, size_t len, struct procfs_status *st);

struct procfs_stat {
	int32_t pid;
	const char *comm;            /* between the first '(' and the last ')' */
	size_t comm_len;
	char state;
	int32_t ppid;
	uint64_t utime;              /* clock ticks */
	uint64_t stime;
	uint64_t starttime;
};

/**
 * procfs_stat_parse - parse /proc/<pid>/stat.  The comm field may hold
 * spaces and parentheses, so the fields after it are found from the LAST
 * ')' in the buffer.
 * Returns: 0 or -EINVAL.
 */
int procfs_stat_parse(const char *buf, size_t len, struct procfs_stat *ret);

/**
 * procfs_cmdline_next - iterate the arguments of a /proc/<pid>/cmdline
 * buffer: split on NUL, a missing final NUL tolerated, empty arguments
 * skipped (as Perfetto does).  Start with *@pos = 0.
 * Returns: true and the argument in @ret_arg/@ret_len, false at the end.
 */
bool procfs_cmdline_next(const char *buf, size_t len, size_t *pos, const char **ret_arg,
			 size_t *ret_len);

/* Longest comm the kernel prints (TASK_COMM_LEN is 16; workqueue names 64). */
#define PROCFS_COMM_MAX 64

/**
 * procfs_comm_to_name - turn /proc/<pid>/task/<tid>/comm contents into the
 * Name: value status shows for the same task: the final newline dropped,
 * '\\' and '\n' escaped as the kernel escapes them in status.  Output is cut
 * at @out_size (2 * PROCFS_COMM_MAX is always enough).
 * Returns: the length written to @out (not NUL-terminated).
 */
size_t procfs_comm_to_name(const char *comm, size_t len, char *out, size_t out_size);

/**
 * procfs_parse_pid - a /proc directory entry name that is a positive decimal
 * int32 with no sign, blanks or leading zeros.
 * Returns: the pid, or 0 if @name is not one.
 */
int32_t procfs_parse_pid(const char *name);

/**
 * procfs_parse_int_prefix - an optionally signed decimal number after
 * optional blanks; stops at the first non-digit ("1234 kB").
 * Returns: 0 or -EINVAL (no digits) / -ERANGE (does not fit int64).
 */
int procfs_parse_int_prefix(const char *p, const char *end, int64_t *ret);
int procfs_parse_uint_prefix(const char *p, const char *end, uint64_t *ret);

/* ---- /proc reader (procfs_scan.c) --------------------------------------- */

/* A growable buffer reused for every read; it only grows. */
struct procfs_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;                  /* reads are cut at this many bytes */
};

struct procfs_dir {
	int fd;
	uint8_t *buf;                /* getdents64 records */
	size_t cap;
	size_t len;
	size_t pos;
};

struct procfs_root {
	int fd;                      /* O_PATH|O_DIRECTORY of the proc mount */
	struct procfs_buf status;
	struct procfs_buf status_tgid; /* a thread's process, read alongside it */
	struct procfs_buf stat;
	struct procfs_buf cmdline;
	struct procfs_buf small;     /* oom_score_adj, dmabuf_rss */
	struct procfs_buf smaps;
	struct procfs_dir top;       /* /proc itself */
	struct procfs_dir task;      /* /proc/<pid>/task */
};

/* Status files are ~1.5 KiB but a long Groups: line can push them past that. */
#define PROCFS_STATUS_MAX (1024u * 1024u)
#define PROCFS_STAT_MAX 4096u
/* A 64 KiB argument must come out whole; longer command lines are cut. */
#define PROCFS_CMDLINE_MAX (128u * 1024u)
#define PROCFS_SMALL_MAX 256u
#define PROCFS_SMAPS_MAX 8192u

int procfs_root_init(struct procfs_root *r, const char *path);
void procfs_root_done(struct procfs_root *r);

/**
 * procfs_read_pid_file - read "<pid>/<name>" (or "<pid>/task/<tid>/<name>"
 * when @tid > 0) below the root into @b, up to b->max bytes.
 * Returns: 0, 1 if the content was cut at b->max, -ENOENT if the task is
 * gone (ENOENT and ESRCH both map to it), or another -errno.
 */
int procfs_read_pid_file(struct procfs_root *r, int32_t pid, int32_t tid, const char *name,
			 struct procfs_buf *b);

/**
 * procfs_dir_open_top / procfs_dir_open_task - start listing the numeric
 * entries of the root or of "<pid>/task".
 * Returns: 0, -ENOENT if the task is gone, -errno.
 */
int procfs_dir_open_top(struct procfs_root *r);
int procfs_dir_open_task(struct procfs_root *r, int32_t pid);

/**
 * procfs_dir_next - the next numeric directory entry.
 * Returns: > 0 pid, 0 at the end, -errno.
 */
int32_t procfs_dir_next(struct procfs_dir *d);
void procfs_dir_close(struct procfs_dir *d);

/* ---- pid set (procfs_pidset.c) ------------------------------------------ */

/*
 * A bitmap over the pid space, allocated in 4 KiB pages (32768 pids each)
 * as pids show up: 4 KiB for the default pid_max, 512 KiB at most for the
 * largest one (4M).  Lookups and inserts are O(1) and never allocate once
 * a page exists.
 */
#define PROCFS_PIDSET_PAGE_BITS 32768u
#define PROCFS_PIDSET_MAX_PID (1u << 22) /* PID_MAX_LIMIT */

struct procfs_pidset {
	uint64_t *pages[PROCFS_PIDSET_MAX_PID / PROCFS_PIDSET_PAGE_BITS];
	size_t count;
};

bool procfs_pidset_contains(const struct procfs_pidset *s, int32_t pid);
/* Returns: 1 if added, 0 if already there, -ENOMEM, -ERANGE (pid out of range). */
int procfs_pidset_add(struct procfs_pidset *s, int32_t pid);
void procfs_pidset_remove(struct procfs_pidset *s, int32_t pid);
/* Forgets every pid but keeps the pages. */
void procfs_pidset_clear(struct procfs_pidset *s);
void procfs_pidset_done(struct procfs_pidset *s);

/* ---- counter cache (procfs_cache.c) ------------------------------------- */

/* Last value written per pid and counter, so unchanged ones are skipped. */
struct procfs_cache_entry {
	int32_t pid;                 /* 0: empty slot */
	uint32_t valid;              /* bit per counter: value[] holds what we wrote */
	uint64_t value[_PROCFS_CNT_MAX];
};

struct procfs_cache {
	struct procfs_cache_entry *slots;
	size_t cap;                  /* power of two */
	size_t used;
};

/* Returns: the entry for @pid, created empty if needed, or NULL on ENOMEM. */
struct procfs_cache_entry *procfs_cache_get(struct procfs_cache *c, int32_t pid);
void procfs_cache_clear(struct procfs_cache *c);
void procfs_cache_done(struct procfs_cache *c);

/* ---- data source (procfs_ds.c, procfs_tree.c, procfs_stats.c) ----------- */

struct procfs_ds {
	struct loop *event;
	struct loop_source *poll_timer;
	uint64_t instance_id;
	uint64_t tracing_session_id;

	struct pbw_sink sink;

	/* config */
	bool scan_on_start;
	bool record_thread_names;
	bool on_demand;
	bool record_process_age;
	bool record_process_runtime;
	bool record_dmabuf_rss;
	bool scan_smaps_rollup;
	bool skip_main_thread;
	bool rescan_on_clear;
	uint32_t poll_ms;
	uint32_t cache_ttl_ticks;

	bool started;
	uint64_t ns_per_tick;
	struct procfs_root root;

	/* incremental state */
	struct procfs_pidset seen;
	struct procfs_pidset skip_mem;  /* no VmSize: kernel threads */
	struct procfs_cache cache;
	uint32_t cache_ticks;
	bool clear_pending;             /* next packet: incremental_state_cleared */

	/* the packet being written: NULL between passes */
	struct pbw *pkt;
	uint64_t pkt_start;             /* pbw_position() when it began */
	uint64_t packet_split_bytes;    /* PROCFS_PACKET_SPLIT; tests lower it */
	int open_msg;                   /* 0, PROCFS_PKT_PROCESS_TREE or _STATS */
	bool stats_proc_open;
	uint64_t scan_start_ns;

	/* scratch, reused */
	int32_t *pids;                  /* sorted copy of an ftrace pass */
	size_t pids_cap;
	int32_t *poll_pids;             /* pids a poll tick saw */
	size_t poll_pids_len, poll_pids_cap;

	struct procfs_ds_stats stats;
};

/* procfs_packet.c: packet framing */
void procfs_packet_mark_scan_start(struct procfs_ds *ds);
/* Starts the packet if needed and opens TracePacket.@field (2 or 9). */
struct pbw *procfs_packet_open_msg(struct procfs_ds *ds, uint32_t field);
/* Writes collection_end_timestamp, closes and hands over the packet, if any. */
void procfs_packet_end(struct procfs_ds *ds);

/*
 * Perfetto writes a whole scan as one packet.  On a machine with tens of
 * thousands of threads that is megabytes: more than the 2 MiB SMB holds
 * before the service can drain it, and a writer that cannot get a chunk
 * drops the whole packet.  So a scan continues in a new packet (same
 * timestamp) once the current one passes this size, between entries; the
 * reader sees several ProcessTree packets, which it merges anyway.
 */
#define PROCFS_PACKET_SPLIT (256u * 1024u)
void procfs_packet_maybe_split(struct procfs_ds *ds);

/* procfs_tree.c */
int procfs_tree_scan_all(struct procfs_ds *ds);
/*
 * Looks up the unknown pids among @pids; a pid with no /proc entry left
 * bumps *@gone_counter.  Returns: pids looked up, or -ENOMEM.
 */
int procfs_tree_write_pids(struct procfs_ds *ds, const int32_t *pids, size_t n,
			   uint64_t *gone_counter);

/* procfs_stats.c */
int procfs_stats_poll(struct procfs_ds *ds);
