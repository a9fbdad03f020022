/* log.h - leveled logging to stderr, shared by every bqos program. */
#ifndef BQOS_LOG_H
#define BQOS_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

typedef enum {
    BQOS_LOG_ERROR = 0,
    BQOS_LOG_WARN = 1,
    BQOS_LOG_INFO = 2,
    BQOS_LOG_DEBUG = 3
} bqos_log_level_t;

/* Sets the threshold and the program name printed on each line.  Call once
 * at start-up, before any thread starts: this is the module's only state and
 * it is read-only afterwards.  `prog` must outlive the process (a literal). */
void bqos_log_init(const char *prog, bqos_log_level_t level);

/* Line formats: text "TIME PROG LEVEL: message", or one JSON object a line
 * {"ts":"TIME","level":"warn","prog":"PROG","msg":"message"} (msg escaped
 * per RFC 8259; bytes that are not UTF-8 become U+FFFD). */
typedef enum { BQOS_LOG_TEXT = 0, BQOS_LOG_JSON = 1 } bqos_log_format_t;

/* "text", "json", NULL: the names of --log-format, in enum order. */
extern const char *const bqos_log_format_names[];

/* Sets the line format (default text).  Like bqos_log_init(): once at
 * start-up, before any thread starts. */
void bqos_log_set_format(bqos_log_format_t format);

/* Parses "error", "warn", "info" or "debug".  Returns 0 and sets *out, or
 * -EINVAL for anything else. */
int bqos_log_parse_level(const char *s, bqos_log_level_t *out);

/* Returns nonzero if messages at `level` are printed. */
int bqos_log_enabled(bqos_log_level_t level);

/* Writes one line "TIME PROG LEVEL: message" (or its JSON form, see
 * bqos_log_set_format) to stderr if `level` passes the threshold, TIME as
 * bqos_log_format_time() ("2026-11-23T21:54:38.123Z").  A message is cut
 * at about 2 KB (never inside an escape or a UTF-8 character).
 * Thread-safe: each line is written with a single write(2). */
void bqos_log(bqos_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes ts (CLOCK_REALTIME) into buf as ISO-8601 UTC with milliseconds,
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 characters; truncated to cap like
 * snprintf).  Returns snprintf's count.  Any thread. */
int bqos_log_format_time(const struct timespec *ts, char *buf, size_t cap);

#define log_error(...) bqos_log(BQOS_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) bqos_log(BQOS_LOG_WARN, __VA_ARGS__)
#define log_info(...) bqos_log(BQOS_LOG_INFO, __VA_ARGS__)
#define log_debug(...) bqos_log(BQOS_LOG_DEBUG, __VA_ARGS__)

#endif
