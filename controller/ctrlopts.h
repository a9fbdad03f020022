/* ctrlopts.h - option rows for controller settings that more than one program takes (bqos-controller, bqos-sim): one name, default, bounds and help per setting. */
#ifndef BQOS_CTRLOPTS_H
#define BQOS_CTRLOPTS_H

#include "common/opts.h"

/* --limit-depth SECS into a double (ctrl_config_t.limit_depth). */
#define CTRL_OPTS_LIMIT_DEPTH(ptr)                                                              \
    {.name = "limit-depth", .type = OPTS_DOUBLE, .target = (ptr), .arg = "SECS",               \
     .deflt = "0.02", .min = -1, .max = 3600,                                                      \
     .help = "Limits are rates with this depth: a limited bucket may take at most its\n"          \
             "limit x (time left in the period + SECS), whatever it did earlier in the\n"         \
             "period.  Negative: per-period quotas (limit - served, no rate)."}

#endif
