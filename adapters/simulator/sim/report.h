#pragma once

#include <optional>
#include <string>
#include <vector>

namespace podium::sim {

// Nearest-rank percentile (p in [0, 100]); nullopt for no samples.
std::optional<double> Percentile(std::vector<double> samples, double p);

// What a run produced; printed as a table or as one JSON object.
struct Report {
  struct Placement {
    std::string ns, name, node;
  };
  struct Unschedulable {
    std::string ns, name, message;
    std::string nominated_node;  // status.nominatedNodeName (unschedulable pods; empty when none).
  };
  // One gang (PodGroup) and how it ended. outcome: "bound" (at least
  // minMember members bound), "waiting" (none bound; members held or pending),
  // "unschedulable" (none bound; the scheduler found it does not fit, reason =
  // a member's FailedScheduling message), "partially bound" (some but fewer
  // than minMember bound: must never happen).
  struct Gang {
    std::string ns, name;
    int min_member = 0;
    size_t members = 0, bound = 0;
    std::string outcome, reason;
  };
  std::string workload;  // Empty for --cluster runs.
  // "completed", "scheduling_errors" (pods whose last attempt failed with an
  // error: not an outcome of the cluster, exit 4), "timeout", "interrupted".
  std::string outcome = "completed";
  size_t nodes = 0;
  size_t pods = 0;           // Live pods at the end.
  size_t measured_pods = 0;  // Created later (workload) or all.
  size_t bound = 0, unschedulable = 0, gated = 0, other_scheduler = 0, pending = 0, deleted = 0;
  size_t scheduling_errors = 0;  // Pods whose last attempt ended in an error (PodScheduled reason SchedulerError).
  size_t error_attempts = 0;     // Attempts WatchDecisions reported as ERROR.
  double seconds = 0;  // First measured creation to last measured binding.
  std::optional<double> pods_per_second;
  std::optional<double> e2e_p50_ms, e2e_p99_ms;
  // First measured creation to the first measured binding: on preempt-500,
  // how long every preemptor's first attempt and evictions take before the
  // second attempts (queued behind them) start binding.
  std::optional<double> first_bind_ms;
  std::optional<double> attempt_p50_ms, attempt_p99_ms;
  size_t attempts = 0;
  std::optional<double> scheduler_peak_rss_mb, plugin_host_peak_rss_mb;
  // CPU (ms) and context switches per bound pod, per process, over the whole
  // run (init pods included); --spawn only.
  struct Cost {
    double cpu_ms_per_pod = 0;
    double context_switches_per_pod = 0;
  };
  std::optional<Cost> scheduler_cost, plugin_host_cost, sim_cost;
  uint64_t actions_bind = 0, actions_delete = 0, actions_patch = 0, actions_event = 0, actions_failed = 0;
  std::vector<Placement> placements;
  std::vector<Unschedulable> unschedulable_pods;
  std::vector<Unschedulable> error_pods;  // With the error's message.
  std::vector<std::string> pending_pods;  // "ns/name".
  std::vector<std::string> deleted_pods;  // "ns/name: reason".
  // Pods that came with a pending in-place resize (status.resize): the
  // resize_status now ("" once applied), and why the scheduler could not make
  // room (condition PodResizePreemption), if it said so.
  struct Resize {
    std::string ns, name, node, status, message;
    bool applied = false;
  };
  std::vector<Resize> resizes;
  size_t held = 0;  // Pods a PreEnqueue plugin holds (reason SchedulingGated).
  std::vector<Unschedulable> held_pods;  // With the plugin's reason.
  std::vector<Gang> gangs;
  size_t gangs_bound = 0, gangs_waiting = 0, gangs_unschedulable = 0, gangs_partially_bound = 0;
  // Measured seconds per gang bound (gang workloads), when any was bound.
  std::optional<double> seconds_per_gang;
};

// Fills r.gangs and the gang counters from the groups and the pods' state.
struct GangMember {
  std::string ns, group;
  bool bound = false, unschedulable = false;
  std::string message;
};
void SummarizeGangs(const std::vector<std::pair<std::string, std::pair<std::string, int>>>& groups,
                    const std::vector<GangMember>& members, Report* r);

std::string ReportJson(const Report& r);
// max_rows: the pod -> node table is elided beyond this many pods.
std::string ReportText(const Report& r, size_t max_rows);

}  // namespace podium::sim
