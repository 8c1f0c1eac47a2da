// Reading the objects of a cluster event in queueing hints.
#pragma once

#include <cstdint>

#include "podium/v1/objects.pb.h"
#include "podium/v1/plugin.pb.h"

namespace podium::plugins {

inline const v1::Node* NewNode(const v1::ClusterEvent& e) {
  return e.has_new_node() ? &e.new_node() : nullptr;
}
inline const v1::Node* OldNode(const v1::ClusterEvent& e) {
  return e.has_old_node() ? &e.old_node() : nullptr;
}
// The pod a DELETE event is about: the old object, or the new one when the
// sender put it there.
inline const v1::Pod* DeletedPod(const v1::ClusterEvent& e) {
  if (e.has_old_pod()) return &e.old_pod();
  if (e.has_new_pod()) return &e.new_pod();
  return nullptr;
}

inline constexpr uint32_t Actions(v1::ActionType a) { return static_cast<uint32_t>(a); }
inline constexpr uint32_t Actions(v1::ActionType a, v1::ActionType b) {
  return static_cast<uint32_t>(a) | static_cast<uint32_t>(b);
}

}  // namespace podium::plugins
