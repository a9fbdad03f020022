/* sim_measured.h - what real nodes delivered, read from bqos-load's outputs into a sim_result_t, so that the property test's one checker judges real runs too.
 *
 * bqos-load -o DIR writes periods.csv (IOs per bucket and full period) and
 * servers.csv (IOs per server and full period); sim_measured_load() reads
 * both for the periods after the model's warm-up into the fields
 * sim_prop_check() reads: served, delivered, periods, and the worst 1 s
 * window over L.  With 1 s periods a 1 s window is a period, and the window
 * figure is taken from the periods against the model's limits (which
 * follow a scenario's runtime "set", as `bqos-ctl set` does on a real
 * controller; bqos-load's own window figures use the file's first limits);
 * with other periods it is summary.json's windows.long.l_worst. */
#ifndef BQOS_SIM_MEASURED_H
#define BQOS_SIM_MEASURED_H

#include <stddef.h>

#include "workloads/scenario.h"
#include "workloads/sim/sim_model.h"
#include "workloads/sim/sim_run.h"

/* Reads directory `dir` of a bqos-load run of scenario `sc` (borrowed;
 * bucket and server names come from it), whose model is `m` (built from
 * sc), into a new result in *out (caller owns it, free with
 * sim_result_destroy()).  Every bucket and server must have a row in each
 * full period the files hold, and the run must have at least one period
 * after the warm-up.  Returns 0; -EINVAL with "FILE:LINE: what" in err
 * (an unknown name, a missing or repeated row, a bad number); -ENOENT or
 * another -errno if a file cannot be read (err says which); -ENOMEM. */
int sim_measured_load(const scenario_t *sc, const sim_model_t *m, const char *dir,
                      sim_result_t **out, char *err, size_t errlen);

#endif
