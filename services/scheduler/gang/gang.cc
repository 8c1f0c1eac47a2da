#include "gang/gang.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace podium::scheduler::gang {

std::string GroupKey(const v1::Pod& pod) {
  if (pod.pod_group().empty()) return "";
  return absl::StrCat(pod.meta().namespace_(), "/", pod.pod_group());
}

bool SameGroup(const v1::Pod& a, const v1::Pod& b) {
  return !a.pod_group().empty() && a.pod_group() == b.pod_group() &&
         a.meta().namespace_() == b.meta().namespace_();
}

void MemberRegistry::Set(const v1::Pod& pod, bool member) {
  if (pod.pod_group().empty()) return;
  const std::string key = GroupKey(pod);
  absl::MutexLock lock(&mu_);
  if (member) {
    members_[key].insert(pod.meta().uid());
    return;
  }
  auto it = members_.find(key);
  if (it == members_.end()) return;
  it->second.erase(pod.meta().uid());
  if (it->second.empty()) members_.erase(it);
}

size_t MemberRegistry::Count(std::string_view namespace_, std::string_view group) const {
  std::string key(namespace_);
  key.append("/").append(group);
  absl::MutexLock lock(&mu_);
  auto it = members_.find(key);
  return it == members_.end() ? 0 : it->second.size();
}

size_t MemberRegistry::CountAssigned(std::string_view namespace_, std::string_view group,
                                     absl::FunctionRef<bool(std::string_view uid)> on_node) const {
  std::string key(namespace_);
  key.append("/").append(group);
  absl::MutexLock lock(&mu_);
  auto it = members_.find(key);
  if (it == members_.end()) return 0;
  size_t n = 0;
  for (const std::string& uid : it->second) n += on_node(uid) ? 1 : 0;
  return n;
}

bool Satisfied(const v1::PodGroup& group, size_t placed, size_t assigned) {
  return placed + assigned >= static_cast<size_t>(std::max(1, group.min_member()));
}

std::string UnfitMessage(const v1::PodGroup& group, const PassOutcome& o) {
  const size_t min = static_cast<size_t>(std::max(1, group.min_member()));
  std::string out = absl::StrCat("pod group ", group.meta().namespace_(), "/", group.meta().name(), " (minMember ",
                                 min, "): ");
  if (o.members + o.assigned < min) {
    absl::StrAppend(&out, "only ", o.members + o.assigned, " of ", min,
                    " members are pending or placed, so none is bound");
  } else {
    absl::StrAppend(&out, "only ", o.placed + o.assigned, " of ", min,
                    " members can be placed together, so none is bound");
  }
  if (!o.failed_pod.empty()) absl::StrAppend(&out, "; ", o.failed_pod, ": ", o.failed_message);
  return out;
}

}  // namespace podium::scheduler::gang
