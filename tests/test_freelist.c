/* test_freelist.c - Check suite for storage-node/io/freelist: blocks are reused last in first out, the list keeps at most `max` and frees the rest, and fini empties it. */
#include <check.h>
#include <string.h>

#include "storage-node/io/freelist.h"
#include "tests/testlib.h"

/* A block given back comes out again before any new one. */
START_TEST(test_freelist_reuses)
{
    freelist_t fl;
    freelist_init(&fl, 100, 4);
    ck_assert_uint_eq(fl.size, 100);
    char *a = freelist_get(&fl), *b = freelist_get(&fl);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    memset(a, 1, 100);
    memset(b, 2, 100);
    freelist_put(&fl, a);
    freelist_put(&fl, b);
    ck_assert_int_eq(fl.n, 2);
    ck_assert_ptr_eq(freelist_get(&fl), b);
    ck_assert_ptr_eq(freelist_get(&fl), a);
    ck_assert_int_eq(fl.n, 0);
    freelist_put(&fl, NULL);
    ck_assert_int_eq(fl.n, 0);
    freelist_put(&fl, a);
    freelist_put(&fl, b);
    freelist_fini(&fl);
    ck_assert_ptr_null(fl.head);
    ck_assert_int_eq(fl.n, 0);
}
END_TEST

/* No more than max blocks wait; the others go to free(3) (ASan/valgrind
 * would report a leak if they went nowhere). */
START_TEST(test_freelist_bounded)
{
    freelist_t fl;
    freelist_init(&fl, 1, 3);
    ck_assert_uint_eq(fl.size, sizeof(void *)); /* room for the link */
    void *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = freelist_get(&fl);
    for (int i = 0; i < 8; i++)
        freelist_put(&fl, p[i]);
    ck_assert_int_eq(fl.n, 3);
    ck_assert_ptr_eq(freelist_get(&fl), p[2]);
    freelist_put(&fl, p[2]);
    freelist_fini(&fl);
    ck_assert_int_eq(fl.n, 0);
    /* max 0: nothing is kept */
    freelist_init(&fl, 16, 0);
    freelist_put(&fl, freelist_get(&fl));
    ck_assert_int_eq(fl.n, 0);
    ck_assert_ptr_null(fl.head);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_freelist_reuses, test_freelist_bounded};
    return testlib_run_tests("freelist", tests, sizeof tests / sizeof tests[0]);
}
