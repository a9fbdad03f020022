/* test_sim.c - Check suite of the simulator modules (sim_engine, sim_model, sim_run). */
#include <check.h>
#include <stdlib.h>

#include "workloads/sim_engine.h"

START_TEST(test_sim_heap_orders_by_time_then_id)
{
    sim_heap_t *h = sim_heap_new(1);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(sim_heap_push(h, 2.0, 5), 0);
    ck_assert_int_eq(sim_heap_push(h, 1.0, 9), 0);
    ck_assert_int_eq(sim_heap_push(h, 1.0, 3), 0);
    sim_event_t e;
    ck_assert_int_eq(sim_heap_pop(h, &e), 0);
    ck_assert_uint_eq(e.id, 3);
    sim_heap_destroy(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sim_heap_orders_by_time_then_id);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
