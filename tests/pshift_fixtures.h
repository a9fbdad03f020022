/* pshift_fixtures.h - what test_pshift and test_pjson share: generated problems, solved with the default options. */
#ifndef BQOS_PSHIFT_FIXTURES_H
#define BQOS_PSHIFT_FIXTURES_H

#include <check.h>
#include <stdint.h>

#include "pshift/pshift.h"
#include "pshift/tools/gen.h"

/* Returns the generator's defaults (GEN_PARAMS_DEFAULT) with servers and
 * buckets set. */
static inline gen_params_t pshift_fixture_params(int servers, int buckets)
{
    gen_params_t g = GEN_PARAMS_DEFAULT;
    g.servers = servers;
    g.buckets = buckets;
    return g;
}

/* Generates g's problem into *p (its limits into *limits unless limits is
 * NULL) and solves it with the default options.  Fails the test when either
 * fails.  The caller destroys *p and frees *limits. */
static inline void pshift_fixture_solved(const gen_params_t *g, pshift_problem_t **p,
                                         int64_t **limits)
{
    ck_assert_int_eq(gen_problem(g, p, limits), 0);
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    ck_assert_int_eq(pshift_solve(*p, &o), 0);
}

#endif
