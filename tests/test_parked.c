/* test_parked.c - Check suite for controller/daemon/parked: the bound of PARKED_MAX waiting changes, durable ones leaving oldest first, failed ones newest first (the undo order), a slot not added leaving nothing, the ring across its wrap, and the replies each change owns. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "controller/daemon/parked.h"
#include "tests/testlib.h"

/* Parks a change of ticket t named "b<t>" whose reply is "r<t>". */
static void park(parked_t *p, uint64_t t)
{
    parked_change_t *c = parked_slot(p);
    ck_assert_ptr_nonnull(c);
    c->ticket = t;
    c->is_set = 1;
    snprintf(c->name, sizeof c->name, "b%llu", (unsigned long long)t);
    char r[32];
    snprintf(r, sizeof r, "r%llu", (unsigned long long)t);
    ck_assert_ptr_nonnull(c->text = strdup(r));
    parked_add(p);
}

/* The change taken is ticket t with its reply; the reply is freed. */
static void taken(parked_change_t *c, uint64_t t)
{
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(c->ticket, t);
    char r[32];
    snprintf(r, sizeof r, "r%llu", (unsigned long long)t);
    ck_assert_str_eq(c->text, r);
    free(c->text);
    c->text = NULL;
}

START_TEST(test_parked_bound)
{
    parked_t *p = parked_new();
    ck_assert_ptr_nonnull(p);
    for (uint64_t t = 1; t <= PARKED_MAX; t++)
        park(p, t);
    ck_assert_uint_eq(parked_count(p), PARKED_MAX);
    ck_assert_ptr_null(parked_slot(p)); /* the 33rd: refused busy */
    parked_add(p);                      /* a stray add does not pass the bound */
    ck_assert_uint_eq(parked_count(p), PARKED_MAX);
    taken(parked_take_durable(p, 1), 1);
    park(p, PARKED_MAX + 1); /* one left: one more fits */
    ck_assert_ptr_null(parked_slot(p));
    parked_destroy(&p); /* frees the 32 replies still held */
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_parked_durable_oldest_first)
{
    parked_t *p = parked_new();
    for (uint64_t t = 1; t <= 5; t++)
        park(p, t);
    ck_assert_ptr_null(parked_take_durable(p, 0));
    for (uint64_t t = 1; t <= 3; t++)
        taken(parked_take_durable(p, 3), t);
    ck_assert_ptr_null(parked_take_durable(p, 3)); /* 4 and 5 wait */
    ck_assert_uint_eq(parked_count(p), 2);
    ck_assert_uint_eq(parked_newest(p)->ticket, 5);
    parked_destroy(&p);
}
END_TEST

START_TEST(test_parked_failed_newest_first)
{
    parked_t *p = parked_new();
    for (uint64_t t = 1; t <= 5; t++)
        park(p, t);
    /* 3 failed and every line after it: undone 5, 4, 3; 1 and 2 wait on */
    for (uint64_t t = 5; t >= 3; t--)
        taken(parked_take_failed(p, 3, 5), t);
    ck_assert_ptr_null(parked_take_failed(p, 3, 5));
    ck_assert_uint_eq(parked_count(p), 2);
    /* a failure reported for tickets already gone takes nothing */
    ck_assert_ptr_null(parked_take_failed(p, 6, 9));
    taken(parked_take_durable(p, 2), 1);
    taken(parked_take_oldest(p), 2);
    ck_assert_ptr_null(parked_take_oldest(p));
    ck_assert_ptr_null(parked_newest(p));
    parked_destroy(&p);
}
END_TEST

START_TEST(test_parked_slot_not_added_leaves_nothing)
{
    parked_t *p = parked_new();
    park(p, 1);
    parked_change_t *c = parked_slot(p); /* a change refused after its slot was taken */
    c->ticket = 99;
    c->to.nenv = 2;
    ck_assert_uint_eq(parked_count(p), 1);
    ck_assert_uint_eq(parked_newest(p)->ticket, 1);
    c = parked_slot(p); /* the same slot, zeroed again */
    ck_assert_uint_eq(c->ticket, 0);
    ck_assert_int_eq(c->to.nenv, 0);
    ck_assert_int_eq(c->to.fd, -1);
    ck_assert_ptr_null(c->text);
    parked_destroy(&p);
}
END_TEST

START_TEST(test_parked_ring_wraps)
{
    parked_t *p = parked_new();
    uint64_t next = 1, oldest = 1;
    for (int round = 0; round < 10 * PARKED_MAX; round++) {
        int add = 1 + round % 5, take = 1 + (round * 7) % 5;
        for (int k = 0; k < add && parked_count(p) < PARKED_MAX; k++)
            park(p, next++);
        for (int k = 0; k < take && parked_count(p); k++)
            taken(parked_take_durable(p, oldest), oldest), oldest++;
        ck_assert_uint_eq(parked_count(p), next - oldest);
    }
    parked_destroy(&p);
}
END_TEST

START_TEST(test_parked_null)
{
    ck_assert_uint_eq(parked_count(NULL), 0);
    ck_assert_ptr_null(parked_newest(NULL));
    ck_assert_ptr_null(parked_take_oldest(NULL));
    ck_assert_ptr_null(parked_take_durable(NULL, 10));
    ck_assert_ptr_null(parked_take_failed(NULL, 1, 10));
    parked_t *p = NULL;
    parked_destroy(&p);
    parked_destroy(NULL);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_parked_bound, test_parked_durable_oldest_first,
                                  test_parked_failed_newest_first,
                                  test_parked_slot_not_added_leaves_nothing,
                                  test_parked_ring_wraps, test_parked_null};
    return testlib_run_tests("parked", tests, sizeof tests / sizeof tests[0]);
}
