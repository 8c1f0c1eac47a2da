# The scheduler core, one concern per file (see scheduler.h).
add_library(podium_scheduler_core scheduler.cc event_handlers.cc schedule_one.cc schedule_gang.cc binding_cycle.cc
  housekeeping.cc waiting_pods.cc decision_broadcaster.cc diagnosis_store.cc executor.cc profiles.cc)
target_include_directories(podium_scheduler_core PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(podium_scheduler_core PUBLIC podium_framework podium_remote
  podium_cache podium_queue podium_config podium_metrics podium_preemption podium_gang podium_batching)

add_executable(podium-scheduler main.cc)
podium_link_malloc(podium-scheduler)
target_link_libraries(podium-scheduler PRIVATE podium_server podium_scheduler_core absl::flags absl::flags_parse
  gRPC::grpc++_reflection)

podium_test(podium_scheduler_test SRCS scheduler_test.cc waiting_pods_test.cc permit_over_grpc_test.cc
  decision_broadcaster_test.cc diagnosis_store_test.cc executor_test.cc
  LIBS podium_scheduler_core podium_queue_testing podium_sdk)
