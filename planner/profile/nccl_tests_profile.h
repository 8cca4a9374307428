// A hardware profile whose collective tables come from nccl-tests logs
// (planner/profile/nccl_tests_log.h) and whose other sections (device,
// compute, the collective entries no log covers) come from a base profile:
// nccl-tests measures only the network.
//
// Each run of all_reduce, all_gather, reduce_scatter or sendrecv becomes one
// entry (planner/profile/collective_series.h: measured points, so the cost
// model reproduces the logged bus bandwidth at every logged size):
//  * one host: the `intra` entry keyed by the rank count (group size);
//  * several hosts with g ranks each: the `inter` entry keyed by g, except
//    sendrecv, keyed by 1: in nccl-tests' ring pattern each node boundary is
//    crossed by one pair of ranks and the slowest pair sets the time, which
//    is what a pipeline send between two nodes pays (P2PTime).
// A logged entry replaces the base's entry of the same collective, side and
// key; the base's other entries stay (their notes say where they come from).
// alltoall runs are noted, not stored (no plan dtplan prices uses
// all-to-all); other tests (broadcast, ...) are listed as ignored.
//
// Failure (InvalidArgument naming the file and line): a run with more ranks
// per host than the base's gpus_per_node, two runs for the same entry, a run
// of one rank, or a result PrepareProfile rejects. Pure.
#pragma once

#include <string>
#include <vector>

#include "planner/profile/nccl_tests_log.h"
#include "planner/profile/profile.h"

namespace dt {

struct NcclTestsImport {
  HardwareProfile profile;
  std::vector<std::string> summary;  // one line per run: what it became
};

// `name`: the new profile's name; `source`: the logs' path (for notes);
// `date`: ISO date for `created`.
StatusOr<NcclTestsImport> ProfileFromNcclTests(const HardwareProfile& base, const std::vector<NcclTestsRun>& runs,
                                               const std::string& name, const std::string& source,
                                               const std::string& date);

}  // namespace dt
