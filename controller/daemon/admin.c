/* admin.c - bqos-controller's admin endpoint: bqos-ctl's requests on the ROUTER socket, dispatched through the command table, their replies (a change's once conf.c says it is durable), and the answers of the stop. */
#include "controller/daemon/admin.h"

#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/log.h"
#include "common/mono.h"
#include "common/names.h"
#include "controller/daemon/statuspage.h"

/* Sets the reply's "warning" when the configuration in force violates
 * admission now (warn mode accepted it, or capacity went since), so that
 * bqos-ctl shows what the log says.  `quick`: the aggregate only, from the
 * sums (after a change: O(1)); else every bucket (the status). */
static void add_warning(admin_t *ad, json_t *r, int quick)
{
    char msg[600];
    if (conf_warning(ad->conf, quick, msg, sizeof msg))
        json_object_set_new(r, "warning", json_string(msg));
}

static void send_reply(admin_t *ad, const parked_env_t *env, const char *text);

/* Waits until `until` (mono_now()) at most for every client answered in the
 * last ADMIN_SENT_WINDOW seconds to hang up: its connection's socket
 * reports the peer's close (POLLRDHUP), or is closed already (POLLNVAL:
 * ZeroMQ's I/O thread saw the close).  The sockets are ZeroMQ's: polled
 * only, never read. */
static void wait_hangups(admin_t *ad, double until)
{
    struct pollfd pf[ADMIN_SENT_MAX];
    size_t n = 0;
    double now = mono_now();
    for (size_t k = 0; k < ADMIN_SENT_MAX; k++) {
        if (ad->sent[k].at <= 0 || now - ad->sent[k].at > ADMIN_SENT_WINDOW ||
            ad->sent[k].fd < 0)
            continue;
        size_t m = 0;
        while (m < n && pf[m].fd != ad->sent[k].fd)
            m++;
        if (m == n)
            pf[n++] = (struct pollfd){.fd = ad->sent[k].fd, .events = POLLRDHUP};
    }
    size_t answered = n;
    while (n > 0 && (now = mono_now()) < until) {
        int rc = poll(pf, n, (int)ceil((until - now) * 1e3));
        if (rc < 0 && errno != EINTR)
            break;
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (!(pf[k].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
                pf[m++] = pf[k];
        n = m;
    }
    if (n)
        log_warn("stopping: %zu of %zu clients answered in the last %.0f s still connected after "
                 "%.2f s; an answer they have not read yet is lost as the socket closes",
                 n, answered, ADMIN_SENT_WINDOW, ADMIN_HANGUP_WAIT);
    else if (answered)
        log_info("stopping: the %zu clients answered in the last %.0f s hung up", answered,
                 ADMIN_SENT_WINDOW);
}

void admin_stop(admin_t *ad, double since)
{
    double left = since + ADMIN_STOP_WAIT - mono_now();
    if (conf_settle(ad->conf, left > 0 ? left : 0) > 0)
        log_warn("the disk did not take the journal within %.2f s", ADMIN_STOP_WAIT);
    conf_answer_stopping(ad->conf);
    wait_hangups(ad, since + ADMIN_HANGUP_WAIT);
}

void admin_close(admin_t *ad)
{
    conf_answer_stopping(ad->conf);
    free(ad->direct);
    ad->direct = NULL;
}

/* ---- the commands ------------------------------------------------------ */

static json_t *reply_error(const char *code, const char *msg)
{
    return json_pack("{s:i, s:b, s:s, s:s}", "v", 1, "ok", 0, "error", code, "message", msg);
}

/* Adds to r who leads (leader_id, leader_admin) and the HA counters ("ha")
 * of a controller with etcd (ad->ld not NULL). */
static void set_leader(json_t *r, const admin_t *ad)
{
    json_object_set_new(r, "leader_id", json_string(ad->ld->leader_id));
    json_object_set_new(r, "leader_admin", json_string(ad->ld->leader_admin));
    const leader_t *l = ad->ld;
    json_object_set_new(
        r, "ha",
        json_pack("{s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:f}", "polls", (json_int_t)l->polls,
                  "errors", (json_int_t)l->errors, "elections", (json_int_t)l->elections,
                  "stepdowns", (json_int_t)l->stepdowns, "poll_ms_mean",
                  l->polls ? l->poll_seconds * 1e3 / (double)l->polls : 0.0, "fenced",
                  (json_int_t)ad->nodes->fenced, "heartbeats", (json_int_t)l->beats,
                  "depositions", (json_int_t)l->depositions, "stale_ms", l->cfg.stale_s * 1e3));
    /* the epoch's parts (docs/controller.md "Epochs") */
    json_t *ha = json_object_get(r, "ha");
    json_object_set_new(ha, "epoch_floor", json_integer((json_int_t)l->floor));
    json_object_set_new(ha, "floor_raises", json_integer((json_int_t)l->raises));
    json_object_set_new(ha, "nodes_follow", json_integer((json_int_t)l->follows));
    /* docs/controller.md "Acknowledged changes" */
    json_object_set_new(ha, "table_version", json_integer((json_int_t)l->table_version));
    json_object_set_new(ha, "table_restores", json_integer((json_int_t)l->restores));
}

/* An error reply; not_leader names the leader (its id and admin endpoint,
 * when known) so that bqos-ctl can go there. */
static json_t *reply_not_leader(admin_t *ad, const char *code, const char *msg)
{
    json_t *r = reply_error(code, msg);
    if (strcmp(code, "not_leader") == 0 && ad->ld && ad->ld->leader_id[0])
        set_leader(r, ad);
    return r;
}

/* NULL if this controller may change the table; else the not_leader reply. */
static json_t *check_leader(admin_t *ad)
{
    if (!ad->ld || leader_leads(ad->ld, mono_now()))
        return NULL;
    char msg[400];
    snprintf(msg, sizeof msg, "this controller (%s) is a standby; the leader is %s",
             ad->ld->cfg.id, ad->ld->leader_id[0] ? ad->ld->leader_id : "not known yet");
    return reply_not_leader(ad, "not_leader", msg);
}

static json_t *reply_ok(void)
{
    return json_pack("{s:i, s:b}", "v", 1, "ok", 1);
}

static json_t *limit_json(int64_t limit)
{
    return limit == BUCKETFILE_NO_LIMIT ? json_null() : json_integer(limit);
}

/* A byte limit (0: none) as JSON: null for none. */
static json_t *byte_limit_json(int64_t limit_bytes)
{
    return limit_bytes > 0 ? json_integer(limit_bytes) : json_null();
}

static json_t *split_json(const split_t *s, double scale)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", "receive", s->receive * scale, "decode",
                     s->decode * scale, "pshift", s->pshift * scale, "encode", s->encode * scale,
                     "send", s->send * scale);
}

/* The status's "default" object: whether the bucket file has a `default`
 * bucket (the limit of all traffic of buckets it lacks) and that traffic by
 * bucket, the 64 busiest, the rest summed as "(other)". */
#define STATUS_UNCONF_MAX 64
static json_t *default_json(admin_t *ad)
{
    json_t *o = json_object();
    const bucketfile_t *bf = conf_table(ad->conf);
    int b = bucketfile_find(bf, "default");
    if (b >= 0) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, (size_t)b);
        json_object_set_new(o, "configured", json_true());
        json_object_set_new(o, "reservation", json_integer((json_int_t)x->reservation));
        json_object_set_new(o, "limit", limit_json(x->limit));
    } else {
        json_object_set_new(o, "configured", json_false());
        json_object_set_new(o, "limit", json_null());
        json_object_set_new(o, "note", json_string("unlimited (no `default` bucket in the file)"));
    }
    ctrl_unconf_t u[STATUS_UNCONF_MAX], rest;
    int n = ctrl_unconfigured(ad->ctrl, u, STATUS_UNCONF_MAX, &rest);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:i}", "name", u[i].name,
                                             "arrivals", (json_int_t)u[i].arrivals, "served",
                                             (json_int_t)u[i].served, "nodes", u[i].nodes));
    json_object_set_new(o, "unconfigured", arr);
    if (n >= 0 && rest.nodes > 0)
        json_object_set_new(o, "other",
                            json_pack("{s:i, s:I, s:I}", "buckets", rest.nodes, "arrivals",
                                      (json_int_t)rest.arrivals, "served",
                                      (json_int_t)rest.served));
    return o;
}

/* Status "root" (controller shards, issue 30): the root exchange's
 * counters, this shard's slices live or lapsed and, at a root candidate,
 * each shard's needs ("live": fresh within two intervals). */
static json_t *root_json(const rootx_t *rx)
{
    rootx_stats_t rs;
    rootx_view_t v;
    double now = mono_now();
    rootx_stats(rx, &rs);
    rootx_view(rx, now, &v);
    json_t *r = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:{s:i, s:i}, s:b}",
                          "needs_sent", (json_int_t)rs.needs_sent, "needs_taken",
                          (json_int_t)rs.needs_taken, "slices_sent", (json_int_t)rs.slices_sent,
                          "slices_taken", (json_int_t)rs.slices_taken, "dropped",
                          (json_int_t)rs.dropped, "steps", (json_int_t)rs.steps, "steps_failed",
                          (json_int_t)rs.step_failed, "root_epoch", (json_int_t)rs.root_epoch,
                          "slices", "live", v.live, "lapsed", v.lapsed, "root", v.root);
    if (r && v.root) {
        json_t *sh = json_array();
        for (int s = 0; sh && s < v.shards && s < 256; s++)
            json_array_append_new(sh, v.fresh[s] < 0
                                          ? json_pack("{s:i, s:b}", "shard", s, "live", 0)
                                          : json_pack("{s:i, s:b, s:i}", "shard", s, "live",
                                                      v.fresh[s] > 0, "needs_age_ms",
                                                      (int)(v.age_s[s] * 1e3)));
        json_object_set_new(r, "shards", sh);
    }
    return r;
}

/* Status "auth": whether CURVE is on, and the connections and requests
 * admitted and refused (by reason). */
static json_t *auth_json(const auth_t *au)
{
    json_t *o = json_pack("{s:s}", "mode", au ? "curve" : "none");
    if (!au)
        return o;
    json_t *rf = json_object();
    for (int i = 0; i < AUTH__NREASONS; i++)
        json_object_set_new(rf, auth_reason_str((auth_reason_t)i),
                            json_integer((json_int_t)au->refused[i]));
    json_object_set_new(o, "keys", json_integer((json_int_t)authkeys_count(au->keys)));
    json_object_set_new(o, "accepted", json_integer((json_int_t)au->accepted));
    json_object_set_new(o, "refused", rf);
    return o;
}

/* The head of every status reply: the clock (period, interval, elapsed
 * time), whether this controller leads, and who does.  *elapsed and *pms
 * get the ms elapsed in the period and its length. */
static json_t *status_head(admin_t *ad, double now, double *elapsed, double *pms)
{
    json_t *r = reply_ok();
    *pms = ad->clk->period_s * 1000;
    *elapsed = (now - ad->clk->period_start) * 1000;
    if (*elapsed < 0)
        *elapsed = 0;
    json_object_set_new(r, "period", json_integer((json_int_t)ad->clk->period));
    json_object_set_new(r, "interval", json_integer(ad->clk->interval));
    json_object_set_new(r, "intervals", json_integer(ad->clk->intervals));
    json_object_set_new(r, "period_ms", json_integer((json_int_t)llround(*pms)));
    json_object_set_new(r, "elapsed_ms", json_integer((json_int_t)llround(*elapsed)));
    /* High availability: alone (no etcd) a controller always leads, epoch 0. */
    json_object_set_new(r, "leader", json_boolean(!ad->ld || leader_leads(ad->ld, now)));
    json_object_set_new(r, "epoch", json_integer(ad->ld ? (json_int_t)ad->ld->leader_epoch : 0));
    if (ad->ld) {
        json_object_set_new(r, "id", json_string(ad->ld->cfg.id));
        set_leader(r, ad);
    }
    return r;
}

/* Node i as the status lists it. */
static json_t *node_json(admin_t *ad, int i, double now)
{
    ctrl_node_info_t ni;
    ctrl_node_info(ad->ctrl, i, &ni);
    double last = nodes_last_msg(ad->nodes, i);
    json_t *age = last > 0 ? json_integer((json_int_t)llround((now - last) * 1000)) : json_null();
    uint64_t falls = 0;
    int fb = nodes_fallback(ad->nodes, i, &falls);
    json_t *o = json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:b, s:I}", "name", ni.name, "state",
                          ni.up ? "up" : "down", "last_report_ms", age, "capacity",
                          (json_int_t)llround(ni.capacity), "profile",
                          (json_int_t)llround(ni.profile), "buckets", (json_int_t)ni.buckets,
                          "fallback", fb, "fallbacks", (json_int_t)falls);
    if (ni.byte_capacity > 0)
        json_object_set_new(o, "byte_capacity", json_integer(llround(ni.byte_capacity)));
    return o;
}

/* Shadow mode and unused reservations (issue 28) in bucket bi's status
 * object o: "shadow": true while its limit is counted, not enforced; the
 * reason "reservation_unused" with "unused_periods" once its reservation
 * went unused (periods judged idle) for --reservation-unused-periods in a
 * row. */
static void bucket_rollout_json(admin_t *ad, const ctrl_bucket_info_t *bi, json_t *o)
{
    if (bi->shadow)
        json_object_set_new(o, "shadow", json_true());
    const cmetrics_outcome_t *oc = ad->met ? cmetrics_outcome(ad->met, bi->name) : NULL;
    if (oc && cmetrics_unused(ad->met, oc)) {
        json_object_set_new(o, "reason", json_string("reservation_unused"));
        json_object_set_new(o, "unused_periods", json_integer((json_int_t)oc->idle_run));
    }
}

/* A template-made bucket (issue 27): "template_rule", the index of the
 * rule that made it, and "template_rule_name", its name if it has one. */
static void bucket_template_json(const admin_t *ad, int b, json_t *o)
{
    int rule = ctrl_bucket_template(ad->ctrl, b);
    if (rule < 0)
        return;
    json_object_set_new(o, "template_rule", json_integer(rule));
    const char *name = rules_name(ctrl_rules(ad->ctrl), (size_t)rule);
    if (name && *name)
        json_object_set_new(o, "template_rule_name", json_string(name));
}

/* The template-made buckets' counters (ctrl_dyn_stats()) as the status's
 * "templates". */
static json_t *templates_json(const admin_t *ad)
{
    ctrl_dyn_stats_t ds;
    ctrl_dyn_stats(ad->ctrl, &ds);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "buckets", (json_int_t)ds.buckets, "made",
                     (json_int_t)ds.made, "expired", (json_int_t)ds.expired, "refused",
                     (json_int_t)ds.refused, "dropped", (json_int_t)ds.dropped, "r_zeroed",
                     (json_int_t)ds.r_zeroed);
}

/* Bucket b (controller table index) as the status lists it: its figures
 * summed over the nodes, `elapsed` of `pms` ms into the period. */
static json_t *bucket_json(admin_t *ad, int b, double elapsed, double pms)
{
    ctrl_bucket_info_t bi;
    ctrl_bucket_info(ad->ctrl, b, &bi);
    uint64_t served = bi.served_r + bi.served_l + bi.served_o;
    double res_tokens = (double)bi.reservation * ad->clk->period_s;
    int on_track = bi.reservation == 0 || (double)served >= res_tokens ||
                   (double)served >= res_tokens * elapsed / pms || bi.queued == 0;
    json_t *o = json_pack(
        "{s:s, s:I, s:o, s:i, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:o}", "name", bi.name,
        "reservation", (json_int_t)bi.reservation, "limit", limit_json(bi.limit), "weight",
        (int)bi.weight, "served", (json_int_t)served, "served_r", (json_int_t)bi.served_r,
        "served_l", (json_int_t)bi.served_l, "served_o", (json_int_t)bi.served_o, "queued",
        (json_int_t)bi.queued, "on_track", on_track, "demand", (json_int_t)bi.demand,
        "r_tokens", (json_int_t)bi.r_tokens, "l_tokens",
        bi.l_tokens == CTRL_UNLIMITED ? json_null() : json_integer(bi.l_tokens));
    json_object_set_new(o, "reason", json_string(cmetrics_reason(&bi, ad->clk)));
    bucket_rollout_json(ad, &bi, o);
    bucket_template_json(ad, b, o);
    if (bi.parent) /* nested buckets (issue 28) */
        json_object_set_new(o, "parent", json_string(bi.parent));
    if (bi.children)
        json_object_set_new(o, "children", json_integer(bi.children));
    if (bi.reservation_bytes > 0 || bi.limit_bytes > 0) /* cost-aware tokens */
        json_object_update_new(
            o, json_pack("{s:I, s:o, s:I, s:I, s:o}", "reservation_bytes",
                         (json_int_t)bi.reservation_bytes, "limit_bytes",
                         byte_limit_json(bi.limit_bytes), "served_bytes",
                         (json_int_t)bi.served_bytes, "r_bytes", (json_int_t)bi.r_bytes, "l_bytes",
                         bi.l_bytes == CTRL_UNLIMITED ? json_null() : json_integer(bi.l_bytes)));
    return o;
}

/* ---- status: which buckets, in what order (statuspage.h) ---------------- */

/* Reads the request's page into *pg.  Returns NULL, or the bad_request
 * reply. */
static json_t *status_page(json_t *req, statuspage_req_t *pg)
{
    const char *err = NULL;
    return statuspage_parse(req, pg, &err) < 0 ? reply_error("bad_request", err) : NULL;
}

/* The status's bucket rows as *pg asks, into r's "buckets", and its
 * "summary": the buckets configured, matched and shown, and the matched
 * ones' sums.  One pass over the table; a sorted page keeps only the best
 * offset + limit in a heap: O(n log(offset + limit)), and the reply holds
 * at most `limit` rows whatever the table's size. */
static void status_buckets(admin_t *ad, const statuspage_req_t *pg, json_t *r, double elapsed,
                           double pms)
{
    int nb = ctrl_nbuckets(ad->ctrl);
    statuspage_t *sp = statuspage_new(pg, (size_t)nb); /* NULL: no rows, the sums still */
    size_t matched = 0, queued_n = 0, limited = 0;
    int64_t res = 0, demand = 0;
    uint64_t served = 0, queued = 0;
    for (int b = 0; b < nb; b++) {
        ctrl_bucket_info_t bi;
        ctrl_bucket_info(ad->ctrl, b, &bi);
        if (pg->glob && fnmatch(pg->glob, bi.name, 0) != 0)
            continue;
        matched++;
        uint64_t sv = bi.served_r + bi.served_l + bi.served_o;
        res += bi.reservation;
        demand += bi.demand;
        served += sv;
        queued += bi.queued;
        queued_n += bi.queued > 0;
        limited += bi.limit != BUCKETFILE_NO_LIMIT;
        if (!sp)
            continue;
        int64_t key = 0;
        switch (pg->sort) {
        case STATUSPAGE_RESERVATION: key = bi.reservation; break;
        case STATUSPAGE_LIMIT: key = bi.limit; break;
        case STATUSPAGE_DEMAND: key = bi.demand; break;
        case STATUSPAGE_SERVED: key = (int64_t)(sv > INT64_MAX ? INT64_MAX : sv); break;
        case STATUSPAGE_QUEUED: key = (int64_t)(bi.queued > INT64_MAX ? INT64_MAX : bi.queued); break;
        default: break;
        }
        statuspage_offer(sp, b, key, bi.name);
    }
    const int *rows = NULL;
    size_t nrows = sp ? statuspage_rows(sp, &rows) : 0;
    json_t *bs = json_array();
    for (size_t i = 0; i < nrows; i++)
        json_array_append_new(bs, bucket_json(ad, rows[i], elapsed, pms));
    statuspage_destroy(&sp);
    json_object_set_new(r, "buckets", bs);
    json_t *sm = json_pack("{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "buckets",
                           (json_int_t)nb, "matched", (json_int_t)matched, "shown",
                           (json_int_t)json_array_size(bs), "offset", (json_int_t)pg->offset,
                           "sort", statuspage_sort_name(pg->sort), "reservation", (json_int_t)res,
                           "limited", (json_int_t)limited, "demand", (json_int_t)demand,
                           "served", (json_int_t)(served > INT64_MAX ? INT64_MAX : served),
                           "queued", (json_int_t)(queued > INT64_MAX ? INT64_MAX : queued),
                           "queued_buckets", (json_int_t)queued_n);
    if (pg->glob)
        json_object_set_new(sm, "bucket", json_string(pg->glob));
    json_object_set_new(r, "summary", sm);
}

static json_t *cmd_status(admin_t *ad, json_t *req)
{
    statuspage_req_t pg;
    json_t *bad = status_page(req, &pg);
    if (bad)
        return bad;
    double now = mono_now(), elapsed, pms;
    json_t *r = status_head(ad, now, &elapsed, &pms);
    json_t *nodes = json_array();
    for (int i = 0; i < ctrl_nnodes(ad->ctrl); i++)
        json_array_append_new(nodes, node_json(ad, i, now));
    json_object_set_new(r, "nodes", nodes);
    status_buckets(ad, &pg, r, elapsed, pms);
    json_object_set_new(r, "templates", templates_json(ad));
    add_warning(ad, r, 0);
    json_object_set_new(r, "default", default_json(ad));
    const ctrl_stats_t *cs = ctrl_stats(ad->ctrl);
    json_t *st = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "rounds",
        (json_int_t)cs->rounds, "computed", (json_int_t)cs->computed, "skipped",
        (json_int_t)cs->skipped, "reports", (json_int_t)cs->reports, "stale_reports",
        (json_int_t)cs->stale_reports, "unknown_records", (json_int_t)cs->unknown_records,
        "nodes_marked_down", (json_int_t)cs->nodes_marked_down, "nodes_back_up",
        (json_int_t)cs->nodes_back_up, "push_tokens", (json_int_t)ad->nodes->push_tokens,
        "push_heartbeats", (json_int_t)ad->nodes->push_heartbeats, "send_failed",
        (json_int_t)ad->nodes->send_failed, "messages_ok", (json_int_t)ad->nodes->pst.ok, "messages_rejected",
        (json_int_t)ad->nodes->pst.rejected_total);
    json_t *rej = json_object();
    for (int i = 1; i < PROTO_E__COUNT; i++)
        if (ad->nodes->pst.rejected[i])
            json_object_set_new(rej, proto_reason_str((proto_reason_t)i),
                                json_integer((json_int_t)ad->nodes->pst.rejected[i]));
    json_object_set_new(st, "rejected", rej);
    /* What configuration changes cost: full rebuilds of ctrl's state, and
     * changes of one bucket in place (the journal's, without etcd). */
    json_object_set_new(st, "full_rebuilds", json_integer((json_int_t)cs->full_rebuilds));
    json_object_set_new(st, "bucket_changes", json_integer((json_int_t)cs->bucket_changes));
    bucketjournal_stats_t js;
    if (conf_journal_stats(ad->conf, &js) == 0) {
        json_object_set_new(st, "journal",
                            json_pack("{s:I, s:I, s:I, s:I, s:b, s:I}", "bytes",
                                      (json_int_t)js.bytes, "appends", (json_int_t)js.appends,
                                      "compactions", (json_int_t)js.compactions,
                                      "compaction_failures", (json_int_t)js.failures,
                                      "compacting", js.running, "pending",
                                      (json_int_t)js.pending));
    }
    json_object_set_new(st, "duplicate_names", json_integer((json_int_t)cs->duplicate_names));
    json_t *imp = json_object();
    for (int i = 0; i < CTRL_IMPL__COUNT; i++)
        json_object_set_new(imp, ctrl_impl_str((ctrl_impl_t)i),
                            json_integer((json_int_t)cs->implausible[i]));
    json_object_set_new(st, "implausible", imp);
    json_object_set_new(st, "nodes_forgotten", json_integer((json_int_t)cs->nodes_forgotten));
    json_object_set_new(st, "node_fallbacks", json_integer((json_int_t)ad->nodes->node_fallbacks));
    json_object_set_new(st, "node_resumes", json_integer((json_int_t)ad->nodes->node_resumes));
    json_object_set_new(r, "stats", st);
    json_object_set_new(r, "auth", auth_json(ad->auth));
    if (ad->met && ad->met->rx)
        json_object_set_new(r, "root", root_json(ad->met->rx));
    json_t *tm = json_object();
    json_object_set_new(tm, "last_ms", split_json(&ad->tm->last, 1e3));
    json_object_set_new(tm, "mean_ms",
                        split_json(&ad->tm->total, ad->tm->nsplits ? 1e3 / (double)ad->tm->nsplits : 0));
    json_object_set_new(tm, "rounds", json_integer((json_int_t)ad->tm->nsplits));
    json_object_set_new(tm, "cpu_ms_per_round",
                        json_real(ad->tm->nsplits > 1 ? ad->tm->cpu_total * 1e3 / (double)(ad->tm->nsplits - 1) : 0));
    json_object_set_new(tm, "last_skipped", json_boolean(ad->tm->last_res.skipped));
    json_object_set_new(tm, "late_rounds", json_integer((json_int_t)ad->tm->late_rounds));
    json_object_set_new(tm, "late_max_ms", json_real(ad->tm->late_max * 1e3));
    json_object_set_new(r, "timing", tm);
    return r;
}

/* One bucket on one node (ctrl_pair_info()) as status_node and
 * status_bucket list it; `key` and `name` say which (the bucket's name
 * in a node's list, the node's in a bucket's). */
static json_t *pair_json(const char *key, const char *name, const ctrl_pair_info_t *pi)
{
    return json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", key, name, "reported",
                     pi->reported, "served",
                     (json_int_t)(pi->served_r + pi->served_l + pi->served_o), "served_r",
                     (json_int_t)pi->served_r, "served_l", (json_int_t)pi->served_l, "served_o",
                     (json_int_t)pi->served_o, "queued", (json_int_t)pi->queued, "demand",
                     (json_int_t)pi->demand, "r_tokens",
                     pi->r_tokens < 0 ? json_null() : json_integer(pi->r_tokens), "l_tokens",
                     pi->l_tokens == CTRL_UNLIMITED ? json_null() : json_integer(pi->l_tokens));
}

/* The request's "name": NULL with *name set, or the bad_request reply. */
static json_t *get_name(json_t *req, const char **name)
{
    json_t *jn = json_object_get(req, "name");
    if (!json_is_string(jn))
        return reply_error("bad_request", "\"name\" (string) is required");
    *name = json_string_value(jn);
    return NULL;
}

/* status_node {"name": NODE}: the status head, the node as the status
 * lists it, and each configured bucket its table holds, on that node: served
 * this period by kind, queued, demand, and the tokens last pushed to it.
 * Paged as the status is ("limit", "offset", "bucket" glob; table order
 * only: a pair has no figure the status sorts by), with a "summary" of
 * the rows held, matched and shown.  A node that never said hello:
 * not_found. */
static json_t *cmd_status_node(admin_t *ad, json_t *req)
{
    const char *name = NULL;
    json_t *bad = get_name(req, &name);
    if (bad)
        return bad;
    statuspage_req_t pg;
    if ((bad = status_page(req, &pg)))
        return bad;
    if (pg.sort != STATUSPAGE_TABLE)
        return reply_error("bad_request", "status_node lists a node's buckets in table order "
                                          "(no \"sort\")");
    int n = ctrl_node_find(ad->ctrl, name), nn = ctrl_nnodes(ad->ctrl);
    if (n < 0) { /* the error names the nodes there are */
        char known[300] = "";
        size_t kl = 0;
        for (int i = 0; i < nn && kl < sizeof known - 1; i++) {
            ctrl_node_info_t ni;
            if (ctrl_node_info(ad->ctrl, i, &ni) == 0)
                kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s", kl ? ", " : "", ni.name);
        }
        char msg[500];
        snprintf(msg, sizeof msg, "no node '%.100s' has said hello to this controller (%s%s)", name,
                 nn ? "nodes: " : "no nodes", known);
        return reply_error("not_found", msg);
    }
    double now = mono_now(), elapsed, pms;
    json_t *r = status_head(ad, now, &elapsed, &pms);
    json_object_set_new(r, "node", node_json(ad, n, now));
    const char *const *names;
    size_t nb;
    ctrl_table(ad->ctrl, &names, &nb);
    json_t *bs = json_array();
    int64_t held = 0, matched = 0;
    for (int b = 0; b < ctrl_nbuckets(ad->ctrl) && (size_t)b < nb; b++) {
        ctrl_pair_info_t pi;
        if (ctrl_pair_info(ad->ctrl, n, b, &pi) < 0)
            continue;
        held++;
        if (pg.glob && fnmatch(pg.glob, names[b], 0) != 0)
            continue;
        if (matched++ >= pg.offset && (pg.limit < 0 || matched - pg.offset <= pg.limit))
            json_array_append_new(bs, pair_json("name", names[b], &pi));
    }
    json_object_set_new(r, "buckets", bs);
    json_t *sm = json_pack("{s:I, s:I, s:I, s:I, s:s}", "buckets", (json_int_t)held, "matched",
                           (json_int_t)matched, "shown", (json_int_t)json_array_size(bs),
                           "offset", (json_int_t)pg.offset, "sort", statuspage_sort_name(STATUSPAGE_TABLE));
    if (sm && pg.glob)
        json_object_set_new(sm, "bucket", json_string(pg.glob));
    json_object_set_new(r, "summary", sm);
    return r;
}

/* status_bucket {"name": BUCKET}: the status head, the bucket as the status
 * lists it (summed over the nodes), and one entry per node whose table holds
 * it (as status_node's), the others counted in "nodes_without".  A bucket
 * the configuration lacks: not_found. */
static json_t *cmd_status_bucket(admin_t *ad, json_t *req)
{
    const char *name = NULL;
    json_t *bad = get_name(req, &name);
    if (bad)
        return bad;
    int b = ctrl_bucket_find(ad->ctrl, name);
    if (b < 0 || b >= ctrl_nbuckets(ad->ctrl)) {
        char msg[400];
        snprintf(msg, sizeof msg, "no bucket '%.250s' in the configuration (bqos-ctl buckets "
                 "lists them)", name);
        return reply_error("not_found", msg);
    }
    double now = mono_now(), elapsed, pms;
    json_t *r = status_head(ad, now, &elapsed, &pms);
    json_object_set_new(r, "bucket", bucket_json(ad, b, elapsed, pms));
    json_t *ns = json_array();
    int without = 0;
    for (int i = 0; i < ctrl_nnodes(ad->ctrl); i++) {
        ctrl_node_info_t ni;
        ctrl_pair_info_t pi;
        if (ctrl_node_info(ad->ctrl, i, &ni) < 0 || ctrl_pair_info(ad->ctrl, i, b, &pi) < 0) {
            without++;
            continue;
        }
        json_t *o = pair_json("node", ni.name, &pi);
        json_object_set_new(o, "state", json_string(ni.up ? "up" : "down"));
        json_array_append_new(ns, o);
    }
    json_object_set_new(r, "nodes", ns);
    json_object_set_new(r, "nodes_without", json_integer(without));
    return r;
}

/* One bucket's outcome record as the history reply shows it. */
static json_t *history_json(const cmetrics_outcome_t *o, size_t periods)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < periods && i < history_count(o->hist); i++) {
        const history_rec_t *h = history_get(o->hist, i);
        json_t *res = h->flags & HISTORY_RES_MISSED ? json_string("missed")
                    : h->flags & HISTORY_RES_MET   ? json_string("met")
                    : h->flags & HISTORY_IDLE      ? json_string("idle")
                                                   : json_null();
        json_array_append_new(arr, json_pack("{s:I, s:o, s:b, s:I, s:I}", "period",
                                             (json_int_t)h->period, "reservation", res,
                                             "held_at_limit", (h->flags & HISTORY_HELD) != 0,
                                             "served", (json_int_t)h->served, "queued",
                                             (json_int_t)h->queued));
    }
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:o}", "name", o->name, "met",
                     (json_int_t)o->met, "missed", (json_int_t)o->missed, "held",
                     (json_int_t)o->held, "idle", (json_int_t)o->idle, "periods", arr);
}

/* history {"periods": N (1..64, default 10), "bucket": NAME (optional)}:
 * the outcomes of the last N periods judged, newest first, of every bucket
 * judged since the start (or of NAME). */
static json_t *cmd_history(admin_t *ad, json_t *req)
{
    json_t *jp = json_object_get(req, "periods"), *jb = json_object_get(req, "bucket");
    if (jp && (!json_is_integer(jp) || json_integer_value(jp) < 1 ||
               json_integer_value(jp) > HISTORY_PERIODS))
        return reply_error("invalid", "\"periods\" must be an integer in 1..64");
    if (jb && !json_is_string(jb))
        return reply_error("bad_request", "\"bucket\" must be a string");
    size_t periods = jp ? (size_t)json_integer_value(jp) : 10;
    json_t *r = reply_ok(), *arr = json_array();
    json_object_set_new(r, "period", json_integer((json_int_t)ad->clk->period));
    json_object_set_new(r, "period_ms", json_integer((json_int_t)llround(ad->clk->period_s * 1e3)));
    json_object_set_new(r, "kept", json_integer(HISTORY_PERIODS));
    json_object_set_new(r, "buckets", arr);
    if (!ad->met)
        return r;
    json_object_set_new(r, "judged", json_integer((json_int_t)ad->met->periods_judged));
    if (jb) {
        const char *name = json_string_value(jb);
        const cmetrics_outcome_t *o = cmetrics_outcome(ad->met, name);
        if (o)
            json_array_append_new(arr, history_json(o, periods));
        else if (bucketfile_find(conf_table(ad->conf), name) < 0) {
            json_decref(r);
            return reply_error("not_found", "no such bucket (neither configured nor judged)");
        }
        return r;
    }
    for (int i = 0; i < ad->met->nout; i++)
        json_array_append_new(arr, history_json(cmetrics_outcome_at(ad->met, i), periods));
    return r;
}

/* Bucket b of a configuration as `buckets` lists it. */
static json_t *bucket_obj(const bucketfile_bucket_t *b)
{
    json_t *o = json_pack("{s:s, s:I, s:o, s:i}", "name", b->name, "reservation",
                          (json_int_t)b->reservation, "limit", limit_json(b->limit), "weight",
                          (int)b->weight);
    if (b->shadow)
        json_object_set_new(o, "shadow", json_true());
    if (bucketfile_has_parent(b))
        json_object_set_new(o, "parent", json_string(b->parent_name));
    if (bucketfile_has_bytes(b))
        json_object_update_new(o, json_pack("{s:I, s:o}", "reservation_bytes",
                                            (json_int_t)b->reservation_bytes, "limit_bytes",
                                            byte_limit_json(b->limit_bytes)));
    return o;
}

static json_t *cmd_buckets(admin_t *ad, json_t *req)
{
    (void)req;
    json_t *r = reply_ok();
    json_t *arr = json_array();
    const bucketfile_t *bf = conf_table(ad->conf);
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        json_array_append_new(arr, bucket_obj(bucketfile_get(bf, i)));
    json_object_set_new(r, "buckets", arr);
    return r;
}

static int get_rate(json_t *req, const char *key, int64_t max, int64_t *out, char *msg,
                    size_t size)
{
    json_t *v = json_object_get(req, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max) {
        snprintf(msg, size, "%s must be an integer in 0..%lld", key, (long long)max);
        return -EINVAL;
    }
    *out = json_integer_value(v);
    return 0;
}

/* The start of a change to one bucket: NULL, with *jn the request's "name"
 * (a string), if this controller may change the table; else the reply
 * (not_leader, or bad_request when the name is missing). */
static json_t *check_change(admin_t *ad, json_t *req, json_t **jn)
{
    json_t *standby = check_leader(ad);
    if (standby)
        return standby;
    *jn = json_object_get(req, "name");
    if (!json_is_string(*jn))
        return reply_error("bad_request", "\"name\" (string) is required");
    return NULL;
}

/* A set request's "parent" (nested buckets, issue 28): a bucket name, or
 * null or "" for none; absent: as it was.  Returns NULL, or the error
 * reply. */
static json_t *set_parent(json_t *req, bucketfile_bucket_t *b)
{
    json_t *jp = json_object_get(req, "parent");
    if (!jp)
        return NULL;
    if (json_is_null(jp) || (json_is_string(jp) && json_string_length(jp) == 0)) {
        bucketfile_bucket_set_parent(b, NULL);
        return NULL;
    }
    size_t pl = json_is_string(jp) ? json_string_length(jp) : 0;
    if (!json_is_string(jp) || pl > BUCKETFILE_PARENT_MAX ||
        names_check_bucket(json_string_value(jp), pl) < 0 || strlen(json_string_value(jp)) != pl)
        return reply_error("invalid", "parent must be a bucket name of at most 63 bytes (or "
                                      "null for none)");
    bucketfile_bucket_set_parent(b, json_string_value(jp)); /* req's: lives through the set */
    return NULL;
}

static json_t *cmd_set(admin_t *ad, json_t *req)
{
    char msg[768];
    json_t *jn, *refused = check_change(ad, req, &jn);
    if (refused)
        return refused;
    const char *name = json_string_value(jn);
    size_t nl = json_string_length(jn);
    if (names_check_bucket(name, nl) < 0 || strlen(name) != nl)
        return reply_error("invalid", "bad bucket name: 1..250 bytes without whitespace, "
                                      "control characters or ':'");
    bucketfile_bucket_t b = {.limit = BUCKETFILE_NO_LIMIT, .weight = 1};
    b.name = name; /* the request's: the table keeps its own copy */
    const bucketfile_t *cur = conf_table(ad->conf);
    int old = bucketfile_find(cur, name);
    if (old >= 0) { /* a change: what the request leaves out stays as it was */
        b = *bucketfile_get(cur, (size_t)old);
        b.name = name; /* the table's copy goes with the table a tree's change replaces */
        /* b.parent_name stays cur's (the parent bucket's name in cur): the
         * change interns it (bucketfile_set()) before it replaces cur, and
         * b is not read after conf_set(). */
    }
    else if (!json_object_get(req, "reservation"))
        return reply_error("bad_request", "\"reservation\" is required for a new bucket");
    if (json_object_get(req, "reservation") &&
        get_rate(req, "reservation", BUCKETFILE_MAX_RATE, &b.reservation, msg, sizeof msg) < 0)
        return reply_error("invalid", msg);
    json_t *jl = json_object_get(req, "limit");
    if (jl && json_is_null(jl))
        b.limit = BUCKETFILE_NO_LIMIT; /* explicitly none */
    else if (jl && get_rate(req, "limit", BUCKETFILE_MAX_RATE, &b.limit, msg, sizeof msg) < 0)
        return reply_error("invalid", msg);
    /* Cost-aware tokens: bytes/s; null or 0 is none. */
    static const char *const bkeys[2] = {"reservation_bytes", "limit_bytes"};
    int64_t *bdst[2] = {&b.reservation_bytes, &b.limit_bytes};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(req, bkeys[k]);
        if (v && json_is_null(v))
            *bdst[k] = 0;
        else if (v && get_rate(req, bkeys[k], BUCKETFILE_MAX_BYTES, bdst[k], msg, sizeof msg) < 0)
            return reply_error("invalid", msg);
    }
    json_t *js = json_object_get(req, "shadow");
    if (js && !json_is_boolean(js))
        return reply_error("invalid", "shadow must be true or false");
    if (js)
        b.shadow = json_is_true(js);
    if (json_object_get(req, "weight")) {
        int64_t w;
        if (get_rate(req, "weight", BUCKETFILE_MAX_WEIGHT, &w, msg, sizeof msg) < 0 || w < 1)
            return reply_error("invalid", "weight must be an integer in 1..1000000");
        b.weight = (uint32_t)w;
    }
    json_t *reply = set_parent(req, &b);
    if (reply)
        return reply;
    jsonloc_err_t err;
    if (bucketfile_check_bucket(&b, &err) < 0) {
        snprintf(msg, sizeof msg, "%.63s: %s", err.path, err.text); /* path: a member name */
        return reply_error("invalid", msg);
    }
    double t0 = mono_now();
    int parked = 0;
    const char *code = conf_set(ad->conf, &b, &parked, msg, sizeof msg);
    if (code)
        return reply_not_leader(ad, code, msg);
    ad->parking = parked; /* its reply waits for the disk */
    log_info("bucket %s %s: reservation %lld limit %lld weight %u; bytes/s reservation "
             "%lld limit %lld (%.1f ms)",
             b.name, old < 0 ? "created" : "changed", (long long)b.reservation,
             (long long)(b.limit == BUCKETFILE_NO_LIMIT ? -1 : b.limit), b.weight,
             (long long)b.reservation_bytes, (long long)(b.limit_bytes ? b.limit_bytes : -1),
             (mono_now() - t0) * 1e3);
    json_t *r = reply_ok();
    json_object_set_new(r, "created", json_boolean(old < 0));
    return r;
}

static json_t *cmd_remove(admin_t *ad, json_t *req)
{
    json_t *jn, *refused = check_change(ad, req, &jn);
    if (refused)
        return refused;
    char msg[768];
    int parked = 0;
    double t0 = mono_now();
    const char *code = conf_remove(ad->conf, json_string_value(jn), &parked, msg, sizeof msg);
    if (code)
        return reply_not_leader(ad, code, msg);
    ad->parking = parked;
    log_info("bucket %s removed (%.1f ms)", json_string_value(jn), (mono_now() - t0) * 1e3);
    return reply_ok();
}

/* ---- rules (issue 27) ------------------------------------------------------ */

static void note_warning(void *arg, size_t i, const char *text)
{
    (void)i;
    json_array_append_new(arg, json_string(text));
}

/* The list as objects and the analysis's warnings, into reply r; also a
 * rule naming a bucket table `bf` does not have (the nodes refuse what it
 * matches: unknown_bucket). */
static json_t *rules_reply(json_t *r, const rules_t *rl, const bucketfile_t *bf)
{
    json_t *arr = json_array(), *warn = json_array();
    for (size_t i = 0; rl && i < rules_count(rl); i++)
        json_array_append_new(arr, json_loads(rules_json(rl, i), 0, NULL));
    if (rl)
        rules_analyze(rl, note_warning, warn);
    for (size_t i = 0; rl && i < rules_count(rl); i++) {
        const char *b;
        if (rules_action(rl, i, &b) == RULES_BUCKET && bucketfile_find(bf, b) < 0) {
            char t[400];
            snprintf(t, sizeof t, "rule %zu names bucket '%s', which the table does not have: "
                                  "the nodes refuse what it matches", i, b);
            json_array_append_new(warn, json_string(t));
        }
    }
    json_object_set_new(r, "rules", arr);
    json_object_set_new(r, "warnings", warn);
    return r;
}

static json_t *cmd_rules(admin_t *ad, json_t *req)
{
    (void)req;
    const bucketfile_t *bf = conf_table(ad->conf);
    return rules_reply(reply_ok(), bucketfile_rules(bf), bf);
}

/* "rule": {"op": "add", "rule": {...}, "at": N} (at: the index it takes;
 * default the end), {"op": "change", "name": NAME|INDEX, "rule": {...}},
 * {"op": "move", "name": ..., "at": N}, {"op": "remove", "name": ...}.  The
 * table's rules are edited (common/rules), saved with it and pushed to the
 * nodes with the next round; the reply lists them with the analysis's
 * warnings (a rule that can never match). */
static json_t *cmd_rule(admin_t *ad, json_t *req)
{
    json_t *standby = check_leader(ad);
    if (standby)
        return standby;
    const char *op = json_string_value(json_object_get(req, "op"));
    json_t *jr = json_object_get(req, "rule"), *jat = json_object_get(req, "at");
    const char *name = json_string_value(json_object_get(req, "name"));
    if (!op)
        return reply_error("bad_request", "\"op\" (add, change, move, remove) is required");
    if (jat && (!json_is_integer(jat) || json_integer_value(jat) < 0))
        return reply_error("bad_request", "\"at\" must be a rule index (0 is the first)");
    const rules_t *cur = bucketfile_rules(conf_table(ad->conf));
    rules_t *rl = cur ? rules_dup(cur) : rules_new();
    if (!rl)
        return reply_error("internal", "out of memory");
    size_t at = jat ? (size_t)json_integer_value(jat) : rules_count(rl);
    int add = strcmp(op, "add") == 0, change = strcmp(op, "change") == 0;
    int idx = add ? 0 : name ? rules_find(rl, name) : -ENOENT;
    jsonloc_err_t e;
    jsonloc_err_clear(&e);
    int rc = 0;
    char msg[768];
    if (!add && !change && strcmp(op, "move") && strcmp(op, "remove")) {
        rules_destroy(&rl);
        return reply_error("bad_request", "\"op\" must be add, change, move or remove");
    }
    if (!add && idx < 0) {
        rules_destroy(&rl);
        snprintf(msg, sizeof msg, "no rule '%s' (a rule's name or index)", name ? name : "");
        return reply_error("not_found", msg);
    }
    if (add || change) {
        char *t = json_is_object(jr) ? json_dumps(jr, JSON_PRESERVE_ORDER) : NULL;
        if (!t) {
            rules_destroy(&rl);
            return reply_error("bad_request", "\"rule\" (an object) is required");
        }
        if (add) {
            idx = (int)(at < rules_count(rl) ? at : rules_count(rl));
            rc = rules_insert(rl, at, t, strlen(t), &e);
        } else {
            rc = rules_replace(rl, (size_t)idx, t, strlen(t), &e);
        }
        free(t);
    } else if (strcmp(op, "move") == 0) {
        rc = rules_move(rl, (size_t)idx, at);
        idx = (int)(at < rules_count(rl) ? at : rules_count(rl) - 1);
    } else {
        rc = rules_remove(rl, (size_t)idx);
        idx = -1;
    }
    if (rc < 0) {
        rules_destroy(&rl);
        if (rc == -ENOMEM)
            return reply_error("internal", "out of memory");
        snprintf(msg, sizeof msg, "%s%s%s", e.path, e.path[0] ? ": " : "", e.text);
        return reply_error("invalid", msg);
    }
    bucketfile_t *bf = bucketfile_dup(conf_table(ad->conf));
    if (!bf || bucketfile_set_rules(bf, rl) < 0) {
        bucketfile_destroy(&bf);
        rules_destroy(&rl);
        return reply_error("internal", "out of memory");
    }
    json_t *ok = rules_reply(reply_ok(), rl, bf);
    if (idx >= 0)
        json_object_set_new(ok, "index", json_integer(idx));
    /* the rules live in the head: the table whole */
    const char *code = conf_replace(ad->conf, bf, msg, sizeof msg);
    if (code) {
        json_decref(ok);
        return reply_not_leader(ad, code, msg);
    }
    log_info("rules: %s %s (%zu rules)", op, name ? name : "",
             rules_count(bucketfile_rules(conf_table(ad->conf))));
    return ok;
}

/* ---- who (issue 27) --------------------------------------------------------- */

/* An identity last seen longer ago than this is not active (the nodes drop
 * theirs after the same time: storage-node/io/who.h WHO_IDLE_S). */
#define WHO_ACTIVE_S 60.0

/* "who": {"name": BUCKET} -> the identities active in BUCKET on every node,
 * from the nodes' last who messages (each node sends its set when it
 * changes, and every few seconds while not empty): node, identity,
 * address, requests, first and last seen (seconds ago), and per node the
 * requests of identities past the node's bound ("other").  O(nodes x their
 * entries), on request only. */
static json_t *cmd_who(admin_t *ad, json_t *req)
{
    const char *name = NULL;
    json_t *bad = get_name(req, &name);
    if (bad)
        return bad;
    double now = mono_now();
    json_t *ids = json_array(), *other = json_array(), *r = reply_ok();
    int n = ctrl_nnodes(ad->ctrl), nodes = 0;
    for (int i = 0; i < n; i++) {
        double at;
        const char *text = nodes_who(ad->nodes, i, &at);
        ctrl_node_info_t ni;
        if (!text || ctrl_node_info(ad->ctrl, i, &ni) < 0)
            continue;
        json_t *doc = json_loads(text, 0, NULL);
        if (!doc) {
            log_debug("who: node %s's text does not parse", ni.name);
            continue;
        }
        nodes++;
        double age = now - at;
        json_t *e;
        size_t k;
        json_array_foreach(json_object_get(doc, "who"), k, e) {
            const char *b = json_string_value(json_object_get(e, "bucket"));
            double last = json_number_value(json_object_get(e, "last")) + age;
            if (!b || strcmp(b, name) != 0 || last > WHO_ACTIVE_S)
                continue;
            json_array_append_new(
                ids, json_pack("{s:s, s:O, s:O, s:O, s:f, s:f}", "node", ni.name, "identity",
                               json_object_get(e, "id"), "addr", json_object_get(e, "addr"),
                               "requests", json_object_get(e, "requests"), "first_seen_s",
                               json_number_value(json_object_get(e, "first")) + age,
                               "last_seen_s", last));
        }
        json_array_foreach(json_object_get(doc, "other"), k, e) {
            const char *b = json_string_value(json_object_get(e, "bucket"));
            if (b && strcmp(b, name) == 0)
                json_array_append_new(other, json_pack("{s:s, s:O}", "node", ni.name, "requests",
                                                       json_object_get(e, "requests")));
        }
        json_decref(doc);
    }
    json_object_set_new(r, "bucket", json_string(name));
    json_object_set_new(r, "identities", ids);
    json_object_set_new(r, "other", other);
    json_object_set_new(r, "nodes", json_integer(nodes));
    json_object_set_new(r, "active_s", json_real(WHO_ACTIVE_S));
    return r;
}

static json_t *cmd_reload(admin_t *ad, json_t *req)
{
    (void)req;
    char msg[512];
    const char *code = conf_reload(ad->conf, msg, sizeof msg);
    if (ad->reloads && !code)
        ad->reloads->ok++;
    else if (ad->reloads && strcmp(code, "not_leader"))
        ad->reloads->error++;
    if (code)
        return reply_not_leader(ad, code, msg);
    json_t *r = reply_ok();
    json_object_set_new(r, "buckets",
                        json_integer((json_int_t)bucketfile_count(conf_table(ad->conf))));
    return r;
}

/* ---- import: a whole table from the operator's machine ------------------ */

static int same_bucket(const bucketfile_bucket_t *a, const bucketfile_bucket_t *b)
{
    return a->reservation == b->reservation && a->limit == b->limit && a->weight == b->weight &&
           a->reservation_bytes == b->reservation_bytes && a->limit_bytes == b->limit_bytes &&
           strcmp(bucketfile_parent(a), bucketfile_parent(b)) == 0;
}

/* What replacing configuration `old` (borrowed; NULL: none) by `bf`
 * (borrowed) changes: {"buckets": count of bf, "added": [bucket], "removed":
 * [bucket], "changed": [{"name", "old": bucket, "new": bucket}], "unchanged":
 * count}, buckets as `buckets` lists them, each list in file order (removed:
 * old's).  *changes gets added + removed + changed. */
static json_t *diff_json(const bucketfile_t *old, const bucketfile_t *bf, size_t *changes)
{
    json_t *add = json_array(), *rem = json_array(), *chg = json_array();
    size_t same = 0;
    for (size_t i = 0; i < bucketfile_count(bf); i++) {
        const bucketfile_bucket_t *b = bucketfile_get(bf, i);
        int k = bucketfile_find(old, b->name);
        const bucketfile_bucket_t *o = k >= 0 ? bucketfile_get(old, (size_t)k) : NULL;
        if (!o)
            json_array_append_new(add, bucket_obj(b));
        else if (!same_bucket(o, b))
            json_array_append_new(chg, json_pack("{s:s, s:o, s:o}", "name", b->name, "old",
                                                 bucket_obj(o), "new", bucket_obj(b)));
        else
            same++;
    }
    for (size_t i = 0; i < bucketfile_count(old); i++) {
        const bucketfile_bucket_t *o = bucketfile_get(old, i);
        if (bucketfile_find(bf, o->name) < 0)
            json_array_append_new(rem, bucket_obj(o));
    }
    /* the rule list (issue 27) is one change when it differs at all */
    int rules = !rules_equal(bucketfile_rules(old), bucketfile_rules(bf));
    *changes = json_array_size(add) + json_array_size(rem) + json_array_size(chg) + (size_t)rules;
    return json_pack("{s:I, s:o, s:o, s:o, s:I, s:b}", "buckets", (json_int_t)bucketfile_count(bf),
                     "added", add, "removed", rem, "changed", chg, "unchanged", (json_int_t)same,
                     "rules_changed", rules);
}

/* The start of an import or diff: NULL with *bf the table the request's
 * "text" (a whole bucket file, parsed as bucketfile_parse() does; errors
 * name "source", a file name of the sender's, or "import") describes,
 * knowing what the table in force knows of the controller's file; else the reply
 * (not_leader at a standby, bad_request, invalid with the position). */
static json_t *import_parse(admin_t *ad, json_t *req, bucketfile_t **bf)
{
    json_t *standby = check_leader(ad);
    if (standby)
        return standby;
    json_t *jt = json_object_get(req, "text"), *js = json_object_get(req, "source");
    if (!json_is_string(jt))
        return reply_error("bad_request", "\"text\" (string: a whole bucket file) is required");
    if (js && !json_is_string(js))
        return reply_error("bad_request", "\"source\" must be a string");
    char src[128];
    snprintf(src, sizeof src, "%s", js ? json_string_value(js) : "import");
    jsonloc_err_t err;
    int rc = bucketfile_parse(json_string_value(jt), json_string_length(jt), src, bf, &err);
    if (rc < 0) {
        char msg[700];
        bucketfile_strerror(&err, msg, sizeof msg);
        log_warn("import refused: %s", msg);
        return reply_error(rc == -ENOMEM ? "internal" : "invalid", msg);
    }
    const bucketfile_t *cur = conf_table(ad->conf);
    if (cur && bucketfile_copy_origin(*bf, cur) < 0) {
        bucketfile_destroy(bf);
        return reply_error("internal", "out of memory");
    }
    return NULL;
}

/* import {"text": FILE TEXT, "source": NAME}: the whole table replaced by
 * the one the text describes, all or nothing: refused (the table unchanged)
 * unless it parses whole and passes what `set` passes (the file unchanged by
 * hand, the arithmetic's bounds, admission); then written (etcd first, then
 * the file, as `set` does: with etcd the file takes the text as sent) and
 * applied.  Reply: the diff (diff_json()); a text that changes nothing is
 * neither written nor applied. */
static json_t *cmd_import(admin_t *ad, json_t *req)
{
    bucketfile_t *bf = NULL;
    json_t *refused = import_parse(ad, req, &bf);
    if (refused)
        return refused;
    size_t changes, n = bucketfile_count(bf);
    json_t *ok = reply_ok();
    json_object_update_new(ok, diff_json(conf_table(ad->conf), bf, &changes));
    if (changes == 0) {
        bucketfile_destroy(&bf);
        return ok;
    }
    char msg[768];
    const char *code = conf_replace(ad->conf, bf, msg, sizeof msg);
    if (code) {
        json_decref(ok);
        return reply_not_leader(ad, code, msg);
    }
    log_info("import: %zu buckets in force (%zu added, %zu removed, %zu changed)", n,
             json_array_size(json_object_get(ok, "added")),
             json_array_size(json_object_get(ok, "removed")),
             json_array_size(json_object_get(ok, "changed")));
    return ok;
}

/* diff {"text": ..., "source": ...}: import's dry run.  The reply is
 * import's diff, and "refusal": {"error", "message"} when import would be
 * refused (file_changed, io, admission) or "warning" when admission in warn
 * mode would let it through; nothing is written, applied or logged. */
static json_t *cmd_diff(admin_t *ad, json_t *req)
{
    bucketfile_t *bf = NULL;
    json_t *refused = import_parse(ad, req, &bf);
    if (refused)
        return refused;
    size_t changes;
    json_t *r = reply_ok();
    json_object_update_new(r, diff_json(conf_table(ad->conf), bf, &changes));
    char msg[768];
    int warned;
    const char *code = conf_check(ad->conf, bf, msg, sizeof msg, &warned);
    if (warned)
        json_object_set_new(r, "warning", json_string(msg));
    if (code && changes > 0)
        json_object_set_new(r, "refusal",
                            json_pack("{s:s, s:s}", "error", code, "message", msg));
    bucketfile_destroy(&bf);
    return r;
}

/* ---- shards: K changing at run time (issue 30; leader.c, reshard.h) ----- */

/* The shards configuration g as JSON: {"k", "gen", "next": {"k", "gen",
 * "from_ms"} or null}. */
static json_t *shardgen_json(const shardgen_t *g)
{
    return json_pack("{s:i, s:I, s:o}", "k", g->k, "gen", (json_int_t)g->gen, "next",
                     g->next_k ? json_pack("{s:i, s:I, s:I}", "k", g->next_k, "gen",
                                           (json_int_t)g->next_gen, "from_ms",
                                           (json_int_t)g->from_ms)
                               : json_null());
}

/* "shards": {} -> the cluster's shards key as this controller last read
 * it ("cluster") and the map this shard runs now ("run": shard, k, gen,
 * buckets). */
static json_t *cmd_shards(admin_t *ad, json_t *req)
{
    (void)req;
    if (!ad->shards || !ad->rs)
        return reply_error("bad_request", "this controller runs no shards (--shards)");
    json_t *r = reply_ok();
    json_object_set_new(r, "cluster", shardgen_json(ad->ld && ad->ld->k_agreed ? &ad->ld->sg
                                                                                : &ad->rs->g));
    json_object_set_new(r, "run", json_pack("{s:i, s:i, s:I, s:i}", "shard", ad->shard, "k",
                                            ad->rs->k_run, "gen", (json_int_t)ad->rs->gen_run,
                                            "buckets", ctrl_nbuckets(ad->ctrl)));
    return r;
}

/* "shards_set": {"k": K', "ahead": N (>= 2, default 3)} -> begins a change
 * of the cluster's K at the first period boundary at least N periods away
 * (leader_shards_begin(): etcd's key gets "next"); a shard's leader only. */
static json_t *cmd_shards_set(admin_t *ad, json_t *req)
{
    if (!ad->shards || !ad->ld)
        return reply_error("bad_request", "K changes at run time only with --shards and --etcd");
    json_t *jk = json_object_get(req, "k"), *ja = json_object_get(req, "ahead");
    if (!json_is_integer(jk) || (ja && !json_is_integer(ja)))
        return reply_error("bad_request", "\"k\" (and \"ahead\") must be integers");
    json_t *nl = check_leader(ad);
    if (nl)
        return nl;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    int64_t now_ms = (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
    json_int_t k = json_integer_value(jk), ahead = ja ? json_integer_value(ja) : 3;
    shardgen_t g = ad->ld->sg;
    int rc = k < 1 || k > 256 || ahead < 2 || ahead > 1000
                 ? -EINVAL
                 : leader_shards_begin(ad->ld, (int)k, now_ms,
                                       (int64_t)llround(ad->clk->period_s * 1e3), (int)ahead, &g);
    char msg[200];
    if (rc == 0 || rc == -EALREADY) {
        json_t *r = reply_ok();
        json_object_set_new(r, "cluster", shardgen_json(&g));
        json_object_set_new(r, "begun", json_boolean(rc == 0));
        return r;
    }
    snprintf(msg, sizeof msg, "%s",
             rc == -EINVAL    ? "k must be 1..256 and ahead 2..1000 periods"
             : rc == -EBUSY   ? "another change of K is under way (its period has not come)"
             : rc == -EAGAIN  ? "the shards key or the leadership changed meanwhile: try again"
             : rc == -EPERM   ? "not this shard's leader"
                              : strerror(-rc));
    json_t *r = reply_error(rc == -EBUSY ? "busy" : rc == -EINVAL ? "bad_request" : "io", msg);
    if (rc == -EBUSY)
        json_object_set_new(r, "cluster", shardgen_json(&g));
    return r;
}

/* ---- the command table --------------------------------------------------- */

/* One admin command: its "cmd", what runs it (the request is borrowed; the
 * reply returned is the caller's), and what it may change (`writes`: a
 * change, refused to reader keys and logged with its author). */
typedef struct {
    const char *name;
    json_t *(*run)(admin_t *ad, json_t *req);
    int writes;
    const char *changes;
} admin_cmd_t;

static const admin_cmd_t admin_cmds[] = {
    {"status", cmd_status, 0, "nothing: the clock, nodes, buckets, counters and round timing"},
    {"history", cmd_history, 0, "nothing: each bucket's outcomes in the last periods"},
    {"buckets", cmd_buckets, 0, "nothing: the configuration in force"},
    {"set", cmd_set, 1, "one bucket, created or changed; admitted, then the file is rewritten"},
    {"remove", cmd_remove, 1, "one bucket, removed; the file is rewritten"},
    {"reload", cmd_reload, 1, "the whole configuration, re-read from the file and admitted"},
    {"status_node", cmd_status_node, 0, "nothing: one node's buckets, its tokens and service"},
    {"status_bucket", cmd_status_bucket, 0, "nothing: one bucket's tokens and service per node"},
    {"import", cmd_import, 1, "the whole configuration, replaced by the text sent; admitted, "
                              "then saved as set saves"},
    {"diff", cmd_diff, 0, "nothing: what import would change, and whether it would be refused"},
    {"rules", cmd_rules, 0, "nothing: the rule list in force, with the analysis's warnings"},
    {"who", cmd_who, 0, "nothing: the identities active in one bucket, per node"},
    {"rule", cmd_rule, 1, "the rule list: one rule added, changed, moved or removed; the file is "
                          "rewritten and the nodes get the new list"},
    {"shards", cmd_shards, 0, "nothing: the cluster's shards key and the map this shard runs"},
    {"shards_set", cmd_shards_set, 1, "the cluster's K: a change begun at a period at least "
                                      "`ahead` periods away (etcd's shards key)"},
};

static const admin_cmd_t *find_cmd(const char *name)
{
    for (size_t i = 0; i < sizeof admin_cmds / sizeof admin_cmds[0]; i++)
        if (strcmp(admin_cmds[i].name, name) == 0)
            return &admin_cmds[i];
    return NULL;
}

/* Runs command c for the sender `p` of request `req`: refused by role,
 * or run; an accepted change is logged with the key that made it and its
 * reply carries the admission warning, if any. */
static json_t *run_cmd(admin_t *ad, const admin_cmd_t *c, json_t *req, const proto_peer_t *p)
{
    const char *who;
    char msg[400];
    if (auth_admin(ad->auth, p, c->name, c->writes, &who, msg, sizeof msg) < 0)
        return reply_error("forbidden", msg);
    if (c->writes && c->run != cmd_set && c->run != cmd_remove)
        conf_settle(ad->conf, -1); /* a whole-table change starts from what is durable */
    json_t *r = c->run(ad, req);
    if (c->writes && json_is_true(json_object_get(r, "ok"))) {
        add_warning(ad, r, 1);
        /* An import's text (up to ADMIN_REQUEST_MAX) is logged as its size. */
        json_t *shown = json_copy(req);
        json_t *jt = json_object_get(req, "text");
        if (shown && json_is_string(jt)) {
            char sz[48];
            snprintf(sz, sizeof sz, "(%zu bytes)", json_string_length(jt));
            json_object_set_new(shown, "text", json_string(sz));
        }
        char *text = shown ? json_dumps(shown, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        log_info("audit: %s by %s: %s", c->name, who, text ? text : "?");
        free(text);
        json_decref(shown);
    }
    return r;
}

/* Reply r as text (NULL: out of memory); r is consumed. */
static char *dump_reply(json_t *r)
{
    char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    return text;
}

static json_t *admin_request(admin_t *ad, const char *data, size_t len, const proto_peer_t *p)
{
    json_error_t jerr;
    json_t *req = json_loadb(data, len, 0, &jerr);
    if (!json_is_object(req)) {
        json_decref(req);
        return reply_error("bad_request", "request must be a JSON object");
    }
    json_t *r;
    json_t *v = json_object_get(req, "v");
    const char *cmd = json_string_value(json_object_get(req, "cmd"));
    if (!json_is_integer(v) || json_integer_value(v) != 1)
        r = reply_error("bad_request", "\"v\" must be 1");
    else if (!cmd)
        r = reply_error("bad_request", "\"cmd\" (string) is required");
    else {
        const admin_cmd_t *c = find_cmd(cmd);
        r = c ? run_cmd(ad, c, req, p) : reply_error("bad_request", "unknown cmd");
    }
    json_decref(req);
    return r;
}

/* Sends `text` behind envelope `env` (a parked slot's or the current
 * request's) without blocking: a client that went away loses it. */
static void send_reply(admin_t *ad, const parked_env_t *env, const char *text)
{
    const char *out = text ? text : "{\"v\":1,\"ok\":false,\"error\":\"internal\","
                                    "\"message\":\"out of memory\"}";
    int rc = 0;
    for (int k = 0; k < env->nenv && rc >= 0; k++)
        rc = zmq_send(ad->sock, env->env[k], env->envl[k], ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0)
        rc = zmq_send(ad->sock, out, strlen(out), ZMQ_DONTWAIT);
    if (rc < 0) {
        log_warn("admin reply failed: %s", zmq_strerror(zmq_errno()));
        return;
    }
    if (env->nenv && env->fd >= 0) { /* the stop waits for it to be read */
        ad->sent[ad->sent_next].fd = env->fd;
        ad->sent[ad->sent_next].at = mono_now();
        ad->sent_next = (ad->sent_next + 1) % ADMIN_SENT_MAX;
    }
}

void admin_reply(void *arg, const parked_env_t *to, char *held, const char *code,
                 const char *msg)
{
    admin_t *ad = arg;
    char *text = code ? dump_reply(reply_error(code, msg)) : held;
    if (to->nenv) {
        send_reply(ad, to, text);
        free(text);
    } else { /* admin_answer() takes it */
        free(ad->direct);
        ad->direct = text;
    }
}

char *admin_answer(admin_t *ad, const char *data, size_t len, const proto_peer_t *p)
{
    ad->parking = 0;
    char *text = dump_reply(admin_request(ad, data, len, p));
    if (!ad->parking)
        return text;
    ad->parking = 0;
    conf_hold_reply(ad->conf, text, &ad->cur);
    if (ad->cur.nenv) /* admin_drain(): the reply waits for the disk */
        return NULL;
    /* No socket: wait for the disk here. */
    conf_settle(ad->conf, -1);
    text = ad->direct;
    ad->direct = NULL;
    return text;
}

/* Reads the rest of a message whose frame `more` says more follow. */
static void skip_frames(admin_t *ad, int more)
{
    while (more) {
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, ad->sock, 0) < 0) {
            zmq_msg_close(&x);
            break;
        }
        more = zmq_msg_more(&x);
        zmq_msg_close(&x);
    }
}

void admin_drain(admin_t *ad)
{
    for (;;) {
        /* ROUTER: the envelope (the peer's routing id, then the empty
         * delimiter a REQ client puts), then one body frame. */
        parked_env_t *env = &ad->cur;
        env->nenv = 0;
        zmq_msg_t msg;
        int more = 1, bad = 0;
        for (;;) {
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, ad->sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&msg);
                if (env->nenv) /* the rest of a message comes at once */
                    log_warn("admin request cut short");
                env->nenv = 0;
                return;
            }
            more = zmq_msg_more(&msg);
            size_t n = zmq_msg_size(&msg);
            if (env->nenv == 0 || (more && env->envl[env->nenv - 1] != 0)) {
                if (env->nenv == PARKED_ENV_FRAMES || n > sizeof env->env[0] || !more) {
                    bad = 1; /* not a REQ client's envelope */
                    zmq_msg_close(&msg);
                    break;
                }
                memcpy(env->env[env->nenv], zmq_msg_data(&msg), n);
                env->envl[env->nenv++] = n;
                zmq_msg_close(&msg);
                continue;
            }
            break; /* the body */
        }
        if (bad) {
            skip_frames(ad, more);
            env->nenv = 0;
            continue;
        }
        proto_peer_t peer;
        proto_peer_get(&msg, &peer);
        env->fd = zmq_msg_get(&msg, ZMQ_SRCFD); /* -1 if unknown */
        size_t before = conf_waiting(ad->conf);
        char *text = more ? dump_reply(reply_error("bad_request", "one frame per request"))
                          : admin_answer(ad, zmq_msg_data(&msg), zmq_msg_size(&msg), &peer);
        int parked = conf_waiting(ad->conf) > before; /* its reply waits for the disk */
        zmq_msg_close(&msg);
        skip_frames(ad, more);
        if (!parked)
            send_reply(ad, env, text);
        free(text);
        env->nenv = 0;
    }
}
