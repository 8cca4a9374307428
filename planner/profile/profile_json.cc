// JSON <-> HardwareProfile. Schema: docs/profiles.md.
#include <sstream>

#include "planner/profile/profile.h"

namespace dt {
namespace {

constexpr CollKind kAllColls[] = {CollKind::kAllReduce, CollKind::kReduceScatter,
                                  CollKind::kAllGather, CollKind::kSendRecv};

// Returns the object/array at j[key] or sets *st; `what` names the field.
const json* Child(const json& j, const char* key, bool want_array, const std::string& what,
                  Status* st) {
  if (!st->ok()) return nullptr;
  if (!j.contains(key) || j.at(key).is_null()) {
    *st = InvalidArgument(what + ": missing field '" + key + "' (add \"" + key + "\": " +
                          (want_array ? "[...]" : "{...}") + ")");
    return nullptr;
  }
  const json& c = j.at(key);
  if (want_array ? !c.is_array() : !c.is_object()) {
    *st = InvalidArgument(what + ": field '" + key + "' must be " +
                          (want_array ? "an array" : "an object") + ", got " + c.dump());
    return nullptr;
  }
  return &c;
}

// [[x, y], ...] -> Curve.
Status ParseCurve(const json& arr, const std::string& what, Curve* c) {
  if (!arr.is_array()) return InvalidArgument(what + " must be an array of [x, y] pairs");
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& p = arr[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) {
      std::ostringstream os;
      os << what << "[" << i << "] must be a [number, number] pair, got " << p.dump();
      return InvalidArgument(os.str());
    }
    c->x.push_back(p[0].get<double>());
    c->y.push_back(p[1].get<double>());
  }
  return Status::Ok();
}

json CurveToJson(const Curve& c) {
  json a = json::array();
  for (size_t i = 0; i < c.size(); ++i) a.push_back({c.x[i], c.y[i]});
  return a;
}

Status ParseDevice(const json& j, const std::string& where, DeviceProfile* d) {
  FieldReader r(j, where + ": device");
  d->kind = r.Str("kind");
  d->memory_bytes = r.Int("memory_bytes");
  d->reserved_bytes = r.Int("reserved_bytes");
  d->fragmentation = r.Num("fragmentation");
  d->dtype = r.Str("dtype");
  d->peak_flops = r.Num("peak_flops");
  d->memory_bandwidth_Bps = r.Num("memory_bandwidth_Bps");
  d->note = r.StrOr("note", "");
  r.RejectUnknown();  // a misspelt field would keep its default
  return r.status();
}

Status ParseGemmPoints(const json& arr, const std::string& what, std::vector<GemmPoint>* out) {
  for (size_t i = 0; i < arr.size(); ++i) {
    FieldReader pr(arr[i], what + "[" + std::to_string(i) + "]");
    GemmPoint p;
    p.m = pr.Int("m");
    p.n = pr.Int("n");
    p.k = pr.Int("k");
    p.batch = pr.IntOr("batch", 1);
    p.seconds = pr.Num("seconds");
    DT_RETURN_IF_ERROR(pr.status());
    out->push_back(p);
  }
  return Status::Ok();
}

json GemmPointsToJson(const std::vector<GemmPoint>& pts) {
  json a = json::array();
  for (const GemmPoint& g : pts)
    a.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"batch", g.batch}, {"seconds", g.seconds}});
  return a;
}

Status ParseCompute(const json& j, const std::string& where, ComputeProfile* c) {
  std::string what = where + ": compute";
  FieldReader r(j, what);
  c->attention_efficiency = r.Num("attention_efficiency");
  c->memory_bound_efficiency = r.Num("memory_bound_efficiency");
  c->kernel_overhead_s = r.Num("kernel_overhead_s");
  c->optimizer_bytes_per_param = r.Num("optimizer_bytes_per_param");
  c->host_overhead_s = r.NumOr("host_overhead_s", 0.0);
  c->step_overhead_s = r.NumOr("step_overhead_s", 0.0);
  c->host_runs_ahead = r.BoolOr("host_runs_ahead", false);
  c->recompute_cost_ratio = r.NumOr("recompute_cost_ratio", 1.0);
  c->note = r.StrOr("note", "");
  // The objects and curves read below by name.
  r.RejectUnknown({"gemm_efficiency", "attention_efficiency_by_keys", "attention_efficiency_by_keys_cudnn",
                   "attention_noncausal_by_keys", "attention_noncausal_by_keys_cudnn", "optimizer_time_by_params",
                   "fp8", "bf16", "moe_host", "step_checks", "gemm_points"});
  DT_RETURN_IF_ERROR(r.status());
  Status st;
  const json* ge = Child(j, "gemm_efficiency", false, what, &st);
  DT_RETURN_IF_ERROR(st);
  FieldReader gr(*ge, what + ".gemm_efficiency");
  c->gemm_efficiency_note = gr.StrOr("note", "");
  gr.RejectUnknown({"points"});
  DT_RETURN_IF_ERROR(gr.status());
  const json* pts = Child(*ge, "points", true, what + ".gemm_efficiency", &st);
  DT_RETURN_IF_ERROR(st);
  DT_RETURN_IF_ERROR(ParseCurve(*pts, what + ".gemm_efficiency.points", &c->gemm_efficiency));
  // Curves with a note: {"points": [[x, y], ...], "note": ...} (attention by keys, optimizer by parameters).
  auto noted_curve = [&](const char* key, Curve* curve, std::string* note) -> Status {
    if (!j.contains(key) || j.at(key).is_null()) return Status::Ok();
    const std::string aw = what + "." + key;
    Status s;
    const json* ak = Child(j, key, false, what, &s);
    DT_RETURN_IF_ERROR(s);
    FieldReader ar(*ak, aw);
    *note = ar.StrOr("note", "");
    ar.RejectUnknown({"points"});
    DT_RETURN_IF_ERROR(ar.status());
    const json* apts = Child(*ak, "points", true, aw, &s);
    DT_RETURN_IF_ERROR(s);
    return ParseCurve(*apts, aw + ".points", curve);
  };
  DT_RETURN_IF_ERROR(noted_curve("attention_efficiency_by_keys", &c->attention_efficiency_by_keys,
                                     &c->attention_efficiency_by_keys_note));
  DT_RETURN_IF_ERROR(noted_curve("attention_efficiency_by_keys_cudnn", &c->attention_efficiency_by_keys_cudnn,
                                     &c->attention_efficiency_by_keys_cudnn_note));
  DT_RETURN_IF_ERROR(noted_curve("attention_noncausal_by_keys", &c->attention_noncausal_by_keys,
                                     &c->attention_noncausal_by_keys_note));
  DT_RETURN_IF_ERROR(noted_curve("attention_noncausal_by_keys_cudnn", &c->attention_noncausal_by_keys_cudnn,
                                     &c->attention_noncausal_by_keys_cudnn_note));
  DT_RETURN_IF_ERROR(noted_curve("optimizer_time_by_params", &c->optimizer_time_by_params,
                                     &c->optimizer_time_by_params_note));
  if (j.contains("fp8") && !j.at("fp8").is_null()) {
    const json& f = j.at("fp8");
    FieldReader fr(f, what + ".fp8");
    c->fp8.peak_flops = fr.Num("peak_flops");
    c->fp8.note = fr.StrOr("note", "");
    fr.RejectUnknown({"gemm_efficiency"});
    DT_RETURN_IF_ERROR(fr.status());
    const json* fpts = Child(f, "gemm_efficiency", true, what + ".fp8", &st);
    DT_RETURN_IF_ERROR(st);
    DT_RETURN_IF_ERROR(ParseCurve(*fpts, what + ".fp8.gemm_efficiency", &c->fp8.gemm_efficiency));
  }
  if (j.contains("bf16") && !j.at("bf16").is_null()) {
    const json& b = j.at("bf16");
    const std::string bw = what + ".bf16";
    FieldReader br(b, bw);
    c->bf16.peak_flops = br.Num("peak_flops");
    c->bf16.attention_efficiency = br.Num("attention_efficiency");
    c->bf16.note = br.StrOr("note", "");
    br.RejectUnknown({"gemm_efficiency", "gemm_points", "narrow_s_per_element", "widen_s_per_element"});
    DT_RETURN_IF_ERROR(br.status());
    for (const auto& [key, curve] : {std::pair<const char*, Curve*>{"narrow_s_per_element", &c->bf16.narrow_s_per_element},
                                     std::pair<const char*, Curve*>{"widen_s_per_element", &c->bf16.widen_s_per_element}})
      if (b.contains(key) && !b.at(key).is_null())
        DT_RETURN_IF_ERROR(ParseCurve(b.at(key), bw + "." + key, curve));
    const json* be = Child(b, "gemm_efficiency", true, bw, &st);
    DT_RETURN_IF_ERROR(st);
    DT_RETURN_IF_ERROR(ParseCurve(*be, bw + ".gemm_efficiency", &c->bf16.gemm_efficiency));
    const json* bp = Child(b, "gemm_points", true, bw, &st);
    DT_RETURN_IF_ERROR(st);
    DT_RETURN_IF_ERROR(ParseGemmPoints(*bp, bw + ".gemm_points", &c->bf16.gemm_points));
    if (c->bf16.gemm_points.empty()) return InvalidArgument(bw + ".gemm_points: must not be empty");
  }
  if (j.contains("moe_host") && !j.at("moe_host").is_null()) {
    FieldReader mr(j.at("moe_host"), what + ".moe_host");
    c->moe_host.router_s = mr.Num("router_s");
    c->moe_host.dispatch_s = mr.Num("dispatch_s");
    c->moe_host.backward_s = mr.Num("backward_s");
    c->moe_host.note = mr.StrOr("note", "");
    mr.RejectUnknown();
    DT_RETURN_IF_ERROR(mr.status());
  }
  if (j.contains("step_checks") && !j.at("step_checks").is_null()) {
    const json* sc = Child(j, "step_checks", true, what, &st);
    DT_RETURN_IF_ERROR(st);
    for (size_t i = 0; i < sc->size(); ++i) {
      const std::string at = what + ".step_checks[" + std::to_string(i) + "]";
      FieldReader cr((*sc)[i], at);
      StepCheck s;
      s.what = cr.Str("what");
      s.measured_s = cr.Num("measured_s");
      s.predicted_s = cr.Num("predicted_s");
      s.precision = cr.StrOr("precision", "fp32");
      cr.RejectUnknown();
      DT_RETURN_IF_ERROR(cr.status());
      if (s.precision != "fp32" && s.precision != "bf16")
        return InvalidArgument(at + ": precision must be \"fp32\" or \"bf16\" (absent: fp32)");
      if (!(s.measured_s > 0 && s.predicted_s > 0 && s.measured_s < 1e6 && s.predicted_s < 1e6))
        return InvalidArgument(at + ": measured_s and predicted_s must be positive seconds (below 1e6)");
      c->step_checks.push_back(s);
    }
  }
  if (j.contains("gemm_points") && !j.at("gemm_points").is_null()) {
    const json* gp = Child(j, "gemm_points", true, what, &st);
    DT_RETURN_IF_ERROR(st);
    DT_RETURN_IF_ERROR(ParseGemmPoints(*gp, what + ".gemm_points", &c->gemm_points));
  }
  return Status::Ok();
}

Status ParseEntries(const json& arr, const std::string& what, const char* key_name,
                    std::vector<LinkEntry>* out) {
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string at = what + "[" + std::to_string(i) + "]";
    FieldReader r(arr[i], at);
    LinkEntry e;
    e.key = static_cast<int>(r.Int(key_name));
    e.latency_s = r.Num("latency_s");
    e.busbw_Bps = r.Num("busbw_Bps");
    e.note = r.StrOr("note", "");
    DT_RETURN_IF_ERROR(r.status());
    if (arr[i].contains("points") && !arr[i].at("points").is_null())
      DT_RETURN_IF_ERROR(ParseCurve(arr[i].at("points"), at + ".points", &e.points));
    out->push_back(std::move(e));
  }
  return Status::Ok();
}

Status ParseNetwork(const json& j, const std::string& where, NetworkProfile* n) {
  std::string what = where + ": network";
  FieldReader r(j, what);
  n->gpus_per_node = static_cast<int>(r.Int("gpus_per_node"));
  n->note = r.StrOr("note", "");
  r.RejectUnknown({"collectives"});
  DT_RETURN_IF_ERROR(r.status());
  Status st;
  const json* colls = Child(j, "collectives", false, what, &st);
  DT_RETURN_IF_ERROR(st);
  for (CollKind k : kAllColls) {
    std::string cw = what + ".collectives";
    const json* t = Child(*colls, CollectiveKey(k), false, cw, &st);
    DT_RETURN_IF_ERROR(st);
    cw += std::string(".") + CollectiveKey(k);
    CollectiveTable& table = n->collectives[static_cast<int>(k)];
    for (const char* side : {"intra", "inter"}) {
      if (!t->contains(side) || t->at(side).is_null()) continue;  // checked in Prepare
      const json* arr = Child(*t, side, true, cw, &st);
      DT_RETURN_IF_ERROR(st);
      bool intra = std::string(side) == "intra";
      DT_RETURN_IF_ERROR(ParseEntries(*arr, cw + "." + side,
                                      intra ? "group_size" : "ranks_per_node",
                                      intra ? &table.intra : &table.inter));
    }
  }
  return Status::Ok();
}

json EntriesToJson(const std::vector<LinkEntry>& es, const char* key_name) {
  json a = json::array();
  for (const LinkEntry& e : es) {
    json o = {{key_name, e.key}, {"latency_s", e.latency_s}, {"busbw_Bps", e.busbw_Bps}};
    if (!e.points.empty()) o["points"] = CurveToJson(e.points);
    if (!e.note.empty()) o["note"] = e.note;
    a.push_back(o);
  }
  return a;
}

}  // namespace

const char* CollectiveKey(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return "all_reduce";
    case CollKind::kReduceScatter: return "reduce_scatter";
    case CollKind::kAllGather: return "all_gather";
    case CollKind::kSendRecv: return "send_recv";
    case CollKind::kAllToAll: return "all_to_all";  // no table of its own (comm_cost.h)
  }
  return "?";
}

StatusOr<HardwareProfile> ProfileFromJson(const json& j, const std::string& where) {
  HardwareProfile p;
  FieldReader r(j, where);
  p.name = r.Str("name");
  p.description = r.Str("description");
  p.created = r.Str("created");
  r.RejectUnknown({"sources", "device", "compute", "network", "machine"});
  DT_RETURN_IF_ERROR(r.status());
  Status st;
  const json* sources = Child(j, "sources", false, where, &st);
  DT_RETURN_IF_ERROR(st);
  for (auto it = sources->begin(); it != sources->end(); ++it) {
    if (!it.value().is_string())
      return InvalidArgument(where + ": sources." + it.key() + " must be a citation string");
    p.sources[it.key()] = it.value().get<std::string>();
  }
  const json* dev = Child(j, "device", false, where, &st);
  const json* comp = Child(j, "compute", false, where, &st);
  const json* net = Child(j, "network", false, where, &st);
  DT_RETURN_IF_ERROR(st);
  if (j.contains("machine")) {
    FieldReader mr(j["machine"], where + " machine");
    p.machine.cpu_model = mr.StrOr("cpu_model", "");
    p.machine.cores = static_cast<int>(mr.IntOr("cores", 0));
    p.machine.ranks_per_node = static_cast<int>(mr.IntOr("ranks_per_node", 0));
    p.machine.gemm_library = mr.StrOr("gemm_library", "");
    mr.RejectUnknown();
    DT_RETURN_IF_ERROR(mr.status());
  }
  DT_RETURN_IF_ERROR(ParseDevice(*dev, where, &p.device));
  DT_RETURN_IF_ERROR(ParseCompute(*comp, where, &p.compute));
  DT_RETURN_IF_ERROR(ParseNetwork(*net, where, &p.network));
  DT_RETURN_IF_ERROR(PrepareProfile(&p, where));
  return p;
}

json ToJson(const HardwareProfile& p) {
  json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["created"] = p.created;
  if (!p.machine.cpu_model.empty())
    j["machine"] = {{"cpu_model", p.machine.cpu_model},
                    {"cores", p.machine.cores},
                    {"ranks_per_node", p.machine.ranks_per_node},
                    {"gemm_library", p.machine.gemm_library}};
  j["sources"] = json::object();
  for (const auto& [k, v] : p.sources) j["sources"][k] = v;
  const DeviceProfile& d = p.device;
  j["device"] = {{"kind", d.kind},
                 {"memory_bytes", d.memory_bytes},
                 {"reserved_bytes", d.reserved_bytes},
                 {"fragmentation", d.fragmentation},
                 {"dtype", d.dtype},
                 {"peak_flops", d.peak_flops},
                 {"memory_bandwidth_Bps", d.memory_bandwidth_Bps}};
  if (!d.note.empty()) j["device"]["note"] = d.note;
  const ComputeProfile& c = p.compute;
  json ge = {{"points", CurveToJson(c.gemm_efficiency)}};
  if (!c.gemm_efficiency_note.empty()) ge["note"] = c.gemm_efficiency_note;
  j["compute"] = {{"gemm_efficiency", ge},
                  {"attention_efficiency", c.attention_efficiency},
                  {"memory_bound_efficiency", c.memory_bound_efficiency},
                  {"kernel_overhead_s", c.kernel_overhead_s},
                  {"optimizer_bytes_per_param", c.optimizer_bytes_per_param},
                  {"host_overhead_s", c.host_overhead_s},
                  {"step_overhead_s", c.step_overhead_s}};
  if (c.recompute_cost_ratio != 1.0) j["compute"]["recompute_cost_ratio"] = c.recompute_cost_ratio;
  if (c.host_runs_ahead) j["compute"]["host_runs_ahead"] = true;
  if (!c.gemm_points.empty()) j["compute"]["gemm_points"] = GemmPointsToJson(c.gemm_points);
  if (c.bf16.available()) {
    j["compute"]["bf16"] = {{"peak_flops", c.bf16.peak_flops},
                            {"attention_efficiency", c.bf16.attention_efficiency},
                            {"gemm_efficiency", CurveToJson(c.bf16.gemm_efficiency)},
                            {"gemm_points", GemmPointsToJson(c.bf16.gemm_points)}};
    if (c.bf16.has_conversions()) {
      j["compute"]["bf16"]["narrow_s_per_element"] = CurveToJson(c.bf16.narrow_s_per_element);
      j["compute"]["bf16"]["widen_s_per_element"] = CurveToJson(c.bf16.widen_s_per_element);
    }
    if (!c.bf16.note.empty()) j["compute"]["bf16"]["note"] = c.bf16.note;
  }
  if (!c.step_checks.empty()) {
    json a = json::array();
    for (const StepCheck& s : c.step_checks) {
      a.push_back({{"what", s.what}, {"measured_s", s.measured_s}, {"predicted_s", s.predicted_s}});
      if (s.precision != "fp32") a.back()["precision"] = s.precision;
    }
    j["compute"]["step_checks"] = a;
  }
  auto write_noted_curve = [&](const char* key, const Curve& curve, const std::string& note) {
    if (curve.empty()) return;
    json ak = {{"points", CurveToJson(curve)}};
    if (!note.empty()) ak["note"] = note;
    j["compute"][key] = ak;
  };
  write_noted_curve("attention_efficiency_by_keys", c.attention_efficiency_by_keys,
                        c.attention_efficiency_by_keys_note);
  write_noted_curve("attention_efficiency_by_keys_cudnn", c.attention_efficiency_by_keys_cudnn,
                        c.attention_efficiency_by_keys_cudnn_note);
  write_noted_curve("attention_noncausal_by_keys", c.attention_noncausal_by_keys,
                        c.attention_noncausal_by_keys_note);
  write_noted_curve("attention_noncausal_by_keys_cudnn", c.attention_noncausal_by_keys_cudnn,
                        c.attention_noncausal_by_keys_cudnn_note);
  write_noted_curve("optimizer_time_by_params", c.optimizer_time_by_params, c.optimizer_time_by_params_note);
  if (c.fp8.available()) {
    j["compute"]["fp8"] = {{"peak_flops", c.fp8.peak_flops}, {"gemm_efficiency", CurveToJson(c.fp8.gemm_efficiency)}};
    if (!c.fp8.note.empty()) j["compute"]["fp8"]["note"] = c.fp8.note;
  }
  if (c.moe_host.available()) {
    j["compute"]["moe_host"] = {{"router_s", c.moe_host.router_s},
                                {"dispatch_s", c.moe_host.dispatch_s},
                                {"backward_s", c.moe_host.backward_s}};
    if (!c.moe_host.note.empty()) j["compute"]["moe_host"]["note"] = c.moe_host.note;
  }
  if (!c.note.empty()) j["compute"]["note"] = c.note;
  const NetworkProfile& n = p.network;
  json colls = json::object();
  for (CollKind k : kAllColls) {
    const CollectiveTable& t = n.table(k);
    colls[CollectiveKey(k)] = {{"intra", EntriesToJson(t.intra, "group_size")},
                               {"inter", EntriesToJson(t.inter, "ranks_per_node")}};
  }
  j["network"] = {{"gpus_per_node", n.gpus_per_node}, {"collectives", colls}};
  if (!n.note.empty()) j["network"]["note"] = n.note;
  return j;
}

}  // namespace dt
