/* nodeconf.c - command-line values and JSON files that both node kinds read. */
#include "storage-node/nodeconf.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "storage-node/core/sched.h"

static json_t *load_json(const char *path)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        log_error("%s:%d:%d: %s", path, je.line, je.column, je.text);
    return root;
}

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

int nodeconf_load_tokens(const char *path,
                         int (*set)(void *arg, const char *name, int64_t r, int64_t l),
                         void *arg)
{
    json_t *root = load_json(path);
    if (!root)
        return -EINVAL;
    int rc = 0, n = 0;
    if (!json_is_object(root)) {
        log_error("%s: not a JSON object", path);
        rc = -EINVAL;
        goto out;
    }
    const char *name;
    json_t *v;
    json_object_foreach(root, name, v) {
        int64_t r = 0, l;
        json_t *jr = json_object_get(v, "r");
        if (!json_is_object(v) || (jr && (!json_is_integer(jr) || json_integer_value(jr) < 0)) ||
            tokens_value(json_object_get(v, "l"), &l) < 0) {
            log_error("%s: bucket '%s': want {\"r\":N,\"l\":N|null}", path, name);
            rc = -EINVAL;
            continue;
        }
        if (jr)
            r = json_integer_value(jr);
        int e = set(arg, name, r, l);
        if (e < 0) {
            log_error("%s: bucket '%s': %s", path, name, strerror(-e));
            rc = e;
            continue;
        }
        n++;
    }
    log_info("%s: tokens set for %d buckets", path, n);
out:
    json_decref(root);
    return rc;
}
