#include "runtime/ckpt/checkpoint.h"

#include <cstring>
#include <set>

#include "base/check.h"
#include "runtime/ckpt/ckpt_format.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {
namespace {

constexpr int kTagSize = 7101, kTagData = 7102;

// Full tensor of `local` (this rank's shard of p), gathered over tp.
std::vector<float> GatherFull(const Param& p, const float* local, Comm* tp) {
  std::vector<float> full(static_cast<size_t>(FullNumel(p)));
  if (p.shard == ShardKind::kReplicated || tp == nullptr || tp->size() == 1) {
    DT_CHECK_EQ(p.numel, FullNumel(p)) << p.name;
    std::memcpy(full.data(), local, sizeof(float) * full.size());
    return full;
  }
  std::vector<float> all(static_cast<size_t>(p.numel) * tp->size());
  tp->AllGather(local, all.data(), static_cast<size_t>(p.numel));
  Param q = p;
  for (int r = 0; r < tp->size(); ++r) {
    q.tp_rank = r / p.tp_replicas;  // replicated shards: every copy holds the same values
    PlaceShard(q, all.data() + static_cast<size_t>(r) * p.numel, full.data());
  }
  return full;
}

// Byte serialisation of tensors, carried over the float-only Comm as one
// 16-bit value per float (exact).
void PutU64(std::string* b, uint64_t v) { b->append(reinterpret_cast<const char*>(&v), 8); }
uint64_t GetU64(const std::string& b, size_t* pos) {
  DT_CHECK_LE(*pos + 8, b.size()) << "checkpoint payload truncated";
  uint64_t v;
  std::memcpy(&v, b.data() + *pos, 8);
  *pos += 8;
  return v;
}

std::string Serialize(const std::vector<NamedTensor>& ts) {
  std::string b;
  PutU64(&b, ts.size());
  for (const NamedTensor& t : ts) {
    PutU64(&b, t.name.size());
    b += t.name;
    PutU64(&b, t.shape.size());
    for (int64_t d : t.shape) PutU64(&b, static_cast<uint64_t>(d));
    PutU64(&b, t.data.size());
    b.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  }
  return b;
}

std::vector<NamedTensor> Deserialize(const std::string& b) {
  size_t pos = 0;
  std::vector<NamedTensor> ts(GetU64(b, &pos));
  for (NamedTensor& t : ts) {
    size_t n = GetU64(b, &pos);
    t.name = b.substr(pos, n);
    pos += n;
    t.shape.resize(GetU64(b, &pos));
    for (int64_t& d : t.shape) d = static_cast<int64_t>(GetU64(b, &pos));
    t.data.resize(GetU64(b, &pos));
    DT_CHECK_LE(pos + t.data.size() * 4, b.size()) << "checkpoint payload truncated";
    std::memcpy(t.data.data(), b.data() + pos, t.data.size() * 4);
    pos += t.data.size() * 4;
  }
  return ts;
}

void SendBytes(Comm* c, const std::string& bytes, int peer) {
  const size_t n = (bytes.size() + 1) / 2;
  std::vector<float> words(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t lo = static_cast<unsigned char>(bytes[2 * i]);
    uint32_t hi = 2 * i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[2 * i + 1]) : 0;
    words[i] = static_cast<float>(lo | (hi << 8));
  }
  float header[4];
  for (int k = 0; k < 4; ++k) header[k] = static_cast<float>((bytes.size() >> (16 * k)) & 0xFFFF);
  c->ISend(header, 4, peer, kTagSize)->Wait();
  c->ISend(words.data(), n, peer, kTagData)->Wait();
}

std::string RecvBytes(Comm* c, int peer) {
  float header[4];
  c->IRecv(header, 4, peer, kTagSize)->Wait();
  uint64_t size = 0;
  for (int k = 0; k < 4; ++k) size |= static_cast<uint64_t>(header[k]) << (16 * k);
  std::vector<float> words((size + 1) / 2);
  c->IRecv(words.data(), words.size(), peer, kTagData)->Wait();
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    uint32_t w = static_cast<uint32_t>(words[i / 2]);
    bytes[i] = static_cast<char>(i % 2 == 0 ? (w & 0xFF) : (w >> 8));
  }
  return bytes;
}

json MetaOf(const TrainState& s) {
  return {{"step", s.step},           {"optimizer_step", s.optimizer_step},
          {"data_position", s.data_position}, {"data_seed", s.data_seed},
          {"rng_state", s.rng_state}, {"model", s.model}, {"plan", s.plan}};
}

}  // namespace

Status SaveCheckpoint(const std::string& root, const TrainState& state,
                      const std::vector<ChunkState>& chunks, const Groups& g) {
  DeviceSynchronize();  // parameter and moment memory: queued kernels first
  const bool gatherer = g.coord.dp == 0 && g.coord.cp == 0;
  // MoE expert Params are split over the EP group: the EP group of dp = 0
  // (dp < ep, cp = 0) holds each expert once; its members gather their
  // experts over TP and send them to its dp = 0 member.
  const int ep = g.ep ? g.ep->size() : 1;
  const bool expert_gatherer = g.coord.cp == 0 && g.coord.dp < ep;
  std::vector<NamedTensor> mine;
  if (gatherer || expert_gatherer) {
    for (const ChunkState& c : chunks) {
      for (const Param& p : c.store->params()) {
        if (!(p.expert ? expert_gatherer : gatherer)) continue;
        const std::pair<const char*, const float*> parts[3] = {
            {"param/", (c.values ? c.values->data() : c.store->values()) + p.offset},
            {"adam_m/", c.adam_m ? c.adam_m->data() + p.offset : nullptr},
            {"adam_v/", c.adam_v ? c.adam_v->data() + p.offset : nullptr}};
        for (const auto& [prefix, local] : parts) {
          if (local == nullptr) continue;
          std::vector<float> full = GatherFull(p, local, g.tp.get());
          if (g.coord.tp == 0) mine.push_back({prefix + p.name, p.full_shape, std::move(full)});
        }
      }
    }
  }
  if (ep > 1 && expert_gatherer && g.coord.tp == 0) {
    if (g.coord.dp != 0) {
      SendBytes(g.ep.get(), Serialize(mine), 0);
      mine.clear();
    } else {
      for (int s = 1; s < ep; ++s) {
        std::vector<NamedTensor> theirs = Deserialize(RecvBytes(g.ep.get(), s));
        for (NamedTensor& t : theirs) mine.push_back(std::move(t));
      }
    }
  }
  float failed = 0.0f;
  std::string error;
  if (gatherer && g.coord.tp == 0) {
    Comm* pp = g.pp.get();
    if (pp != nullptr && pp->rank() != 0) {
      SendBytes(pp, Serialize(mine), 0);
    } else {
      CheckpointContents contents;
      contents.step = state.step;
      contents.meta = MetaOf(state);
      std::set<std::string> seen;
      auto keep = [&](std::vector<NamedTensor>& ts) {
        for (NamedTensor& t : ts)
          if (seen.insert(t.name).second) contents.tensors.push_back(std::move(t));
      };
      keep(mine);
      for (int s = 1; pp != nullptr && s < pp->size(); ++s) {
        std::vector<NamedTensor> theirs = Deserialize(RecvBytes(pp, s));
        keep(theirs);
      }
      Status st = WriteCheckpoint(root, contents);
      if (!st.ok()) {
        failed = 1.0f;
        error = st.message();
      }
    }
  }
  if (g.world) g.world->AllReduce(&failed, 1, ReduceOp::kMax);
  if (failed == 0.0f) return Status::Ok();
  if (!error.empty()) return IoError(error);
  return IoError("checkpoint save to '" + root + "' failed on rank 0; see its error message");
}

StatusOr<TrainState> LoadCheckpoint(const std::string& path, const std::vector<ChunkState>& chunks) {
  DeviceSynchronize();  // parameter and moment memory: queued kernels first
  DT_ASSIGN_OR_RETURN(CheckpointContents c, ReadCheckpoint(path));
  TrainState s;
  try {
    // Integers only: nlohmann's get<int64_t> of a float casts it (undefined
    // behaviour outside int64), the bug the manifest fuzz harness found.
    for (const char* key : {"step", "optimizer_step", "data_position", "data_seed"})
      if (!c.meta.at(key).is_number_integer())
        return IoError("checkpoint '" + path + "' has malformed training state: meta field '" + key + "' is " +
                       c.meta.at(key).dump() + ", not an integer; restore the checkpoint or load an older step");
    s.step = c.meta.at("step").get<int64_t>();
    s.optimizer_step = c.meta.at("optimizer_step").get<int64_t>();
    s.data_position = c.meta.at("data_position").get<int64_t>();
    s.data_seed = c.meta.at("data_seed").get<uint64_t>();
    s.rng_state = c.meta.at("rng_state").get<std::string>();
    s.model = c.meta.value("model", json::object());
    s.plan = c.meta.value("plan", json::object());
  } catch (const json::exception& e) {
    return IoError("checkpoint '" + path + "' has malformed training state: " + e.what());
  }
  // One optimizer step and one data step per training step: the three
  // counters move together, so a disagreement means an edited or foreign
  // manifest (resuming would silently continue at the wrong place).
  auto field = [&](const char* name, int64_t v) -> Status {
    if (v < 0)
      return IoError("checkpoint '" + path + "' field 'meta." + name + "' is " + std::to_string(v) +
                     " (allowed: >= 0); restore the checkpoint or load an older step");
    if (v != c.step)
      return IoError("checkpoint '" + path + "' field 'meta." + name + "' is " + std::to_string(v) +
                     " but the checkpoint is of step " + std::to_string(c.step) +
                     " (they must be equal); restore the checkpoint or load an older step");
    return Status::Ok();
  };
  DT_RETURN_IF_ERROR(field("step", s.step));
  DT_RETURN_IF_ERROR(field("optimizer_step", s.optimizer_step));
  DT_RETURN_IF_ERROR(field("data_position", s.data_position));
  for (const ChunkState& ch : chunks) {
    ParamStore& store = *ch.store;
    if (ch.adam_m) ch.adam_m->assign(static_cast<size_t>(store.numel()), 0.0f);
    if (ch.adam_v) ch.adam_v->assign(static_cast<size_t>(store.numel()), 0.0f);
    if (ch.values) ch.values->assign(static_cast<size_t>(store.numel()), 0.0f);
    float* values = ch.values ? ch.values->data() : store.values();
    for (const Param& p : store.params()) {
      const std::pair<std::string, float*> parts[3] = {
          {"param/", values + p.offset},
          {"adam_m/", ch.adam_m ? ch.adam_m->data() + p.offset : nullptr},
          {"adam_v/", ch.adam_v ? ch.adam_v->data() + p.offset : nullptr}};
      for (const auto& [prefix, local] : parts) {
        if (local == nullptr) continue;
        const NamedTensor* t = c.Find(prefix + p.name);
        if (t == nullptr) {
          if (prefix == "param/")
            return NotFound("checkpoint '" + path + "' has no tensor '" + p.name +
                            "': it was saved for a different model");
          // SaveCheckpoint always stores both moments: resuming without them
          // would silently restart Adam from zero.
          return IoError("checkpoint '" + path + "' lacks the optimizer state '" + prefix + p.name +
                         "' the run needs; restore the checkpoint or load an older step");
        }
        if (t->shape != p.full_shape)
          return InvalidArgument("checkpoint '" + path + "' tensor '" + t->name +
                                 "' has a different shape than the model's parameter; "
                                 "it was saved for a different model");
        SliceShard(p, t->data.data(), local);
      }
    }
  }
  return s;
}

}  // namespace dt::rt
