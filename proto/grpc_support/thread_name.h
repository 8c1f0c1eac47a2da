// Names the calling thread (Linux: at most 15 characters, longer names are
// cut), so that top -H, ps -L, perf and /proc/PID/task/*/comm tell the
// process's threads apart instead of showing the process name for each.
#pragma once

#include <pthread.h>

#include <string>

namespace podium::grpc_support {

inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace podium::grpc_support
