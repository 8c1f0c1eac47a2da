// How the scheduler names a pod: "namespace/name" for people, an ObjectRef
// for actions and decisions. One definition for every file of the scheduler.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "podium/v1/objects.pb.h"

namespace podium::scheduler {

inline std::string PodKey(const v1::Pod& pod) {
  return absl::StrCat(pod.meta().namespace_(), "/", pod.meta().name());
}

inline v1::ObjectRef PodRef(const v1::Pod& pod) {
  v1::ObjectRef ref;
  ref.set_kind("Pod");
  ref.set_uid(pod.meta().uid());
  ref.set_namespace_(pod.meta().namespace_());
  ref.set_name(pod.meta().name());
  return ref;
}

// Succeeded or Failed: the pod holds no resources any more.
inline bool PodTerminal(const v1::Pod& pod) {
  return pod.phase() == v1::SUCCEEDED || pod.phase() == v1::FAILED;
}

}  // namespace podium::scheduler
