/* log.c - leveled logging to stderr, one write(2) per line. */
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

void bqos_log(bqos_log_level_t level, const char *fmt, ...)
{
    if (!bqos_log_enabled(level))
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %s %s: ", tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, settings.prog,
                     level_names[level]);
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
