/* nodeconf.c - command-line values and JSON files that both node kinds read. */
#include "storage-node/daemon/nodeconf.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "storage-node/core/sched.h"

int nodeconf_load_buckets(const char *path,
                          int (*add)(void *arg, const char *name, uint32_t weight), void *arg)
{
    /* The controller's reader and validator (common/bucketfile): the node
     * accepts exactly the files the controller does. */
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    int rc = bucketfile_load(path, &bf, &err);
    if (rc < 0) {
        char buf[700];
        log_error("%s", bucketfile_strerror(&err, buf, sizeof buf));
        return rc == -ENOMEM ? rc : -EINVAL;
    }
    size_t n = bucketfile_count(bf);
    for (size_t i = 0; i < n; i++) {
        const bucketfile_bucket_t *b = bucketfile_get(bf, i);
        if ((rc = add(arg, b->name, b->weight)) < 0) {
            log_error("%s: bucket '%s': %s", path, b->name, strerror(-rc));
            goto out;
        }
        rc = 0;
    }
    log_info("%s: %zu buckets", path, n);
out:
    bucketfile_destroy(&bf);
    return rc;
}

/* An L count: a non-negative integer, or null / "unlimited" / absent. */
static int tokens_value(json_t *v, int64_t *out)
{
    if (!v || json_is_null(v) ||
        (json_is_string(v) && strcmp(json_string_value(v), "unlimited") == 0)) {
        *out = SCHED_UNLIMITED;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -EINVAL;
    *out = json_integer_value(v);
    return 0;
}

/* Reads token file `path` and calls set() (if not NULL) for every valid
 * entry, report(rarg, err) for every bad one (with its position).  Returns
 * the number of entries set, or -EINVAL after a problem of the whole file
 * (reported), or set()'s error (-errno, logged) in *set_rc. */
static int tokens_each(const char *path,
                       int (*set)(void *arg, const char *name, int64_t r, int64_t l), void *arg,
                       void (*report)(void *rarg, const jsonloc_err_t *err), void *rarg,
                       int *problems, int *set_rc)
{
    jsonloc_err_t err;
    jsonloc_err_clear(&err);
    snprintf(err.source, sizeof err.source, "%s", path);
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t len = 0;
    json_t *root = NULL;
    int n = 0;
    if (f) {
        FILE *m = open_memstream(&text, &len);
        char buf[65536];
        size_t got;
        while (m && (got = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, got, m);
        if (m)
            fclose(m);
        fclose(f);
    }
    if (!text) {
        snprintf(err.text, sizeof err.text, "cannot read: %s", strerror(errno));
        goto bad;
    }
    json_error_t je;
    if (!(root = json_loadb(text, len, 0, &je))) {
        err.line = je.line;
        err.col = je.column;
        snprintf(err.text, sizeof err.text, "%s", je.text);
        goto bad;
    }
    if (!json_is_object(root)) {
        err.line = err.col = 1;
        snprintf(err.text, sizeof err.text, "not a JSON object {\"BUCKET\":{\"r\":N,\"l\":N|null},...}");
        goto bad;
    }
    const char *name;
    json_t *v;
    json_object_foreach(root, name, v) {
        int64_t r = 0, l;
        json_t *jr = json_object_get(v, "r");
        if (!json_is_object(v) || (jr && (!json_is_integer(jr) || json_integer_value(jr) < 0)) ||
            tokens_value(json_object_get(v, "l"), &l) < 0) {
            jsonloc_step_t at = {name, 0};
            jsonloc_err_at(&err, text, len, &at, 1);
            snprintf(err.text, sizeof err.text, "want {\"r\":N,\"l\":N|null}");
            report(rarg, &err);
            ++*problems;
            continue;
        }
        if (jr)
            r = json_integer_value(jr);
        int e = set ? set(arg, name, r, l) : 0;
        if (e < 0) {
            log_error("%s: bucket '%s': %s", path, name, strerror(-e));
            *set_rc = e;
            continue;
        }
        n++;
    }
    json_decref(root);
    free(text);
    return n;
bad:
    report(rarg, &err);
    ++*problems;
    json_decref(root);
    free(text);
    return -EINVAL;
}

/* tokens_each()'s report for the node's log. */
static void log_problem(void *arg, const jsonloc_err_t *err)
{
    char buf[700];
    (void)arg;
    log_error("%s", bucketfile_strerror(err, buf, sizeof buf));
}

int nodeconf_load_tokens(const char *path,
                         int (*set)(void *arg, const char *name, int64_t r, int64_t l),
                         void *arg)
{
    int problems = 0, set_rc = 0;
    int n = tokens_each(path, set, arg, log_problem, NULL, &problems, &set_rc);
    if (n < 0)
        return -EINVAL;
    log_info("%s: tokens set for %d buckets", path, n);
    return set_rc < 0 ? set_rc : problems ? -EINVAL : 0;
}

/* nodeconf_check()'s report: "PROG: FILE:LINE:COL: ..." on stderr. */
static void print_problem(void *arg, const jsonloc_err_t *err)
{
    char buf[700];
    fprintf(stderr, "%s: %s\n", (const char *)arg, bucketfile_strerror(err, buf, sizeof buf));
}

int nodeconf_check(const char *prog, const char *config, const char *tokens_file)
{
    int problems = 0, set_rc = 0;
    if (config) {
        int rc = bucketfile_validate(config, print_problem, (void *)prog);
        if (rc < 0)
            return rc;
        problems += rc;
    }
    if (tokens_file)
        tokens_each(tokens_file, NULL, NULL, print_problem, (void *)prog, &problems, &set_rc);
    return problems;
}
