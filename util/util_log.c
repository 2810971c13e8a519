/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/util.h"

static enum log_level max_level = LOG_LEVEL_INFO;

static const char *const level_names[_LOG_LEVEL_MAX] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARNING] = "warning",
	[LOG_LEVEL_NOTICE] = "notice",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

/* syslog priorities, so journald files each line under the right level */
static const int level_prio[_LOG_LEVEL_MAX] = { 3, 4, 5, 6, 7 };

void log_set_max_level(enum log_level level)
{
	if (level >= 0 && level < _LOG_LEVEL_MAX)
		max_level = level;
}

enum log_level log_get_max_level(void)
{
	return max_level;
}

int log_level_from_string(const char *s)
{
	for (int i = 0; i < _LOG_LEVEL_MAX; i++)
		if (s && strcmp(s, level_names[i]) == 0)
			return i;
	return -EINVAL;
}

/*
 * systemd sets JOURNAL_STREAM=<dev>:<inode> of the stream it connected to
 * stderr.  Only when stderr is still that stream do the "<N>" prefixes
 * reach a reader that understands them; on a terminal or in a file they
 * are noise.  Checked per line: logging is never on a hot path, and stderr
 * may be redirected at any time.
 */
bool log_stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int n = 0;

	if (!e || sscanf(e, "%llu:%llu%n", &dev, &ino, &n) != 2 || e[n] != '\0')
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int log_internal(enum log_level level, int error, const char *fmt, ...)
{
	int saved = errno;
	char line[4096];
	va_list ap;

	if (level < 0 || level >= _LOG_LEVEL_MAX)
		level = LOG_LEVEL_ERROR;
	/* "%m" expands from errno: make it describe the error we were given */
	if (error != 0)
		errno = abs(error);
	va_start(ap, fmt);
	(void)vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_stderr_is_journal())
		fprintf(stderr, "<%d>", level_prio[level]);
	fprintf(stderr, "traced-probes: %s%s\n",
		level <= LOG_LEVEL_WARNING ? (level == LOG_LEVEL_ERROR ? "error: " : "warning: ") : "",
		line);
	errno = saved;
	return -abs(error);
}

void log_option_error(int c, char *const *argv, const char *help)
{
	/* getopt_long() has stepped past the word it refused */
	const char *word = optind > 0 ? argv[optind - 1] : "";
	int name_len = (int)strcspn(word, "=");
	bool is_long = strncmp(word, "--", 2) == 0;

	if (c == ':' && is_long)
		log_error("Option '%.*s' needs a value", name_len, word);
	else if (c == ':')
		log_error("Option '-%c' needs a value", optopt);
	else if (optopt && !is_long)
		log_error("Unknown option '-%c'", optopt);
	else if (optopt)
		/* a known long option that takes no value was given one */
		log_error("Option '%.*s' takes no value", name_len, word);
	else
		log_error("Unknown option '%.*s'", name_len, word);
	log_error("Try '%s'", help);
}
