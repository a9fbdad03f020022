/* opts.c - the typed option table: defaults, getopt_long parsing with types and bounds, and --help from the rows. */
#include "common/opts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/num.h"
#include "common/version.h"

/* Long options get ids past every character getopt_long may return. */
#define ID0 256

/* ---- values -------------------------------------------------------------- */

static int is_integer(opts_type_t t)
{
    return t == OPTS_INT || t == OPTS_UINT || t == OPTS_I64 || t == OPTS_U64 || t == OPTS_SIZE ||
           t == OPTS_BYTES;
}

/* The largest value the target type holds, as a double. */
static double type_max(opts_type_t t)
{
    switch (t) {
    case OPTS_INT: return INT_MAX;
    case OPTS_UINT: return UINT_MAX;
    case OPTS_I64: return (double)INT64_MAX;
    case OPTS_U64:
    case OPTS_BYTES: return (double)UINT64_MAX;
    case OPTS_SIZE: return (double)SIZE_MAX;
    default: return INFINITY;
    }
}

static int bounded(const opts_row_t *r)
{
    return r->min < r->max;
}

static int in_bounds(const opts_row_t *r, double v)
{
    if ((bounded(r) || (r->flags & OPTS_XMIN)) && !((r->flags & OPTS_XMIN) ? v > r->min : v >= r->min))
        return 0;
    return !bounded(r) || v <= r->max;
}

/* Parses arg into r's target.  Returns 0, -EINVAL or -ERANGE. */
static int set_value(const opts_row_t *r, const char *arg)
{
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    int rc = 0;
    switch (r->type) {
    case OPTS_FLAG:
        break;
    case OPTS_STRING:
        if (r->target)
            *(const char **)r->target = arg;
        return 0;
    case OPTS_INT:
    case OPTS_I64:
        rc = num_i64(arg, &i);
        if (rc == 0 && r->type == OPTS_INT && (i < INT_MIN || i > INT_MAX))
            rc = -ERANGE;
        d = (double)i;
        break;
    case OPTS_UINT:
    case OPTS_U64:
    case OPTS_SIZE:
        rc = num_u64(arg, &u);
        if (rc == 0 && (double)u > type_max(r->type))
            rc = -ERANGE;
        d = (double)u;
        break;
    case OPTS_BYTES:
        rc = num_bytes(arg, &u);
        d = (double)u;
        break;
    case OPTS_DOUBLE:
        rc = num_double(arg, &d);
        break;
    case OPTS_DURATION:
        rc = num_duration(arg, &d);
        break;
    case OPTS_ENUM:
        for (size_t k = 0; r->names && r->names[k]; k++) {
            if (strcmp(arg, r->names[k]) == 0) {
                if (r->target)
                    *(int *)r->target = (int)k;
                return 0;
            }
        }
        return -EINVAL;
    case OPTS_FUNC:
        return r->func ? r->func(arg, r->target) : -EINVAL;
    }
    if (rc == 0 && !in_bounds(r, d))
        rc = -ERANGE;
    if (rc < 0 || !r->target)
        return rc;
    switch (r->type) {
    case OPTS_FLAG: *(int *)r->target = 1; break;
    case OPTS_INT: *(int *)r->target = (int)i; break;
    case OPTS_I64: *(int64_t *)r->target = i; break;
    case OPTS_UINT: *(unsigned *)r->target = (unsigned)u; break;
    case OPTS_U64:
    case OPTS_BYTES: *(uint64_t *)r->target = u; break;
    case OPTS_SIZE: *(size_t *)r->target = (size_t)u; break;
    default: *(double *)r->target = d; break;
    }
    return 0;
}

/* Formats a bound: integers in full ("9007199254740992", not "9.0e+15"). */
static const char *fmt_num(double v, char *buf, size_t cap)
{
    if (v == floor(v) && fabs(v) < 1e19)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%.15g", v);
    return buf;
}

/* Formats a bound of r: bytes with the largest suffix that divides them
 * ("1g", not "1073741824"), other numbers as fmt_num(). */
static const char *fmt_bound(const opts_row_t *r, double v, char *buf, size_t cap)
{
    int k = 0;
    if (r->type != OPTS_BYTES || v < 1024 || v != floor(v) || v >= 0x1p64)
        return fmt_num(v, buf, cap);
    uint64_t u = (uint64_t)v;
    while (k < 4 && u % 1024 == 0)
        u /= 1024, k++;
    if (k == 0)
        return fmt_num(v, buf, cap);
    snprintf(buf, cap, "%llu%c", (unsigned long long)u, "kmgt"[k - 1]);
    return buf;
}

/* What the option wants, for error messages: "an integer 1..1000". */
static void want(const opts_row_t *r, char *buf, size_t cap)
{
    if (r->wants) {
        snprintf(buf, cap, "%s", r->wants);
        return;
    }
    const char *what = r->type == OPTS_BYTES ? "a byte count"
                       : is_integer(r->type) ? "an integer"
                       : r->type == OPTS_DOUBLE ? "a number"
                       : r->type == OPTS_DURATION ? "a duration"
                       : NULL;
    if (r->type == OPTS_ENUM) {
        size_t len = 0;
        buf[0] = '\0';
        for (size_t k = 0; r->names && r->names[k] && len < cap; k++)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", k == 0 ? "" : !r->names[k + 1] ? " or " : ", ",
                                    r->names[k]);
        return;
    }
    if (!what) {
        snprintf(buf, cap, "%s", r->arg ? r->arg : "a value");
        return;
    }
    const char *ge = (r->flags & OPTS_XMIN) ? ">" : ">=";
    const char *unit = r->type == OPTS_DURATION ? " s; unit s or ms"
                       : r->type == OPTS_BYTES ? "; suffix k, m, g or t"
                       : "";
    char lo[32], hi[32];
    fmt_bound(r, r->min, lo, sizeof lo);
    fmt_bound(r, r->max, hi, sizeof hi);
    if (bounded(r) && r->max < type_max(r->type))
        snprintf(buf, cap, "%s %s..%s%s", what, lo, hi, unit);
    else if (bounded(r) || (r->flags & OPTS_XMIN))
        snprintf(buf, cap, "%s %s %s%s", what, ge, lo, unit);
    else if (r->type == OPTS_UINT || r->type == OPTS_U64 || r->type == OPTS_SIZE ||
             r->type == OPTS_BYTES)
        snprintf(buf, cap, "%s >= 0%s", what, unit);
    else
        snprintf(buf, cap, "%s%s", what, r->type == OPTS_DURATION ? " (s or ms)" : "");
}

/* ---- settings files ------------------------------------------------------ */

const opts_row_t opts_settings_row = {
    .name = "settings", .type = OPTS_STRING, .arg = "FILE", .show = "none",
    .help = "Read options from FILE, one \"name = value\" a line: the long options'\n"
            "names without \"--\", a flag's value true or false, a value in double\n"
            "quotes where it has leading or trailing spaces or \" #\"; '#' starts a\n"
            "comment.  Options on the command line override the file's."};

/* Values of OPTS_STRING settings live as long as the process, as argv's
 * do: each is kept on this chain, which only grows (a settings file is
 * read once per program start). */
typedef struct kept {
    struct kept *next;
    char s[];
} kept_t;
static kept_t *kept_strings;

static const char *keep(const char *s)
{
    size_t n = strlen(s);
    kept_t *k = malloc(sizeof *k + n + 1);
    if (!k)
        return NULL;
    memcpy(k->s, s, n + 1);
    k->next = kept_strings;
    kept_strings = k;
    return k->s;
}

/* The column (1-based, in characters) of byte `at` of `line`. */
static int column(const char *line, size_t at)
{
    int c = 1;
    for (size_t i = 0; i < at; i++)
        c += ((unsigned char)line[i] & 0xC0) != 0x80;
    return c;
}

/* One line of a settings file, split in place. */
typedef struct {
    const char *key; /* NULL: a blank or comment line */
    size_t keylen;
    int keycol;
    char *val;       /* NUL-terminated, unquoted */
    int valcol;
    const char *err; /* NULL, or what is wrong, at errcol */
    int errcol;
} sline_t;

static int is_ws(int c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Splits `line` (NUL-terminated; changed) into *l. */
static void split_line(char *line, sline_t *l)
{
    *l = (sline_t){0};
    char *p = line;
    while (is_ws(*p))
        p++;
    if (!*p || *p == '#')
        return;
    l->key = p;
    while (*p && (*p == '-' || *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9')))
        p++;
    l->keylen = (size_t)(p - l->key);
    l->keycol = column(line, (size_t)(l->key - line));
    while (*p == ' ' || *p == '\t')
        p++;
    if (l->keylen == 0 || *p != '=') {
        l->err = l->keylen == 0 ? "expected an option name" : "expected '=' after the name";
        l->errcol = column(line, (size_t)(p - line));
        return;
    }
    p++;
    while (*p == ' ' || *p == '\t')
        p++;
    l->val = p;
    l->valcol = column(line, (size_t)(p - line));
    if (*p == '"') { /* "..." with \" and \\ */
        char *o = p;
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                p++;
            *o++ = *p;
        }
        if (*p != '"') {
            l->err = "no closing '\"'";
            l->errcol = l->valcol;
            return;
        }
        *o = '\0';
        for (p++; *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'; p++)
            ;
        if (*p && *p != '#') {
            l->err = "text after the closing '\"'";
            l->errcol = column(line, (size_t)(p - line));
        }
        return;
    }
    char *end = p;
    for (; *p && *p != '\n'; p++) {
        if (*p == '#' && p > l->val && is_ws(p[-1]))
            break;
        if (!is_ws(*p))
            end = p + 1;
    }
    *end = '\0';
    if (!*l->val) {
        l->err = "no value (write \"\" for an empty one)";
        l->errcol = l->valcol;
    }
}

/* The row of cmd named by l's key, or NULL. */
static const opts_row_t *find_row(const opts_cmd_t *cmd, const sline_t *l, size_t *idx)
{
    for (size_t i = 0; i < cmd->n; i++) {
        if (strlen(cmd->rows[i].name) == l->keylen &&
            strncmp(cmd->rows[i].name, l->key, l->keylen) == 0) {
            *idx = i;
            return &cmd->rows[i];
        }
    }
    return NULL;
}

static int bool_word(const char *v)
{
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0)
            return 1;
        if (strcmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

static void settings_problem(const opts_cmd_t *cmd, const char *path, int line, int col,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void settings_problem(const opts_cmd_t *cmd, const char *path, int line, int col,
                             const char *fmt, ...)
{
    FILE *err = cmd->err ? cmd->err : stderr;
    va_list ap;
    va_start(ap, fmt);
    fprintf(err, "%s: %s:%d:%d: ", cmd->prog, path, line, col);
    vfprintf(err, fmt, ap);
    fputc('\n', err);
    va_end(ap);
}

/* Applies settings file `path` to cmd's rows, except those given on the
 * command line (cl[i] set).  Every problem is printed with its position.
 * Returns 0, 1 if an OPTS_STOP row was set, or -EBADMSG. */
static int read_settings(const opts_cmd_t *cmd, const char *path, const int *cl)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        FILE *err = cmd->err ? cmd->err : stderr;
        fprintf(err, "%s: cannot read settings file %s: %s\n", cmd->prog, path, strerror(errno));
        return -EBADMSG;
    }
    int *seen = calloc(cmd->n + 1, sizeof *seen);
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, problems = 0, stop = 0;
    if (!seen) {
        fclose(f);
        return -ENOMEM;
    }
    while (getline(&line, &cap, f) >= 0) {
        sline_t l;
        size_t i = 0;
        lineno++;
        split_line(line, &l);
        if (!l.key)
            continue;
        const opts_row_t *r = l.err ? NULL : find_row(cmd, &l, &i);
        if (l.err) {
            settings_problem(cmd, path, lineno, l.errcol, "%s", l.err);
        } else if (!r || strcmp(r->name, "help") == 0 || strcmp(r->name, "version") == 0) {
            settings_problem(cmd, path, lineno, l.keycol, "unknown setting '%.*s'",
                             (int)l.keylen, l.key);
        } else if (seen[i]) {
            settings_problem(cmd, path, lineno, l.keycol, "'%s' set twice (first on line %d)",
                             r->name, seen[i]);
        } else {
            seen[i] = lineno;
            if (cl[i])
                continue; /* the command line wins */
            int b = r->type == OPTS_FLAG ? bool_word(l.val) : 0;
            const char *v = r->type == OPTS_FLAG ? l.val : keep(l.val); /* OPTS_FUNC may keep it */
            if (!v) {
                settings_problem(cmd, path, lineno, l.valcol, "out of memory");
            } else if (b < 0) {
                settings_problem(cmd, path, lineno, l.valcol,
                                 "bad value '%s' for %s (true or false)", l.val, r->name);
            } else if (r->type != OPTS_FLAG && set_value(r, v) < 0) {
                char w[256];
                want(r, w, sizeof w);
                settings_problem(cmd, path, lineno, l.valcol, "bad value '%s' for %s (%s)",
                                 l.val, r->name, w);
            } else {
                if (r->type == OPTS_FLAG && r->target)
                    *(int *)r->target = b;
                if (r->given)
                    *r->given = 1;
                stop |= (r->flags & OPTS_STOP) != 0;
                continue;
            }
        }
        problems++;
    }
    if (ferror(f)) {
        settings_problem(cmd, path, lineno + 1, 1, "read error: %s", strerror(errno));
        problems++;
    }
    free(line);
    free(seen);
    fclose(f);
    return problems ? -EBADMSG : stop;
}

/* The settings file named on argv (--settings FILE or --settings=FILE,
 * before any "--"), or NULL. */
static const char *settings_arg(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--settings") == 0 && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--settings=", 11) == 0)
            return argv[i] + 11;
    }
    return NULL;
}

int opts_settings_peek(int argc, char **argv, const char *key, char *buf, size_t cap)
{
    const char *path = settings_arg(argc, argv);
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return 0;
    char *line = NULL;
    size_t lc = 0;
    int found = 0;
    while (!found && getline(&line, &lc, f) >= 0) {
        sline_t l;
        split_line(line, &l);
        if (l.key && !l.err && strlen(key) == l.keylen && strncmp(key, l.key, l.keylen) == 0) {
            snprintf(buf, cap, "%s", l.val);
            found = 1;
        }
    }
    free(line);
    fclose(f);
    return found;
}

/* Whether cmd's own table has a row named "settings" (then it is theirs). */
static int own_settings(const opts_cmd_t *cmd)
{
    for (size_t i = 0; i < cmd->n; i++)
        if (strcmp(cmd->rows[i].name, "settings") == 0)
            return 1;
    return 0;
}

/* A copy of the n rows at t with opts_settings_row before the first
 * OPTS_STOP row (--help, --version), unless the table has its own; *m
 * gets the count.  Caller frees; NULL if out of memory. */
static opts_row_t *with_settings(const opts_row_t *t, size_t n, size_t *m)
{
    opts_row_t *all = malloc((n + 1) * sizeof *all);
    if (!all)
        return NULL;
    const opts_cmd_t c = {.rows = t, .n = n};
    size_t k = 0, at = n;
    for (size_t i = 0; i < n && at == n; i++)
        if (t[i].flags & OPTS_STOP)
            at = i;
    for (size_t i = 0; i < n; i++) {
        if (i == at && !own_settings(&c))
            all[k++] = opts_settings_row;
        all[k++] = t[i];
    }
    if (at == n && !own_settings(&c))
        all[k++] = opts_settings_row;
    *m = k;
    return all;
}

/* ---- parsing ------------------------------------------------------------- */

static void vfail(const opts_cmd_t *cmd, const char *fmt, va_list ap)
{
    FILE *err = cmd->err ? cmd->err : stderr;
    fprintf(err, "%s: ", cmd->prog);
    if (fmt) /* never NULL; says so to gcc -fsanitize=undefined, which warns otherwise */
        vfprintf(err, fmt, ap);
    fprintf(err, "\nTry '%s --help'.\n", cmd->prog);
}

int opts_log_level(const char *arg, void *target)
{
    return bqos_log_parse_level(arg, target) < 0 ? -EINVAL : 0;
}

int opts_fail(const opts_cmd_t *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(cmd, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int bad_value(const opts_cmd_t *cmd, const opts_row_t *r, const char *arg, const char *what)
{
    char w[256];
    want(r, w, sizeof w);
    return opts_fail(cmd, "bad %s '%s' for --%s (%s)", what, arg, r->name, w);
}

int opts_parse(const opts_cmd_t *cmd, int argc, char **argv, int *argi)
{
    if (argc >= 2 && strcmp(argv[1], "--help-man") == 0) { /* the build's man page generator */
        size_t m;
        opts_row_t *all = with_settings(cmd->rows, cmd->n, &m);
        if (all)
            opts_help_roff(stdout, all, m);
        free(all);
        exit(all && fflush(stdout) == 0 ? 0 : 1);
    }
    int rc = 0;
    const char *settings = NULL;
    int own = own_settings(cmd);
    struct option *lo = calloc(cmd->n + 2, sizeof *lo);
    char *so = malloc(2 * cmd->n + 2);
    int *cl = calloc(cmd->n + 1, sizeof *cl); /* rows given on the command line */
    if (!lo || !so || !cl) {
        rc = opts_fail(cmd, "out of memory");
        goto out;
    }
    size_t sn = 0;
    so[sn++] = ':';
    for (size_t i = 0; i < cmd->n; i++) {
        const opts_row_t *r = &cmd->rows[i];
        lo[i] = (struct option){r->name, r->type == OPTS_FLAG ? no_argument : required_argument,
                                NULL, ID0 + (int)i};
        if (r->shrt) {
            so[sn++] = r->shrt;
            if (r->type != OPTS_FLAG)
                so[sn++] = ':';
        }
        if (r->deflt && r->type != OPTS_FLAG && set_value(r, r->deflt) < 0) {
            rc = bad_value(cmd, r, r->deflt, "default");
            goto out;
        }
    }
    so[sn] = '\0';
    if (!own) /* --settings FILE: every program's, unless its table has one */
        lo[cmd->n] = (struct option){"settings", required_argument, NULL, ID0 + (int)cmd->n};
    optind = 0; /* glibc: start afresh (tests parse several argv) */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        if (c == ':') {
            rc = opts_fail(cmd, "option '%s' needs an argument", argv[optind - 1]);
            goto out;
        }
        for (size_t i = 0; c > 0 && c < ID0 && i < cmd->n; i++)
            if (cmd->rows[i].shrt == c)
                c = ID0 + (int)i;
        if (!own && c == ID0 + (int)cmd->n) {
            settings = optarg;
            continue;
        }
        if (c < ID0 || c >= ID0 + (int)cmd->n) {
            if (optopt && optopt < ID0)
                rc = opts_fail(cmd, "unknown option '-%c'", optopt);
            else
                rc = opts_fail(cmd, "unknown option '%s'", argv[optind - 1]);
            goto out;
        }
        const opts_row_t *r = &cmd->rows[c - ID0];
        cl[c - ID0] = 1;
        if (r->type == OPTS_FLAG) {
            if (r->target)
                *(int *)r->target = 1;
        } else if (set_value(r, optarg) < 0) {
            rc = bad_value(cmd, r, optarg, "value");
            goto out;
        }
        if (r->given)
            *r->given = 1;
        if (r->flags & OPTS_STOP) {
            rc = 1;
            goto out;
        }
    }
    if (argi)
        *argi = optind;
    else if (optind < argc)
        rc = opts_fail(cmd, "unexpected argument '%s'", argv[optind]);
    if (rc == 0 && settings)
        rc = read_settings(cmd, settings, cl);
out:
    free(lo);
    free(so);
    free(cl);
    return rc;
}

/* ---- help ---------------------------------------------------------------- */

static const char *shown_default(const opts_row_t *r)
{
    return r->show ? r->show : r->deflt;
}

/* Copies r's help into out with {default}, {min}, {max} and {range}
 * replaced (truncated to cap). */
static void expand(const opts_row_t *r, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (const char *p = r->help; *p && len + 1 < cap;) {
        char val[96], lo[32], hi[32];
        const char *v = NULL;
        size_t skip = 0;
        if (strncmp(p, "{default}", 9) == 0) {
            v = shown_default(r) ? shown_default(r) : "";
            skip = 9;
        } else if (strncmp(p, "{min}", 5) == 0) {
            fmt_bound(r, r->min, val, sizeof val);
            v = val, skip = 5;
        } else if (strncmp(p, "{max}", 5) == 0) {
            fmt_bound(r, r->max, val, sizeof val);
            v = val, skip = 5;
        } else if (strncmp(p, "{range}", 7) == 0) {
            snprintf(val, sizeof val, "%s..%s", fmt_bound(r, r->min, lo, sizeof lo),
                     fmt_bound(r, r->max, hi, sizeof hi));
            v = val, skip = 7;
        }
        if (v) {
            len += (size_t)snprintf(out + len, cap - len, "%s", v);
            if (len >= cap)
                len = cap - 1;
            p += skip;
        } else {
            out[len++] = *p++;
            out[len] = '\0';
        }
    }
}

/* Prints one row in man-page style. */
static void print_man(FILE *out, char shrt, const char *name, const char *arg, const char *help,
                      const char *deflt)
{
    if (shrt)
        fprintf(out, "    -%c, ", shrt);
    else
        fputs("    ", out);
    fprintf(out, "--%s%s%s\n", name, arg ? " " : "", arg ? arg : "");
    for (const char *p = help; p && *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(out, "        %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
    if (deflt)
        fprintf(out, "        Default: %s.\n", deflt);
}

void opts_help(FILE *out, const opts_row_t *t, size_t n)
{
    char text[4096];
    for (size_t i = 0; i < n; i++) {
        if (!t[i].help)
            continue;
        expand(&t[i], text, sizeof text);
        print_man(out, t[i].shrt, t[i].name, t[i].arg, text,
                  strstr(t[i].help, "{default}") ? NULL : shown_default(&t[i]));
    }
}

/* Writes row r's "-x, --name ARG" into head (pad stands where r has no
 * short letter) and its help, placeholders expanded, into text.  Returns
 * the length of head. */
static int row_head(const opts_row_t *r, const char *pad, char *head, size_t hn, char *text,
                    size_t tn)
{
    expand(r, text, tn);
    char sh[8] = "";
    if (r->shrt)
        snprintf(sh, sizeof sh, "-%c, ", r->shrt);
    else
        snprintf(sh, sizeof sh, "%s", pad);
    return snprintf(head, hn, "%s--%s%s%s", sh, r->name, r->arg ? " " : "", r->arg ? r->arg : "");
}

/* Prints the lines of text, row r's expanded help: the first where the
 * cursor is when `first`, every other one indented by col; " (default X)"
 * after the last unless the help shows {default} itself. */
static void print_help_lines(FILE *out, const opts_row_t *r, const char *text, int first, int col)
{
    const char *d = strstr(r->help, "{default}") ? NULL : shown_default(r);
    const char *p = text;
    do {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(out, "%*s%.*s", first ? 0 : col, "", len, p);
        if (!nl && d)
            fprintf(out, "%s(default %s)", len ? " " : "", d);
        fputc('\n', out);
        p = nl ? nl + 1 : p + len;
        first = 0;
    } while (*p);
}

void opts_help_list(FILE *out, const opts_row_t *t, size_t n, int width)
{
    char text[4096], head[128];
    for (size_t i = 0; i < n; i++) {
        const opts_row_t *r = &t[i];
        if (!r->help)
            continue;
        int hl = row_head(r, "", head, sizeof head, text, sizeof text);
        if (hl + 2 <= width)
            fprintf(out, "  %-*s", width, head);
        else
            fprintf(out, "  %s  ", head);
        print_help_lines(out, r, text, 1, width + 2);
    }
}

void opts_help_table(FILE *out, const opts_row_t *t, size_t n, int indent, int width)
{
    char text[4096], head[128];
    int shorts = 0;
    for (size_t i = 0; i < n; i++)
        shorts |= t[i].help && t[i].shrt;
    for (size_t i = 0; i < n; i++) {
        const opts_row_t *r = &t[i];
        if (!r->help)
            continue;
        int hl = row_head(r, shorts ? "    " : "", head, sizeof head, text, sizeof text);
        int first = 1;
        if (hl + 1 <= width) {
            fprintf(out, "%*s%-*s", indent, "", width, head);
        } else {
            fprintf(out, "%*s%s\n", indent, "", head);
            first = 0;
        }
        print_help_lines(out, r, text, first, indent + width);
    }
}

/* Writes the n bytes at s as roff text: a backslash as \e, '-' as \- (a
 * real hyphen-minus, so that options can be pasted), \& before a '.' or
 * '\'' that would start a line (a control line otherwise), and a break point
 * \: after a comma within a word. */
static void roff_text(FILE *out, const char *s, size_t n, int line_start)
{
    for (size_t i = 0; i < n; i++) {
        if (line_start && (s[i] == '.' || s[i] == '\''))
            fputs("\\&", out);
        line_start = 0;
        if (s[i] == '\\')
            fputs("\\e", out);
        else if (s[i] == '-')
            fputs("\\-", out);
        else
            fputc(s[i], out);
        if (s[i] == ',' && i + 1 < n && s[i + 1] != ' ')
            fputs("\\:", out); /* JSON and lists may break there */
    }
}

void opts_help_roff(FILE *out, const opts_row_t *t, size_t n)
{
    char text[4096];
    for (size_t i = 0; i < n; i++) {
        const opts_row_t *r = &t[i];
        if (!r->help)
            continue;
        fputs(".TP\n", out);
        if (r->shrt)
            fprintf(out, "\\fB\\-%c\\fR, ", r->shrt);
        fputs("\\fB", out);
        roff_text(out, "--", 2, 0);
        roff_text(out, r->name, strlen(r->name), 0);
        fputs("\\fR", out);
        if (r->arg) {
            fputs(" \\fI", out);
            roff_text(out, r->arg, strlen(r->arg), 0);
            fputs("\\fR", out);
        }
        fputc('\n', out);
        expand(r, text, sizeof text);
        for (const char *p = text; *p;) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            if (len == 0)
                fputs(".sp", out);
            roff_text(out, p, len, 1);
            fputc('\n', out);
            p += len + (nl ? 1 : 0);
        }
        const char *d = strstr(r->help, "{default}") ? NULL : shown_default(r);
        if (d) {
            fputs(".br\nDefault: ", out);
            roff_text(out, d, strlen(d), 0);
            fputs(".\n", out);
        }
    }
}

void opts_print_usage(FILE *out, const opts_usage_t *u, const opts_row_t *t0, size_t n0)
{
    size_t n;
    opts_row_t *t = with_settings(t0, n0, &n);
    if (!t)
        return;
    fputs(u->head, out);
    if (u->layout == OPTS_LAYOUT_MAN)
        opts_help(out, t, n);
    else if (u->layout == OPTS_LAYOUT_LIST)
        opts_help_list(out, t, n, u->width);
    else
        opts_help_table(out, t, n, u->indent, u->width);
    if (u->tail)
        fputs(u->tail, out);
    free(t);
}

/* The int target of cmd's first row named `name`; NULL if it has none. */
static const int *stop_flag(const opts_cmd_t *cmd, const char *name)
{
    for (size_t i = 0; i < cmd->n; i++)
        if (strcmp(cmd->rows[i].name, name) == 0)
            return cmd->rows[i].target;
    return NULL;
}

int opts_start(const opts_cmd_t *cmd, int argc, char **argv, int *argi, const opts_usage_t *u,
               const char *note)
{
    int rc = opts_parse(cmd, argc, argv, argi);
    if (rc == -EBADMSG)
        return 1;
    if (rc < 0)
        return 2;
    const int *help = stop_flag(cmd, "help"), *version = stop_flag(cmd, "version");
    if (help && *help) {
        opts_print_usage(stdout, u, cmd->rows, cmd->n);
        return 0;
    }
    if (version && *version) {
        printf("%s %s%s\n", cmd->prog, BQOS_VERSION, note ? note : "");
        return 0;
    }
    return -1;
}
