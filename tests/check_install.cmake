# Installs the built lazycl into a fresh prefix and builds and runs tests/consumer against it
# with Abseil and OpenCL hidden from find_package: a consumer of the package needs neither's
# development files, and its link line names no Abseil library.
# Usage: cmake -DBUILD=<build dir> -DSOURCE=<tests/consumer> -DWORK=<scratch dir> -P check_install.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${WORK}/prefix
          -DCMAKE_DISABLE_FIND_PACKAGE_absl=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenCL=ON
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed:\n${out}")
endif()
file(GLOB_RECURSE link_files ${WORK}/build/*link.txt)
foreach(f ${link_files})
  file(READ ${f} line)
  if(line MATCHES "absl|OpenCL")
    message(FATAL_ERROR "the consumer links Abseil or OpenCL itself: ${line}")
  endif()
endforeach()
execute_process(COMMAND ${WORK}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer failed (${rc}):\n${out}")
endif()
message(STATUS "${out}")
