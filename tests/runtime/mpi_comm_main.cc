// MPI check of MpiComm and BuildGroups; run with 4 ranks:
//   mpirun --allow-run-as-root --oversubscribe -np 4 mpi_comm_main
// Uses the grid tp=2, pp=2 (so the tied group exists). Exits 0 when every
// check passes, 1 (after printing the failed check) otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/comm/mpi_comm.h"
#include "runtime/tensor/bf16.h"

namespace {
int failures = 0;
void Expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
    ++failures;
  }
}
}  // namespace

int main(int argc, char** argv) {
  using namespace dt;
  using namespace dt::rt;
  MpiWorld world(&argc, &argv);
  const int r = world.rank();
  if (world.size() != 4) {
    if (r == 0) std::fprintf(stderr, "run with mpirun -np 4\n");
    return 1;
  }
  // A plan for 8 ranks must be refused with the launch command.
  auto big = RankGrid::Create(2, 1, 2, 2);
  auto bad = BuildGroups(*big, r);
  Expect(!bad.ok() && bad.status().message().find("mpirun -np 8") != std::string::npos,
         "wrong world size status: " + bad.status().ToString(), r);

  auto grid = RankGrid::Create(/*tp=*/2, /*cp=*/1, /*dp=*/1, /*pp=*/2);
  auto groups = BuildGroups(*grid, r);
  if (!groups.ok()) {
    std::fprintf(stderr, "%s\n", groups.status().message().c_str());
    return 1;
  }
  Groups& g = *groups;
  Expect(g.tp->rank() == g.coord.tp && g.tp->size() == 2, "tp rank", r);
  Expect(g.pp->rank() == g.coord.pp && g.pp->size() == 2, "pp rank", r);
  Expect(g.dp->size() == 1, "dp size", r);
  Expect(g.tied != nullptr && g.tied->rank() == g.coord.pp, "tied group", r);

  float v = float(r);
  g.tp->AllReduce(&v, 1);  // tp pairs: {0,1}, {2,3}
  Expect(v == (r < 2 ? 1.f : 5.f), "tp allreduce", r);
  float m = float(r);
  g.world->AllReduce(&m, 1, ReduceOp::kMax);
  Expect(m == 3.f, "world max", r);

  std::vector<float> big_buf(1000, 1.f);
  auto req = g.pp->IAllReduce(big_buf.data(), big_buf.size());
  req->Wait();
  Expect(big_buf[999] == 2.f, "pp iallreduce", r);

  std::vector<float> in = {float(r), float(r), float(r) + 1, float(r) + 1}, out(2);
  g.tp->ReduceScatter(in.data(), out.data(), 2);
  int tp0 = r - g.coord.tp;  // world rank of tp rank 0
  float expect_rs = float(2 * tp0 + 1) + (g.coord.tp == 1 ? 2.f : 0.f);
  Expect(out[0] == expect_rs && out[1] == expect_rs, "reduce-scatter", r);

  // Over the world (4 ranks: the ring takes 3 steps), distinct values per
  // rank, block and element: rank r ends with sum_q (100 q + 10 r + i).
  {
    const int n = 3;
    std::vector<float> win(4 * n), wout(n);
    std::vector<uint16_t> bin(4 * n), bout(n);
    for (int b = 0; b < 4; ++b)
      for (int i = 0; i < n; ++i) {
        win[b * n + i] = float(100 * r + 10 * b + i);
        bin[b * n + i] = FloatToBf16(float(r + 2 * b + i));  // small integers: exact in bf16
      }
    g.world->ReduceScatter(win.data(), wout.data(), n);
    g.world->ReduceScatterBf16(bin.data(), bout.data(), n);
    for (int i = 0; i < n; ++i) {
      Expect(wout[i] == float(600 + 40 * r + 4 * i), "world reduce-scatter", r);
      Expect(Bf16ToFloat(bout[i]) == float(6 + 8 * r + 4 * i), "world bf16 reduce-scatter", r);
    }
  }

  std::vector<float> gathered(8);
  float mine[2] = {float(r), -float(r)};
  g.world->AllGather(mine, gathered.data(), 2);
  Expect(gathered[6] == 3.f && gathered[7] == -3.f, "allgather", r);

  // All-to-all with uneven counts over the world: r sends r + p + 1 floats
  // of value 10 r + p to p, (r + p) % 3 of them (zero counts included).
  {
    std::vector<size_t> sc(4), rc(4);
    std::vector<float> send, recv;
    for (int p = 0; p < 4; ++p) {
      sc[p] = static_cast<size_t>(r + p) % 3;
      rc[p] = static_cast<size_t>(p + r) % 3;
      send.insert(send.end(), sc[p], float(10 * r + p));
    }
    size_t total_recv = 0;
    for (size_t c : rc) total_recv += c;
    recv.assign(total_recv, -1.f);
    g.world->AllToAllV(send.data(), sc.data(), recv.data(), rc.data());
    std::vector<float> want;
    for (int p = 0; p < 4; ++p) want.insert(want.end(), rc[p], float(10 * p + r));
    Expect(recv == want, "alltoallv", r);
  }

  // Point-to-point along the pipeline: stage 0 sends to stage 1.
  float msg[3] = {float(r), 7.f, 8.f};
  if (g.coord.pp == 0) {
    g.pp->ISend(msg, 3, 1, 11)->Wait();
  } else {
    float got[3] = {0, 0, 0};
    g.pp->IRecv(got, 3, 0, 11)->Wait();
    Expect(got[0] == float(r - 2) && got[2] == 8.f, "send/recv", r);
  }
  g.world->Barrier();
  float total = float(failures);
  g.world->AllReduce(&total, 1);
  if (r == 0) std::printf("mpi_comm_main: %s\n", total == 0 ? "PASS" : "FAIL");
  return total == 0 ? 0 : 1;
}
