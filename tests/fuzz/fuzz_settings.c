/* fuzz_settings.c - libFuzzer harness for the settings file (common/opts, --settings FILE) read through opts_parse() as a daemon reads it: a file that is accepted leaves every value within its row's type and bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/opts.h"

typedef struct {
    int flag, i, e, func, help;
    unsigned u;
    int64_t i64;
    uint64_t u64, bytes;
    size_t sz;
    double d, dur;
    const char *s;
} vals_t;

static const char *const words[] = {"off", "allow", "require", NULL};

/* OPTS_FUNC: a word of two letters. */
static int two_letters(const char *arg, void *target)
{
    if (strlen(arg) != 2)
        return -1;
    *(int *)target = arg[0] * 256 + arg[1];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    static int fd = -1;
    if (!devnull && !(devnull = fopen("/dev/null", "w")))
        abort();
    if (fd < 0 && (fd = memfd_create("settings", 0)) < 0)
        abort();
    if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    vals_t v;
    memset(&v, 0, sizeof v);
    const opts_row_t rows[] = {
        {.name = "flag", .type = OPTS_FLAG, .target = &v.flag},
        {.name = "string", .type = OPTS_STRING, .target = &v.s, .deflt = "x"},
        {.name = "int", .type = OPTS_INT, .target = &v.i, .deflt = "5", .min = -3, .max = 1000},
        {.name = "uint", .type = OPTS_UINT, .target = &v.u, .min = 1, .max = 1e7},
        {.name = "i64", .type = OPTS_I64, .target = &v.i64},
        {.name = "u64", .type = OPTS_U64, .target = &v.u64, .max = 1e9},
        {.name = "size", .type = OPTS_SIZE, .target = &v.sz},
        {.name = "double", .type = OPTS_DOUBLE, .target = &v.d, .min = 0, .max = 1,
         .flags = OPTS_XMIN},
        {.name = "duration", .type = OPTS_DURATION, .target = &v.dur, .deflt = "1s",
         .min = 0.001, .max = 3600},
        {.name = "bytes", .type = OPTS_BYTES, .target = &v.bytes, .min = 1, .max = 0x1p40},
        {.name = "enum", .type = OPTS_ENUM, .target = &v.e, .names = words, .deflt = "off"},
        {.name = "func", .type = OPTS_FUNC, .target = &v.func, .func = two_letters},
        OPTS_HELP_ROW(0, &v.help, "help"),
    };
    const size_t n = sizeof rows / sizeof rows[0];
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char *argv[] = {"fuzz", "--settings", path, NULL};
    const opts_cmd_t cmd = {.prog = "fuzz", .rows = rows, .n = n, .err = devnull};
    int rc = opts_parse(&cmd, 3, argv, NULL);
    if (rc == 1)
        abort(); /* "help" is not a setting */
    if (rc != 0)
        return 0;
    /* Accepted: every value as its row allows. */
    if ((v.flag != 0 && v.flag != 1) || !v.s || v.i < -3 || v.i > 1000 ||
        (v.u != 0 && (v.u < 1 || v.u > 10000000)) || v.u64 > 1000000000 ||
        (v.d != 0 && (!(v.d > 0) || v.d > 1)) || !(v.dur >= 0.001 && v.dur <= 3600) ||
        (v.bytes != 0 && (v.bytes < 1 || v.bytes > (1ull << 40))) || v.e < 0 || v.e > 2)
        abort();
    return 0;
}
