# Fails when an #include crosses a floor the wrong way (README, "How it works"). The floors,
# each of which may include only itself and the floors listed after it:
#   frontend: runtime kernels backend ir base     runtime: kernels backend ir base
#   kernels: ir base     backend: base     ir: base     base: (nothing)
# - The public headers users get from base (lazycl/dtype.h, device.h, error.h, metrics.h) may be
#   included by every floor; the other public headers (lazycl/tensor.h, ops.h, ...) only by
#   frontend/.
# - OpenCL (<CL/...>) and the backend headers that expose OpenCL types are included only under
#   backend/ (and by the backend's own tests).
# - The installed public headers include only the standard library and each other.
# The linker checks the same arrows between the compiled floors (CMakeLists.txt, floor_links_*);
# this script also covers headers, tests and benchmarks.
# Usage: cmake -DROOT=<source dir> -P check_layering.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT ROOT)
  message(FATAL_ERROR "pass -DROOT=<lazycl source directory>")
endif()

set(allowed_frontend frontend runtime kernels backend ir base)
set(allowed_runtime runtime kernels backend ir base)
set(allowed_kernels kernels ir base)
set(allowed_backend backend base)
set(allowed_ir ir base)
set(allowed_base base)
set(floors frontend runtime kernels backend ir base)
set(base_public "dtype|device|error|metrics")

set(violations "")
foreach(floor ${floors})
  file(GLOB_RECURSE files ${ROOT}/${floor}/*.h ${ROOT}/${floor}/*.cpp)
  foreach(path ${files})
    string(FIND "${path}" "/include/lazycl/" public_at)
    file(STRINGS ${path} includes REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${includes})
      if(NOT public_at EQUAL -1)
        # An installed public header: the standard library and lazycl/ only.
        if(line MATCHES "\"" AND NOT line MATCHES "\"lazycl/")
          list(APPEND violations "${path}: ${line} (public headers include only <std> and lazycl/)")
        elseif(line MATCHES "<(absl|CL)/")
          list(APPEND violations "${path}: ${line} (public headers include only <std> and lazycl/)")
        endif()
        continue()
      endif()
      if(line MATCHES "[\"<]CL/" AND NOT floor STREQUAL "backend")
        list(APPEND violations "${path}: ${line} (OpenCL only under backend/)")
      elseif(line MATCHES "\"(frontend|runtime|kernels|backend|ir|base)/")
        set(target ${CMAKE_MATCH_1})
        if(NOT target IN_LIST allowed_${floor})
          string(REPLACE ";" " " allowed "${allowed_${floor}}")
          list(APPEND violations "${path}: ${line} (${floor}/ may include only: ${allowed})")
        elseif(line MATCHES "backend/(cl|program_cache|opencl_memory|cl_error)\\.h"
               AND NOT floor STREQUAL "backend")
          list(APPEND violations "${path}: ${line} (exposes OpenCL types)")
        endif()
      elseif(line MATCHES "\"lazycl/([a-z_]+)\\.h")
        if(NOT CMAKE_MATCH_1 MATCHES "^(${base_public})$" AND NOT floor STREQUAL "frontend")
          list(APPEND violations "${path}: ${line} (only frontend/ sees the tensor API)")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

# Tests, benchmarks and examples: no OpenCL, except the backend's own tests.
file(GLOB_RECURSE other_files ${ROOT}/bench/*.h ${ROOT}/bench/*.cpp ${ROOT}/tests/*.h
     ${ROOT}/tests/*.cpp ${ROOT}/examples/*.h ${ROOT}/examples/*.cpp)
set(backend_tests cl_error_test.cpp event_wait_test.cpp opencl_memory_test.cpp program_cache_test.cpp
    device_test.cpp)
foreach(path ${other_files})
  get_filename_component(name ${path} NAME)
  file(STRINGS ${path} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "[\"<]CL/")
      list(APPEND violations "${path}: ${line}")
    elseif(line MATCHES "backend/(cl|program_cache|opencl_memory|cl_error)\\.h"
           AND NOT name IN_LIST backend_tests)
      list(APPEND violations "${path}: ${line}")
    endif()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "layering violations:\n  ${text}")
endif()
message(STATUS "layering OK: ${ROOT}")
