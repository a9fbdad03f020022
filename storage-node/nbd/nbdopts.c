/* nbdopts.c - the option-haggling phase of the NBD front: exports, INFO/GO, LIST, STRUCTURED_REPLY, meta contexts (see nbdconn.h). */
#include "storage-node/nbd/nbdconn.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"

/* With rules (issue 27): each class of request (nbd-read, nbd-write,
 * nbd-flush, nbd-trim) of client c on export b is classified on its own,
 * with the export's name and the client's identity and address.  A class
 * is allowed when a rule gives it the export's own bucket, or another
 * bucket by a rule with a "key" member (one that names exports: "send
 * vm1's writes to vm1-w"); a rule without "key" that gives another bucket
 * does not open an export (as before per-request classes: rules authorize
 * exports there).  An export is offered when any class is allowed. */
static const rules_op_t class_ops[NBDF_NCLS] = {RULES_OP_NBD_READ, RULES_OP_NBD_WRITE,
                                                RULES_OP_NBD_FLUSH, RULES_OP_NBD_TRIM};

static void class_subject(const nconn_t *c, int b, int k, rules_subject_t *out)
{
    rules_subject_t s = {.op = class_ops[k], .name = gate_bucket_name(c->f->g, b)};

    conns_subject(&c->sock, &s);
    s.name_len = strlen(s.name);
    *out = s;
}

/* Whether the rules allow class k of c on export b (makes no bucket,
 * counts nothing); *why is the refusal's reason when not. */
static int class_allowed(const nconn_t *c, int b, int k, gate_rule_reason_t *why)
{
    rules_subject_t s;
    rules_result_t res;
    const rules_t *rl = gate_rules(c->f->g);
    class_subject(c, b, k, &s);
    rules_action_t a = rules_match(rl, &s, &res);
    if (a == RULES_BUCKET || a == RULES_TEMPLATE) {
        if (strcmp(res.bucket, s.name) == 0 || rules_has_key(rl, (size_t)res.rule))
            return 1;
        *why = GATE_RULE_UNKNOWN_BUCKET;
    } else {
        *why = a == RULES_DENY ? GATE_RULE_DENIED
               : a == RULES_BAD_NAME ? GATE_RULE_BAD_NAME : GATE_RULE_NO_MATCH;
    }
    return 0;
}

static int export_allowed(const nconn_t *c, int b)
{
    gate_rule_reason_t why = GATE_RULE_NO_MATCH;
    for (int k = 0; k < NBDF_NCLS; k++)
        if (class_allowed(c, b, k, &why))
            return 1;
    log_debug("%s: export '%s' not offered: %s", c->peer, gate_bucket_name(c->f->g, b),
              gate_rule_reason_names[why]);
    return 0;
}

void nbdf_resolve_classes(nconn_t *c)
{
    gate_t *g = c->f->g;
    c->cls_gen = gate_rules_gen(g);
    for (int k = 0; k < NBDF_NCLS; k++) {
        gate_rule_reason_t why = GATE_RULE_NO_MATCH;
        int b = c->bucket;
        if (gate_has_rules(g)) {
            rules_subject_t s;
            class_subject(c, c->bucket, k, &s);
            b = class_allowed(c, c->bucket, k, &why) ? gate_resolve(g, &s, &why) : -1;
        }
        c->cls[k] = b;
        c->cls_why[k] = (unsigned char)why;
        if (b != c->bucket)
            log_debug("%s: %s on export '%s': %s", c->peer, rules_op_name(class_ops[k]),
                      gate_bucket_name(g, c->bucket),
                      b >= 0 ? gate_bucket_name(g, b) : gate_rule_reason_names[why]);
    }
}

void nbdf_class_refused(nconn_t *c, int k)
{
    rules_subject_t s;
    class_subject(c, c->bucket, k, &s);
    gate_refusal(c->f->g, &s, (gate_rule_reason_t)c->cls_why[k]);
}

/* Looks up an export by name (empty: "default") and opens its store.
 * Returns the bucket index, -ENOENT (also for an export the rules do not
 * give this client), or -errno from the backend. */
static int find_export(const nconn_t *c, nbdfront_t *f, const char *name, size_t len,
                       uint64_t *size)
{
    if (len == 0) {
        name = "default";
        len = 7;
    }
    int b = gate_bucket(f->g, name, len, 0);
    if (b < 0 || (gate_has_rules(f->g) && !export_allowed(c, b)))
        return -ENOENT;
    int rc = blockdev_export(f->bd, b, gate_bucket_name(f->g, b), size);
    if (rc < 0) {
        log_warn("export '%s': %s", gate_bucket_name(f->g, b), strerror(-rc));
        return rc;
    }
    return b;
}

static void enter_transmission(nconn_t *c, int b, uint64_t size)
{
    c->bucket = b;
    nbdf_resolve_classes(c);
    c->size = size;
    c->meta = c->meta_bucket >= 0 && c->meta_bucket == b;
    c->state = ST_TRANS;
    log_debug("%s: export '%s' (%llu bytes)", c->peer, gate_bucket_name(c->f->g, b),
              (unsigned long long)size);
}

static void opt_list(nconn_t *c, uint32_t opt)
{
    nbdfront_t *f = c->f;
    const char *name;
    for (int b = 0; (name = gate_bucket_name(f->g, b)); b++) {
        size_t nl = strlen(name);
        if (gate_has_rules(f->g) && !export_allowed(c, b))
            continue; /* only what the rules give this client */
        uint8_t buf[NBD_REP_HDR_LEN + 4 + 256];
        nbdf_out(c, buf, nbd_encode_rep_server(buf, opt, name, (uint32_t)nl));
    }
    nbdf_opt_reply(c, opt, NBD_REP_ACK);
}

/* Answers an option whose data did not parse (logged at debug level). */
static void opt_invalid(nconn_t *c, uint32_t opt, const nbd_error_t *e)
{
    log_debug("%s: %s at byte %zu: %s", c->peer, nbd_opt_name(opt), e->offset, e->text);
    nbdf_opt_reply(c, opt, NBD_REP_ERR_INVALID);
}

/* The export an option names: parses its data (len bytes) into *ir for
 * NBD_OPT_INFO / NBD_OPT_GO, or into *mr for LIST/SET_META_CONTEXT (ir
 * NULL), then find_export().  Returns the export's bucket; on failure
 * answers the option (malformed data, an unknown export, or a store that
 * could not be opened) and returns < 0. */
static int opt_export(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len,
                      nbd_info_req_t *ir, nbd_meta_req_t *mr, uint64_t *size)
{
    nbd_error_t e;
    int rc = ir ? nbd_parse_info_request(data, len, ir, &e)
                : nbd_parse_meta_request(data, len, mr, &e);
    if (rc < 0) {
        opt_invalid(c, opt, &e);
        return rc;
    }
    int b = find_export(c, c->f, ir ? ir->name : mr->name, ir ? ir->namelen : mr->namelen, size);
    if (b < 0)
        nbdf_opt_reply(c, opt, b == -ENOENT ? NBD_REP_ERR_UNKNOWN : NBD_REP_ERR_PLATFORM);
    return b;
}

static void opt_info_go(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
    nbd_info_req_t ir;
    uint64_t size;
    int b = opt_export(c, opt, data, len, &ir, NULL, &size);
    if (b < 0)
        return;
    uint8_t buf[64];
    nbdf_out(c, buf, nbd_encode_info_export(buf, opt, size, nbdf_tflags(c)));
    if (ir.want_block_size)
        nbdf_out(c, buf, nbd_encode_info_block_size(buf, opt, 1, 4096, NBD_MAX_PAYLOAD));
    nbdf_opt_reply(c, opt, NBD_REP_ACK);
    if (opt == NBD_OPT_GO)
        enter_transmission(c, b, size);
}

/* NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT (proto.md, "Option
 * types", "Metadata querying", "The base: metadata namespace").  The only
 * context is base:allocation.  LIST: all contexts for no query, "base:" or
 * the exact name for a query, context id 0 ("reserved"); allowed without
 * structured replies, as qemu-nbd does.  SET: needs structured replies,
 * selects base:allocation only by its exact name, for the export named,
 * and replaces the previous selection even when it fails.  Unknown
 * namespaces and leaves are ignored; malformed data is
 * NBD_REP_ERR_INVALID, an unknown export NBD_REP_ERR_UNKNOWN. */
static void opt_meta(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
    int list = opt == NBD_OPT_LIST_META_CONTEXT;
    if (!list)
        c->meta_bucket = -1;
    if (!list && !c->structured) {
        log_debug("%s: SET_META_CONTEXT before STRUCTURED_REPLY", c->peer);
        nbdf_opt_reply(c, opt, NBD_REP_ERR_INVALID);
        return;
    }
    nbd_meta_req_t mr;
    uint64_t size;
    int b = opt_export(c, opt, data, len, NULL, &mr, &size);
    if (b < 0)
        return;
    int match = list && mr.nqueries == 0;
    size_t cur = 0;
    const char *q;
    uint32_t ql;
    while (!match && nbd_meta_next_query(&mr, &cur, &q, &ql))
        match = nbd_meta_query_matches(q, ql, list);
    if (match) {
        uint8_t buf[NBD_REP_HDR_LEN + 4 + sizeof NBD_META_BASE_ALLOCATION];
        nbdf_out(c, buf, nbd_encode_rep_meta_context(buf, opt, list ? 0 : META_ID_ALLOCATION,
                                                NBD_META_BASE_ALLOCATION));
        if (!list)
            c->meta_bucket = b;
    }
    nbdf_opt_reply(c, opt, NBD_REP_ACK);
}

/* NBD_OPT_STARTTLS (proto.md, "TLS support"): the ACK leaves in clear,
 * then the front runs the handshake (ST_STARTTLS); what was negotiated
 * before is forgotten. */
static void opt_starttls(nconn_t *c, uint32_t opt, uint32_t len)
{
    if (c->f->cfg.tls_mode == NBDTLS_OFF) {
        nbdf_opt_reply(c, opt, NBD_REP_ERR_UNSUP);
    } else if (len != 0 || c->tls) {
        nbdf_opt_reply(c, opt, NBD_REP_ERR_INVALID);
    } else {
        nbdf_opt_reply(c, opt, NBD_REP_ACK);
        c->structured = 0;
        c->meta_bucket = -1;
        c->state = ST_STARTTLS;
    }
}

int nbdf_handle_option(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
    nbdfront_t *f = c->f;
    log_debug("%s: option %s (%u), %u bytes", c->peer, nbd_opt_name(opt), opt, len);
    if (gate_stopping(f->g) && opt != NBD_OPT_ABORT) {
        if (opt == NBD_OPT_EXPORT_NAME)
            return -1;
        nbdf_opt_reply(c, opt, NBD_REP_ERR_SHUTDOWN);
        return 0;
    }
    if (opt == NBD_OPT_STARTTLS) {
        opt_starttls(c, opt, len);
        return 0;
    }
    if (f->cfg.tls_mode == NBDTLS_REQUIRE && !c->tls && opt != NBD_OPT_ABORT) {
        if (opt == NBD_OPT_EXPORT_NAME) {
            log_info("%s: EXPORT_NAME without TLS (--tls require); closing", c->peer);
            return -1;
        }
        nbdf_opt_reply(c, opt, NBD_REP_ERR_TLS_REQD);
        return 0;
    }
    switch (opt) {
    case NBD_OPT_EXPORT_NAME: {
        /* No way to answer an error: an unknown export ends the session
         * (proto.md, "Termination of the session during option haggling"). */
        uint64_t size;
        if (len > NBD_MAX_NAME || memchr(data, '\0', len))
            return -1;
        int b = find_export(c, f, (const char *)data, len, &size);
        if (b < 0) {
            log_info("%s: EXPORT_NAME '%.*s': no such export; closing", c->peer,
                     (int)(len > 64 ? 64 : len), (const char *)data);
            return -1;
        }
        uint8_t buf[NBD_EXPORT_REPLY_LEN];
        nbdf_out(c, buf, nbd_encode_export_reply(buf, size, nbdf_tflags(c), c->no_zeroes));
        enter_transmission(c, b, size);
        return 0;
    }
    case NBD_OPT_ABORT:
        nbdf_opt_reply(c, opt, NBD_REP_ACK);
        c->state = ST_CLOSING;
        return 0;
    case NBD_OPT_LIST:
        if (len != 0)
            nbdf_opt_reply(c, opt, NBD_REP_ERR_INVALID);
        else
            opt_list(c, opt);
        return 0;
    case NBD_OPT_INFO:
    case NBD_OPT_GO:
        opt_info_go(c, opt, data, len);
        return 0;
    case NBD_OPT_STRUCTURED_REPLY:
        /* No data allowed; a second request is refused as nbdkit and
         * qemu-nbd do (proto.md, "Option types"). */
        if (len != 0 || c->structured) {
            nbdf_opt_reply(c, opt, NBD_REP_ERR_INVALID);
        } else {
            c->structured = 1;
            nbdf_opt_reply(c, opt, NBD_REP_ACK);
        }
        return 0;
    case NBD_OPT_LIST_META_CONTEXT:
    case NBD_OPT_SET_META_CONTEXT:
        opt_meta(c, opt, data, len);
        return 0;
    default:
        /* Extended headers and anything unknown. */
        nbdf_opt_reply(c, opt, NBD_REP_ERR_UNSUP);
        return 0;
    }
}

