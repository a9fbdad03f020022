/* test_tree.c - Check suite for controller/tree: the nested buckets' split of parents' limits and reservations into leaf budgets, three levels, moving demand, and the bucket file's refusal of unknown parents and cycles. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/tree.h"
#include "tests/testlib.h"

/* A configuration (period 1 s: tokens = rates), its tree and an IO ledger
 * with one up node whose work holds the pairs given demand. */
typedef struct {
    bucketfile_t *bf;
    tree_t *t;
    ledger_bucket_t b[16];
    ledger_t L;
    int dim;
} fx_t;

/* The ledger of dimension `dim` (TREE_IO or TREE_BYTES). */
static void fx_init_dim(fx_t *f, const char *json, int dim)
{
    memset(f, 0, sizeof *f);
    f->dim = dim;
    jsonloc_err_t err;
    ck_assert_msg(bucketfile_parse(json, strlen(json), NULL, &f->bf, &err) == 0, "%s", err.text);
    ck_assert_int_eq(tree_new(f->bf, 1.0, &f->t), 0);
    size_t nb = bucketfile_count(f->bf);
    ck_assert_uint_le(nb, 16);
    for (size_t i = 0; i < nb; i++) {
        const bucketfile_bucket_t *x = bucketfile_get(f->bf, i);
        f->b[i].r = dim == TREE_IO ? x->reservation : x->reservation_bytes;
        f->b[i].l = dim == TREE_IO ? (x->limit == BUCKETFILE_NO_LIMIT ? CTRL_UNLIMITED : x->limit)
                                   : (x->limit_bytes > 0 ? x->limit_bytes : CTRL_UNLIMITED);
        if (tree_is_parent(f->t, i) && dim == TREE_IO)
            f->b[i].r = f->b[i].l = 0; /* as ctrl_set_buckets(); bytes keep theirs */
        else
            f->b[i].l = tree_static_limit(f->t, dim, i, f->b[i].l);
    }
    ck_assert_int_eq(ledger_fit(&f->L, f->b, nb, 1), 0);
    ck_assert_int_eq(ledger_reserve(&f->L.n[0], 16), 0);
    f->L.n[0].up = 1;
}

static void fx_init(fx_t *f, const char *json)
{
    fx_init_dim(f, json, TREE_IO);
}

static void fx_free(fx_t *f)
{
    ledger_free(&f->L);
    tree_destroy(&f->t);
    bucketfile_destroy(&f->bf);
}

static int ix(const fx_t *f, const char *name)
{
    int b = bucketfile_find(f->bf, name);
    ck_assert_msg(b >= 0, "no bucket %s", name);
    return b;
}

/* Sets bucket `name`'s demand on the node (and its served this period). */
static void fx_demand(fx_t *f, const char *name, int64_t demand, int64_t served)
{
    int b = ix(f, name);
    ledger_node_t *ln = &f->L.n[0];
    size_t k = 0;
    while (k < ln->nwork && ln->work[k].b != b)
        k++;
    if (k == ln->nwork)
        ln->nwork++;
    ln->work[k] = (ledger_work_t){.b = b, .demand = demand, .flags = LEDGER_EST | LEDGER_CUR};
    f->b[b].served = served;
}

/* One round's budgets and nested split (limits as totals, no conversion). */
static void fx_run(fx_t *f)
{
    ck_assert_int_eq(ledger_scratch(&f->L), 0);
    const ledger_round_t rd = {.conv_slack = -1, .limit_depth = -1, .rate_share = 1,
                               .nest = tree_budgets, .nest_arg = tree_dim(f->t, f->dim)};
    ledger_budgets(&f->L, &rd);
    f->L.rd.nest(&f->L, f->L.rd.nest_arg);
}

static int64_t head(const fx_t *f, const char *name)
{
    return f->b[ix(f, name)].head;
}

static int64_t rrem(const fx_t *f, const char *name)
{
    return f->b[ix(f, name)].r_rem;
}

#define TENANT4                                                                         \
    "{\"buckets\":[{\"name\":\"tenant\",\"reservation\":0,\"limit\":1000},"             \
    "{\"name\":\"a\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"},"           \
    "{\"name\":\"b\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"},"           \
    "{\"name\":\"c\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"},"           \
    "{\"name\":\"d\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"}]}"

/* Demand first, then the rest among the children with demand up to their
 * own headroom; never more than the parent's in all, never more than a
 * child's own; the parent itself gets nothing. */
START_TEST(test_tree_split)
{
    fx_t f;
    fx_init(&f, TENANT4);
    fx_demand(&f, "a", 100, 0);
    fx_demand(&f, "b", 500, 0);
    fx_demand(&f, "c", 300, 0);
    fx_run(&f);
    ck_assert_int_eq(head(&f, "b"), 400);
    ck_assert_int_eq(head(&f, "c"), 400);
    ck_assert_int_eq(head(&f, "a"), 200);
    ck_assert_int_eq(head(&f, "d"), 0);
    ck_assert_int_eq(head(&f, "tenant"), 0);
    ck_assert_int_eq(rrem(&f, "tenant"), 0);
    /* Without demand anywhere the headroom still goes out (an idle child's
     * first requests find tokens), all of it and no more. */
    fx_free(&f);
    fx_init(&f, TENANT4);
    fx_run(&f);
    ck_assert_int_eq(head(&f, "a") + head(&f, "b") + head(&f, "c") + head(&f, "d"), 1000);
    ck_assert_int_le(head(&f, "a"), 400);
    fx_free(&f);
}
END_TEST

/* All hungry: by weight, capped by each child's own limit; what the parent
 * has served already is off its headroom. */
START_TEST(test_tree_weights)
{
    fx_t f;
    fx_init(&f, "{\"buckets\":[{\"name\":\"tenant\",\"reservation\":0,\"limit\":1000},"
                "{\"name\":\"a\",\"reservation\":0,\"limit\":400,\"weight\":3,\"parent\":\"tenant\"},"
                "{\"name\":\"b\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"},"
                "{\"name\":\"c\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"},"
                "{\"name\":\"d\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"}]}");
    const char *n[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        fx_demand(&f, n[i], 10000, 0);
    fx_run(&f);
    ck_assert_int_eq(head(&f, "a"), 400);
    ck_assert_int_eq(head(&f, "b"), 200);
    ck_assert_int_eq(head(&f, "c"), 200);
    ck_assert_int_eq(head(&f, "d"), 200);
    /* 600 served already (a 300, b 300): 400 left for the four. */
    fx_demand(&f, "a", 10000, 300);
    fx_demand(&f, "b", 10000, 300);
    fx_run(&f);
    int64_t sum = 0;
    for (int i = 0; i < 4; i++)
        sum += head(&f, n[i]);
    ck_assert_int_eq(sum, 400);
    ck_assert_int_eq(head(&f, "a"), 100); /* its own 400 less 300 served */
    ck_assert_int_eq(head(&f, "b"), 100);
    ck_assert_int_eq(head(&f, "c"), 100);
    ck_assert_int_eq(head(&f, "d"), 100);
    fx_free(&f);
}
END_TEST

/* A child's own reservation comes before the weighted split: b's weight
 * would leave a 60 of the cap, below its R of 70; the rest goes by weight
 * on top (it_nested_six.sh's tenant, where a got 48-59 without this). */
START_TEST(test_tree_own_reservation_first)
{
    fx_t f;
    fx_init(&f, "{\"buckets\":[{\"name\":\"tenant\",\"reservation\":0,\"limit\":400},"
                "{\"name\":\"a\",\"reservation\":70,\"limit\":160,\"parent\":\"tenant\"},"
                "{\"name\":\"b\",\"reservation\":50,\"limit\":220,\"weight\":4,\"parent\":\"tenant\"},"
                "{\"name\":\"c\",\"reservation\":40,\"limit\":130,\"parent\":\"tenant\"},"
                "{\"name\":\"d\",\"reservation\":20,\"limit\":180,\"parent\":\"tenant\"}]}");
    const char *n[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        fx_demand(&f, n[i], 10000, 0);
    fx_run(&f);
    int64_t sum = 0;
    for (int i = 0; i < 4; i++)
        sum += head(&f, n[i]);
    ck_assert_int_eq(sum, 400);
    ck_assert_int_eq(rrem(&f, "a"), 70);
    ck_assert_int_ge(head(&f, "a"), 70);
    ck_assert_int_eq(rrem(&f, "b"), 50);
    ck_assert_int_le(head(&f, "b"), 220);
    ck_assert_int_gt(head(&f, "b"), head(&f, "a")); /* weight 4 on top of R */
    /* 150 served of a: its R is met; its weighted share is what it gets. */
    fx_demand(&f, "a", 10000, 150);
    fx_run(&f);
    ck_assert_int_eq(rrem(&f, "a"), 0);
    ck_assert_int_le(head(&f, "a"), 10); /* its own 160 less 150 */
    fx_free(&f);
}
END_TEST

/* Three levels with a root over the cluster: the root's limit is split
 * among the tenants, each tenant's share among its buckets; a leaf without
 * a limit of its own is limited by its ancestors. */
START_TEST(test_tree_three_levels)
{
    fx_t f;
    fx_init(&f, "{\"buckets\":[{\"name\":\"root\",\"reservation\":0,\"limit\":1200},"
                "{\"name\":\"t1\",\"reservation\":0,\"limit\":1000,\"parent\":\"root\"},"
                "{\"name\":\"t2\",\"reservation\":0,\"limit\":1000,\"parent\":\"root\"},"
                "{\"name\":\"a\",\"reservation\":0,\"parent\":\"t1\"},"
                "{\"name\":\"b\",\"reservation\":0,\"limit\":250,\"parent\":\"t1\"},"
                "{\"name\":\"c\",\"reservation\":0,\"parent\":\"t2\"},"
                "{\"name\":\"loose\",\"reservation\":0}]}");
    ck_assert_int_eq(f.b[ix(&f, "a")].l, 1000); /* inherited: the smallest ancestor's */
    ck_assert_int_eq(f.b[ix(&f, "loose")].l, CTRL_UNLIMITED);
    ck_assert_int_eq(tree_parent(f.t, (size_t)ix(&f, "a")), ix(&f, "t1"));
    ck_assert_int_eq(tree_parent(f.t, (size_t)ix(&f, "t1")), ix(&f, "root"));
    ck_assert_int_eq(tree_parent(f.t, (size_t)ix(&f, "loose")), -1);
    fx_demand(&f, "a", 5000, 0);
    fx_demand(&f, "b", 5000, 0);
    fx_demand(&f, "c", 5000, 0);
    fx_demand(&f, "loose", 5000, 0);
    fx_run(&f);
    ck_assert_int_eq(head(&f, "a"), 350); /* t1 600: b 250 (its own), a the rest */
    ck_assert_int_eq(head(&f, "b"), 250);
    ck_assert_int_eq(head(&f, "c"), 600);
    ck_assert_int_eq(head(&f, "loose"), CTRL_UNLIMITED);
    tree_info_t ti;
    ck_assert_int_eq(tree_info(f.t, TREE_IO, (size_t)ix(&f, "t1"), &ti), 0);
    ck_assert_int_eq(ti.head, 600);
    ck_assert_int_eq(ti.demand, 10000);
    ck_assert_int_eq(tree_info(f.t, TREE_IO, (size_t)ix(&f, "loose"), &ti), -ENOENT);
    /* t2's bucket goes idle: t1 takes the root's headroom, up to its own
     * limit (demand moved). */
    fx_demand(&f, "c", 0, 0);
    fx_run(&f);
    ck_assert_int_eq(head(&f, "a") + head(&f, "b"), 1000);
    ck_assert_int_le(head(&f, "a") + head(&f, "b") + head(&f, "c"), 1200);
    ck_assert_int_eq(head(&f, "c"), 200); /* what nobody with demand could take */
    fx_free(&f);
}
END_TEST

/* A parent's reservation beyond its children's own goes to the children
 * with demand, by weight, up to their demand; never beyond their
 * headroom. */
START_TEST(test_tree_reservation)
{
    fx_t f;
    fx_init(&f, "{\"buckets\":[{\"name\":\"tenant\",\"reservation\":600,\"limit\":1000},"
                "{\"name\":\"a\",\"reservation\":100,\"limit\":400,\"parent\":\"tenant\"},"
                "{\"name\":\"b\",\"reservation\":0,\"limit\":400,\"parent\":\"tenant\"},"
                "{\"name\":\"c\",\"reservation\":50,\"limit\":400,\"parent\":\"tenant\"}]}");
    fx_demand(&f, "a", 500, 0);
    fx_demand(&f, "b", 500, 0);
    fx_run(&f);
    /* Children with demand hold 100 of their own; 500 more: 250 each. */
    ck_assert_int_eq(rrem(&f, "a"), 350);
    ck_assert_int_eq(rrem(&f, "b"), 250);
    ck_assert_int_eq(rrem(&f, "c"), 50); /* its own stays (no demand: placed nowhere) */
    /* The floor is met by what was served: nothing extra. */
    fx_demand(&f, "a", 500, 300);
    fx_demand(&f, "b", 500, 300);
    fx_run(&f);
    ck_assert_int_eq(rrem(&f, "a"), 0);
    ck_assert_int_eq(rrem(&f, "b"), 0);
    fx_free(&f);
}
END_TEST

/* Bytes: the same split on the byte rates (the byte ledger's hook), the
 * IO rates left alone; a parent's own byte budget goes to nobody. */
START_TEST(test_tree_bytes)
{
    fx_t f;
    const char *json = "{\"buckets\":[{\"name\":\"t\",\"reservation\":0,\"limit\":10,"
                       "\"reservation_bytes\":300,\"limit_bytes\":1000},"
                       "{\"name\":\"a\",\"reservation\":0,\"parent\":\"t\",\"limit_bytes\":800},"
                       "{\"name\":\"b\",\"reservation\":0,\"parent\":\"t\",\"limit_bytes\":800}]}";
    fx_init_dim(&f, json, TREE_BYTES);
    fx_demand(&f, "a", 5000, 0);
    fx_demand(&f, "b", 5000, 0);
    fx_run(&f);
    ck_assert_int_eq(head(&f, "a"), 500);
    ck_assert_int_eq(head(&f, "b"), 500);
    ck_assert_int_eq(rrem(&f, "a") + rrem(&f, "b"), 300);
    ck_assert_int_eq(head(&f, "t"), 0);
    ck_assert_int_eq(rrem(&f, "t"), 0);
    size_t bad;
    ck_assert_int_eq(tree_unlimited_under_limit(f.t, TREE_BYTES, &bad), 0);
    fx_free(&f);
    /* IO: the same tree splits the IO limit; a and b inherit 10. */
    fx_init(&f, json);
    ck_assert_int_eq(f.b[ix(&f, "a")].l, 10);
    fx_demand(&f, "a", 5000, 0);
    fx_demand(&f, "b", 5000, 0);
    fx_run(&f);
    ck_assert_int_eq(head(&f, "a") + head(&f, "b"), 10);
    ck_assert_int_eq(tree_unlimited_under_limit(f.t, TREE_IO, &bad), 1); /* inherited instead */
    fx_free(&f);
    /* A leaf without a byte limit under a byte-limited parent is found
     * (ctrl_check_buckets() refuses it). */
    fx_init_dim(&f, "{\"buckets\":[{\"name\":\"t\",\"reservation\":0,\"limit_bytes\":1000},"
                    "{\"name\":\"a\",\"reservation\":0,\"parent\":\"t\"}]}", TREE_BYTES);
    ck_assert_int_eq(tree_unlimited_under_limit(f.t, TREE_BYTES, &bad), 1);
    ck_assert_uint_eq(bad, 1);
    fx_free(&f);
}
END_TEST

/* No parent anywhere: no tree, no hook, no cost. */
START_TEST(test_tree_none)
{
    bucketfile_t *bf = NULL;
    const char *t = "{\"buckets\":[{\"name\":\"a\",\"reservation\":1}]}";
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), NULL, &bf, NULL), 0);
    tree_t *tr = (tree_t *)1;
    ck_assert_int_eq(tree_new(bf, 1.0, &tr), 0);
    ck_assert_ptr_null(tr);
    ck_assert_ptr_null(tree_dim(tr, TREE_IO));
    ck_assert_int_eq(tree_parent(tr, 0), -1);
    ck_assert_int_eq(tree_static_limit(tr, TREE_IO, 0, 7), 7);
    bucketfile_destroy(&bf);
}
END_TEST

static int parse_err(const char *t, jsonloc_err_t *err)
{
    bucketfile_t *bf = NULL;
    int rc = bucketfile_parse(t, strlen(t), "x.json", &bf, err);
    bucketfile_destroy(&bf);
    return rc;
}

/* The bucket file refuses unknown parents, cycles and chains too deep, at
 * the member that names them; bucketfile_set() refuses a change that makes
 * a cycle; a parent cannot be removed before its children; "parent" is
 * written back. */
START_TEST(test_tree_refused)
{
    jsonloc_err_t err;
    ck_assert_int_eq(parse_err("{\"buckets\":[{\"name\":\"a\",\"reservation\":0,"
                               "\"parent\":\"nope\"}]}", &err), -EINVAL);
    ck_assert_str_eq(err.path, "buckets[0].parent");
    ck_assert_msg(strstr(err.text, "not a bucket"), "%s", err.text);
    ck_assert_int_eq(parse_err("{\"buckets\":[{\"name\":\"a\",\"reservation\":0,\"parent\":\"b\"},"
                               "{\"name\":\"b\",\"reservation\":0,\"parent\":\"a\"}]}", &err),
                     -EINVAL);
    ck_assert_msg(strstr(err.text, "cycle"), "%s", err.text);
    ck_assert_int_eq(parse_err("{\"buckets\":[{\"name\":\"a\",\"reservation\":0,"
                               "\"parent\":\"a\"}]}", &err), -EINVAL);
    ck_assert_msg(strstr(err.text, "cycle"), "%s", err.text);
    ck_assert_int_eq(parse_err("{\"buckets\":[{\"name\":\"a\",\"reservation\":0,"
                               "\"parent\":7}]}", &err), -EINVAL);
    ck_assert_str_eq(err.path, "buckets[0].parent");
    /* A parent's name is at most BUCKETFILE_PARENT_MAX bytes (its record's
     * field). */
    char longp[512];
    snprintf(longp, sizeof longp, "{\"buckets\":[{\"name\":\"%0*d\",\"reservation\":0},"
             "{\"name\":\"c\",\"reservation\":0,\"parent\":\"%0*d\"}]}",
             BUCKETFILE_PARENT_MAX + 1, 7, BUCKETFILE_PARENT_MAX + 1, 7);
    ck_assert_int_eq(parse_err(longp, &err), -EINVAL);
    ck_assert_str_eq(err.path, "buckets[1].parent");
    /* BUCKETFILE_MAX_DEPTH levels pass, one more does not. */
    char t[2048];
    int n = snprintf(t, sizeof t, "{\"buckets\":[{\"name\":\"l0\",\"reservation\":0}");
    for (int i = 1; i <= BUCKETFILE_MAX_DEPTH; i++)
        n += snprintf(t + n, sizeof t - (size_t)n,
                      ",{\"name\":\"l%d\",\"reservation\":0,\"parent\":\"l%d\"}", i, i - 1);
    snprintf(t + n, sizeof t - (size_t)n, "]}");
    ck_assert_int_eq(parse_err(t, &err), -EINVAL);
    ck_assert_msg(strstr(err.text, "levels"), "%s", err.text);
    bucketfile_t *bf = NULL;
    const char *ok = "{\"buckets\":[{\"name\":\"c\",\"reservation\":0,\"parent\":\"p\"},"
                     "{\"name\":\"p\",\"reservation\":0,\"limit\":10}]}";
    ck_assert_int_eq(bucketfile_parse(ok, strlen(ok), NULL, &bf, NULL), 0); /* child first */
    bucketfile_bucket_t p = *bucketfile_get(bf, 1);
    bucketfile_bucket_set_parent(&p, "c");
    ck_assert_int_eq(bucketfile_set(bf, &p, &err), -EINVAL);
    ck_assert_str_eq(err.path, "parent");
    ck_assert_msg(strstr(err.text, "cycle"), "%s", err.text);
    ck_assert_int_eq(bucketfile_remove(bf, "p"), -EBUSY);
    char *out = bucketfile_dumps(bf);
    ck_assert_msg(strstr(out, "\"parent\": \"p\""), "%s", out);
    bucketfile_t *back = NULL;
    ck_assert_int_eq(bucketfile_parse(out, strlen(out), NULL, &back, NULL), 0);
    ck_assert_str_eq(bucketfile_parent(bucketfile_get(back, 0)), "p");
    free(out);
    bucketfile_destroy(&back);
    ck_assert_int_eq(bucketfile_remove(bf, "c"), 0);
    ck_assert_int_eq(bucketfile_remove(bf, "p"), 0);
    bucketfile_destroy(&bf);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_tree_split, test_tree_weights, test_tree_three_levels,
                                  test_tree_reservation, test_tree_own_reservation_first,
                                  test_tree_bytes, test_tree_none,
                                  test_tree_refused};
    return testlib_run_tests("tree", tests, sizeof tests / sizeof tests[0]);
}
