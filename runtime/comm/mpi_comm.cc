#include "runtime/comm/mpi_comm.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "base/check.h"
#include "runtime/tensor/allocator.h"
#include "runtime/tensor/bf16.h"

namespace dt::rt {
namespace {

int Count(size_t n) {
  DT_CHECK_LE(n, static_cast<size_t>(INT_MAX)) << "MPI message of " << n
                                               << " floats exceeds INT_MAX; split it";
  return static_cast<int>(n);
}

class MpiRequest : public Request {
 public:
  MpiRequest() = default;
  ~MpiRequest() override { Wait(); }  // never leave an operation on a dead buffer
  MPI_Request* handle() { return &req_; }
  void Wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    DT_MPI_CHECK(MPI_Wait(&req_, MPI_STATUS_IGNORE));
  }
  bool Test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int flag = 0;
    DT_MPI_CHECK(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  }

 private:
  MPI_Request req_ = MPI_REQUEST_NULL;
};

// MPI has no bf16 type: bf16 travels as MPI_UINT16_T and sums through this
// user op (fp32 add, round to nearest even), created once per process.
void AddBf16(const uint16_t* a, const uint16_t* b, uint16_t* c, size_t n) {
  for (size_t i = 0; i < n; ++i) c[i] = FloatToBf16(Bf16ToFloat(a[i]) + Bf16ToFloat(b[i]));
}

void AddFloat(const float* a, const float* b, float* c, size_t n) {
  for (size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

void Bf16SumOp(void* in, void* inout, int* len, MPI_Datatype*) {
  uint16_t* b = static_cast<uint16_t*>(inout);
  AddBf16(static_cast<const uint16_t*>(in), b, b, static_cast<size_t>(*len));
}

MPI_Op Bf16Sum() {
  static MPI_Op op = [] {
    MPI_Op o;
    DT_MPI_CHECK(MPI_Op_create(&Bf16SumOp, /*commute=*/1, &o));
    return o;
  }();
  return op;
}

// Ring reduce-scatter over point-to-point: in holds size blocks of n
// elements; after size - 1 steps out holds this rank's block summed over the
// group. At step s a rank sends block (r - s - 1) mod size (at s = 0 its
// own input, later the partial sum it formed the step before) to its right
// neighbour, receives block (r - s - 2) mod size from its left one and adds
// its own input of that block. Each rank sends (size - 1) / size of the
// data, the bandwidth optimum. Open MPI 4.1's MPI_Reduce_scatter_block
// (tuned: basic linear, a reduce to one rank then a scatter) took 3.5-6x as
// long on 2 and 4 ranks sharing a node (0.9-134 MB; docs/runtime.md).
// Deterministic: every block is summed in ring order, the same every call.
// scratch: the receive block and (size > 2) the partial sum, grown as needed.
template <typename T>
void RingReduceScatter(const T* in, T* out, size_t n, MPI_Datatype type, MPI_Comm comm, int rank, int size,
                       void (*add)(const T*, const T*, T*, size_t), std::vector<unsigned char>* scratch) {
  if (size == 1) {
    std::copy(in, in + n, out);
    return;
  }
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const size_t blocks = size > 2 ? 2 : 1;
  if (scratch->size() < blocks * n * sizeof(T)) scratch->resize(blocks * n * sizeof(T));
  T* recv = reinterpret_cast<T*>(scratch->data());
  T* partial = recv + n;
  const T* send = in + static_cast<size_t>((rank + size - 1) % size) * n;
  for (int s = 0; s < size - 1; ++s) {
    const int block = ((rank - s - 2) % size + size) % size;
    DT_MPI_CHECK(MPI_Sendrecv(send, Count(n), type, right, /*tag=*/0x5253, recv, Count(n), type, left, 0x5253, comm,
                              MPI_STATUS_IGNORE));
    T* dst = s == size - 2 ? out : partial;
    add(in + static_cast<size_t>(block) * n, recv, dst, n);
    send = dst;
  }
}

}  // namespace

std::string MpiErrorString(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len);
}

MpiWorld::MpiWorld(int* argc, char*** argv) {
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  DT_CHECK(rc == MPI_SUCCESS) << "MPI_Init_thread failed (code " << rc << ")";
  DT_CHECK_GE(provided, MPI_THREAD_FUNNELED) << "MPI lacks MPI_THREAD_FUNNELED support ";
  DT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  DT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  dt::SetCheckRank(rank_);
}

MpiWorld::~MpiWorld() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MpiComm::MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  DT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiComm::AllReduce(float* buf, size_t n, ReduceOp op) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  DT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, Count(n), MPI_FLOAT,
                             op == ReduceOp::kSum ? MPI_SUM : MPI_MAX, comm_));
}

std::unique_ptr<Request> MpiComm::IAllReduce(float* buf, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  auto r = std::make_unique<MpiRequest>();
  DT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, Count(n), MPI_FLOAT, MPI_SUM, comm_, r->handle()));
  return r;
}

void MpiComm::ReduceScatter(const float* in, float* out, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  RingReduceScatter(in, out, n, MPI_FLOAT, comm_, rank_, size_, &AddFloat, &ring_scratch_);
}

void MpiComm::AllReduceBf16(uint16_t* buf, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  DT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, Count(n), MPI_UINT16_T, Bf16Sum(), comm_));
}

void MpiComm::ReduceScatterBf16(const uint16_t* in, uint16_t* out, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  RingReduceScatter(in, out, n, MPI_UINT16_T, comm_, rank_, size_, &AddBf16, &ring_scratch_);
}

void MpiComm::AllGatherBf16(const uint16_t* in, uint16_t* out, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  DT_MPI_CHECK(MPI_Allgather(in, Count(n), MPI_UINT16_T, out, Count(n), MPI_UINT16_T, comm_));
}

void MpiComm::AllGather(const float* in, float* out, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  DT_MPI_CHECK(MPI_Allgather(in, Count(n), MPI_FLOAT, out, Count(n), MPI_FLOAT, comm_));
}

std::unique_ptr<Request> MpiComm::ISend(const float* buf, size_t n, int peer, int tag) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  auto r = std::make_unique<MpiRequest>();
  DT_MPI_CHECK(MPI_Isend(buf, Count(n), MPI_FLOAT, peer, tag, comm_, r->handle()));
  return r;
}

std::unique_ptr<Request> MpiComm::IRecv(float* buf, size_t n, int peer, int tag) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  auto r = std::make_unique<MpiRequest>();
  DT_MPI_CHECK(MPI_Irecv(buf, Count(n), MPI_FLOAT, peer, tag, comm_, r->handle()));
  return r;
}

void MpiComm::Barrier() { DT_MPI_CHECK(MPI_Barrier(comm_)); }

void MpiComm::AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
  size_t s_off = 0, r_off = 0;
  for (int p = 0; p < size_; ++p) {
    sc[p] = Count(send_counts[p]);
    rc[p] = Count(recv_counts[p]);
    sd[p] = Count(s_off);
    rd[p] = Count(r_off);
    s_off += send_counts[p];
    r_off += recv_counts[p];
  }
  DT_MPI_CHECK(MPI_Alltoallv(in, sc.data(), sd.data(), MPI_FLOAT, out, rc.data(), rd.data(), MPI_FLOAT, comm_));
}

namespace {

// MPI_Comm_split with color/key; returns null for MPI_UNDEFINED colors.
std::unique_ptr<Comm> Split(int color, int key) {
  MPI_Comm c = MPI_COMM_NULL;
  DT_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c));
  if (c == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiComm>(c);
}

}  // namespace

StatusOr<Groups> BuildGroups(const RankGrid& grid, int world_rank, int ep) {
  int world_size = 0;
  DT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
  if (world_size != grid.world()) {
    return InvalidArgument(
        "plan needs " + std::to_string(grid.world()) + " ranks (tp=" +
        std::to_string(grid.size(Dim::kTp)) + " cp=" + std::to_string(grid.size(Dim::kCp)) +
        " dp=" + std::to_string(grid.size(Dim::kDp)) + " pp=" + std::to_string(grid.size(Dim::kPp)) +
        ") but MPI started " + std::to_string(world_size) + ": launch with mpirun -np " +
        std::to_string(grid.world()) + " (add --oversubscribe for more ranks than cores)");
  }
  Groups g;
  g.world_rank = world_rank;
  g.coord = grid.CoordOf(world_rank);
  g.world = std::make_unique<MpiComm>(MPI_COMM_WORLD, /*owned=*/false);
  // Color: the first rank of the group (unique per group); key: position in it.
  auto along = [&](Dim d) {
    std::vector<int> members = grid.Group(world_rank, d);
    return Split(members.front(), g.coord.Get(d));
  };
  g.tp = along(Dim::kTp);
  g.cp = along(Dim::kCp);
  g.dp = along(Dim::kDp);
  g.pp = along(Dim::kPp);
  Coord base = g.coord;
  base.dp = 0;
  base.cp = 0;
  g.dp_cp = Split(grid.RankOf(base), world_rank);
  if (ep < 1 || grid.size(Dim::kDp) % ep != 0)
    return InvalidArgument("plan has ep=" + std::to_string(ep) + ", which must divide dp=" +
                           std::to_string(grid.size(Dim::kDp)) + "; replan with an ep that divides dp");
  g.ep = Split(grid.ExpertGroup(world_rank, ep).front(), g.coord.dp % ep);
  Coord expert_base = base;
  expert_base.dp = g.coord.dp % ep;
  g.expert_dp = Split(grid.RankOf(expert_base), world_rank);
  const int pp = grid.size(Dim::kPp);
  if (pp > 1) {
    bool end = g.coord.pp == 0 || g.coord.pp == pp - 1;
    Coord first = g.coord;
    first.pp = 0;
    g.tied = Split(end ? grid.RankOf(first) : MPI_UNDEFINED, g.coord.pp == 0 ? 0 : 1);
  }
  return g;
}

}  // namespace dt::rt
