// ImportMegatron (megatron_args.h): Megatron-LM argv -> (ModelSpec, PlanSpec).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "planner/frameworks/megatron_args.h"

namespace dt {
namespace {

// Flags that set the model or the plan (read below), by kind.
const std::set<std::string> kIntFlags = {
    "--num-layers", "--hidden-size", "--num-attention-heads", "--num-query-groups", "--kv-channels",
    "--ffn-hidden-size", "--seq-length", "--max-position-embeddings", "--vocab-size", "--padded-vocab-size",
    "--make-vocab-size-divisible-by", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--context-parallel-size", "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--micro-batch-size",
    "--global-batch-size", "--recompute-num-layers",
    // Mixture of experts and multi-latent attention.
    "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--q-lora-rank", "--kv-lora-rank",
    "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim", "--mtp-num-layers"};
const std::set<std::string> kStringFlags = {
    "--normalization", "--position-embedding-type", "--recompute-granularity", "--recompute-method",
    "--attention-backend", "--data-parallel-sharding-strategy", "--pipeline-model-parallel-layout",
    "--tokenizer-type", "--attention-dropout", "--hidden-dropout", "--rotary-base", "--norm-epsilon",
    "--rotary-seq-len-interpolation-factor", "--moe-token-dispatcher-type", "--moe-layer-freq", "--fp8-format",
    "--fp8-recipe", "--recompute-modules", "--rotary-percent", "--exp-avg-dtype", "--exp-avg-sq-dtype", "--main-params-dtype",
    "--main-grads-dtype", "--cross-entropy-fusion-impl", "--moe-expert-capacity-factor", "--cuda-graph-impl",
    "--cuda-graph-scope"};
const std::set<std::string> kBoolFlags = {
    "--group-query-attention", "--swiglu", "--disable-bias-linear", "--add-qkv-bias",
    "--untie-embeddings-and-output-weights", "--sequence-parallel", "--use-distributed-optimizer",
    "--use-megatron-fsdp", "--use-torch-fsdp2", "--bf16", "--fp16", "--use-flash-attn",
    "--overlap-grad-reduce", "--overlap-param-gather", "--use-rotary-position-embeddings", "--use-rope-scaling",
    "--moe-grouped-gemm", "--multi-latent-attention", "--moe-enable-deepep",
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split", "--fp8-param-gather",
    "--overlap-moe-expert-parallel-comm", "--moe-layer-recompute", "--qk-layernorm",
    "--use-precision-aware-optimizer", "--tp-comm-overlap", "--cross-entropy-loss-fusion",
    "--no-overlap-p2p-communication", "--overlap-p2p-communication", "--overlap-p2p-communication-warmup-flush",
    "--moe-pad-expert-input-to-capacity", "--moe-shared-expert-overlap", "--delay-wgrad-compute",
    "--overlap-dispatch-backward-with-experts-wgrad"};
// Flags that change neither the memory nor the step time dtplan predicts:
// data, tokenizer files, checkpoints, logging, learning-rate schedule,
// optimizer hyper-parameters, initialization, kernel fusion switches.
const std::set<std::string> kHarmless = {
    "--train-iters", "--train-samples", "--lr", "--min-lr", "--lr-decay-style", "--lr-decay-iters",
    "--lr-decay-samples", "--lr-warmup-fraction", "--lr-warmup-iters", "--lr-warmup-samples",
    "--lr-warmup-init", "--weight-decay", "--start-weight-decay", "--end-weight-decay",
    "--weight-decay-incr-style", "--clip-grad", "--adam-beta1", "--adam-beta2", "--adam-eps",
    "--init-method-std", "--init-method-xavier-uniform", "--seed", "--log-interval", "--log-params-norm",
    "--log-num-zeros-in-grad", "--log-throughput", "--log-timers-to-tensorboard",
    "--log-validation-ppl-to-tensorboard", "--log-memory-to-tensorboard", "--log-world-size-to-tensorboard",
    "--log-batch-size-to-tensorboard", "--log-progress", "--tensorboard-dir", "--tensorboard-log-interval",
    "--tensorboard-queue-size", "--wandb-project", "--wandb-exp-name", "--wandb-save-dir", "--save",
    "--load", "--save-interval", "--eval-interval", "--eval-iters", "--data-path", "--train-data-path",
    "--valid-data-path", "--test-data-path", "--split", "--vocab-file", "--merge-file", "--tokenizer-model",
    "--data-cache-path", "--mock-data", "--num-workers", "--exit-interval", "--exit-duration-in-mins",
    "--timing-log-level", "--timing-log-option", "--distributed-backend", "--distributed-timeout-minutes",
    "--no-load-optim", "--no-load-rng", "--finetune", "--use-checkpoint-args", "--ckpt-format",
    "--use-mcore-models", "--transformer-impl", "--no-masked-softmax-fusion", "--no-bias-gelu-fusion",
    "--no-bias-swiglu-fusion", "--no-bias-dropout-fusion", "--no-rope-fusion", "--no-persist-layer-norm",
    "--no-gradient-accumulation-fusion", "--apply-query-key-layer-scaling", "--attention-softmax-in-fp32",
    "--rope-scaling-factor", "--dataloader-type", "--no-create-attention-mask-in-dataloader",
    "--eod-mask-loss", "--reset-position-ids", "--reset-attention-mask", "--no-check-for-nan-in-loss-and-grad",
    "--check-weight-hash-across-dp-replicas-interval", "--manual-gc", "--manual-gc-interval",
    "--async-save", "--ckpt-fully-parallel-save", "--ckpt-fully-parallel-load", "--use-dist-ckpt",
    "--auto-detect-ckpt-format", "--initial-loss-scale", "--min-loss-scale", "--loss-scale-window",
    "--hysteresis", "--loss-scale", "--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler",
    "--wandb-entity", "--tokenizer-prompt-format", "--legacy-tokenizer", "--ft-num-warmup-iters",
    // MoE routing policy and its losses: which experts a token uses, not how
    // many (the top-k is --moe-router-topk); the permutation kernel fusion.
    "--moe-aux-loss-coeff", "--moe-z-loss-coeff", "--moe-router-load-balancing-type", "--moe-router-score-function",
    "--moe-router-topk-scaling-factor", "--moe-router-num-groups", "--moe-router-group-topk",
    "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "--moe-router-pre-softmax",
    "--moe-router-dtype", "--moe-input-jitter-eps", "--moe-per-layer-logging", "--moe-permute-fusion",
    "--moe-router-fusion",
    // Multi-token prediction: the weight of the MTP losses in the total.
    "--mtp-loss-scaling-factor",
    // FP8 delayed-scaling bookkeeping (a few floats per GEMM per step).
    "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--fp8-margin", "--fp8-interval"};

// GPT-2's BPE: the vocabulary when only --tokenizer-type says it.
constexpr int kGpt2Vocab = 50257;

struct Parsed {
  std::map<std::string, std::string> values;  // flag -> last value ("" for booleans)
  std::vector<std::string> launcher;          // words before the training script
};

bool IsFlag(const std::string& w) { return w.size() > 2 && w[0] == '-' && w[1] == '-'; }

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& v) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty())
    return InvalidArgument(flag + " '" + v + "' is not an integer" +
                           (v.find('$') != std::string::npos ? " (dtplan does not expand shell variables: paste the values)"
                                                             : ""));
  if (x < 0 || x > (1LL << 31) - 1) return InvalidArgument(flag + " " + v + " is out of range (0 .. 2^31-1)");
  return x;
}

StatusOr<double> ParseFloat(const std::string& flag, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty()) return InvalidArgument(flag + " '" + v + "' is not a number");
  return x;
}

// torchrun's own flags, wherever they appear (Megatron-LM's example scripts
// keep them in a DISTRIBUTED_ARGS array): read for the world size.
const std::set<std::string> kLauncherFlags = {
    "--nnodes", "--nproc-per-node", "--nproc_per_node", "--master_addr", "--master-addr", "--master_port",
    "--master-port", "--node_rank", "--node-rank", "--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint",
    "--rdzv_endpoint", "--rdzv-id", "--rdzv_id"};

// The words that are Megatron-LM flags: those after the training script
// (*.py), or, when the text defines bash arrays (NAME=( ... ), the style of
// Megatron-LM's example scripts and of `dtplan export`), the arrays' words.
// torchrun flags go to `launcher` either way.
std::vector<std::string> MegatronWords(const std::vector<std::string>& argv, std::vector<std::string>* launcher) {
  std::vector<std::string> words;
  bool arrays = false;
  for (const auto& w : argv) arrays |= w.size() > 2 && w.compare(w.size() - 2, 2, "=(") == 0;
  if (arrays) {
    bool inside = false;
    for (const auto& w : argv) {
      if (!inside && w.size() > 2 && w.compare(w.size() - 2, 2, "=(") == 0) { inside = true; continue; }
      if (inside && w == ")") { inside = false; continue; }
      (inside ? words : *launcher).push_back(w);
    }
  } else {
    size_t start = 0;
    for (size_t i = 0; i < argv.size(); ++i) {
      const std::string& w = argv[i];
      if (w.size() > 3 && w.compare(w.size() - 3, 3, ".py") == 0) { start = i + 1; break; }
    }
    launcher->assign(argv.begin(), argv.begin() + start);
    words.assign(argv.begin() + start, argv.end());
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string name = words[i].substr(0, words[i].find('='));
    if (kLauncherFlags.count(name)) {
      launcher->push_back(words[i]);
      if (name == words[i] && i + 1 < words.size()) launcher->push_back(words[++i]);
      continue;
    }
    out.push_back(words[i]);
  }
  return out;
}

StatusOr<Parsed> Tokenize(const std::vector<std::string>& all, std::vector<std::string>* ignored,
                          std::vector<std::string>* unknown) {
  Parsed out;
  const std::vector<std::string> argv = MegatronWords(all, &out.launcher);
  const size_t start = 0;
  std::string flag;
  for (size_t i = start; i < argv.size(); ++i) {
    std::string w = argv[i];
    if (!IsFlag(w)) {
      if (flag.empty()) return InvalidArgument("'" + w + "' is not a Megatron-LM --flag (put the flags after the training script)");
      std::string& v = out.values[flag];
      v = v.empty() ? w : v + " " + w;  // nargs='+' flags keep every value
      continue;
    }
    std::string value;
    bool has_value = false;
    if (const size_t eq = w.find('='); eq != std::string::npos) {
      value = w.substr(eq + 1);
      w = w.substr(0, eq);
      has_value = true;
    }
    flag = w;
    if (kHarmless.count(w)) {
      if (std::find(ignored->begin(), ignored->end(), w) == ignored->end()) ignored->push_back(w);
      flag = "(harmless)";
      continue;
    }
    if (!kIntFlags.count(w) && !kStringFlags.count(w) && !kBoolFlags.count(w)) {
      if (std::find(unknown->begin(), unknown->end(), w) == unknown->end()) unknown->push_back(w);
      flag = "(unknown)";
      continue;
    }
    out.values[w] = value;
    if (kBoolFlags.count(w)) {
      if (has_value) return InvalidArgument(w + " takes no value");
      flag = "(bool)";
      if (i + 1 < argv.size() && !IsFlag(argv[i + 1]))
        return InvalidArgument(w + " takes no value, but '" + argv[i + 1] + "' follows it");
    }
  }
  out.values.erase("(harmless)");
  out.values.erase("(unknown)");
  return out;
}

// torchrun --nnodes N --nproc-per-node M (also _ and = spellings); srun -N/-n.
void ReadLauncher(const std::vector<std::string>& words, int* nodes, int* per_node) {
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = words[i], v;
    if (const size_t eq = w.find('='); eq != std::string::npos) v = w.substr(eq + 1), w = w.substr(0, eq);
    else if (i + 1 < words.size()) v = words[i + 1];
    int x = 0;
    try { x = std::stoi(v); } catch (const std::exception&) { continue; }
    if (w == "--nnodes" || w == "-N" || w == "--nodes") *nodes = x;
    if (w == "--nproc-per-node" || w == "--nproc_per_node" || w == "--ntasks-per-node" || w == "--gpus-per-node")
      *per_node = x;
  }
}

}  // namespace

// Megatron-LM's grouped repetitions "(...)*N" written out (nested groups
// too); at most kMaxLayoutChars characters, so a hostile count cannot
// exhaust memory.
constexpr size_t kMaxLayoutChars = 1 << 16;
StatusOr<std::string> ExpandLayoutGroups(const std::string& s) {
  const size_t open = s.rfind('(');  // innermost: no '(' after it
  if (open == std::string::npos) {
    if (s.find(')') != std::string::npos) return InvalidArgument("pipeline layout: ')' without '('");
    return s;
  }
  const size_t close = s.find(')', open);
  if (close == std::string::npos) return InvalidArgument("pipeline layout: '(' without ')'");
  size_t j = close + 1;
  if (j >= s.size() || s[j] != '*') return InvalidArgument("pipeline layout: a group '(...)' needs '*N' after it");
  size_t k = j + 1;
  while (k < s.size() && k < j + 8 && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
  if (k == j + 1) return InvalidArgument("pipeline layout: '(...)*' needs a count");
  const long n = std::stol(s.substr(j + 1, k - j - 1));
  const std::string body = s.substr(open + 1, close - open - 1);
  if (s.size() + static_cast<size_t>(n) * body.size() > kMaxLayoutChars)
    return InvalidArgument("pipeline layout: expands to more than " + std::to_string(kMaxLayoutChars) + " characters");
  std::string rep;
  for (long i = 0; i < n; ++i) rep += body;
  return ExpandLayoutGroups(s.substr(0, open) + rep + s.substr(k));
}

// --pipeline-model-parallel-layout: stages split by '|', letters E, t, m, L,
// "t*N" and grouped repetitions "(...)*N"; chunk c gets the count of its
// t's; `mtp` the count of m's (multi-token prediction layers), which dtplan
// places in the last stage.
StatusOr<std::vector<int>> ParseMegatronLayout(const std::string& layout, int* mtp) {
  DT_ASSIGN_OR_RETURN(const std::string s, ExpandLayoutGroups(layout));
  std::vector<int> chunks(1, 0);
  bool saw_e = false, saw_l = false;
  *mtp = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '|') { chunks.push_back(0); continue; }
    if (c == ',' || c == ' ') continue;
    if (c == 'E') { if (chunks.size() != 1) return InvalidArgument("--pipeline-model-parallel-layout: dtplan holds the embedding on the first stage only"); saw_e = true; continue; }
    if (c == 'L') { saw_l = true; continue; }
    if (c == 'm') {
      if (s.find('|', i) != std::string::npos)
        return InvalidArgument("--pipeline-model-parallel-layout: dtplan models the MTP layers ('m') in the last stage only");
      ++*mtp;
      continue;
    }
    if (c == 't') {
      int n = 1;
      if (i + 1 < s.size() && s[i + 1] == '*') {
        size_t j = i + 2;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        if (j == i + 2) return InvalidArgument("--pipeline-model-parallel-layout: 't*' needs a count");
        n = std::stoi(s.substr(i + 2, j - i - 2));
        i = j - 1;
      }
      chunks.back() += n;
      continue;
    }
    return InvalidArgument(std::string("--pipeline-model-parallel-layout: '") + c +
                           "' is not read by dtplan (it reads E, t, t*N, m, L, | and (...)*N)");
  }
  if (!saw_e || !saw_l || s.find('L') < s.rfind('|'))
    return InvalidArgument("--pipeline-model-parallel-layout: dtplan needs E in the first stage and L in the last");
  return chunks;
}

namespace {

// --moe-layer-freq: 1 (every layer MoE) or the pattern "([0]*K+[1]*N)"
// (K dense leading layers, Megatron's spelling of DeepSeek's layout); the
// number of dense leading layers, or an error naming the flag.
// --moe-layer-freq into the model's MoE layer pattern (first_dense_layers,
// moe_layer_step): 1, "([0]*K+[1]*N)" (K dense leading layers), or an
// explicit list of 0 / 1 per layer (dtplan's export of interleaved layers)
// whose pattern is K dense leading layers and then an MoE layer at every
// layer i with i % S == S - 1.
Status ReadMoeLayerFreq(const std::string& v, ModelSpec* m) {
  std::string t;
  for (char c : v)
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  const int n = m->num_layers;
  if (t == "1") return Status::Ok();
  int dense = -1, sparse = -1;
  if (std::sscanf(t.c_str(), "([0]*%d+[1]*%d)", &dense, &sparse) == 2 && dense >= 0 && sparse >= 1 &&
      dense + sparse == n && t == "([0]*" + std::to_string(dense) + "+[1]*" + std::to_string(sparse) + ")") {
    m->first_dense_layers = dense;
    return Status::Ok();
  }
  std::vector<bool> moe;
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') {
    for (size_t i = 1; i + 1 < t.size(); i += 2) {
      if ((t[i] != '0' && t[i] != '1') || (i + 2 < t.size() && t[i + 1] != ',')) {
        moe.clear();
        break;
      }
      moe.push_back(t[i] == '1');
    }
  }
  if (static_cast<int>(moe.size()) == n) {
    // The first MoE layer f and the gap to the next one fix the pattern:
    // K = 0 with f = S - 1, or K = f.
    const int f = static_cast<int>(std::find(moe.begin(), moe.end(), true) - moe.begin());
    int gap = 1;
    for (int i = f + 1; i < n; ++i)
      if (moe[i]) {
        gap = i - f;
        break;
      }
    for (const auto& [k, s] : std::vector<std::pair<int, int>>{{0, gap}, {f, gap}, {0, f + 1}, {f, 1}}) {
      if (f >= n || k >= n || s > n) continue;
      ModelSpec trial = *m;
      trial.first_dense_layers = k;
      trial.moe_layer_step = s;
      bool same = true;
      for (int i = 0; i < n && same; ++i) same = trial.DenseLayer(i) == !moe[i];
      if (same) {
        m->first_dense_layers = k;
        m->moe_layer_step = s;
        return Status::Ok();
      }
    }
  }
  return InvalidArgument("--moe-layer-freq '" + v + "' is not modeled: dtplan models 1 (every layer MoE), "
                         "\"([0]*K+[1]*N)\" with K + N = --num-layers (K dense leading layers), or a list of "
                         "--num-layers 0 / 1 that is K dense layers and then an MoE layer every S-th layer");
}

}  // namespace

// The values of an nargs flag, which Tokenize keeps joined by spaces.
static std::vector<std::string> FlagWords(const std::string& joined) {
  std::vector<std::string> out;
  for (size_t start = 0; start < joined.size();) {
    const size_t space = std::min(joined.find(' ', start), joined.size());
    if (space > start) out.push_back(joined.substr(start, space - start));
    start = space + 1;
  }
  return out;
}

// --cuda-graph-impl / --cuda-graph-scope (nargs='*'): of Megatron-LM's CUDA
// graphs dtplan prices Transformer Engine's graphs of the MoE router and
// preprocessing (PlanSpec::moe_router_cuda_graph); graphs of the attention
// change nothing it prices (GPU profiles carry no per-op host time for the
// dense layer); whole-layer or whole-iteration graphs (an empty scope,
// "full", "mlp", "moe", impl "local") are refused.
static Status ReadCudaGraphs(const std::map<std::string, std::string>& v, const ModelSpec& m, PlanSpec* p,
                             std::vector<std::string>* notes) {
  const std::string impl = v.count("--cuda-graph-impl") ? v.at("--cuda-graph-impl") : "none";
  if (impl == "none") {
    if (v.count("--cuda-graph-scope")) notes->push_back("--cuda-graph-scope without --cuda-graph-impl: no graphs; ignored");
    return Status::Ok();
  }
  if (impl != "transformer_engine")
    return InvalidArgument("--cuda-graph-impl " + impl + ": dtplan prices Transformer Engine's graphs of the MoE "
                           "router and preprocessing only (--cuda-graph-impl transformer_engine --cuda-graph-scope "
                           "moe_router moe_preprocess); drop the flag or use that form");
  std::set<std::string> scope;
  if (v.count("--cuda-graph-scope"))
    for (const std::string& w : FlagWords(v.at("--cuda-graph-scope"))) scope.insert(w);
  for (const std::string& s : scope)
    if (s != "attn" && s != "moe_router" && s != "moe_preprocess")
      return InvalidArgument("--cuda-graph-scope " + s + ": not modeled (dtplan prices graphs of moe_router and "
                             "moe_preprocess, and attn changes nothing it prices); drop it");
  if (scope.empty())
    return InvalidArgument("--cuda-graph-impl transformer_engine without --cuda-graph-scope graphs whole layers: "
                           "not modeled; give --cuda-graph-scope moe_router moe_preprocess (or attn)");
  const bool router = scope.count("moe_router") > 0, pre = scope.count("moe_preprocess") > 0;
  if (router != pre)
    return InvalidArgument("--cuda-graph-scope with only one of moe_router and moe_preprocess: dtplan prices the "
                           "two together; name both or neither");
  if (router && !m.moe())
    return InvalidArgument("--cuda-graph-scope moe_router: the model has no experts (--num-experts); drop it");
  p->moe_router_cuda_graph = router;
  if (scope.count("attn"))
    notes->push_back("--cuda-graph-scope attn: the attention's host time is not priced on GPU profiles, so the "
                     "graph changes nothing dtplan predicts");
  return Status::Ok();
}

// --recompute-modules (nargs='*', Megatron-LM's TransformerConfig
// .recompute_modules) and the deprecated --moe-layer-recompute (= the "moe"
// module) into PlanSpec::recompute_modules. Megatron reads the modules only
// with --recompute-granularity selective; an empty list recomputes nothing.
static Status ReadRecomputeModules(const std::map<std::string, std::string>& v, const std::string& granularity,
                            const ModelSpec& m, PlanSpec* p, std::vector<std::string>* notes) {
  if (v.count("--moe-layer-recompute")) {
    if (granularity == "full")
      return InvalidArgument("--moe-layer-recompute with --recompute-granularity full: Megatron-LM refuses it; "
                             "drop one of them");
    p->recompute = Recompute::kSelective;  // Megatron switches to selective and appends "moe"
  }
  const bool listed = v.count("--recompute-modules") > 0;
  if (!listed && !v.count("--moe-layer-recompute")) return Status::Ok();
  if (listed && p->recompute != Recompute::kSelective) {
    notes->push_back("--recompute-modules has no effect without --recompute-granularity selective (as in "
                     "Megatron-LM); ignored");
    return Status::Ok();
  }
  std::vector<std::string> names;
  if (listed) {
    names = FlagWords(v.at("--recompute-modules"));
  } else {
    names.push_back("core_attn");  // Megatron's default list, to which --moe-layer-recompute appends
  }
  if (v.count("--moe-layer-recompute")) names.push_back("moe");
  if (names.empty()) {
    notes->push_back("--recompute-granularity selective with an empty --recompute-modules recomputes nothing; "
                     "priced as no recompute");
    p->recompute = Recompute::kNone;
    return Status::Ok();
  }
  auto bits = ParseRecomputeModules(names);
  if (!bits.ok()) return InvalidArgument("--recompute-modules: " + bits.status().message());
  uint32_t modules = *bits;
  if ((modules & kRecomputeMoeAct) && m.moe() && !v.count("--moe-grouped-gemm"))
    return InvalidArgument("--recompute-modules moe_act needs --moe-grouped-gemm (Megatron-LM refuses it "
                           "otherwise); add --moe-grouped-gemm or remove moe_act");
  // Megatron runs these without effect on such a model (PlanSpec refuses
  // them): priced without them, said in a note.
  if ((modules & kRecomputeLayernorm) && !m.moe() && !m.mla()) {
    modules &= ~static_cast<uint32_t>(kRecomputeLayernorm);
    notes->push_back("--recompute-modules layernorm frees nothing on this model (Megatron-LM's Transformer Engine "
                     "layer fuses both norms into the QKV and fc1 linear layers, which keep the normalized "
                     "input); priced without it");
  }
  if ((modules & kRecomputeMlp) && m.moe() && !m.has_dense_layers()) {
    modules &= ~static_cast<uint32_t>(kRecomputeMlp);
    notes->push_back("--recompute-modules mlp acts on dense MLPs only (Megatron-LM skips it in MoE layers) and "
                     "every layer of this model is MoE; priced without it");
  }
  if (modules == 0) {
    notes->push_back("no recompute module is left to price; priced as no recompute");
    p->recompute = Recompute::kNone;
    modules = kDefaultRecomputeModules;
  }
  p->recompute_modules = modules;
  return Status::Ok();
}

StatusOr<MegatronJob> ImportMegatron(const std::vector<std::string>& argv, int world, const std::string& name) {
  MegatronJob job;
  std::vector<std::string> unknown;
  DT_ASSIGN_OR_RETURN(Parsed parsed, Tokenize(argv, &job.ignored, &unknown));
  if (!unknown.empty()) {
    std::string names;
    for (const auto& u : unknown) names += (names.empty() ? "" : ", ") + u;
    return InvalidArgument("Megatron-LM " + std::string(unknown.size() > 1 ? "flags " : "flag ") + names +
                           ": dtplan does not know how " + (unknown.size() > 1 ? "they change" : "it changes") +
                           " the model's size or the step's cost; remove " + (unknown.size() > 1 ? "them" : "it") +
                           " from the pasted command to price the rest");
  }
  ReadLauncher(parsed.launcher, &job.launcher_nodes, &job.launcher_gpus_per_node);
  const auto& v = parsed.values;
  auto has = [&](const char* f) { return v.count(f) > 0; };
  std::map<std::string, int64_t> ints;
  for (const auto& [flag, value] : v)
    if (kIntFlags.count(flag)) { DT_ASSIGN_OR_RETURN(ints[flag], ParseInt(flag, value)); }
  auto get = [&](const char* f, int64_t dflt) { return ints.count(f) ? ints.at(f) : dflt; };
  auto str = [&](const char* f, const std::string& dflt) { return v.count(f) ? v.at(f) : dflt; };
  for (const char* required : {"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length", "--micro-batch-size"})
    if (!ints.count(required)) return InvalidArgument(std::string("the Megatron-LM command has no ") + required + "; add it");

  // Model.
  ModelSpec& m = job.model;
  m.name = name;
  m.num_layers = static_cast<int>(get("--num-layers", 0));
  m.hidden = static_cast<int>(get("--hidden-size", 0));
  m.heads = static_cast<int>(get("--num-attention-heads", 0));
  if (m.num_layers < 1 || m.hidden < 1 || m.heads < 1)
    return InvalidArgument("--num-layers, --hidden-size and --num-attention-heads must be >= 1");
  m.kv_heads = has("--group-query-attention") ? static_cast<int>(get("--num-query-groups", 1)) : m.heads;
  if (has("--num-query-groups") && !has("--group-query-attention"))
    job.notes.push_back("--num-query-groups has no effect without --group-query-attention (as in Megatron-LM)");
  const std::string norm = str("--normalization", "LayerNorm");
  const std::string pos = has("--use-rotary-position-embeddings") ? "rope" : str("--position-embedding-type", "learned_absolute");
  const bool swiglu = has("--swiglu");
  if (norm != "LayerNorm" && norm != "RMSNorm") return InvalidArgument("--normalization '" + norm + "': use LayerNorm or RMSNorm");
  if (pos != "learned_absolute" && pos != "rope")
    return InvalidArgument("--position-embedding-type " + pos + " is not modeled; dtplan models learned_absolute and rope");
  if ((norm == "RMSNorm") != swiglu)
    return InvalidArgument("--normalization " + norm + (swiglu ? " with" : " without") +
                           " --swiglu is not a family dtplan models (GPT: LayerNorm + GeLU; Llama: RMSNorm + --swiglu)");
  m.family = swiglu ? ModelFamily::kLlama : ModelFamily::kGpt;
  if (m.learned_positions() != (pos == "learned_absolute")) m.learned_pos_set = pos == "learned_absolute";
  const bool bias = !has("--disable-bias-linear");
  if (m.linear_bias() != bias) m.linear_bias_set = bias;
  m.qkv_bias = has("--add-qkv-bias") && !bias;
  m.qk_norm = has("--qk-layernorm");  // Qwen3: a norm over each head's q and k (what dtplan's export writes)
  m.tied_embeddings = !has("--untie-embeddings-and-output-weights");
  if (has("--kv-channels") && get("--kv-channels", 0) * m.heads != m.hidden) m.head_dim_set = static_cast<int>(get("--kv-channels", 0));
  // Megatron's default FFN width (arguments.py validate_args).
  const int64_t ffn_default = swiglu ? static_cast<int64_t>(4.0 * m.hidden * 2 / 3 / 64) * 64 : 4LL * m.hidden;
  m.ffn_hidden = static_cast<int>(get("--ffn-hidden-size", ffn_default));
  m.seq_length = static_cast<int>(get("--seq-length", 0));
  m.max_position = static_cast<int>(get("--max-position-embeddings", m.seq_length));
  const int tp = static_cast<int>(get("--tensor-model-parallel-size", 1));
  if (ints.count("--padded-vocab-size")) {
    m.vocab = static_cast<int>(get("--padded-vocab-size", 0));
  } else {
    int64_t vocab = get("--vocab-size", 0);
    const bool bpe_files = std::count(job.ignored.begin(), job.ignored.end(), "--merge-file") > 0;
    if (vocab == 0 && (str("--tokenizer-type", "") == "GPT2BPETokenizer" || (!has("--tokenizer-type") && bpe_files))) {
      vocab = kGpt2Vocab;
      job.notes.push_back("vocabulary: GPT-2 BPE (50257 tokens) from " +
                          std::string(has("--tokenizer-type") ? "--tokenizer-type GPT2BPETokenizer" : "--vocab-file/--merge-file"));
    }
    if (vocab == 0)
      return InvalidArgument("the vocabulary size is unknown (it comes from the tokenizer files); add --vocab-size N");
    const int64_t padded = MegatronPaddedVocab(vocab, get("--make-vocab-size-divisible-by", 128), tp);
    if (padded != vocab)
      job.notes.push_back("vocabulary " + std::to_string(vocab) + " padded to " + std::to_string(padded) +
                          " as Megatron-LM does (multiple of --make-vocab-size-divisible-by x tp)");
    m.vocab = static_cast<int>(padded);
  }
  DT_ASSIGN_OR_RETURN(const double attn_dropout, ParseFloat("--attention-dropout", str("--attention-dropout", "0.1")));
  DT_ASSIGN_OR_RETURN(const double hidden_dropout, ParseFloat("--hidden-dropout", str("--hidden-dropout", "0.1")));
  if (attn_dropout < 0 || hidden_dropout < 0) return InvalidArgument("--attention-dropout / --hidden-dropout must be >= 0");
  const bool dropout = attn_dropout > 0 || hidden_dropout > 0;
  if (m.uses_dropout() != dropout) m.dropout_set = dropout;
  // Numerics dtrun applies (the planner prices them alike); Megatron-LM's defaults.
  DT_ASSIGN_OR_RETURN(m.rope_theta, ParseFloat("--rotary-base", str("--rotary-base", "10000")));
  DT_ASSIGN_OR_RETURN(m.rms_norm_eps, ParseFloat("--norm-epsilon", str("--norm-epsilon", "1e-5")));
  if (m.rope_theta <= 0 || m.rms_norm_eps <= 0) return InvalidArgument("--rotary-base / --norm-epsilon must be > 0");
  m.rope_scaled = has("--use-rope-scaling") || has("--rotary-seq-len-interpolation-factor");
  DT_ASSIGN_OR_RETURN(m.rotary_fraction, ParseFloat("--rotary-percent", str("--rotary-percent", "1.0")));
  // Multi-latent attention (Megatron's MLATransformerConfig defaults).
  if (has("--multi-latent-attention")) {
    m.q_lora_rank = static_cast<int>(get("--q-lora-rank", 0));
    m.kv_lora_rank = static_cast<int>(get("--kv-lora-rank", 32));
    m.qk_nope_head_dim = static_cast<int>(get("--qk-head-dim", 128));
    m.qk_rope_head_dim = static_cast<int>(get("--qk-pos-emb-head-dim", 64));
    m.v_head_dim = static_cast<int>(get("--v-head-dim", 128));
    m.head_dim_set = m.qk_nope_head_dim + m.qk_rope_head_dim;
    m.kv_heads = m.heads;
  } else {
    for (const char* f : {"--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim"})
      if (has(f)) return InvalidArgument(std::string(f) + " needs --multi-latent-attention");
  }
  m.mtp_layers = static_cast<int>(get("--mtp-num-layers", 0));  // on the last stage (ModelSpec::mtp_layers)
  // Mixture of experts.
  if (has("--num-experts")) {
    m.num_experts = static_cast<int>(get("--num-experts", 0));
    m.moe_top_k = static_cast<int>(get("--moe-router-topk", 2));  // Megatron's default
    m.moe_ffn_hidden = static_cast<int>(get("--moe-ffn-hidden-size", m.ffn_hidden));
    m.shared_ffn_hidden = static_cast<int>(get("--moe-shared-expert-intermediate-size", 0));
    if (has("--moe-layer-freq")) {
      DT_RETURN_IF_ERROR(ReadMoeLayerFreq(v.at("--moe-layer-freq"), &m));
    }
    const std::string dispatcher = str("--moe-token-dispatcher-type", "allgather");
    if (dispatcher != "alltoall" && dispatcher != "flex")
      return InvalidArgument("--moe-token-dispatcher-type " + dispatcher +
                             " is not modeled; dtplan prices the alltoall dispatcher and the flex dispatcher with "
                             "DeepEP (use --moe-token-dispatcher-type alltoall)");
    if (dispatcher == "flex" && !has("--moe-enable-deepep"))
      return InvalidArgument("--moe-token-dispatcher-type flex needs --moe-enable-deepep (Megatron-LM's flex "
                             "dispatcher runs DeepEP)");
    if (has("--moe-enable-deepep") && dispatcher != "flex")
      return InvalidArgument("--moe-enable-deepep needs --moe-token-dispatcher-type flex");
    if (!has("--moe-grouped-gemm"))
      job.notes.push_back("experts priced as Transformer Engine's grouped GEMM (--moe-grouped-gemm: one GEMM call "
                          "per local expert); without it Megatron-LM loops over its experts in Python, with host "
                          "overhead per expert that is not priced");
  } else {
    for (const char* f : {"--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
                          "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--moe-layer-freq",
                          "--moe-token-dispatcher-type", "--moe-grouped-gemm", "--moe-enable-deepep"})
      if (has(f)) return InvalidArgument(std::string(f) + " needs --num-experts");
  }
  m.source_type = "megatron";
  DT_RETURN_IF_ERROR(Validate(m, "the Megatron-LM command"));

  // Plan.
  PlanSpec& p = job.plan;
  p.tp = tp;
  p.pp = static_cast<int>(get("--pipeline-model-parallel-size", 1));
  p.cp = static_cast<int>(get("--context-parallel-size", 1));
  p.ep = static_cast<int>(get("--expert-model-parallel-size", 1));
  if (m.moe() && str("--moe-token-dispatcher-type", "") == "flex") p.moe_dispatcher = MoeDispatcher::kDeduplicated;
  // Expert TP: Megatron's default is TP; a smaller one folds EP over TP x DP
  // (checked with the rest of the plan by Validate below).
  if (m.moe()) {
    const int64_t etp = get("--expert-tensor-parallel-size", p.tp);
    if (etp < 1 || etp > p.tp || p.tp % etp != 0)
      return InvalidArgument("--expert-tensor-parallel-size " + std::to_string(etp) +
                             " must divide --tensor-model-parallel-size " + std::to_string(p.tp));
    p.etp = etp == p.tp ? 0 : static_cast<int>(etp);
  }
  if (p.tp < 1 || p.pp < 1 || p.cp < 1) return InvalidArgument("parallel sizes must be >= 1");
  if (world == 0 && job.launcher_nodes > 0 && job.launcher_gpus_per_node > 0)
    world = job.launcher_nodes * job.launcher_gpus_per_node;
  if (world == 0) return InvalidArgument("the world size is unknown: give --nodes and --gpus (or paste the torchrun line too)");
  const int64_t model_ranks = static_cast<int64_t>(p.tp) * p.pp * p.cp;
  if (world % model_ranks != 0)
    return InvalidArgument("world size " + std::to_string(world) + " is not divisible by tp x pp x cp = " +
                           std::to_string(model_ranks) + "; check --nodes/--gpus");
  p.dp = static_cast<int>(world / model_ranks);
  p.seq_length = m.seq_length;
  p.micro_batch = static_cast<int>(get("--micro-batch-size", 1));
  if (p.micro_batch < 1) return InvalidArgument("--micro-batch-size must be >= 1");
  const int64_t gbs = get("--global-batch-size", static_cast<int64_t>(p.micro_batch) * p.dp);
  if (gbs < 1 || gbs % (static_cast<int64_t>(p.micro_batch) * p.dp) != 0)
    return InvalidArgument("--global-batch-size " + std::to_string(gbs) + " is not divisible by --micro-batch-size x dp = " +
                           std::to_string(p.micro_batch) + " x " + std::to_string(p.dp));
  p.num_microbatches = static_cast<int>(gbs / (static_cast<int64_t>(p.micro_batch) * p.dp));
  // Layer split (arguments.py validate_args; pipeline_parallel_layer_layout.py).
  if (has("--pipeline-model-parallel-layout")) {
    int layout_mtp = 0;
    DT_ASSIGN_OR_RETURN(p.layers_per_chunk, ParseMegatronLayout(v.at("--pipeline-model-parallel-layout"), &layout_mtp));
    if (layout_mtp != m.mtp_layers)
      return InvalidArgument("--pipeline-model-parallel-layout places " + std::to_string(layout_mtp) +
                             " MTP layer(s) ('m') but --mtp-num-layers is " + std::to_string(m.mtp_layers) +
                             "; make them agree");
    if (p.layers_per_chunk.size() % p.pp != 0)
      return InvalidArgument("--pipeline-model-parallel-layout has " + std::to_string(p.layers_per_chunk.size()) +
                             " stages, not a multiple of --pipeline-model-parallel-size " + std::to_string(p.pp));
    p.vpp = static_cast<int>(p.layers_per_chunk.size()) / p.pp;
  } else if (has("--account-for-embedding-in-pipeline-split") || has("--account-for-loss-in-pipeline-split")) {
    // Megatron-core counts the embedding and / or the loss as one layer each
    // when splitting: (num_layers + those) / (pp * vpp) per model chunk, the
    // first chunk one real layer fewer (embedding), the last one fewer (loss).
    const int emb = has("--account-for-embedding-in-pipeline-split") ? 1 : 0;
    const int loss = has("--account-for-loss-in-pipeline-split") ? 1 : 0;
    if (has("--num-layers-per-virtual-pipeline-stage") || has("--decoder-first-pipeline-num-layers") ||
        has("--decoder-last-pipeline-num-layers"))
      return InvalidArgument("--account-for-embedding/loss-in-pipeline-split with --num-layers-per-virtual-pipeline-stage "
                             "or --decoder-first/last-pipeline-num-layers is not read by dtplan; give "
                             "--num-virtual-stages-per-pipeline-rank or --pipeline-model-parallel-layout");
    const int vs = static_cast<int>(get("--num-virtual-stages-per-pipeline-rank", 1));
    const int64_t chunks = static_cast<int64_t>(p.pp) * std::max(vs, 1);
    const int64_t total = static_cast<int64_t>(m.num_layers) + emb + loss;
    const int64_t per = chunks > 0 ? total / chunks : 0;
    const bool room = chunks == 1 ? per - emb - loss >= 1 : per - std::max(emb, loss) >= 1;
    if (vs < 1 || total % chunks != 0 || !room)
      return InvalidArgument("--num-layers " + std::to_string(m.num_layers) + " plus the embedding / loss counted as " +
                             "layers (" + std::to_string(total) + ") does not split evenly into pp x vpp = " +
                             std::to_string(chunks) + " chunks of at least one real layer (Megatron-LM refuses it too)");
    p.vpp = static_cast<int>(chunks / p.pp);
    p.layers_per_chunk.assign(chunks, static_cast<int>(total / chunks));
    p.layers_per_chunk.front() -= emb;
    p.layers_per_chunk.back() -= loss;
  } else {
    int chunk_layers = 0;
    if (has("--num-layers-per-virtual-pipeline-stage")) chunk_layers = static_cast<int>(get("--num-layers-per-virtual-pipeline-stage", 0));
    if (has("--num-virtual-stages-per-pipeline-rank")) {
      const int vs = static_cast<int>(get("--num-virtual-stages-per-pipeline-rank", 1));
      if (vs < 1 || m.num_layers % (p.pp * vs) != 0)
        return InvalidArgument("--num-virtual-stages-per-pipeline-rank " + std::to_string(vs) + " does not split the " +
                               std::to_string(m.num_layers) + " layers evenly over pp x vpp");
      chunk_layers = m.num_layers / (p.pp * vs);
    }
    if (chunk_layers > 0) {
      if (m.num_layers % (static_cast<int64_t>(chunk_layers) * p.pp) != 0)
        return InvalidArgument("--num-layers-per-virtual-pipeline-stage " + std::to_string(chunk_layers) +
                               " does not split the " + std::to_string(m.num_layers) + " layers over " +
                               std::to_string(p.pp) + " pipeline ranks");
      p.vpp = m.num_layers / (chunk_layers * p.pp);
      p.layers_per_chunk.assign(p.pp * p.vpp, chunk_layers);
    } else if (has("--decoder-first-pipeline-num-layers") || has("--decoder-last-pipeline-num-layers")) {
      const int first = static_cast<int>(get("--decoder-first-pipeline-num-layers", -1));
      const int last = static_cast<int>(get("--decoder-last-pipeline-num-layers", -1));
      const int fixed_stages = (first >= 0) + (last >= 0);
      const int rest = m.num_layers - std::max(first, 0) - std::max(last, 0);
      const int middle = p.pp - fixed_stages;
      if (p.pp < 2 || rest < 0 || (middle > 0 && rest % middle != 0) || (middle == 0 && rest != 0))
        return InvalidArgument("--decoder-first/last-pipeline-num-layers do not split the " +
                               std::to_string(m.num_layers) + " layers evenly over the other pipeline stages");
      p.layers_per_chunk.assign(p.pp, middle > 0 ? rest / middle : 0);
      if (first >= 0) p.layers_per_chunk.front() = first;
      if (last >= 0) p.layers_per_chunk.back() = last;
    } else {
      if (m.num_layers % p.pp != 0)
        return InvalidArgument("--num-layers " + std::to_string(m.num_layers) + " is not divisible by --pipeline-model-parallel-size " +
                               std::to_string(p.pp) + " (Megatron-LM refuses it too); give --pipeline-model-parallel-layout");
      p.layers_per_chunk.assign(p.pp, m.num_layers / p.pp);
    }
  }
  p.schedule = p.vpp > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
  p.sequence_parallel = has("--sequence-parallel") && p.tp > 1;
  if (has("--sequence-parallel") && p.tp == 1)
    job.notes.push_back("--sequence-parallel has no effect with tp = 1 (Megatron-LM turns it off)");
  const std::string granularity = str("--recompute-granularity", "");
  if (granularity == "selective") {
    p.recompute = Recompute::kSelective;
  } else if (granularity == "full") {
    const std::string method = str("--recompute-method", "uniform");
    const int64_t n = get("--recompute-num-layers", 1);
    if (method == "block") {
      // The first n layers of every model chunk recomputed, the rest not.
      if (n < 1) return InvalidArgument("--recompute-method block --recompute-num-layers " + std::to_string(n) +
                                        ": use a layer count >= 1");
      p.recompute_num_layers = static_cast<int>(std::min<int64_t>(n, m.num_layers));
    } else if (method != "uniform" || n != 1) {
      return InvalidArgument("--recompute-method " + method + " --recompute-num-layers " + std::to_string(n) +
                             " is not modeled; dtplan models full recompute of every layer (--recompute-method uniform "
                             "--recompute-num-layers 1), of the first N layers of each chunk (--recompute-method "
                             "block --recompute-num-layers N) or --recompute-granularity selective");
    }
    p.recompute = Recompute::kFull;
  } else if (!granularity.empty()) {
    return InvalidArgument("--recompute-granularity '" + granularity + "': use full or selective");
  }
  DT_RETURN_IF_ERROR(ReadRecomputeModules(v, granularity, m, &p, &job.notes));
  DT_RETURN_IF_ERROR(ReadCudaGraphs(v, m, &p, &job.notes));
  if (has("--use-torch-fsdp2")) {
    p.zero_stage = 3;
  } else if (has("--use-megatron-fsdp")) {
    const std::string s = str("--data-parallel-sharding-strategy", "no_shard");
    const std::map<std::string, int> stages = {{"no_shard", 0}, {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}};
    if (!stages.count(s)) return InvalidArgument("--data-parallel-sharding-strategy '" + s + "' is unknown");
    p.zero_stage = stages.at(s);
  } else if (has("--use-distributed-optimizer")) {
    p.zero_stage = 1;
  }
  if (p.dp * p.cp == 1 && p.zero_stage > 0) {
    job.notes.push_back("ZeRO / distributed optimizer has nothing to shard with dp x cp = 1; priced as stage 0");
    p.zero_stage = 0;
  }
  const std::string backend = str("--attention-backend", has("--use-flash-attn") ? "flash" : "auto");
  if (backend != "flash" && backend != "fused" && backend != "auto" && backend != "unfused" && backend != "local")
    return InvalidArgument("--attention-backend '" + backend + "': use flash, fused, unfused, local or auto");
  p.flash_attention = backend == "flash" || backend == "fused" || backend == "auto";
  // fused: Transformer Engine's FusedAttention, cuDNN's kernel, chosen by the
  // job itself; priced with the profile's cuDNN curve (PlanSpec::
  // cudnn_attention). auto and flash keep the profile's default rate.
  p.cudnn_attention = backend == "fused";
  p.dropout = m.uses_dropout();
  job.bf16 = has("--bf16") || has("--fp16");
  if (has("--fp8-format")) {
    const std::string fmt = v.at("--fp8-format"), recipe = str("--fp8-recipe", "delayed");
    if (fmt != "hybrid" && fmt != "e4m3")
      return InvalidArgument("--fp8-format '" + fmt + "': use hybrid or e4m3");
    auto r = ParseFp8Recipe(recipe);
    if (!r.ok()) return InvalidArgument("--fp8-recipe " + recipe + ": " + r.status().message());
    p.precision = Precision::kFp8;  // e4m3 and hybrid: same bytes and Tensor Core rate
    p.fp8_recipe = *r;
  } else if (has("--fp8-recipe")) {
    return InvalidArgument("--fp8-recipe needs --fp8-format");
  }
  p.moe_a2a_overlap = has("--overlap-moe-expert-parallel-comm");  // Validate checks Megatron's rules
  p.moe_shared_expert_overlap = has("--moe-shared-expert-overlap");
  p.delay_wgrad_compute = has("--delay-wgrad-compute");
  p.overlap_dispatch_backward_wgrad = has("--overlap-dispatch-backward-with-experts-wgrad");
  p.tp_comm_overlap = has("--tp-comm-overlap");  // Validate: tp > 1 and --sequence-parallel, as Megatron requires
  // Token dropping: Megatron-LM reads a negative capacity factor as none
  // (dropless); Validate checks the rest (MoE, the all-to-all dispatcher,
  // padding only with a capacity).
  if (has("--moe-expert-capacity-factor")) {
    DT_ASSIGN_OR_RETURN(const double cf,
                        ParseFloat("--moe-expert-capacity-factor", v.at("--moe-expert-capacity-factor")));
    if (cf == 0)
      return InvalidArgument("--moe-expert-capacity-factor 0 would drop every routed token; use a positive factor, "
                             "or a negative one (or none) for dropless");
    p.moe_capacity_factor = cf < 0 ? 0 : cf;
  }
  p.moe_pad_to_capacity = has("--moe-pad-expert-input-to-capacity");
  // Megatron-LM's loss is unfused unless the flag is given; both
  // --cross-entropy-fusion-impl values (native, te) are one fused pass.
  p.cross_entropy_fusion = has("--cross-entropy-loss-fusion");
  if (has("--cross-entropy-fusion-impl")) {
    const std::string impl = v.at("--cross-entropy-fusion-impl");
    if (impl != "native" && impl != "te")
      return InvalidArgument("--cross-entropy-fusion-impl '" + impl + "': use native or te");
  }
  if (has("--fp8-param-gather")) {
    if (p.precision != Precision::kFp8) return InvalidArgument("--fp8-param-gather needs --fp8-format (FP8 training)");
    if (p.zero_stage != 1)
      return InvalidArgument("--fp8-param-gather is modeled with the distributed optimizer only; add "
                             "--use-distributed-optimizer (Megatron-FSDP / torch FSDP2 with FP8 parameters are not modeled)");
    p.fp8_param_gather = true;
  }
  // Precision-aware optimizer (Transformer Engine's FusedAdam): Adam's m and
  // v in a narrower dtype, the master weights and main gradients as given.
  if (has("--use-precision-aware-optimizer")) {
    const std::string avg = str("--exp-avg-dtype", "fp32"), sq = str("--exp-avg-sq-dtype", "fp32");
    if (avg != sq)
      return InvalidArgument("--exp-avg-dtype " + avg + " with --exp-avg-sq-dtype " + sq +
                             ": Adam moments of two different dtypes are not modeled; give both the same");
    if (avg == "bf16" || avg == "fp16") p.adam_moment_bytes = 2;
    else if (avg != "fp32")
      return InvalidArgument("--exp-avg-dtype " + avg + " is not modeled (dtplan models fp32, bf16 and fp16 moments)");
    if (str("--main-params-dtype", "fp32") != "fp32")
      return InvalidArgument("--main-params-dtype " + str("--main-params-dtype", "") +
                             " is not modeled (dtplan keeps fp32 master weights)");
    const std::string grads = str("--main-grads-dtype", "fp32");
    if (grads == "bf16") p.grad_bytes = 2;
    else if (grads != "fp32") return InvalidArgument("--main-grads-dtype " + grads + " is not modeled");
  } else if (has("--exp-avg-dtype") || has("--exp-avg-sq-dtype") || has("--main-params-dtype") ||
             has("--main-grads-dtype")) {
    job.notes.push_back("--exp-avg-dtype / --exp-avg-sq-dtype / --main-params-dtype / --main-grads-dtype have no effect "
                        "without --use-precision-aware-optimizer (as in Megatron-LM)");
  }
  if (has("--fp16")) job.notes.push_back("--fp16 is priced as bf16 (same bytes and tensor-core rate)");
  // Without --overlap-grad-reduce (Megatron-LM's default) the reduction
  // runs after the whole backward: priced so (PlanSpec::overlap_grad_reduce).
  p.overlap_grad_reduce = has("--overlap-grad-reduce") || p.dp * p.cp == 1;
  // Interleaved sends overlap the next chunk's compute unless
  // --no-overlap-p2p-communication (Megatron-LM's default since 2024;
  // releases before it had the opt-in --overlap-p2p-communication, also
  // accepted); other schedules block whatever the flags say.
  // --overlap-p2p-communication-warmup-flush extends the overlap to the
  // warmup and flush, which the overlapped plan already assumes.
  p.overlap_p2p_comm = !has("--no-overlap-p2p-communication");
  DT_RETURN_IF_ERROR(Validate(p, m, "the Megatron-LM command"));
  return job;
}

}  // namespace dt
