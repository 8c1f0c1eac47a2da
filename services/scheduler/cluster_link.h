// The two seams between the scheduler core and the adapter's stream
// (server/cluster_service.h implements them over Cluster.Sync): what the
// scheduler does with the adapter's messages, and where its actions go.
#pragma once

#include <functional>

#include "podium/v1/cluster.pb.h"

namespace podium::scheduler {

// What the scheduler does with the adapter's messages (called on the event
// thread, in stream order, with objects already validated).
class ClusterEventHandler {
 public:
  virtual ~ClusterEventHandler() = default;
  virtual void OnListBegin() = 0;
  virtual void OnObjectEvent(const v1::ObjectEvent& event) = 0;
  virtual void OnListEnd() = 0;
  virtual void OnAdapterDisconnected() = 0;
};

// Where the scheduler's actions go.
class ActionSink {
 public:
  using ResultCallback = std::function<void(const v1::ActionResult&)>;
  virtual ~ActionSink() = default;
  // on_result runs exactly once: the adapter's result, or UNAVAILABLE when no
  // adapter is connected, the stream breaks or the result does not come in time.
  // It runs on one of the service's threads and must not block.
  virtual void Send(v1::Action action, ResultCallback on_result) = 0;
};

}  // namespace podium::scheduler
