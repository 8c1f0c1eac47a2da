#pragma once

#include <vector>

#include "podium/sdk/framework.h"

namespace podium::plugins {

// HostPortInfo.CheckConflict: the same port and protocol conflict when either
// side binds 0.0.0.0 or both bind the same IP.
inline bool HostPortsConflict(const sdk::HostPort& a, const sdk::HostPort& b) {
  if (a.port != b.port || a.protocol != b.protocol) return false;
  return a.ip == b.ip || a.ip == "0.0.0.0" || b.ip == "0.0.0.0";
}

inline bool AnyHostPortConflict(const std::vector<sdk::HostPort>& want,
                                const std::vector<sdk::HostPort>& used) {
  for (const sdk::HostPort& w : want) {
    if (w.port <= 0) continue;
    for (const sdk::HostPort& u : used) {
      if (HostPortsConflict(w, u)) return true;
    }
  }
  return false;
}

}  // namespace podium::plugins
