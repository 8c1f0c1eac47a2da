#include "scheduler.h"

#include "absl/strings/str_cat.h"
#include "grpc_support/thread_name.h"
#include "pod_ref.h"

namespace podium::scheduler {
namespace {

// What a held pod's SchedulingGated condition says: "plugin: message".
std::string GatedMessage(const std::string& plugin, const std::string& message) {
  return plugin.empty() ? std::string(message) : absl::StrCat(plugin, ": ", message);
}

}  // namespace

// ---------------------------------------------------------------- Scheduler

Scheduler::Scheduler(Options options, Cache& cache, Snapshot& snapshot, SchedulingQueue& queue,
                     std::vector<FrameworkPtr> profiles, SchedulerMetrics& metrics, Clock& clock)
    : options_(options),
      cache_(cache),
      snapshot_(snapshot),
      queue_(queue),
      profiles_(std::move(profiles)),
      metrics_(metrics),
      clock_(clock),
      decisions_(options.decisions),
      diagnoses_(options.diagnoses),
      binding_pool_(options.binding_threads, options.max_binding_work, "binding"),
      queue_worker_(1, options.max_queue_work, "queue-worker"),
      batching_(options.batching, clock, metrics.registry().get()) {
  for (auto& fw : profiles_) {
    by_scheduler_name_[fw->name()] = fw.get();
    series_.emplace(fw.get(), metrics_.ForProfile(fw->name()));
    batching_.SetEnabled(fw.get(), fw->spec().opportunistic_batching);
  }
  absl::MutexLock lock(&housekeeping_mu_);
  last_unschedulable_flush_ = clock_.Now();
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  if (options_.run_scheduling_thread) {
    scheduling_thread_ = std::thread([this] {
      grpc_support::NameThisThread("scheduling");
      SchedulingLoop();
    });
  }
  if (!options_.run_housekeeping_thread) return;
  housekeeping_thread_ = std::thread([this] {
    grpc_support::NameThisThread("housekeeping");
    absl::MutexLock lock(&mu_);
    while (!stopped_) {
      mu_.AwaitWithTimeout(absl::Condition(&stopped_), absl::Milliseconds(100));
      if (stopped_) break;
      mu_.Unlock();
      Housekeeping();
      mu_.Lock();
    }
  });
}

void Scheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  queue_.Close();
  if (scheduling_thread_.joinable()) scheduling_thread_.join();
  if (housekeeping_thread_.joinable()) housekeeping_thread_.join();
  queue_worker_.Stop();
  binding_pool_.Stop();
}

void Scheduler::WaitForBackgroundWork() {
  queue_worker_.Drain();
  binding_pool_.Drain();
  // Binding work may have posted queue work (and the reverse does not happen).
  queue_worker_.Drain();
}

void Scheduler::SetPaused(bool paused) {
  absl::MutexLock lock(&mu_);
  paused_ = paused;
}

bool Scheduler::paused() const {
  absl::MutexLock lock(&mu_);
  return paused_;
}

bool Scheduler::adapter_connected() const {
  absl::MutexLock lock(&mu_);
  return adapter_connected_;
}

size_t Scheduler::binds_in_flight() const {
  absl::MutexLock lock(&mu_);
  return binds_in_flight_;
}

void Scheduler::Count(uint64_t SchedulerCounters::*counter, const char* kind) {
  {
    absl::MutexLock lock(&mu_);
    ++(counters_.*counter);
  }
  metrics_.CountSchedulerEvent(kind);
}

SchedulerCounters Scheduler::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

Framework* Scheduler::FrameworkFor(const v1::Pod& pod) const {
  const std::string_view name = SchedulerNameOf(pod);
  auto it = by_scheduler_name_.find(absl::string_view(name.data(), name.size()));
  return it == by_scheduler_name_.end() ? nullptr : it->second;
}

bool Scheduler::HasProfileFor(const v1::Pod& pod) const { return FrameworkFor(pod) != nullptr; }

sdk::Status Scheduler::PreEnqueue(const sdk::PodInfo& pod) {
  // A bound pod queued for its deferred resize: PreEnqueue is for pending pods.
  if (!pod.pod->node_name().empty()) return sdk::Status::Success();
  sdk::Status gates = SchedulingGatesPreEnqueue(pod);
  if (!gates.IsSuccess()) return gates;
  const Framework* fw = FrameworkFor(*pod.pod);
  if (fw == nullptr) return gates;
  // Decided before anything is read: a list that ends during the plugin call
  // leaves the count read before it partial. Noted pods are asked again
  // after the list (OnListEnd), those still held are told then.
  // A patch still waiting out its delay is superseded by this answer; a pod
  // held again keeps the first due time, so that a gang whose members keep
  // arriving does not put its early members' reason off for ever.
  const std::string& uid = pod.pod->meta().uid();
  bool listing = false;
  std::optional<absl::Time> due;
  {
    absl::MutexLock lock(&mu_);
    if (listing_) {
      listing = true;
      gated_while_listing_.push_back(uid);
    }
    if (!gated_patches_.empty()) {
      if (auto it = gated_patches_.find(uid); it != gated_patches_.end()) {
        due = it->second.due;
        gated_patches_.erase(it);
      }
    }
  }
  sdk::Status status = sdk::Status::Success();
  if (const std::string& group = pod.pod->pod_group(); !group.empty()) {
    const std::string& ns = pod.pod->meta().namespace_();
    std::shared_ptr<const v1::PodGroup> found = cache_.GetPodGroup(ns, group);
    status = fw->RunPreEnqueue(*pod.pod, found.get(), static_cast<uint32_t>(gang_members_.Count(ns, group)));
  } else {
    status = fw->RunPreEnqueue(*pod.pod);
  }
  if (status.IsSuccess() || listing) return status;
  // Tell the user why the pod does not enter the queue (the API server says
  // the same for schedulingGates): PodScheduled=False, reason SchedulingGated.
  const std::string message = GatedMessage(status.plugin(), status.Message());
  for (const auto& c : pod.pod->conditions()) {
    if (c.type() == "PodScheduled" && c.status() == "False" && c.reason() == "SchedulingGated" &&
        c.message() == message) {
      return status;
    }
  }
  v1::Action patch;
  auto* p = patch.mutable_patch_pod_status();
  *p->mutable_pod() = PodRef(*pod.pod);
  auto* c = p->add_conditions();
  c->set_type("PodScheduled");
  c->set_status("False");
  c->set_reason("SchedulingGated");
  c->set_message(message);
  const absl::Time now = clock_.Now();
  c->set_last_transition_time_us(absl::ToUnixMicros(now));
  if (options_.gated_status_delay <= absl::ZeroDuration()) {
    SendAction(std::move(patch));
    return status;
  }
  absl::MutexLock lock(&mu_);
  gated_patches_[uid] = GatedPatch{due.value_or(now + options_.gated_status_delay), message, std::move(patch)};
  return status;
}

void Scheduler::SendDueGatedPatches(absl::Time now) {
  std::vector<GatedPatch> due;
  {
    absl::MutexLock lock(&mu_);
    if (gated_patches_.empty()) return;
    for (auto it = gated_patches_.begin(); it != gated_patches_.end();) {
      if (it->second.due <= now) {
        due.push_back(std::move(it->second));
        gated_patches_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (GatedPatch& p : due) {
    // Deleted, let through, or held for another reason since: not sent.
    std::optional<QueuedPodSummary> queued = queue_.Find(p.patch.patch_pod_status().pod().uid());
    if (!queued || queued->queue != QueueKind::kGated ||
        GatedMessage(queued->gating_plugin, queued->message) != p.message) {
      continue;
    }
    SendAction(std::move(p.patch));
  }
}

void Scheduler::SendAction(v1::Action action, ActionSink::ResultCallback on_result) {
  ActionSink* sink = sink_.load(std::memory_order_acquire);
  if (sink == nullptr) {
    if (on_result) {
      v1::ActionResult result;
      result.set_code(v1::ActionResult::UNAVAILABLE);
      result.set_message("no adapter sink");
      on_result(result, clock_.Now());
    }
    return;
  }
  if (!on_result) on_result = [](const v1::ActionResult&, absl::Time) {};
  sink->Send(std::move(action), std::move(on_result));
}

void Scheduler::PublishDecision(const v1::Pod& pod, SchedulingDecision::Result result,
                                const std::string& node, const std::string& message,
                                absl::Duration attempt, const std::string& profile,
                                const std::string& nominated_node) {
  SchedulingDecision decision;
  decision.pod_uid = pod.meta().uid();
  decision.pod_namespace = pod.meta().namespace_();
  decision.pod_name = pod.meta().name();
  decision.result = result;
  decision.node_name = node;
  decision.nominated_node_name = nominated_node;
  decision.message = message;
  decision.attempt = attempt;
  decision.time = clock_.Now();
  decision.profile = profile;
  decisions_.Publish(decision);
}

std::optional<PodDiagnosis> Scheduler::LastDiagnosis(std::string_view ns, std::string_view name) const {
  return diagnoses_.Find(ns, name);
}

std::optional<Scheduler::FailedResize> Scheduler::FailedResizeOf(std::string_view ns, std::string_view name) const {
  std::vector<std::pair<std::string, std::string>> failed;  // uid, message: few, copied out of mu_.
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [node, pods] : failed_resizes_) {
      for (const auto& [uid, message] : pods) failed.emplace_back(uid, message);
    }
  }
  for (auto& [uid, message] : failed) {
    sdk::PodInfoPtr pod = cache_.GetPod(uid);
    // Still deferred: a resize the kubelet applied or that was withdrawn
    // since is not waiting for anything.
    if (pod != nullptr && pod->pod->meta().namespace_() == ns && pod->pod->meta().name() == name &&
        pod->pod->resize_status() == kDeferredResize) {
      return FailedResize{std::move(pod), std::move(message)};
    }
  }
  return std::nullopt;
}

}  // namespace podium::scheduler
