# Precompiled headers (PODIUM_PCH in the top-level CMakeLists.txt).
#
# Three donor targets build one precompiled header each; every other C++
# target of the tree reuses the one of its kind (REUSE_FROM): libraries,
# executables, unit tests. GCC uses a precompiled header only in a compile
# whose code-generation flags match the ones it was built with (-fPIC for
# libraries, -fPIE for executables, with CMAKE_POSITION_INDEPENDENT_CODE; the
# unit tests' -O0) and whose macros do not change what it parsed. When it
# cannot use it, it includes the headers as text (and -Winvalid-pch, which
# CMake adds, says so): the build stays correct, only slower.
# The headers are named by absolute path so that holds in a target that does
# not link the library they come from.

set(PODIUM_PCH_HEADERS
  <algorithm> <atomic> <chrono> <cstdint> <deque> <functional> <map> <memory> <mutex>
  <optional> <set> <string> <string_view> <thread> <utility> <vector>
  <absl/container/flat_hash_map.h> <absl/container/flat_hash_set.h>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
  <absl/strings/str_join.h> <absl/synchronization/mutex.h> <absl/time/time.h>
  <grpcpp/grpcpp.h>)
foreach(p objects cluster plugin admin)
  list(APPEND PODIUM_PCH_HEADERS "${CMAKE_BINARY_DIR}/proto/gen/podium/v1/${p}.pb.h")
endforeach()
foreach(p cluster plugin admin)
  list(APPEND PODIUM_PCH_HEADERS "${CMAKE_BINARY_DIR}/proto/gen/podium/v1/${p}.grpc.pb.h")
endforeach()

set(PODIUM_PCH_DIR ${CMAKE_BINARY_DIR}/pch)
# file(CONFIGURE) writes only when the content changed: a rewrite on every
# configure would recompile the donors each time.
file(CONFIGURE OUTPUT ${PODIUM_PCH_DIR}/donor.cc
     CONTENT "// The translation unit a precompiled header is built with.\n")
file(CONFIGURE OUTPUT ${PODIUM_PCH_DIR}/donor_main.cc CONTENT "int main() { return 0; }\n")

add_library(podium_pch_lib STATIC ${PODIUM_PCH_DIR}/donor.cc)
target_link_libraries(podium_pch_lib PRIVATE podium_proto)
target_precompile_headers(podium_pch_lib PRIVATE ${PODIUM_PCH_HEADERS})

add_executable(podium_pch_exe ${PODIUM_PCH_DIR}/donor_main.cc)
target_link_libraries(podium_pch_exe PRIVATE podium_proto)
target_precompile_headers(podium_pch_exe PRIVATE ${PODIUM_PCH_HEADERS})

# The unit tests' (podium_test): GoogleTest's headers too, and -O0 as they are
# compiled (GCC defines __OPTIMIZE__ only when optimizing).
add_executable(podium_pch_unit_test ${PODIUM_PCH_DIR}/donor_main.cc)
target_link_libraries(podium_pch_unit_test PRIVATE podium_proto GTest::gmock GTest::gtest)
target_compile_options(podium_pch_unit_test PRIVATE ${PODIUM_TEST_COMPILE_OPTIONS})
target_precompile_headers(podium_pch_unit_test PRIVATE ${PODIUM_PCH_HEADERS} <gmock/gmock.h> <gtest/gtest.h>)

set(PODIUM_PCH_DONORS podium_pch_lib podium_pch_exe podium_pch_unit_test)

# Every C++ target under `dir` reuses its kind's precompiled header, except
# the generated protobuf code (the donors depend on it) and the donors.
function(podium_use_pch dir)
  get_property(unit_tests GLOBAL PROPERTY PODIUM_UNIT_TESTS)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${targets})
    if(t STREQUAL "podium_proto" OR t IN_LIST PODIUM_PCH_DONORS)
      continue()
    endif()
    get_target_property(type ${t} TYPE)
    if(t IN_LIST unit_tests)
      set(donor podium_pch_unit_test)
    elseif(type STREQUAL "EXECUTABLE")
      set(donor podium_pch_exe)
    elseif(type MATCHES "^(STATIC|SHARED|MODULE|OBJECT)_LIBRARY$")
      set(donor podium_pch_lib)
    else()
      continue()
    endif()
    get_target_property(srcs ${t} SOURCES)
    list(FILTER srcs INCLUDE REGEX "\\.(cc|cpp|cxx)$")
    if(srcs)
      target_precompile_headers(${t} REUSE_FROM ${donor})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(d ${subdirs})
    podium_use_pch(${d})
  endforeach()
endfunction()
