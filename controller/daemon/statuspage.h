/* statuspage.h - which bucket rows a status reply shows, in what order: the request's page (limit, offset, a name glob, a sort field) read and checked, and the best offset + limit rows of the table kept in a bounded heap as the table is walked once.
 *
 * Use (status, status_node):
 *   statuspage_parse(req, &pg, &err)        the page asked for, or why not
 *   sp = statuspage_new(&pg, n)             n rows to come
 *   per row i (table order) that matches pg.glob:
 *       statuspage_offer(sp, i, key, name)  key: the row's figure for
 *                                           pg.sort (unused for table, name)
 *   statuspage_rows(sp, &idx)               the rows shown, in rank order
 *   statuspage_destroy(&sp)
 * The order (bqos-ctl's merge of shards follows the same rule): name
 * ascending, figures descending (the busiest first), ties and "table" in
 * table order.  A reply holds at most `limit` rows whatever the table's
 * size, and the walk costs O(n log(offset + limit)).
 *
 * No sockets; a statuspage_t belongs to the thread that made it (the
 * controller's loop thread). */
#ifndef BQOS_STATUSPAGE_H
#define BQOS_STATUSPAGE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The fields status --sort takes. */
typedef enum {
    STATUSPAGE_TABLE,       /* table order (no "sort") */
    STATUSPAGE_NAME,
    STATUSPAGE_RESERVATION,
    STATUSPAGE_LIMIT,       /* key: the limit, BUCKETFILE_NO_LIMIT above all */
    STATUSPAGE_DEMAND,
    STATUSPAGE_SERVED,
    STATUSPAGE_QUEUED,
    STATUSPAGE__NSORTS
} statuspage_sort_t;

/* What a status request asks of the bucket list: at most `limit` rows
 * (-1: all) after `offset`, those whose name matches `glob` (NULL: all;
 * borrowed from the request), in `sort` order. */
typedef struct {
    int64_t limit, offset;
    const char *glob;
    statuspage_sort_t sort;
} statuspage_req_t;

typedef struct statuspage statuspage_t;

/* The sort field's name as the protocol says it ("table", "name",
 * "reservation", "limit", "demand", "served", "queued"). */
const char *statuspage_sort_name(statuspage_sort_t sort);

/* Reads the request's "limit" (an integer >= 0, or null or absent: all),
 * "offset" (>= 0), "bucket" (a glob) and "sort" (a field name) into *pg.
 * Returns 0, or -EINVAL with *err the message for the bad_request reply
 * (a constant string). */
int statuspage_parse(const json_t *req, statuspage_req_t *pg, const char **err);

/* A page as *pg (copied; its glob stays borrowed) over a table of `n`
 * rows.  Returns it (caller owns it: statuspage_destroy()) or NULL (out of
 * memory: the caller shows no rows). */
statuspage_t *statuspage_new(const statuspage_req_t *pg, size_t n);

/* Destroys *sp (NULL accepted); sets *sp to NULL. */
void statuspage_destroy(statuspage_t **sp);

/* Row `index` (table order, each once, ascending) with its sort key and
 * name (borrowed until statuspage_rows() returned): kept if it ranks
 * among the best offset + limit so far. */
void statuspage_offer(statuspage_t *sp, int index, int64_t key, const char *name);

/* Ends the walk: *idx (owned by sp, valid until its destruction) gets the
 * indexes of the rows to show, rows offset.. of the ranking, in rank
 * order.  Returns their number.  Once per page. */
size_t statuspage_rows(statuspage_t *sp, const int **idx);

#endif
