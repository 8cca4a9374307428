// Groups: the process groups one rank takes part in, built from the plan's
// RankGrid (the single rank <-> (tp, cp, dp, pp) mapping).
//
// Every member is a Comm seen from this rank. tp/cp/dp/pp hold the ranks
// that share all other coordinates (ordered by their coordinate along that
// dimension, so tp->rank() == coord.tp). dp_cp holds the ranks sharing tp and
// pp (the group gradients are reduced over when cp > 1). tied holds pipeline
// rank 0 and the last pipeline rank of the same (tp, cp, dp) coordinate, with
// pipeline rank 0 as tied rank 0; it is null when pp == 1 or when this rank
// is on neither end of the pipeline. For mixture-of-experts plans with
// expert parallelism ep (RankGrid::ExpertGroup): ep holds the ep ranks that
// split the experts (ordered by dp coordinate, so ep->rank() == dp % ep) and
// expert_dp the ranks holding the same experts (same tp, pp and dp % ep; all
// cp): dp * cp / ep members, in world-rank order, over which expert
// gradients are reduced. With ep == 1, ep is a group of one and expert_dp
// has dp_cp's members. Built by BuildGroups (MPI, mpi_comm.h)
// or MakeLocalGroups (in-process fake, local_comm.h). Owns its Comms.
#pragma once

#include <memory>

#include "planner/spec/rank_grid.h"
#include "runtime/comm/comm.h"

namespace dt::rt {

struct Groups {
  int world_rank = 0;
  Coord coord;
  std::unique_ptr<Comm> world, tp, cp, dp, pp, dp_cp, tied, ep, expert_dp;
};

}  // namespace dt::rt
