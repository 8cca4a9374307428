// dtrun: executes a dtplan plan file for real on CPU ranks (Eigen + Open MPI),
// from the same per-rank action lists the simulator costs. See docs/runtime.md.
//
//   mpirun -np 4 dtrun --plan plan.json --steps 50 [--data FILE] [--metrics m.jsonl]
//          [--checkpoint-dir ckpt --checkpoint-every 10] [--resume]
//
// Exit codes: 0 ok, 1 runtime failure (e.g. a checkpoint or metrics write
// failed), 2 bad input (every rank exits), 3 a phase (startup, step, save,
// resume, shutdown) exceeded --timeout (the JobWatchdog aborts the job).
#include <CLI/CLI.hpp>

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "runtime/cli/fault_drill.h"
#include "runtime/cli/options.h"
#include "runtime/cli/trainer.h"
#include "runtime/comm/mpi_comm.h"
#include "runtime/comm/watchdog.h"

namespace {

// Parses argv into *o. Returns -1 to continue, else the exit code (help: 0,
// parse errors: 2). Only rank 0 prints.
int ParseDtrunArgs(int argc, char** argv, bool print, dt::rt::DtrunOptions* o) {
  CLI::App app{"dtrun: execute a dtplan plan (DP x TP x PP, microbatch schedules, recompute, SP, ZeRO-1)\n"
               "on CPU ranks with Open MPI; launch with mpirun -np <plan world> or srun."};
  app.add_option("--plan", o->plan_path, "plan file written by dtplan --out")->required();
  app.add_option("--steps", o->steps, "total training steps (also the LR schedule length)");
  app.add_option("--stop-at", o->stop_at, "stop (and checkpoint) once this many steps are done; resume later");
  app.add_option("--data", o->data_path,
                 "training data: a .bin file of uint16 token ids, or any other file as text (bytes, vocab 256); "
                 "default: synthetic Markov chain with a known entropy rate");
  app.add_option("--seed", o->seed, "seed for model init and data order");
  app.add_option("--lr", o->lr, "peak learning rate (linear warmup, cosine decay)");
  app.add_option("--min-lr", o->min_lr, "final learning rate (default 10% of --lr)");
  app.add_option("--warmup-steps", o->warmup_steps,
                 "learning-rate warmup steps, at most --steps (default 10, or --steps if fewer)");
  app.add_option("--weight-decay", o->weight_decay, "AdamW weight decay");
  app.add_option("--clip", o->clip, "global gradient-norm clip (<= 0: off)");
  app.add_option("--dropout", o->dropout,
                 "dropout rate of a plan that trains with dropout (GPT: embedding, attention probabilities, "
                 "attention and MLP outputs; default 0.1, Megatron-LM's)");
  app.add_option("--metrics", o->metrics_path, "write JSON lines per step per rank to this file");
  app.add_option("--checkpoint-dir", o->checkpoint_dir, "checkpoint root directory");
  app.add_option("--checkpoint-every", o->checkpoint_every, "save every K steps (and always at the end)");
  app.add_option("--keep-checkpoints", o->keep_checkpoints,
                 "after each save keep only the newest N checkpoints in --checkpoint-dir (0: keep all)");
  app.add_flag("--resume", o->resume, "resume from the latest checkpoint in --checkpoint-dir (any plan)");
  app.add_option("--timeout,--step-timeout", o->timeout_s,
                 "abort the whole job when a rank makes no progress for this long in any phase: startup, a step, "
                 "a checkpoint save or resume, shutdown (s; <= 0: off)");
  app.add_flag("--quiet", o->quiet, "no per-step lines");
  app.add_option("--debug-kill-rank", o->debug_kill_rank, "fault drill: world rank that SIGKILLs itself")
      ->group("");
  app.add_option("--debug-kill-step", o->debug_kill_step, "fault drill: during this (1-based) step")->group("");
  app.add_option("--debug-kill-phase", o->debug_kill_phase, "fault drill: or on entering this phase")->group("");
  app.add_option("--debug-stall-rank", o->debug_stall_rank, "fault drill: world rank that SIGSTOPs itself")
      ->group("");
  app.add_option("--debug-stall-phase", o->debug_stall_phase,
                 "fault drill: on entering this phase (startup, resume, step, save, shutdown)")->group("");
  app.add_option("--debug-stall-step", o->debug_stall_step, "fault drill: the step of phase 'step'")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (print) std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    if (print) std::fprintf(stderr, "dtrun: error: %s (see dtrun --help)\n", e.what());
    return 2;
  }
  return -1;
}

// CPUs this process may run on: its affinity mask, which the launcher sets
// (Open MPI binds each rank to one core when there are no more ranks than
// cores, so `mpirun -np 1` on 2 cores gives 1); all cores when unreadable.
int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

// Without OMP_NUM_THREADS, share the cores among the ranks of this node, and
// never run more threads than the CPUs the rank is bound to: two threads
// time-sharing one bound core made every gpt-tiny step 6-30% slower than
// one thread (docs/runtime.md, "Threads per rank"). `dtplan profile`
// measures with the same count (libgomp's default follows the mask).
void SetThreads() {
#ifdef _OPENMP
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  MPI_Comm node;
  DT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 1;
  DT_MPI_CHECK(MPI_Comm_size(node, &local));
  DT_MPI_CHECK(MPI_Comm_free(&node));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  omp_set_num_threads(std::max(1, std::min(AllowedCpus(), cores / std::max(1, local))));
#endif
}

}  // namespace

int main(int argc, char** argv) {
  int code = 0;
  // Outlives the world: MPI_Finalize (a collective) is watched too.
  std::unique_ptr<dt::rt::JobWatchdog> watchdog;
  {
    dt::rt::MpiWorld world(&argc, &argv);
    dt::rt::DtrunOptions opts;
    code = ParseDtrunArgs(argc, argv, world.rank() == 0, &opts);
    if (code < 0) {
      watchdog = std::make_unique<dt::rt::JobWatchdog>(opts.timeout_s);
      watchdog->Enter("startup");
      try {
        dt::rt::InjectFault(opts, world.rank(), "startup");
        SetThreads();
        code = dt::rt::RunTraining(opts, world, watchdog.get());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dtrun: [rank %d] error: %s\n", world.rank(), e.what());
        code = 1;
      }
      watchdog->Enter("shutdown");
      dt::rt::InjectFault(opts, world.rank(), "shutdown");
    }
    if (std::fflush(stdout) != 0 && code == 0) code = 1;  // stdout on a full disk
  }
  watchdog.reset();
  return code;
}
