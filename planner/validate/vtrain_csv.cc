// Reader for vTrain's measured iteration times (shared/validation/vtrain).
// Columns are found by header name, so both files (the multi-node one has a
// leading parameter-count column) use the same code. Run settings that the
// CSVs do not carry come from the vTrain README: A100, 8 GPUs per node,
// 1F1B, full activation recompute, no gradient bucketing, 800 Gbit/s of
// inter-node bandwidth per node, vocabulary 50257, FFN = 4h, mixed precision.
// The intra-node all-reduce tables are the ones vTrain measured on that node
// (bundled profile A100-SXM4-80GB-vTrain, built from its LUTs by
// scripts/vtrain-allreduce-logs.py and `dtplan profile --from-nccl-tests`);
// device and compute stay the A100 profile's.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "planner/validate/case.h"

namespace dt {
namespace {

constexpr const char* kVtrainNetworkProfile = "A100-SXM4-80GB-vTrain";

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
    out.push_back(cell);
  }
  return out;
}

}  // namespace

StatusOr<std::vector<ValidationCase>> ReadVtrainCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "': check the path");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError("reading '" + path + "' failed");
  return VtrainCasesFromCsvText(text.str(), path);
}

StatusOr<std::vector<ValidationCase>> VtrainCasesFromCsvText(const std::string& csv, const std::string& path) {
  std::istringstream in(csv);
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument("'" + path + "' is empty");
  if (line.size() >= 3 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line = line.substr(3);
  std::vector<std::string> header = SplitCsv(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  const char* required[] = {"# GPUs", "global batch", "micro batch", "hidden size",
                            "attention heads", "# layers", "sequence length",
                            "tensor parallelism", "data parallelism", "pipeline parallelism",
                            "iteration time (ms)"};
  for (const char* r : required)
    if (!col.count(r))
      return InvalidArgument("'" + path + "': missing column '" + r +
                             "' (expected vTrain's ground_truth CSV header)");
  // The measured node's network: loaded once per process (immutable data;
  // a function-local static is initialised once, thread-safely), shared by
  // every row.
  static const StatusOr<HardwareProfile> measured = LoadProfile(kVtrainNetworkProfile);
  if (!measured.ok())
    return InvalidArgument("'" + path + "': cannot load the bundled profile '" + kVtrainNetworkProfile +
                           "' holding vTrain's measured all-reduce tables: " + measured.status().message() +
                           " (regenerate it as docs/validation.md says)");
  static const auto network = std::make_shared<const NetworkProfile>(measured->network);
  std::vector<ValidationCase> out;
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    std::vector<std::string> cells = SplitCsv(line);
    const std::string where = "'" + path + "' line " + std::to_string(lineno);
    auto row = [&]() -> StatusOr<ValidationCase> {
    if (cells.size() < header.size())
      return InvalidArgument(where + ": expected " + std::to_string(header.size()) + " columns, got " +
                             std::to_string(cells.size()));
    auto num = [&](const char* name, double* v) -> Status {
      try {
        size_t used = 0;
        *v = std::stod(cells[col[name]], &used);
        if (used != cells[col[name]].size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        return InvalidArgument(where + ": column '" + name + "' is not a number: '" + cells[col[name]] + "'");
      }
      return Status::Ok();
    };
    // Counts must be whole numbers in 1 .. 2^24 before any cast to int
    // (nan, inf, 1e10 or 2.5 are errors, not undefined behaviour).
    auto count = [&](const char* name, double* v) -> Status {
      DT_RETURN_IF_ERROR(num(name, v));
      if (!(std::isfinite(*v) && *v >= 1 && *v <= (1 << 24) && *v == std::floor(*v)))
        return InvalidArgument(where + ": column '" + name + "' must be a whole number in 1 .. 16777216, is '" +
                               cells[col[name]] + "'");
      return Status::Ok();
    };
    double gpus, gb, mbs, h, a, l, s, tp, dp, pp, ms;
    DT_RETURN_IF_ERROR(count("# GPUs", &gpus));
    DT_RETURN_IF_ERROR(count("global batch", &gb));
    DT_RETURN_IF_ERROR(count("micro batch", &mbs));
    DT_RETURN_IF_ERROR(count("hidden size", &h));
    DT_RETURN_IF_ERROR(count("attention heads", &a));
    DT_RETURN_IF_ERROR(count("# layers", &l));
    DT_RETURN_IF_ERROR(count("sequence length", &s));
    DT_RETURN_IF_ERROR(count("tensor parallelism", &tp));
    DT_RETURN_IF_ERROR(count("data parallelism", &dp));
    DT_RETURN_IF_ERROR(count("pipeline parallelism", &pp));
    DT_RETURN_IF_ERROR(num("iteration time (ms)", &ms));
    if (!(std::isfinite(ms) && ms > 0 && ms < 1e9))
      return InvalidArgument(where + ": column 'iteration time (ms)' must be a positive finite time, is '" +
                             cells[col["iteration time (ms)"]] + "'");
    ValidationCase v;
    v.profile = "A100-SXM4-80GB";
    json mj = {{"name", "gpt-h" + std::to_string(int(h)) + "-l" + std::to_string(int(l))},
               {"family", "gpt"},
               {"num_layers", int(l)},
               {"hidden_size", int(h)},
               {"num_attention_heads", int(a)},
               {"ffn_hidden_size", 4 * int(h)},
               {"vocab_size", 50257},
               {"seq_length", int(s)}};
    auto model = ModelFromJson(mj, where);
    if (!model.ok()) return model.status();
    v.model = *model;
    v.group = v.model.name + "-s" + std::to_string(int(s));
    v.id = v.group + "-g" + std::to_string(int(gpus)) + "-gb" + std::to_string(int(gb)) + "-mb" +
           std::to_string(int(mbs)) + "-t" + std::to_string(int(tp)) + "d" + std::to_string(int(dp)) +
           "p" + std::to_string(int(pp));
    // In doubles: each count is <= 2^24, so the product is exact but may not fit an int
    // (found by tests/fuzz/vtrain_csv_fuzz.cc; corpus/vtrain_csv/product_overflows_int.csv).
    if (gpus != tp * dp * pp)
      return InvalidArgument(where + ": # GPUs (" + std::to_string(int(gpus)) + ") != tp*dp*pp");
    if (gpus <= 8) {
      v.cluster.nodes = 1;
      v.cluster.gpus_per_node = int(gpus);
    } else {
      v.cluster.nodes = int(gpus) / 8;
      v.cluster.gpus_per_node = 8;
    }
    SearchConstraints& k = v.constraints;
    k.global_batch = static_cast<int64_t>(gb);
    k.seq_length = int(s);
    k.tp = int(tp); k.dp = int(dp); k.pp = int(pp); k.cp = 1; k.vpp = 1;
    k.micro_batch = int(mbs);
    k.schedule = Schedule::k1F1B;
    k.recompute = Recompute::kFull;
    k.sequence_parallel = false;
    k.zero_stage = 0;
    k.flash_attention = false;  // Megatron-DeepSpeed of vTrain: unfused attention core
    k.cross_entropy_fusion = false;  // and Megatron's unfused vocab-parallel cross-entropy
    v.dp_bucket_bytes = int64_t{1} << 60;  // no gradient bucketing: one reduction after backward
    v.hardware.network = network;
    v.hardware.inter_node_Bps_per_node = 800e9 / 8;  // 800 Gbit/s per node
    v.measured_s = ms / 1000.0;
    v.source = "vTrain " + path.substr(path.find_last_of('/') + 1);
    return v;
    };
    auto v = row();
    if (v.ok()) {
      out.push_back(std::move(*v));
    } else {  // kept, so the report lists it and the other rows are still scored
      ValidationCase bad;
      bad.id = bad.group = "line " + std::to_string(lineno);
      bad.invalid = v.status().message();
      out.push_back(std::move(bad));
    }
  }
  return out;
}

}  // namespace dt
