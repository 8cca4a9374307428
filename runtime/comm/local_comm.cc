#include "runtime/comm/local_comm.h"
#include "runtime/tensor/allocator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "base/check.h"

namespace dt::rt {
namespace {

enum class OpKind { kAllReduceSum, kAllReduceMax, kReduceScatter, kAllGather, kBarrier, kAllToAllV };

const char* OpName(OpKind k) {
  switch (k) {
    case OpKind::kAllReduceSum: return "AllReduce(sum)";
    case OpKind::kAllReduceMax: return "AllReduce(max)";
    case OpKind::kReduceScatter: return "ReduceScatter";
    case OpKind::kAllGather: return "AllGather";
    case OpKind::kBarrier: return "Barrier";
    case OpKind::kAllToAllV: return "AllToAllV";
  }
  return "?";
}

constexpr auto kWaitLimit = std::chrono::seconds(60);

// One collective in flight: every member's buffers, filled as they arrive.
struct PendingOp {
  OpKind kind;
  size_t n = 0;
  std::vector<const float*> in;
  std::vector<float*> out;
  std::vector<const size_t*> send_counts, recv_counts;  // AllToAllV only
  int arrived = 0;
  int released = 0;  // members that observed completion
  bool done = false;
};

struct Message {
  std::vector<float> data;
};

}  // namespace

class LocalGroup {
 public:
  explicit LocalGroup(int n) : n_(n), next_seq_(n, 0) {}
  int size() const { return n_; }

  // Registers member `rank`'s part of the next collective; returns its seq.
  int64_t Arrive(int rank, OpKind kind, const float* in, float* out, size_t n,
                 const size_t* send_counts = nullptr, const size_t* recv_counts = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    int64_t seq = next_seq_[rank]++;
    PendingOp& op = ops_[seq];
    if (op.arrived == 0) {
      op.kind = kind;
      op.n = n;
      op.in.assign(n_, nullptr);
      op.out.assign(n_, nullptr);
      op.send_counts.assign(n_, nullptr);
      op.recv_counts.assign(n_, nullptr);
    } else {
      DT_CHECK(op.kind == kind && op.n == n)
          << "LocalComm: member " << rank << " called " << OpName(kind) << "(n=" << n
          << ") as collective #" << seq << " but others called " << OpName(op.kind)
          << "(n=" << op.n << "); every member must issue the same collectives in order";
    }
    op.in[rank] = in;
    op.out[rank] = out;
    op.send_counts[rank] = send_counts;
    op.recv_counts[rank] = recv_counts;
    if (++op.arrived == n_) {
      Compute(op);
      op.done = true;
      cv_.notify_all();
    }
    return seq;
  }

  bool IsDone(int64_t seq, int rank, bool block) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = ops_.find(seq);
    DT_CHECK(it != ops_.end()) << "LocalComm: unknown collective #" << seq;
    if (block) {
      bool ok = cv_.wait_for(lock, kWaitLimit, [&] { return it->second.done; });
      DT_CHECK(ok) << "LocalComm: member " << rank << " waited 60 s for "
                   << OpName(it->second.kind) << " #" << seq << " (" << it->second.arrived
                   << "/" << n_ << " members arrived): mismatched collective calls?";
    }
    if (!it->second.done) return false;
    if (++it->second.released == n_) ops_.erase(it);
    return true;
  }

  void Send(int src, int dst, int tag, const float* buf, size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    mailbox_[{src, dst, tag}].push_back(Message{std::vector<float>(buf, buf + n)});
    cv_.notify_all();
  }

  // Takes the oldest matching message into buf; false if none (non-blocking).
  bool Recv(int src, int dst, int tag, float* buf, size_t n, bool block) {
    std::unique_lock<std::mutex> lock(mu_);
    auto key = std::make_tuple(src, dst, tag);
    auto ready = [&] {
      auto it = mailbox_.find(key);
      return it != mailbox_.end() && !it->second.empty();
    };
    if (block) {
      bool ok = cv_.wait_for(lock, kWaitLimit, ready);
      DT_CHECK(ok) << "LocalComm: member " << dst << " waited 60 s for a message from " << src
                   << " with tag " << tag << ": no matching ISend";
    } else if (!ready()) {
      return false;
    }
    auto& q = mailbox_[key];
    Message m = std::move(q.front());
    q.pop_front();
    DT_CHECK_EQ(m.data.size(), n) << "LocalComm: message " << src << "->" << dst << " tag "
                                  << tag << " size mismatch ";
    std::memcpy(buf, m.data.data(), n * sizeof(float));
    return true;
  }

 private:
  // Runs with the lock held, once all members arrived. Sums in member order.
  void Compute(PendingOp& op) {
    const size_t n = op.n;
    switch (op.kind) {
      case OpKind::kAllReduceSum:
      case OpKind::kAllReduceMax: {
        std::vector<float> acc(op.in[0], op.in[0] + n);
        for (int r = 1; r < n_; ++r)
          for (size_t i = 0; i < n; ++i)
            acc[i] = op.kind == OpKind::kAllReduceSum ? acc[i] + op.in[r][i]
                                                      : std::max(acc[i], op.in[r][i]);
        for (int r = 0; r < n_; ++r) std::memcpy(op.out[r], acc.data(), n * sizeof(float));
        break;
      }
      case OpKind::kReduceScatter:
        for (int r = 0; r < n_; ++r)
          for (size_t i = 0; i < n; ++i) {
            float s = op.in[0][r * n + i];
            for (int q = 1; q < n_; ++q) s += op.in[q][r * n + i];
            op.out[r][i] = s;
          }
        break;
      case OpKind::kAllGather: {
        std::vector<float> all(n * n_);
        for (int q = 0; q < n_; ++q) std::memcpy(all.data() + q * n, op.in[q], n * sizeof(float));
        for (int r = 0; r < n_; ++r) std::memcpy(op.out[r], all.data(), all.size() * sizeof(float));
        break;
      }
      case OpKind::kBarrier:
        break;
      case OpKind::kAllToAllV: {
        // Offsets of block q of member r's send and receive buffers.
        std::vector<std::vector<size_t>> s_off(n_, std::vector<size_t>(n_ + 1, 0)), r_off = s_off;
        for (int r = 0; r < n_; ++r)
          for (int q = 0; q < n_; ++q) {
            s_off[r][q + 1] = s_off[r][q] + op.send_counts[r][q];
            r_off[r][q + 1] = r_off[r][q] + op.recv_counts[r][q];
          }
        for (int src = 0; src < n_; ++src)
          for (int dst = 0; dst < n_; ++dst) {
            const size_t c = op.send_counts[src][dst];
            DT_CHECK_EQ(c, op.recv_counts[dst][src])
                << "LocalComm: AllToAllV member " << src << " sends " << c << " floats to " << dst
                << ", which expects " << op.recv_counts[dst][src];
            if (c > 0) std::memcpy(op.out[dst] + r_off[dst][src], op.in[src] + s_off[src][dst], c * sizeof(float));
          }
        break;
      }
    }
  }

  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> next_seq_;
  std::map<int64_t, PendingOp> ops_;
  std::map<std::tuple<int, int, int>, std::deque<Message>> mailbox_;
};

namespace {

class CollectiveRequest : public Request {
 public:
  CollectiveRequest(std::shared_ptr<LocalGroup> g, int rank, int64_t seq)
      : g_(std::move(g)), rank_(rank), seq_(seq) {}
  ~CollectiveRequest() override { Wait(); }
  void Wait() override {
    if (!done_) done_ = g_->IsDone(seq_, rank_, /*block=*/true);
  }
  bool Test() override {
    if (!done_) done_ = g_->IsDone(seq_, rank_, /*block=*/false);
    return done_;
  }

 private:
  std::shared_ptr<LocalGroup> g_;
  int rank_;
  int64_t seq_;
  bool done_ = false;
};

class DoneRequest : public Request {
 public:
  void Wait() override {}
  bool Test() override { return true; }
};

class RecvRequest : public Request {
 public:
  RecvRequest(std::shared_ptr<LocalGroup> g, int src, int dst, int tag, float* buf, size_t n)
      : g_(std::move(g)), src_(src), dst_(dst), tag_(tag), buf_(buf), n_(n) {}
  ~RecvRequest() override { Wait(); }
  void Wait() override {
    if (!done_) done_ = g_->Recv(src_, dst_, tag_, buf_, n_, /*block=*/true);
  }
  bool Test() override {
    if (!done_) done_ = g_->Recv(src_, dst_, tag_, buf_, n_, /*block=*/false);
    return done_;
  }

 private:
  std::shared_ptr<LocalGroup> g_;
  int src_, dst_, tag_;
  float* buf_;
  size_t n_;
  bool done_ = false;
};

class LocalComm : public Comm {
 public:
  LocalComm(std::shared_ptr<LocalGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size(); }

  void AllReduce(float* buf, size_t n, ReduceOp op) override {
    OpKind k = op == ReduceOp::kSum ? OpKind::kAllReduceSum : OpKind::kAllReduceMax;
    CollectiveRequest(g_, rank_, g_->Arrive(rank_, k, buf, buf, n)).Wait();
  }
  std::unique_ptr<Request> IAllReduce(float* buf, size_t n) override {
    int64_t seq = g_->Arrive(rank_, OpKind::kAllReduceSum, buf, buf, n);
    return std::make_unique<CollectiveRequest>(g_, rank_, seq);
  }
  void ReduceScatter(const float* in, float* out, size_t n) override {
    CollectiveRequest(g_, rank_, g_->Arrive(rank_, OpKind::kReduceScatter, in, out, n)).Wait();
  }
  void AllGather(const float* in, float* out, size_t n) override {
    CollectiveRequest(g_, rank_, g_->Arrive(rank_, OpKind::kAllGather, in, out, n)).Wait();
  }
  std::unique_ptr<Request> ISend(const float* buf, size_t n, int peer, int tag) override {
    DT_CHECK(peer >= 0 && peer < size()) << "LocalComm: ISend to peer " << peer;
    g_->Send(rank_, peer, tag, buf, n);
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> IRecv(float* buf, size_t n, int peer, int tag) override {
    DT_CHECK(peer >= 0 && peer < size()) << "LocalComm: IRecv from peer " << peer;
    return std::make_unique<RecvRequest>(g_, peer, rank_, tag, buf, n);
  }
  void Barrier() override {
    CollectiveRequest(g_, rank_, g_->Arrive(rank_, OpKind::kBarrier, nullptr, nullptr, 0)).Wait();
  }
  void AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) override {
    CollectiveRequest(g_, rank_, g_->Arrive(rank_, OpKind::kAllToAllV, in, out, 0, send_counts, recv_counts))
        .Wait();
  }

 private:
  std::shared_ptr<LocalGroup> g_;
  int rank_;
};

}  // namespace

LocalGroupHandle::LocalGroupHandle(int n) : group_(std::make_shared<LocalGroup>(n)) {
  DT_CHECK_GT(n, 0);
}
std::unique_ptr<Comm> LocalGroupHandle::Member(int rank) const {
  DT_CHECK(rank >= 0 && rank < group_->size()) << "LocalGroupHandle: member " << rank;
  return std::make_unique<LocalComm>(group_, rank);
}
int LocalGroupHandle::size() const { return group_->size(); }

void RunRanks(int n, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

std::vector<Groups> MakeLocalGroups(const RankGrid& grid, int ep) {
  const int world = grid.world();
  std::vector<Groups> out(world);
  // Builds one kind of group: members(rank) lists the group of `rank` in
  // member order; one LocalGroup per distinct list (keyed by its first rank).
  auto build = [&](auto members, std::unique_ptr<Comm> Groups::*slot) {
    std::map<std::vector<int>, LocalGroupHandle> made;
    for (int r = 0; r < world; ++r) {
      std::vector<int> m = members(r);
      if (m.empty()) continue;
      auto it = made.find(m);
      if (it == made.end()) it = made.emplace(m, LocalGroupHandle(static_cast<int>(m.size()))).first;
      int idx = 0;
      while (m[idx] != r) ++idx;
      out[r].*slot = it->second.Member(idx);
    }
  };
  build([&](int) {
    std::vector<int> all(world);
    for (int i = 0; i < world; ++i) all[i] = i;
    return all;
  }, &Groups::world);
  build([&](int r) { return grid.Group(r, Dim::kTp); }, &Groups::tp);
  build([&](int r) { return grid.Group(r, Dim::kCp); }, &Groups::cp);
  build([&](int r) { return grid.Group(r, Dim::kDp); }, &Groups::dp);
  build([&](int r) { return grid.Group(r, Dim::kPp); }, &Groups::pp);
  build([&](int r) {
    std::vector<int> m;  // ranks sharing tp and pp, in world-rank order
    Coord c = grid.CoordOf(r);
    for (int q = 0; q < world; ++q) {
      Coord d = grid.CoordOf(q);
      if (d.tp == c.tp && d.pp == c.pp) m.push_back(q);
    }
    return m;
  }, &Groups::dp_cp);
  build([&](int r) { return grid.ExpertGroup(r, ep); }, &Groups::ep);
  build([&](int r) {
    std::vector<int> m;  // ranks holding the same experts, in world-rank order
    Coord c = grid.CoordOf(r);
    for (int q = 0; q < world; ++q) {
      Coord d = grid.CoordOf(q);
      if (d.tp == c.tp && d.pp == c.pp && d.dp % ep == c.dp % ep) m.push_back(q);
    }
    return m;
  }, &Groups::expert_dp);
  const int pp = grid.size(Dim::kPp);
  build([&](int r) {
    std::vector<int> m;
    Coord c = grid.CoordOf(r);
    if (pp == 1 || (c.pp != 0 && c.pp != pp - 1)) return m;
    Coord first = c, last = c;
    first.pp = 0;
    last.pp = pp - 1;
    return std::vector<int>{grid.RankOf(first), grid.RankOf(last)};
  }, &Groups::tied);
  for (int r = 0; r < world; ++r) {
    out[r].world_rank = r;
    out[r].coord = grid.CoordOf(r);
  }
  return out;
}

}  // namespace dt::rt
