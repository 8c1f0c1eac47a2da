# podium-plugin-host: the default plugins (plugins/) behind Plugin.Run.
add_executable(podium-plugin-host ${CMAKE_CURRENT_LIST_DIR}/main.cc)
podium_link_malloc(podium-plugin-host)
target_include_directories(podium-plugin-host PRIVATE ${CMAKE_CURRENT_LIST_DIR}/plugins)
target_link_libraries(podium-plugin-host PRIVATE podium_sdk podium_default_plugins podium_logging podium_grpc_support)
