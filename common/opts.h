/* opts.h - the typed option table: one row per long option gives its name, type, target, default, bounds and help; one call parses argv into the targets and --help is printed from the rows. */
#ifndef BQOS_OPTS_H
#define BQOS_OPTS_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Example (controller/daemon/main.c, controller/ctl/ctl.c follow it):
 *
 *     typedef struct { int intervals; const char *file; int help; } settings_t;
 *     settings_t s = {0};
 *     const opts_row_t rows[] = {
 *         {.name = "intervals", .type = OPTS_INT, .target = &s.intervals, .arg = "K",
 *          .deflt = "5", .min = 1, .max = 1000, .help = "Intervals per period ({range})."},
 *         {.name = "file", .type = OPTS_STRING, .target = &s.file, .arg = "FILE",
 *          .show = "(required)", .help = "Input file."},
 *         {.name = "help", .type = OPTS_FLAG, .target = &s.help, .flags = OPTS_STOP,
 *          .help = "Print this help and exit."},
 *     };
 *     const opts_cmd_t cmd = {.prog = "prog", .rows = rows, .n = 3};
 *     int rc = opts_parse(&cmd, argc, argv, NULL);
 *     if (rc < 0)
 *         return 2;
 *     if (s.help)
 *         return opts_help(stdout, rows, 3), 0;
 */

/* What an option's argument is and what its target points to. */
typedef enum {
    OPTS_FLAG,     /* no argument; int target set to 1 */
    OPTS_STRING,   /* const char * target set to the argument (argv's memory) */
    OPTS_INT,      /* int; num_i64() */
    OPTS_UINT,     /* unsigned; num_u64() */
    OPTS_I64,      /* int64_t; num_i64() */
    OPTS_U64,      /* uint64_t; num_u64() */
    OPTS_SIZE,     /* size_t; num_u64() */
    OPTS_DOUBLE,   /* double; num_double() */
    OPTS_DURATION, /* double seconds; num_duration(): "2", "2s", "500ms" */
    OPTS_BYTES,    /* uint64_t bytes; num_bytes(): "4096", "64k", "1g" */
    OPTS_ENUM,     /* int set to the index of the argument in .names */
    OPTS_FUNC      /* .func(arg, target) parses it; returns 0 or -errno */
} opts_type_t;

/* Row flags. */
enum {
    OPTS_STOP = 1u, /* when seen, opts_parse() stops and returns 1 (--help, --version) */
    OPTS_XMIN = 2u  /* the lower bound is exclusive: value > min */
};

/* One option.  Rows are constant tables (static const in the program)
 * whose targets point into the caller's settings struct.  Help texts may
 * use "{default}", "{min}", "{max}" and "{range}" (MIN..MAX), replaced by
 * the row's values when --help is printed. */
typedef struct {
    const char *name;         /* long option, without "--" */
    opts_type_t type;
    char shrt;                /* short option letter, or 0 for none */
    void *target;             /* where the value goes (see opts_type_t); NULL: ignored */
    const char *deflt;        /* text parsed into target before argv (and shown as the
                               * default; OPTS_FLAG: only shown); NULL: the caller
                               * initialises the target */
    double min, max;          /* inclusive bounds of numbers when min < max; otherwise
                               * the target type's range (integer bounds within 2^53) */
    const char *arg;          /* argument name in --help; NULL for OPTS_FLAG */
    const char *help;         /* lines separated by '\n'; NULL: not listed in --help */
    const char *show;         /* default shown in --help instead of deflt; NULL: deflt */
    const char *const *names; /* OPTS_ENUM: the accepted words, NULL-terminated */
    const char *wants;        /* what a bad value is told it should be; NULL: from the
                               * type and bounds ("an integer 1..64"; OPTS_FUNC: arg) */
    int (*func)(const char *arg, void *target); /* OPTS_FUNC */
    int *given;               /* if not NULL, set to 1 when the option is used */
    unsigned flags;           /* OPTS_STOP, OPTS_XMIN */
} opts_row_t;

/* A program's table.  Read-only; may be a static const. */
typedef struct {
    const char *prog;        /* program name that starts every message */
    const opts_row_t *rows;
    size_t n;
    FILE *err;               /* where messages go; NULL: stderr */
} opts_cmd_t;

/* Sets every target that has a default, then parses argv (getopt_long,
 * long options only, "--name=value" or "--name value", options and
 * arguments in any order) into the targets, checking types and bounds.
 * argi: if not NULL, receives the index of the first non-option argument
 * (argc if none); if NULL, non-option arguments are refused.
 * Returns 0 to go on, 1 when an OPTS_STOP row was seen (its target is set;
 * the caller prints help or version and exits 0), or -EINVAL after
 * printing "PROG: bad value 'ARG' for --NAME (WHAT IT WANTS)" (or unknown
 * option, missing argument, unexpected argument) and "Try 'PROG --help'."
 * to cmd->err: the caller exits 2.  A default that does not parse is a
 * programming error and reported the same way.
 *
 * Settings file: every table also takes --settings FILE (unless it has a
 * row of that name itself), read after argv, so that the command line
 * overrides it.  One setting a line, "name = value": name a row's long
 * name (not help or version), value as on the command line (a flag's:
 * true/yes/on/1 or false/no/off/0), in double quotes (\" and \\
 * escaped) to keep leading or trailing spaces or a " #"; blank lines and
 * text from a '#' at a line's start or after a space are comments; a name
 * given twice is an error.  Each problem is printed as "PROG:
 * FILE:LINE:COL: TEXT" (columns in characters, at the name or the value);
 * then -EBADMSG is returned (a configuration error: opts_start() makes it
 * exit status 1, as a bad configuration file is for the daemons).  Values
 * of strings (and OPTS_FUNC arguments) stay allocated for the life of the
 * process, like argv.  A first argument
 * "--help-man" (hidden, for the build) prints the rows with
 * opts_help_roff() on stdout and exits the process: 0, or 1 if stdout
 * fails.  Uses getopt's globals:
 * call from one thread only, usually main's. */
int opts_parse(const opts_cmd_t *cmd, int argc, char **argv, int *argi);

/* The --settings row opts_parse() adds to every table: what --help and the
 * manual pages show for it (opts_print_usage() and --help-man insert it
 * before the first OPTS_STOP row; a program that prints its rows itself
 * prints this one too). */
extern const opts_row_t opts_settings_row;

/* For a program that must know a value before opts_parse() (the node's
 * kind): copies the value `key` has in the settings file named on argv
 * (--settings FILE or --settings=FILE) into buf (`cap` bytes).  Returns 1
 * if found, 0 if there is no such file or key (problems are left to
 * opts_parse() to report). */
int opts_settings_peek(int argc, char **argv, const char *key, char *buf, size_t cap);

/* Prints "PROG: <formatted message>" and "Try 'PROG --help'." to cmd->err,
 * for the checks a program makes after opts_parse().  Returns -EINVAL. */
int opts_fail(const opts_cmd_t *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* OPTS_FUNC for --log-level: a level word (bqos_log_parse_level(): error,
 * warn, info, debug) into the bqos_log_level_t at target.  Returns 0 or
 * -EINVAL. */
int opts_log_level(const char *arg, void *target);

/* Prints the rows as man-page text: "    --name ARG" (or "    -x, --name ARG"), the help lines indented
 * by 8, then "        Default: X." (X from show or deflt, unless the help
 * already says "{default}"). */
void opts_help(FILE *out, const opts_row_t *t, size_t n);
/* (The help printers only read the rows: any thread may call them.) */

/* Prints the rows as a compact list: "  --name ARG" (or "  -x, --name ARG") padded to `width`
 * columns (or followed by two spaces when longer), the help lines
 * (continuations indented to the same column), and " (default X)" after
 * the last line unless the help says "{default}" or there is none. */
void opts_help_list(FILE *out, const opts_row_t *t, size_t n, int width);

/* Prints the rows as a manual's OPTIONS list: `indent` spaces, then
 * "-x, --name ARG" (or, when some row of the table has a short letter,
 * "    --name ARG" so that long names line up) padded to `width` columns
 * with at least one space before the help; a longer head gets a line of
 * its own and the help starts on the next line.  Continuations and the
 * " (default X)" after the last line are as in opts_help_list(). */
void opts_help_table(FILE *out, const opts_row_t *t, size_t n, int indent, int width);

/* Prints the rows as the body of a manual page's OPTIONS section in roff
 * (man(7) macros): per row a .TP paragraph with "\fB-x\fR, \fB--name\fR
 * \fIARG\fR" as its tag, the expanded help lines (filled by the formatter:
 * a '\n' in a help text is a space there, an empty line a paragraph break)
 * and "Default: X." on a line of its own.  Text is escaped for roff.
 * opts_parse() calls it when the first argument is the hidden --help-man
 * (see there): mk/build.mk generates every program's OPTIONS section from
 * its own table, so manual pages never drift from the code. */
void opts_help_roff(FILE *out, const opts_row_t *t, size_t n);

/* Which printer above lays out the rows of a --help text. */
typedef enum {
    OPTS_LAYOUT_MAN,   /* opts_help() */
    OPTS_LAYOUT_LIST,  /* opts_help_list(width) */
    OPTS_LAYOUT_TABLE  /* opts_help_table(indent, width) */
} opts_layout_t;

/* A program's --help text: head, its option rows in `layout`, tail.
 * Constant data, usually one static const per program. */
typedef struct {
    const char *head;     /* printed as is before the rows */
    opts_layout_t layout;
    int indent;           /* OPTS_LAYOUT_TABLE */
    int width;            /* OPTS_LAYOUT_LIST, OPTS_LAYOUT_TABLE */
    const char *tail;     /* printed as is after the rows; NULL: nothing */
} opts_usage_t;

/* Prints u's text with the n rows of t (and opts_settings_row) to out. */
void opts_print_usage(FILE *out, const opts_usage_t *u, const opts_row_t *t, size_t n);

/* The start of a program's main(): opts_parse(cmd, argc, argv, argi), then
 * --help and --version, found as the rows of cmd named "help" and
 * "version" (int targets): prints u's text with cmd's rows, or
 * "PROG BQOS_VERSION" and `note` (NULL: nothing) on a line, on stdout.
 * Returns -1 to go on, 0 after --help or --version, 1 after a bad settings
 * file, 2 after bad usage (opts_parse() said why). */
int opts_start(const opts_cmd_t *cmd, int argc, char **argv, int *argi, const opts_usage_t *u,
               const char *note);

/* The --help and --version rows that end a program's table: OPTS_STOP
 * flags into the int at `where`, short letter `letter` (0: none), help line
 * `text` (NULL: not listed in --help). */
#define OPTS_HELP_ROW(letter, where, text)                                              \
    {.name = "help", .shrt = (letter), .type = OPTS_FLAG, .target = (where),            \
     .flags = OPTS_STOP, .help = (text)}
#define OPTS_VERSION_ROW(letter, where, text)                                           \
    {.name = "version", .shrt = (letter), .type = OPTS_FLAG, .target = (where),         \
     .flags = OPTS_STOP, .help = (text)}

/* Copies `local`, an array of rows built with the targets of this call,
 * into rows[0..n-1]; fails to compile unless local has exactly n rows. */
#define OPTS_COPY_ROWS(rows, local, n)                                                  \
    do {                                                                                \
        _Static_assert(sizeof(local) / sizeof((local)[0]) == (n), "rows: " #n);         \
        memcpy((rows), (local), sizeof(local));                                         \
    } while (0)

#endif
