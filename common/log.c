/* log.c - leveled logging to stderr, one write(2) per line (text or JSON), stamped with the UTC date and time (ISO-8601, ms), or with a syslog priority when stderr is the journal; warnings and errors rate-limited per call site. */
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Set once by bqos_log_init() before threads start, read-only afterwards. */
static struct {
    const char *prog;
    bqos_log_level_t level;
    bqos_log_format_t format;
    int journal; /* stderr is the journal: "<N>" prefixes, no stamp */
} settings = {"bqos", BQOS_LOG_INFO, BQOS_LOG_TEXT, 0};

/* The rate limit of every call site, and the lock of every site's state. */
static pthread_mutex_t limit_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    unsigned burst;
    double interval_s;
    double (*now)(void); /* NULL: CLOCK_MONOTONIC */
} limit = {BQOS_LOG_BURST, BQOS_LOG_INTERVAL_S, NULL};

/* syslog(3)'s LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG, by level. */
static const int priorities[] = {3, 4, 6, 7};

static const char *const level_names[] = {"error", "warn", "info", "debug"};
const char *const bqos_log_format_names[] = {"text", "json", NULL};

void bqos_log_set_format(bqos_log_format_t format)
{
    settings.format = format;
}

/* Whether stderr is the stream $JOURNAL_STREAM ("DEV:INO", decimal) names. */
static int stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2 || fstat(STDERR_FILENO, &st) < 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void bqos_log_init(const char *prog, bqos_log_level_t level)
{
    settings.prog = prog ? prog : "bqos";
    settings.level = level;
    settings.journal = stderr_is_journal();
}

const char *bqos_log_prog(void)
{
    return settings.prog;
}

int bqos_log_to_journal(void)
{
    return settings.journal;
}

int bqos_log_parse_level(const char *s, bqos_log_level_t *out)
{
    for (int i = 0; i <= BQOS_LOG_DEBUG; i++) {
        if (s && strcmp(s, level_names[i]) == 0) {
            *out = (bqos_log_level_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

int bqos_log_enabled(bqos_log_level_t level)
{
    return level <= settings.level;
}

int bqos_log_format_time(const struct timespec *ts, char *buf, size_t cap)
{
    struct tm tm;
    if (!gmtime_r(&ts->tv_sec, &tm))
        return snprintf(buf, cap, "?");
    return snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                    tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts->tv_nsec / 1000000L);
}

/* Length of the UTF-8 character at s[0..n) (n >= 1): 1..4, or 0 if the
 * bytes there are not a well-formed one (overlong, surrogate, > U+10FFFF,
 * cut short). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
               : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* Appends src[0..n) to out[*len..cap) as the inside of a JSON string: '"',
 * '\\' and control characters escaped, ill-formed UTF-8 as U+FFFD.  Stops
 * before an item that does not fit whole (cap - *len keeps 8 bytes spare). */
static void json_escape(char *out, size_t *len, size_t cap, const char *src, size_t n)
{
    const unsigned char *s = (const unsigned char *)src;
    for (size_t i = 0; i < n;) {
        char esc[8];
        const char *item = esc;
        size_t il, used = 1;
        if (s[i] == '"' || s[i] == '\\') {
            esc[0] = '\\', esc[1] = (char)s[i], il = 2;
        } else if (s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
            esc[0] = '\\', esc[1] = s[i] == '\n' ? 'n' : s[i] == '\t' ? 't' : 'r', il = 2;
        } else if (s[i] < 0x20) {
            il = (size_t)snprintf(esc, sizeof esc, "\\u%04x", s[i]);
        } else if ((used = utf8_len(s + i, n - i)) > 0) {
            item = src + i, il = used;
        } else {
            item = "\xef\xbf\xbd", il = 3, used = 1; /* U+FFFD */
        }
        if (*len + il + 8 > cap)
            return;
        memcpy(out + *len, item, il);
        *len += il;
        i += used;
    }
}

/* Writes one line (the format's, see log.h) of level, the message fmt/ap
 * and the number of lines suppressed before it (0: none). */
static void vlog(bqos_log_level_t level, unsigned long suppressed, const char *fmt, va_list ap)
{
    char line[2048], msg[2048], when[40] = "", prio[8] = "";
    /* The journal stamps text lines itself; a JSON line stays whole. */
    if (settings.journal)
        snprintf(prio, sizeof prio, "<%d>", priorities[level]);
    if (!settings.journal || settings.format == BQOS_LOG_JSON) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        bqos_log_format_time(&ts, when, sizeof when);
    }
    /* Text: the count after the message, which is cut short enough to
     * leave it and the line's head room. */
    char tail[64] = "";
    if (suppressed && settings.format == BQOS_LOG_TEXT)
        snprintf(tail, sizeof tail, " (%lu similar message%s suppressed)", suppressed,
                 suppressed == 1 ? "" : "s");
    const size_t mcap = sizeof msg - sizeof tail - 160;
    int m = vsnprintf(msg, mcap, fmt, ap);
    size_t mlen = m < 0 ? 0 : (size_t)m < mcap ? (size_t)m : mcap - 1;
    size_t len;
    if (settings.format == BQOS_LOG_JSON) {
        len = (size_t)snprintf(line, sizeof line, "%s{\"ts\":\"%s\",\"level\":\"%s\",\"prog\":\"", prio,
                               when, level_names[level]);
        json_escape(line, &len, sizeof line, settings.prog, strlen(settings.prog));
        len += (size_t)snprintf(line + len, sizeof line - len, "\",\"msg\":\"");
        json_escape(line, &len, sizeof line - 40, msg, mlen); /* room for the count and "} */
        if (suppressed)
            len += (size_t)snprintf(line + len, sizeof line - len, "\",\"suppressed\":%lu}", suppressed);
        else
            len += (size_t)snprintf(line + len, sizeof line - len, "\"}");
    } else {
        int n = settings.journal
              ? snprintf(line, sizeof line, "%s%s: %.*s%s", prio, level_names[level], (int)mlen, msg, tail)
              : snprintf(line, sizeof line, "%s %s %s: %.*s%s", when, settings.prog, level_names[level],
                         (int)mlen, msg, tail);
        len = n < 0 ? 0 : (size_t)n;
    }
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void bqos_log(bqos_log_level_t level, const char *fmt, ...)
{
    if (!bqos_log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, 0, fmt, ap);
    va_end(ap);
}

static double monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bqos_log_set_ratelimit(unsigned burst, double interval_s)
{
    pthread_mutex_lock(&limit_mu);
    limit.burst = burst;
    limit.interval_s = interval_s;
    pthread_mutex_unlock(&limit_mu);
}

void bqos_log_set_clock(double (*now)(void))
{
    pthread_mutex_lock(&limit_mu);
    limit.now = now;
    pthread_mutex_unlock(&limit_mu);
}

/* Whether `site` may write a line now (a token bucket of limit.burst
 * tokens earning one per limit.interval_s); if so, *suppressed is what it
 * was refused since its last line (and starts again from 0), else the
 * refusal is counted.  Caller holds limit_mu. */
static int do_site_pass(bqos_log_site_t *site, unsigned long *suppressed)
{
    *suppressed = 0;
    if (limit.burst == 0 || !(limit.interval_s > 0))
        return 1;
    double now = limit.now ? limit.now() : monotonic_now();
    if (!site->used) {
        site->used = 1;
        site->tokens = limit.burst;
    } else if (now > site->last) {
        site->tokens += (now - site->last) / limit.interval_s;
        if (site->tokens > limit.burst)
            site->tokens = limit.burst;
    }
    site->last = now;
    if (site->tokens < 1) {
        site->suppressed++;
        return 0;
    }
    site->tokens -= 1;
    *suppressed = site->suppressed;
    site->suppressed = 0;
    return 1;
}

void bqos_log_limited(bqos_log_site_t *site, bqos_log_level_t level, const char *fmt, ...)
{
    if (!bqos_log_enabled(level))
        return;
    unsigned long suppressed;
    pthread_mutex_lock(&limit_mu);
    int pass = do_site_pass(site, &suppressed);
    pthread_mutex_unlock(&limit_mu);
    if (!pass)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, suppressed, fmt, ap);
    va_end(ap);
}
