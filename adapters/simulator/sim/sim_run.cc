#include "sim/sim_run.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/action_executor.h"
#include "cluster/in_memory_cluster.h"
#include "common/sync/cluster_sync_client.h"
#include "common/translate/k8s_yaml.h"
#include "config/config.h"
#include "sim/report.h"
#include "sim/spawner.h"
#include "sim/workload.h"
#include "watch/decision_watcher.h"

namespace podium::sim {

using adapter::ClusterSyncClient;

const char kSimUsage[] = R"(usage: podium-sim (--cluster PATH... | --workload basic-500|basic-5000)
                  (--spawn | --scheduler ADDR) [flags]

An in-memory Kubernetes cluster that speaks Cluster.Sync to podium-scheduler.

  --cluster PATH          Kubernetes YAML file or directory (repeatable): Nodes,
                          Pods, Namespaces, PriorityClasses, PodDisruptionBudgets;
                          multi-document or kind: List.
                          Pods annotated sim.podium.dev/create-later: "true" are
                          created after the others settled. A pod annotated
                          sim.podium.dev/replaces: NAME (test fault) replaces
                          pod NAME, taking its name with a uid of its own, when
                          the first DeletePod aimed at NAME arrives.
  --workload NAME         scheduler_perf shape: basic-500, basic-5000,
                          basic-5000-mixed; preemption:
                          preempt-edge-10, preempt-500; placement rules:
                          spread-1000, antiaffinity-500;
                          gangs: gang-1000 (100 PodGroups of 8 pods on 1000
                          nodes).
  --create-rate N         create the later pods at N pods/s (default: at once).
  --api-latency DUR       latency injected into each action (e.g. 5ms).
  --api-concurrency N     actions executed concurrently with --api-latency
                          (default 16); without it each runs as it arrives.
  --settle DUR            quiet period before finishing (default 500ms).
  --termination-grace DUR deleted (preempted) pods terminate for DUR, holding
                          their resources, before they are gone (default 0).
  --reconnect-after-deletes N
                          test fault: once the N-th DeletePod was executed, drop
                          the Sync stream and reconnect with a full list of the
                          cluster as it is then (in-flight actions fail).
  --timeout DUR           give up after DUR (default 120s); exit 3.
                          Exit 4: some pods' attempts failed with an error.
  --output text|json      report format (default text).
  --bench                 watch the scheduler's decisions; summary only.
  --serve                 keep running after the report until SIGINT/SIGTERM;
                          prints "admin: ADDR" on stderr for podiumctl --address;
                          with --spawn also "admin token file: PATH" for
                          podiumctl --token-file (pause, resume, activate and
                          log-level need it).
  --spawn                 start podium-scheduler and podium-plugin-host.
  --scheduler ADDR        dial a running scheduler instead (unix:///..., host:port).
  --scheduler-bin PATH    default <build>/services/scheduler/podium-scheduler.
  --plugin-host-bin PATH  default <build>/plugin-host/podium-plugin-host.
  --config FILE           scheduler configuration, passed to the scheduler.
  --plugin-endpoint N=A   extra plugin endpoint, passed to the scheduler (repeatable).
  --plugin-host-endpoint NAME
                          the endpoint of the configuration that the spawned
                          podium-plugin-host serves (default host); --config
                          must declare it.
  --scheduler-name NAME   AdapterHello scheduler name (repeatable).

Credentials for a scheduler with access control (its --adapter-identity must
name the token's user or the certificate's CN):
)";

absl::StatusOr<SimOptions> ParseSimArgs(int argc, char** argv) {
  SimOptions o;
  std::string output = "text";
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    bool has_inline = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
    auto next = [&]() -> absl::StatusOr<std::string> {
      if (has_inline) return value;
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      return std::string(argv[++i]);
    };
    auto duration = [&](absl::Duration* out) -> absl::Status {
      auto v = next();
      if (!v.ok()) return v.status();
      if (!absl::ParseDuration(*v, out) || *out < absl::ZeroDuration())
        return absl::InvalidArgumentError(absl::StrCat(flag, ": invalid duration \"", *v, "\" (e.g. 500ms, 2s)"));
      return absl::OkStatus();
    };
    auto str = [&](std::string* out) -> absl::Status {
      auto v = next();
      if (!v.ok()) return v.status();
      *out = *v;
      return absl::OkStatus();
    };
    auto add = [&](std::vector<std::string>* out) -> absl::Status {
      auto v = next();
      if (!v.ok()) return v.status();
      out->push_back(*v);
      return absl::OkStatus();
    };
    absl::Status s;
    if (adapter::IsSchedulerDialFlag(flag)) {
      auto v = next();
      if (!v.ok()) return v.status();
      adapter::ParseSchedulerDialFlag(flag, *v, o.dial, s);
    } else if (flag == "--cluster") s = add(&o.clusters);
    else if (flag == "--workload") s = str(&o.workload);
    else if (flag == "--create-rate") {
      std::string v;
      s = str(&v);
      if (s.ok() && (!absl::SimpleAtod(v, &o.create_rate) || o.create_rate < 0))
        s = absl::InvalidArgumentError(absl::StrCat("--create-rate: invalid rate \"", v, "\""));
    } else if (flag == "--api-latency") s = duration(&o.api_latency);
    else if (flag == "--api-concurrency") {
      std::string v;
      s = str(&v);
      if (s.ok() && (!absl::SimpleAtoi(v, &o.api_concurrency) || o.api_concurrency < 1))
        s = absl::InvalidArgumentError(absl::StrCat("--api-concurrency: invalid value \"", v, "\""));
    } else if (flag == "--settle") s = duration(&o.settle);
    else if (flag == "--termination-grace") s = duration(&o.termination_grace);
    else if (flag == "--reconnect-after-deletes") {
      auto v = next();
      if (!v.ok()) s = v.status();
      else if (!absl::SimpleAtoi(*v, &o.reconnect_after_deletes) || o.reconnect_after_deletes < 1)
        s = absl::InvalidArgumentError(absl::StrCat("--reconnect-after-deletes: invalid count \"", *v, "\""));
    } else if (flag == "--timeout") s = duration(&o.timeout);
    else if (flag == "--output") s = str(&output);
    else if (flag == "--bench") o.bench = true;
    else if (flag == "--serve") o.serve = true;
    else if (flag == "--spawn") o.spawn = true;
    else if (flag == "--scheduler") s = str(&o.scheduler);
    else if (flag == "--scheduler-bin") s = str(&o.scheduler_bin);
    else if (flag == "--plugin-host-bin") s = str(&o.plugin_host_bin);
    else if (flag == "--config") s = str(&o.config);
    else if (flag == "--plugin-endpoint") {
      s = add(&o.plugin_endpoints);
      if (s.ok() && o.plugin_endpoints.back().find('=') == std::string::npos)
        s = absl::InvalidArgumentError("--plugin-endpoint wants NAME=ADDR");
    } else if (flag == "--plugin-host-endpoint") {
      s = str(&o.plugin_host_endpoint);
      if (s.ok() && o.plugin_host_endpoint.empty()) s = absl::InvalidArgumentError("--plugin-host-endpoint wants a NAME");
    } else if (flag == "--scheduler-name") s = add(&o.scheduler_names);
    else s = absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
    if (!s.ok()) return s;
  }
  if (output != "text" && output != "json") return absl::InvalidArgumentError("--output is text or json");
  o.json = output == "json";
  if (o.clusters.empty() == o.workload.empty())
    return absl::InvalidArgumentError("give either --cluster PATH or --workload NAME");
  if (!o.workload.empty() && !FindWorkload(o.workload))
    return absl::InvalidArgumentError(absl::StrCat("unknown workload \"", o.workload, "\" (basic-500, basic-5000, basic-5000-mixed, preempt-edge-10, preempt-500, spread-1000, antiaffinity-500, gang-1000)"));
  if (o.spawn == !o.scheduler.empty()) return absl::InvalidArgumentError("give either --spawn or --scheduler ADDR");
  if (!o.spawn && (!o.config.empty() || !o.plugin_endpoints.empty()))
    return absl::InvalidArgumentError("--config and --plugin-endpoint are passed to a spawned scheduler: add --spawn");
  if (o.scheduler_bin.empty()) o.scheduler_bin = BuildTreeBinary("services/scheduler/podium-scheduler");
  if (o.plugin_host_bin.empty()) o.plugin_host_bin = BuildTreeBinary("plugin-host/podium-plugin-host");
  return o;
}

absl::Status CheckSpawnEndpoint(const SimOptions& options) {
  const std::string& want = options.plugin_host_endpoint;
  std::vector<std::string> names;
  if (options.config.empty()) {
    for (const auto& e : scheduler::DefaultConfig().endpoints) names.push_back(e.name);
  } else {
    auto config = scheduler::LoadConfigFile(options.config);
    if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat("--config ", options.config, ": ", config.status().message()));
    for (const auto& e : config->endpoints) names.push_back(e.name);
  }
  if (std::find(names.begin(), names.end(), want) != names.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--spawn attaches podium-plugin-host to the plugin endpoint \"", want, "\", but ",
      options.config.empty() ? "the default configuration" : absl::StrCat("--config ", options.config),
      " declares ", names.empty() ? "no endpoints" : absl::StrCat("only ", absl::StrJoin(names, ", ")),
      ": name one of them with --plugin-host-endpoint, or add an endpoint named \"", want,
      "\" (pluginEndpoints in the PodiumConfiguration document)"));
}

namespace {

std::string PodKey(const v1::Pod& p) { return absl::StrCat(p.meta().namespace_(), "/", p.meta().name()); }

// The Namespaces of the initial list: those the files declare, then those
// their pods name and no file declares (without labels), since the API server
// would not hold a pod in a namespace that does not exist.
std::vector<v1::ObjectEvent> NamespaceEvents(k8s::LoadedCluster& loaded) {
  std::vector<v1::ObjectEvent> out;
  std::set<std::string> declared;
  auto add = [&](v1::Namespace ns) {
    v1::ObjectEvent e;
    e.set_type(v1::ObjectEvent::UPSERT);
    *e.mutable_namespace_object() = std::move(ns);
    out.push_back(std::move(e));
  };
  for (auto& ns : loaded.namespaces) {
    declared.insert(ns.meta().name());
    add(std::move(ns));
  }
  for (const auto& p : loaded.pods) {
    const std::string& name = p.pod.meta().namespace_();
    if (!declared.insert(name).second) continue;
    v1::Namespace ns;
    ns.mutable_meta()->set_name(name);
    ns.mutable_meta()->set_uid(k8s::NewUid());
    add(std::move(ns));
  }
  return out;
}

double ToMs(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// One run: load, connect, list, create later pods, wait to settle, report.
class Simulation {
 public:
  Simulation(const SimOptions& options, const std::atomic<bool>& stop) : options_(options), stop_(stop) {}

  int Run() {
    int code = Execute();
    Shutdown();
    return code;
  }

 private:
  int Fail(const std::string& message, int code = kExitError) {
    std::cerr << "podium-sim: " << message << "\n";
    return code;
  }

  int Execute() {
    // 1. The cluster, all of it or nothing.
    k8s::LoadedCluster loaded;
    if (!options_.workload.empty()) {
      shape_ = FindWorkload(options_.workload);
      loaded = GenerateWorkload(*shape_, absl::Now());
    } else {
      auto c = k8s::LoadClusterPaths(options_.clusters);
      if (!c.ok()) return Fail(std::string(c.status().message()));
      loaded = *std::move(c);
    }
    for (const auto& w : loaded.warnings) std::cerr << "podium-sim: warning: " << w << "\n";

    // 2. The scheduler.
    std::string target = options_.scheduler;
    if (options_.spawn) {
      if (absl::Status s = CheckSpawnEndpoint(options_); !s.ok()) return Fail(std::string(s.message()), kExitUsage);
      auto addr = spawner_.Start({.scheduler_bin = options_.scheduler_bin,
                                  .plugin_host_bin = options_.plugin_host_bin,
                                  .config = options_.config,
                                  .plugin_endpoints = options_.plugin_endpoints,
                                  .plugin_host_endpoint = options_.plugin_host_endpoint,
                                  .admin_token = options_.serve});
      if (!addr.ok()) return Fail(std::string(addr.status().message()));
      target = *addr;
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    auto dialed = adapter::DialScheduler(target, options_.dial, args);
    if (!dialed.ok()) return Fail(std::string(dialed.status().message()), kExitUsage);
    std::shared_ptr<grpc::Channel> channel = *std::move(dialed);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
      return Fail(absl::StrCat("cannot connect to the scheduler at ", target));
    // For podiumctl --address (the scheduler serves Admin on the same address).
    if (options_.serve) std::cerr << "admin: " << target << std::endl;
    // The token the Admin calls that change the scheduler need (podiumctl --token-file).
    if (options_.serve && !spawner_.admin_token_file().empty()) {
      std::cerr << "admin token file: " << spawner_.admin_token_file() << std::endl;
    }
    // Attempt durations come from the scheduler's decision stream (a scheduler
    // without it just leaves them unreported).
    watcher_ = std::make_unique<DecisionWatcher>(channel);
    watcher_->Start();

    // 3. The initial list, then the stream.
    std::vector<v1::ObjectEvent> list = NamespaceEvents(loaded);
    for (auto& n : loaded.nodes) list.push_back(cluster_.AddNode(std::move(n)));
    for (auto& pc : loaded.priority_classes) {
      v1::ObjectEvent e;
      e.set_type(v1::ObjectEvent::UPSERT);
      *e.mutable_priority_class() = std::move(pc);
      list.push_back(std::move(e));
    }
    // What the in-memory cluster does not keep, for a relist.
    for (const auto& e : list) {
      if (e.has_namespace_object() || e.has_priority_class()) unowned_list_.push_back(e);
    }
    // Before their pods, so PreEnqueue finds each pod's group.
    for (auto& g : loaded.pod_groups) list.push_back(cluster_.AddPodGroup(std::move(g)));
    for (auto& p : loaded.pods) {
      if (!p.replaces.empty()) {
        const std::string ns = p.pod.meta().namespace_();
        cluster_.AddReplacement(ns, p.replaces, std::move(p.pod));
      } else if (p.create_later) {
        later_.push_back(std::move(p.pod));
      } else {
        list.push_back(cluster_.CreatePod(std::move(p.pod)));
      }
    }
    // After the pods: their status counts the pods it covers.
    for (auto& pdb : loaded.pdbs) list.push_back(cluster_.AddPdb(std::move(pdb)));
    cluster_.SetTerminationGrace(options_.termination_grace);
    executor_ = std::make_unique<ActionExecutor>(
        cluster_, ActionExecutor::Options{.concurrency = options_.api_concurrency, .api_latency = options_.api_latency},
        [this](ActionOutcome&& out) {
          std::shared_ptr<ClusterSyncClient> client = Client();
          if (!out.events.empty()) client->SendEvents(std::move(out.events));
          client->SendResult(std::move(out.result));
        });
    SetClient(NewClient(channel));
    const absl::Time start = absl::Now();
    if (later_.empty()) {
      // Nothing created later: every pod is measured from the list.
      for (const auto& e : list)
        if (e.has_pod()) measured_.insert(PodKey(e.pod()));
      measure_start_ = start;
    }
    client_->Start(std::move(list));

    // 4. Wait: init pods settle, later pods get created, everything settles.
    bool creating = false, reported = false;
    size_t created = 0;
    absl::Time create_start;
    for (;;) {
      absl::SleepFor(absl::Milliseconds(5));
      const absl::Time now = absl::Now();
      if (stop_.load()) {
        if (reported) return kExitOk;
        return Finish("interrupted", kExitInterrupted);
      }
      if (options_.reconnect_after_deletes > 0 && !reconnected_ &&
          cluster_.Counts().delete_pod >= static_cast<uint64_t>(options_.reconnect_after_deletes)) {
        reconnected_ = true;
        Reconnect(channel);
        continue;
      }
      if (client_->ended()) {
        // The stream's own status (UNAUTHENTICATED, PERMISSION_DENIED, ...)
        // once its end is collected, not the bare "stream ended" seen first.
        absl::Status status = client_->Close(absl::Seconds(2));
        if (status.ok()) status = client_->status();
        return Fail(absl::StrCat("the scheduler ended the Sync stream: ", status.ToString()));
      }
      if (auto gone = cluster_.FinalizeTerminating(now); !gone.empty()) client_->SendEvents(std::move(gone));
      const bool quiet = executor_->InFlight() == 0 && client_->idle() && cluster_.Terminating() == 0 &&
                         cluster_.Settled([this](const v1::Pod& p) { return IsOurs(p); });
      if (!later_.empty() && !creating && quiet) {
        creating = true;
        create_start = measure_start_ = now;
      }
      if (creating && created < later_.size()) {
        size_t due = later_.size();
        if (options_.create_rate > 0) {
          due = std::min(due, static_cast<size_t>(std::floor(absl::ToDoubleSeconds(now - create_start) * options_.create_rate)) + 1);
        }
        // One after another: the next once every earlier one is bound.
        if (shape_ && shape_->sequential) {
          auto rec = created == 0 ? std::nullopt : cluster_.GetPod(last_created_.first, last_created_.second);
          due = std::min(due, created == 0 || (rec && rec->bound) ? created + 1 : created);
        }
        std::vector<v1::ObjectEvent> batch;
        for (; created < due; ++created) {
          v1::Pod& p = later_[created];
          measured_.insert(PodKey(p));
          last_created_ = {p.meta().namespace_(), p.meta().name()};
          p.mutable_meta()->set_creation_timestamp_us(absl::ToUnixMicros(now));
          batch.push_back(cluster_.CreatePod(std::move(p)));
        }
        if (!batch.empty()) {
          client_->SendEvents(std::move(batch));
          continue;
        }
        // Sequential creation waits for a binding: the timeout still applies.
      }
      const bool all_created = later_.empty() || created == later_.size();
      if (!reported && all_created && quiet && now - cluster_.LastChange() >= options_.settle) {
        const size_t failed = cluster_.Summarize([this](const v1::Pod& p) { return IsOurs(p); }).errors;
        const bool errors = failed > 0;
        int code = Finish(errors ? "scheduling_errors" : "completed", errors ? kExitSchedulingErrors : kExitOk);
        if (errors) std::cerr << "podium-sim: " << failed << " pods failed scheduling with an error\n";
        if (!options_.serve) return code;
        reported = true;
        std::cerr << "podium-sim: serving the cluster at " << target << " until SIGINT/SIGTERM\n";
      }
      if (!reported && now - start > options_.timeout) {
        Finish("timeout", kExitTimeout);
        std::vector<std::string> pending;
        cluster_.ForEachPod([&](const PodRecord& r) {
          if (!r.deleted && r.pod.node_name().empty() && !r.unschedulable && !r.scheduling_error &&
              !r.held && r.pod.scheduling_gates_size() == 0 && IsOurs(r.pod))
            pending.push_back(PodKey(r.pod));
        });
        std::string names = absl::StrJoin(pending.begin(), pending.begin() + std::min<size_t>(pending.size(), 20), ", ");
        if (pending.size() > 20) absl::StrAppend(&names, ", ... (", pending.size() - 20, " more)");
        return Fail(absl::StrCat("timed out after ", absl::FormatDuration(options_.timeout), " with ", pending.size(),
                                 " pods still pending", pending.empty() ? " (actions in flight)" : ": " + names),
                    kExitTimeout);
      }
    }
  }

  // Whether the scheduler will place this pod (its SchedulerHello's names).
  bool IsOurs(const v1::Pod& p) {
    if (our_names_.empty()) {
      if (auto hello = client_->hello()) our_names_.insert(hello->scheduler_names().begin(), hello->scheduler_names().end());
      if (our_names_.empty()) return true;
    }
    return our_names_.count(p.scheduler_name().empty() ? "default-scheduler" : p.scheduler_name()) > 0;
  }

  // Builds and prints the report. In a spawned run the children are stopped
  // first (unless serving) so their peak RSS is known.
  int Finish(const std::string& outcome, int code) {
    Report r;
    r.workload = options_.workload;
    r.outcome = outcome;
    r.nodes = cluster_.NodeCount();
    std::vector<double> e2e;
    absl::Time last_bound = measure_start_;
    std::optional<absl::Time> first_bound;
    // Visited in place: copying 11 000 records (twice) was 5 % of podium-sim's
    // CPU on basic-5000.
    cluster_.ForEachPod([&](const PodRecord& rec) {
      const v1::Pod& p = rec.pod;
      const std::string key = PodKey(p);
      if (rec.deleted) {
        ++r.deleted;
        r.deleted_pods.push_back(absl::StrCat(key, ": ", rec.delete_reason.empty() ? "deleted" : rec.delete_reason));
        return;
      }
      ++r.pods;
      if (rec.resize_requested) {
        Report::Resize z{p.meta().namespace_(), p.meta().name(), p.node_name(), p.resize_status(), "",
                         rec.resize_applied};
        for (const auto& c : p.conditions()) {
          if (c.type() == "PodResizePreemption" && c.status() == "False") z.message = c.message();
        }
        r.resizes.push_back(std::move(z));
      }
      const bool measured = measured_.count(key) > 0;
      if (!p.node_name().empty()) {
        ++r.bound;
        r.placements.push_back({p.meta().namespace_(), p.meta().name(), p.node_name()});
        if (measured && rec.bound) {
          e2e.push_back(ToMs(*rec.bound - rec.created));
          last_bound = std::max(last_bound, *rec.bound);
          first_bound = first_bound ? std::min(*first_bound, *rec.bound) : *rec.bound;
        }
      } else if (rec.unschedulable) {
        ++r.unschedulable;
        r.unschedulable_pods.push_back(
            {p.meta().namespace_(), p.meta().name(), rec.failed_message, p.nominated_node_name()});
      } else if (rec.scheduling_error) {
        ++r.scheduling_errors;
        r.error_pods.push_back({p.meta().namespace_(), p.meta().name(), rec.failed_message});
      } else if (p.scheduling_gates_size() > 0) {
        ++r.gated;
      } else if (rec.held) {
        ++r.held;
        r.held_pods.push_back({p.meta().namespace_(), p.meta().name(), rec.failed_message});
      } else if (!IsOurs(p)) {
        ++r.other_scheduler;
      } else {
        ++r.pending;
        r.pending_pods.push_back(key);
      }
    });
    {
      std::vector<std::pair<std::string, std::pair<std::string, int>>> groups;
      for (const v1::PodGroup& g : cluster_.PodGroups())
        groups.push_back({g.meta().namespace_(), {g.meta().name(), g.min_member()}});
      std::vector<GangMember> members;
      cluster_.ForEachPod([&](const PodRecord& rec) {
        if (rec.deleted || rec.pod.pod_group().empty()) return;
        members.push_back({rec.pod.meta().namespace_(), rec.pod.pod_group(), !rec.pod.node_name().empty(),
                           rec.unschedulable, rec.failed_message});
      });
      SummarizeGangs(groups, members, &r);
    }
    r.measured_pods = measured_.size();
    r.seconds = absl::ToDoubleSeconds(last_bound - measure_start_);
    if (r.seconds > 0) r.pods_per_second = static_cast<double>(e2e.size()) / r.seconds;
    if (r.seconds > 0 && r.gangs_bound > 0) r.seconds_per_gang = r.seconds / static_cast<double>(r.gangs_bound);
    r.e2e_p50_ms = Percentile(e2e, 50);
    r.e2e_p99_ms = Percentile(e2e, 99);
    if (first_bound) r.first_bind_ms = ToMs(*first_bound - measure_start_);
    if (watcher_) {
      std::vector<double> attempts;
      for (const auto& d : watcher_->Decisions()) {
        if (d.result() == v1::SchedulingDecision::ERROR) ++r.error_attempts;
        if (measured_.count(absl::StrCat(d.pod().namespace_(), "/", d.pod().name()))) attempts.push_back(d.attempt_ms());
      }
      r.attempts = attempts.size();
      r.attempt_p50_ms = Percentile(attempts, 50);
      r.attempt_p99_ms = Percentile(attempts, 99);
    }
    auto counts = cluster_.Counts();
    r.actions_bind = counts.bind;
    r.actions_delete = counts.delete_pod;
    r.actions_patch = counts.patch;
    r.actions_event = counts.event;
    r.actions_failed = counts.failed;
    if (options_.spawn && !options_.serve) {
      const ProcessCost own = OwnCost();
      Shutdown();
      r.scheduler_peak_rss_mb = spawner_.scheduler_peak_rss_mb();
      r.plugin_host_peak_rss_mb = spawner_.plugin_host_peak_rss_mb();
      auto per_pod = [&r](const std::optional<ProcessCost>& c) -> std::optional<Report::Cost> {
        if (!c || r.bound == 0) return std::nullopt;
        return Report::Cost{c->cpu_seconds * 1000 / static_cast<double>(r.bound),
                            static_cast<double>(c->context_switches) / static_cast<double>(r.bound)};
      };
      r.scheduler_cost = per_pod(spawner_.scheduler_cost());
      r.plugin_host_cost = per_pod(spawner_.plugin_host_cost());
      r.sim_cost = per_pod(own);
    }
    std::cout << (options_.json ? ReportJson(r) : ReportText(r, options_.bench ? 0 : 1000)) << std::flush;
    return code;
  }

  std::shared_ptr<ClusterSyncClient> NewClient(const std::shared_ptr<grpc::Channel>& channel) {
    // Without --api-latency the executor runs each action on the stream's
    // reader thread, which then writes the outcomes itself.
    return std::make_shared<ClusterSyncClient>(
        channel,
        ClusterSyncClient::Options{.scheduler_names = options_.scheduler_names,
                                   .write_after_actions = options_.api_latency <= absl::ZeroDuration()},
        [this](v1::Action&& a) { executor_->Submit(std::move(a)); });
  }
  std::shared_ptr<ClusterSyncClient> Client() {
    absl::MutexLock lock(&client_mu_);
    return client_;
  }
  void SetClient(std::shared_ptr<ClusterSyncClient> client) {
    absl::MutexLock lock(&client_mu_);
    client_ = std::move(client);
  }

  // The test fault: the stream drops with actions in flight (the scheduler
  // fails them), the actions already executing finish (their effect is in the
  // cluster, their results are lost with the stream), then a new stream lists
  // the cluster as it is.
  void Reconnect(const std::shared_ptr<grpc::Channel>& channel) {
    std::cerr << "podium-sim: dropping the Sync stream after " << cluster_.Counts().delete_pod
              << " deletes, then reconnecting" << std::endl;
    Client()->Close(absl::ZeroDuration()).IgnoreError();
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (executor_->InFlight() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    std::vector<v1::ObjectEvent> list = unowned_list_;
    for (auto& e : cluster_.ListObjects()) list.push_back(std::move(e));
    std::shared_ptr<ClusterSyncClient> fresh = NewClient(channel);
    SetClient(fresh);
    fresh->Start(std::move(list));
  }

  void Shutdown() {
    if (watcher_) watcher_->Stop();
    if (client_) client_->Close(absl::Seconds(2)).IgnoreError();
    if (executor_) executor_->Stop();
    spawner_.Stop();
  }

  const SimOptions& options_;
  const std::atomic<bool>& stop_;
  std::optional<WorkloadShape> shape_;
  Spawner spawner_;
  InMemoryCluster cluster_;
  std::unique_ptr<DecisionWatcher> watcher_;
  std::unique_ptr<ActionExecutor> executor_;
  // Read by the executor's threads; replaced on a reconnect (loop thread).
  absl::Mutex client_mu_;
  std::shared_ptr<ClusterSyncClient> client_;
  std::vector<v1::ObjectEvent> unowned_list_;  // Namespaces, PriorityClasses.
  bool reconnected_ = false;
  std::vector<v1::Pod> later_;
  std::pair<std::string, std::string> last_created_;  // namespace, name.
  std::set<std::string> measured_;
  std::set<std::string> our_names_;
  absl::Time measure_start_;
};

}  // namespace

int RunSim(const SimOptions& options, const std::atomic<bool>& stop) { return Simulation(options, stop).Run(); }

}  // namespace podium::sim
