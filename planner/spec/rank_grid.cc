#include "planner/spec/rank_grid.h"

#include <sstream>

namespace dt {

int Coord::Get(Dim d) const {
  switch (d) {
    case Dim::kTp: return tp;
    case Dim::kCp: return cp;
    case Dim::kDp: return dp;
    case Dim::kPp: return pp;
  }
  return 0;
}

void Coord::Set(Dim d, int v) {
  switch (d) {
    case Dim::kTp: tp = v; break;
    case Dim::kCp: cp = v; break;
    case Dim::kDp: dp = v; break;
    case Dim::kPp: pp = v; break;
  }
}

StatusOr<RankGrid> RankGrid::Create(int tp, int cp, int dp, int pp, const std::string& order) {
  RankGrid g;
  g.size_ = {tp, cp, dp, pp};
  std::vector<Dim> dims;
  std::stringstream ss(order);
  std::string tok;
  while (std::getline(ss, tok, '-')) {
    if (tok == "tp") dims.push_back(Dim::kTp);
    else if (tok == "cp") dims.push_back(Dim::kCp);
    else if (tok == "dp") dims.push_back(Dim::kDp);
    else if (tok == "pp") dims.push_back(Dim::kPp);
    else return InvalidArgument("rank order '" + order + "': unknown dimension '" + tok +
                                "'; use a permutation of tp-cp-dp-pp");
  }
  bool seen[4] = {false, false, false, false};
  for (Dim d : dims) {
    if (seen[static_cast<int>(d)])
      return InvalidArgument("rank order '" + order + "' repeats a dimension");
    seen[static_cast<int>(d)] = true;
  }
  if (dims.size() != 4)
    return InvalidArgument("rank order '" + order + "' must name tp, cp, dp and pp once each");
  int stride = 1;
  for (Dim d : dims) {
    g.stride_[static_cast<int>(d)] = stride;
    stride *= g.size_[static_cast<int>(d)];
  }
  return g;
}

int RankGrid::RankOf(const Coord& c) const {
  int r = 0;
  for (int d = 0; d < 4; ++d) {
    int v = c.Get(static_cast<Dim>(d));
    DT_CHECK(v >= 0 && v < size_[d]) << "coordinate " << v << " out of range on dim " << d;
    r += v * stride_[d];
  }
  return r;
}

Coord RankGrid::CoordOf(int rank) const {
  DT_CHECK(rank >= 0 && rank < world()) << "rank " << rank << " outside world " << world();
  Coord c;
  for (int d = 0; d < 4; ++d) c.Set(static_cast<Dim>(d), (rank / stride_[d]) % size_[d]);
  return c;
}

std::vector<int> RankGrid::Group(int rank, Dim d) const {
  Coord c = CoordOf(rank);
  std::vector<int> out;
  for (int i = 0; i < size(d); ++i) {
    c.Set(d, i);
    out.push_back(RankOf(c));
  }
  return out;
}

std::vector<int> RankGrid::ExpertGroup(int rank, int ep) const {
  DT_CHECK(ep >= 1 && size(Dim::kDp) % ep == 0) << "ep " << ep << " must divide dp " << size(Dim::kDp);
  Coord c = CoordOf(rank);
  const int first = c.dp / ep * ep;
  std::vector<int> out;
  for (int i = 0; i < ep; ++i) {
    c.dp = first + i;
    out.push_back(RankOf(c));
  }
  return out;
}

}  // namespace dt
