// runtime_bench: how fast the bundled runtime trains on CPU.
//
//   runtime_bench [options]                  1 process: the step's GFLOP/s vs
//       bare GEMMs of the same shapes (every GEMM library of the build; the
//       step uses DT_GEMM or the default), with 1 thread and with all cores.
//   mpirun -np 2 runtime_bench [options]     DP=2 scaling efficiency: 1 thread
//       per rank; rank 0 alone first (1-rank baseline, 1 thread), then both
//       ranks with the DP gradient all-reduce; efficiency =
//       throughput(2 ranks) / (2 x throughput(1 rank)) = t_step(1) / t_step(2).
//
// Options: --layers N --hidden N --heads N --ffn N --seq N --micro-batch N --vocab N --steps N --warmup N
//          --gemm-reps N --threads N (1-process mode: the multi-thread count,
//          default all cores) --breakdown (per-op times for every thread count).
// FLOPs: 2mnk summed over the GEMM calls the step actually made (recorded by
// ProfilingBackend): linear layers, attention QK^T / PV and their backward,
// and the LM head. Times are medians over the timed steps / repetitions.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/check.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/bf16_gemm.h"
#include "runtime/backend/cpu_gemm.h"
#include "runtime/bench/bare_gemm.h"
#include "runtime/bench/profiling_backend.h"
#include "runtime/bench/stats.h"
#include "runtime/bench/step_runner.h"
#include "runtime/comm/mpi_comm.h"

namespace dt::rt::bench {
namespace {

struct Options {
  BenchConfig cfg;
  int steps = 5, warmup = 1, gemm_reps = 5;
  int threads = 0;  // 0: all cores
  bool breakdown = false;
  GemmInputs inputs = GemmInputs::kFp32;
};

constexpr const char* kUsage =
    "usage: runtime_bench [--layers N] [--seq N] [--hidden N] [--heads N] [--ffn N] [--micro-batch N] "
    "[--vocab N] [--steps N] [--warmup N] [--gemm-reps N] [--threads N] [--breakdown] [--gemm-inputs fp32|bf16]";

// Bad arguments: one line naming the problem, the usage, exit 2 (no abort).
[[noreturn]] void BadArgs(const std::string& why) {
  std::fprintf(stderr, "runtime_bench: %s\n%s\n", why.c_str(), kUsage);
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](int lo) -> int {
      if (i + 1 >= argc) BadArgs(a + " needs a value");
      const std::string v = argv[++i];
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || x < lo || x > (1 << 24))
        BadArgs(a + " " + v + ": expected an integer from " + std::to_string(lo) + " to " + std::to_string(1 << 24));
      return static_cast<int>(x);
    };
    if (a == "--layers") o.cfg.layers = next(1);
    else if (a == "--seq") o.cfg.seq = next(1);
    else if (a == "--hidden") o.cfg.hidden = next(1);
    else if (a == "--heads") o.cfg.heads = next(1);
    else if (a == "--ffn") o.cfg.ffn = next(1);
    else if (a == "--micro-batch") o.cfg.micro_batch = next(1);
    else if (a == "--vocab") o.cfg.vocab = next(1);
    else if (a == "--steps") o.steps = next(1);
    else if (a == "--warmup") o.warmup = next(0);
    else if (a == "--gemm-reps") o.gemm_reps = next(1);
    else if (a == "--threads") o.threads = next(0);
    else if (a == "--breakdown") o.breakdown = true;
    else if (a == "--gemm-inputs") {
      const std::string v = i + 1 < argc ? argv[++i] : "";
      if (v == "fp32") o.inputs = GemmInputs::kFp32;
      else if (v == "bf16") o.inputs = GemmInputs::kBf16;
      else BadArgs("--gemm-inputs '" + v + "': expected fp32 or bf16");
    }
    else if (a == "--help" || a == "-h") { std::printf("%s\n", kUsage); std::exit(0); }
    else BadArgs("unknown option " + a);
  }
  if (o.cfg.hidden % o.cfg.heads != 0)
    BadArgs("--hidden " + std::to_string(o.cfg.hidden) + " is not a multiple of --heads " + std::to_string(o.cfg.heads));
  return o;
}

double Median(const std::vector<StepSample>& v, double (*f)(const StepSample&)) {
  std::vector<double> x;
  for (const auto& s : v) x.push_back(f(s));
  return bench::Median(x);
}
double FwdBwd(const StepSample& s) { return s.fwd_bwd_s; }
double Optim(const StepSample& s) { return s.optim_s; }
double Total(const StepSample& s) { return s.total(); }

void PrintHeader(const Options& o, const char* mode) {
  const BenchConfig& c = o.cfg;
  std::printf("runtime_bench (%s): GPT-2-small layer stack, layers=%d hidden=%d heads=%d ffn=%d "
              "seq=%d micro_batch=%d vocab=%d (tied LM head), tokens/step/rank=%lld, "
              "%d warm-up + %d timed steps\n",
              mode, c.layers, c.hidden, c.heads, c.ffn, c.seq, c.micro_batch, c.vocab,
              static_cast<long long>(c.tokens_per_step()), o.warmup, o.steps);
}

// Step vs bare GEMM with `threads` OpenMP threads on this one process.
void ComputeReport(const Options& o, int threads) {
  omp_set_num_threads(threads);
  const StatusOr<GemmLibrary> lib = GemmLibraryFromEnv();
  DT_CHECK(lib.ok()) << lib.status().message();
  auto cpu = MakeCpuBackend(*lib, o.inputs);
  const bool bf16 = o.inputs == GemmInputs::kBf16;
  const bool native_bf16 = bf16 && *lib != GemmLibrary::kEigen && Bf16GemmNative();
  ProfilingBackend prof(*cpu);
  const auto samples = RunSteps(o.cfg, prof, nullptr, o.warmup, o.steps, &prof);
  const double steps = static_cast<double>(o.steps);
  const double flops = prof.gemm_flops() / steps;  // per step
  const double t_fb = Median(samples, FwdBwd), t_opt = Median(samples, Optim),
               t_all = Median(samples, Total);
  const double gemm_in_step = prof.ops().count("gemm") ? prof.ops().at("gemm").seconds / steps : 0;

  // Per library, per step: sum over shapes of calls x median time. The
  // step's own library is the reference of the step/bare ratio.
  double bare_s = 0.0;
  std::vector<std::pair<std::string, double>> bare_by_lib;
  for (const std::string& name : AvailableGemmLibraries()) {
    const GemmLibrary l = *ParseGemmLibrary(name);
    double s = 0.0;
    for (const auto& [shape, calls] : prof.gemms())
      s += BareGemmSeconds(shape, threads, o.gemm_reps, l) * double(calls) / steps;
    bare_by_lib.emplace_back(std::string(GemmLibraryName(l)) + " fp32", s);
    if (l == *lib && !native_bf16) bare_s = s;
  }
  if (native_bf16) {
    double s = 0.0;
    for (const auto& [shape, calls] : prof.gemms())
      s += BareBf16GemmSeconds(shape, threads, o.gemm_reps) * double(calls) / steps;
    bare_by_lib.emplace_back("oneDNN bf16", s);
    bare_s = s;
  }
  const std::string steps_lib = native_bf16 ? std::string("oneDNN bf16") : std::string(GemmLibraryName(*lib)) + " fp32";
  const double bare = flops / bare_s * 1e-9;
  const double step_fb = flops / t_fb * 1e-9, step_all = flops / t_all * 1e-9;

  std::printf("\n[1 rank, %d thread%s, GEMM: %s%s]\n", threads, threads == 1 ? "" : "s",
              GemmLibraryDescription(*lib).c_str(),
              bf16 ? (", bf16 inputs: " + (native_bf16 ? Bf16GemmDescription() : std::string("emulated"))).c_str() : "");
  std::printf("  GEMM FLOPs per step (fwd+bwd): %.2f GFLOP (LM head %.2f), %zu distinct shapes\n",
              flops * 1e-9, o.cfg.head_flops() * 1e-9, prof.gemms().size());
  std::printf("  step fwd+bwd          median %8.4f s  -> %7.2f GFLOP/s\n", t_fb, step_fb);
  std::printf("  step fwd+bwd+AdamW    median %8.4f s  -> %7.2f GFLOP/s  (optimizer %.4f s)\n",
              t_all, step_all, t_opt);
  std::printf("  GEMMs inside the step        %8.4f s  -> %7.2f GFLOP/s\n", gemm_in_step,
              gemm_in_step > 0 ? flops / gemm_in_step * 1e-9 : 0.0);
  for (const auto& [name, s] : bare_by_lib)
    std::printf("  bare %-13s GEMM, same shapes %8.4f s  -> %7.2f GFLOP/s  (median of %d reps)%s\n",
                name.c_str(), s, flops / s * 1e-9, o.gemm_reps,
                name == steps_lib ? "  <- the step's" : "");
  std::printf("  ratio step/bare: fwd+bwd %.3f, fwd+bwd+AdamW %.3f  (issue 10 target >= 0.85)\n",
              step_fb / bare, step_all / bare);
  if (o.breakdown || threads == 1) {
    std::printf("  per-op time per step (timed steps, mean):\n");
    double in_ops = 0;
    for (const auto& [name, s] : prof.ops()) {
      std::printf("    %-14s %8.4f s  %6lld calls\n", name.c_str(), s.seconds / steps,
                  static_cast<long long>(s.calls / o.steps));
      in_ops += s.seconds / steps;
    }
    std::printf("    %-14s %8.4f s  (embedding, loss, tensor alloc/zero-fill, clones)\n",
                "other", Median(samples, FwdBwd) - in_ops);
  }
  std::fflush(stdout);
}

// Sleeps (instead of spinning in MPI) until every rank reaches this point.
void IdleBarrier() {
  MPI_Request req;
  DT_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  int done = 0;
  while (!done) {
    DT_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void DpReport(const Options& o, const MpiWorld& world) {
  DT_CHECK_EQ(world.size(), 2) << "DP scaling mode runs on exactly 2 ranks: mpirun -np 2";
  omp_set_num_threads(1);
  auto cpu = MakeCpuBackend();  // DT_GEMM or the build's default
  MpiComm comm(MPI_COMM_WORLD, /*owned=*/false);
  // Phase 1: rank 0 alone, 1 thread (the other rank sleeps: no core contention).
  std::vector<StepSample> one;
  if (world.rank() == 0) one = RunSteps(o.cfg, *cpu, nullptr, o.warmup, o.steps, nullptr);
  IdleBarrier();
  // Phase 2: both ranks, DP all-reduce of the gradients (GradSync buckets).
  auto two = RunSteps(o.cfg, *cpu, &comm, o.warmup, o.steps, nullptr);
  std::vector<float> fb, all;  // per step, the slowest rank
  for (const auto& s : two) {
    fb.push_back(static_cast<float>(s.fwd_bwd_s));
    all.push_back(static_cast<float>(s.total()));
  }
  comm.AllReduce(fb.data(), fb.size(), ReduceOp::kMax);
  comm.AllReduce(all.data(), all.size(), ReduceOp::kMax);
  if (world.rank() != 0) return;
  const double t1 = Median(one, Total), t1_fb = Median(one, FwdBwd);
  const double t2 = bench::Median(std::vector<double>(all.begin(), all.end()));
  const double t2_fb = bench::Median(std::vector<double>(fb.begin(), fb.end()));
  const double tok = static_cast<double>(o.cfg.tokens_per_step());
  std::printf("\n[DP=2 scaling, 1 thread per rank; baseline = 1 rank with 1 thread]\n");
  std::printf("  1 rank : step median %8.4f s (fwd+bwd %.4f s) -> %8.1f tokens/s\n", t1, t1_fb,
              tok / t1);
  std::printf("  2 ranks: step median %8.4f s (fwd+bwd %.4f s, slowest rank) -> %8.1f tokens/s\n",
              t2, t2_fb, 2 * tok / t2);
  std::printf("  scaling efficiency = throughput(2) / (2 x throughput(1)) = %.3f  (target >= 0.85)\n",
              t1 / t2);
  std::printf("  compute-only (fwd+bwd) efficiency %.3f; gradient all-reduce + AdamW %.4f s/step\n",
              t1_fb / t2_fb, t2 - t2_fb);
  std::fflush(stdout);
}

}  // namespace
}  // namespace dt::rt::bench

int main(int argc, char** argv) {
  using namespace dt::rt;
  const bench::Options o = bench::Parse(argc, argv);  // before MPI: bad arguments exit 2 cleanly
  MpiWorld world(&argc, &argv);
  if (world.size() == 1) {
    bench::PrintHeader(o, "1 process");
    const int cores = o.threads > 0 ? o.threads
                                    : static_cast<int>(std::thread::hardware_concurrency());
    bench::ComputeReport(o, 1);
    if (cores > 1) bench::ComputeReport(o, cores);
  } else {
    if (world.rank() == 0) bench::PrintHeader(o, "DP scaling");
    bench::DpReport(o, world);
  }
  return 0;
}
