/* conf.c - bqos-controller's configuration in force and its changes: admission, etcd first, the journal or the file, ctrl; a change parked until its journal line is durable, undone if it fails. */
#include "controller/daemon/conf.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/mono.h"
#include "common/shardmap.h"

/* The stop's answer to a change still waiting for the disk. */
#define CONF_STOPPING_MSG                                                                       \
    "the controller stopped before the change was durable: not acknowledged; it may or may not " \
    "be in the bucket file (see status once a controller runs; the same change again is "      \
    "harmless)"

struct conf {
    const char *path;        /* conf_config_t's */
    admission_mode_t mode;
    ctrl_t *ctrl;
    int shards, shard;
    const reshard_t *rs;
    conf_reply_fn reply;
    void *arg;
    leader_t *ld;            /* borrowed; NULL without etcd */
    bucketfile_t *bf;        /* owned: the configuration in force, as given
                                to ctrl */
    /* Without etcd, set and remove append a line to the bucket file's
     * journal (common/bucketjournal) instead of writing the file, and
     * change bf and ctrl in place: O(1) in the table's size.  Opened at the
     * first change; NULL before.  Owned. */
    bucketjournal_t *journal;
    admission_sums_t sums;   /* bf's reservations (admission by deltas) */
    int sums_ok;             /* sums are bf's (0: computed at first use) */
    /* Changes made to bf and ctrl whose journal line is not yet durable,
     * oldest first: their replies wait (issue 26).  Owned; made at the
     * first change (NULL before). */
    parked_t *parked;
};

conf_t *conf_new(const conf_config_t *cfg, bucketfile_t *bf)
{
    conf_t *c = calloc(1, sizeof *c);
    if (!c) {
        bucketfile_destroy(&bf);
        return NULL;
    }
    c->path = cfg->path;
    c->mode = cfg->mode;
    c->ctrl = cfg->ctrl;
    c->shards = cfg->shards;
    c->shard = cfg->shard;
    c->rs = cfg->rs;
    c->reply = cfg->reply;
    c->arg = cfg->arg;
    c->bf = bf;
    return c;
}

void conf_destroy(conf_t **cp)
{
    conf_t *c = cp ? *cp : NULL;
    if (!c)
        return;
    *cp = NULL;
    parked_destroy(&c->parked);
    /* the writer may be in a slow fdatasync: the exit ends it */
    if (!c->journal || bucketjournal_flush(c->journal, 0) == 0)
        bucketjournal_destroy(&c->journal);
    bucketfile_destroy(&c->bf);
    free(c);
}

void conf_set_leader(conf_t *c, leader_t *ld)
{
    c->ld = ld;
}

const bucketfile_t *conf_table(const conf_t *c)
{
    return c ? c->bf : NULL;
}

size_t conf_waiting(const conf_t *c)
{
    return c ? parked_count(c->parked) : 0;
}

static double view_bucket(const char *name, void *arg)
{
    return ctrl_bucket_capacity(arg, name);
}

static double view_bucket_bytes(const char *name, void *arg)
{
    return ctrl_bucket_byte_capacity(arg, name);
}

/* admission_check() of `bf` against what the controller knows now, in IOs
 * and in bytes. */
static admission_view_t view_now(const conf_t *c);

static int admission_now(const conf_t *c, const bucketfile_t *bf, char *msg, size_t size)
{
    admission_view_t v = view_now(c);
    return admission_check(bf, &v, msg, size);
}

/* The view admission judges against now. */
static admission_view_t view_now(const conf_t *c)
{
    return (admission_view_t){
        .total_capacity = ctrl_total_capacity(c->ctrl),
        .bucket_capacity = view_bucket,
        .arg = c->ctrl,
        .total_byte_capacity = ctrl_total_byte_capacity(c->ctrl),
        .bucket_byte_capacity = view_bucket_bytes,
    };
}

/* c->bf's admission sums, computed at first use (O(buckets) once). */
static admission_sums_t *sums(conf_t *c)
{
    if (!c->sums_ok) {
        admission_sums_init(&c->sums, c->bf);
        c->sums_ok = 1;
    }
    return &c->sums;
}

int conf_warning(conf_t *c, int quick, char *msg, size_t size)
{
    if (!c->bf)
        return 0;
    admission_view_t v = view_now(c);
    return quick ? admission_check_change(sums(c), NULL, &v, msg, size) == -EDQUOT
                 : admission_now(c, c->bf, msg, size) == -EDQUOT;
}

/* The hand-edit check before a change: the journal's (the file it
 * extends: a stat) when there is one, else bf's origin's. */
static int check_file(conf_t *c, const bucketfile_t *bf, char *msg, size_t size)
{
    if (c->journal)
        return bucketjournal_check(c->journal, msg, size);
    return bucketfile_check_unchanged(bf, c->path, msg, size);
}

/* Parked change p, taken out of the ring, is finished: its reply goes to
 * the callback, the one held (code NULL: durable) or the error `code`. */
static void finish_parked(conf_t *c, parked_change_t *p, const char *code, const char *msg)
{
    char *held = code ? NULL : p->text;
    if (code)
        free(p->text);
    p->text = NULL;
    if (c->reply)
        c->reply(c->arg, &p->to, held, code, msg);
    else
        free(held);
}

void conf_answer_stopping(conf_t *c)
{
    if (!c || !parked_count(c->parked))
        return;
    log_warn("stopping with %zu changes not yet durable: answered \"stopping\", not "
             "acknowledged", parked_count(c->parked));
    parked_change_t *p;
    while ((p = parked_take_oldest(c->parked)))
        finish_parked(c, p, "stopping", CONF_STOPPING_MSG);
}

/* With shards a table of nested buckets cannot run (conf_set_ctrl_buckets()
 * refuses it): -ENOTSUP (msg filled) for a candidate `bf` that names a
 * parent, before anything is written; else 0.  O(buckets), as every
 * whole-table change is. */
static int shards_refuse(const conf_t *c, const bucketfile_t *bf, char *msg, size_t size)
{
    for (size_t i = 0; c->shards && i < bucketfile_count(bf); i++) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, i);
        if (bucketfile_has_parent(x)) {
            snprintf(msg, size, "bucket \"%.100s\": nested buckets (parents) are not supported "
                     "with --shards", x->name);
            log_warn("configuration refused: %s", msg);
            return -ENOTSUP;
        }
    }
    return 0;
}

/* Admission for a candidate configuration.  Returns 0 if it may be
 * applied; -EDQUOT (msg filled) if enforce refuses it, -ERANGE (msg
 * filled) if ctrl_check_buckets() does, -ENOTSUP (msg filled) if shards
 * cannot run it (shards_refuse()). */
static int admit(conf_t *c, const bucketfile_t *bf, char *msg, size_t size)
{
    int rc = shards_refuse(c, bf, msg, size);
    if (rc < 0)
        return rc;
    rc = ctrl_check_buckets(c->ctrl, bf, msg, size);
    if (rc < 0) { /* the arithmetic cannot hold it: refused in either mode */
        log_error("configuration refused: %s", msg);
        return rc;
    }
    rc = admission_now(c, bf, msg, size);
    if (rc == 0) {
        if (msg[0])
            log_info("admission: %s", msg);
        return 0;
    }
    if (c->mode == ADMISSION_ENFORCE) {
        log_warn("admission refused the configuration: %s", msg);
        return rc;
    }
    log_warn("admission (warn only): %s", msg);
    return 0;
}

static void log_rule_warning(void *arg, size_t i, const char *text)
{
    (void)i;
    log_warn("%s: %s", (const char *)arg, text);
}

void conf_log_rules(const bucketfile_t *bf, const char *source)
{
    const rules_t *rl = bf ? bucketfile_rules(bf) : NULL;
    if (rl)
        rules_analyze(rl, log_rule_warning, (void *)(source ? source : "rules"));
}

/* Nonzero if bucket `name` is this controller's to run (always without
 * shards). */
static int mine(const conf_t *c, const char *name)
{
    return !c->shards || (c->rs ? reshard_mine(c->rs, name)
                                : shardmap_of(name, c->shards) == c->shard);
}

int conf_set_ctrl_buckets(conf_t *c, const bucketfile_t *bf)
{
    if (!c->shards)
        return ctrl_set_buckets(c->ctrl, bf);
    bucketfile_t *part = bucketfile_new();
    int rc = part ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < bucketfile_count(bf); i++) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, i);
        if (bucketfile_has_parent(x))
            rc = -ENOTSUP;
        else if (mine(c, x->name))
            rc = bucketfile_set(part, x, NULL);
    }
    if (rc == 0 && bucketfile_rules(bf)) { /* templates: made in the shard of each name */
        rules_t *rl = rules_dup(bucketfile_rules(bf));
        rc = rl ? bucketfile_set_rules(part, rl) : -ENOMEM;
        if (rc < 0)
            rules_destroy(&rl);
    }
    if (rc == 0)
        rc = ctrl_set_buckets(c->ctrl, part);
    bucketfile_destroy(&part);
    return rc;
}

/* Makes `bf` (owned, consumed) the configuration. */
static int apply(conf_t *c, bucketfile_t *bf)
{
    const rules_t *old = c->bf ? bucketfile_rules(c->bf) : NULL, *nr = bucketfile_rules(bf);
    int changed = nr && (!old || !rules_equal(old, nr));
    int rc = conf_set_ctrl_buckets(c, bf);
    if (rc < 0) {
        bucketfile_destroy(&bf);
        return rc;
    }
    if (changed)
        conf_log_rules(bf, c->path);
    bucketfile_destroy(&c->bf);
    c->bf = bf;
    c->sums_ok = 0;
    if (c->ld)
        c->ld->table_version = bucketfile_version(bf);
    return 0;
}

/* The version a change to the table in force gets: one more than the
 * newest this controller knows (the table in force, what the election
 * last noted).  A version in the candidate's text (an imported or
 * reloaded file's) counts for nothing: only changes move it. */
static uint64_t next_version(const conf_t *c)
{
    uint64_t v = bucketfile_version(c->bf);
    if (c->ld && c->ld->table_version > v)
        v = c->ld->table_version;
    return v + 1;
}

/* Fills `msg` (and logs it) for the error `rc` < 0 of a write of the table
 * to etcd: `whole` the whole table (publish()), else one bucket
 * (publish_bucket()).  Returns the error code: "not_leader" or "io". */
static const char *write_error(conf_t *c, int rc, int whole, char *msg, size_t size)
{
    if (rc == -EPERM) {
        snprintf(msg, size, "not the leader (the leader is %s)",
                 c->ld->leader_id[0] ? c->ld->leader_id : "unknown");
        return "not_leader";
    }
    if (rc == -EAGAIN)
        snprintf(msg, size, "the bucket table or the leadership changed meanwhile; retry");
    else if (rc == -E2BIG && whole)
        snprintf(msg, size, "a bucket of the table is over the %u bytes etcd takes as one "
                 "value: refused", LEADER_TABLE_MAX);
    else
        snprintf(msg, size, "cannot write the bucket%s to etcd: %s", whole ? " table" : "",
                 strerror(-rc));
    log_warn("%s", msg);
    return "io";
}

/* With etcd: the leader writes `bf` (borrowed; its version set to the
 * next) to the table key before it applies it, so that what runs is what
 * etcd holds, and the change is acknowledged only once etcd has it.
 * Returns NULL, or the error code with `msg` filled. */
static const char *publish(conf_t *c, bucketfile_t *bf, char *msg, size_t size)
{
    bucketfile_set_version(bf, next_version(c));
    char *text = bucketfile_render(bf); /* the operator's formatting travels */
    if (!text) {
        snprintf(msg, size, "out of memory");
        return "internal";
    }
    size_t len = strlen(text);
    int rc = leader_write_buckets(c->ld, text, len, mono_now());
    free(text);
    if (rc == 0)
        return NULL;
    return write_error(c, rc, 1, msg, size);
}

/* With etcd: the leader writes one change, bucket *b set (b NULL: bucket
 * `name` removed), with the table's version `v` as one transaction
 * (leader_put_bucket(), leader_remove_bucket()), before it applies it.
 * O(1) in the table's size.  Returns NULL, or the error code with `msg`
 * filled. */
static const char *publish_bucket(conf_t *c, const bucketfile_bucket_t *b, const char *name,
                                  uint64_t v, char *msg, size_t size)
{
    int rc = -ENOMEM;
    char *json = NULL;
    if (b) { /* the element as the bucket file writes it (its journal's
                  set line: a table of b alone would refuse a parent that
                  is not in it) */
        char *t = bucketfile_journal_set_line(b, 0);
        json_t *d = t ? json_loads(t, 0, NULL) : NULL;
        json = d ? json_dumps(json_object_get(d, "set"), JSON_COMPACT) : NULL;
        json_decref(d);
        free(t);
        if (json)
            rc = leader_put_bucket(c->ld, b->name, json, strlen(json), v, mono_now());
    } else {
        rc = leader_remove_bucket(c->ld, name, v, mono_now());
    }
    free(json);
    if (rc == 0)
        return NULL;
    const char *code = write_error(c, rc, 0, msg, size);
    return rc == -ENOMEM ? "internal" : code;
}

/* The same for the one change `bf` (borrowed; its version set to the
 * next) holds over the table in force: bucket `name` set or removed. */
static const char *publish_change(conf_t *c, bucketfile_t *bf, const char *name, char *msg,
                                  size_t size)
{
    uint64_t v = next_version(c);
    bucketfile_set_version(bf, v);
    int i = bucketfile_find(bf, name);
    return publish_bucket(c, i >= 0 ? bucketfile_get(bf, (size_t)i) : NULL, name, v, msg, size);
}

/* The journal beside the bucket file, opened at first use (for the table
 * in force, c->bf: the file it was read from or written to).  NULL, with
 * msg filled, if it cannot be opened. */
static bucketjournal_t *journal(conf_t *c, char *msg, size_t size)
{
    if (!c->journal && bucketjournal_new(c->path, c->bf, 0, &c->journal, msg, size) < 0)
        return NULL;
    return c->journal;
}

/* Exports `bf` to the bucket file (the backup, with etcd) if the file's
 * buckets differ; a file edited by hand since it was last loaded or
 * written is left alone (bucketfile_save() refuses).  A failure is logged
 * only. */
static void export_file(conf_t *c, bucketfile_t *bf)
{
    bucketfile_t *cur = NULL;
    jsonloc_err_t err;
    char *a = NULL, *b = NULL, msg[600];
    if (bucketfile_load(c->path, &cur, &err) == 0) {
        a = bucketfile_dumps(cur);
        b = bucketfile_dumps(bf);
    }
    if (a && b && strcmp(a, b) == 0) {
        bucketfile_copy_origin(bf, cur); /* the file holds this table */
    } else {
        /* with a journal beside the file (changes in place under etcd
         * append to it), the file is written through it, which empties it */
        bucketjournal_t *j = c->bf ? journal(c, msg, sizeof msg) : NULL;
        if ((j ? bucketjournal_save(j, bf, msg, sizeof msg)
               : bucketfile_save(bf, c->path, msg, sizeof msg)) < 0)
            log_warn("not exporting the bucket table: %s", msg);
    }
    free(a);
    free(b);
    bucketfile_destroy(&cur);
}

int conf_apply_text(conf_t *c, const char *text, size_t len, int64_t rev)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    char src[64];
    snprintf(src, sizeof src, "etcd@%lld", (long long)rev);
    int rc = bucketfile_parse(text, len, src, &bf, &err);
    if (rc < 0) {
        char buf[600];
        log_error("bucket table in etcd refused: %s", bucketfile_strerror(&err, buf, sizeof buf));
        return rc;
    }
    if (bucketfile_version(bf) < bucketfile_version(c->bf)) {
        /* etcd lost the newer one (or went back to a backup): ours is
         * written back (leader.c), neither the table nor the file go back */
        log_warn("bucket table in etcd (revision %lld) is version %llu, older than ours (%llu): "
                 "not applied", (long long)rev, (unsigned long long)bucketfile_version(bf),
                 (unsigned long long)bucketfile_version(c->bf));
        bucketfile_destroy(&bf);
        return -ESTALE;
    }
    if (c->bf) /* what we know of the file stays known */
        bucketfile_copy_origin(bf, c->bf);
    export_file(c, bf);
    size_t n = bucketfile_count(bf);
    rc = apply(c, bf);
    if (rc < 0) {
        log_error("cannot apply the bucket table of etcd: %s", strerror(-rc));
        return rc;
    }
    log_info("bucket table from etcd (revision %lld): %zu buckets", (long long)rev, n);
    return 0;
}

/* Undoes edit_in_place()'s edit of c->bf: bucket `name` as it was (*old
 * if it was there, i >= 0: a removed bucket comes back at the end of the
 * table), or gone (i < 0). */
static void undo_table(conf_t *c, int i, const bucketfile_bucket_t *old, const char *name)
{
    if (i >= 0)
        bucketfile_set(c->bf, old, NULL);
    else
        bucketfile_remove_swap(c->bf, name);
}

/* Bucket *b set, or bucket `name` removed (b NULL), in c->bf and in ctrl,
 * in place: O(1) in the table's size.  i and *old: the bucket's index in
 * c->bf before (-1: new) and what it was.  Returns 0, or -errno with both
 * tables unchanged (-ERANGE: over the arithmetic's bounds). */
static int edit_in_place(conf_t *c, const bucketfile_bucket_t *b, const char *name, int i,
                         const bucketfile_bucket_t *old)
{
    int rc = b ? bucketfile_set(c->bf, b, NULL) : bucketfile_remove_swap(c->bf, name);
    if (rc < 0)
        return rc;
    if (mine(c, name))
        rc = b ? ctrl_set_bucket(c->ctrl, b) : ctrl_remove_bucket(c->ctrl, name);
    if (rc < 0)
        undo_table(c, i, old, name);
    return rc;
}

/* With etcd: the bucket file, etcd's backup, follows one change made in
 * place (bucket *b set, or `name` removed; the table's version after it)
 * by a line of its journal: O(1).  A file edited by hand since it was last
 * read or written is left alone, as export_file() leaves it.  A failure
 * is logged only: etcd holds the change. */
static void backup_change(conf_t *c, const bucketfile_bucket_t *b, const char *name,
                          uint64_t version)
{
    char msg[768];
    bucketjournal_t *j = journal(c, msg, sizeof msg);
    int rc = j ? bucketjournal_check(j, msg, sizeof msg) : -EIO;
    if (rc == 0)
        rc = b ? bucketjournal_queue_set(j, b, version, NULL, msg, sizeof msg)
               : bucketjournal_queue_remove(j, name, version, NULL, msg, sizeof msg);
    if (rc < 0) /* (a write that fails later: conf_journal_done() says so) */
        log_warn("not exporting bucket %s to the bucket file: %s", name, msg);
}

/* The table's version is now `version` (0: it does not count). */
static void note_version(conf_t *c, uint64_t version)
{
    if (!version)
        return;
    bucketfile_set_version(c->bf, version);
    if (c->ld)
        c->ld->table_version = version;
}

int conf_apply_bucket(conf_t *c, const char *name, const char *json, size_t len,
                       uint64_t version, int64_t rev)
{
    if (version < bucketfile_version(c->bf)) {
        log_warn("bucket %s in etcd (revision %lld) is of table version %llu, older than ours "
                 "(%llu): not applied", name, (long long)rev, (unsigned long long)version,
                 (unsigned long long)bucketfile_version(c->bf));
        return -ESTALE;
    }
    double t0 = mono_now();
    bucketfile_t *one = NULL;
    const bucketfile_bucket_t *b = NULL;
    bucketfile_bucket_t child;
    jsonloc_err_t err = {0};
    char src[64], *text = NULL;
    int rc = 0, other = 0;
    snprintf(src, sizeof src, "etcd@%lld", (long long)rev);
    /* One element, checked as the file's are.  Its parent (a name) is
     * checked against the table it joins (bucketfile_set() below): a table
     * of the element alone lacks it. */
    json_error_t je;
    json_t *el = json ? json_loadb(json, len, JSON_REJECT_DUPLICATES, &je) : NULL;
    json_t *jp = json_object_get(el, "parent");
    const char *parent = NULL;
    if (json && !el) {
        snprintf(err.text, sizeof err.text, "%s", je.text);
        rc = -EINVAL;
    } else if (json_is_string(jp) && json_string_length(jp) > 0) {
        /* held (jp) to the end; a NUL inside is not a name */
        parent = json_string_value(jp);
        json_incref(jp);
        json_object_del(el, "parent");
        if (strlen(parent) != json_string_length(jp)) {
            snprintf(err.text, sizeof err.text, "parent must be a bucket name");
            rc = -EINVAL;
        }
    } else {
        jp = NULL; /* (a parent of another type: the parse refuses it) */
    }
    if (rc == 0 && el) {
        char *t = json_dumps(el, JSON_COMPACT);
        size_t tl = t ? strlen(t) : 0;
        text = t ? malloc(tl + 32) : NULL;
        rc = text ? 0 : -ENOMEM;
        if (rc == 0) {
            int n = snprintf(text, tl + 32, "{\"buckets\":[%s]}", t);
            rc = bucketfile_parse(text, (size_t)n, src, &one, &err);
            other = rc == 0 && (bucketfile_count(one) != 1 ||
                                strcmp(bucketfile_get(one, 0)->name, name) != 0);
            if (other)
                rc = -EINVAL;
        }
        free(t);
    }
    if (rc < 0) {
        char buf[600];
        log_error("bucket %s in etcd refused: %s", name,
                  other ? "not that bucket's object"
                        : rc == -ENOMEM ? "out of memory" : bucketfile_strerror(&err, buf, sizeof buf));
    } else if (one) {
        child = *bucketfile_get(one, 0);
        bucketfile_bucket_set_parent(&child, parent); /* el's: lives to the end */
        b = &child;
    }
    free(text);
    if (rc < 0)
        goto out;
    if (c->bf && !ctrl_nested(c->ctrl) && !(b && bucketfile_has_parent(b))) {
        /* in place, as the leader made it (change_in_place()) */
        int i = bucketfile_find(c->bf, name);
        bucketfile_bucket_t old = {.weight = 1};
        if (i >= 0)
            old = *bucketfile_get(c->bf, (size_t)i);
        if (b || i >= 0)
            rc = edit_in_place(c, b, name, i, &old);
        if (rc < 0) {
            log_error("cannot apply bucket %s of etcd: %s", name, strerror(-rc));
            goto out;
        }
        if (c->sums_ok && i >= 0)
            admission_sums_add(&c->sums, &old, -1);
        if (c->sums_ok && b)
            admission_sums_add(&c->sums, b, 1);
        note_version(c, version);
        backup_change(c, b, name, version);
    } else { /* a tree: the whole table, as the leader took it */
        bucketfile_t *bf = c->bf ? bucketfile_dup(c->bf) : bucketfile_new();
        rc = bf ? 0 : -ENOMEM;
        if (rc == 0)
            rc = b ? bucketfile_set(bf, b, &err) : (bucketfile_remove(bf, name), 0);
        if (rc < 0) {
            char buf[600];
            log_error("bucket %s in etcd refused: %s", name,
                      rc == -ENOMEM ? "out of memory" : bucketfile_strerror(&err, buf, sizeof buf));
            bucketfile_destroy(&bf);
            goto out;
        }
        bucketfile_set_version(bf, version);
        export_file(c, bf);
        rc = apply(c, bf);
        if (rc < 0) {
            log_error("cannot apply bucket %s of etcd: %s", name, strerror(-rc));
            goto out;
        }
    }
    log_info("bucket %s %s from etcd (revision %lld, table version %llu; %.1f ms)", name,
             json ? "set" : "removed", (long long)rev, (unsigned long long)version,
             (mono_now() - t0) * 1e3);
out:
    bucketfile_destroy(&one);
    json_decref(jp);
    json_decref(el);
    return rc;
}

const char *conf_reload(conf_t *c, char *msg, size_t size)
{
    if (c->ld && !leader_leads(c->ld, mono_now())) {
        snprintf(msg, size, "not the leader: the bucket table is etcd's; reload at the leader");
        log_info("reload: %s", msg);
        return "not_leader";
    }
    conf_settle(c, -1); /* the file and its journal hold every change made */
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    int rc = bucketfile_load(c->path, &bf, &err);
    if (rc < 0) {
        bucketfile_strerror(&err, msg, size);
        log_error("reload: %s; keeping the current buckets", msg);
        return rc == -EINVAL ? "invalid" : "io";
    }
    if ((rc = admit(c, bf, msg, size)) < 0) {
        bucketfile_destroy(&bf);
        return rc == -ENOTSUP ? "invalid" : "admission";
    }
    size_t n = bucketfile_count(bf);
    if (c->ld) {
        const char *code = publish(c, bf, msg, size);
        if (code) {
            bucketfile_destroy(&bf);
            return code;
        }
        export_file(c, bf); /* the file follows the version etcd has */
    }
    if (apply(c, bf) < 0) {
        snprintf(msg, size, "out of memory");
        return "internal";
    }
    if (c->journal) /* the file as read now is what the journal extends */
        bucketjournal_rebase(c->journal, c->bf);
    log_info("loaded %zu buckets from %s", n, c->path);
    return NULL;
}

/* Validates, admits, persists, then applies `bf` (consumed).  A bucket
 * file changed by hand since it was last loaded or written is not
 * overwritten: the change is refused (file_changed) until a reload.
 * `name`: the one bucket `bf` changes (set or removed), which etcd then
 * takes as one key; NULL: the table is written whole.  Returns NULL, or
 * the error code with msg filled. */
static const char *commit_change(conf_t *c, bucketfile_t *bf, const char *name, char *msg,
                                 size_t size)
{
    int rc = check_file(c, bf, msg, size);
    if (rc < 0) {
        log_warn("change refused: %s", msg);
        bucketfile_destroy(&bf);
        return rc == -ESTALE ? "file_changed" : "io";
    }
    if ((rc = admit(c, bf, msg, size)) < 0) {
        bucketfile_destroy(&bf);
        return rc == -ENOTSUP ? "invalid" : "admission";
    }
    if (c->ld) { /* etcd is the table; the file is its backup */
        const char *code = name ? publish_change(c, bf, name, msg, size)
                                : publish(c, bf, msg, size);
        if (code) {
            bucketfile_destroy(&bf);
            return code;
        }
        export_file(c, bf);
        if (apply(c, bf) < 0) {
            snprintf(msg, size, "out of memory");
            return "internal";
        }
        return NULL;
    }
    if (bucketfile_version(c->bf)) /* a table once under etcd keeps counting */
        bucketfile_set_version(bf, next_version(c));
    rc = c->journal ? bucketjournal_save(c->journal, bf, msg, size)
                    : bucketfile_save(bf, c->path, msg, size);
    if (rc < 0) {
        log_error("%s", msg);
        bucketfile_destroy(&bf);
        return rc == -ESTALE ? "file_changed" : "io";
    }
    if (apply(c, bf) < 0) {
        snprintf(msg, size, "out of memory");
        return "internal";
    }
    return NULL;
}

const char *conf_replace(conf_t *c, bucketfile_t *bf, char *msg, size_t size)
{
    return commit_change(c, bf, NULL, msg, size);
}

const char *conf_check(conf_t *c, const bucketfile_t *bf, char *msg, size_t size, int *warned)
{
    *warned = 0;
    int rc = check_file(c, bf, msg, size);
    if (rc < 0)
        return rc == -ESTALE ? "file_changed" : "io";
    if (shards_refuse(c, bf, msg, size) < 0)
        return "invalid"; /* as commit_change() answers it */
    if (ctrl_check_buckets(c->ctrl, bf, msg, size) < 0)
        return "admission"; /* as commit_change() answers it */
    if (admission_now(c, bf, msg, size) == -EDQUOT) {
        if (c->mode == ADMISSION_ENFORCE)
            return "admission";
        *warned = 1;
    }
    return NULL;
}

/* Undoes parked change p in c->bf and ctrl (the newest first when there
 * are several): the bucket as it was, the table's version and sums. */
static void undo_parked(conf_t *c, const parked_change_t *p)
{
    const char *name = p->name;
    if (mine(c, name) &&
        (p->was >= 0 ? ctrl_set_bucket(c->ctrl, &p->old) : ctrl_remove_bucket(c->ctrl, name)))
        log_error("cannot undo a change the journal refused: the controller runs it "
                  "until a reload");
    undo_table(c, p->was, &p->old, name);
    bucketfile_set_version(c->bf, p->version_before);
    c->sums = p->sums_before;
}

/* Fills msg with `text`; returns `code`. */
static const char *say(const char *code, const char *text, char *msg, size_t size)
{
    snprintf(msg, size, "%s", text);
    return code;
}

/* One bucket set (b) or removed (`name`, b NULL) in place, O(1) in the
 * table's size.  The same checks as commit_change() (the file unchanged by
 * hand, the arithmetic's bounds, admission), judged from sums.  With etcd
 * it is written to etcd first (one transaction: acknowledged once etcd has
 * it), then made to c->bf and ctrl, then queued for the journal of the
 * file, etcd's backup (not waited for; a failure there is logged only).
 * Without etcd the change is made to c->bf and ctrl and its line queued
 * for the journal's writer: the change is parked (*parked 1) and its reply
 * sent once the line is durable (conf_journal_done()), while the loop runs
 * rounds on.  A step that fails before undoes the ones before it, so a
 * refused change leaves the table in force as it was; a write that fails
 * later undoes it then (undo_parked()).  At most BUCKETJOURNAL_PENDING_MAX
 * changes wait: the next is refused (busy).  Returns NULL, or the error
 * code with msg filled. */
static const char *change_in_place(conf_t *c, const bucketfile_bucket_t *b, const char *name,
                                   int *parked, char *msg, size_t size)
{
    int rc;
    if (!journal(c, msg, size)) {
        if (!c->ld) { /* without etcd the journal is where the change is durable */
            log_error("%s", msg);
            return "io";
        }
        log_warn("%s", msg); /* etcd's backup only */
    }
    if (!c->ld && parked_count(c->parked) >= PARKED_MAX) {
        snprintf(msg, size, "busy: %d changes are waiting for the disk to take the "
                 "journal of %s; try again", PARKED_MAX, c->path);
        log_warn("change refused: %s", msg);
        return "busy";
    }
    if ((rc = check_file(c, c->bf, msg, size)) < 0) {
        log_warn("change refused: %s", msg);
        return rc == -ESTALE ? "file_changed" : "io";
    }
    if (!name)
        name = b->name;
    int i = bucketfile_find(c->bf, name);
    bucketfile_bucket_t old = {.weight = 1};
    if (i >= 0)
        old = *bucketfile_get(c->bf, (size_t)i);
    if (b && ctrl_check_bucket(c->ctrl, b, msg, size) < 0) {
        log_error("configuration refused: %s", msg);
        return "admission";
    }
    admission_sums_t after = *sums(c);
    if (i >= 0)
        admission_sums_add(&after, &old, -1);
    if (b)
        admission_sums_add(&after, b, 1);
    admission_view_t v = view_now(c);
    rc = admission_check_change(&after, b, &v, msg, size);
    if (rc == 0 && msg[0])
        log_info("admission: %s", msg);
    else if (rc < 0 && c->mode == ADMISSION_ENFORCE) {
        log_warn("admission refused the configuration: %s", msg);
        return "admission";
    } else if (rc < 0)
        log_warn("admission (warn only): %s", msg);
    if (c->ld) { /* etcd is the table: written there first, the file follows */
        uint64_t version = next_version(c);
        const char *code = publish_bucket(c, b, name, version, msg, size);
        if (code)
            return code;
        rc = edit_in_place(c, b, name, i, &old);
        if (rc < 0) { /* ctrl_check_bucket() passed: out of memory */
            log_error("cannot apply bucket %s, which etcd holds: %s", name, strerror(-rc));
            return say("internal", "out of memory", msg, size);
        }
        note_version(c, version);
        c->sums = after;
        backup_change(c, b, name, version);
        return NULL;
    }
    uint64_t version_before = bucketfile_version(c->bf);
    uint64_t version = version_before ? next_version(c) : 0;
    parked_change_t *p = NULL; /* not full: refused busy above */
    if ((!c->parked && !(c->parked = parked_new())) || !(p = parked_slot(c->parked)))
        return say("internal", "out of memory", msg, size);
    p->is_set = b != NULL;
    p->was = i;
    p->old = old;
    p->t0 = mono_now();
    p->version_before = version_before;
    p->sums_before = *sums(c);
    snprintf(p->name, sizeof p->name, "%s", name); /* the request's text goes with it */
    /* The edit: the table, then ctrl's, then the journal's queue. */
    rc = edit_in_place(c, b, name, i, &old);
    if (rc < 0)
        return rc == -ERANGE ? say("admission", "over the arithmetic's bounds", msg, size)
                             : say("internal", "out of memory", msg, size);
    rc = b ? bucketjournal_queue_set(c->journal, b, version, &p->ticket, msg, size)
           : bucketjournal_queue_remove(c->journal, name, version, &p->ticket, msg, size);
    if (rc < 0) {
        log_error("%s", msg);
        undo_parked(c, p);
        return rc == -EBUSY ? "busy" : "io";
    }
    note_version(c, version);
    c->sums = after;
    parked_add(c->parked);
    *parked = 1;
    return NULL;
}

const char *conf_set(conf_t *c, const bucketfile_bucket_t *b, int *parked, char *msg,
                     size_t size)
{
    *parked = 0;
    if (!bucketfile_has_parent(b) && !ctrl_nested(c->ctrl))
        return change_in_place(c, b, NULL, parked, msg, size);
    /* a tree: its checks and admission see the table whole */
    conf_settle(c, -1);
    bucketfile_t *bf = bucketfile_dup(c->bf);
    jsonloc_err_t err;
    int rc = bf ? bucketfile_set(bf, b, &err) : -ENOMEM;
    if (rc < 0) {
        bucketfile_destroy(&bf);
        if (rc == -EINVAL) { /* the parent: unknown, a cycle, too deep */
            snprintf(msg, size, "%.63s: %s", err.path, err.text);
            return "invalid";
        }
        return say("internal", "out of memory", msg, size);
    }
    return commit_change(c, bf, b->name, msg, size);
}

const char *conf_remove(conf_t *c, const char *name, int *parked, char *msg, size_t size)
{
    *parked = 0;
    if (bucketfile_find(c->bf, name) < 0)
        return say("not_found", "no such bucket", msg, size);
    if (!ctrl_nested(c->ctrl)) /* without a tree no bucket is a parent */
        return change_in_place(c, NULL, name, parked, msg, size);
    conf_settle(c, -1);
    bucketfile_t *bf = bucketfile_dup(c->bf);
    if (!bf)
        return say("internal", "out of memory", msg, size);
    if (bucketfile_remove(bf, name) == -EBUSY) {
        bucketfile_destroy(&bf);
        return say("invalid", "the bucket is a parent: remove its children or set them another "
                   "parent first", msg, size);
    }
    return commit_change(c, bf, name, msg, size);
}

void conf_hold_reply(conf_t *c, char *text, const parked_env_t *to)
{
    parked_change_t *p = parked_newest(c->parked);
    if (!p) {
        free(text);
        return;
    }
    free(p->text);
    p->text = text;
    p->to = *to;
}

int conf_journal_fd(const conf_t *c)
{
    return c && c->journal ? bucketjournal_fd(c->journal) : -1;
}

int conf_journal_stats(const conf_t *c, bucketjournal_stats_t *st)
{
    if (!c->journal)
        return -ENOENT;
    bucketjournal_stats(c->journal, st);
    return 0;
}

void conf_journal_done(conf_t *c)
{
    if (!c->journal)
        return;
    bucketjournal_done_t d;
    bucketjournal_done(c->journal, &d);
    parked_change_t *p;
    while ((p = parked_take_durable(c->parked, d.durable))) { /* oldest first */
        log_info("bucket %s %s: durable (%.1f ms after it was asked)", p->name,
                 p->is_set ? "set" : "removed", (mono_now() - p->t0) * 1e3);
        finish_parked(c, p, NULL, NULL);
    }
    if (d.rc == 0)
        return;
    log_error("the journal of %s: a write failed: %s", c->path, d.msg);
    /* The failed ones are the newest parked (every one after the first
     * failed failed too): undone newest first, each answered. */
    while ((p = parked_take_failed(c->parked, d.failed_from, d.failed_to))) {
        undo_parked(c, p);
        log_error("bucket %s: not %s, undone: %s", p->name, p->is_set ? "set" : "removed",
                  d.msg);
        finish_parked(c, p, "io", d.msg);
    }
}

size_t conf_settle(conf_t *c, double timeout_s)
{
    if (!c || !c->journal || !parked_count(c->parked))
        return 0;
    bucketjournal_flush(c->journal, timeout_s);
    conf_journal_done(c);
    return parked_count(c->parked);
}
