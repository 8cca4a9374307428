#include "planner/profile/nccl_tests_profile.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <tuple>

#include "base/format.h"
#include "planner/profile/collective_series.h"

namespace dt {
namespace {


bool ToKind(const std::string& test, CollKind* k) {
  if (test == "all_reduce")
    *k = CollKind::kAllReduce;
  else if (test == "all_gather")
    *k = CollKind::kAllGather;
  else if (test == "reduce_scatter")
    *k = CollKind::kReduceScatter;
  else if (test == "sendrecv")
    *k = CollKind::kSendRecv;
  else
    return false;
  return true;
}

std::string Where(const NcclTestsRun& r) { return r.file + ":" + std::to_string(r.line); }

// The GPU model named in a string ("A100", "H100", "H200", "B200", ...), or "".
std::string GpuModel(const std::string& s) {
  for (size_t i = 0; i + 4 <= s.size(); ++i) {
    const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(s[i])));
    if ((c == 'A' || c == 'H' || c == 'B' || c == 'V' || c == 'L') &&
        std::isdigit(static_cast<unsigned char>(s[i + 1])) && std::isdigit(static_cast<unsigned char>(s[i + 2])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 3])) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1]))))
      return std::string(1, c) + s.substr(i + 1, 3);
  }
  return "";
}

}  // namespace

StatusOr<NcclTestsImport> ProfileFromNcclTests(const HardwareProfile& base, const std::vector<NcclTestsRun>& runs,
                                               const std::string& name, const std::string& source,
                                               const std::string& date) {
  NcclTestsImport out;
  HardwareProfile& p = out.profile;
  p = base;
  p.name = name;
  p.created = date;
  const int per_node = base.network.gpus_per_node;
  // (kind, inter, key) -> the run that filled it.
  std::map<std::tuple<int, bool, int>, const NcclTestsRun*> filled;
  std::vector<std::string> logged, alltoall;
  std::string gpu_names;
  for (const NcclTestsRun& r : runs) {
    const std::string where = Where(r);
    if (!r.device_name.empty() && gpu_names.find(r.device_name) == std::string::npos)
      gpu_names += (gpu_names.empty() ? "" : ", ") + r.device_name;
    if (r.ranks_per_host > per_node)
      return InvalidArgument(where + ": " + r.test + " ran " + std::to_string(r.ranks_per_host) +
                             " ranks on one host, but the base profile '" + base.name + "' has " +
                             std::to_string(per_node) + " devices per node; use a --base with " +
                             std::to_string(r.ranks_per_host) + " devices per node");
    if (r.test == "alltoall") {
      double best = 0;
      for (const NcclTestsRow& row : r.rows) best = std::max(best, row.busbw_GBps);
      alltoall.push_back(std::to_string(r.ranks) + " ranks on " + std::to_string(r.hosts) + " host(s): busbw up to " +
                         ShortNumber(best) + " GB/s");
      out.summary.push_back(where + ": alltoall, " + std::to_string(r.ranks) + " ranks on " + std::to_string(r.hosts) +
                            " host(s): noted only (no plan dtplan prices uses all-to-all)");
      continue;
    }
    CollKind kind;
    if (!ToKind(r.test, &kind)) {
      out.summary.push_back(where + ": " + r.test +
                            ": ignored (dtplan prices all_reduce, all_gather, "
                            "reduce_scatter and sendrecv)");
      continue;
    }
    if (r.ranks < 2)
      return InvalidArgument(where + ": " + r.test +
                             " ran on 1 rank, so nothing crossed a link; "
                             "run it on 2 or more GPUs (-g 8, or mpirun -np N)");
    const bool inter = r.hosts > 1;
    const int key = !inter ? r.ranks : (kind == CollKind::kSendRecv ? 1 : r.ranks_per_host);
    auto slot = std::make_tuple(static_cast<int>(kind), inter, key);
    if (auto it = filled.find(slot); it != filled.end())
      return InvalidArgument(where + ": a second " + r.test + (inter ? " inter-node run with " : " run on ") +
                             std::to_string(key) + (inter ? " rank(s) per node" : " ranks") +
                             " (the first: " + Where(*it->second) + "); keep one of them in the directory");
    filled[slot] = &r;
    CollSeries s;
    s.kind = kind;
    s.group_size = r.ranks;
    for (const NcclTestsRow& row : r.rows) s.samples.push_back({static_cast<double>(row.bytes), row.time_us * 1e-6});
    LinkEntry e = LinkEntryFromSeries(s);
    e.key = key;
    e.note = "nccl-tests " + r.test + "_perf, " + std::to_string(r.ranks) + " ranks on " + std::to_string(r.hosts) +
             " host(s) (" + where + "), out-of-place; " + e.note;
    std::vector<LinkEntry>& table = inter ? p.network.collectives[static_cast<int>(kind)].inter
                                          : p.network.collectives[static_cast<int>(kind)].intra;
    table.erase(std::remove_if(table.begin(), table.end(), [&](const LinkEntry& x) { return x.key == key; }),
                table.end());
    table.push_back(e);
    std::sort(table.begin(), table.end(), [](const LinkEntry& a, const LinkEntry& b) { return a.key < b.key; });
    const std::string entry =
        std::string(CollectiveKey(kind)) + (inter ? ".inter[" : ".intra[") + std::to_string(key) + "]";
    logged.push_back(entry);
    out.summary.push_back(where + ": " + r.test + ", " + std::to_string(r.ranks) + " ranks on " +
                          std::to_string(r.hosts) + " host(s), " + std::to_string(r.rows.size()) + " sizes " +
                          ShortNumber(static_cast<double>(r.rows.front().bytes)) + ".." +
                          ShortNumber(static_cast<double>(r.rows.back().bytes)) + " B, busbw up to " + ShortNumber(e.busbw_Bps / 1e9) +
                          " GB/s -> network.collectives." + entry);
  }
  if (logged.empty())
    return InvalidArgument("'" + source +
                           "': no all_reduce, all_gather, reduce_scatter or sendrecv run; "
                           "nothing to put in the collective tables");
  std::string entries;
  for (const std::string& s : logged) entries += (entries.empty() ? "" : ", ") + s;
  p.sources["nccl_tests_logs"] = "nccl-tests output in '" + source +
                                 "' (GPUs: " + (gpu_names.empty() ? "not named" : gpu_names) +
                                 "), read by dtplan profile "
                                 "--from-nccl-tests on " +
                                 date;
  p.description = "network from nccl-tests logs (" + source + "); device and compute from profile '" + base.name +
                  "': " + base.description;
  p.network.note = "Entries " + entries +
                   ": sources.nccl_tests_logs (measured points, out-of-place columns). "
                   "Every other entry is the base profile's '" +
                   base.name + "' (its note: " + base.network.note + ")" +
                   (alltoall.empty() ? "" : ". alltoall, not priced: ");
  for (size_t i = 0; i < alltoall.size(); ++i) p.network.note += (i ? "; " : "") + alltoall[i];
  const std::string base_gpu = GpuModel(base.name + " " + base.description), log_gpu = GpuModel(gpu_names);
  if (!base_gpu.empty() && !log_gpu.empty() && base_gpu != log_gpu)
    out.summary.push_back("note: the logs ran on " + gpu_names + " but the base profile '" + base.name +
                          "' describes " + base_gpu + ": its device and compute sections may not fit this cluster");
  if (Status s = PrepareProfile(&p, "nccl-tests profile from '" + source + "'"); !s.ok()) return s;
  return out;
}

}  // namespace dt
