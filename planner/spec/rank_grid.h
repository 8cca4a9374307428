// RankGrid: the one mapping between global ranks and (tp, cp, dp, pp)
// coordinates, shared by planner, simulator and runtime.
//
// The order string lists dimensions innermost first; the default
// "tp-cp-dp-pp" makes TP ranks consecutive (so a TP group of <= 8 stays in
// one 8-GPU node) and PP outermost, as Megatron-LM's parallel_state does.
// Expert parallelism (MoE) is not a grid dimension: an EP group is ep
// consecutive DP coordinates (d / ep equal) with the same tp, cp and pp
// coordinates, so ep divides dp (a stricter rule than Megatron-LM's
// "tp-cp-ep-dp-pp", which folds EP over cp*dp; here EP never mixes with CP).
// With the default order the EP group's stride is tp*cp, the expert
// gradient group is the dp / ep members with equal d % ep, times cp.
// Immutable after construction; thread-safe to share.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/status.h"

namespace dt {

enum class Dim { kTp = 0, kCp = 1, kDp = 2, kPp = 3 };

struct Coord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  int Get(Dim d) const;
  void Set(Dim d, int v);
};

class RankGrid {
 public:
  // Fails on an order string that does not name tp, cp, dp, pp once each.
  static StatusOr<RankGrid> Create(int tp, int cp, int dp, int pp,
                                   const std::string& order = "tp-cp-dp-pp");

  int world() const { return size_[0] * size_[1] * size_[2] * size_[3]; }
  int size(Dim d) const { return size_[static_cast<int>(d)]; }
  int RankOf(const Coord& c) const;
  Coord CoordOf(int rank) const;
  // Ranks that share every coordinate with `rank` except `d`, ordered by
  // their coordinate along `d`. Includes `rank` itself.
  std::vector<int> Group(int rank, Dim d) const;
  // The expert-parallel group of `rank` (see the header comment), ordered by
  // dp coordinate; aborts unless ep >= 1 divides the dp size.
  std::vector<int> ExpertGroup(int rank, int ep) const;
  // Distance in ranks between neighbours along d (1 for the innermost dim).
  int Stride(Dim d) const { return stride_[static_cast<int>(d)]; }

 private:
  std::array<int, 4> size_{1, 1, 1, 1};
  std::array<int, 4> stride_{1, 1, 1, 1};
};

}  // namespace dt
