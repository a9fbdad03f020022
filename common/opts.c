/* opts.c - option tables for getopt_long and --help. */
#include "common/opts.h"

#include <string.h>

void opts_getopt(const opts_t *t, size_t n, struct option *lo)
{
    for (size_t i = 0; i < n; i++)
        lo[i] = (struct option){t[i].name, t[i].arg ? required_argument : no_argument, NULL,
                                t[i].id};
    lo[n] = (struct option){0};
}

void opts_usage(FILE *out, const opts_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "    --%s%s%s\n", t[i].name, t[i].arg ? " " : "", t[i].arg ? t[i].arg : "");
        for (const char *p = t[i].help; p && *p;) {
            const char *nl = strchr(p, '\n');
            int len = nl ? (int)(nl - p) : (int)strlen(p);
            fprintf(out, "        %.*s\n", len, p);
            p += len + (nl ? 1 : 0);
        }
        if (t[i].deflt)
            fprintf(out, "        Default: %s.\n", t[i].deflt);
    }
}

const char *opts_name(const opts_t *t, size_t n, int id)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].id == id)
            return t[i].name;
    return "?";
}
