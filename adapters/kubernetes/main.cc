// podium-k8s-adapter: lists and watches a Kubernetes cluster for
// podium-scheduler (Cluster.Sync) and carries out its actions (binds,
// preemption deletes, status patches, events) as API calls.
// `podium-k8s-adapter --help` lists the flags.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <random>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "actions/action_dispatcher.h"
#include "client/api_client.h"
#include "client/rest_config.h"
#include "common/dial/scheduler_dial.h"
#include "grpc_support/cpu_policy.h"
#include "leader/leader_elector.h"
#include "link/scheduler_link.h"
#include "metrics/adapter_metrics.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "reflector/reflector.h"
#include "logging/logger.h"

namespace {

constexpr char kUsage[] = R"(Usage: podium-k8s-adapter [flags]

Lists and watches Nodes, Pods and PriorityClasses of a Kubernetes cluster,
streams them to podium-scheduler over Cluster.Sync, and issues the scheduler's
actions (bind, delete with uid precondition, pod status patch, event) as API
calls with bounded concurrency and retries.

  --kubeconfig PATH       kubeconfig file (default: $KUBECONFIG, then in-cluster
                          config, then ~/.kube/config)
  --context NAME          kubeconfig context (default: current-context)
  --scheduler ADDRESS     podium-scheduler's Cluster endpoint
                          (default unix:///run/podium/scheduler.sock)
  --kube-api-qps N        client-side rate limit, requests per second
                          (default 50, as kube-scheduler; 0 = no limit)
  --kube-api-burst N      rate limit burst (default 100)
  --concurrency N         binds, deletes and patches in flight (default 16)
  --page-size N           objects per list page (default 500)
  --metrics-address HOST:PORT  serve Prometheus metrics at /metrics
                          (default 127.0.0.1:10261; port 0 picks one and logs
                          it; empty = off)
  --leader-elect          elect one leader among replicas on a Lease; only the
                          leader opens the scheduler's stream and issues
                          actions (default off: a single replica)
  --leader-elect-lease-duration D  (default 15s)
  --leader-elect-renew-deadline D  (default 10s)
  --leader-elect-retry-period D    (default 2s)
  --leader-elect-resource-namespace NS  (default kube-system)
  --leader-elect-resource-name NAME     (default podium)
  --leader-elect-identity ID      (default HOSTNAME_RANDOM)
  --logging-format text|json  text: plain lines (default); json: one JSON
                          record per line (component podium-k8s-adapter)
  --cpu-policy batch|normal  Linux scheduling policy of every thread: batch
                          (SCHED_BATCH: a thread that wakes does not preempt a
                          running one) or normal (SCHED_OTHER); default batch
  --help                  this text

Pods are filtered by spec.schedulerName in the scheduler (its profiles).

Credentials for a scheduler with access control (its --adapter-identity must
name the token's user or the certificate's CN):
)";

struct AdapterOptions {
  std::string kubeconfig;
  std::string context;
  std::string scheduler = "unix:///run/podium/scheduler.sock";
  podium::adapter::SchedulerDialOptions dial;  // --scheduler-token-file, --scheduler-tls-*.
  podium::logging::Format log_format = podium::logging::Format::kText;
  podium::grpc_support::CpuPolicy cpu_policy = podium::grpc_support::CpuPolicy::kBatch;
  double qps = 50;
  int burst = 100;
  int concurrency = 16;
  int page_size = 500;
  std::string metrics_address = "127.0.0.1:10261";
  bool leader_elect = false;
  podium::kube::LeaderElector::Options election;
};

absl::StatusOr<AdapterOptions> Parse(int argc, char** argv) {
  AdapterOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    bool has_value = false;
    if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> absl::StatusOr<std::string> {
      if (has_value) return value;
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
      return std::string(argv[++i]);
    };
    auto number = [&](auto* out) -> absl::Status {
      auto v = next();
      if (!v.ok()) return v.status();
      bool ok;
      if constexpr (std::is_floating_point_v<std::remove_pointer_t<decltype(out)>>) {
        ok = absl::SimpleAtod(*v, out);
      } else {
        ok = absl::SimpleAtoi(*v, out);
      }
      if (!ok || *out < 0) return absl::InvalidArgumentError(absl::StrCat(a, ": not a number: ", *v));
      return absl::OkStatus();
    };
    absl::Status s;
    if (a == "--kubeconfig") {
      auto v = next();
      if (!v.ok()) return v.status();
      o.kubeconfig = *v;
    } else if (a == "--context") {
      auto v = next();
      if (!v.ok()) return v.status();
      o.context = *v;
    } else if (podium::adapter::IsSchedulerDialFlag(a)) {
      auto v = next();
      if (!v.ok()) return v.status();
      podium::adapter::ParseSchedulerDialFlag(a, *v, o.dial, s);
    } else if (a == "--scheduler") {
      auto v = next();
      if (!v.ok()) return v.status();
      o.scheduler = *v;
    } else if (a == "--metrics-address") {
      auto v = next();
      if (!v.ok()) return v.status();
      o.metrics_address = *v;
    } else if (a == "--logging-format") {
      auto v = next();
      if (!v.ok()) return v.status();
      if (!podium::logging::ParseFormat(*v, &o.log_format)) {
        return absl::InvalidArgumentError(absl::StrCat("--logging-format: \"", *v, "\" is neither text nor json"));
      }
    } else if (a == "--cpu-policy") {
      auto v = next();
      if (!v.ok()) return v.status();
      auto policy = podium::grpc_support::ParseCpuPolicy(*v);
      if (!policy.has_value()) {
        return absl::InvalidArgumentError(podium::grpc_support::UnknownCpuPolicy(*v));
      }
      o.cpu_policy = *policy;
    } else if (a == "--kube-api-qps") {
      s = number(&o.qps);
    } else if (a == "--kube-api-burst") {
      s = number(&o.burst);
    } else if (a == "--concurrency") {
      s = number(&o.concurrency);
      if (s.ok() && o.concurrency == 0) s = absl::InvalidArgumentError("--concurrency must be at least 1");
    } else if (a == "--leader-elect") {
      o.leader_elect = !has_value || value == "true";
    } else if (a == "--leader-elect-lease-duration" || a == "--leader-elect-renew-deadline" ||
               a == "--leader-elect-retry-period") {
      auto v = next();
      if (!v.ok()) return v.status();
      absl::Duration d;
      if (!absl::ParseDuration(*v, &d) || d <= absl::ZeroDuration()) {
        return absl::InvalidArgumentError(absl::StrCat(a, ": not a duration: ", *v));
      }
      (a == "--leader-elect-lease-duration"  ? o.election.lease_duration
       : a == "--leader-elect-renew-deadline" ? o.election.renew_deadline
                                              : o.election.retry_period) = d;
    } else if (a == "--leader-elect-resource-namespace" || a == "--leader-elect-resource-name" ||
               a == "--leader-elect-identity") {
      auto v = next();
      if (!v.ok()) return v.status();
      (a == "--leader-elect-resource-namespace" ? o.election.lease_namespace
       : a == "--leader-elect-resource-name"    ? o.election.lease_name
                                                : o.election.identity) = *v;
    } else if (a == "--page-size") {
      s = number(&o.page_size);
      if (s.ok() && o.page_size == 0) s = absl::InvalidArgumentError("--page-size must be at least 1");
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    }
    if (!s.ok()) return s;
  }
  if (o.election.renew_deadline >= o.election.lease_duration) {
    return absl::InvalidArgumentError("--leader-elect-renew-deadline must be shorter than the lease duration");
  }
  if (o.election.retry_period >= o.election.renew_deadline) {
    return absl::InvalidArgumentError("--leader-elect-retry-period must be shorter than the renew deadline");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace podium::kube;
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage << podium::adapter::kSchedulerDialUsage;
      return 0;
    }
  }
  auto options = Parse(argc, argv);
  if (!options.ok()) {
    std::cerr << "podium-k8s-adapter: " << options.status().message() << "\n\n" << kUsage
              << podium::adapter::kSchedulerDialUsage;
    return 2;
  }
  // Flag errors above are plain text (the format is not known yet); every
  // line from here on follows --logging-format.
  static podium::logging::StreamSink log_sink(stderr, options->log_format);
  static podium::logging::Logger logger("podium-k8s-adapter", &log_sink);
  podium::logging::SetDefault(&logger);
  podium::logging::SetLineFormat(options->log_format);
  // Before any thread starts (grpc_support/cpu_policy.h): every thread inherits it.
  if (std::string failed = podium::grpc_support::SetCpuPolicy(options->cpu_policy); !failed.empty()) {
    ::podium::logging::Line(::podium::logging::Severity::kWarning)
        << "podium-k8s-adapter: --cpu-policy " << podium::grpc_support::CpuPolicyName(options->cpu_policy)
        << " not applied: " << failed << "\n";
  }
  // Before any thread starts (the certificate watcher, gRPC's, the exposer's):
  // every thread inherits the mask, so SIGTERM reaches only the sigwait below
  // and never takes its default action.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // The scheduler's credentials (files checked now; the channel connects lazily).
  auto scheduler_channel = podium::adapter::DialScheduler(options->scheduler, options->dial);
  if (!scheduler_channel.ok()) {
    ::podium::logging::Line(::podium::logging::Severity::kError) << "podium-k8s-adapter: " << scheduler_channel.status().message() << "\n";
    return 2;
  }
  auto config = ResolveRestConfig(options->kubeconfig, options->context, ProcessEnvironment());
  if (!config.ok()) {
    ::podium::logging::Line(::podium::logging::Severity::kError) << "podium-k8s-adapter: " << config.status().message() << "\n";
    return 1;
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  if (options->election.identity.empty()) {
    options->election.identity = absl::StrFormat("%s_%08x", host, std::random_device{}());
  }
  const std::string agent = absl::StrCat("podium-k8s-adapter (", options->election.identity, ")");
  auto registry = std::make_shared<prometheus::Registry>();
  AdapterMetrics metrics(registry);
  auto client = ApiClient::Create(
      {.config = *config, .qps = options->qps, .burst = options->burst, .user_agent = agent, .metrics = &metrics});
  if (!client.ok()) {
    ::podium::logging::Line(::podium::logging::Severity::kError) << "podium-k8s-adapter: " << client.status().message() << "\n";
    return 1;
  }
  // Events and leases get their own clients and rate limits, as kube-scheduler
  // does: neither takes a bind's tokens, and binds never delay a renewal.
  auto event_client = ApiClient::Create({.config = *config, .qps = options->qps, .burst = options->burst,
                                         .max_idle_connections = 4, .user_agent = agent, .metrics = &metrics});
  auto lease_client = ApiClient::Create({.config = *config, .qps = options->qps, .burst = options->burst,
                                         .request_timeout = options->election.retry_period,
                                         .max_idle_connections = 1, .user_agent = agent, .metrics = &metrics});
  if (!event_client.ok() || !lease_client.ok()) {
    ::podium::logging::Line(::podium::logging::Severity::kError) << "podium-k8s-adapter: " << (event_client.ok() ? lease_client.status() : event_client.status()).message()
              << "\n";
    return 1;
  }
  LeaderElector elector(**lease_client, options->election);

  std::unique_ptr<prometheus::Exposer> exposer;
  if (!options->metrics_address.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(options->metrics_address);
      exposer->RegisterCollectable(registry);
      const auto ports = exposer->GetListeningPorts();
      ::podium::logging::Line() << "podium-k8s-adapter: metrics on port " << (ports.empty() ? 0 : ports.front()) << " ("
                << options->metrics_address << ", /metrics)\n";
    } catch (const std::exception& e) {
      ::podium::logging::Line(::podium::logging::Severity::kWarning) << "podium-k8s-adapter: metrics disabled: cannot listen on " << options->metrics_address << ": "
                << e.what() << "\n";
    }
  }
  absl::Notification stop;
  std::atomic<bool> stopping{false};
  std::once_flag stop_once;  // Notify() may be called only once.
  auto request_stop = [&] {
    stopping.store(true);
    std::call_once(stop_once, [&stop] { stop.Notify(); });
  };
  std::thread([&] {
    int sig;
    sigwait(&signals, &sig);
    request_stop();
    (*client)->Shutdown();
    (*event_client)->Shutdown();
    (*lease_client)->Shutdown();
  }).detach();

  ActionDispatcher::Options dispatch{.concurrency = options->concurrency,
                                     .event_source = {.reporting_controller = "podium", .reporting_instance = host},
                                     .metrics = &metrics};
  if (options->leader_elect) dispatch.may_act = [&elector] { return elector.IsLeader(); };
  ActionDispatcher dispatcher(**client, **event_client, dispatch);
  std::vector<ResourceKind> kinds = AllKinds();
  SchedulerLink::Options link_options;
  link_options.kinds = kinds;
  link_options.metrics = &metrics;
  link_options.leading = !options->leader_elect;  // A standby streams its list but sends no ListEnd.
  SchedulerLink link(link_options, *std::move(scheduler_channel), dispatcher);

  ::podium::logging::Line() << "podium-k8s-adapter: API server " << config->scheme << "://" << config->host << ":" << config->port
            << config->base_path << " (" << config->source << "), scheduler " << options->scheduler << ", rate limit "
            << (options->qps > 0 ? absl::StrCat(options->qps, " QPS burst ", options->burst) : "off") << "\n";
  std::vector<std::unique_ptr<Reflector>> reflectors;
  std::vector<std::thread> threads;
  auto sleep = [&stop](absl::Duration d) { stop.WaitForNotificationWithTimeout(d); };
  for (auto& k : kinds) {
    reflectors.push_back(std::make_unique<Reflector>(k, **client, link, Reflector::Options{.page_size = options->page_size, .metrics = &metrics},
                                                     absl::Now, sleep));
  }
  for (auto& r : reflectors) threads.emplace_back([&r, &stopping] { r->Run(stopping); });

  // With leader election, a standby's caches stay warm: its reflectors list
  // and watch, and its scheduler gets the list and every change but no
  // ListEnd, so it schedules nothing and no action is issued. Winning the
  // lease sends ListEnd; losing it ends the process (as kube-scheduler does):
  // its actions have already stopped (IsLeader turns false at renew-deadline).
  std::atomic<bool> lost_lease{false};
  std::thread campaign;
  if (options->leader_elect) {
    const std::string lease =
        absl::StrCat(options->election.lease_namespace, "/", options->election.lease_name);
    metrics.SetLeader(lease, false);
    campaign = std::thread([&, lease] {
      if (elector.Run(stopping, [&link, &metrics, lease] {
            metrics.SetLeader(lease, true);
            link.SetLeading();
          }, sleep) && !stopping.load()) {
        metrics.SetLeader(lease, false);
        lost_lease = true;
        request_stop();
      }
    });
  }
  if (!stop.HasBeenNotified()) link.Run(stop);
  request_stop();

  (*client)->Shutdown();
  for (auto& t : threads) t.join();
  (*lease_client)->Shutdown();
  if (campaign.joinable()) campaign.join();
  (*event_client)->Shutdown();
  dispatcher.Stop();
  auto c = dispatcher.counters();
  ::podium::logging::Line() << "podium-k8s-adapter: stopped; API calls " << c.calls << " (retries " << c.retries << ", ok " << c.ok
            << ", failed " << c.failed << "), events posted " << c.events_posted << ", aggregated "
            << c.events_aggregated << ", dropped " << c.events_dropped << ", failed " << c.events_failed
            << ", rate limited " << c.events_rate_limited << ", series patches " << c.events_series_patches
            << ", objects not translated "
            << link.bad_objects() << "\n";
  return lost_lease.load() ? 1 : 0;
}
