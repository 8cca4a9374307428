// Tests of the checkpoint format (round trip, corruption, truncation,
// interrupted save), CRC-32, and resharding across plans.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "runtime/ckpt/checkpoint.h"
#include "runtime/ckpt/ckpt_format.h"
#include "runtime/ckpt/crc32.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/comm/local_comm.h"

#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {
namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/dt_ckpt_" + name;
  fs::remove_all(d);
  return d;
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Rewrites a step directory's manifest and (reseal) its CRC-32 sidecar, as a
// careful forger would: the cross-checks must catch what the checksum cannot.
void WriteManifest(const std::string& step_dir, const json& j, bool reseal) {
  const std::string text = j.dump(1);
  std::ofstream(step_dir + "/manifest.json", std::ios::trunc | std::ios::binary) << text;
  if (!reseal) return;
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x\n", Crc32(text.data(), text.size()));
  std::ofstream(step_dir + "/manifest.crc32", std::ios::trunc) << buf;
}

json ReadManifest(const std::string& step_dir) { return json::parse(ReadText(step_dir + "/manifest.json")); }

CheckpointContents Sample(int64_t step) {
  CheckpointContents c;
  c.step = step;
  c.meta = {{"note", "hello"}};
  c.tensors.push_back({"param/a", {2, 3}, {1, 2, 3, 4, 5, float(step)}});
  c.tensors.push_back({"param/b", {4}, {-1, -2, -3, -4}});
  return c;
}

TEST(Crc32, KnownValue) {
  EXPECT_EQ(Crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(Crc32("6789", 4, Crc32("12345", 5)), 0xCBF43926u);
}

TEST(CkptFormat, RoundTripAndLatestPointer) {
  const std::string root = FreshDir("roundtrip");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(1)).ok());
  ASSERT_TRUE(WriteCheckpoint(root, Sample(2)).ok());
  auto latest = LatestCheckpointDir(root);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(fs::path(*latest).filename(), "step-2");
  auto c = ReadCheckpoint(root);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 2);
  EXPECT_EQ(c->meta["note"], "hello");
  ASSERT_NE(c->Find("param/a"), nullptr);
  EXPECT_EQ(c->Find("param/a")->data, (std::vector<float>{1, 2, 3, 4, 5, 2}));
  EXPECT_EQ(c->Find("param/b")->shape, (std::vector<int64_t>{4}));
  auto old = ReadCheckpoint(root + "/step-1");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->Find("param/a")->data[5], 1.0f);
}

// ParseManifest + DecodeCheckpoint on the files' bytes (the fuzz harness's
// path) give what ReadCheckpoint gives; a wrong sidecar is refused.
TEST(CkptFormat, InMemoryParseMatchesReadCheckpoint) {
  const std::string root = FreshDir("inmemory");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(3)).ok());
  const std::string dir = root + "/step-3";
  const std::string text = ReadText(dir + "/manifest.json");
  auto m = ParseManifest(text, ReadText(dir + "/manifest.crc32"), dir + "/manifest.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->step, 3);
  EXPECT_EQ(m->blob, "tensors.bin");
  auto c = DecodeCheckpoint(*m, ReadText(dir + "/tensors.bin"), dir + "/tensors.bin");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto from_disk = ReadCheckpoint(dir);
  ASSERT_TRUE(from_disk.ok());
  ASSERT_EQ(c->tensors.size(), from_disk->tensors.size());
  for (size_t i = 0; i < c->tensors.size(); ++i) {
    EXPECT_EQ(c->tensors[i].name, from_disk->tensors[i].name);
    EXPECT_EQ(c->tensors[i].data, from_disk->tensors[i].data);
  }
  auto forged = ParseManifest(text, "00000000\n", dir + "/manifest.json");
  ASSERT_FALSE(forged.ok());
  EXPECT_NE(forged.status().message().find("CRC-32"), std::string::npos);
  auto short_blob = DecodeCheckpoint(*m, "abc", "b.bin");
  ASSERT_FALSE(short_blob.ok());
  EXPECT_NE(short_blob.status().message().find("'b.bin' is truncated"), std::string::npos);
}

TEST(CkptFormat, CorruptByteIsDetectedAndNamed) {
  const std::string root = FreshDir("corrupt");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(3)).ok());
  const std::string blob = root + "/step-3/tensors.bin";
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24 + 5);  // inside param/b (param/a is 24 bytes)
    f.put('\x7f');
  }
  auto c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kIoError);
  EXPECT_NE(c.status().message().find("param/b"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("tensors.bin"), std::string::npos);
}

TEST(CkptFormat, TruncatedBlobIsDetected) {
  const std::string root = FreshDir("truncated");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(4)).ok());
  fs::resize_file(root + "/step-4/tensors.bin", 30);
  auto c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("truncated"), std::string::npos) << c.status().message();
}

// Hostile manifests: offsets and shapes that overflow int64 arithmetic are
// refused as errors, never read out of bounds (issue: a 9223372036854775000
// offset ended in SIGSEGV).
TEST(CkptFormat, OverflowingManifestEntriesAreErrors) {
  const std::string root = FreshDir("overflow");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(5)).ok());
  const std::string manifest = root + "/step-5/manifest.json";
  std::string text;
  {
    std::ifstream f(manifest);
    text.assign(std::istreambuf_iterator<char>(f), {});
  }
  const json original = json::parse(text);
  auto edit = [&](auto change) {
    json j = original;
    change(j["tensors"][1]);
    WriteManifest(root + "/step-5", j, /*reseal=*/true);
    return ReadCheckpoint(root);
  };
  for (auto change : std::vector<std::function<void(json&)>>{
           [](json& t) { t["offset"] = 9223372036854775000LL; },
           [](json& t) { t["offset"] = -8; },
           [](json& t) { t["bytes"] = 9223372036854775000LL; },
           [](json& t) { t["shape"] = {4611686018427387904LL, 4}; t["bytes"] = 0; },
           [](json& t) { t["shape"] = {-4}; t["bytes"] = -16; },
           [](json& t) { t["shape"] = {3037000500LL, 3037000500LL}; },
           // Regression (tests/fuzz, tests/fuzz/corpus/manifest/float_*): numbers
           // that are not int64 were cast by nlohmann's get<int64_t> (UB).
           [](json& t) { t["shape"] = {1e30}; },
           [](json& t) { t["offset"] = 1e300; },
           [](json& t) { t["bytes"] = 18446744073709551615ULL; },
           [](json& t) { t["crc32"] = 4294967296LL; }}) {
    auto c = edit(change);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("param/b"), std::string::npos) << c.status().message();
  }
  json j = original;
  j["step"] = 1e300;
  WriteManifest(root + "/step-5", j, /*reseal=*/true);
  auto c = ReadCheckpoint(root + "/step-5");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("field 'step' is 1e+300, not a 64-bit integer"), std::string::npos)
      << c.status().message();
}

// Issue 13: the manifest is checksummed; a changed byte (here the step) is
// refused instead of resuming at the wrong place, and so is a missing sidecar.
TEST(CkptFormat, EditedManifestFailsItsChecksum) {
  const std::string root = FreshDir("edited_manifest");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(6)).ok());
  ASSERT_TRUE(ReadCheckpoint(root).ok());
  const std::string dir = root + "/step-6";
  std::string text = ReadText(dir + "/manifest.json");
  const size_t at = text.find("\"note\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 6, "\"nota\"");
  std::ofstream(dir + "/manifest.json", std::ios::trunc | std::ios::binary) << text;
  auto c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kIoError);
  EXPECT_NE(c.status().message().find("manifest.json' fails its CRC-32"), std::string::npos) << c.status().message();
  fs::remove(dir + "/manifest.crc32");
  c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("manifest.crc32' is missing"), std::string::npos) << c.status().message();
}

// Even with a resealed checksum: the step must match the directory, and a
// removed entry leaves a hole in the blob that is named.
TEST(CkptFormat, ResealedManifestIsCrossCheckedAgainstBlob) {
  const std::string root = FreshDir("resealed");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(7)).ok());
  const std::string dir = root + "/step-7";
  const json original = ReadManifest(dir);
  json j = original;
  j["step"] = 9;
  WriteManifest(dir, j, true);
  auto c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("field 'step' is 9 but its directory is 'step-7'"), std::string::npos)
      << c.status().message();
  j = original;
  j["tensors"].erase(0);  // param/a gone: param/b no longer starts at byte 0
  WriteManifest(dir, j, true);
  c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'param/b'"), std::string::npos) << c.status().message();
  j = original;
  j["tensors"].erase(1);  // the last entry gone: the blob has bytes nobody owns
  WriteManifest(dir, j, true);
  c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("an entry was removed"), std::string::npos) << c.status().message();
  j = original;
  j["tensors"][1] = j["tensors"][0];
  j["tensors"][1]["offset"] = 24;
  WriteManifest(dir, j, true);
  c = ReadCheckpoint(root);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("appears twice"), std::string::npos) << c.status().message();
  WriteManifest(dir, original, true);
  EXPECT_TRUE(ReadCheckpoint(root).ok());
}

// A lost "latest" pointer falls back to the newest complete step directory;
// partial step-*.tmp/ directories are removed by the next save; pruning keeps
// the newest N.
TEST(CkptFormat, LostPointerLitterAndPruning) {
  const std::string root = FreshDir("lost");
  for (int step : {1, 2, 3}) ASSERT_TRUE(WriteCheckpoint(root, Sample(step)).ok());
  fs::remove(root + "/latest");
  fs::create_directories(root + "/step-9.tmp");  // a save that died: never used
  auto c = ReadCheckpoint(root);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 3);
  EXPECT_EQ(CompleteCheckpointSteps(root), (std::vector<int64_t>{1, 2, 3}));
  ASSERT_TRUE(WriteCheckpoint(root, Sample(4)).ok());
  EXPECT_FALSE(fs::exists(root + "/step-9.tmp"));
  ASSERT_TRUE(PruneCheckpoints(root, 2).ok());
  EXPECT_EQ(CompleteCheckpointSteps(root), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ReadCheckpoint(root)->step, 4);
  EXPECT_FALSE(PruneCheckpoints(root, 0).ok());
  const std::string empty = FreshDir("empty");
  fs::create_directories(empty);
  EXPECT_EQ(ReadCheckpoint(empty).status().code(), StatusCode::kNotFound);
}

TEST(CkptFormat, InterruptedSaveLeavesPreviousCheckpoint) {
  const std::string root = FreshDir("interrupted");
  ASSERT_TRUE(WriteCheckpoint(root, Sample(5)).ok());
  // A crash mid-save of step 6: its tmp directory holds a partial blob and
  // no manifest; "latest" was never updated.
  fs::create_directories(root + "/step-6.tmp");
  std::ofstream(root + "/step-6.tmp/tensors.bin") << "partial";
  auto c = ReadCheckpoint(root);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 5);
  // The next save of step 6 replaces the leftover.
  ASSERT_TRUE(WriteCheckpoint(root, Sample(6)).ok());
  EXPECT_FALSE(fs::exists(root + "/step-6.tmp"));
  EXPECT_EQ(ReadCheckpoint(root)->step, 6);
}

TEST(CkptFormat, MissingCheckpointIsNotFound) {
  auto c = ReadCheckpoint(FreshDir("empty"));
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

Param P(const std::string& name, std::vector<int64_t> full, ShardKind kind, int r, int tp) {
  return testing_util::MakeParam(name, std::move(full), kind, r, tp);
}

TEST(Reshard, SliceAndPlaceAreInverse) {
  std::vector<float> full(12);
  for (int i = 0; i < 12; ++i) full[i] = float(i);
  Param col = P("w", {3, 4}, ShardKind::kSplitDim1, 1, 2);
  col.numel = 6;
  std::vector<float> local(6);
  SliceShard(col, full.data(), local.data());
  EXPECT_EQ(local, (std::vector<float>{2, 3, 6, 7, 10, 11}));
  Param row = P("w", {4, 3}, ShardKind::kSplitDim0, 1, 2);
  row.numel = 6;
  SliceShard(row, full.data(), local.data());
  EXPECT_EQ(local, (std::vector<float>{6, 7, 8, 9, 10, 11}));
  std::vector<float> back(12, -1.f);
  PlaceShard(row, local.data(), back.data());
  EXPECT_EQ(back[6], 6.f);
  EXPECT_EQ(back[5], -1.f);
}

// The model of the distributed tests: two stages, a tied embedding.
ParamStore Store(int stage, int pp, int tp_rank, int tp) {
  ParamStore s;
  if (stage == 0 || pp > 1) s.Add(P("embed.weight", {8, 4}, ShardKind::kSplitDim0, tp_rank, tp));
  if (stage == 0) {
    s.Add(P("layers.0.fc1.weight", {6, 4}, ShardKind::kSplitDim0, tp_rank, tp));
    s.Add(P("layers.0.fc2.weight", {4, 6}, ShardKind::kSplitDim1, tp_rank, tp));
    s.Add(P("layers.0.norm.weight", {4}, ShardKind::kReplicated, tp_rank, tp));
  }
  if (stage == pp - 1) s.Add(P("final_norm.weight", {4}, ShardKind::kReplicated, tp_rank, tp));
  if (pp > 1 && stage == 0) s.params()[0].tied = true;
  s.Finalize();
  return s;
}

float Value(const std::string& name, int64_t i) { return float(name.size()) * 100.f + float(i); }

void FillFromFull(ParamStore& s, std::vector<float>* m, std::vector<float>* v) {
  m->assign(s.numel(), 0.f);
  v->assign(s.numel(), 0.f);
  for (const Param& p : s.params()) {
    std::vector<float> full(FullNumel(p));
    for (size_t i = 0; i < full.size(); ++i) full[i] = Value(p.name, i);
    SliceShard(p, full.data(), s.values() + p.offset);
    for (float& x : full) x *= 0.5f;
    SliceShard(p, full.data(), m->data() + p.offset);
    for (float& x : full) x *= 0.5f;
    SliceShard(p, full.data(), v->data() + p.offset);
  }
}

TEST(Checkpoint, SavedUnderTp2Pp2Dp2LoadsIntoOneRankAndBack) {
  const std::string root = FreshDir("dist");
  auto grid = RankGrid::Create(2, 1, 2, 2);
  ASSERT_TRUE(grid.ok());
  std::vector<Groups> groups = MakeLocalGroups(*grid);
  std::vector<Status> results(8);
  RunRanks(8, [&](int r) {
    Groups& g = groups[r];
    ParamStore s = Store(g.coord.pp, 2, g.coord.tp, 2);
    std::vector<float> m, v;
    FillFromFull(s, &m, &v);
    TrainState st;
    st.step = 7;
    st.optimizer_step = 7;
    st.data_position = 7;
    st.data_seed = 99;
    st.rng_state = "rng-text";
    results[r] = SaveCheckpoint(root, st, {{&s, &m, &v}}, g);
  });
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.message();

  // TP=1, PP=1: full tensors.
  ParamStore one = Store(0, 1, 0, 1);
  std::vector<float> m1, v1;
  auto st = LoadCheckpoint(root, {{&one, &m1, &v1}});
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->step, 7);
  EXPECT_EQ(st->data_seed, 99u);
  EXPECT_EQ(st->rng_state, "rng-text");
  for (const Param& p : one.params())
    for (int64_t i = 0; i < p.numel; ++i) {
      ASSERT_EQ(one.values()[p.offset + i], Value(p.name, i)) << p.name << "[" << i << "]";
      ASSERT_EQ(m1[p.offset + i], 0.5f * Value(p.name, i)) << p.name;
      ASSERT_EQ(v1[p.offset + i], 0.25f * Value(p.name, i)) << p.name;
    }

  // TP=2 again (rank 1 of the last stage): the shards come back.
  ParamStore again = Store(1, 2, 1, 2), expect = Store(1, 2, 1, 2);
  std::vector<float> m2, v2, em, ev;
  ASSERT_TRUE(LoadCheckpoint(root, {{&again, &m2, &v2}}).ok());
  FillFromFull(expect, &em, &ev);
  for (int64_t i = 0; i < again.numel(); ++i) ASSERT_EQ(again.values()[i], expect.values()[i]);
  EXPECT_EQ(m2, em);
}

// A checkpoint holding Store(0, 1, 0, 1)'s tensors with the given meta;
// `skip` names one tensor to leave out.
std::string WriteStoreCheckpoint(const std::string& name, const json& meta, const std::string& skip = "") {
  const std::string root = FreshDir(name);
  ParamStore s = Store(0, 1, 0, 1);
  std::vector<float> m, v;
  FillFromFull(s, &m, &v);
  CheckpointContents c;
  c.step = 7;
  c.meta = meta;
  for (const Param& p : s.params())
    for (const auto& [prefix, base] : {std::pair<std::string, const float*>{"param/", s.values()},
                                       {"adam_m/", m.data()}, {"adam_v/", v.data()}}) {
      if (prefix + p.name == skip) continue;
      c.tensors.push_back({prefix + p.name, p.full_shape,
                           std::vector<float>(base + p.offset, base + p.offset + p.numel)});
    }
  EXPECT_TRUE(WriteCheckpoint(root, c).ok());
  return root;
}

json Meta(int64_t step, int64_t optimizer_step, int64_t data_position) {
  return {{"step", step}, {"optimizer_step", optimizer_step}, {"data_position", data_position},
          {"data_seed", 0}, {"rng_state", ""}};
}

// Issue 13: optimizer_step -5 aborted the resume (rc 134); a data position
// other than the step resumed silently on other data; a missing Adam moment
// resumed silently with zero moments. All are refused, naming the entry.
TEST(Checkpoint, InconsistentTrainStateIsRefused) {
  ParamStore s = Store(0, 1, 0, 1);
  std::vector<float> m, v;
  ASSERT_TRUE(LoadCheckpoint(WriteStoreCheckpoint("state_ok", Meta(7, 7, 7)), {{&s, &m, &v}}).ok());
  struct Case {
    json meta;
    std::string says;
  };
  for (const Case& k : {Case{Meta(7, -5, 7), "'meta.optimizer_step' is -5 (allowed: >= 0)"},
                        Case{Meta(7, 7, 3), "'meta.data_position' is 3 but the checkpoint is of step 7"},
                        Case{Meta(8, 8, 8), "'meta.step' is 8 but the checkpoint is of step 7"}}) {
    auto st = LoadCheckpoint(WriteStoreCheckpoint("state_bad", k.meta), {{&s, &m, &v}});
    ASSERT_FALSE(st.ok()) << k.meta.dump();
    EXPECT_EQ(st.status().code(), StatusCode::kIoError);
    EXPECT_NE(st.status().message().find(k.says), std::string::npos) << st.status().message();
  }
}

TEST(Checkpoint, MissingAdamMomentIsRefused) {
  ParamStore s = Store(0, 1, 0, 1);
  std::vector<float> m, v;
  const std::string root = WriteStoreCheckpoint("no_moment", Meta(7, 7, 7), "adam_v/layers.0.fc2.weight");
  auto st = LoadCheckpoint(root, {{&s, &m, &v}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("lacks the optimizer state 'adam_v/layers.0.fc2.weight'"), std::string::npos)
      << st.status().message();
  // A loader that asks for no moments (weights only) is fine.
  EXPECT_TRUE(LoadCheckpoint(root, {{&s, nullptr, nullptr}}).ok());
}

TEST(Checkpoint, WrongModelIsRejected) {
  const std::string root = FreshDir("wrong_model");
  CheckpointContents c = Sample(1);
  c.meta = {{"step", 1}, {"optimizer_step", 1}, {"data_position", 1}, {"data_seed", 0}, {"rng_state", ""}};
  ASSERT_TRUE(WriteCheckpoint(root, c).ok());
  ParamStore s = Store(0, 1, 0, 1);
  auto st = LoadCheckpoint(root, {{&s, nullptr, nullptr}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("embed.weight"), std::string::npos) << st.status().message();
}

}  // namespace
}  // namespace dt::rt
