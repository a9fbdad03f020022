/* opts.h - option tables: one row per long option drives getopt_long, the --help text and error messages. */
#ifndef BQOS_OPTS_H
#define BQOS_OPTS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *name;  /* long option, without "--" */
    int id;            /* what getopt_long returns for it */
    const char *arg;   /* argument name in --help; NULL: takes no argument */
    const char *deflt; /* default shown in --help; NULL: none */
    const char *help;  /* lines separated by '\n', no trailing newline */
} opts_t;

/* Fills lo[0..n] for getopt_long from the n rows of t (lo must hold n + 1
 * entries; the last is the zero terminator). */
void opts_getopt(const opts_t *t, size_t n, struct option *lo);

/* Prints the rows as man-page text: "    --name ARG", the help lines
 * indented by 8, then "Default: ...". */
void opts_usage(FILE *out, const opts_t *t, size_t n);

/* The long name of option `id`, or "?" if no row has it. */
const char *opts_name(const opts_t *t, size_t n, int id);

#endif
