// CheckSchedule: validates a schedule (one ActionList per pipeline rank)
// against a plan, so a hand-written, loaded or generated schedule can be
// trusted by the simulator and the runtime.
//
// Checks, in list order per rank (rank 0 first), then at each list's end:
//  - fields: microbatch in [0, m) (or -1 for GradSync/OptimizerStep/
//    ParamSync), chunk on this rank (chunk % pp == rank), no SA/RG of the
//    last chunk, no RA/SG of chunk 0, ParamSync only with zero_stage >= 1;
//  - exactly one F and one B per local (microbatch, chunk), F before B;
//  - F(mb,c>0) preceded by RA(mb,c); B(mb,c<last) preceded by RG(mb,c);
//    SA(mb,c) after F(mb,c); SG(mb,c) after B(mb,c); each send and receive
//    exactly once. Since SA(mb,c) can only live on rank c%pp and RA(mb,c+1)
//    on rank (c+1)%pp, this makes every send match exactly one receive;
//  - GradSync(c) once per local chunk, after the chunk's last B;
//    OptimizerStep once, after all GradSyncs; ParamSync(c) once per local
//    chunk iff zero_stage >= 1, after OptimizerStep;
//  - no deadlock under the runtime's semantics (sends buffered and
//    non-blocking, a receive blocks until the peer has issued the matching
//    send), found by executing all lists in lock-step.
// Returns OK or InvalidArgument naming the first violation as
// "schedule rank R action I (F3.1): ...". Pure; never aborts on bad input.
#pragma once

#include <vector>

#include "base/status.h"
#include "planner/schedule/action.h"
#include "planner/spec/plan_spec.h"

namespace dt {

Status CheckSchedule(const std::vector<ActionList>& s, const PlanSpec& p);

}  // namespace dt
