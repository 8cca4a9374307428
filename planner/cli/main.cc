// dtplan: command-line entry. Parses flags with CLI11 and dispatches to the
// subcommands in commands.h; turns every library exception into a message.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>
#include <string>

#include "planner/cli/commands.h"
#ifdef DT_HAVE_PROFILER
#include "planner/profiler/profile_command.h"
#endif

namespace {

// Groups of `dtplan validate`'s options: the mode each applies to.
constexpr const char* kValidateEither = "Either mode";
constexpr const char* kValidateCases = "Recorded cases (--cases, --cv)";
constexpr const char* kValidateExecute = "Closed loop (--execute)";

void AddCommon(CLI::App* app, dt::cli::CommonOptions* c, bool model_required) {
  auto* m = app->add_option("--model", c->model, "model file (our schema or a HuggingFace config.json)");
  if (model_required) m->required();
  app->add_option("--nodes", c->nodes, "number of nodes")->check(CLI::Range(1, 1 << 20));
  app->add_option("--gpus", c->gpus, "devices (GPUs, or CPU ranks) per node")->check(CLI::Range(1, 1024));
  app->add_option("--device", c->device, "gpu or cpu")->check(CLI::IsMember({"gpu", "cpu"}));
  app->add_option("--profile", c->profile,
                  "hardware profile: a bundled name (A100-SXM4-80GB (gpu default), H100-SXM5-80GB, local-cpu "
                  "(cpu default, measured with 2 ranks per node; local-cpu-1rank for --gpus 1), cpu-generic) or a file");
  app->add_option("--threads", c->threads, "worker threads (0, the default: all cores)")->check(CLI::Range(0, 4096));
  app->add_flag("--json", c->json, "print JSON instead of a table");
}

void AddDimensions(CLI::App* app, dt::cli::DimensionOptions* d) {
  app->add_option("--dp", d->dp, "fix data parallelism");
  app->add_option("--tp", d->tp, "fix tensor parallelism");
  app->add_option("--pp", d->pp, "fix pipeline parallelism");
  app->add_option("--cp", d->cp, "fix context parallelism");
  app->add_option("--ep", d->ep, "fix expert parallelism (mixture-of-experts models; divides the experts and dp, or tp*dp/etp)");
  app->add_option("--etp", d->etp,
                  "fix expert tensor parallelism (MoE; a divisor of tp, default searched over tp and 1; etp < tp folds "
                  "EP over tp*dp, Megatron-LM's --expert-tensor-parallel-size)");
  app->add_option("--vpp", d->vpp, "fix virtual stages per pipeline rank (interleaved)");
  app->add_option("--mbs", d->mbs, "fix the microbatch size");
  app->add_option("--schedule", d->schedule, "fix the schedule: gpipe, 1f1b or interleaved");
  app->add_option("--recompute", d->recompute, "fix recompute: none, selective or full");
  app->add_option("--recompute-modules", d->recompute_modules,
                  "with --recompute selective: the modules to recompute, comma-separated Megatron-LM names "
                  "(core_attn, layernorm, moe_act, mlp, moe, shared_experts, mla_up_proj; Megatron-LM's "
                  "--recompute-modules; default core_attn); not searched");
  app->add_option("--recompute-layers", d->recompute_layers,
                  "with --recompute full: recompute only the first N layers of each model chunk, the others keep "
                  "their activations (Megatron-LM's --recompute-method block --recompute-num-layers N); when the recompute mode is searched, "
                  "each fitting full-recompute plan that does not fit without recompute also comes with the fewest N that fits (table: full/N)")
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--zero", d->zero, "fix the ZeRO stage (0-3; 1 = distributed optimizer)");
  app->add_option("--precision", d->precision,
                  "training precision: fp32, bf16 (mixed: bf16 weights, activations, gradients; fp32 master "
                  "weights and Adam) or fp8 (bf16 mixed with Transformer-Engine FP8 GEMMs, on a profile with "
                  "FP8 data such as h100); default: the profile's (bf16 on gpu, fp32 on cpu)");
  app->add_option("--moe-dispatcher", d->moe_dispatcher,
                  "MoE token dispatcher: alltoall (default; every routed copy sent, Megatron-LM's alltoall "
                  "dispatcher, dtrun) or deduplicated (DeepEP / HybridEP: once per destination rank and node)");
  app->add_flag("--moe-a2a-overlap", d->moe_a2a_overlap,
                "MoE with ep > 1: overlap the EP all-to-alls of one microbatch with another's compute "
                "(Megatron-LM's --overlap-moe-expert-parallel-comm, combined 1F1B; one more warmup forward; "
                "no full recompute; pp 1 or interleaved)");
  app->add_flag("--delay-wgrad-compute", d->delay_wgrad_compute,
                "with --moe-a2a-overlap: run the experts' weight gradients beside the dispatch all-to-alls "
                "(Megatron-LM's --delay-wgrad-compute)");
  app->add_flag("--overlap-dispatch-backward-with-experts-wgrad", d->overlap_dispatch_backward_wgrad,
                "MoE without --moe-a2a-overlap: run the experts' weight gradients on a stream of their own beside "
                "the dispatch's backward all-to-all (Megatron-LM's flag of that name)");
  app->add_flag("--moe-shared-expert-overlap", d->moe_shared_expert_overlap,
                "MoE with shared experts: run them on a stream of their own beside the token dispatch and "
                "combine (Megatron-LM's --moe-shared-expert-overlap; not with --moe-a2a-overlap)");
  app->add_option("--moe-capacity-factor", d->moe_capacity_factor,
                  "MoE: each expert takes at most this many times its balanced share of the routed tokens, the "
                  "rest dropped (Megatron-LM's --moe-expert-capacity-factor; default 0: dropless, priced at the "
                  "1.25 load-imbalance allowance); bounds the allowance; not searched; dtrun executes it on CPU "
                  "plans with tp = cp = 1")
      ->check(CLI::Range(0.0, 1e6));
  app->add_flag("--moe-pad-to-capacity", d->moe_pad_to_capacity,
                "with --moe-capacity-factor: pad every expert's input to its capacity (Megatron-LM's "
                "--moe-pad-expert-input-to-capacity): every rank computes and sends exactly capacity x the "
                "balanced rows");
  app->add_flag("--tp-comm-overlap", d->tp_comm_overlap,
                "plans with tp > 1 and sequence parallelism overlap their all-gathers and reduce-scatters with the "
                "GEMMs next to them (Megatron-LM's --tp-comm-overlap, Transformer Engine userbuffers with its default "
                "methods); not searched; dtrun does not execute it");
  app->add_flag("--moe-router-cuda-graph", d->moe_router_cuda_graph,
                "MoE: the router and the dispatcher's preprocessing run as CUDA graphs (Megatron-LM's "
                "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router moe_preprocess): their host "
                "time (the profile's compute.moe_host.router_s) is not priced; not searched; GPU plans only");
  app->add_option("--attention-kernel", d->attention_kernel,
                  "price the attention core at the profile's default rate (default) or at its cuDNN fused-attention "
                  "curve (cudnn: Transformer Engine's kernel on Hopper with a current cuDNN, measured on an H100; "
                  "the 2025 Megatron-MoE-ModelZoo long-context runs match it, the 2024 NeMo runs the default, "
                  "docs/validation.md); not searched; GPU plans only")
      ->check(CLI::IsMember({"default", "cudnn"}));
  app->add_flag("--no-overlap-grad-reduce", d->no_overlap_grad_reduce,
                "start the data-parallel gradient reduction after the whole backward, as Megatron-LM runs "
                "without --overlap-grad-reduce (default: overlapped with the last backward, in buckets)");
  app->add_flag("--no-overlap-p2p-comm", d->no_overlap_p2p_comm,
                "interleaved GPU plans: every pipeline send blocks its stage's compute until done, as Megatron-LM "
                "runs with --no-overlap-p2p-communication (default: overlapped, Megatron-LM's default; schedules "
                "without interleaving always block on GPUs, never in dtrun)");
  app->add_flag("--fp8-param-gather", d->fp8_param_gather,
                "FP8 plans: keep the linear weights in FP8 and all-gather them in FP8 (Megatron-LM's "
                "--fp8-param-gather; plans with the distributed optimizer, zero 1, only; default off, as in "
                "Megatron-LM)");
  app->add_option("--fp8-recipe", d->fp8_recipe,
                  "FP8 plans: delayed (default; scales from an amax history, one read per cast) or tensorwise "
                  "(current scaling: an amax pass before every cast, amax all-reduced over TP for inputs that "
                  "sequence parallelism gathers); Megatron-LM's --fp8-recipe; not searched");
  app->add_option("--adam-moments", d->adam_moments,
                  "Adam's m and v in fp32 (default) or bf16 (Megatron-LM's --use-precision-aware-optimizer "
                  "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16; the master weights stay fp32); not searched")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  auto* sp_flag = app->add_flag("--sp", d->sp_on, "fix sequence parallelism on");
  app->add_flag("--no-sp", d->sp_off, "fix sequence parallelism off")->excludes(sp_flag);
}

}  // namespace

static int Run(int argc, char** argv) {
  CLI::App app{"dtplan: find the fastest way to split a model over a cluster (DP x TP x PP x CP),\n"
               "predicting memory fit and step time by discrete-event simulation."};
  app.require_subcommand(0, 1);
  // A repeated option takes its last value (as in most tools), never
  // CLI11's "At Most 1 required but received 2".
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  dt::cli::PlanOptions plan;
  AddCommon(&app, &plan.common, /*model_required=*/false);
  app.add_option("--global-batch", plan.global_batch, "sequences per step (default: 8 per device)");
  app.add_option("--seq-length", plan.seq_length, "tokens per sequence (default: the model's)");
  app.add_option("--framework", plan.framework,
                 "only plans this framework can run: megatron, torchtitan or deepspeed (default: any plan)");
  app.add_option("--from-megatron", plan.from_megatron,
                 "a Megatron-LM job's arguments (or @file): price that config next to the best plan");
  app.add_option("--top", plan.top, "how many plans to list")->check(CLI::Range(1, 1000));
  AddDimensions(&app, &plan.dims);
  app.add_option("--attention", plan.attention,
                 "attention kernel: flash (fused, default on gpu) or unfused (default on cpu)")
      ->check(CLI::IsMember({"flash", "unfused"}));
  app.add_option("--cross-entropy", plan.cross_entropy,
                 "the loss kernel: fused (one pass over the logits; default, Megatron-LM's "
                 "--cross-entropy-loss-fusion) or unfused (Megatron-LM's default: six PyTorch passes)")
      ->check(CLI::IsMember({"fused", "unfused"}));
  app.add_option("--out", plan.out, "where to write the best plan (JSON)");
  app.add_option("--trace", plan.trace, "write the best plan's simulated step as a Chrome trace");
  app.add_option("--report", plan.report,
                 "write a self-contained HTML report: ranking, rejections, the best plan's timeline and memory");

  dt::cli::SimulateOptions sim;
  CLI::App* sim_cmd = app.add_subcommand("simulate", "predict exactly one plan (JSON out); --nodes, --gpus, --device replace the plan file's cluster");
  AddCommon(sim_cmd, &sim.common, /*model_required=*/false);
  sim_cmd->add_option("--plan", sim.plan, "plan file written by dtplan --out")->required();
  sim_cmd->add_option("--trace", sim.trace, "write the simulated step as a Chrome trace");

  dt::cli::ValidateOptions val;
  CLI::App* val_cmd = app.add_subcommand("validate", "compare predictions with measured cases");
  // Validate's options come in three blocks, one per mode, and each block's
  // options get its group (--help shows them so); Run() refuses an option of
  // the other mode by its group. A new option joins the block it is added in.
  auto group_block = [val_cmd](size_t from, const char* group) {
    std::vector<CLI::Option*> opts = val_cmd->get_options();
    for (size_t i = from; i < opts.size(); ++i)
      if (opts[i]->get_name() != "--help") opts[i]->group(group);
    return opts.size();
  };
  size_t block = group_block(0, kValidateEither);
  val_cmd->add_option("--cases", val.cases, "cases: a JSON case file or a vTrain ground_truth CSV (repeatable)");
  val_cmd->add_flag("--cv", val.cv, "leave-one-source-out cross-validation of the calibrated profile parameters");
  block = group_block(block, kValidateCases);
  val_cmd->add_option("--profile", val.profile, "use this profile (every case; or the --execute predictions)");
  val_cmd->add_option("--threads", val.threads, "worker threads");
  val_cmd->add_flag("--json", val.json, "print JSON");
  val_cmd->add_option("--report", val.report,
                      "write a self-contained HTML report: predicted-vs-measured scatter plots and accuracy tables");
  val_cmd->add_flag("--execute", val.execute, "run plans for real with dtrun and compare (closed loop)");
  block = group_block(block, kValidateEither);
  val_cmd->add_option("--model", val.common.model, "with --execute: model file");
  val_cmd->add_option("--nodes", val.common.nodes, "with --execute: nodes")->check(CLI::Range(1, 1 << 20));
  val_cmd->add_option("--gpus", val.common.gpus, "with --execute: ranks per node")->check(CLI::Range(1, 1024));
  val_cmd->add_option("--device", val.common.device, "with --execute: cpu (gpu needs a GPU)")
      ->check(CLI::IsMember({"gpu", "cpu"}));
  AddDimensions(val_cmd, &val.dims);
  val_cmd->add_option("--global-batch", val.global_batch, "with --execute: sequences per step");
  val_cmd->add_option("--top", val.top, "with --execute: exactly this many plans: the best, one per schedule / recompute / ZeRO kind while room remains, the rest spread over the ranking")
      ->check(CLI::Range(1, 1000));
  val_cmd->add_option("--steps", val.steps, "with --execute: steps per run")->check(CLI::Range(2, 100000));
  val_cmd->add_option("--rounds", val.rounds,
                      "with --execute: runs per plan, made in rounds over all plans (each plan once, then again); a "
                      "plan's time is the median of its runs, so a machine whose speed drifts slows every plan alike "
                      "(default 5: the median of five stands two runs a slow minute spoiled)")
      ->check(CLI::Range(1, 100));
  val_cmd->add_flag("--speed-check", val.speed_check,
                    "with --execute on a CPU profile measured by `dtplan profile`: right before every plan run, "
                    "re-measure the profile's whole-step checks (a few seconds) and also report every error "
                    "against the step time scaled to the machine speed of the profile (tells the model's error "
                    "from a drifting machine's)");
  val_cmd->add_option("--dtrun", val.dtrun, "with --execute: dtrun binary (default: next to dtplan)");
  val_cmd->add_option("--work-dir", val.work_dir, "with --execute: where plans, logs and metrics go");
  group_block(block, kValidateExecute);
  // The dimension options came with the --execute block; the attention
  // kernel is also a what-if over recorded cases.
  val_cmd->get_option("--attention-kernel")->group(kValidateEither);

  dt::cli::ExportOptions exp;
  CLI::App* exp_cmd = app.add_subcommand("export", "print a plan as Megatron-LM flags, a torchtitan TOML or a "
                                                   "DeepSpeed config, with launch lines");
  exp_cmd->add_option("--plan", exp.plan, "plan file written by dtplan --out")->required();
  exp_cmd->add_option("--to", exp.to, "megatron, torchtitan or deepspeed")->required();
  exp_cmd->add_option("--out", exp.out, "write the config to this file instead of printing it");

  bool caps_json = false;
  CLI::App* caps_cmd = app.add_subcommand("capabilities", "which plan features dtrun executes on CPU and CUDA");
  caps_cmd->add_flag("--json", caps_json, "print JSON");

  // Listed for --help; `dtplan profile ...` is dispatched before parsing.
  CLI::App* prof_cmd = app.add_subcommand(
      "profile", "measure this machine into a profile (dtplan profile --help), or read nccl-tests logs "
                 "(dtplan profile --from-nccl-tests DIR --base PROFILE --out F)");
  prof_cmd->allow_extras();
  // `dtplan profile --from-nccl-tests ...` reads logs; nothing to measure.
  if (argc > 1 && std::string(argv[1]) == "profile" && dt::cli::WantsNcclTestsProfile(argc - 1, argv + 1))
    return dt::cli::RunNcclTestsProfile(argc - 1, argv + 1);
#ifdef DT_HAVE_PROFILER
  // `dtplan profile ...` hands every flag to the MPI profiler launcher.
  if (argc > 1 && std::string(argv[1]) == "profile") return dt::RunProfileCommand(argc - 1, argv + 1);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "dtplan: error: " << e.what() << " (see dtplan --help)\n";
    return 2;
  }
  try {
    if (*prof_cmd) return dt::cli::Fail("this dtplan was built without the profiler (it needs MPI); install "
                                        "openmpi and rebuild");
    if (*exp_cmd) return dt::cli::RunExport(exp);
    if (*sim_cmd) {
      sim.nodes_set = sim_cmd->count("--nodes") > 0;
      sim.gpus_set = sim_cmd->count("--gpus") > 0;
      sim.device_set = sim_cmd->count("--device") > 0;
      return dt::cli::RunSimulate(sim);
    }
    if (*caps_cmd) return dt::cli::RunCapabilities(caps_json);
    val.argv0 = argv[0];
    if (*val_cmd) {
      // validate has two modes that share one option list: --cases (score
      // recorded measurements, each case with its own plan) and --execute
      // (run plans with dtrun). An option of the other mode is refused, never
      // silently ignored.
      for (const CLI::Option* opt : val_cmd->get_options()) {
        if (opt->count() == 0) continue;
        const std::string name = opt->get_name();
        const std::string& group = opt->get_group();
        if (name == "--help" || group == kValidateEither) continue;
        const bool cases_only = group == kValidateCases;
        if (!cases_only && group != kValidateExecute) {
          std::cerr << "dtplan: internal error: validate option " << name << " has no mode (group '" << group
                    << "')\n";
          return 1;
        }
        if (val.execute && cases_only)
          return dt::cli::Fail("validate: " + name + " does not apply with --execute (which runs the plans it "
                               "searches for --model on this machine); drop " + name + ", or drop --execute to "
                               "score recorded cases");
        if (!val.execute && !cases_only)
          return dt::cli::Fail("validate: " + name + " applies to --execute only (running plans with dtrun); "
                               "without it validate predicts each case of --cases with the case's own plan. "
                               "Add --execute, or drop " + name);
      }
      if (val_cmd->count("--global-batch") && val.global_batch < 1)
        return dt::cli::Fail("--global-batch " + std::to_string(val.global_batch) +
                             " must be >= 1 (sequences per step); omit it for 8 per device");
      return val.execute ? dt::cli::RunValidateExecute(val) : dt::cli::RunValidate(val);
    }
    plan.global_batch_set = app.count("--global-batch") > 0;
    plan.seq_length_set = app.count("--seq-length") > 0;
    plan.cluster_set = app.count("--nodes") > 0 || app.count("--gpus") > 0;
    if (!plan.from_megatron.empty()) return dt::cli::RunFromMegatron(plan);
    if (plan.common.model.empty()) return dt::cli::Fail("--model is required (e.g. --model examples/models/gpt3-175b.json)");
    return dt::cli::RunPlan(plan);
  } catch (const std::exception& e) {
    std::cerr << "dtplan: internal error: " << e.what() << "\n";
    return 1;
  }
}

// Standard output is output too: `dtplan ... > plan.txt` on a full disk must
// not exit 0 with a truncated table.
int main(int argc, char** argv) {
  const int code = Run(argc, argv);
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0) {
    std::fprintf(stderr, "dtplan: error: writing standard output failed: %s\n", std::strerror(errno));
    return code == 0 ? 1 : code;
  }
  return code;
}
