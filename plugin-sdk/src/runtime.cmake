# podium_sdk: the runtime behind Serve() (serve.h): the Plugin.Run server, the
# per-stream session (handshake, mirror, cycle runner).
add_library(podium_sdk
  ${CMAKE_CURRENT_LIST_DIR}/mirror.cc
  ${CMAKE_CURRENT_LIST_DIR}/cycle_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/parallelizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/session.cc
  ${CMAKE_CURRENT_LIST_DIR}/preemption_dry_run.cc
  ${CMAKE_CURRENT_LIST_DIR}/plugin_server.cc)
target_include_directories(podium_sdk PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
  PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(podium_sdk PUBLIC podium_sdk_framework podium_proto gRPC::grpc++
  absl::status absl::statusor absl::btree absl::flat_hash_map absl::flat_hash_set
  absl::strings absl::synchronization Boost::json Threads::Threads)
target_link_libraries(podium_sdk PRIVATE podium_grpc_support)

# Tests see the internal headers (session.h, mirror.h). Sources are relative to
# plugin-sdk/ (podium_test checks they exist there).
podium_test(podium_sdk_mirror_test
  SRCS src/mirror_test.cc
  LIBS podium_sdk)
target_include_directories(podium_sdk_mirror_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
podium_test(podium_sdk_runtime_test
  SRCS src/plugin_server_test.cc
  LIBS podium_sdk)
target_include_directories(podium_sdk_runtime_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})

# Per-pod cost of the SDK and the stream at 5000 nodes (not a test).
add_executable(podium_sdk_cycle_bench EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/cycle_bench.cc)
target_link_libraries(podium_sdk_cycle_bench PRIVATE podium_sdk benchmark::benchmark)
target_include_directories(podium_sdk_cycle_bench PRIVATE ${CMAKE_CURRENT_LIST_DIR})

# Round trip of the Plugin.Run server shapes (worker hand-off, inline, sync,
# async) and client shapes (callback, async) without plugin work: the numbers
# behind plugin_server.cc's threading.
add_executable(podium_sdk_transport_bench EXCLUDE_FROM_ALL
  ${CMAKE_CURRENT_LIST_DIR}/transport_bench.cc)
target_link_libraries(podium_sdk_transport_bench PRIVATE podium_sdk podium_proto podium_grpc_support
  gRPC::grpc++ absl::strings absl::synchronization benchmark::benchmark)

podium_test(podium_sdk_session_test
  SRCS src/session_test.cc
  LIBS podium_sdk)
target_include_directories(podium_sdk_session_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
# Preemption's batched dry run (SelectVictimsOnNode per candidate node).
podium_test(podium_sdk_preemption_dry_run_test
  SRCS src/preemption_dry_run_test.cc
  LIBS podium_sdk)
target_include_directories(podium_sdk_preemption_dry_run_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
# Parallel evaluation of a request's nodes (parallelizer.h) against serial.
podium_test(podium_sdk_parallel_test
  SRCS src/parallelizer_test.cc
  LIBS podium_sdk)
target_include_directories(podium_sdk_parallel_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
