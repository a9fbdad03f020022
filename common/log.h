/* log.h - leveled logging to stderr, shared by every bqos program: syslog priority prefixes when stderr is the journal, repeated warnings and errors rate-limited per call site. */
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

/* Sets the threshold and the program name printed on each line, and looks
 * whether stderr is the journal (see bqos_log_to_journal()).  Call once at
 * start-up, before any thread starts: these settings are read-only
 * afterwards.  `prog` must outlive the process (a literal). */
void bqos_log_init(const char *prog, bqos_log_level_t level);

/* The program name given to bqos_log_init() ("bqos" before).  Any thread. */
const char *bqos_log_prog(void);

/* Nonzero when bqos_log_init() found stderr to be the journal: systemd put
 * "DEV:INO" of the stream it gave us in $JOURNAL_STREAM and stderr's
 * fstat(2) matches it (systemd.exec(5); a stderr redirected elsewhere does
 * not match).  Then each line starts with its syslog priority, "<3>" for
 * error, "<4>" warn, "<6>" info, "<7>" debug (journald's SyslogLevelPrefix,
 * so `journalctl -p warning` works), and a text line carries neither time
 * nor program name, which the journal records itself: "<4>warn: message".
 * A JSON line keeps its fields ("<4>{...}"). */
int bqos_log_to_journal(void);

/* Line formats: text "TIME PROG LEVEL: message", or one JSON object a line
 * {"ts":"TIME","level":"warn","prog":"PROG","msg":"message"} (msg escaped
 * per RFC 8259; bytes that are not UTF-8 become U+FFFD), with a fifth
 * field "suppressed":N on a rate-limited line that follows N suppressed
 * ones (text: "message (N similar messages suppressed)"). */
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

/* Rate limiting.  log_error() and log_warn() keep a small state at their
 * call site (a static bqos_log_site_t each): a site may write
 * BQOS_LOG_BURST lines at once, then one per BQOS_LOG_INTERVAL_S seconds
 * (a token bucket: a quiet site earns its burst back), and what it is
 * refused is counted and said on its next line: "(N similar messages
 * suppressed)".  So a warning repeated every second during an outage
 * shows 5 times, then once a minute with its count; distinct call sites
 * never limit each other.  log_info() and log_debug() are not limited,
 * nor is bqos_log() called directly: the way to write every line of a
 * site whose lines all matter.  docs/decisions.md says why. */
#define BQOS_LOG_BURST 5
#define BQOS_LOG_INTERVAL_S 60.0

/* One call site's state.  Zero-initialised (static); the module's lock
 * guards it, so any thread may log through it. */
typedef struct {
    double tokens;            /* lines it may write now, up to the burst */
    double last;              /* when tokens was last earned (seconds) */
    unsigned long suppressed; /* lines refused since the last written */
    int used;                 /* 0 until its first line */
} bqos_log_site_t;

/* bqos_log() through `site`'s rate limit (see above).  Thread-safe. */
void bqos_log_limited(bqos_log_site_t *site, bqos_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sets the limit of every site: `burst` lines at once, then one per
 * `interval_s` seconds; burst 0 or interval_s <= 0 turns limiting off.
 * Default BQOS_LOG_BURST, BQOS_LOG_INTERVAL_S.  For tests and start-up. */
void bqos_log_set_ratelimit(unsigned burst, double interval_s);

/* The clock of the rate limit, seconds: NULL restores CLOCK_MONOTONIC.
 * For tests; set before threads log. */
void bqos_log_set_clock(double (*now)(void));

#define BQOS_LOG_LIMITED_(level, ...)                            \
    do {                                                         \
        static bqos_log_site_t bqos_log_site_;                   \
        bqos_log_limited(&bqos_log_site_, (level), __VA_ARGS__); \
    } while (0)

#define log_error(...) BQOS_LOG_LIMITED_(BQOS_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) BQOS_LOG_LIMITED_(BQOS_LOG_WARN, __VA_ARGS__)
#define log_info(...) bqos_log(BQOS_LOG_INFO, __VA_ARGS__)
#define log_debug(...) bqos_log(BQOS_LOG_DEBUG, __VA_ARGS__)

#endif
