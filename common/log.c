/* log.c - leveled logging to stderr, one write(2) per line (text or JSON), stamped with the UTC date and time (ISO-8601, ms). */
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Set once by bqos_log_init() before threads start, read-only afterwards. */
static struct {
    const char *prog;
    bqos_log_level_t level;
    bqos_log_format_t format;
} settings = {"bqos", BQOS_LOG_INFO, BQOS_LOG_TEXT};

static const char *const level_names[] = {"error", "warn", "info", "debug"};
const char *const bqos_log_format_names[] = {"text", "json", NULL};

void bqos_log_set_format(bqos_log_format_t format)
{
    settings.format = format;
}

void bqos_log_init(const char *prog, bqos_log_level_t level)
{
    settings.prog = prog ? prog : "bqos";
    settings.level = level;
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

void bqos_log(bqos_log_level_t level, const char *fmt, ...)
{
    if (!bqos_log_enabled(level))
        return;
    char line[2048], msg[2048], when[40];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    bqos_log_format_time(&ts, when, sizeof when);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t mlen = m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
    size_t len;
    if (settings.format == BQOS_LOG_JSON) {
        len = (size_t)snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"prog\":\"", when,
                               level_names[level]);
        json_escape(line, &len, sizeof line, settings.prog, strlen(settings.prog));
        len += (size_t)snprintf(line + len, sizeof line - len, "\",\"msg\":\"");
        json_escape(line, &len, sizeof line, msg, mlen);
        len += (size_t)snprintf(line + len, sizeof line - len, "\"}");
    } else {
        int n = snprintf(line, sizeof line, "%s %s %s: %.*s", when, settings.prog, level_names[level],
                         (int)mlen, msg);
        len = n < 0 ? 0 : (size_t)n;
        if (len > sizeof line - 2)
            len = sizeof line - 2;
    }
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
