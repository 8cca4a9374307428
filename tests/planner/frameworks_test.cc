// planner/frameworks: every option name dtplan emits is one of the
// framework's real names (tests/planner/framework_names/, extracted from the
// frameworks' sources at the versions named there); Megatron export and
// import are inverses; the framework rules refuse what each cannot run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "planner/frameworks/export.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"
#include "planner/spec/model_spec.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::Gpt;
using testing_models::Llama8B;

std::set<std::string> Names(const std::string& file) {
  std::ifstream in(std::string(DT_SOURCE_DIR) + "/tests/planner/framework_names/" + file);
  EXPECT_TRUE(in.good()) << file;
  std::set<std::string> s;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') s.insert(line);
  EXPECT_GT(s.size(), 20u) << file;
  return s;
}

PlanSpec Plan(const ModelSpec& m, int dp, int tp, int pp, int vpp, int mbs, int nmb, Schedule s,
              Recompute rc, bool sp, int zero, int cp = 1) {
  PlanSpec p;
  p.dp = dp; p.tp = tp; p.pp = pp; p.vpp = vpp; p.cp = cp;
  p.micro_batch = mbs; p.num_microbatches = nmb; p.seq_length = m.seq_length;
  p.schedule = s; p.recompute = rc; p.sequence_parallel = sp; p.zero_stage = zero;
  p.layers_per_chunk = EvenSplit(m.num_layers, pp * vpp);
  return p;
}

PlanFile File(const ModelSpec& m, const PlanSpec& p, const std::string& device = "gpu") {
  PlanFile f;
  f.model = m;
  f.plan = p;
  f.cluster.device = device;
  f.cluster.gpus_per_node = 8;
  f.cluster.nodes = p.world() / 8 > 0 ? p.world() / 8 : 1;
  if (p.world() < 8) f.cluster.gpus_per_node = p.world();
  return f;
}

// A spread of plans over models (GPT-3-like with uneven splits, Llama with
// GQA and untied head) and every plan dimension.
std::vector<PlanFile> Sample() {
  const ModelSpec gpt = Gpt(12288, 96, 96);
  ModelSpec odd = Gpt(4096, 32, 30);  // 30 layers: uneven over pp 4
  odd.vocab = 50257;
  ModelSpec llama = Llama8B();
  llama.rope_theta = 500000.0;  // Llama 3's RoPE base and RMSNorm epsilon
  llama.rms_norm_eps = 1e-6;
  std::vector<PlanFile> v;
  v.push_back(File(gpt, Plan(gpt, 8, 8, 8, 1, 1, 16, Schedule::k1F1B, Recompute::kFull, true, 1)));
  v.push_back(File(gpt, Plan(gpt, 4, 4, 8, 3, 2, 16, Schedule::kInterleaved, Recompute::kSelective, false, 2)));
  v.push_back(File(gpt, Plan(gpt, 16, 4, 2, 1, 1, 4, Schedule::k1F1B, Recompute::kNone, true, 3)));
  v.push_back(File(odd, Plan(odd, 2, 2, 4, 1, 1, 8, Schedule::k1F1B, Recompute::kNone, false, 0)));
  v.push_back(File(odd, Plan(odd, 2, 1, 4, 2, 1, 8, Schedule::kInterleaved, Recompute::kFull, false, 1)));
  v.push_back(File(llama, Plan(llama, 4, 2, 1, 1, 2, 4, Schedule::k1F1B, Recompute::kSelective, true, 3)));
  v.push_back(File(llama, Plan(llama, 2, 4, 2, 1, 1, 8, Schedule::k1F1B, Recompute::kFull, true, 2, 2)));
  v.push_back(File(llama, Plan(llama, 8, 1, 1, 1, 1, 1, Schedule::k1F1B, Recompute::kNone, false, 0)));
  PlanFile cpu = File(Gpt(64, 4, 4), Plan(Gpt(64, 4, 4), 2, 1, 1, 1, 1, 2, Schedule::k1F1B, Recompute::kNone, false, 1), "cpu");
  cpu.plan.flash_attention = false;
  cpu.plan.dropout = false;
  v.push_back(cpu);
  for (auto& f : v) EXPECT_TRUE(Validate(f.plan, f.model, "sample").ok()) << Describe(f.plan);
  return v;
}

// Exported flags as the argument words of a command line.
std::vector<std::string> Argv(const std::vector<CliFlag>& flags) {
  std::vector<std::string> words;
  for (const CliFlag& c : flags) {
    words.push_back(c.name);
    if (!c.value.empty()) words.push_back(c.value);
  }
  return words;
}

TEST(Frameworks, MegatronFlagsAreMegatronLmArguments) {
  const std::set<std::string> real = Names("megatron_core_v0.14.0_flags.txt");
  int exported = 0;
  for (const PlanFile& f : Sample()) {
    auto flags = MegatronArgs(f.model, f.plan, f.cluster.device != "cpu");
    ASSERT_TRUE(flags.ok()) << flags.status().message();
    for (const CliFlag& c : *flags) EXPECT_TRUE(real.count(c.name)) << c.name << " is not a Megatron-LM argument";
    ++exported;
  }
  EXPECT_EQ(exported, 9);
  // The negative control: the table really is a list of Megatron-LM names.
  EXPECT_FALSE(real.count("--tensor-parallel-size"));
  EXPECT_TRUE(real.count("--tensor-model-parallel-size"));
}

// section.key of every "key = value" line of a TOML text.
std::vector<std::string> TomlKeys(const std::string& toml) {
  std::vector<std::string> keys;
  std::istringstream in(toml);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ' ' || line[0] == ']') continue;
    if (line[0] == '[') { section = line.substr(1, line.find(']') - 1); continue; }
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos) keys.push_back(section + "." + line.substr(0, eq));
  }
  return keys;
}

TEST(Frameworks, TorchtitanKeysAreJobConfigFields) {
  const std::set<std::string> real = Names("torchtitan_v0.2.2_job_config.txt");
  int exported = 0;
  for (const PlanFile& f : Sample()) {
    auto ex = ExportPlan(Framework::kTorchtitan, f);
    if (!ex.ok()) continue;  // GPT models, TP without SP, ZeRO-1 ...
    const auto keys = TomlKeys(ex->config);
    EXPECT_GT(keys.size(), 8u);
    for (const auto& k : keys) EXPECT_TRUE(real.count(k)) << k << " is not a torchtitan job config field";
    ++exported;
  }
  EXPECT_GE(exported, 2);
}

void JsonPaths(const json& j, const std::string& prefix, std::vector<std::string>* out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    out->push_back(path);
    if (it.value().is_object()) JsonPaths(it.value(), path, out);
  }
}

TEST(Frameworks, DeepSpeedKeysAreConfigKeys) {
  const std::set<std::string> real = Names("deepspeed_38327e0_config_keys.txt");
  int exported = 0;
  for (PlanFile f : Sample()) {
    // DeepSpeed reduces gradients after the backward unless ZeRO runs
    // without a pipeline: a plan that says otherwise is refused by name.
    const bool overlaps = DeepSpeedOverlapsGradReduce(f.plan.zero_stage, f.plan.pp);
    if (f.plan.dp > 1 && !overlaps) {
      bool named = false;
      for (const std::string& why : Inexpressible(Framework::kDeepSpeed, f.model, f.plan))
        named = named || why.find("gradient reduction") != std::string::npos;
      EXPECT_TRUE(named) << Describe(f.plan);
      EXPECT_FALSE(ExportPlan(Framework::kDeepSpeed, f).ok()) << Describe(f.plan);
      f.plan.overlap_grad_reduce = false;  // as --framework deepspeed prices it
    }
    auto ex = ExportPlan(Framework::kDeepSpeed, f);
    if (!ex.ok()) continue;
    std::vector<std::string> paths;
    JsonPaths(json::parse(ex->config), "", &paths);
    for (const auto& k : paths) EXPECT_TRUE(real.count(k)) << k << " is not a DeepSpeed config key";
    const json j = json::parse(ex->config);
    EXPECT_EQ(j["train_batch_size"].get<int64_t>(), f.plan.global_batch());
    if (j["zero_optimization"].contains("overlap_comm")) {
      EXPECT_EQ(j["zero_optimization"]["overlap_comm"].get<bool>(), f.plan.overlap_grad_reduce);
    }
    EXPECT_EQ(j["train_batch_size"].get<int64_t>(), j["train_micro_batch_size_per_gpu"].get<int64_t>() *
                                                       j["gradient_accumulation_steps"].get<int64_t>() * f.plan.dp);
    ++exported;
  }
  EXPECT_GE(exported, 3);
}

// The "must show": for every bundled example (examples/models/*.json)
// the best plan of --framework X on a cluster of the model's size exports,
// and every option name of the export is X's own (the same name lists as
// above). torchtitan runs Llama models only: for the GPT examples the search
// finds no torchtitan plan and says why.
TEST(Frameworks, BestPlansOfEveryBundledExampleExportWithRealNames) {
  const std::set<std::string> megatron = Names("megatron_core_v0.14.0_flags.txt");
  const std::set<std::string> titan = Names("torchtitan_v0.2.2_job_config.txt");
  const std::set<std::string> deepspeed = Names("deepspeed_38327e0_config_keys.txt");
  auto hw = LoadProfile("A100-SXM4-80GB");
  ASSERT_TRUE(hw.ok());
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(DT_SOURCE_DIR) + "/examples/models"))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 9u);
  int exported = 0, titan_llama = 0;
  for (const std::string& file : files) {
    auto m = LoadModel(file);
    ASSERT_TRUE(m.ok()) << m.status().message();
    // Nodes of 8 A100s: enough for the weights and optimizer state (~18 B per
    // parameter, a quarter of each GPU), at least one node.
    ClusterSpec c;
    c.gpus_per_node = 8;
    const double gpus = m->TotalParams() * 18.0 / (0.25 * 80e9);
    c.nodes = 1;
    while (c.nodes * 8 < gpus) c.nodes *= 2;
    for (Framework f : {Framework::kMegatron, Framework::kTorchtitan, Framework::kDeepSpeed}) {
      SCOPED_TRACE(file + " --framework " + ToString(f) + " on " + std::to_string(c.nodes) + " x 8");
      SearchConstraints k;
      k.seq_length = m->seq_length;
      k.global_batch = 8LL * c.world();
      k.framework = f;
      k.grad_bytes = FrameworkGradBytes(f, true);
      SearchOptions so;
      so.top = 1;
      auto r = SearchPlans(*m, c, *hw, k, so);
      const bool llama = m->family == ModelFamily::kLlama;
      // torchtitan: Llama only; MoE (mixtral-tiny): Megatron only (framework.cc).
      if ((f == Framework::kTorchtitan && !llama) || (m->moe() && f != Framework::kMegatron)) {
        EXPECT_TRUE(!r.ok() || r->top.empty());
        continue;
      }
      ASSERT_TRUE(r.ok()) << r.status().message();
      ASSERT_FALSE(r->top.empty());
      PlanFile pf;
      pf.model = *m;
      pf.cluster = c;
      pf.plan = r->top[0].plan;
      auto ex = ExportPlan(f, pf);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      if (f == Framework::kMegatron) {
        auto flags = MegatronArgs(pf.model, pf.plan, true);
        ASSERT_TRUE(flags.ok());
        for (const CliFlag& fl : *flags) EXPECT_TRUE(megatron.count(fl.name)) << fl.name;
      } else if (f == Framework::kTorchtitan) {
        const auto keys = TomlKeys(ex->config);
        EXPECT_GT(keys.size(), 8u);
        for (const auto& key : keys) EXPECT_TRUE(titan.count(key)) << key;
        ++titan_llama;
      } else {
        std::vector<std::string> paths;
        JsonPaths(json::parse(ex->config), "", &paths);
        for (const auto& key : paths) EXPECT_TRUE(deepspeed.count(key)) << key;
      }
      ++exported;
    }
  }
  EXPECT_GE(titan_llama, 4);  // llama-tiny, Llama 3 8B / 70B / 405B
  EXPECT_GE(exported, 2 * 9 + 4);
}

void ExpectSamePlan(const PlanSpec& a, const PlanSpec& b) {
  EXPECT_EQ(ToJson(a).dump(), ToJson(b).dump());
}

TEST(Frameworks, MegatronExportThenImportIsTheSamePlan) {
  for (const PlanFile& f : Sample()) {
    auto ex = ExportPlan(Framework::kMegatron, f);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    // The whole printed text, launch lines included, as a user would paste it.
    auto words = SplitCommandLine(ex->config + ex->launch);
    ASSERT_TRUE(words.ok());
    auto job = ImportMegatron(*words, 0, f.model.name);
    ASSERT_TRUE(job.ok()) << Describe(f.plan) << ": " << job.status().message();
    PlanSpec want = f.plan;
    want.grad_bytes = 0;
    // A model without dropout ignores the plan's flag; Megatron spells it
    // as dropout 0, which imports as false.
    if (!f.model.uses_dropout()) want.dropout = false;
    ExpectSamePlan(job->plan, want);
    EXPECT_EQ(job->launcher_nodes * job->launcher_gpus_per_node, f.plan.world());
    const ModelSpec& m = job->model;
    EXPECT_EQ(m.family, f.model.family);
    EXPECT_EQ(m.num_layers, f.model.num_layers);
    EXPECT_EQ(m.hidden, f.model.hidden);
    EXPECT_EQ(m.heads, f.model.heads);
    EXPECT_EQ(m.kv_heads, f.model.kv_heads);
    EXPECT_EQ(m.ffn_hidden, f.model.ffn_hidden);
    EXPECT_EQ(m.tied_embeddings, f.model.tied_embeddings);
    EXPECT_DOUBLE_EQ(m.rms_norm_eps, f.model.rms_norm_eps);  // dtrun trains with these
    if (!f.model.learned_positions()) {
      EXPECT_DOUBLE_EQ(m.rope_theta, f.model.rope_theta);
    }
    EXPECT_EQ(m.rope_scaled, f.model.rope_scaled);
    EXPECT_EQ(m.TotalParams() - static_cast<int64_t>(m.vocab) * m.hidden * (m.tied_embeddings ? 1 : 2),
              f.model.TotalParams() - static_cast<int64_t>(f.model.vocab) * f.model.hidden * (f.model.tied_embeddings ? 1 : 2));
    // The vocabulary comes back as Megatron trains it: padded to a multiple of tp only.
    EXPECT_EQ(m.vocab, MegatronPaddedVocab(f.model.vocab, 1, f.plan.tp));
    EXPECT_EQ(job->bf16, f.cluster.device != "cpu");
  }
}

// A plan priced with cuDNN's attention curve exports as Transformer Engine's
// fused backend by name, and a job that names it imports priced with that
// curve (auto and flash keep the profile's default rate).
TEST(Frameworks, MegatronFusedAttentionBackendIsTheCudnnKernel) {
  int checked = 0;
  for (PlanFile f : Sample()) {
    if (!f.plan.flash_attention || f.cluster.device == "cpu") continue;
    for (bool cudnn : {false, true}) {
      f.plan.cudnn_attention = cudnn;
      auto ex = ExportPlan(Framework::kMegatron, f);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      EXPECT_NE(ex->config.find(cudnn ? "--attention-backend fused" : "--attention-backend auto"), std::string::npos)
          << ex->config;
      auto words = SplitCommandLine(ex->config + ex->launch);
      ASSERT_TRUE(words.ok());
      auto job = ImportMegatron(*words, 0, f.model.name);
      ASSERT_TRUE(job.ok()) << job.status().message();
      EXPECT_EQ(job->plan.cudnn_attention, cudnn);
      ++checked;
    }
  }
  EXPECT_GE(checked, 4);
}

std::string ReadFile(const std::string& rel) {
  std::ifstream in(std::string(DT_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The flags of a command line, name -> value ("" for booleans).
std::map<std::string, std::string> FlagMap(const std::vector<std::string>& words) {
  std::map<std::string, std::string> m;
  std::string last;
  for (const auto& w : words) {
    if (w.rfind("--", 0) == 0) { last = w; m[w] = ""; }
    else if (!last.empty()) m[last] = m[last].empty() ? w : m[last] + " " + w;
  }
  return m;
}

TEST(Frameworks, Gpt3_175bMegatronJobRoundTrips) {
  auto words = SplitCommandLine(ReadFile("tests/cli/megatron/gpt3_175b_args.sh"));
  ASSERT_TRUE(words.ok());
  auto job = ImportMegatron(*words, 0, "gpt3");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->launcher_nodes, 16);
  EXPECT_EQ(job->launcher_gpus_per_node, 8);
  // No --cross-entropy-loss-fusion: Megatron-LM's unfused loss.
  EXPECT_EQ(Describe(job->plan), "dp=1 tp=8 pp=16 mbs=1 m=1536 1f1b rc=none zero0 unfused-ce");
  EXPECT_FALSE(job->plan.cross_entropy_fusion);
  EXPECT_EQ(job->model.vocab, 51200);  // GPT-2 BPE 50257 padded to 128 x tp
  EXPECT_NEAR(job->model.TotalParams() / 1e9, 175.0, 0.5);
  EXPECT_TRUE(job->plan.flash_attention);
  EXPECT_TRUE(job->plan.dropout);  // Megatron's default 0.1
  // Export, then compare flag by flag with the job's own command.
  auto flags = MegatronArgs(job->model, job->plan, true);
  ASSERT_TRUE(flags.ok());
  const auto original = FlagMap(*words);
  int compared = 0;
  for (const CliFlag& c : *flags) {
    auto it = original.find(c.name);
    if (it == original.end()) continue;
    EXPECT_EQ(it->second, c.value) << c.name;
    ++compared;
  }
  EXPECT_GE(compared, 9);  // layers, hidden, heads, seq, positions, mbs, gbs, tp, pp, bf16
  // Nothing the job says about the model or the plan is lost: every flag of
  // pretrain_gpt.py that import did not set aside as harmless (lr, data,
  // logging, the tokenizer files) comes back from export, same value.
  std::vector<std::string> script_words;
  bool in_script = false;
  for (const std::string& w : *words) {
    if (in_script) script_words.push_back(w);
    in_script |= w == "pretrain_gpt.py";
  }
  int plan_flags = 0;
  std::map<std::string, std::string> exported;
  for (const CliFlag& c : *flags) exported[c.name] = c.value;
  for (const auto& [name, value] : FlagMap(script_words)) {
    if (std::count(job->ignored.begin(), job->ignored.end(), name)) continue;
    ASSERT_TRUE(exported.count(name)) << name << " " << value << " is lost by import -> export";
    EXPECT_EQ(exported[name], value) << name;
    ++plan_flags;
  }
  EXPECT_EQ(plan_flags, 11);  // the 10 above and --attention-backend
  // And the exported flags import to the same job.
  const std::vector<std::string> again = Argv(*flags);
  auto job2 = ImportMegatron(again, 128, "gpt3");
  ASSERT_TRUE(job2.ok()) << job2.status().message();
  ExpectSamePlan(job2->plan, job->plan);
  EXPECT_EQ(ToJson(job2->model).dump(), ToJson(job->model).dump());
}

// Megatron-core's --account-for-embedding/loss-in-pipeline-split (the
// Megatron-Bridge Qwen3-235B-A22B recipes set both): 94 layers + embedding +
// loss = 96 slots over pp 8 x vpp 4 chunks of 3; the first and the last chunk
// hold 2 real layers. Exported as the explicit layout, which imports back.
TEST(Frameworks, MegatronPipelineSplitCountingEmbeddingAndLoss) {
  const std::vector<std::string> base = {
      "--num-layers", "94", "--hidden-size", "512", "--num-attention-heads", "8", "--seq-length", "256",
      "--micro-batch-size", "1", "--global-batch-size", "64", "--vocab-size", "1024", "--swiglu",
      "--normalization", "RMSNorm", "--disable-bias-linear", "--pipeline-model-parallel-size", "8",
      "--num-virtual-stages-per-pipeline-rank", "4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> w = base;
    w.insert(w.end(), extra.begin(), extra.end());
    return ImportMegatron(w, 8, "qwen");
  };
  auto both = with({"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"});
  ASSERT_TRUE(both.ok()) << both.status().message();
  ASSERT_EQ(both->plan.layers_per_chunk.size(), 32u);
  EXPECT_EQ(both->plan.vpp, 4);
  EXPECT_EQ(both->plan.layers_per_chunk.front(), 2);
  EXPECT_EQ(both->plan.layers_per_chunk.back(), 2);
  for (size_t c = 1; c + 1 < 32; ++c) EXPECT_EQ(both->plan.layers_per_chunk[c], 3) << c;
  EXPECT_TRUE(Validate(both->plan, both->model, "imported").ok());
  auto flags = MegatronArgs(both->model, both->plan, true);
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  const std::vector<std::string> again = Argv(*flags);
  auto back = ImportMegatron(again, 8, "qwen");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->plan.layers_per_chunk, both->plan.layers_per_chunk);
  // 94 + 1 = 95 slots do not split into 32 chunks: refused, as Megatron-LM does.
  auto odd = with({"--account-for-loss-in-pipeline-split"});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("does not split evenly"), std::string::npos) << odd.status().message();
}

TEST(Frameworks, MegatronImportRefusesWhatItCannotPrice) {
  auto words = SplitCommandLine(ReadFile("tests/cli/megatron/gpt3_175b_args.sh"));
  ASSERT_TRUE(words.ok());
  std::vector<std::string> w = *words;
  w.insert(w.end(), {"--rampup-batch-size", "16", "16", "5859375", "--moe-use-upcycling"});
  auto job = ImportMegatron(w, 0, "x");
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("--rampup-batch-size, --moe-use-upcycling"), std::string::npos)
      << job.status().message();
  // Harmless flags are listed as ignored, not refused.
  auto ok = ImportMegatron(*words, 0, "x");
  ASSERT_TRUE(ok.ok());
  EXPECT_NE(std::find(ok->ignored.begin(), ok->ignored.end(), "--lr"), ok->ignored.end());
  // Block recompute is read (the first N layers of each chunk); uniform
  // groups of N > 1 layers, missing vocabulary, shell variables: refused by name.
  const std::vector<std::string> rc_base = {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
                                            "--seq-length", "32", "--micro-batch-size", "1", "--vocab-size", "100",
                                            "--recompute-granularity", "full"};
  auto with_rc = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> w = rc_base;
    w.insert(w.end(), extra.begin(), extra.end());
    return ImportMegatron(w, 1, "x");
  };
  auto block = with_rc({"--recompute-method", "block", "--recompute-num-layers", "2"});
  ASSERT_TRUE(block.ok()) << block.status().message();
  EXPECT_EQ(block->plan.recompute, Recompute::kFull);
  EXPECT_EQ(block->plan.recompute_num_layers, 2);
  auto rc = with_rc({"--recompute-method", "uniform", "--recompute-num-layers", "2"});
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.status().message().find("--recompute-method uniform --recompute-num-layers 2"), std::string::npos)
      << rc.status().message();
  auto nv = ImportMegatron({"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length",
                            "32", "--micro-batch-size", "1"}, 1, "x");
  ASSERT_FALSE(nv.ok());
  EXPECT_NE(nv.status().message().find("--vocab-size"), std::string::npos);
  auto var = ImportMegatron({"--num-layers", "$NUM_LAYERS"}, 1, "x");
  ASSERT_FALSE(var.ok());
  EXPECT_NE(var.status().message().find("shell variables"), std::string::npos);
}

// Megatron-LM reduces gradients after the whole backward unless
// --overlap-grad-reduce is given: imported as such, priced slower, exported
// back without the flag; DeepSpeed and torchtitan say what they can run.
TEST(Frameworks, GradReduceOverlapImportedAsTheJobRunsIt) {
  const std::vector<std::string> base = {"--num-layers", "8", "--hidden-size", "1024", "--num-attention-heads", "16",
                                         "--seq-length", "1024", "--micro-batch-size", "1", "--global-batch-size",
                                         "64", "--vocab-size", "51200", "--use-distributed-optimizer", "--bf16"};
  auto off = ImportMegatron(base, 16, "x");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_FALSE(off->plan.overlap_grad_reduce);
  std::vector<std::string> with = base;
  with.push_back("--overlap-grad-reduce");
  auto on = ImportMegatron(with, 16, "x");
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_TRUE(on->plan.overlap_grad_reduce);
  ClusterSpec c;
  c.nodes = 2;
  c.gpus_per_node = 8;
  const HardwareProfile hw = LoadProfile("A100-SXM4-80GB").value();
  auto t_off = SimulatePlan(off->model, c, off->plan, hw), t_on = SimulatePlan(on->model, c, on->plan, hw);
  ASSERT_TRUE(t_off.ok() && t_on.ok());
  EXPECT_GT(t_off->time.dp_exposed, t_on->time.dp_exposed);
  auto flags = MegatronArgs(off->model, off->plan, true);
  ASSERT_TRUE(flags.ok());
  for (const CliFlag& fl : *flags) EXPECT_NE(fl.name, "--overlap-grad-reduce");
  EXPECT_FALSE(Inexpressible(Framework::kTorchtitan, off->model, off->plan).empty());
  EXPECT_TRUE(DeepSpeedOverlapsGradReduce(1, 1));
  EXPECT_FALSE(DeepSpeedOverlapsGradReduce(0, 1));
  EXPECT_FALSE(DeepSpeedOverlapsGradReduce(1, 2));
}

TEST(Frameworks, RulesRefuseWhatEachCannotRun) {
  const ModelSpec gpt = Gpt(4096, 32, 32);
  const ModelSpec llama = Llama8B();
  PlanSpec gpipe = Plan(gpt, 2, 1, 4, 1, 1, 8, Schedule::kGpipe, Recompute::kNone, false, 0);
  EXPECT_FALSE(CheckExpressible(Framework::kMegatron, gpt, gpipe).ok());
  EXPECT_FALSE(CheckExpressible(Framework::kDeepSpeed, gpt, gpipe).ok());
  PlanSpec inter = Plan(gpt, 2, 1, 4, 2, 1, 8, Schedule::kInterleaved, Recompute::kNone, false, 1);
  EXPECT_TRUE(CheckExpressible(Framework::kMegatron, gpt, inter).ok());
  const Status ds = CheckExpressible(Framework::kDeepSpeed, gpt, inter);
  EXPECT_NE(ds.message().find("no interleaved schedule"), std::string::npos) << ds.message();
  EXPECT_NE(ds.message().find("replan with --framework deepspeed"), std::string::npos);
  PlanSpec z2pp = Plan(gpt, 2, 1, 4, 1, 1, 8, Schedule::k1F1B, Recompute::kNone, false, 2);
  EXPECT_FALSE(CheckExpressible(Framework::kDeepSpeed, gpt, z2pp).ok());
  EXPECT_TRUE(CheckExpressible(Framework::kMegatron, gpt, z2pp).ok());
  const Status tt = CheckExpressible(Framework::kTorchtitan, gpt, z2pp);
  EXPECT_NE(tt.message().find("cannot run this model"), std::string::npos) << tt.message();
  PlanSpec tp_no_sp = Plan(llama, 2, 4, 1, 1, 1, 8, Schedule::k1F1B, Recompute::kNone, false, 3);
  EXPECT_FALSE(CheckExpressible(Framework::kTorchtitan, llama, tp_no_sp).ok());
  tp_no_sp.sequence_parallel = true;
  EXPECT_TRUE(CheckExpressible(Framework::kTorchtitan, llama, tp_no_sp).ok());
  EXPECT_TRUE(CheckExpressible(Framework::kAny, gpt, gpipe).ok());
}

// A sliding window (Mistral-7B v0.1: 4096 tokens) or a chunk masks nothing
// at a sequence no longer than itself: such a plan exports; a longer
// sequence is refused, naming both lengths.
TEST(Frameworks, MegatronExportRefusesOnlyAWindowThatMasks) {
  ModelSpec m = Llama8B();
  m.sliding_window = 4096;
  PlanSpec p = Plan(m, 2, 1, 4, 1, 1, 8, Schedule::k1F1B, Recompute::kNone, false, 1);
  p.seq_length = 4096;
  EXPECT_TRUE(CheckExpressible(Framework::kMegatron, m, p).ok());
  p.seq_length = 8192;
  Status st = CheckExpressible(Framework::kMegatron, m, p);
  EXPECT_NE(st.message().find("no sliding-window attention in the exported flags (the window, 4096 tokens, is "
                              "shorter than the sequence, 8192)"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("cannot run this model"), std::string::npos) << st.message();
  m.window_chunked = true;
  st = CheckExpressible(Framework::kMegatron, m, p);
  EXPECT_NE(st.message().find("no chunked attention"), std::string::npos) << st.message();
  p.seq_length = 2048;
  EXPECT_TRUE(CheckExpressible(Framework::kMegatron, m, p).ok());
  // torchtitan's llama3 likewise (with FSDP and SP, as it runs).
  m.window_chunked = false;
  p.zero_stage = 3;
  p.sequence_parallel = true;
  p.flash_attention = true;
  p.seq_length = 4096;
  Status tt = CheckExpressible(Framework::kTorchtitan, m, p);
  EXPECT_TRUE(tt.ok()) << tt.message();
  p.seq_length = 8192;
  tt = CheckExpressible(Framework::kTorchtitan, m, p);
  EXPECT_NE(tt.message().find("no layout beyond Llama 3"), std::string::npos) << tt.message();
}

TEST(Frameworks, SearchKeepsOnlyExpressiblePlansAndCountsTheRest) {
  auto hw = LoadProfile("A100-SXM4-80GB");
  ASSERT_TRUE(hw.ok());
  const ModelSpec m = Gpt(4096, 32, 32);
  ClusterSpec c;
  c.nodes = 2;
  for (Framework f : {Framework::kMegatron, Framework::kDeepSpeed}) {
    SearchConstraints k;
    k.global_batch = 64;
    k.seq_length = 2048;
    k.framework = f;
    k.grad_bytes = FrameworkGradBytes(f, true);
    SearchOptions so;
    so.top = 20;
    auto r = SearchPlans(m, c, *hw, k, so);
    ASSERT_TRUE(r.ok());
    ASSERT_FALSE(r->top.empty());
    for (const auto& rp : r->top) {
      EXPECT_TRUE(CheckExpressible(f, m, rp.plan).ok()) << Describe(rp.plan);
      EXPECT_EQ(rp.plan.grad_bytes, f == Framework::kMegatron ? 4 : 0);
    }
    int64_t counted = 0;
    for (const auto& [why, n] : r->plan_rejects)
      if (why.rfind(DisplayName(f), 0) == 0) counted += n;
    EXPECT_GT(counted, 0) << ToString(f);
  }
}

TEST(Frameworks, MegatronFp32MainGradientsCostMemoryAndTime) {
  auto hw = LoadProfile("A100-SXM4-80GB");
  ASSERT_TRUE(hw.ok());
  const ModelSpec m = Gpt(4096, 32, 32);
  ClusterSpec c;
  PlanSpec p = Plan(m, 8, 1, 1, 1, 1, 4, Schedule::k1F1B, Recompute::kFull, false, 0);
  auto base = SimulatePlan(m, c, p, *hw);
  p.grad_bytes = 4;
  auto fp32 = SimulatePlan(m, c, p, *hw);
  ASSERT_TRUE(base.ok() && fp32.ok());
  // 2 more bytes per parameter held (ZeRO-0: every parameter's gradient;
  // a persistent buffer, so no fragmentation on top).
  EXPECT_NEAR(fp32->peak_memory_bytes - base->peak_memory_bytes, 2.0 * m.TotalParams(), 0.15 * 2.0 * m.TotalParams());
  EXPECT_GT(fp32->step_time_s, base->step_time_s);  // twice the all-reduce bytes
}

}  // namespace
}  // namespace dt

namespace dt {
namespace {

// MoE, MLA and FP8 plans survive export -> import: Mixtral (every layer MoE),
// DeepSeek-V3 (MLA, 3 dense leading layers, a shared expert, EP 8) and an
// FP8 Llama; and the MoE / FP8 flags dtplan cannot price are refused by name.
TEST(Frameworks, MegatronMoeMlaAndFp8FlagsRoundTrip) {
  struct Case {
    const char* config;
    int tp, pp, ep;
    Precision precision;
    bool fp8_param_gather = false;
    Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  };
  for (const Case& c : {Case{"mixtral-8x7b.json", 2, 4, 4, Precision::kProfile},
                        Case{"deepseek-v3.json", 1, 8, 8, Precision::kProfile},
                        Case{"qwen3-30b-a3b.json", 2, 2, 8, Precision::kFp8},  // q/k norms: --qk-layernorm
                        Case{"deepseek-v3.json", 2, 8, 8, Precision::kFp8},  // FP8 with MLA
                        // GLM-4.5: 96 heads of 128 over hidden 5120, QKV biases, half-rotary heads
                        Case{"glm-4.5.json", 2, 4, 8, Precision::kProfile},
                        Case{"qwen3-8b.json", 2, 2, 1, Precision::kProfile},
                        Case{"", 2, 1, 1, Precision::kFp8}, Case{"", 2, 1, 1, Precision::kFp8, true},
                        Case{"", 2, 1, 1, Precision::kFp8, false, Fp8Recipe::kTensorwise},
                        Case{"qwen3-30b-a3b.json", 2, 2, 8, Precision::kFp8, false, Fp8Recipe::kTensorwise}}) {
    ModelSpec m = testing_models::Llama8B();
    if (*c.config) {
      auto model = LoadModel(std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/" + c.config);
      ASSERT_TRUE(model.ok()) << model.status().message();
      m = *model;
    }
    m.seq_length = 4096;
    m.vocab = static_cast<int>(MegatronPaddedVocab(m.vocab, 128, c.tp));  // as Megatron trains it
    PlanSpec p;
    p.tp = c.tp;
    p.pp = c.pp;
    p.dp = 16;
    p.ep = c.ep;
    p.micro_batch = 1;
    p.num_microbatches = 8;
    p.seq_length = 4096;
    p.sequence_parallel = c.tp > 1;
    p.zero_stage = 1;
    p.precision = c.precision;
    p.fp8_param_gather = c.fp8_param_gather;
    p.fp8_recipe = c.fp8_recipe;
    p.layers_per_chunk = EvenSplit(m.num_layers, p.pp);
    // DeepSeek-V3: 61 layers over 8 stages export as --pipeline-model-parallel-layout.
    ASSERT_TRUE(Validate(p, m, "plan").ok()) << c.config;
    auto flags = MegatronArgs(m, p, true);
    ASSERT_TRUE(flags.ok()) << c.config << ": " << flags.status().message();
    auto words = SplitCommandLine(FormatFlags(*flags));
    ASSERT_TRUE(words.ok());
    auto job = ImportMegatron(*words, p.world(), "x");
    ASSERT_TRUE(job.ok()) << c.config << ": " << job.status().message();
    EXPECT_EQ(job->model.TotalParams(), m.TotalParams()) << c.config;
    EXPECT_EQ(job->model.ActiveParams(), m.ActiveParams()) << c.config;
    EXPECT_EQ(job->model.num_experts, m.num_experts) << c.config;
    EXPECT_EQ(job->model.moe_top_k, m.moe_top_k) << c.config;
    EXPECT_EQ(job->model.shared_ffn_hidden, m.shared_ffn_hidden) << c.config;
    EXPECT_EQ(job->model.first_dense_layers, m.first_dense_layers) << c.config;
    EXPECT_EQ(job->model.mtp_layers, m.mtp_layers) << c.config;  // DeepSeek-V3: 1, in the exported layout
    EXPECT_EQ(job->model.kv_lora_rank, m.kv_lora_rank) << c.config;
    EXPECT_EQ(job->model.qk_norm, m.qk_norm) << c.config;
    EXPECT_EQ(job->model.qkv_bias, m.qkv_bias) << c.config;
    EXPECT_EQ(job->model.rotary_fraction, m.rotary_fraction) << c.config;
    EXPECT_EQ(job->model.head_dim(), m.head_dim()) << c.config;
    EXPECT_EQ(job->plan.ep, p.ep) << c.config;
    EXPECT_EQ(job->plan.precision, p.precision) << c.config;
    EXPECT_EQ(job->plan.fp8_param_gather, p.fp8_param_gather) << c.config;
    EXPECT_EQ(job->plan.fp8_recipe, p.fp8_recipe) << c.config;
    EXPECT_EQ(Describe(job->plan), Describe(p)) << c.config;
  }
}

TEST(Frameworks, MegatronMoeAndFp8FlagsItCannotPriceAreRefusedByName) {
  const std::vector<std::string> base = {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
                                         "--seq-length", "32", "--micro-batch-size", "1", "--vocab-size", "128",
                                         "--swiglu", "--normalization", "RMSNorm", "--disable-bias-linear",
                                         "--num-experts", "4", "--moe-router-topk", "2",
                                         "--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> w = base;
    w.insert(w.end(), extra.begin(), extra.end());
    return ImportMegatron(w, 4, "x");
  };
  auto ok = with({"--expert-model-parallel-size", "2", "--moe-aux-loss-coeff", "0.01", "--moe-router-score-function",
                  "sigmoid", "--fp8-format", "hybrid"});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->plan.ep, 2);
  EXPECT_EQ(ok->plan.precision, Precision::kFp8);
  EXPECT_EQ(ok->model.moe_ffn_hidden, ok->model.ffn_hidden);  // --moe-ffn-hidden-size defaults to it
  // Expert TP below TP (MoE parallel folding) is read, and refused when it does not divide TP.
  auto folded = with({"--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-tensor-parallel-size", "1",
                      "--expert-model-parallel-size", "4"});
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(folded->plan.expert_tp(), 1);
  EXPECT_EQ(folded->plan.ep, 4);
  EXPECT_TRUE(Validate(folded->plan, folded->model, "imported").ok());
  auto odd = with({"--tensor-model-parallel-size", "4", "--sequence-parallel", "--expert-tensor-parallel-size", "3"});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("must divide --tensor-model-parallel-size 4"), std::string::npos)
      << odd.status().message();
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--expert-model-parallel-size", "2", "--moe-shared-expert-overlap", "--overlap-moe-expert-parallel-comm"},
       "Megatron-LM refuses the pair"},
      {{"--moe-pad-expert-input-to-capacity"}, "needs moe_capacity_factor > 0"},
      {{"--moe-expert-capacity-factor", "1.25", "--moe-token-dispatcher-type", "flex", "--moe-enable-deepep"},
       "all-to-all dispatcher"},
      {{"--moe-token-dispatcher-type", "allgather"}, "allgather"},
      {{"--moe-layer-freq", "([1]*2+[0]*2)"}, "--moe-layer-freq"},
      {{"--expert-tensor-parallel-size", "2"}, "--expert-tensor-parallel-size"},
      {{"--mtp-num-layers", "1", "--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Etm|tttL"},
       "last stage only"},
      {{"--mtp-num-layers", "2", "--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Ett|ttmL"},
       "--mtp-num-layers is 2"},
      {{"--fp8-format", "hybrid", "--fp8-recipe", "mxfp8"}, "--fp8-recipe mxfp8"},
      {{"--fp8-format", "hybrid", "--fp8-recipe", "blockwise"}, "--fp8-recipe blockwise"},
      {{"--fp8-param-gather"}, "--fp8-param-gather needs --fp8-format"},
      {{"--fp8-format", "hybrid", "--fp8-param-gather"}, "--use-distributed-optimizer"}};
  for (const auto& [extra, name] : refused) {
    auto job = with(extra);
    ASSERT_FALSE(job.ok()) << name;
    EXPECT_NE(job.status().message().find(name), std::string::npos) << job.status().message();
  }
  auto dense = ImportMegatron({"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length",
                               "32", "--micro-batch-size", "1", "--vocab-size", "128", "--moe-router-topk", "2"},
                              1, "x");
  ASSERT_FALSE(dense.ok());
  EXPECT_NE(dense.status().message().find("--moe-router-topk needs --num-experts"), std::string::npos);
  // The flex dispatcher with DeepEP is priced as a deduplicating dispatcher,
  // and exported back as such; flex without DeepEP is refused.
  std::vector<std::string> flex = base;
  *std::find(flex.begin(), flex.end(), "alltoall") = "flex";
  auto no_deepep = ImportMegatron(flex, 4, "x");
  ASSERT_FALSE(no_deepep.ok());
  EXPECT_NE(no_deepep.status().message().find("--moe-enable-deepep"), std::string::npos);
  flex.push_back("--moe-enable-deepep");
  flex.insert(flex.end(), {"--expert-model-parallel-size", "2"});
  auto deepep = ImportMegatron(flex, 4, "x");
  ASSERT_TRUE(deepep.ok()) << deepep.status().message();
  EXPECT_EQ(deepep->plan.moe_dispatcher, MoeDispatcher::kDeduplicated);
  auto args = MegatronArgs(deepep->model, deepep->plan, true);
  ASSERT_TRUE(args.ok()) << args.status().message();
  std::string joined;
  for (const CliFlag& f : *args) joined += f.name + " " + f.value + " ";
  EXPECT_NE(joined.find("--moe-token-dispatcher-type flex"), std::string::npos) << joined;
  EXPECT_NE(joined.find("--moe-enable-deepep"), std::string::npos) << joined;
  // --moe-shared-expert-overlap is read, priced and exported back.
  auto shared = with({"--expert-model-parallel-size", "2", "--moe-shared-expert-intermediate-size", "64",
                      "--moe-shared-expert-overlap"});
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_TRUE(shared->plan.moe_shared_expert_overlap);
  auto shared_args = MegatronArgs(shared->model, shared->plan, true);
  ASSERT_TRUE(shared_args.ok()) << shared_args.status().message();
  bool exported = false;
  for (const CliFlag& f : *shared_args) exported |= f.name == "--moe-shared-expert-overlap";
  EXPECT_TRUE(exported);
  auto plain = with({"--expert-model-parallel-size", "2"});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->plan.moe_shared_expert_overlap);
  EXPECT_EQ(plain->plan.moe_dispatcher, MoeDispatcher::kAllToAll);
}

}  // namespace
}  // namespace dt
