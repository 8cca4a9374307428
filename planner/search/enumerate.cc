#include "planner/search/enumerate.h"

#include <algorithm>
#include <map>

#include "planner/spec/capabilities.h"

namespace dt {
namespace {

std::vector<int> Divisors(int64_t n) {
  std::vector<int> d;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i == 0) {
      d.push_back(static_cast<int>(i));
      if (i != n / i) d.push_back(static_cast<int>(n / i));
    }
  }
  std::sort(d.begin(), d.end());
  return d;
}

template <typename T>
std::vector<T> OneOr(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) return {*fixed};
  return all;
}

std::string Num(int64_t v) { return std::to_string(v); }

}  // namespace

StatusOr<Enumeration> EnumeratePlans(const ModelSpec& m, const ClusterSpec& c,
                                     const SearchConstraints& k) {
  const int world = c.world();
  if (k.global_batch <= 0) return InvalidArgument("--global-batch must be > 0");
  if (k.seq_length <= 0) return InvalidArgument("--seq-length must be > 0");
  // Fixed dimensions that can never work, reported before searching.
  if (k.tp && (*k.tp < 1 || m.heads % *k.tp != 0))
    return InvalidArgument("--tp " + Num(k.tp.value_or(0)) + " does not divide the " +
                           Num(m.heads) + " attention heads; use a divisor of " + Num(m.heads));
  for (auto [name, v] : {std::pair<const char*, std::optional<int>>{"--dp", k.dp},
                         {"--tp", k.tp}, {"--pp", k.pp}, {"--cp", k.cp}}) {
    if (v && (*v < 1 || world % *v != 0))
      return InvalidArgument(std::string(name) + " " + Num(*v) + " does not divide the world of " +
                             Num(world) + " devices (" + Num(c.nodes) + " nodes x " +
                             Num(c.gpus_per_node) + "); choose a divisor of " + Num(world));
  }
  if (k.pp && *k.pp > m.num_layers)
    return InvalidArgument("--pp " + Num(*k.pp) + " exceeds the model's " + Num(m.num_layers) +
                           " layers; use --pp <= " + Num(m.num_layers));
  if (k.micro_batch && (*k.micro_batch < 1 || k.global_batch % *k.micro_batch != 0))
    return InvalidArgument("--mbs " + Num(*k.micro_batch) + " does not divide --global-batch " +
                           Num(k.global_batch));
  if (k.vpp && *k.vpp > 1 && k.schedule && *k.schedule != Schedule::kInterleaved)
    return InvalidArgument("--vpp > 1 needs --schedule interleaved");
  if (k.sequence_parallel && *k.sequence_parallel && k.tp && *k.tp == 1)
    return InvalidArgument("--sp needs --tp > 1");
  if (k.zero_stage && (*k.zero_stage < 0 || *k.zero_stage > 3))
    return InvalidArgument("--zero must be 0, 1, 2 or 3");
  if (k.ep && *k.ep != 1 && !m.moe())
    return InvalidArgument("--ep " + Num(*k.ep) + ": the model has no experts; drop --ep (or use --ep 1)");
  if (k.moe_dispatcher != MoeDispatcher::kAllToAll && !m.moe())
    return InvalidArgument("--moe-dispatcher deduplicated: the model has no experts; drop --moe-dispatcher");
  if (k.etp && !m.moe())
    return InvalidArgument("--etp " + Num(*k.etp) + ": the model has no experts; drop --etp");
  if (k.etp && *k.etp < 1) return InvalidArgument("--etp must be >= 1");
  if (k.tp_comm_overlap && k.tp && *k.tp < 2)
    return InvalidArgument("--tp-comm-overlap overlaps tensor-parallel collectives: it needs tp > 1; drop it or raise --tp");
  if (k.tp_comm_overlap && k.sequence_parallel && !*k.sequence_parallel)
    return InvalidArgument("--tp-comm-overlap needs sequence parallelism (as Megatron-LM does): drop --no-sp or it");
  if (k.moe_router_cuda_graph && !m.moe())
    return InvalidArgument("--moe-router-cuda-graph: the model has no experts; drop it");
  if (k.moe_router_cuda_graph && c.device == "cpu")
    return InvalidArgument("--moe-router-cuda-graph prices a GPU framework's CUDA graphs; CPU plans run dtrun, "
                           "which launches no graphs: drop it (or plan for --device gpu)");
  if (k.cudnn_attention && c.device == "cpu")
    return InvalidArgument("--attention-kernel cudnn prices a GPU framework's kernel; CPU plans run dtrun's own "
                           "attention: drop it (or plan for --device gpu)");
  if (k.cudnn_attention && !k.flash_attention)
    return InvalidArgument("--attention-kernel cudnn prices cuDNN's fused attention: the plans run the unfused "
                           "core (flash attention off); drop one of the two");
  {
    PlanSpec probe;  // the capacity against the model and the dispatcher, as Validate checks every plan
    probe.moe_capacity_factor = k.moe_capacity_factor;
    probe.moe_pad_to_capacity = k.moe_pad_to_capacity;
    probe.moe_dispatcher = k.moe_dispatcher;
    if (Status s = CheckMoeCapacity(probe, m); !s.ok())
      return InvalidArgument("--moe-capacity-factor / --moe-pad-to-capacity: " + s.message());
  }
  if (k.moe_a2a_overlap && !m.moe())
    return InvalidArgument("--moe-a2a-overlap overlaps expert-parallel all-to-alls: the model has no experts; drop it");
  if (k.moe_shared_expert_overlap && !m.moe())
    return InvalidArgument("--moe-shared-expert-overlap overlaps an MoE block's shared experts with its dispatch: the "
                           "model has no experts; drop it");
  if (k.overlap_dispatch_backward_wgrad && !m.moe())
    return InvalidArgument("--overlap-dispatch-backward-with-experts-wgrad: the model has no experts; drop it");
  if (k.overlap_dispatch_backward_wgrad && k.moe_a2a_overlap)
    return InvalidArgument("--overlap-dispatch-backward-with-experts-wgrad with --moe-a2a-overlap: Megatron-LM refuses "
                           "the pair (--delay-wgrad-compute is the overlap's counterpart); keep one");
  if (k.delay_wgrad_compute && !k.moe_a2a_overlap)
    return InvalidArgument("--delay-wgrad-compute needs --moe-a2a-overlap (Megatron-LM's rule); add it or drop the flag");
  if (k.moe_shared_expert_overlap && k.moe_a2a_overlap)
    return InvalidArgument("--moe-shared-expert-overlap with --moe-a2a-overlap: Megatron-LM refuses the pair; keep one");
  if (k.moe_a2a_overlap && k.recompute && *k.recompute == Recompute::kFull)
    return InvalidArgument("--moe-a2a-overlap with --recompute full: Megatron-LM refuses the pair; use none or selective");
  // Modules apply to the selective plans (all of them when --recompute is
  // fixed to selective, as the CLI requires; --from-megatron carries a job's
  // modules into a search over every recompute mode).
  if (k.recompute_modules != kDefaultRecomputeModules && (!k.recompute || *k.recompute == Recompute::kSelective)) {
    PlanSpec probe;  // the modules against the model and the other fixed choices
    probe.recompute = Recompute::kSelective;
    probe.recompute_modules = k.recompute_modules;
    probe.precision = k.precision;
    probe.fp8_recipe = k.fp8_recipe;
    probe.moe_a2a_overlap = k.moe_a2a_overlap;
    if (Status s = CheckRecomputeModules(probe, m); !s.ok()) return InvalidArgument("--recompute-modules: " + s.message());
  }
  if (k.recompute_num_layers < 0) return InvalidArgument("--recompute-layers must be >= 1");
  if (k.recompute_num_layers > 0 && k.recompute && *k.recompute != Recompute::kFull)
    return InvalidArgument("--recompute-layers chooses how many layers of each chunk full recompute covers: add "
                           "--recompute full");
  if (k.fp8_recipe != Fp8Recipe::kDelayed && k.precision != Precision::kFp8)
    return InvalidArgument(std::string("--fp8-recipe ") + ToString(k.fp8_recipe) + " scales FP8 tensors: it needs --precision fp8");
  if (k.fp8_param_gather && k.precision != Precision::kFp8)
    return InvalidArgument("--fp8-param-gather keeps the weights in FP8: it needs --precision fp8");
  if (k.fp8_param_gather && k.zero_stage && *k.zero_stage != 1)
    return InvalidArgument("--fp8-param-gather needs the distributed optimizer: use --zero 1 (or drop --zero)");
  if (k.etp && k.tp && *k.tp % *k.etp != 0)
    return InvalidArgument("--etp " + Num(*k.etp) + " does not divide --tp " + Num(*k.tp) + "; use a divisor of tp");
  if (k.ep && (*k.ep < 1 || (m.moe() && m.num_experts % *k.ep != 0)))
    return InvalidArgument("--ep " + Num(*k.ep) + " does not divide the model's " + Num(m.num_experts) +
                           " experts; use a divisor of " + Num(m.num_experts));
  if (m.mtp_layers > 0 && k.zero_stage && *k.zero_stage > 1)
    return InvalidArgument("--zero " + Num(*k.zero_stage) + " with multi-token prediction layers is not modeled "
                           "(ZeRO-2/3 units of the MTP modules); use --zero 0 or 1");
  if (m.moe() && k.zero_stage && *k.zero_stage > 1)
    return InvalidArgument("--zero " + Num(*k.zero_stage) + " with a mixture-of-experts model is not modeled "
                           "(ZeRO-2/3 of expert parameters); use --zero 0 or 1");
  if (m.moe() && k.sequence_parallel && !*k.sequence_parallel && k.tp && *k.tp > 1)
    return InvalidArgument("--sp false with a mixture-of-experts model: tp > 1 needs sequence parallelism "
                           "(as Megatron-LM requires); drop --sp false or use --tp 1");

  // Plans for CPU ranks are plans for the bundled runtime: the model itself
  // must be one it executes (checked once here with a neutral plan).
  const bool cpu_runtime = c.device == "cpu";
  if (cpu_runtime) {
    PlanSpec probe;
    probe.flash_attention = k.flash_attention;
    probe.cross_entropy_fusion = k.cross_entropy_fusion;
    probe.dropout = k.dropout;
    if (k.recompute && *k.recompute == Recompute::kSelective) {  // the modules are a fixed choice too
      probe.recompute = Recompute::kSelective;
      probe.recompute_modules = k.recompute_modules;
    }
    if (Status s = CheckExecutable(m, probe, RuntimeDevice::kCpu); !s.ok())
      return InvalidArgument("--device cpu plans for the bundled runtime: " + s.message());
  }
  Enumeration e;
  // AccountedSplit depends on the chunk count only: computed once per count
  // (the loop below asks for it at every plan).
  std::map<int, std::vector<int>> accounted_splits;
  auto accounted_split = [&](int chunks) -> const std::vector<int>& {
    auto it = accounted_splits.find(chunks);
    if (it == accounted_splits.end()) it = accounted_splits.emplace(chunks, AccountedSplit(m, chunks)).first;
    return it->second;
  };
  std::map<int, std::vector<int>> even_splits;  // likewise EvenSplit
  auto even_split = [&](int chunks) -> const std::vector<int>& {
    auto it = even_splits.find(chunks);
    if (it == even_splits.end()) it = even_splits.emplace(chunks, EvenSplit(m.num_layers, chunks)).first;
    return it->second;
  };
  // Context parallelism is searched only for long sequences (>= 16k tokens)
  // where activations force it; shorter sequences use cp = 1 unless fixed.
  std::vector<int> cps = k.cp ? std::vector<int>{*k.cp}
                              : (k.seq_length >= 16384 ? std::vector<int>{1, 2, 4, 8}
                                                       : std::vector<int>{1});
  for (int tp : OneOr(k.tp, Divisors(world))) {
    for (int cp : cps) {
      for (int pp : OneOr(k.pp, Divisors(world))) {
        if (world % (static_cast<int64_t>(tp) * cp * pp) != 0) continue;
        int dp = world / (tp * cp * pp);
        if (k.dp && dp != *k.dp) continue;
        ++e.grids_considered;
        if (m.heads % tp != 0) { ++e.grid_rejects["attention heads not divisible by tp"]; continue; }
        if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0) {
          ++e.grid_rejects["kv heads incompatible with tp"]; continue;
        }
        if (pp > m.num_layers) { ++e.grid_rejects["more pipeline stages than layers"]; continue; }
        if (cp > 1 && k.seq_length % (2 * cp) != 0) {
          ++e.grid_rejects["sequence not divisible by 2*cp"]; continue;
        }
        if (cp > 1 && m.WindowApplies(k.seq_length)) {  // Validate refuses it too (plan_spec.cc)
          ++e.grid_rejects[m.window_chunked ? "cp > 1 with chunked attention is not modeled"
                                            : "cp > 1 with sliding-window attention is not modeled"];
          continue;
        }
        if (k.global_batch % dp != 0) {
          ++e.grid_rejects["global batch not divisible by dp"]; continue;
        }
        const int64_t per_replica = k.global_batch / dp;
        std::vector<int> mbss;
        for (int b : Divisors(per_replica))
          if (b <= k.max_micro_batch) mbss.push_back(b);
        for (int mbs : OneOr(k.micro_batch, mbss)) {
          if (per_replica % mbs != 0) { ++e.plan_rejects["global batch not divisible by dp*mbs"]; ++e.plans_considered; continue; }
          const int nmb = static_cast<int>(per_replica / mbs);
          // (schedule, vpp) pairs; with pp == 1 all schedules coincide.
          std::vector<std::pair<Schedule, int>> scheds;
          if (pp == 1) {
            scheds.push_back({Schedule::k1F1B, 1});
          } else {
            for (Schedule s : {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved}) {
              if (k.schedule && *k.schedule != s) continue;
              if (s != Schedule::kInterleaved) {
                if (!k.vpp || *k.vpp == 1) scheds.push_back({s, 1});
                continue;
              }
              for (int v = 2; v <= k.max_vpp || (k.vpp && v <= *k.vpp); ++v)
                if (!k.vpp || *k.vpp == v) scheds.push_back({s, v});
            }
          }
          if (k.schedule && pp == 1 && *k.schedule == Schedule::kInterleaved) {
            ++e.plan_rejects["interleaved schedule needs pp >= 2"]; ++e.plans_considered; continue;
          }
          for (auto [sched, vpp] : scheds) {
            if (pp * vpp > m.num_layers) {
              ++e.plan_rejects["fewer layers than pp*vpp chunks"]; ++e.plans_considered; continue;
            }
            if (sched == Schedule::kInterleaved && nmb % pp != 0) {
              ++e.plan_rejects["interleaved needs microbatches divisible by pp"]; ++e.plans_considered; continue;
            }
            for (Recompute rc : OneOr(k.recompute, {Recompute::kNone, Recompute::kSelective, Recompute::kFull})) {
              std::vector<bool> sps = tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
              for (bool sp : OneOr<bool>(k.sequence_parallel, sps)) {
                if (sp && tp == 1) { ++e.plan_rejects["sequence parallel needs tp > 1"]; ++e.plans_considered; continue; }
                if (sp && (k.seq_length / cp) % tp != 0) {
                  ++e.plan_rejects["sequence not divisible by tp (sequence parallel)"]; ++e.plans_considered; continue;
                }
                if (m.moe() && tp > 1 && !sp) {
                  ++e.plan_rejects["MoE with tp > 1 needs sequence parallel"]; ++e.plans_considered; continue;
                }
                std::vector<int> zs = dp * cp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
                if (m.moe() || m.mtp_layers > 0) zs = dp * cp > 1 ? std::vector<int>{0, 1} : std::vector<int>{0};
                // Expert tensor parallelism: tp (EP over DP replicas) and,
                // with tp > 1, 1 (EP folded over tp*cp*dp; PlanSpec::etp).
                // Stored as 0 when equal to tp (the default, absent from plan files).
                std::vector<int> etps{0};
                if (m.moe() && tp > 1) etps.push_back(1);
                if (k.etp) {
                  if (tp % *k.etp != 0) { ++e.plan_rejects["--etp does not divide tp"]; ++e.plans_considered; continue; }
                  etps = {*k.etp == tp ? 0 : *k.etp};
                }
                for (int etp : etps) {
                // Expert parallelism: divisors of the experts and of dp, or
                // of tp*cp*dp/etp when folded (rank_grid.h, plan_spec.h).
                const int ep_room = etp == 0 ? dp : tp / etp * cp * dp;
                std::vector<int> eps{1};
                if (m.moe()) {
                  eps.clear();
                  for (int x : Divisors(ep_room))
                    if (m.num_experts % x == 0 && (etp == 0 || x > 1)) eps.push_back(x);
                }
                if (k.ep && ep_room % *k.ep != 0) {
                  ++e.plan_rejects[etp == 0 ? "--ep does not divide dp" : "--ep does not divide tp*cp*dp/etp"];
                  ++e.plans_considered; continue;
                }
                for (int z : OneOr(k.zero_stage, zs))
                for (int ep : OneOr(k.ep, eps)) {
                  ++e.plans_considered;
                  PlanSpec p;
                  p.dp = dp; p.tp = tp; p.pp = pp; p.cp = cp; p.vpp = vpp; p.ep = ep; p.etp = etp;
                  p.micro_batch = mbs; p.num_microbatches = nmb; p.seq_length = k.seq_length;
                  p.schedule = sched; p.recompute = rc; p.sequence_parallel = sp; p.zero_stage = z;
                  CopyPlanSettings(k, &p);
                  // Where it applies: the other plans have no SP collectives to hide.
                  p.tp_comm_overlap = k.tp_comm_overlap && tp > 1 && sp;
                  // DeepSpeed overlaps the gradient reduction with the
                  // backward only under ZeRO without a pipeline
                  // (DeepSpeedOverlapsGradReduce): its plans are priced so.
                  p.overlap_grad_reduce = k.overlap_grad_reduce &&
                                          (k.framework != Framework::kDeepSpeed || DeepSpeedOverlapsGradReduce(z, pp));
                  if (p.moe_a2a_overlap) {
                    const char* why = ep < 2 ? "--moe-a2a-overlap needs ep > 1"
                                      : rc == Recompute::kFull ? "--moe-a2a-overlap refuses full recompute"
                                      : pp > 1 && sched != Schedule::kInterleaved
                                          ? "--moe-a2a-overlap with pp > 1 needs the interleaved schedule"
                                          : nullptr;
                    if (why) {
                      ++e.plan_rejects[why];
                      continue;
                    }
                  }
                  if (k.fp8_param_gather && !p.fp8_param_gather) {
                    ++e.plan_rejects["--fp8-param-gather needs the distributed optimizer (zero 1)"];
                    continue;
                  }
                  p.layers_per_chunk = even_split(pp * vpp);
                  if (cpu_runtime) {  // never emit a CPU plan dtrun cannot execute
                    const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
                    if (!missing.empty()) {
                      ++e.plan_rejects[std::string("CPU runtime does not execute ") + CapabilityOf(missing[0]).name];
                      continue;
                    }
                  }
                  if (k.framework != Framework::kAny) {
                    const std::vector<std::string> why = Inexpressible(k.framework, m, p);
                    if (!why.empty()) {
                      ++e.plan_rejects[std::string(DisplayName(k.framework)) + " has " + why[0]];
                      continue;
                    }
                  }
                  // The split that counts the embedding and the head (and
                  // MTP modules) as layers, beside the even one: it
                  // balances the end stages and can fit where the even
                  // split does not (PlanSpec AccountedSplit).
                  using Split = SearchConstraints::Split;
                  const bool has_accounted =
                      pp > 1 && k.split != Split::kEven && !accounted_split(pp * vpp).empty();
                  if (has_accounted) {
                    PlanSpec q = p;
                    q.layers_per_chunk = accounted_split(pp * vpp);
                    if (k.split == Split::kBoth) ++e.plans_considered;
                    e.plans.push_back(std::move(q));
                  }
                  // kAccounted keeps the even split only where the two agree.
                  if (k.split != Split::kAccounted || !has_accounted) e.plans.push_back(std::move(p));
                }
                }  // etp
              }
            }
          }
        }
      }
    }
  }
  if (e.grids_considered == 0)
    return InvalidArgument("no dp x tp x pp x cp grid multiplies to the world of " + Num(world) +
                           " devices with the fixed dimensions given; relax --dp/--tp/--pp/--cp");
  return e;
}

}  // namespace dt
