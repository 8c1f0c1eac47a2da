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

# podium-scheduler's own command line (services/scheduler/main.cc): --help lists
# its flags and exits 0; an unknown flag is named as typed. (Not in the TSan
# tree, which builds the unit tests only.)
if(NOT PODIUM_TSAN)
add_test(NAME podium_scheduler_cli
         COMMAND bash -c [[
help=$("$0" --help) || { echo "--help exited $?"; exit 1; }
grep -q -- '--token-auth-file (default' <<<"$help" || { echo "--help lists no flags: $help"; exit 1; }
err=$("$0" --token-auth-fil x 2>&1) && { echo "an unknown flag was accepted"; exit 1; }
grep -q -- 'unknown flag --token-auth-fil ' <<<"$err" || { echo "not named as typed: $err"; exit 1; }
]] $<TARGET_FILE:podium-scheduler>)
endif()
