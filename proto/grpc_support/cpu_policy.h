#pragma once

// The Linux CPU scheduling policy of a Podium process's threads.
//
// Our processes pass every message through a hand-off: the async driver
// (async_driver.h) is woken for each completion, including that of a write
// the sending thread started and finished itself, and hands answers to the
// thread that waits for them. Under SCHED_OTHER a thread that wakes preempts
// the one running on a busy core, so on two cores each hand-off also stopped
// the thread doing the work (perf: the scheduling thread switched out ~15
// times per preemptor on preempt-500, most of them right after its own
// write woke the driver). Under SCHED_BATCH a thread that wakes waits for
// the running one to block or use its slice: fewer switches, the same work.
// The policy is the calling thread's and is inherited by the threads it
// starts afterwards: set it first thing in main, before any thread exists.
// No privilege is needed to move between SCHED_OTHER and SCHED_BATCH.

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace podium::grpc_support {

enum class CpuPolicy { kNormal, kBatch };

// "batch" or "normal"; nullopt for anything else.
inline std::optional<CpuPolicy> ParseCpuPolicy(std::string_view name) {
  if (name == "batch") return CpuPolicy::kBatch;
  if (name == "normal") return CpuPolicy::kNormal;
  return std::nullopt;
}

inline const char* CpuPolicyName(CpuPolicy policy) { return policy == CpuPolicy::kBatch ? "batch" : "normal"; }

// The flag error for a value ParseCpuPolicy refused (every process's --cpu-policy).
inline std::string UnknownCpuPolicy(std::string_view value) {
  return std::string("--cpu-policy: \"").append(value) + "\" is neither batch nor normal";
}

// Sets the calling thread's policy (nice value unchanged). Returns an empty
// string, or why it could not (the process keeps its policy then).
inline std::string SetCpuPolicy(CpuPolicy policy) {
  sched_param param{};
  param.sched_priority = 0;
  const int linux_policy = policy == CpuPolicy::kBatch ? SCHED_BATCH : SCHED_OTHER;
  if (sched_setscheduler(0, linux_policy, &param) != 0) {
    return std::string("sched_setscheduler(") + CpuPolicyName(policy) + "): " + std::strerror(errno);
  }
  return {};
}

}  // namespace podium::grpc_support
