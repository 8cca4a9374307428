#include "runtime/cli/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "planner/schedule/build_schedule.h"
#include "planner/spec/capabilities.h"
#include "planner/spec/plan_spec.h"
#include "planner/spec/rank_grid.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/deferred_backend.h"
#ifdef DT_HAVE_CUDA
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/managed_memory.h"
#endif
#include "base/checked_write.h"
#include "runtime/backend/bf16_gemm.h"
#include "runtime/backend/cpu_gemm.h"
#include "runtime/ckpt/checkpoint.h"
#include "runtime/ckpt/ckpt_format.h"
#include "runtime/cli/fault_drill.h"
#include "runtime/cli/report.h"
#include "runtime/comm/timed_comm.h"
#include "runtime/comm/watchdog.h"
#include "runtime/data/data_loader.h"
#include "runtime/data/file_source.h"
#include "runtime/data/markov_source.h"
#include "runtime/exec/interpreter.h"
#include "runtime/model/model_chunk.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitDiverged = 4;  // a step's loss or gradient norm is not finite

// Prints a user-facing error (rank 0 only: every rank found the same one).
int BadInput(const MpiWorld& w, const std::string& msg) {
  if (w.rank() == 0) std::fprintf(stderr, "dtrun: error: %s\n", msg.c_str());
  return kExitBadInput;
}

// Max of `code` over the world: how ranks agree on a failure one of them saw.
int WorldMax(int code) {
  DT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &code, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return code;
}

// What the CPU runtime executes is the capability table's answer
// (planner/spec/capabilities.h); the rest are shape checks of this runtime.
Status CheckSupported(const ModelSpec& m, const PlanSpec& p) {
  DT_RETURN_IF_ERROR(CheckExecutable(m, p, RuntimeDevice::kCpu));
  if (m.ffn_hidden % p.tp != 0)
    return InvalidArgument("ffn_hidden " + std::to_string(m.ffn_hidden) + " is not divisible by tp=" +
                           std::to_string(p.tp));
  return Status::Ok();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The token source: synthetic Markov chain (entropy rate in *entropy), or a
// text file (bytes) or .bin file (uint16 ids).
StatusOr<std::shared_ptr<const TokenSource>> OpenSource(const DtrunOptions& o, const ModelSpec& m,
                                                        double* entropy) {
  *entropy = -1.0;
  if (o.data_path.empty()) {
    MarkovOptions mo;
    mo.vocab = m.vocab;
    DT_ASSIGN_OR_RETURN(MarkovSource src, MarkovSource::Create(mo));
    *entropy = src.EntropyRateNats();
    return std::shared_ptr<const TokenSource>(std::make_shared<MarkovSource>(std::move(src)));
  }
  if (EndsWith(o.data_path, ".bin")) {
    DT_ASSIGN_OR_RETURN(auto src, FileTokenSource::OpenTokenFile(o.data_path, m.vocab));
    return std::shared_ptr<const TokenSource>(std::move(src));
  }
  if (m.vocab < 256)
    return InvalidArgument("--data '" + o.data_path + "' is read as text (one token per byte, 256 ids) but the model's "
                           "vocab is " + std::to_string(m.vocab) + "; use a model with vocab >= 256 or a .bin file");
  DT_ASSIGN_OR_RETURN(auto src, FileTokenSource::OpenTextFile(o.data_path));
  return std::shared_ptr<const TokenSource>(std::move(src));
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int RunTraining(const DtrunOptions& opts, const MpiWorld& world, JobWatchdog* watchdog) {
  const bool root = world.rank() == 0;
  // ---- validation: identical on every rank, before any collective ----
  StatusOr<PlanFile> pf = LoadPlanFile(opts.plan_path);
  if (!pf.ok()) return BadInput(world, pf.status().message());
  const ModelSpec& model = pf->model;
  const PlanSpec& plan = pf->plan;
  if (Status s = CheckSupported(model, plan); !s.ok()) return BadInput(world, s.message());
  if (opts.steps < 1) return BadInput(world, "--steps must be >= 1");
  if (opts.resume && opts.checkpoint_dir.empty()) return BadInput(world, "--resume needs --checkpoint-dir");
  if (opts.keep_checkpoints < 0)
    return BadInput(world, "--keep-checkpoints " + std::to_string(opts.keep_checkpoints) +
                               " is out of range: allowed N >= 1 (keep the newest N), or 0 to keep all");
  if (opts.keep_checkpoints > 0 && opts.checkpoint_dir.empty())
    return BadInput(world, "--keep-checkpoints needs --checkpoint-dir");
  if (opts.checkpoint_every < 0)
    return BadInput(world, "--checkpoint-every " + std::to_string(opts.checkpoint_every) +
                               " is out of range: save every K >= 1 steps, or 0 for only at the end");
  if (opts.checkpoint_every > 0 && opts.checkpoint_dir.empty())
    return BadInput(world, "--checkpoint-every needs --checkpoint-dir (where to save)");
  if (opts.stop_at != -1) {
    if (opts.stop_at < 1 || opts.stop_at > opts.steps)
      return BadInput(world, "--stop-at " + std::to_string(opts.stop_at) + " is out of range: a step from 1 to --steps (" +
                                 std::to_string(opts.steps) + ")");
    if (opts.checkpoint_dir.empty())
      return BadInput(world, "--stop-at stops to resume later: it needs --checkpoint-dir, or the steps done are lost "
                             "(for a shorter run, lower --steps)");
  }
  // NaN fails every comparison: written as !(x > 0) so that it is refused too.
  if (!(opts.lr > 0) || !std::isfinite(opts.lr))
    return BadInput(world, "--lr must be a finite learning rate > 0");
  if (opts.min_lr != -1.0 && (!(opts.min_lr >= 0) || !(opts.min_lr <= opts.lr)))
    return BadInput(world, "--min-lr must lie in [0, --lr] (the cosine decays from --lr to it); omit it for 10% of --lr");
  if (!(opts.weight_decay >= 0) || !std::isfinite(opts.weight_decay))
    return BadInput(world, "--weight-decay must be a finite value >= 0");
  if (opts.warmup_steps < 0 && opts.warmup_steps != -1) return BadInput(world, "--warmup-steps must be >= 0");
  const int64_t warmup_steps = opts.warmup_steps == -1 ? std::min<int64_t>(10, opts.steps) : opts.warmup_steps;
  if (warmup_steps > opts.steps)
    return BadInput(world, "--warmup-steps " + std::to_string(opts.warmup_steps) + " exceeds --steps " +
                               std::to_string(opts.steps) + " (the schedule's length): the learning rate would never "
                               "reach --lr; lower --warmup-steps (for part of a longer run, keep --steps and use --stop-at)");
  if (std::isnan(opts.clip)) return BadInput(world, "--clip must be a number (the global-norm bound; <= 0: off)");
  if (std::isnan(opts.timeout_s)) return BadInput(world, "--timeout must be a number of seconds (<= 0: off)");
  const bool plan_dropout = plan.dropout && model.uses_dropout();
  if (opts.dropout != -1.0 && !plan_dropout)
    return BadInput(world, "--dropout with a plan that trains without dropout (plan.dropout is false, or model '" +
                               model.name + "' has none): drop --dropout, or plan with dropout");
  if (opts.dropout != -1.0 && !(opts.dropout >= 0 && opts.dropout < 1))
    return BadInput(world, "--dropout must be a rate in [0, 1)");
  const float dropout_rate = opts.dropout == -1.0 ? 0.1f : static_cast<float>(opts.dropout);
  const bool bf16 = plan.precision == Precision::kBf16;
  StatusOr<RankGrid> grid = RankGrid::Create(plan.tp, plan.cp, plan.dp, plan.pp, plan.order);
  if (!grid.ok()) return BadInput(world, grid.status().message());
  if (world.size() != plan.world())
    return BadInput(world, "plan needs " + std::to_string(plan.world()) + " ranks (" + Describe(plan) +
                               ") but MPI started " + std::to_string(world.size()) + ": mpirun -np " +
                               std::to_string(plan.world()) + " dtrun --plan " + opts.plan_path +
                               " (add --oversubscribe for more ranks than cores)");
  StatusOr<std::vector<ActionList>> schedule = BuildSchedule(plan);
  if (!schedule.ok()) return BadInput(world, schedule.status().message());
  double entropy = -1.0;
  StatusOr<std::shared_ptr<const TokenSource>> source = OpenSource(opts, model, &entropy);
  if (!source.ok()) return BadInput(world, source.status().message());
  if ((*source)->vocab() > model.vocab)
    return BadInput(world, "data vocab " + std::to_string((*source)->vocab()) + " exceeds the model's vocab " +
                               std::to_string(model.vocab));

  // DT_COMM_TIMES=1: measure the host time each group's calls take
  // (runtime/comm/timed_comm.h); each rank prints its per-step means at the end.
  CommTimes comm_times;  // outlives the groups' TimedComms
  const char* timing_env = std::getenv("DT_COMM_TIMES");
  const bool time_comms = timing_env != nullptr && std::string(timing_env) == "1";
  StatusOr<Groups> groups_or = BuildGroups(*grid, world.rank(), plan.ep);
  if (!groups_or.ok()) return BadInput(world, groups_or.status().message());
  Groups& groups = *groups_or;
  if (time_comms) {
    auto wrap = [&](std::unique_ptr<Comm>& c, const char* label) {
      if (c) c = std::make_unique<TimedComm>(std::move(c), label, &comm_times);
    };
    wrap(groups.tp, "tp");
    wrap(groups.cp, "cp");
    wrap(groups.dp, "dp");
    wrap(groups.pp, "pp");
    wrap(groups.dp_cp, "dp_cp");
    wrap(groups.tied, "tied");
    wrap(groups.ep, "ep");
    wrap(groups.expert_dp, "expert_dp");
  }
  const Coord coord = groups.coord;
  auto sized = [](const std::unique_ptr<Comm>& c) { return c && c->size() > 1 ? c.get() : nullptr; };

  // ---- model, optimizer ----
  const int64_t bytes_before_model = CurrentBytes();
  StatusOr<GemmLibrary> gemm = GemmLibraryFromEnv();
  if (!gemm.ok()) return BadInput(world, gemm.status().message());
  std::unique_ptr<Backend> backend = MakeCpuBackend(*gemm, bf16 ? GemmInputs::kBf16 : GemmInputs::kFp32);
  // DT_RUN_ON_CUDA=1: run this (CPU) plan's compute on this node's GPU, tensors
  // in CUDA managed memory (runtime/cuda/managed_memory.h). Verified on one
  // H100 for 1-rank plans (scripts/gpu-check.sh compares it with the CPU run).
  if (const char* c = std::getenv("DT_RUN_ON_CUDA"); c != nullptr && std::string(c) == "1") {
#ifdef DT_HAVE_CUDA
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    StatusOr<int> count = CudaDeviceCount();
    if (!count.ok() || *count < 1)
      return BadInput(world, "DT_RUN_ON_CUDA=1 but " +
                                 (count.ok() ? std::string("no CUDA device is visible") : count.status().message()));
    const int device = (local != nullptr ? std::atoi(local) : world.rank()) % *count;
    if (Status s = UseCudaManagedTensors(device); !s.ok()) return BadInput(world, s.message());
    StatusOr<std::unique_ptr<Backend>> cuda = MakeCudaBackend(device, /*managed_tensors=*/true);
    if (!cuda.ok()) return BadInput(world, cuda.status().message());
    backend = std::move(*cuda);
    if (root)
      std::fprintf(stderr, "dtrun: DT_RUN_ON_CUDA=1: compute on CUDA device %d, tensors in managed memory "
                           "(a correctness path, not a fast one; verified on 1-rank plans)\n", device);
#else
    return BadInput(world, "DT_RUN_ON_CUDA=1 but this dtrun was built without CUDA (no nvcc at build time)");
#endif
  }
  // Test instrument: kernels deferred as on a device stream, to prove every
  // host access synchronises (runtime/backend/deferred_backend.h).
  if (const char* d = std::getenv("DT_DEFERRED_KERNELS"); d != nullptr && std::string(d) == "1") {
    backend = MakeDeferredBackend(std::move(backend));
    if (root) std::fprintf(stderr, "dtrun: DT_DEFERRED_KERNELS=1: kernels deferred to synchronisation points\n");
  }
  std::vector<std::unique_ptr<ModelChunk>> chunks;
  std::vector<ModelChunk*> chunk_ptrs;
  std::vector<ParamStore*> stores;
  std::vector<bool> counts_tied;
  // Under CP, each CP rank's grads are those of its local tokens: gradients
  // are averaged (and ZeRO-sharded) over the joint DP x CP group.
  Comm* grad_group = plan.cp > 1 ? sized(groups.dp_cp) : sized(groups.dp);
  const ParallelComms pcomms{sized(groups.tp), grad_group, sized(groups.pp), sized(groups.tied),
                             sized(groups.cp), sized(groups.ep)};
  for (int i = 0; i < plan.vpp; ++i) {
    const int c = i * plan.pp + coord.pp;
    chunks.push_back(std::make_unique<ModelChunk>(model, plan, c, coord.tp, pcomms, *backend, opts.seed));
    chunk_ptrs.push_back(chunks.back().get());
    stores.push_back(&chunks.back()->params());
    counts_tied.push_back(c == 0);
  }
  OptimizerOptions oo;
  oo.adam.weight_decay = static_cast<float>(opts.weight_decay);
  oo.adam.max_grad_norm = static_cast<float>(opts.clip);
  oo.lr.peak_lr = opts.lr;
  oo.lr.min_lr = opts.min_lr >= 0 ? opts.min_lr : 0.1 * opts.lr;
  oo.lr.warmup_steps = warmup_steps;
  oo.lr.total_steps = opts.steps;
  oo.zero_stage = plan.zero_stage;
  oo.bucket_bytes = plan.dp_bucket_bytes;
  oo.bf16_moments = plan.adam_moment_bytes == 2;
  Optimizer optimizer(stores, counts_tied, oo,
                      OptimizerComms{grad_group, sized(groups.tp), sized(groups.pp), sized(groups.tied),
                                     sized(groups.ep), sized(groups.expert_dp)});
  // What this rank keeps between steps: weights, gradients and Adam moments
  // after ZeRO sharding (the largest over ranks is reported).
  int64_t model_state_bytes = CurrentBytes() - bytes_before_model;
  // bf16: setup briefly held the fp32 initial values next to the bf16 copy
  // and the optimizer's master; the peak reported is that of the steps.
  if (bf16) ResetPeakBytes();
  DT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &model_state_bytes, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));

  // ---- resume ----
  int64_t start_step = 0, data_position = 0;
  uint64_t data_seed = opts.seed;
  if (opts.resume) {
    watchdog->Enter("resume");
    InjectFault(opts, world.rank(), "resume");
    std::vector<std::vector<float>> m(plan.vpp), v(plan.vpp), master(plan.vpp);
    std::vector<ChunkState> states;
    for (int i = 0; i < plan.vpp; ++i) states.push_back({stores[i], &m[i], &v[i], bf16 ? &master[i] : nullptr});
    // ZeRO-3: the loader fills full values; this rank keeps its slots.
    for (auto& c : chunks)
      if (c->sharding()) c->sharding()->MaterializeValues();
    StatusOr<TrainState> st = LoadCheckpoint(opts.checkpoint_dir, states);
    for (auto& c : chunks)
      if (c->sharding()) c->sharding()->ShardValues();
    int code = 0;  // 0 loaded, 1 no checkpoint yet, 2 unusable
    std::string msg;
    if (!st.ok()) {
      // Only an empty directory means "nothing saved yet"; any other failure
      // (a missing tensor included) must not silently restart from step 0.
      const bool none = st.status().code() == StatusCode::kNotFound &&
                        !std::filesystem::exists(std::filesystem::path(opts.checkpoint_dir) / "latest") &&
                        CompleteCheckpointSteps(opts.checkpoint_dir).empty();
      code = none ? 1 : 2;
      msg = st.status().message();
    } else if (st->model != ToJson(model)) {
      code = 2;
      msg = "checkpoint in '" + opts.checkpoint_dir + "' was saved for model " + st->model.dump() +
            ", not for this plan's model '" + model.name + "'";
    }
    const int agreed = WorldMax(code);
    if (agreed == 2) {
      // Each rank checks the entries of its own chunks: the lowest rank that
      // found a problem names it (one line).
      const int reporter = -WorldMax(code == 2 ? -world.rank() : -world.size());
      if (world.rank() == reporter) std::fprintf(stderr, "dtrun: error: cannot resume: %s\n", msg.c_str());
      return kExitBadInput;
    }
    if (agreed == 0) {
      for (int i = 0; i < plan.vpp; ++i) {
        optimizer.LoadMoments(i, m[i].data(), v[i].data());
        if (bf16) optimizer.LoadMaster(i, master[i].data());  // the bf16 copy is its rounding
      }
      optimizer.set_step_count(st->optimizer_step);
      start_step = st->step;
      data_position = st->data_position;
      data_seed = st->data_seed;
      if (root)
        std::printf("resumed from '%s' at step %lld (saved under plan: %s)\n", opts.checkpoint_dir.c_str(),
                    static_cast<long long>(start_step), st->plan.dump().c_str());
    } else if (root) {
      std::printf("no checkpoint in '%s' yet: starting from step 0\n", opts.checkpoint_dir.c_str());
    }
  }

  StatusOr<DataLoader> loader_or = DataLoader::Create(*source, BatchShapeFor(plan, coord.dp, data_seed));
  if (!loader_or.ok()) return BadInput(world, loader_or.status().message());
  DataLoader& loader = *loader_or;
  loader.set_position(data_position);
  // Dropout masks are keyed by the data seed (saved in checkpoints), so a
  // resumed run draws the masks the uninterrupted one would have.
  if (plan_dropout)
    for (auto& c : chunks) c->EnableDropout(dropout_rate, data_seed);

  Interpreter interp(plan, (*schedule)[coord.pp], chunk_ptrs, &optimizer, sized(groups.pp), &loader);

  const int64_t end_step = opts.stop_at >= 0 ? std::min(opts.stop_at, opts.steps) : opts.steps;
  const double tokens_per_step = static_cast<double>(plan.tokens_per_step());
  const double flops_per_step = ModelFlopsPerStep(model, plan);
  OutputFile metrics;
  int metrics_code = 0;
  if (root) {
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    std::printf("dtrun: %d ranks x %d threads | plan %s | model %s (%lld params) | %s backend (GEMM: %s)\n",
                world.size(), threads, Describe(plan).c_str(), model.name.c_str(),
                static_cast<long long>(model.TotalParams()), backend->name(),
                GemmLibraryDescription(*gemm).c_str());
    std::printf("data: %s", (*source)->Describe().c_str());
    if (entropy >= 0) std::printf(" | entropy rate %.4f nats/token (the loss floor)", entropy);
    std::printf("\ntokens/step %.0f | model FLOPs/step %.4g | steps %lld..%lld of %lld\n", tokens_per_step,
                flops_per_step, static_cast<long long>(start_step + 1), static_cast<long long>(end_step),
                static_cast<long long>(opts.steps));
    std::printf("model states: %.3f MiB per rank (weights, gradients, Adam m and v after ZeRO-%d sharding; "
                "largest rank)\n", static_cast<double>(model_state_bytes) / (1 << 20), plan.zero_stage);
    const bool bf16_moments = plan.adam_moment_bytes == 2;
    if (bf16)
      std::printf("precision: bf16 mixed precision (bf16 weights, saved activations%s; fp32 %smaster weights%s; %s)\n",
                  plan.grad_bytes == 4 ? "" : " and gradients", plan.grad_bytes == 4 ? "main gradients, " : "",
                  bf16_moments ? "; bf16 Adam moments" : " and Adam moments",
                  backend->gemm_inputs() == GemmInputs::kBf16
                      ? ("GEMMs on bf16-rounded operands with fp32 accumulation, " +
                         (*gemm == GemmLibrary::kEigen ? std::string("emulated (DT_GEMM=eigen)") : Bf16GemmDescription()) +
                         "; other kernels in fp32").c_str()
                      : "fp32 arithmetic: this backend has no bf16 GEMM path");
    if (bf16_moments && !bf16)
      std::printf("optimizer: bf16 Adam moments (fp32 weights; each update in fp32, m and v rounded to bf16)\n");
    if (plan.flash_attention)
      std::printf("note: the plan assumes fused (flash) attention; the CPU runtime runs unfused attention\n");
    std::fflush(stdout);
    if (!opts.metrics_path.empty()) {
      Status s = metrics.Open(opts.metrics_path, /*append=*/start_step > 0);
      if (!s.ok()) {
        std::fprintf(stderr, "dtrun: error: --metrics: %s\n", s.message().c_str());
        metrics_code = kExitBadInput;
      }
    }
  }
  if (WorldMax(metrics_code) != 0) return kExitBadInput;

  // ---- training loop ----
  const int n = world.size();
  std::vector<double> gathered(root ? 3 * n : 0);
  std::vector<double> step_times, tok_rates, flop_rates;
  std::vector<int64_t> rank_peak(n, 0);
  double last_loss = 0.0;
  int64_t last_saved = start_step;
  bool ckpt_failed = false;
  bool diverged = false;
  auto save = [&](int64_t step) -> bool {
    watchdog->Enter("save step " + std::to_string(step));
    InjectFault(opts, world.rank(), "save", step);
    std::vector<std::vector<float>> m(plan.vpp), v(plan.vpp), master(plan.vpp);
    std::vector<ChunkState> states;
    for (int i = 0; i < plan.vpp; ++i) {
      optimizer.GatherMoments(i, &m[i], &v[i]);
      // bf16: the parameters saved are the fp32 master weights.
      if (bf16) optimizer.GatherMaster(i, &master[i]);
      states.push_back({stores[i], &m[i], &v[i], bf16 ? &master[i] : nullptr});
    }
    TrainState ts;
    ts.step = step;
    ts.optimizer_step = optimizer.step_count();
    ts.data_position = loader.position();
    ts.data_seed = data_seed;
    ts.rng_state = "none: dropout masks are a function of (data_seed, global indices), data of (seed, step)";
    ts.model = ToJson(model);
    ts.plan = ToJson(plan);
    for (auto& c : chunks)  // ZeRO-3: full values exist only while saving
      if (c->sharding()) c->sharding()->MaterializeValues();
    Status s = SaveCheckpoint(opts.checkpoint_dir, ts, states, groups);
    for (auto& c : chunks)
      if (c->sharding()) c->sharding()->ShardValues();
    if (!s.ok()) {
      if (root) std::fprintf(stderr, "dtrun: error: checkpoint save failed: %s\n", s.message().c_str());
      return false;
    }
    if (root) std::printf("saved checkpoint step-%lld in '%s'\n", static_cast<long long>(step), opts.checkpoint_dir.c_str());
    last_saved = step;
    // After "latest" names the new step: pruning can never remove it, and a
    // failure here loses nothing (the older directories just stay).
    if (root && opts.keep_checkpoints > 0) {
      Status p = PruneCheckpoints(opts.checkpoint_dir, opts.keep_checkpoints);
      if (!p.ok()) std::fprintf(stderr, "dtrun: warning: --keep-checkpoints: %s\n", p.message().c_str());
    }
    return true;
  };

  bool metrics_failed = false;  // rank 0: a metrics write failed
  int64_t done_step = start_step;
  double timed_step_s = 0;  // DT_COMM_TIMES: this rank's step time after the first step
  for (int64_t step = start_step; step < end_step; ++step) {
    const int64_t step1 = step + 1;
    watchdog->BeginStep(step1);
    InjectFault(opts, world.rank(), "step", step1);
    // Ranks start every step together, so the step time excludes what rank 0
    // did after the previous step (metrics file, console) while others waited.
    // The same all-reduce tells every rank that rank 0 could not write its
    // metrics: the job stops instead of training on without them.
    if (WorldMax(metrics_failed ? 1 : 0) != 0) break;
    const double t0 = Now();
    StepOutcome out = interp.RunStep(loader.position());
    const double dt = Now() - t0;
    if (time_comms) {
      if (step == start_step) comm_times.Clear();  // the first step is warmup, as for the step times
      else timed_step_s += dt;
    }
    // A gradient norm that is not finite (a NaN or inf loss makes one): the
    // job stops. The norm is global, so every rank sees the same and the
    // optimizer skipped the update alike (StepStats::skipped): no collective
    // is needed, and the model is the previous step's, saved as such below.
    if (out.optimizer.skipped) {
      if (root)
        std::fprintf(stderr,
                     "dtrun: error: step %lld diverged: its loss or gradient norm is not finite (rank 0: loss sum "
                     "%g, gradient norm %g); the update was skipped, the model is that of the step before. Lower "
                     "--lr (now %g) or raise --warmup-steps%s\n",
                     static_cast<long long>(step1), out.loss_sum, out.optimizer.grad_norm, opts.lr,
                     opts.checkpoint_dir.empty() ? "" : ", then resume (--resume)");
      diverged = true;
      break;
    }
    loader.Advance();
    const double contrib = (coord.tp == 0 && coord.cp == 0) ? out.loss_sum : 0.0;
    double local[3] = {contrib, dt, static_cast<double>(PeakBytes())};
    DT_MPI_CHECK(MPI_Gather(local, 3, MPI_DOUBLE, root ? gathered.data() : nullptr, 3, MPI_DOUBLE, 0,
                            MPI_COMM_WORLD));
    done_step = step1;
    if (root) {
      double loss_sum = 0.0, t_max = 0.0;
      int64_t peak = 0;
      for (int r = 0; r < n; ++r) {
        loss_sum += gathered[3 * r];
        t_max = std::max(t_max, gathered[3 * r + 1]);
        rank_peak[r] = static_cast<int64_t>(gathered[3 * r + 2]);
        peak = std::max(peak, rank_peak[r]);
      }
      last_loss = loss_sum / (static_cast<double>(plan.dp) * plan.num_microbatches);
      const double tps = tokens_per_step / t_max, fps = flops_per_step / t_max;
      if (step > start_step) {
        step_times.push_back(t_max);
        tok_rates.push_back(tps);
        flop_rates.push_back(fps);
      }
      if (!opts.quiet) {
        std::printf("%s\n", StepLine(step1, opts.steps, last_loss, out.optimizer.lr, out.optimizer.grad_norm, t_max,
                                     tps, fps, peak).c_str());
        std::fflush(stdout);
      }
      if (metrics.is_open() && !metrics_failed) {
        std::string lines;
        for (int r = 0; r < n; ++r) {
          const double t = gathered[3 * r + 1];
          lines += MetricsJsonLine({r, step1, last_loss, t, tokens_per_step / t, flops_per_step / t, rank_peak[r],
                                   out.optimizer.grad_norm});
          lines += "\n";
        }
        Status w = metrics.Append(lines);
        if (!w.ok()) {
          std::fprintf(stderr, "dtrun: error: --metrics: %s; stopping after step %lld\n", w.message().c_str(),
                       static_cast<long long>(step1));
          metrics_failed = true;
        }
      }
    }
    if (!opts.checkpoint_dir.empty() && opts.checkpoint_every > 0 && step1 % opts.checkpoint_every == 0 &&
        step1 < end_step) {
      if (!save(step1)) {
        ckpt_failed = true;
        break;
      }
    }
  }
  if (time_comms && done_step - start_step > 1) {
    const double steps = static_cast<double>(done_step - start_step - 1);
    std::string line;
    double total = 0;
    for (const auto& [label, e] : comm_times.by_group) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " %s %.3f ms (%.0f calls)", label.c_str(), 1e3 * e.seconds / steps,
                    static_cast<double>(e.calls) / steps);
      line += buf;
      total += e.seconds;
    }
    std::fprintf(stderr, "dtrun: DT_COMM_TIMES rank %d (tp %d cp %d dp %d pp %d): step %.3f ms, in communication "
                 "%.3f ms:%s (means per step after the first; time inside blocking calls and request waits)\n",
                 world.rank(), coord.tp, coord.cp, coord.dp, coord.pp, 1e3 * timed_step_s / steps,
                 1e3 * total / steps, line.c_str());
    // The blocking collectives by operation and size, in the profile's
    // convention (compare with its in-step series: dtplan profile's log).
    std::string calls;
    for (const auto& [key, e] : comm_times.by_call) {
      if (e.calls == 0) continue;
      char buf[128];
      std::snprintf(buf, sizeof buf, " %s %.0f B %.2f us x %.0f;", key.first.c_str(), key.second,
                    1e6 * e.seconds / static_cast<double>(e.calls), static_cast<double>(e.calls) / steps);
      calls += buf;
    }
    if (!calls.empty())
      std::fprintf(stderr, "dtrun: DT_COMM_TIMES rank %d blocking collectives (mean per call x calls per step):%s\n",
                   world.rank(), calls.c_str());
  }
  watchdog->Enter("end of training");
  if (root && metrics.is_open() && !metrics_failed) {
    Status c = metrics.Close();
    if (!c.ok()) {
      std::fprintf(stderr, "dtrun: error: --metrics: %s\n", c.message().c_str());
      metrics_failed = true;
    }
  }
  const bool stopped_early = WorldMax(metrics_failed ? 1 : 0) != 0;
  // Stopped early or diverged (its update skipped) or not: the steps done
  // are saved (nothing lost).
  if (!ckpt_failed && !opts.checkpoint_dir.empty() && last_saved != done_step && done_step > start_step) {
    if (!save(done_step)) ckpt_failed = true;
  }
  if (stopped_early) return kExitRuntime;
  if (diverged) return kExitDiverged;

  if (root && end_step > start_step) {
    RunSummary s;
    s.steps_run = end_step - start_step;
    s.median_step_time_s = Median(step_times);
    s.median_tokens_per_s = Median(tok_rates);
    s.median_flops_per_s = Median(flop_rates);
    s.final_loss = last_loss;
    s.measured_stage_peak.assign(plan.pp, 0);
    for (int r = 0; r < n; ++r) {
      s.peak_bytes = std::max(s.peak_bytes, rank_peak[r]);
      int64_t& sp = s.measured_stage_peak[grid->CoordOf(r).pp];
      sp = std::max(sp, rank_peak[r]);
    }
    std::printf("%s", SummaryText(s, pf->prediction).c_str());
    if (entropy >= 0)
      std::printf("  loss floor   entropy rate %.4f nats/token; final loss is %.1f%% above it\n", entropy,
                  100.0 * (last_loss / entropy - 1.0));
    std::fflush(stdout);
  } else if (root) {
    std::printf("nothing to do: training already at step %lld of %lld\n", static_cast<long long>(start_step),
                static_cast<long long>(end_step));
  }
  return ckpt_failed ? kExitRuntime : kExitOk;
}

}  // namespace dt::rt
