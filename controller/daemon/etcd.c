/* etcd.c - bqos-controller's etcd v3 client: JSON-gateway requests over libcurl with bounded time and size, base64 keys and values, failover between URLs, a watch read until a revision. */
#include "controller/daemon/etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/mono.h"

struct etcd {
    CURL *curl;                  /* one handle: its connection is reused */
    struct curl_slist *headers;
    char *urls[ETCD_MAX_URLS];
    int nurls, cur;              /* cur: the URL that answered last */
    long timeout_ms;
    char *buf;                   /* the answer being received */
    size_t len, cap;
    int too_big;
    double seconds;
    uint64_t requests, bytes_sent;
    /* etcd_watch(): the stream's lines go to watch_line() as they come */
    int (*stream)(etcd_t *e, const char *line, size_t len);
    void *stream_arg;
    int stream_stop;             /* 1: done (aborted on purpose), <0: its error */
};

/* ---- base64 -------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *etcd_b64_encode(const void *data, size_t len)
{
    const unsigned char *p = data;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < len)
            v |= p[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_val(int c)
{
    const char *q = c ? strchr(b64, c) : NULL;
    return q ? (int)(q - b64) : -1;
}

int etcd_b64_decode(const char *s, char **out, size_t *len)
{
    size_t n = strlen(s);
    if (n % 4)
        return -EINVAL;
    char *d = malloc(n / 4 * 3 + 1);
    if (!d)
        return -ENOMEM;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = s[i + k] == '=' && i + 4 == n && k >= 2 ? 0 : b64_val(s[i + k]);
            if (v[k] < 0) {
                free(d);
                return -EINVAL;
            }
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        d[o++] = (char)(x >> 16);
        if (s[i + 2] != '=')
            d[o++] = (char)(x >> 8 & 255);
        if (s[i + 3] != '=')
            d[o++] = (char)(x & 255);
    }
    d[o] = '\0';
    *out = d;
    *len = o;
    return 0;
}

/* ---- the client ---------------------------------------------------------- */

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
    etcd_t *e = arg;
    size_t n = size * nmemb;
    if (e->len + n + 1 > ETCD_MAX_RESPONSE) {
        e->too_big = 1;
        return 0; /* curl stops with CURLE_WRITE_ERROR */
    }
    if (e->len + n + 1 > e->cap) {
        size_t cap = e->cap ? e->cap : 4096;
        while (cap < e->len + n + 1)
            cap *= 2;
        char *b = realloc(e->buf, cap);
        if (!b)
            return 0;
        e->buf = b;
        e->cap = cap;
    }
    memcpy(e->buf + e->len, p, n);
    e->len += n;
    e->buf[e->len] = '\0';
    if (!e->stream)
        return n;
    /* a stream: each answer is one line; consume the complete ones */
    char *nl;
    size_t off = 0;
    while (!e->stream_stop && (nl = memchr(e->buf + off, '\n', e->len - off))) {
        size_t l = (size_t)(nl - (e->buf + off));
        if (l)
            e->stream_stop = e->stream(e, e->buf + off, l);
        off += l + 1;
    }
    memmove(e->buf, e->buf + off, e->len - off);
    e->len -= off;
    e->buf[e->len] = '\0';
    return e->stream_stop ? 0 : n; /* 0: curl stops (CURLE_WRITE_ERROR) */
}

etcd_t *etcd_new(const char *urls, double timeout_s)
{
    if (!urls || timeout_s < 0.001)
        return NULL;
    etcd_t *e = calloc(1, sizeof *e);
    char *list = strdup(urls);
    if (!e || !list)
        goto fail;
    e->timeout_ms = (long)(timeout_s * 1000 + 0.5);
    char *save = NULL;
    for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        size_t l = strlen(u);
        while (l && u[l - 1] == '/')
            u[--l] = '\0';
        if (!l)
            continue;
        if (e->nurls == ETCD_MAX_URLS || strncmp(u, "http", 4) != 0 || !(e->urls[e->nurls] = strdup(u)))
            goto fail;
        e->nurls++;
    }
    if (!e->nurls || !(e->curl = curl_easy_init()))
        goto fail;
    /* No "Expect: 100-continue" on large bodies (a table of many buckets):
     * it would cost a round trip, or a wait, within our timeout. */
    e->headers = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h = e->headers ? curl_slist_append(e->headers, "Expect:") : NULL;
    if (!h)
        goto fail;
    e->headers = h;
    curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, e->timeout_ms);
    curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
    curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->headers);
    curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
    curl_easy_setopt(e->curl, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    free(list);
    return e;
fail:
    free(list);
    etcd_destroy(&e);
    return NULL;
}

void etcd_destroy(etcd_t **ep)
{
    etcd_t *e = ep ? *ep : NULL;
    if (!e)
        return;
    if (e->curl)
        curl_easy_cleanup(e->curl);
    curl_slist_free_all(e->headers);
    for (int i = 0; i < e->nurls; i++)
        free(e->urls[i]);
    free(e->buf);
    free(e);
    *ep = NULL;
}

const char *etcd_url(const etcd_t *e)
{
    return e->urls[e->cur];
}

double etcd_seconds(const etcd_t *e)
{
    return e->seconds;
}

uint64_t etcd_requests(const etcd_t *e)
{
    return e->requests;
}

uint64_t etcd_bytes_sent(const etcd_t *e)
{
    return e->bytes_sent;
}

/* POSTs `body` (stolen: call frees it, also on failure) to `path`
 * ("/v3/...") on the current URL, then on the next ones while time is left.
 * On 0, *out is the parsed answer object (caller owns it). */
static int call(etcd_t *e, const char *path, json_t *body, json_t **out)
{
    *out = NULL;
    if (!body)
        return -ENOMEM;
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text)
        return -ENOMEM;
    int rc = -EIO;
    double t0 = mono_now();
    for (int tried = 0; tried < e->nurls; tried++) {
        if (tried && mono_now() - t0 > e->timeout_ms / 1000.0)
            break;
        char url[600];
        snprintf(url, sizeof url, "%s%s", e->urls[e->cur], path);
        e->len = 0;
        e->too_big = 0;
        curl_easy_setopt(e->curl, CURLOPT_URL, url);
        curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, text);
        e->requests++;
        e->bytes_sent += strlen(text);
        e->stream_stop = 0;
        CURLcode cc = curl_easy_perform(e->curl);
        long status = 0;
        curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
        if (e->stream && e->stream_stop) { /* a watch ended on purpose, or failed */
            rc = e->stream_stop < 0 ? e->stream_stop : 0;
            break;
        } else if (e->stream && status == 200) { /* its answers stopped coming */
            rc = -ETIMEDOUT;
            break;
        } else if (cc == CURLE_OK && status == 200 && e->buf) {
            json_error_t jerr;
            json_t *r = json_loadb(e->buf, e->len, 0, &jerr);
            if (json_is_object(r)) {
                *out = r;
                rc = 0;
                break;
            }
            json_decref(r);
            log_warn("etcd %s%s: answer is not a JSON object", e->urls[e->cur], path);
        } else if (e->too_big) {
            rc = -E2BIG;
            log_warn("etcd %s%s: answer over %u bytes", e->urls[e->cur], path, ETCD_MAX_RESPONSE);
            break;
        } else if (cc == CURLE_OK && status >= 400) { /* etcd answered, and refused */
            log_warn("etcd %s%s: HTTP %ld: %.200s", e->urls[e->cur], path, status,
                     e->buf && e->len ? e->buf : "(no body)");
        } else {
            log_debug("etcd %s%s: %s (HTTP %ld)", e->urls[e->cur], path,
                      cc != CURLE_OK ? curl_easy_strerror(cc) : "bad status", status);
        }
        e->cur = (e->cur + 1) % e->nurls;
    }
    e->seconds += mono_now() - t0;
    free(text);
    return rc;
}

/* An int64 of the gateway's JSON: a string of digits, or a number; 0 if
 * absent (proto3 leaves zero values out). */
static int64_t jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return 0;
}

static json_t *jstr64(int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, v);
    return json_string(b);
}

/* A base64 JSON string of a NUL-terminated or `len`-byte value. */
static json_t *jb64(const char *s, size_t len)
{
    char *t = etcd_b64_encode(s, len);
    json_t *j = t ? json_string(t) : NULL;
    free(t);
    return j;
}

int etcd_lease_grant(etcd_t *e, int64_t ttl, int64_t *id, int64_t *granted)
{
    json_t *r;
    int rc = call(e, "/v3/lease/grant", json_pack("{s:o}", "TTL", jstr64(ttl)), &r);
    if (rc < 0)
        return rc;
    *id = jint(r, "ID");
    *granted = jint(r, "TTL");
    rc = *id && *granted > 0 ? 0 : -EIO;
    if (rc < 0)
        log_warn("etcd: lease grant refused: %s", json_string_value(json_object_get(r, "error")) ?: "?");
    json_decref(r);
    return rc;
}

int etcd_lease_keepalive(etcd_t *e, int64_t id, int64_t *ttl)
{
    json_t *r;
    int rc = call(e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", jstr64(id)), &r);
    if (rc < 0)
        return rc;
    json_t *res = json_object_get(r, "result"); /* a stream of one answer */
    if (!json_is_object(res))
        rc = -EIO;
    else if ((*ttl = jint(res, "TTL")) <= 0)
        rc = -ENOENT;
    json_decref(r);
    return rc;
}

int etcd_lease_revoke(etcd_t *e, int64_t id)
{
    json_t *r;
    int rc = call(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", jstr64(id)), &r);
    json_decref(r);
    return rc;
}

int etcd_compact(etcd_t *e, int64_t rev)
{
    json_t *r;
    int rc = call(e, "/v3/kv/compaction", json_pack("{s:o}", "revision", jstr64(rev)), &r);
    json_decref(r);
    return rc;
}

void etcd_kv_clear(etcd_kv_t *kv)
{
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof *kv);
}

void etcd_kvs_free(etcd_kv_t *kvs, size_t n)
{
    for (size_t i = 0; kvs && i < n; i++)
        etcd_kv_clear(&kvs[i]);
    free(kvs);
}

/* Fills *kv (zeroed) from the gateway's KeyValue `k`: its revisions, and
 * its key and value (when present) decoded.  Returns 0, -EIO (bad base64)
 * or -ENOMEM. */
static int take_kv(json_t *k, etcd_kv_t *kv, int with_key)
{
    const char *v = json_string_value(json_object_get(k, "value"));
    const char *key = json_string_value(json_object_get(k, "key"));
    size_t klen;
    int rc = 0;
    if (v) /* absent: keys_only (or an empty value) */
        rc = etcd_b64_decode(v, &kv->value, &kv->len);
    if (rc == 0 && with_key)
        rc = key ? etcd_b64_decode(key, &kv->key, &klen) : -EINVAL;
    if (rc < 0) {
        etcd_kv_clear(kv);
        return rc == -EINVAL ? -EIO : rc;
    }
    kv->found = 1;
    kv->create_rev = jint(k, "create_revision");
    kv->mod_rev = jint(k, "mod_revision");
    kv->lease = jint(k, "lease");
    return 0;
}

/* Fills *kv from a response_range (absent kvs: not found). */
static int take_range(json_t *resp, etcd_kv_t *kv)
{
    json_t *rr = json_object_get(resp, "response_range");
    if (!json_is_object(rr))
        return -EIO;
    json_t *kvs = json_object_get(rr, "kvs");
    json_t *k = json_array_get(kvs, 0);
    if (!k)
        return 0;
    return take_kv(k, kv, 0);
}

int etcd_get2(etcd_t *e, const char *k1, etcd_kv_t *v1, const char *k2, etcd_kv_t *v2,
              int keys_only2, int64_t *hdr)
{
    memset(v1, 0, sizeof *v1);
    memset(v2, 0, sizeof *v2);
    json_t *r;
    json_t *body = json_pack("{s:[{s:{s:o}}, {s:{s:o, s:b}}]}", "success", "request_range", "key",
                             jb64(k1, strlen(k1)), "request_range", "key", jb64(k2, strlen(k2)),
                             "keys_only", keys_only2);
    int rc = call(e, "/v3/kv/txn", body, &r);
    if (rc < 0)
        return rc;
    json_t *resps = json_object_get(r, "responses");
    rc = take_range(json_array_get(resps, 0), v1);
    if (rc == 0)
        rc = take_range(json_array_get(resps, 1), v2);
    if (hdr)
        *hdr = jint(json_object_get(r, "header"), "revision");
    json_decref(r);
    return rc;
}

/* A gateway error that says a revision is compacted. */
static int compacted(json_t *r)
{
    const char *m = json_string_value(json_object_get(r, "error"));
    if (!m)
        m = json_string_value(json_object_get(r, "message"));
    return m && strstr(m, "compacted") != NULL;
}

int etcd_range(etcd_t *e, const char *key, const char *end, int64_t rev, size_t limit,
               int keys_only, etcd_kv_t **kvs, size_t *n, int *more, int64_t *hdr)
{
    *kvs = NULL;
    *n = 0;
    *more = 0;
    if (!limit)
        return -EINVAL;
    json_t *body = json_pack("{s:o, s:o, s:b}", "key", jb64(key, strlen(key)), "limit",
                             jstr64((int64_t)limit), "keys_only", keys_only);
    if (body && end)
        json_object_set_new(body, "range_end", jb64(end, strlen(end)));
    if (body && rev)
        json_object_set_new(body, "revision", jstr64(rev));
    json_t *r;
    int rc = call(e, "/v3/kv/range", body, &r);
    if (rc < 0)
        return rc;
    if (compacted(r)) {
        json_decref(r);
        return -ESTALE;
    }
    json_t *arr = json_object_get(r, "kvs");
    size_t cnt = json_array_size(arr);
    etcd_kv_t *out = cnt ? calloc(cnt, sizeof *out) : NULL;
    if (cnt && !out)
        rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < cnt; i++) {
        rc = take_kv(json_array_get(arr, i), &out[i], 1);
        if (rc == 0)
            *n = i + 1;
    }
    *more = json_is_true(json_object_get(r, "more"));
    *hdr = jint(json_object_get(r, "header"), "revision");
    json_decref(r);
    if (rc < 0) {
        etcd_kvs_free(out, *n);
        *n = 0;
        return rc;
    }
    *kvs = out;
    return 0;
}

/* etcd_watch()'s state, while its stream runs. */
typedef struct {
    int64_t until;
    etcd_event_fn fn;
    void *arg;
} watch_t;

/* One answer of the watch stream: {"result": WatchResponse} (or {"error"}).
 * Returns 0 (go on), 1 (done) or a negative errno. */
static int watch_line(etcd_t *e, const char *line, size_t len)
{
    watch_t *w = e->stream_arg;
    json_t *r = json_loadb(line, len, 0, NULL);
    json_t *res = json_object_get(r, "result");
    int rc = 0;
    if (!json_is_object(res)) {
        rc = compacted(r) ? -ESTALE : -EIO;
        log_warn("etcd %s/v3/watch: %.200s", e->urls[e->cur], line);
    } else if (jint(res, "compact_revision") > 0) {
        rc = -ESTALE;
    } else if (json_is_true(json_object_get(res, "canceled"))) {
        rc = -EIO;
        log_warn("etcd %s/v3/watch: canceled: %.200s", e->urls[e->cur], line);
    }
    json_t *evs = json_object_get(res, "events");
    int done = 0; /* an event at `until` came: this answer is the last */
    for (size_t i = 0; rc == 0 && i < json_array_size(evs); i++) {
        json_t *ev = json_array_get(evs, i);
        etcd_kv_t kv = {0};
        rc = take_kv(json_object_get(ev, "kv"), &kv, 1);
        if (rc < 0)
            break;
        int del = json_is_string(json_object_get(ev, "type")) &&
                  strcmp(json_string_value(json_object_get(ev, "type")), "DELETE") == 0;
        if (w->fn(w->arg, &kv, del))
            rc = 1;
        if (kv.mod_rev >= w->until)
            done = 1; /* the rest of this answer still goes through fn */
        etcd_kv_clear(&kv);
    }
    json_decref(r);
    return rc < 0 ? rc : rc || done;
}

int etcd_watch(etcd_t *e, const char *key, const char *end, int64_t start, int64_t until,
               etcd_event_fn fn, void *arg)
{
    json_t *cr = json_pack("{s:o, s:o}", "key", jb64(key, strlen(key)), "start_revision",
                           jstr64(start));
    if (cr && end)
        json_object_set_new(cr, "range_end", jb64(end, strlen(end)));
    json_t *body = cr ? json_pack("{s:o}", "create_request", cr) : NULL;
    watch_t w = {.until = until, .fn = fn, .arg = arg};
    e->stream = watch_line;
    e->stream_arg = &w;
    json_t *r = NULL;
    int rc = call(e, "/v3/watch", body, &r);
    e->stream = NULL;
    e->stream_arg = NULL;
    e->len = 0;
    json_decref(r);
    return rc;
}

/* The "compare" array of a transaction: every compare of cmp[0..ncmp).
 * Returns it (new), or NULL (out of memory). */
static json_t *txn_compares(const etcd_cmp_t *cmp, size_t ncmp)
{
    json_t *cmps = json_array();
    for (size_t i = 0; cmps && i < ncmp; i++)
        json_array_append_new(cmps, json_pack("{s:o, s:s, s:s, s:o}", "key",
                                              jb64(cmp[i].key, strlen(cmp[i].key)), "target",
                                              cmp[i].mod ? "MOD" : "CREATE", "result", "EQUAL",
                                              cmp[i].mod ? "mod_revision" : "create_revision",
                                              jstr64(cmp[i].rev)));
    return cmps;
}

/* Sends the transaction `body` (stolen).  Returns 1 if it ran (*rev: the
 * revision after it), 0 if a compare failed, or an error. */
static int txn_run(etcd_t *e, json_t *body, int64_t *rev)
{
    json_t *r;
    int rc = call(e, "/v3/kv/txn", body, &r);
    if (rc < 0)
        return rc;
    if (json_is_true(json_object_get(r, "succeeded"))) {
        *rev = jint(json_object_get(r, "header"), "revision");
        rc = 1;
    }
    json_decref(r);
    return rc;
}

/* Runs a transaction: if every compare of cmp[0..ncmp) holds, the one
 * request `op` ("request_put", "request_delete_range") with body `req`
 * (stolen).  Returns 1 if it ran (*rev: the revision after it), 0 if a
 * compare failed, or an error. */
static int txn_if(etcd_t *e, const etcd_cmp_t *cmp, size_t ncmp, const char *op, json_t *req,
                  int64_t *rev)
{
    json_t *cmps = txn_compares(cmp, ncmp);
    json_t *body = json_pack("{s:o, s:[{s:o}]}", "compare", cmps, "success", op, req);
    return txn_run(e, body, rev);
}

int etcd_txn(etcd_t *e, const etcd_cmp_t *cmp, size_t ncmp, const etcd_op_t *ops, size_t nops,
             int64_t *rev)
{
    if (!nops)
        return -EINVAL;
    json_t *cmps = txn_compares(cmp, ncmp), *succ = json_array();
    for (size_t i = 0; succ && i < nops; i++) {
        const etcd_op_t *o = &ops[i];
        json_t *req = o->del ? json_pack("{s:o}", "key", jb64(o->key, strlen(o->key)))
                             : json_pack("{s:o, s:o}", "key", jb64(o->key, strlen(o->key)),
                                         "value", jb64(o->value, o->len));
        if (req && !o->del && o->lease)
            json_object_set_new(req, "lease", jstr64(o->lease));
        json_array_append_new(succ, json_pack("{s:o}", o->del ? "request_delete_range"
                                                              : "request_put", req));
    }
    json_t *body = json_pack("{s:o, s:o}", "compare", cmps, "success", succ);
    return txn_run(e, body, rev);
}

int etcd_put_if(etcd_t *e, const etcd_cmp_t *cmp, size_t ncmp, const char *key,
                const char *value, size_t len, int64_t lease, int64_t *rev)
{
    json_t *put = json_pack("{s:o, s:o}", "key", jb64(key, strlen(key)), "value", jb64(value, len));
    if (put && lease)
        json_object_set_new(put, "lease", jstr64(lease));
    return txn_if(e, cmp, ncmp, "request_put", put, rev);
}

int etcd_delete_if(etcd_t *e, const etcd_cmp_t *cmp, size_t ncmp, const char *key)
{
    int64_t rev = 0;
    return txn_if(e, cmp, ncmp, "request_delete_range",
                  json_pack("{s:o}", "key", jb64(key, strlen(key))), &rev);
}
