#include "runtime/backend/bf16_gemm.h"

#include <string>

#include "base/check.h"

#ifdef DT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif
#endif

namespace dt::rt {

#ifdef DT_HAVE_DNNL
namespace {

// oneDNN sizes its work partition from omp_get_max_threads(); the backend
// splits C's rows over its own threads, so each call runs on one thread.
class OneThread {
 public:
  OneThread() {
#ifdef _OPENMP
    saved_ = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
  }
  ~OneThread() {
#ifdef _OPENMP
    omp_set_num_threads(saved_);
#endif
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_ = 1;
};

using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, float, float>;

struct Kernel {
  dnnl::matmul matmul;
  dnnl::memory::desc a, b, c;
  size_t scratch_bytes = 0;
  std::string impl;
};

struct PerThread {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Kernel> kernels;
  std::vector<uint8_t> scratch;
};

PerThread& Thread() {
  thread_local PerThread t;
  return t;
}

// Creates the primitive for one call shape (throws dnnl::error).
Kernel Create(PerThread& t, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
              int64_t a_rs, float beta, int64_t ldc) {
  using dt_t = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  Kernel kn;
  kn.a = dnnl::memory::desc({m, k}, dt_t::bf16, ta == Trans::kNo ? dims{a_rs, 1} : dims{1, a_rs});
  kn.b = dnnl::memory::desc({k, n}, dt_t::bf16, tb == Trans::kNo ? dims{n, 1} : dims{1, k});
  kn.c = dnnl::memory::desc({m, n}, dt_t::f32, dims{ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(kn.a, kn.b, kn.c), attr, t.engine);
  kn.impl = pd.impl_info_str();
  kn.scratch_bytes = pd.scratchpad_desc().get_size();
  kn.matmul = dnnl::matmul(pd);
  return kn;
}

bool CpuHasBf16DotProducts() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

struct Capability {
  bool native = false;
  std::string description;
};

// One probe primitive: oneDNN's choice of kernel for a bf16 matmul here.
Capability Probe() {
  Capability cap;
  const dnnl_version_t* v = dnnl_version();
  const std::string lib = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
                          "." + std::to_string(v->patch);
  try {
    OneThread one;
    PerThread& t = Thread();
    const Kernel kn = Create(t, Trans::kNo, Trans::kNo, 64, 64, 64, 1.0f, 64, 0.0f, 64);
    // Without bf16 dot-product instructions oneDNN emulates bf16 no faster
    // than fp32, and its "ref" kernels are scalar loops: only a JIT kernel on
    // a CPU with AVX512-BF16 (or AMX, which implies it) counts as native.
    const bool ref = kn.impl.find("ref") != std::string::npos;
    cap.native = CpuHasBf16DotProducts() && !ref;
    cap.description = cap.native ? lib + ", " + kn.impl
                                 : "emulated: " + lib + " has no native bf16 kernel here (it offers " +
                                       kn.impl + (CpuHasBf16DotProducts() ? "" : "; the CPU lacks AVX512-BF16") + ")";
  } catch (const dnnl::error& e) {
    cap.description = "emulated: " + lib + " cannot run a bf16 matmul here (" + e.what() + ")";
  }
  return cap;
}

const Capability& TheCapability() {
  static const Capability cap = Probe();
  return cap;
}

}  // namespace

bool Bf16GemmNative() { return TheCapability().native; }
std::string Bf16GemmDescription() { return TheCapability().description; }

void Bf16GemmSerial(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const bf16_t* a, int64_t a_rs, const bf16_t* b, float beta, float* c,
                    int64_t ldc) {
  DT_CHECK(Bf16GemmNative()) << "Bf16GemmSerial without a native kernel: " << Bf16GemmDescription();
  DT_CHECK(m > 0 && n > 0 && k > 0) << "bf16 gemm m=" << m << " n=" << n << " k=" << k;
  OneThread one;
  PerThread& t = Thread();
  const Key key{ta == Trans::kYes, tb == Trans::kYes, m, n, k, a_rs, ldc, alpha, beta};
  try {
    auto it = t.kernels.find(key);
    if (it == t.kernels.end()) it = t.kernels.emplace(key, Create(t, ta, tb, m, n, k, alpha, a_rs, beta, ldc)).first;
    Kernel& kn = it->second;
    if (t.scratch.size() < kn.scratch_bytes) t.scratch.resize(kn.scratch_bytes);
    dnnl::memory ma(kn.a, t.engine, const_cast<bf16_t*>(a));
    dnnl::memory mb(kn.b, t.engine, const_cast<bf16_t*>(b));
    dnnl::memory mc(kn.c, t.engine, c);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (kn.scratch_bytes > 0) {
      dnnl::memory::desc sd({static_cast<int64_t>(kn.scratch_bytes)}, dnnl::memory::data_type::u8,
                            dnnl::memory::dims{1});
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(sd, t.engine, t.scratch.data()));
    }
    kn.matmul.execute(t.stream, args);
    t.stream.wait();
  } catch (const dnnl::error& e) {
    DT_CHECK(false) << "oneDNN bf16 matmul m=" << m << " n=" << n << " k=" << k << " failed: " << e.what();
  }
}

#else  // no oneDNN in this build

bool Bf16GemmNative() { return false; }
std::string Bf16GemmDescription() {
  return "emulated: this build has no oneDNN (apt-get install libdnnl-dev, then rebuild)";
}
void Bf16GemmSerial(Trans, Trans, int64_t, int64_t, int64_t, float, const bf16_t*, int64_t,
                    const bf16_t*, float, float*, int64_t) {
  DT_CHECK(false) << "Bf16GemmSerial without a native kernel: " << Bf16GemmDescription();
}

#endif

}  // namespace dt::rt
