/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Small helpers shared by every module: scoped cleanup, logging, bounded
 * number parsing and whole-file I/O.  Nothing here knows about tracing.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- scoped cleanup ---------------------------------------------------- */

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void)close(*fd);
		errno = saved;
	}
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hand a resource over to the caller: the local no longer owns it. */
#define TAKE_PTR(p)                                 \
	({                                          \
		__typeof__(p) _tp_ = (p);           \
		(p) = NULL;                         \
		_tp_;                               \
	})
#define TAKE_FD(fd)                                 \
	({                                          \
		int _tf_ = (fd);                    \
		(fd) = -EBADF;                      \
		_tf_;                               \
	})

/* For destructors that accept NULL and return NULL: foo = foo_free(foo). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)     \
	static inline void func##p(type *p)         \
	{                                           \
		if (*p)                             \
			func(*p);                   \
	}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _public_ __attribute__((visibility("default")))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

/* Converts a libc-style result (-1 with errno) into -errno. */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/* ---- logging ----------------------------------------------------------- */

enum log_level {
	LOG_LEVEL_ERROR,
	LOG_LEVEL_WARNING,
	LOG_LEVEL_NOTICE,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
	_LOG_LEVEL_MAX,
	_LOG_LEVEL_INVALID = -EINVAL,
};

/**
 * log_set_max_level - messages above @level are not printed.
 */
void log_set_max_level(enum log_level level);
enum log_level log_get_max_level(void);
/**
 * log_level_from_string - "error", "warning", "notice", "info", "debug".
 * Returns: the level or -EINVAL.
 */
int log_level_from_string(const char *s);

/**
 * log_stderr_is_journal - whether stderr is the journal stream systemd
 * announced in $JOURNAL_STREAM ("<dev>:<inode>").
 */
bool log_stderr_is_journal(void);

/**
 * log_internal - print one line to stderr, with a level prefix that the
 * journal understands (<N>) when stderr is the journal.  Keeps errno.  When @error is non-zero, "%m"
 * in @fmt expands to strerror(-@error).
 * Returns: @error (negative) so callers can "return log_error_errno(r, ...)".
 */
int log_internal(enum log_level level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_full_errno(lvl, err, ...)                                         \
	({                                                                    \
		int _e_ = (err);                                              \
		(lvl) <= log_get_max_level() ? log_internal((lvl), _e_, __VA_ARGS__) \
					      : -abs(_e_);                    \
	})
#define log_error_errno(e, ...) log_full_errno(LOG_LEVEL_ERROR, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_LEVEL_WARNING, (e), __VA_ARGS__)
#define log_notice_errno(e, ...) log_full_errno(LOG_LEVEL_NOTICE, (e), __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_LEVEL_INFO, (e), __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_LEVEL_DEBUG, (e), __VA_ARGS__)
#define log_error(...) (void)log_full_errno(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warning(...) (void)log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_notice(...) (void)log_full_errno(LOG_LEVEL_NOTICE, 0, __VA_ARGS__)
#define log_info(...) (void)log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) (void)log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)

/**
 * log_option_error - log the command-line word getopt_long() refused, by
 * name ("Unknown option '--foo'", "Option '-t' needs a value"), then
 * "Try '@help'".  For a parser run with opterr = 0 and an optstring that
 * starts with ':'; call it with what getopt_long() returned ('?' or ':').
 */
void log_option_error(int c, char *const *argv, const char *help);

/* ---- parsing ----------------------------------------------------------- */

/**
 * safe_atou64 - parse a whole decimal string (leading blanks allowed, no
 * sign, no trailing garbage except one '\n').
 * Returns: 0, -EINVAL for malformed input, -ERANGE on overflow.  @ret is
 * untouched on failure.
 */
int safe_atou64(const char *s, uint64_t *ret);
int safe_atoi64(const char *s, int64_t *ret);
int safe_atou32(const char *s, uint32_t *ret);
int safe_atoi32(const char *s, int32_t *ret);

/* ---- whole-file I/O ---------------------------------------------------- */

/**
 * read_full_fd - read until EOF or @max bytes into a new NUL-terminated
 * buffer.  Larger content is an error, never silently cut.
 * Returns: 0 and the buffer and its length, -EFBIG if larger than @max, -errno.
 */
int read_full_fd(int fd, size_t max, char **ret_buf, size_t *ret_len);
int read_full_file_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len);

/* A boot id as the kernel prints it (8-4-4-4-12 lowercase hex digits). */
#define BOOT_ID_LEN 36u

/**
 * boot_id_valid - whether @s is a boot id in the kernel's form, nothing else.
 */
bool boot_id_valid(const char *s);

/**
 * boot_id_read - this boot's id (/proc/sys/kernel/random/boot_id) into @buf,
 * "" when it cannot be read or is not in the kernel's form.
 */
void boot_id_read(char buf[static BOOT_ID_LEN + 1]);

/**
 * write_all - write every byte, looping on short writes and EINTR.
 * Returns: 0 or -errno.
 */
int write_all(int fd, const void *buf, size_t len);

/**
 * open_output_in_place - open @path for writing in place when it is a
 * device or a FIFO (-o /dev/null): an output written under a temporary name
 * and renamed over such a path would replace it with a regular file.
 * Returns: the fd (O_WRONLY, O_CLOEXEC, O_NOCTTY); -ENOTSUP when @path is a
 * regular file, a directory or absent (write it under a temporary name and
 * rename it); another -errno when it cannot be opened.
 */
int open_output_in_place(const char *path);

/* ---- message strings (util_str.c) -------------------------------------- */

/**
 * strdup_printf - asprintf() that returns the new string, or NULL when out
 * of memory.
 */
char *strdup_printf(const char *fmt, ...) _printf_(1, 2);

/**
 * set_error_text - hand @msg (malloc'd, may be NULL) to the optional
 * out-parameter @ret_error, replacing and freeing what it held; without
 * @ret_error, free @msg.
 */
void set_error_text(char **ret_error, char *msg);

/**
 * array_grow - make the malloc'd array *@p (capacity *@cap elements of
 * @elem bytes) hold at least @need, doubling from @first (or from *@cap).
 * Returns: 0 or -ENOMEM (*@p and *@cap unchanged).
 */
int array_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);

/**
 * str_append_line - append @line and '\n' to the malloc'd string *@buf
 * (NULL counts as empty).
 * Returns: 0 or -ENOMEM (*@buf unchanged).
 */
int str_append_line(char **buf, const char *line);

/*
 * Names that end up in tracefs paths, tracefs files or quoted config text
 * are checked against one character class: [A-Za-z0-9_] always, plus the
 * NAME_* extras the caller allows.  ASCII only, not <ctype.h>, so the
 * locale cannot widen what is accepted.
 */
enum {
	NAME_DASH = 1 << 0,       /* '-' */
	NAME_DOT = 1 << 1,        /* '.' */
	NAME_SLASH = 1 << 2,      /* '/' */
	NAME_STAR = 1 << 3,       /* '*' */
	NAME_COMMA = 1 << 4,      /* ',' */
	NAME_NOT_DOTS = 1 << 5,   /* refuse "." and "..": the name is a path component */
};

/**
 * name_char_ok - whether @c is in [A-Za-z0-9_] or one of the @extra NAME_*
 * characters.
 */
bool name_char_ok(char c, unsigned extra);

/**
 * name_valid - @s is 1..@max bytes of name_char_ok(, @extra) characters
 * (and with NAME_NOT_DOTS neither "." nor "..").  NULL is refused.
 */
bool name_valid(const char *s, size_t max, unsigned extra);

/**
 * str_printable_dup - a copy of at most @max bytes of @s with every byte
 * outside printable ASCII replaced by '?', for echoing untrusted names in
 * logs and stats.  Returns: the copy, or NULL when out of memory.
 */
char *str_printable_dup(const char *s, size_t max);

/* The value of hex digit @c, or -1. */
static inline int hex_digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/**
 * now_ns - clock_gettime(@clock) in nanoseconds.
 */
uint64_t now_ns(int clock);

/* The most builtin_clocks_read() returns. */
#define BUILTIN_CLOCKS_MAX 7u

/**
 * builtin_clocks_read - every clock Perfetto snapshots, read back to back
 * in traced's order (boottime, realtime coarse, monotonic coarse,
 * realtime, monotonic, monotonic raw, and the TSC on x86-64): the service's
 * ClockSnapshot packets and both sides of a relay clock sync.
 * @ids: BUILTIN_CLOCKS_MAX BuiltinClock ids, filled.
 * @ts: their readings, in ns (TSC ticks for the TSC); 0 for one that failed.
 * Returns: how many were filled.
 */
size_t builtin_clocks_read(uint32_t *ids, uint64_t *ts);
