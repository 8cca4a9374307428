# The BLAS under the CPU backend's GEMM (runtime/backend/cpu_gemm.h).
#   -DDT_BLAS=auto      (default) OpenBLAS if found, else BLIS, else Eigen only
#   -DDT_BLAS=openblas|blis       that library; configure fails if it is missing
#   -DDT_BLAS=none      Eigen only
# OpenBLAS: the pthread build (Debian libopenblas-pthread-dev) is preferred,
# its own threads pinned to 1 at run time: the backend calls it concurrently
# from its OpenMP threads, one block of C each, and only the threaded builds
# are safe to call that way (Debian's serial build shares its packing
# buffers between callers: wrong results seen here). With only the serial
# build found, DT_BLAS_SINGLE_CALLER makes the backend call it from one
# thread at a time.
# The winner on this project's shapes was chosen by measurement (docs/runtime.md,
# "Speed"); Eigen stays compiled in as the reference (DT_GEMM=eigen at run time).
# The library is found here and dlopen()ed at run time from the path found
# (runtime/backend/blas_gemm.cc says why). Sets DT_BLAS_TARGET_LIBRARY (empty
# when none) and DT_BLAS_DEFINITIONS.
set(DT_BLAS auto CACHE STRING "GEMM library under the CPU backend: auto, openblas, blis or none")
set_property(CACHE DT_BLAS PROPERTY STRINGS auto openblas blis none)

set(_dt_arch_lib /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
set(DT_BLAS_TARGET_LIBRARY "")
set(DT_BLAS_DEFINITIONS "")

if(DT_BLAS STREQUAL "auto" OR DT_BLAS STREQUAL "openblas")
  find_library(DT_OPENBLAS_LIBRARY NAMES openblas HINTS ${_dt_arch_lib}/openblas-pthread
               NO_DEFAULT_PATH)
  if(NOT DT_OPENBLAS_LIBRARY)
    find_library(DT_OPENBLAS_SERIAL_LIBRARY NAMES openblas HINTS ${_dt_arch_lib}/openblas-serial
                 NO_DEFAULT_PATH)
  endif()
  if(DT_OPENBLAS_LIBRARY)
    set(DT_BLAS_TARGET_LIBRARY ${DT_OPENBLAS_LIBRARY})
    set(DT_BLAS_DEFINITIONS DT_HAVE_BLAS DT_BLAS_OPENBLAS DT_BLAS_NAME="OpenBLAS"
        DT_BLAS_PATH="${DT_OPENBLAS_LIBRARY}")
  elseif(DT_OPENBLAS_SERIAL_LIBRARY)
    set(DT_BLAS_TARGET_LIBRARY ${DT_OPENBLAS_SERIAL_LIBRARY})
    set(DT_BLAS_DEFINITIONS DT_HAVE_BLAS DT_BLAS_OPENBLAS DT_BLAS_NAME="OpenBLAS"
        DT_BLAS_PATH="${DT_OPENBLAS_SERIAL_LIBRARY}" DT_BLAS_SINGLE_CALLER)
  endif()
endif()
if(NOT DT_BLAS_TARGET_LIBRARY AND (DT_BLAS STREQUAL "auto" OR DT_BLAS STREQUAL "blis"))
  find_library(DT_BLIS_LIBRARY NAMES blis HINTS ${_dt_arch_lib}/blis-pthread)
  if(DT_BLIS_LIBRARY)
    set(DT_BLAS_TARGET_LIBRARY ${DT_BLIS_LIBRARY})
    set(DT_BLAS_DEFINITIONS DT_HAVE_BLAS DT_BLAS_BLIS DT_BLAS_NAME="BLIS"
        DT_BLAS_PATH="${DT_BLIS_LIBRARY}")
  endif()
endif()

if(DT_BLAS_TARGET_LIBRARY)
  message(STATUS "dtplan runtime: CPU GEMM from ${DT_BLAS_TARGET_LIBRARY} (Eigen kept: DT_GEMM=eigen)")
elseif(DT_BLAS STREQUAL "openblas" OR DT_BLAS STREQUAL "blis")
  message(FATAL_ERROR "DT_BLAS=${DT_BLAS} but the library was not found: "
                      "apt-get install libopenblas-pthread-dev (or libblis-dev), or -DDT_BLAS=auto")
elseif(DT_BLAS STREQUAL "auto")
  message(STATUS "dtplan runtime: no OpenBLAS/BLIS found; CPU GEMM falls back to Eigen "
                 "(slower; scripts/install-deps.sh installs libopenblas-pthread-dev)")
else()
  message(STATUS "dtplan runtime: DT_BLAS=none, CPU GEMM from Eigen")
endif()
