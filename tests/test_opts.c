/* test_opts.c - Check suite for common/opts and common/num: number parsers, the typed table (types, bounds, enums, defaults, errors) and --help text from the rows. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/num.h"
#include "common/opts.h"
#include "tests/testlib.h"

/* ---- common/num ---------------------------------------------------------- */

START_TEST(test_opts_num_integers)
{
    int64_t i = 7;
    uint64_t u = 7;
    ck_assert_int_eq(num_i64("-42", &i), 0);
    ck_assert_int_eq(i, -42);
    ck_assert_int_eq(num_i64("9223372036854775807", &i), 0);
    ck_assert_int_eq(num_i64("9223372036854775808", &i), -ERANGE);
    ck_assert_int_eq(i, INT64_MAX);
    ck_assert_int_eq(num_i64("", &i), -EINVAL);
    ck_assert_int_eq(num_i64(" 5", &i), -EINVAL);
    ck_assert_int_eq(num_i64("+5", &i), -EINVAL);
    ck_assert_int_eq(num_i64("5x", &i), -EINVAL);
    ck_assert_int_eq(num_i64("-", &i), -EINVAL);
    ck_assert_int_eq(num_i64(NULL, &i), -EINVAL);
    ck_assert_int_eq(num_u64("18446744073709551615", &u), 0);
    ck_assert_uint_eq(u, UINT64_MAX);
    ck_assert_int_eq(num_u64("18446744073709551616", &u), -ERANGE);
    ck_assert_int_eq(num_u64("-1", &u), -EINVAL); /* strtoull would wrap it */
    ck_assert_int_eq(num_i64_in("10", 1, 10, &i), 0);
    ck_assert_int_eq(num_i64_in("11", 1, 10, &i), -ERANGE);
    ck_assert_int_eq(i, 10);
}
END_TEST

START_TEST(test_opts_num_doubles_durations_bytes)
{
    double d = 0;
    uint64_t u = 0;
    ck_assert_int_eq(num_double("0.25", &d), 0);
    ck_assert_double_eq(d, 0.25);
    ck_assert_int_eq(num_double("1e6", &d), 0);
    ck_assert_double_eq(d, 1e6);
    ck_assert_int_eq(num_double("-.5", &d), 0);
    ck_assert_double_eq(d, -0.5);
    ck_assert_int_eq(num_double("nan", &d), -EINVAL);
    ck_assert_int_eq(num_double("inf", &d), -EINVAL);
    ck_assert_int_eq(num_double("1e999", &d), -ERANGE);
    ck_assert_int_eq(num_double("1.5x", &d), -EINVAL);
    ck_assert_int_eq(num_double(" 1", &d), -EINVAL);
    ck_assert_int_eq(num_double_in("1.5", 0, 1, &d), -ERANGE);
    ck_assert_double_eq(d, -0.5);
    ck_assert_int_eq(num_duration("2", &d), 0);
    ck_assert_double_eq(d, 2);
    ck_assert_int_eq(num_duration("2s", &d), 0);
    ck_assert_double_eq(d, 2);
    ck_assert_int_eq(num_duration("500ms", &d), 0);
    ck_assert_double_eq(d, 0.5);
    ck_assert_int_eq(num_duration("5m", &d), -EINVAL);
    ck_assert_int_eq(num_duration("ms", &d), -EINVAL);
    ck_assert_int_eq(num_bytes("64k", &u), 0);
    ck_assert_uint_eq(u, 65536);
    ck_assert_int_eq(num_bytes("1M", &u), 0);
    ck_assert_uint_eq(u, 1 << 20);
    ck_assert_int_eq(num_bytes("12", &u), 0);
    ck_assert_uint_eq(u, 12);
    ck_assert_int_eq(num_bytes("1x", &u), -EINVAL);
    ck_assert_int_eq(num_bytes("-1k", &u), -EINVAL);
    ck_assert_int_eq(num_bytes("17179869184g", &u), -ERANGE);
}
END_TEST

/* ---- the table ----------------------------------------------------------- */

typedef struct {
    const char *file;
    int flag, n, level, stop, given;
    unsigned u;
    int64_t big;
    uint64_t u64, bytes;
    size_t sz;
    double frac, period, pos;
    const char *pair;
} set_t;

static const char *const levels[] = {"low", "mid", "high", NULL};

/* OPTS_FUNC: "A:B", kept whole. */
static int parse_pair(const char *arg, void *target)
{
    if (!strchr(arg, ':'))
        return -EINVAL;
    *(const char **)target = arg;
    return 0;
}

#define NROWS 16

static void rows_for(set_t *s, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "file", .type = OPTS_STRING, .target = &s->file, .arg = "FILE",
         .show = "(required)", .help = "Input file."},
        {.name = "flag", .type = OPTS_FLAG, .shrt = 'f', .target = &s->flag, .help = "A flag."},
        {.name = "n", .type = OPTS_INT, .shrt = 'n', .target = &s->n, .arg = "N", .deflt = "5",
         .min = 1, .max = 10, .help = "Count ({range})."},
        {.name = "u", .type = OPTS_UINT, .target = &s->u, .arg = "N", .deflt = "7",
         .help = "Unsigned."},
        {.name = "big", .type = OPTS_I64, .target = &s->big, .arg = "N", .min = -5,
         .max = (double)INT64_MAX, .help = "At least {min}."},
        {.name = "u64", .type = OPTS_U64, .target = &s->u64, .arg = "N", .help = "Any."},
        {.name = "size", .type = OPTS_SIZE, .target = &s->sz, .arg = "N", .deflt = "3",
         .help = "A size."},
        {.name = "bytes", .type = OPTS_BYTES, .target = &s->bytes, .arg = "BYTES", .deflt = "1m",
         .min = 1, .max = 1 << 30, .help = "A byte count ({range})."},
        {.name = "frac", .type = OPTS_DOUBLE, .target = &s->frac, .arg = "F", .deflt = "0.25",
         .min = 0, .max = 1, .help = "Fraction, default {default}."},
        {.name = "period", .type = OPTS_DURATION, .target = &s->period, .arg = "D",
         .deflt = "1s", .min = 0.001, .max = 3600, .help = "Period."},
        {.name = "pos", .type = OPTS_DOUBLE, .target = &s->pos, .arg = "X", .deflt = "1",
         .flags = OPTS_XMIN, .help = "Positive."},
        {.name = "level", .type = OPTS_ENUM, .target = &s->level, .arg = "L", .deflt = "mid",
         .names = levels, .help = "low, mid or high."},
        {.name = "pair", .type = OPTS_FUNC, .target = &s->pair, .func = parse_pair,
         .arg = "A:B", .given = &s->given, .help = "A pair\nof two."},
        {.name = "told", .type = OPTS_INT, .target = &s->n, .arg = "N", .min = 1, .max = 9,
         .wants = "one digit but 0", .help = "Told."},
        {.name = "stop", .type = OPTS_FLAG, .target = &s->stop, .flags = OPTS_STOP,
         .help = "Stop."},
        {.name = "hidden", .type = OPTS_FLAG, .target = &s->flag},
    };
    _Static_assert(sizeof t / sizeof t[0] == NROWS, "NROWS");
    memcpy(rows, t, sizeof t);
}

static char errbuf[4096];

/* Parses argv (NULL-terminated, without the program name) into *s with
 * messages in errbuf; returns opts_parse()'s value. */
static int parse(set_t *s, const char *const *args, int *argi)
{
    char *argv[32] = {"prog"};
    int argc = 1;
    while (args[argc - 1])
        argv[argc] = (char *)args[argc - 1], argc++;
    *s = (set_t){0};
    opts_row_t rows[NROWS];
    rows_for(s, rows);
    FILE *err = fmemopen(errbuf, sizeof errbuf, "w");
    ck_assert_ptr_nonnull(err);
    const opts_cmd_t cmd = {.prog = "prog", .rows = rows, .n = NROWS, .err = err};
    int rc = opts_parse(&cmd, argc, argv, argi);
    fclose(err);
    return rc;
}

START_TEST(test_opts_parse_defaults)
{
    set_t s;
    ck_assert_int_eq(parse(&s, (const char *[]){NULL}, NULL), 0);
    ck_assert_ptr_null(s.file);
    ck_assert_int_eq(s.n, 5);
    ck_assert_uint_eq(s.u, 7);
    ck_assert_uint_eq(s.sz, 3);
    ck_assert_uint_eq(s.bytes, 1 << 20);
    ck_assert_double_eq(s.frac, 0.25);
    ck_assert_double_eq(s.period, 1);
    ck_assert_int_eq(s.level, 1);
    ck_assert_int_eq(s.flag, 0);
    ck_assert_int_eq(s.given, 0);
}
END_TEST

START_TEST(test_opts_parse_types)
{
    set_t s;
    const char *args[] = {"--file", "f.json", "--flag", "--n=10", "--u", "4294967295",
                          "--big", "-5", "--u64", "18446744073709551615", "--size", "9", "--bytes", "64k",
                          "--frac", "1", "--period", "250ms", "--pos", "0.001",
                          "--level", "high", "--pair", "a:b", NULL};
    ck_assert_int_eq(parse(&s, args, NULL), 0);
    ck_assert_str_eq(s.file, "f.json");
    ck_assert_int_eq(s.flag, 1);
    ck_assert_int_eq(s.n, 10);
    ck_assert_uint_eq(s.u, 4294967295u);
    ck_assert_int_eq(s.big, -5);
    ck_assert_uint_eq(s.u64, UINT64_MAX);
    ck_assert_uint_eq(s.sz, 9);
    ck_assert_uint_eq(s.bytes, 65536);
    ck_assert_double_eq(s.frac, 1);
    ck_assert_double_eq(s.period, 0.25);
    ck_assert_double_eq(s.pos, 0.001);
    ck_assert_int_eq(s.level, 2);
    ck_assert_str_eq(s.pair, "a:b");
    ck_assert_int_eq(s.given, 1);
}
END_TEST

START_TEST(test_opts_parse_bad_values)
{
    static const struct {
        const char *a[3];
        const char *msg;
    } cases[] = {
        {{"--n", "0"}, "prog: bad value '0' for --n (an integer 1..10)\n"},
        {{"--n", "11"}, "prog: bad value '11' for --n (an integer 1..10)\n"},
        {{"--n", "5x"}, "prog: bad value '5x' for --n (an integer 1..10)\n"},
        {{"--n", ""}, "prog: bad value '' for --n (an integer 1..10)\n"},
        {{"--u", "-1"}, "prog: bad value '-1' for --u (an integer >= 0)\n"},
        {{"--u", "4294967296"}, "prog: bad value '4294967296' for --u (an integer >= 0)\n"},
        {{"--big", "-6"}, "prog: bad value '-6' for --big (an integer >= -5)\n"},
        {{"--bytes", "0"},
         "prog: bad value '0' for --bytes (a byte count 1..1g; suffix k, m, g or t)\n"},
        {{"--bytes", "2g"},
         "prog: bad value '2g' for --bytes (a byte count 1..1g; suffix k, m, g or t)\n"},
        {{"--bytes", "1x"},
         "prog: bad value '1x' for --bytes (a byte count 1..1g; suffix k, m, g or t)\n"},
        {{"--frac", "1.5"}, "prog: bad value '1.5' for --frac (a number 0..1)\n"},
        {{"--frac", "nan"}, "prog: bad value 'nan' for --frac (a number 0..1)\n"},
        {{"--period", "0ms"},
         "prog: bad value '0ms' for --period (a duration 0.001..3600 s; unit s or ms)\n"},
        {{"--period", "5m"},
         "prog: bad value '5m' for --period (a duration 0.001..3600 s; unit s or ms)\n"},
        {{"--pos", "0"}, "prog: bad value '0' for --pos (a number > 0)\n"},
        {{"--level", "max"}, "prog: bad value 'max' for --level (low, mid or high)\n"},
        {{"--pair", "ab"}, "prog: bad value 'ab' for --pair (A:B)\n"},
        {{"--told", "0"}, "prog: bad value '0' for --told (one digit but 0)\n"},
        {{"--nope"}, "prog: unknown option '--nope'\n"},
        {{"-x"}, "prog: unknown option '-x'\n"},
        {{"--n"}, "prog: option '--n' needs an argument\n"},
        {{"--flag=1"}, "prog: unknown option '--flag=1'\n"},
        {{"extra"}, "prog: unexpected argument 'extra'\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_t s;
        ck_assert_int_eq(parse(&s, cases[i].a, NULL), -EINVAL);
        char want[512];
        snprintf(want, sizeof want, "%sTry 'prog --help'.\n", cases[i].msg);
        ck_assert_str_eq(errbuf, want);
    }
}
END_TEST

START_TEST(test_opts_parse_stop_and_arguments)
{
    set_t s;
    int argi = -1;
    /* Options and arguments mix; argi points at the first argument. */
    ck_assert_int_eq(parse(&s, (const char *[]){"cmd", "--n", "2", "x", NULL}, &argi), 0);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(argi, 3);
    /* A stop row ends parsing: later mistakes are not reported. */
    ck_assert_int_eq(parse(&s, (const char *[]){"--n", "3", "--stop", "--n", "0", NULL}, NULL), 1);
    ck_assert_int_eq(s.stop, 1);
    ck_assert_int_eq(s.n, 3);
    /* Short letters; a bundle of flags and a value. */
    ck_assert_int_eq(parse(&s, (const char *[]){"-f", "-n", "7", NULL}, NULL), 0);
    ck_assert_int_eq(s.flag, 1);
    ck_assert_int_eq(s.n, 7);
    ck_assert_int_eq(parse(&s, (const char *[]){"-fn8", NULL}, NULL), 0);
    ck_assert_int_eq(s.flag, 1);
    ck_assert_int_eq(s.n, 8);
    ck_assert_int_eq(parse(&s, (const char *[]){"-n", "0", NULL}, NULL), -EINVAL);
    ck_assert_str_eq(errbuf, "prog: bad value '0' for --n (an integer 1..10)\nTry 'prog --help'.\n");
    ck_assert_int_eq(parse(&s, (const char *[]){"-n", NULL}, NULL), -EINVAL);
    ck_assert_str_eq(errbuf, "prog: option '-n' needs an argument\nTry 'prog --help'.\n");
    /* The last of a repeated option wins. */
    ck_assert_int_eq(parse(&s, (const char *[]){"--n", "3", "--n", "4", NULL}, NULL), 0);
    ck_assert_int_eq(s.n, 4);
}
END_TEST

START_TEST(test_opts_bad_default)
{
    int n = 0;
    const opts_row_t rows[] = {
        {.name = "n", .type = OPTS_INT, .target = &n, .arg = "N", .deflt = "20", .min = 1,
         .max = 10, .help = ""},
    };
    char *argv[] = {"prog", NULL};
    FILE *err = fmemopen(errbuf, sizeof errbuf, "w");
    const opts_cmd_t cmd = {.prog = "prog", .rows = rows, .n = 1, .err = err};
    ck_assert_int_eq(opts_parse(&cmd, 1, argv, NULL), -EINVAL);
    fclose(err);
    ck_assert_str_eq(errbuf, "prog: bad default '20' for --n (an integer 1..10)\n"
                             "Try 'prog --help'.\n");
    err = fmemopen(errbuf, sizeof errbuf, "w");
    const opts_cmd_t cmd2 = {.prog = "prog", .rows = rows, .n = 1, .err = err};
    ck_assert_int_eq(opts_fail(&cmd2, "need %d more", 2), -EINVAL);
    fclose(err);
    ck_assert_str_eq(errbuf, "prog: need 2 more\nTry 'prog --help'.\n");
}
END_TEST

/* ---- help ---------------------------------------------------------------- */

static char *help_text(int list)
{
    set_t s;
    opts_row_t rows[NROWS];
    rows_for(&s, rows);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    if (list)
        opts_help_list(f, rows, 4, 16);
    else
        opts_help(f, rows, NROWS);
    fclose(f);
    return buf;
}

START_TEST(test_opts_help_man)
{
    char *buf = help_text(0);
    ck_assert_str_eq(buf, "    --file FILE\n"
                          "        Input file.\n"
                          "        Default: (required).\n"
                          "    -f, --flag\n"
                          "        A flag.\n"
                          "    -n, --n N\n"
                          "        Count (1..10).\n"
                          "        Default: 5.\n"
                          "    --u N\n"
                          "        Unsigned.\n"
                          "        Default: 7.\n"
                          "    --big N\n"
                          "        At least -5.\n"
                          "    --u64 N\n"
                          "        Any.\n"
                          "    --size N\n"
                          "        A size.\n"
                          "        Default: 3.\n"
                          "    --bytes BYTES\n"
                          "        A byte count (1..1g).\n"
                          "        Default: 1m.\n"
                          "    --frac F\n"
                          "        Fraction, default 0.25.\n"
                          "    --period D\n"
                          "        Period.\n"
                          "        Default: 1s.\n"
                          "    --pos X\n"
                          "        Positive.\n"
                          "        Default: 1.\n"
                          "    --level L\n"
                          "        low, mid or high.\n"
                          "        Default: mid.\n"
                          "    --pair A:B\n"
                          "        A pair\n"
                          "        of two.\n"
                          "    --told N\n"
                          "        Told.\n"
                          "    --stop\n"
                          "        Stop.\n");
    free(buf);
}
END_TEST

START_TEST(test_opts_help_list)
{
    char *buf = help_text(1);
    ck_assert_str_eq(buf, "  --file FILE     Input file. (default (required))\n"
                          "  -f, --flag      A flag.\n"
                          "  -n, --n N       Count (1..10). (default 5)\n"
                          "  --u N           Unsigned. (default 7)\n");
    free(buf);
    /* Long heads push the text two spaces on; continuations line up. */
    int n = 0;
    const opts_row_t rows[] = {
        {.name = "write-buckets", .type = OPTS_STRING, .target = NULL, .arg = "FILE",
         .help = "write the file\nand exit"},
        {.name = "n", .type = OPTS_INT, .target = &n, .arg = "N", .deflt = "8",
         .help = "nodes (default {default}):\nmore"},
    };
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    opts_help_list(f, rows, 2, 16);
    fclose(f);
    ck_assert_str_eq(buf, "  --write-buckets FILE  write the file\n"
                          "                  and exit\n"
                          "  --n N           nodes (default 8):\n"
                          "                  more\n");
    free(buf);
}
END_TEST

START_TEST(test_opts_help_table)
{
    int n = 0, q = 0;
    const opts_row_t rows[] = {
        {.name = "out", .shrt = 'o', .type = OPTS_STRING, .target = NULL, .arg = "DIR",
         .help = "write into DIR\n(created)"},
        {.name = "profile-outstanding", .type = OPTS_INT, .target = &n, .arg = "N",
         .deflt = "10", .help = "in flight"},
        {.name = "n", .type = OPTS_INT, .target = &n, .arg = "N", .deflt = "8",
         .help = "nodes"},
        {.name = "quiet", .shrt = 'q', .type = OPTS_FLAG, .target = &q},
    };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    opts_help_table(f, rows, 4, 4, 16);
    fclose(f);
    ck_assert_str_eq(buf, "    -o, --out DIR   write into DIR\n"
                          "                    (created)\n"
                          "        --profile-outstanding N\n"
                          "                    in flight (default 10)\n"
                          "        --n N       nodes (default 8)\n");
    free(buf);
}
END_TEST

START_TEST(test_opts_help_roff)
{
    int flag = 0;
    const char *file = NULL;
    const opts_row_t rows[] = {
        {.name = "flag", .shrt = 'f', .type = OPTS_FLAG, .target = &flag, .help = "A flag."},
        {.name = "file", .type = OPTS_STRING, .target = &file, .arg = "FILE", .deflt = "a-b",
         .help = "Path\n.hidden, 'quoted' or C:\\dir\n\nFormat {\"a\":[1,2]}, x, y."},
        {.name = "secret", .type = OPTS_FLAG, .target = &flag},
    };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    opts_help_roff(f, rows, 3);
    fclose(f);
    ck_assert_str_eq(buf, ".TP\n"
                          "\\fB\\-f\\fR, \\fB\\-\\-flag\\fR\n"
                          "A flag.\n"
                          ".TP\n"
                          "\\fB\\-\\-file\\fR \\fIFILE\\fR\n"
                          "Path\n"
                          "\\&.hidden, 'quoted' or C:\\edir\n"
                          ".sp\n"
                          "Format {\"a\":[1,\\:2]}, x, y.\n"
                          ".br\n"
                          "Default: a\\-b.\n");
    free(buf);
}
END_TEST

/* Writes `text` to a new temporary file; returns its path (static). */
static const char *settings_file(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/test_opts.XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

START_TEST(test_opts_settings_file)
{
    set_t s;
    /* Every type, comments, quoting; the command line overrides the file. */
    const char *p = settings_file("# a comment\n"
                                  "\n"
                                  "  file = \" spaced # name \"   # trailing comment\n"
                                  "n=9\n"
                                  "flag = yes\n"
                                  "period = 250ms\n"
                                  "level = high\n"
                                  "pair = a:b\n"
                                  "bytes = 64k  # sixty-four\n");
    ck_assert_int_eq(parse(&s, (const char *[]){"--settings", p, "--n", "3", NULL}, NULL), 0);
    ck_assert_str_eq(s.file, " spaced # name ");
    ck_assert_int_eq(s.n, 3);
    ck_assert_int_eq(s.flag, 1);
    ck_assert_double_eq(s.period, 0.25);
    ck_assert_int_eq(s.level, 2);
    ck_assert_str_eq(s.pair, "a:b");
    ck_assert_int_eq(s.given, 1);
    ck_assert_uint_eq(s.bytes, 65536);
    /* The order on the command line does not matter: argv still wins. */
    ck_assert_int_eq(parse(&s, (const char *[]){"--n", "4", "--settings=" , NULL}, NULL), -EBADMSG);
    char arg[96];
    snprintf(arg, sizeof arg, "--settings=%s", p);
    ck_assert_int_eq(parse(&s, (const char *[]){"--n", "4", arg, NULL}, NULL), 0);
    ck_assert_int_eq(s.n, 4);
    unlink(p);

    /* Every problem, each at its line and column (characters). */
    p = settings_file("n = 0\n"
                      "nope = 1\n"
                      "flag = maybe\n"
                      "  = 5\n"
                      "file\n"
                      "period = \"1s\n"
                      "level =\n"
                      "n = 2\n"
                      "help = true\n"
                      "file = \"\u00e9\" x\n");
    ck_assert_int_eq(parse(&s, (const char *[]){"--settings", p, NULL}, NULL), -EBADMSG);
    char want[2048];
    snprintf(want, sizeof want,
             "prog: %1$s:1:5: bad value '0' for n (an integer 1..10)\n"
             "prog: %1$s:2:1: unknown setting 'nope'\n"
             "prog: %1$s:3:8: bad value 'maybe' for flag (true or false)\n"
             "prog: %1$s:4:3: expected an option name\n"
             "prog: %1$s:5:5: expected '=' after the name\n"
             "prog: %1$s:6:10: no closing '\"'\n"
             "prog: %1$s:7:8: no value (write \"\" for an empty one)\n"
             "prog: %1$s:8:1: 'n' set twice (first on line 1)\n"
             "prog: %1$s:9:1: unknown setting 'help'\n"
             "prog: %1$s:10:12: text after the closing '\"'\n",
             p);
    ck_assert_str_eq(errbuf, want);
    unlink(p);

    /* A file that cannot be read; a setting that stops (as on argv). */
    ck_assert_int_eq(parse(&s, (const char *[]){"--settings", "/nonexistent/s", NULL}, NULL),
                     -EBADMSG);
    ck_assert_ptr_nonnull(strstr(errbuf, "cannot read settings file /nonexistent/s"));
    p = settings_file("stop = true\n");
    ck_assert_int_eq(parse(&s, (const char *[]){"--settings", p, NULL}, NULL), 1);
    ck_assert_int_eq(s.stop, 1);
    char v[32];
    char *argv[] = {"prog", "--settings", (char *)p, NULL};
    ck_assert_int_eq(opts_settings_peek(3, argv, "stop", v, sizeof v), 1);
    ck_assert_str_eq(v, "true");
    ck_assert_int_eq(opts_settings_peek(3, argv, "n", v, sizeof v), 0);
    unlink(p);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_opts_num_integers, test_opts_num_doubles_durations_bytes,
                                  test_opts_parse_defaults, test_opts_parse_types,
                                  test_opts_parse_bad_values, test_opts_parse_stop_and_arguments,
                                  test_opts_bad_default, test_opts_help_man, test_opts_help_list,
                                  test_opts_help_table, test_opts_help_roff,
                                  test_opts_settings_file};
    return testlib_run_tests("opts", tests, sizeof tests / sizeof tests[0]);
}
