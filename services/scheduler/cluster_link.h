// The two seams between the scheduler core and the adapter's stream
// (server/cluster_service.h implements them over Cluster.Sync): what the
// scheduler does with the adapter's messages, and where its actions go.
#pragma once

#include <functional>

#include "absl/time/time.h"
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
  // `received`: when the result was read off the adapter's stream (for a
  // failure decided here: when it was decided), before any hand-off. A bind's
  // scheduling attempt ends there, as kube-scheduler's ends when its Bind API
  // call returns.
  using ResultCallback = std::function<void(const v1::ActionResult& result, absl::Time received)>;
  virtual ~ActionSink() = default;
  // on_result runs exactly once: the adapter's result, or UNAVAILABLE when no
  // adapter is connected, the stream breaks or the result does not come in time.
  // It may run on the thread that read the result off the stream, so it must
  // do bookkeeping only: never block, never call a plugin, never take a lock
  // that is held across one.
  virtual void Send(v1::Action action, ResultCallback on_result) = 0;
  // The Cluster protocol version of the live adapter stream (0: none). An
  // action using a newer version's fields (DeletePod.disruption_target: 2)
  // sent to an older stream fails with UNAVAILABLE instead of going out
  // half understood.
  virtual uint32_t ProtocolVersion() const { return 1; }
  // The scheduling loop says whether it has more pods to schedule right away
  // (true) or is about to wait (false). While it has, the actions that need
  // not be written at once (all but binds) may wait a little for a write to
  // ride with, so that several pods' actions travel in one message; false
  // writes what waits now. Never blocks. Default: nothing waits.
  virtual void SetSchedulerBusy(bool /*busy*/) {}
};

}  // namespace podium::scheduler
