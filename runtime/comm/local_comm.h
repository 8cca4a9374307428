// LocalComm: an in-process fake of the Comm seam for unit tests. N "ranks"
// are N threads of one process sharing a LocalGroup rendezvous object, so a
// test can run TP=2 or DP=2 (or a whole RankGrid) without MPI.
//
// Semantics follow MPI closely enough for the runtime's use:
//  - A collective is matched across members by its per-member sequence
//    number on the group; mismatched kinds or sizes abort (DT_CHECK).
//  - Collectives are truly non-blocking: the last member to arrive computes
//    the result (sums in member order, so all members get bit-identical
//    results) and writes every member's output. Blocking calls are the
//    non-blocking ones followed by Wait().
//  - ISend copies the data (buffered, completes at once); IRecv matches
//    messages FIFO per (source, tag) when waited/tested.
//  - A wait that is not satisfied within 60 s aborts naming the operation
//    (a hang in a test is a bug: mismatched calls).
// Thread-safety: a LocalGroup is shared by its members' threads; each
// LocalComm is used by one thread, like any Comm.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/comm/groups.h"

namespace dt::rt {

class LocalGroup;

// Creates a group of n members; Member(r) is member r's Comm.
class LocalGroupHandle {
 public:
  explicit LocalGroupHandle(int n);
  std::unique_ptr<Comm> Member(int rank) const;
  int size() const;

 private:
  std::shared_ptr<LocalGroup> group_;
};

// Runs fn(rank) on n threads and joins them.
void RunRanks(int n, const std::function<void(int rank)>& fn);

// Builds every world rank's Groups for `grid` (index = world rank), with the
// same membership and ordering as BuildGroups over MPI.
// ep: expert parallelism of an MoE plan (must divide the dp size).
std::vector<Groups> MakeLocalGroups(const RankGrid& grid, int ep = 1);

}  // namespace dt::rt
