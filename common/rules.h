/* rules.h - the ordered rule list that maps a request (who, from where, what, which key prefix or export) to a bucket, a template-made bucket, or a refusal: parse, compile, match, analyse, edit.
 *
 * Socket-free; used by the controller (the bucket file's "rules" member,
 * bqos-ctl's rule commands), the node (classification on the data path) and
 * bqos-ctl.  Format (docs/operations.md, "Rules"): a JSON array of objects,
 * each with any of the match members
 *   "user", "cert", "psk"  glob (`*` any run, `?` one byte) on the login
 *                          user, TLS certificate name, PSK identity; a rule
 *                          with the member needs the subject to have that
 *                          identity ("*": any present one)
 *   "addr"                 CIDR or array of CIDRs ("10.0.0.0/8", "::1/128",
 *                          a bare address is /32 or /128)
 *   "op"                   operation class or array of them: read, write,
 *                          delete, arith, touch, admin (memcached), nbd-read,
 *                          nbd-write, nbd-flush, nbd-trim (NBD)
 *   "key"                  glob on the key prefix (memcached) or export
 *                          name (NBD)
 * and exactly one action:
 *   "bucket": "NAME"       the request lands in bucket NAME
 *   "template": "T-{user}" one bucket per matched entity: {user}, {addr},
 *                          {prefix} replaced by the subject's (IPv6 ':'
 *                          written as '-'); "reservation" (default 0) and
 *                          "limit" (default none) are each such bucket's
 *   "deny": true           the request is refused
 * plus an optional unique "name" (1..64 bytes).  Unknown members are
 * errors.  An absent match member matches anything.  First match wins;
 * nothing matched: RULES_NONE (the caller refuses: fail closed).
 *
 * Matching is compiled: a bitset per operation class and per exact user
 * and key value narrows the candidates, then the candidates are checked in
 * order; no allocation, O(rules / 64) words plus the candidates' checks.
 *
 * A rules_t is a plain value owned by one thread; rules_match() only reads
 * it, so several threads may match against one list nobody edits. */
#ifndef BQOS_RULES_H
#define BQOS_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "common/jsonloc.h"

#define RULES_MAX 1024      /* rules in one list */
#define RULES_NAME_MAX 64   /* bytes of a rule's "name" */
#define RULES_PATTERN_MAX 250
#define RULES_CIDRS_MAX 32  /* CIDRs of one rule */
#define RULES_NO_LIMIT INT64_MAX

typedef enum {
    RULES_OP_READ = 0, /* memcached get, gets, gat(s) read side, mg */
    RULES_OP_WRITE,    /* set, add, replace, append, prepend, cas, ms */
    RULES_OP_DELETE,
    RULES_OP_ARITH,    /* incr, decr, ma */
    RULES_OP_TOUCH,
    RULES_OP_ADMIN,    /* flush_all, commands without keys */
    RULES_OP_NBD_READ,
    RULES_OP_NBD_WRITE,
    RULES_OP_NBD_FLUSH,
    RULES_OP_NBD_TRIM,
    RULES_OP_COUNT
} rules_op_t;

/* What is known of one request.  Filled by the front from its connection
 * (login user, certificate name, PSK identity, peer address) and the
 * request (operation, key prefix or export name); strings need not outlive
 * the rules_match() call. */
typedef struct {
    const char *user;      /* NUL-terminated, or NULL: not logged in */
    const char *cert_name; /* NULL: no client certificate */
    const char *psk_id;    /* NULL: no PSK */
    int family;            /* 4, 6, or 0: address unknown */
    uint8_t addr[16];      /* network order; IPv4 in addr[0..4) */
    rules_op_t op;
    const char *name;      /* key prefix or export name (no NUL needed) */
    size_t name_len;
} rules_subject_t;

typedef enum {
    RULES_NONE = 0,   /* no rule matched */
    RULES_BUCKET,     /* res->bucket is the rule's bucket */
    RULES_TEMPLATE,   /* res->bucket is the template made for the subject */
    RULES_DENY,       /* the rule refuses */
    RULES_BAD_NAME    /* a template rule matched, but what it made is not a
                         bucket name (too long, empty, or a missing entity) */
} rules_action_t;

typedef struct {
    rules_action_t action;
    int rule;              /* index of the matching rule, -1 for RULES_NONE */
    const char *bucket;    /* RULES_BUCKET / RULES_TEMPLATE; points into the
                              list or into buf: valid until both change */
    int64_t reservation;   /* the template's R and L per made bucket */
    int64_t limit;         /* RULES_NO_LIMIT: none */
    char buf[251];
} rules_result_t;

typedef struct rules rules_t;

/* A new empty list (matches nothing), or NULL if out of memory.  Caller
 * owns it; free with rules_destroy(). */
rules_t *rules_new(void);

/* Frees *rp and sets it NULL.  Accepts NULL. */
void rules_destroy(rules_t **rp);

/* Parses `len` bytes of JSON: either a rule array or an object whose
 * member "rules" is one.  `source` names the text in errors (may be NULL).
 * Returns 0 and a new compiled list in *out (caller owns it), -EINVAL with
 * *err filled (path "rules[2].addr", line, column), or -ENOMEM. */
int rules_parse(const char *text, size_t len, const char *source, rules_t **out,
                jsonloc_err_t *err);

/* The same for an array already parsed by jansson (a json_t *, given as
 * void * to keep jansson out of this header) inside a document: `text` and
 * `len` are the document (for positions, may be NULL), `member` the top-
 * level member that holds the array ("rules").  For common/bucketfile. */
int rules_from_json(const void *array, const char *text, size_t len, const char *source,
                    const char *member, rules_t **out, jsonloc_err_t *err);

/* Number of rules, and rule i's canonical JSON text (one line, members in
 * the order written) and name ("" if none); NULL if i is out of range. */
size_t rules_count(const rules_t *r);
const char *rules_json(const rules_t *r, size_t i);
const char *rules_name(const rules_t *r, size_t i);

/* Rule i's action (RULES_BUCKET, RULES_TEMPLATE or RULES_DENY) and its
 * bucket name or template (NULL for deny); RULES_NONE and NULL if i is
 * out of range. */
rules_action_t rules_action(const rules_t *r, size_t i, const char **bucket);

/* Nonzero if rule i has a "key" member (it names key prefixes or
 * exports); 0 if not, or i out of range.  The block node lets only such a
 * rule send an export's requests to a bucket other than the export's. */
int rules_has_key(const rules_t *r, size_t i);

/* Template rule i's figures (issue 27): its "reservation" and "limit" per
 * made bucket (RULES_NO_LIMIT: none).  Returns 0, or -EINVAL if rule i is
 * not a template rule (or out of range). */
int rules_template_rates(const rules_t *r, size_t i, int64_t *reservation, int64_t *limit);

/* Nonzero if template rule i could have made bucket `name`: the template's
 * literal text matches and each placeholder stands for at least one byte
 * (what an expansion writes is not checked further: a name a node reports
 * is the node's word for which template made it).  0 for a rule that is
 * not a template.  O(template x name), no allocation.  For the controller,
 * which sees template-made names only in the nodes' reports. */
int rules_template_made(const rules_t *r, size_t i, const char *name);

/* Index of the rule named `name`, or of the rule at index `name` given as
 * decimal digits; -ENOENT if none. */
int rules_find(const rules_t *r, const char *name);

/* The whole list as a JSON array, one rule per line ("[]" when empty).
 * Caller frees.  NULL if out of memory. */
char *rules_dumps(const rules_t *r);

/* A new copy, or NULL if out of memory. */
rules_t *rules_dup(const rules_t *r);

/* Nonzero if the two lists hold the same rules in the same order. */
int rules_equal(const rules_t *a, const rules_t *b);

/* Edits, each recompiling the list.  rules_insert() parses one rule
 * object from `len` bytes of `json` and puts it at index pos (pos >=
 * count: at the end); rules_replace() replaces rule i; rules_remove()
 * removes rule i; rules_move() moves rule i to index `to` (the others keep
 * their order).  Return 0, -EINVAL (bad rule with err filled; a duplicate
 * name; the list full at RULES_MAX), -ENOENT (no rule i), -ENOMEM.  The
 * list is unchanged on error. */
int rules_insert(rules_t *r, size_t pos, const char *json, size_t len, jsonloc_err_t *err);
int rules_replace(rules_t *r, size_t i, const char *json, size_t len, jsonloc_err_t *err);
int rules_remove(rules_t *r, size_t i);
int rules_move(rules_t *r, size_t i, size_t to);

/* First match wins: fills *res for subject *s.  Returns res->action.  No
 * allocation; reads the list only. */
rules_action_t rules_match(const rules_t *r, const rules_subject_t *s, rules_result_t *res);

/* Static analysis of the list: calls warn(arg, i, text) for every rule i
 * that can never match (a contradiction within it, or an earlier rule that
 * matches everything it does: shadowed), and for every template rule i
 * ambiguous with an earlier template rule: a request could match both (the
 * earlier takes it: rule i matches only part of what it names), or the two
 * templates could make the same bucket name (with different figures: the
 * controller holds such a bucket at the smaller of each).  The checks are sound (a warning
 * is always true) and conservative (some dead rules are not found):
 * docs/operations.md, "Rules", lists what they catch.  Returns the number of
 * warnings. */
int rules_analyze(const rules_t *r, void (*warn)(void *arg, size_t i, const char *text),
                  void *arg);

/* Operation class name ("read", "nbd-trim"), and its parse (-EINVAL if
 * unknown). */
const char *rules_op_name(rules_op_t op);
int rules_op_parse(const char *s, rules_op_t *op);

#endif
