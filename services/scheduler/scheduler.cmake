add_library(podium_scheduler_core scheduler.cc profiles.cc server/admin_service.cc)
target_include_directories(podium_scheduler_core PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(podium_scheduler_core PUBLIC podium_framework podium_remote podium_server
  podium_cache podium_queue podium_config podium_metrics podium_preemption)

add_executable(podium-scheduler main.cc)
target_link_libraries(podium-scheduler PRIVATE podium_scheduler_core absl::flags absl::flags_parse
  gRPC::grpc++_reflection)

podium_test(podium_scheduler_test SRCS scheduler_test.cc LIBS podium_scheduler_core podium_queue_testing)
