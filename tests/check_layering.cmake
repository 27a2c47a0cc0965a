# Fails when an #include crosses a layer boundary (STYLE.md, "The shape of the house"):
# - backend/ sees no IR: it includes nothing from frontend/ or kernels/, except lazycl's public
#   headers (lazycl/metrics.h, lazycl/error.h, frontend/include/lazycl/...).
# - OpenCL stays inside backend/: nothing else includes <CL/...> or the backend headers that
#   expose OpenCL types.
# Usage: cmake -DROOT=<source dir> -P check_layering.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT ROOT)
  message(FATAL_ERROR "pass -DROOT=<lazycl source directory>")
endif()

set(violations "")

file(GLOB_RECURSE backend_files ${ROOT}/backend/*.h ${ROOT}/backend/*.cpp)
foreach(path ${backend_files})
  file(STRINGS ${path} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "[\"<](frontend|kernels)/" AND NOT line MATCHES "[\"<]frontend/include/lazycl/")
      list(APPEND violations "${path}: ${line}")
    elseif(line MATCHES "[\"<]lazycl/" AND NOT line MATCHES "[\"<]lazycl/(metrics|error)\\.h")
      list(APPEND violations "${path}: ${line}")
    endif()
  endforeach()
endforeach()

file(GLOB_RECURSE other_files
  ${ROOT}/frontend/*.h ${ROOT}/frontend/*.cpp ${ROOT}/kernels/*.h ${ROOT}/kernels/*.cpp
  ${ROOT}/bench/*.h ${ROOT}/bench/*.cpp ${ROOT}/tests/*.h ${ROOT}/tests/*.cpp
  ${ROOT}/examples/*.h ${ROOT}/examples/*.cpp)
# Backend tests may reach into backend internals; they are the backend's own tests.
set(backend_tests cl_error_test.cpp device_buffers_test.cpp program_cache_test.cpp device_test.cpp)
foreach(path ${other_files})
  get_filename_component(name ${path} NAME)
  file(STRINGS ${path} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "[\"<]CL/")
      list(APPEND violations "${path}: ${line}")
    elseif(line MATCHES "backend/(cl|program_cache|device_buffers|cl_error)\\.h"
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
