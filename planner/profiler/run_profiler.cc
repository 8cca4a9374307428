#include "planner/profiler/run_profiler.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "planner/profiler/assemble.h"
#include "planner/profiler/bench_timer.h"
#include "planner/cost/layer_ops.h"
#include "planner/profiler/gemm_shapes.h"
#include "planner/profiler/measure_step_comm.h"
#include "planner/profiler/speed_check.h"
#include "planner/spec/model_spec.h"

namespace dt {
namespace {

double AllMaxD(rt::Comm& c, double v) {
  float f = static_cast<float>(v);
  c.AllReduce(&f, 1, rt::ReduceOp::kMax);
  return std::max(v, static_cast<double>(f));
}

// Same status on every rank: any rank's failure fails all.
bool AllOk(rt::Comm& c, bool ok) {
  float f = ok ? 0.0f : 1.0f;
  c.AllReduce(&f, 1, rt::ReduceOp::kMax);
  return f == 0.0f;
}

}  // namespace

int RunProfiler(const ProfilerOptions& o, const ProfilerDevice& dev, rt::MpiComm& world,
                const std::string& command) {
  const bool root = world.rank() == 0;
  const double t_start = NowSeconds();
  auto progress = [&](const std::string& line) {
    if (!o.progress || !root) return;
    std::fprintf(stderr, "[%7.1f s] %s\n", NowSeconds() - t_start, line.c_str());
    std::fflush(stderr);
  };
  Measurements ms;
  ms.reserved_bytes = static_cast<int64_t>(AllMaxD(world, static_cast<double>(CurrentRssBytes())));
  ms.machine = ReadMachineInfo();
  ms.name = o.name;
  ms.command = command;
  ms.device_kind = dev.kind;
  ms.gemm_library = dev.gemm_library;
  ms.device_name = dev.name.empty() ? ms.machine.cpu_model : dev.name;

  // Ranks per node: the ranks sharing this node's memory.
  MPI_Comm node_raw;
  DT_MPI_CHECK(MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node_raw));
  rt::MpiComm node(node_raw);
  ms.ranks_per_node = node.size();
  if (root && node.size() != world.size())
    std::cerr << "dtplan profile: note: " << world.size() << " ranks over several nodes; measuring the "
              << node.size() << " ranks of each node (inter-node tables are not measured)\n";
  if (root && o.ranks > 0 && o.ranks != world.size())
    std::cerr << "dtplan profile: note: --ranks " << o.ranks << " but running with " << world.size()
              << " ranks; the profile is for " << node.size() << " ranks per node\n";
#ifdef _OPENMP
  ms.threads_per_rank = omp_get_max_threads();
#endif
  ms.memory_bytes = dev.memory_bytes > 0 ? dev.memory_bytes : ms.machine.mem_total_bytes / std::max(1, node.size());

  // Models and shapes.
  std::vector<ModelSpec> models;
  std::string error;
  for (const std::string& path : o.models) {
    StatusOr<ModelSpec> m = LoadModel(path);
    if (!m.ok()) {
      error = m.status().message();
      break;
    }
    models.push_back(*m);
    ms.models.push_back(m->name);
  }
  if (!AllOk(world, error.empty())) {
    if (root) std::cerr << "dtplan: error: " << (error.empty() ? "a rank could not load a model" : error) << "\n";
    return 2;
  }
  if (!o.speed_check.empty()) return RunSpeedCheck(o, dev, world, models, node.size());
  const int max_tp = o.max_tp > 0 ? o.max_tp : node.size();
  std::vector<GemmShape> all = GenericGemmGrid(o.max_gemm_flops);
  for (const ModelSpec& m : models) {
    int seq = o.seq_length > 0 ? o.seq_length : m.seq_length;
    std::vector<GemmShape> s = ModelGemmShapes(m, seq, TpSplits(m, max_tp), o.micro_batches);
    all.insert(all.end(), s.begin(), s.end());
  }
  std::vector<GemmShape> skipped;
  std::vector<GemmShape> shapes = SelectGemmShapes(all, o.max_gemm_flops, &skipped);
  progress("profiling " + dev.kind + " '" + ms.device_name + "' with " + std::to_string(world.size()) +
           " ranks x " + std::to_string(ms.threads_per_rank) + " threads: " + std::to_string(shapes.size()) +
           " GEMM shapes (" + std::to_string(skipped.size()) + " above the --max-gemm-gflop cap skipped)");

  MeasureConfig cfg;
  cfg.be = dev.be;
  cfg.sync = &world;
  cfg.warmup = o.warmup;
  cfg.max_reps = o.reps;
  cfg.point_budget_s = o.quick ? 0.05 : 0.3;
  cfg.progress = progress;
  cfg.time_gemms_in_step = dev.kind == "cpu";  // host wall time is a GEMM's time on the CPU only

  const int64_t copy_bytes = o.quick ? (16LL << 20) : (128LL << 20);
  ms.copy_Bps = MeasureCopyBandwidth(cfg, copy_bytes);
  ms.tiny_op_s = MeasureTinyOp(cfg);
  // The machine's speed now and again at the end (Measurements::speed_start):
  // the copy above, and one short whole training step of the first model.
  auto probe_step = [&](Measurements::SpeedProbe* out) {
    if (!dev.host_optimizer || models.empty() || o.micro_batches.empty()) return;
    const ModelSpec& m0 = models.front();
    const int b = *std::min_element(o.micro_batches.begin(), o.micro_batches.end());
    std::vector<ModelSample> s = MeasureModelSteps(cfg, m0, o.seq_length > 0 ? o.seq_length : m0.seq_length, {b});
    if (s.empty()) return;
    out->step_s = s.front().seconds;
    ms.speed_step_what = s.front().what;
  };
  ms.speed_start.copy_Bps = ms.copy_Bps;
  probe_step(&ms.speed_start);
  MeasureConfig bf16_cfg = cfg;
  bf16_cfg.be = dev.bf16_be;
  bf16_cfg.max_reps = std::min(cfg.max_reps, 3);  // median of 3 (time, as below)
  if (dev.bf16_be == nullptr) {
    ms.gemms = MeasureGemms(cfg, shapes);
  } else {
    // GEMMs above kBf16MaxFlops run at the plateau rate; the planner prices
    // them at the largest measured point's rate (planner/cost/compute_cost.cc),
    // and leaving them out keeps the whole profile near a minute on 2 cores.
    // Each bf16 shape right after its fp32 twin: both see the same machine speed.
    constexpr double kBf16MaxFlops = 2e9;
    progress("bf16 GEMM inputs (precision=bf16 plans), shapes up to 2 GFLOP, each after its fp32 twin: " +
             dev.bf16_gemm);
    ms.bf16_gemm = dev.bf16_gemm;
    MeasureGemmsInterleaved(cfg, bf16_cfg, kBf16MaxFlops, shapes, &ms.gemms, &ms.bf16_gemms);
    // The bf16 storage conversions of those plans (stash, unit values and
    // gradients): short, deterministic loops, so a small budget per size.
    MeasureConfig conv_cfg = cfg;
    conv_cfg.point_budget_s = 0.04;
    progress("bf16 storage conversions (precision=bf16 plans), 4 Ki to 16 Mi elements per call");
    ms.bf16_conversions = MeasureBf16Conversions(conv_cfg, {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20});
  }
  for (const ModelSpec& m : models) {
    int seq = o.seq_length > 0 ? o.seq_length : m.seq_length;
    std::vector<int> tps = TpSplits(m, max_tp), mbs;
    for (int b : o.micro_batches)
      if (b <= 2) mbs.push_back(b);
    if (mbs.empty()) mbs.push_back(o.micro_batches.front());
    auto att = MeasureAttention(cfg, m, seq, tps, mbs, o.max_gemm_flops);
    ms.attention.insert(ms.attention.end(), att.begin(), att.end());
    if (dev.bf16_be != nullptr) {
      auto att16 = MeasureAttention(bf16_cfg, m, seq, tps, mbs, o.max_gemm_flops);
      ms.bf16_attention.insert(ms.bf16_attention.end(), att16.begin(), att16.end());
    }
    auto mem = MeasureLayerMemoryOps(cfg, m, seq, tps, mbs.front());
    ms.memory_ops.insert(ms.memory_ops.end(), mem.begin(), mem.end());
    if (dev.host_optimizer) {  // the runtime's host-side training step, where affordable
      std::vector<int> step_mbs;
      for (int b : o.micro_batches) {
        PlanSpec p;
        p.micro_batch = b;
        p.seq_length = seq;
        p.flash_attention = false;
        if (3 * (SumFlops(TransformerLayerOps(m, p, 4).forward) * m.num_layers +
                 SumFlops(HeadOps(m, p, 4).forward)) <= 50 * o.max_gemm_flops)
          step_mbs.push_back(b);
      }
      // Steps up to 0.1 s (gpt-tiny, gpt-small-cpu to microbatch 4 on a
      // 2-core VM) also with full recompute: compute.recompute_cost_ratio.
      auto steps = MeasureModelSteps(cfg, m, seq, step_mbs, o.quick ? 0.02 : 0.1);
      ms.model_steps.insert(ms.model_steps.end(), steps.begin(), steps.end());
      // The bf16 steps of the first (smallest) model: their GEMMs in situ
      // for compute.bf16, as the fp32 steps' for compute (a second of the profile).
      if (dev.bf16_be != nullptr && &m == &models.front()) {
        auto steps16 = MeasureModelSteps(bf16_cfg, m, seq, step_mbs, 0, Precision::kBf16);
        ms.bf16_model_steps.insert(ms.bf16_model_steps.end(), steps16.begin(), steps16.end());
      }
    }
  }
  if (dev.host_optimizer) {
    ms.optimizer_params = o.quick ? (1 << 20) : (4 << 20);
    ms.optimizer_s = MeasureOptimizerStep(cfg, static_cast<int64_t>(ms.optimizer_params));
    // Smaller steps, whose state the caches hold (the small models' ranks
    // update a few hundred thousand parameters): compute.optimizer_time_by_params.
    for (int64_t n = 1 << 14; n < static_cast<int64_t>(ms.optimizer_params); n *= 2)
      ms.optimizer_sizes.push_back({static_cast<double>(n), MeasureOptimizerStep(cfg, n)});
  }

  // Collectives: every group size 2..ranks per node, over the first g ranks of each node.
  for (int g = 2; g <= node.size(); ++g) {
    MPI_Comm sub_raw;
    DT_MPI_CHECK(MPI_Comm_split(node.handle(), node.rank() < g ? 0 : MPI_UNDEFINED, node.rank(), &sub_raw));
    if (sub_raw != MPI_COMM_NULL) {
      MPI_Comm sync_raw;
      DT_MPI_CHECK(MPI_Comm_dup(sub_raw, &sync_raw));
      rt::MpiComm sync(sync_raw);
      std::unique_ptr<rt::Comm> data = dev.make_comm(sub_raw);
      MeasureConfig cc = cfg;
      cc.sync = &sync;
      std::vector<CollSeries> series = MeasureCollectives(cc, *data, o.max_message_bytes);
      if (world.rank() == 0) ms.collectives.insert(ms.collectives.end(), series.begin(), series.end());
      data.reset();
      DT_MPI_CHECK(MPI_Comm_free(&sub_raw));
    }
    node.Barrier();
  }

  // CPU: the same collectives inside the runtime's own tp and dp steps over
  // the node's ranks (measure_step_comm.h), when the world is one node.
  if (dev.kind == "cpu" && !models.empty() && node.size() == world.size() && world.size() >= 2) {
    const ModelSpec& m0 = models.front();
    const int seq = o.seq_length > 0 ? o.seq_length : m0.seq_length;
    ms.in_step_collectives = MeasureStepCollectives(cfg, m0, seq, world.size(), world.rank());
    for (const CollSeries& s : ms.in_step_collectives)
      for (const CollSample& x : s.samples)
        progress(std::string("in step: ") + CollectiveKey(s.kind) + " g=" + std::to_string(s.group_size) + " " +
                 std::to_string(static_cast<long long>(x.bytes)) + " B: " + std::to_string(x.seconds * 1e6) + " us");
  }

  progress("the machine's speed again, as at the start");
  ms.speed_end.copy_Bps = MeasureCopyBandwidth(cfg, copy_bytes);
  probe_step(&ms.speed_end);

  int code = 0;
  if (root) {
    StatusOr<HardwareProfile> p = AssembleProfile(ms);
    if (!p.ok()) {
      std::cerr << "dtplan: error: " << p.status().message() << "\n";
      code = 1;
    } else {
      Status st = WriteJsonFile(o.out, ToJson(*p));
      if (!st.ok()) {
        std::cerr << "dtplan: error: " << st.message() << "\n";
        code = 1;
      } else {
        progress("wrote " + o.out);
        double best_bw = 0;
        for (const LinkEntry& e : p->network.table(CollKind::kAllReduce).intra) best_bw = std::max(best_bw, e.busbw_Bps);
        std::fprintf(stderr,
                     "dtplan profile: peak GEMM %.1f GFLOP/s per rank, copy %.2f GB/s per rank, "
                     "all-reduce busbw %.2f GB/s, attention eff %.3f, memory-bound eff %.3f, %zu skipped GEMM shapes\n",
                     p->device.peak_flops / 1e9, p->device.memory_bandwidth_Bps / 1e9, best_bw / 1e9,
                     p->compute.attention_efficiency, p->compute.memory_bound_efficiency, skipped.size());
        if (const std::string w = UnsteadyMachineWarning(ms); !w.empty())
          std::fprintf(stderr, "dtplan profile: warning: %s\n", w.c_str());
        else if (const std::string sp = SpeedProbeSummary(ms); !sp.empty())
          std::fprintf(stderr, "dtplan profile: %s\n", sp.c_str());
      }
    }
  }
  float f = static_cast<float>(code);
  world.AllReduce(&f, 1, rt::ReduceOp::kMax);
  return static_cast<int>(f);
}

}  // namespace dt
