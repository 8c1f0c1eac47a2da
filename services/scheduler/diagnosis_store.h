// The last failed scheduling attempt of each pending pod, for ExplainPod, in a
// compact form: counts per reason, a bounded sample of node verdicts and the
// message (or the error). Keyed by uid; erased when the pod is bound or
// deleted; the whole store has a memory bound (oldest entries go first).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "framework/framework.h"

namespace podium::scheduler {

struct PodDiagnosis {
  std::string pod_uid;
  std::string pod_namespace;
  std::string pod_name;
  std::string nominated_node_name;
  // An attempt that failed with an error (not "unschedulable"): `message` is the error.
  bool error = false;
  std::string message;  // The FailedScheduling message, or the error.
  uint32_t num_all_nodes = 0;
  // reason -> how many nodes gave it, sorted by reason.
  std::vector<std::pair<std::string, uint32_t>> reason_counts;
  // At most Options::max_sample_nodes node verdicts, in the diagnosis' order.
  // The statuses are the diagnosis' own, shared rather than copied (a
  // preemptor's failed attempt copied 20, a tenth of its cost). The names
  // are copies: a NodeName would keep its node object alive, an old version
  // of it once the node changes, for as long as the pod stays pending.
  std::vector<std::pair<std::string, SharedStatus>> sample;
};

class DiagnosisStore {
 public:
  struct Options {
    size_t max_sample_nodes = 20;
    size_t max_message_bytes = 4096;
    size_t max_bytes = 32 << 20;  // Approximate, over every entry.
  };

  DiagnosisStore() : DiagnosisStore(Options{}) {}
  explicit DiagnosisStore(Options options) : options_(options) {}

  void RecordUnschedulable(const v1::Pod& pod, const Diagnosis& diagnosis, const std::string& message);
  void RecordError(const v1::Pod& pod, const std::string& message);
  void Erase(std::string_view uid);
  std::optional<PodDiagnosis> Find(std::string_view namespace_, std::string_view name) const;

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    PodDiagnosis diagnosis;
    size_t bytes = 0;
    std::list<std::string>::iterator age;  // Position in order_.
  };
  void Put(PodDiagnosis diagnosis) ABSL_LOCKS_EXCLUDED(mu_);
  void EraseLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Truncate(const std::string& s) const;

  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> by_uid_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> uid_by_key_ ABSL_GUARDED_BY(mu_);  // ns/name -> uid
  std::list<std::string> order_ ABSL_GUARDED_BY(mu_);  // uids, oldest record first
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podium::scheduler
