/* test_keyorder.c - Check suite for storage-node/mc/keyorder: same-key IOs wait behind the newest unfinished one, in order; other keys (also sharing a chain) run at once; finish, forget and free. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "storage-node/mc/keyorder.h"
#include "tests/testlib.h"

static int reg(keyorder_t *t, keyorder_entry_t *e, const char *key)
{
    return keyorder_register(t, e, key, strlen(key));
}

START_TEST(test_keyorder_first_runs_second_waits)
{
    keyorder_t t = {0};
    keyorder_entry_t a = {0}, b = {0}, c = {0};
    ck_assert_int_eq(reg(&t, &a, "red:k"), 0);
    ck_assert_int_eq(reg(&t, &b, "red:k"), 1);
    ck_assert_int_eq(reg(&t, &c, "red:other"), 0);
    ck_assert_ptr_eq(a.waiter, &b);
    ck_assert_ptr_null(b.waiter);
    ck_assert_ptr_null(c.waiter);
    /* a's waiter is released when a finishes; c has none */
    ck_assert_ptr_eq(keyorder_finish(&t, &a), &b);
    ck_assert_ptr_null(a.waiter);
    ck_assert_ptr_null(keyorder_finish(&t, &c));
    ck_assert_ptr_null(keyorder_finish(&t, &b));
    keyorder_free(&t);
    ck_assert_ptr_null(t.chains);
}
END_TEST

/* Three IOs of one key run one after another: each finish releases the
 * next, and the released one stays the key's newest. */
START_TEST(test_keyorder_chain_of_three)
{
    keyorder_t t = {0};
    keyorder_entry_t e[4] = {{0}};
    ck_assert_int_eq(reg(&t, &e[0], "k"), 0);
    ck_assert_int_eq(reg(&t, &e[1], "k"), 1);
    ck_assert_int_eq(reg(&t, &e[2], "k"), 1);
    ck_assert_ptr_eq(e[0].waiter, &e[1]);
    ck_assert_ptr_eq(e[1].waiter, &e[2]);
    ck_assert_ptr_eq(keyorder_finish(&t, &e[0]), &e[1]);
    /* e[2] is the newest: a fourth waits behind it, not behind e[1] */
    ck_assert_int_eq(reg(&t, &e[3], "k"), 1);
    ck_assert_ptr_eq(e[2].waiter, &e[3]);
    ck_assert_ptr_eq(keyorder_finish(&t, &e[1]), &e[2]);
    ck_assert_ptr_eq(keyorder_finish(&t, &e[2]), &e[3]);
    ck_assert_ptr_null(keyorder_finish(&t, &e[3]));
    /* all finished: the key is free again */
    keyorder_entry_t f = {0};
    ck_assert_int_eq(reg(&t, &f, "k"), 0);
    ck_assert_ptr_null(keyorder_finish(&t, &f));
    keyorder_free(&t);
}
END_TEST

/* Keys are compared by their bytes and length, not by pointer or C string. */
START_TEST(test_keyorder_compares_bytes)
{
    keyorder_t t = {0};
    keyorder_entry_t a = {0}, b = {0}, c = {0}, d = {0}, e = {0};
    char k1[] = "blue:x", k2[] = "blue:x";
    ck_assert_int_eq(reg(&t, &a, k1), 0);
    ck_assert_int_eq(reg(&t, &b, k2), 1); /* another buffer, same key */
    ck_assert_int_eq(keyorder_register(&t, &c, "blue:xy", 6), 1); /* its first 6 bytes */
    ck_assert_int_eq(reg(&t, &d, "blue:xy"), 0); /* longer: another key */
    ck_assert_int_eq(keyorder_register(&t, &e, "a\0b", 3), 0);
    keyorder_entry_t f = {0};
    ck_assert_int_eq(keyorder_register(&t, &f, "a\0c", 3), 0);
    ck_assert_ptr_eq(a.waiter, &b);
    ck_assert_ptr_eq(b.waiter, &c);
    keyorder_free(&t);
}
END_TEST

/* More keys than the table has chains: some share a chain; each still
 * runs at once, and finishing them in any order unlinks exactly each one
 * (a later IO of each key runs at once again, with no stale waiter). */
START_TEST(test_keyorder_shared_chains)
{
    enum { N = 600 };
    static char keys[N][16];
    static keyorder_entry_t e[N], again[N];
    keyorder_t t = {0};
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "b:%d", i);
        memset(&e[i], 0, sizeof e[i]);
        ck_assert_int_eq(reg(&t, &e[i], keys[i]), 0);
    }
    /* a second IO of every third key waits behind the first */
    for (int i = 0; i < N; i += 3) {
        memset(&again[i], 0, sizeof again[i]);
        ck_assert_int_eq(reg(&t, &again[i], keys[i]), 1);
    }
    /* finish odd ones first, then even ones backwards: middles and heads of chains */
    for (int i = 1; i < N; i += 2)
        ck_assert_ptr_eq(keyorder_finish(&t, &e[i]), i % 3 == 0 ? &again[i] : NULL);
    for (int i = N - 2; i >= 0; i -= 2)
        ck_assert_ptr_eq(keyorder_finish(&t, &e[i]), i % 3 == 0 ? &again[i] : NULL);
    for (int i = 0; i < N; i += 3)
        ck_assert_ptr_null(keyorder_finish(&t, &again[i]));
    for (int i = 0; i < N; i++) {
        keyorder_entry_t x = {0};
        ck_assert_msg(reg(&t, &x, keys[i]) == 0, "%s still registered", keys[i]);
        ck_assert_ptr_null(keyorder_finish(&t, &x));
    }
    keyorder_free(&t);
}
END_TEST

/* A finish of an entry that never entered a table (its IO failed before
 * it registered), a forget (the connection goes away with its table), and
 * a free of a table that was never used or is already freed. */
START_TEST(test_keyorder_finish_forget_free)
{
    keyorder_t t = {0};
    keyorder_entry_t lone = {0};
    ck_assert_ptr_null(keyorder_finish(&t, &lone));
    keyorder_free(&t);
    ck_assert_ptr_null(t.chains);

    keyorder_entry_t a = {0}, b = {0};
    ck_assert_int_eq(reg(&t, &a, "k"), 0);
    ck_assert_int_eq(reg(&t, &b, "k"), 1);
    keyorder_forget(&a);
    keyorder_forget(&b);
    ck_assert_ptr_null(a.waiter);
    ck_assert_ptr_null(a.hnext);
    ck_assert_int_eq(a.in_tab, 0);
    ck_assert_int_eq(b.in_tab, 0);
    /* a forgotten entry has nothing to release */
    ck_assert_ptr_null(keyorder_finish(&t, &a));
    keyorder_free(&t);
    keyorder_free(&t);
    ck_assert_ptr_null(t.chains);
}
END_TEST

/* One IO at a time (the usual connection) is held alone, nothing hashed;
 * a second moves the first into the chains, and once every IO there has
 * finished the next lone one is held alone again. */
START_TEST(test_keyorder_lone_and_back)
{
    keyorder_t t = {0};
    keyorder_entry_t a = {0}, b = {0}, c = {0}, d = {0}, e = {0}, f = {0};
    ck_assert_int_eq(reg(&t, &a, "k"), 0);
    ck_assert_ptr_eq(t.only, &a);
    ck_assert_ptr_null(t.chains); /* nothing allocated for a lone IO */
    ck_assert_ptr_null(keyorder_finish(&t, &a));
    ck_assert_ptr_null(t.only);
    ck_assert_int_eq(reg(&t, &b, "k"), 0); /* a finished: b runs */
    ck_assert_int_eq(reg(&t, &c, "j"), 0); /* b moves into the chains */
    ck_assert_ptr_null(t.only);
    ck_assert_int_eq(t.n, 2);
    ck_assert_ptr_null(keyorder_finish(&t, &b));
    ck_assert_int_eq(reg(&t, &d, "k"), 0);
    ck_assert_int_eq(reg(&t, &e, "j"), 1); /* behind c, found in the chains */
    ck_assert_ptr_eq(keyorder_finish(&t, &c), &e);
    ck_assert_ptr_null(keyorder_finish(&t, &d));
    ck_assert_ptr_null(keyorder_finish(&t, &e));
    ck_assert_int_eq(t.n, 0);
    ck_assert_int_eq(reg(&t, &f, "j"), 0);
    ck_assert_ptr_eq(t.only, &f); /* alone again */
    ck_assert_ptr_null(keyorder_finish(&t, &f));
    keyorder_free(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_keyorder_first_runs_second_waits, test_keyorder_chain_of_three,
                                  test_keyorder_compares_bytes, test_keyorder_shared_chains,
                                  test_keyorder_finish_forget_free, test_keyorder_lone_and_back};
    return testlib_run_tests("keyorder", tests, sizeof tests / sizeof tests[0]);
}
