/* log.c - leveled logging to stderr, one write(2) per line, stamped with the UTC date and time (ISO-8601, ms). */
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
} settings = {"bqos", BQOS_LOG_INFO};

static const char *const level_names[] = {"error", "warn", "info", "debug"};

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

void bqos_log(bqos_log_level_t level, const char *fmt, ...)
{
    if (!bqos_log_enabled(level))
        return;
    char line[2048], when[40];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    bqos_log_format_time(&ts, when, sizeof when);
    int n = snprintf(line, sizeof line, "%s %s %s: ", when, settings.prog, level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
