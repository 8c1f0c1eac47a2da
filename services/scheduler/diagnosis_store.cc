#include "diagnosis_store.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"

#include "pod_ref.h"

namespace podium::scheduler {
namespace {

size_t EstimateBytes(const PodDiagnosis& d) {
  size_t n = sizeof(PodDiagnosis) + 64 + d.pod_uid.size() * 3 + d.pod_namespace.size() * 2 +
             d.pod_name.size() * 2 + d.nominated_node_name.size() + d.message.size();
  for (const auto& [reason, count] : d.reason_counts) n += sizeof(std::pair<std::string, uint32_t>) + reason.size();
  for (const auto& [node, status] : d.sample) {
    // A status is counted as if owned, though it is shared with other
    // diagnoses: the bound stays an upper one.
    n += sizeof(std::pair<std::string, SharedStatus>) + sizeof(sdk::Status) + node.size() + status->plugin().size();
    for (const auto& r : status->reasons()) n += sizeof(std::string) + r.size();
  }
  return n;
}

PodDiagnosis Identify(const v1::Pod& pod) {
  PodDiagnosis d;
  d.pod_uid = pod.meta().uid();
  d.pod_namespace = pod.meta().namespace_();
  d.pod_name = pod.meta().name();
  d.nominated_node_name = pod.nominated_node_name();
  return d;
}

}  // namespace

std::string DiagnosisStore::Truncate(const std::string& s) const {
  if (s.size() <= options_.max_message_bytes) return s;
  return s.substr(0, options_.max_message_bytes) + "...";
}

void DiagnosisStore::RecordUnschedulable(const v1::Pod& pod, const Diagnosis& diagnosis,
                                         const std::string& message) {
  PodDiagnosis d = Identify(pod);
  d.message = Truncate(message);
  d.num_all_nodes = diagnosis.num_all_nodes;
  d.sample.reserve(std::min(options_.max_sample_nodes, diagnosis.node_statuses.size()));
  for (const auto& [node, status] : diagnosis.node_statuses) {
    if (d.sample.size() >= options_.max_sample_nodes) break;
    d.sample.emplace_back(node.str(), status);
  }
  // Nodes sharing a status are counted together, then its reasons once.
  const absl::flat_hash_map<const sdk::Status*, uint32_t> per_status = diagnosis.NodesPerStatus();
  std::map<std::string, uint32_t> counts;
  for (const auto& [status, nodes] : per_status) {
    for (const auto& reason : status->reasons()) counts[reason] += nodes;
  }
  for (auto& [reason, count] : counts) d.reason_counts.emplace_back(Truncate(reason), count);
  Put(std::move(d));
}

void DiagnosisStore::RecordError(const v1::Pod& pod, const std::string& message) {
  PodDiagnosis d = Identify(pod);
  d.error = true;
  d.message = Truncate(message);
  Put(std::move(d));
}

void DiagnosisStore::Put(PodDiagnosis diagnosis) {
  const std::string uid = diagnosis.pod_uid;
  const std::string key = absl::StrCat(diagnosis.pod_namespace, "/", diagnosis.pod_name);
  const size_t bytes = EstimateBytes(diagnosis);
  absl::MutexLock lock(&mu_);
  EraseLocked(uid);
  // Another pod (an earlier uid) of the same name is gone.
  if (auto it = uid_by_key_.find(key); it != uid_by_key_.end()) EraseLocked(std::string(it->second));
  while (!order_.empty() && bytes_ + bytes > options_.max_bytes) EraseLocked(std::string(order_.front()));
  order_.push_back(uid);
  by_uid_[uid] = Entry{std::move(diagnosis), bytes, std::prev(order_.end())};
  uid_by_key_[key] = uid;
  bytes_ += bytes;
}

void DiagnosisStore::EraseLocked(const std::string& uid) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  const PodDiagnosis& d = it->second.diagnosis;
  auto key = uid_by_key_.find(absl::StrCat(d.pod_namespace, "/", d.pod_name));
  if (key != uid_by_key_.end() && key->second == uid) uid_by_key_.erase(key);
  bytes_ -= it->second.bytes;
  order_.erase(it->second.age);
  by_uid_.erase(it);
}

void DiagnosisStore::Erase(std::string_view uid) {
  absl::MutexLock lock(&mu_);
  EraseLocked(std::string(uid));
}

std::optional<PodDiagnosis> DiagnosisStore::Find(std::string_view namespace_, std::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto key = uid_by_key_.find(absl::StrCat(absl::string_view(namespace_.data(), namespace_.size()), "/",
                                           absl::string_view(name.data(), name.size())));
  if (key == uid_by_key_.end()) return std::nullopt;
  auto it = by_uid_.find(key->second);
  if (it == by_uid_.end()) return std::nullopt;
  return it->second.diagnosis;
}

size_t DiagnosisStore::size() const {
  absl::MutexLock lock(&mu_);
  return by_uid_.size();
}

size_t DiagnosisStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace podium::scheduler
