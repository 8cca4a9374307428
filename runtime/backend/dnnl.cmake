# oneDNN under the CPU backend's bf16 GEMMs (runtime/backend/bf16_gemm.h):
# Debian's libdnnl-dev. Optional: without it, bf16 GEMM inputs are emulated
# (rounded operands, fp32 GEMM), which gives the same mathematics at fp32
# speed. -DDT_DNNL=OFF leaves it out. Sets DT_DNNL_LIBRARY_FOUND,
# DT_DNNL_LIBRARY and DT_DNNL_INCLUDE_DIR.
option(DT_DNNL "use oneDNN (libdnnl-dev) for the CPU backend's bf16 GEMMs when found" ON)
set(DT_DNNL_LIBRARY_FOUND FALSE)
if(DT_DNNL)
  find_library(DT_DNNL_LIBRARY NAMES dnnl)
  find_path(DT_DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp)
  if(DT_DNNL_LIBRARY AND DT_DNNL_INCLUDE_DIR)
    set(DT_DNNL_LIBRARY_FOUND TRUE)
    message(STATUS "dtplan runtime: bf16 GEMMs from oneDNN ${DT_DNNL_LIBRARY}")
  else()
    message(STATUS "dtplan runtime: no oneDNN found; bf16 GEMM inputs are emulated at fp32 speed "
                   "(scripts/install-deps.sh installs libdnnl-dev)")
  endif()
endif()
