// podium-scheduler: parses flags and the config file into options, wires the
// objects, serves Cluster, Admin and health on one address, and schedules.
#include <atomic>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "boost/json/serialize.hpp"
#include "cache/cache.h"
#include "grpc_support/async_driver.h"
#include "grpc_support/cpu_policy.h"
#include "grpc_support/health_service.h"
#include "cache/mirror_state_source.h"
#include "cache/snapshot.h"
#include "config/config.h"
#include "framework/framework.h"
#include "framework/queueing_hints.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "logging/logger.h"
#include "metrics/metrics.h"
#include "preemption/default_preemption.h"
#include "profiles.h"
#include "prometheus/exposer.h"
#include "queue/events.h"
#include "queue/scheduling_queue.h"
#include "remote/grpc_plugin_process.h"
#include "scheduler.h"
#include "server/admin_service.h"
#include "server/cluster_service.h"
#include "server/listener.h"
#include "server/transport_security.h"
#include "absl/synchronization/mutex.h"

ABSL_FLAG(std::string, config, "", "KubeSchedulerConfiguration (+ PodiumConfiguration) YAML file");
ABSL_FLAG(std::string, listen, "unix:///run/podium/scheduler.sock",
          "Address of the Cluster, Admin and health services (unix:///path or host:port)");
ABSL_FLAG(std::string, plugin_endpoint, "",
          "NAME=ADDRESS: override the address of a configured plugin endpoint (repeatable)");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:10259",
          "host:port for GET /metrics; empty disables it");
ABSL_FLAG(int, max_binds_in_flight, 8,
          "Binds sent to the adapter and not yet confirmed beyond which no further pod is popped from "
          "activeQ (bounds the attempt latency; 0: unbounded)");
ABSL_FLAG(int, later_lookaheads, 8,
          "Pods after the lookahead pod whose verdicts a batch hit's plugin request also asks for, each "
          "decided without a request of its own when the pods before it land as expected (0 to 16; 0: "
          "only the next pod's)");
ABSL_FLAG(int, preemption_what_ifs, 8,
          "Candidate walks whose picks a preemptor's narrowed request predicts and asks preemption what-ifs "
          "for (plugin protocol version 7; up to twice as many nodes): where the next preemptors of its "
          "signature will likely be nominated, so that they need no request (0 to 64; 0: none)");
ABSL_FLAG(int, action_coalesce_us, 2000,
          "While the scheduling loop has more pods to schedule right away, how long (microseconds) an "
          "action other than a bind may wait to share its message to the adapter with the next pods' "
          "(0 to 100000; 0: written at once); everything waiting is written when the loop waits");
ABSL_FLAG(int, gated_status_delay_ms, 1000,
          "How long (milliseconds) a pod a PreEnqueue plugin holds (a gang member whose siblings are not all "
          "there yet) waits before its PodScheduled=False/SchedulingGated reason is patched; dropped if it "
          "is let through or deleted meanwhile (0 to 600000; 0: at once)");
ABSL_FLAG(int, plugin_wait_seconds, 30,
          "How long to wait at start for each plugin endpoint's handshake");
// Access control and TLS (kube-apiserver's flag names where it has one).
ABSL_FLAG(std::string, token_auth_file, "",
          "Bearer tokens, one `token,user,uid[,\"group1,group2\"]` per line (Kubernetes' static token "
          "file); re-read when it changes. Turns access control on");
ABSL_FLAG(std::string, client_ca_file, "",
          "CA of client certificates (mTLS on a TLS --listen; user = CN, groups = O). Turns access control on");
ABSL_FLAG(std::string, admin_group, "podium:admins", "Group whose members may call mutating Admin RPCs");
ABSL_FLAG(std::string, adapter_identity, "",
          "The only user Cluster.Sync accepts (token user or certificate CN); empty: a caller without "
          "credentials on a unix --listen");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate of a TLS --listen (with --tls-private-key-file)");
ABSL_FLAG(std::string, tls_private_key_file, "", "PEM private key of --tls-cert-file");
ABSL_FLAG(int, tls_reload_seconds, 60, "How often certificate, key and CA files are checked for a change");
ABSL_FLAG(std::string, plugin_tls_ca_file, "",
          "Dial host:port plugin endpoints with TLS, verifying them against this CA");
ABSL_FLAG(std::string, plugin_tls_cert_file, "", "Client certificate for plugin endpoints (mTLS)");
ABSL_FLAG(std::string, plugin_tls_key_file, "", "Private key of --plugin-tls-cert-file");
// kube-scheduler's logging flags.
ABSL_FLAG(int, v, 0, "Log verbosity: V(n) lines with n <= v are written (changeable at run time: "
                     "Admin.SetLogVerbosity, `podiumctl log-level N`)");
ABSL_FLAG(std::string, logging_format, "text",
          "Log format: text (klog-style lines) or json (one JSON object per line)");
ABSL_FLAG(std::string, cpu_policy, "batch",
          "Linux scheduling policy of every thread: batch (SCHED_BATCH: a thread that wakes does not "
          "preempt a running one, fewer context switches per pod) or normal (SCHED_OTHER)");

namespace podium::scheduler {
namespace {

constexpr char kHostFlagHint[] = "--plugin-endpoint";

// What podium-scheduler says outside the scheduler's own records: start-up,
// refusals, shutdown. Plain lines under --logging-format=text (scripts and
// podium-sim read "podium-scheduler listening on ADDR"); under json one
// record per line like every other, the line's text as msg (without the
// "podium-scheduler: " or "podium-scheduler " prefix, which the component
// field carries) and its values as fields: logging::WriteLine in the
// process's line format (SetLineFormat), as the plugin host's and the
// adapter's lines.
class Console {
 public:
  void Say(logging::Severity severity, const std::string& line,
           std::initializer_list<logging::Field> fields = {}) const {
    logging::WriteLine(logging::LineFormat(), severity, absl::StrCat(line, "\n"), fields);
  }
  // Says why the process cannot start; returns its exit code.
  int Fail(const std::string& message) const {
    Say(logging::Severity::kError, absl::StrCat("podium-scheduler: ", message));
    return 1;
  }
};

// The --listen credentials from the flags: TLS when a certificate is given,
// access control when tokens or a client CA are.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenCredentials(const std::string& listen,
                                                                                   const Console& console) {
  ListenerSecurity security;
  const int reload = absl::GetFlag(FLAGS_tls_reload_seconds);
  if (!absl::GetFlag(FLAGS_tls_cert_file).empty() || !absl::GetFlag(FLAGS_tls_private_key_file).empty()) {
    security.tls = TlsFiles{.cert_file = absl::GetFlag(FLAGS_tls_cert_file),
                            .key_file = absl::GetFlag(FLAGS_tls_private_key_file),
                            .ca_file = absl::GetFlag(FLAGS_client_ca_file),
                            .reload_interval_seconds = reload};
  } else if (!absl::GetFlag(FLAGS_client_ca_file).empty()) {
    return absl::InvalidArgumentError("--client-ca-file needs a TLS --listen (--tls-cert-file, --tls-private-key-file)");
  }
  const std::string token_file = absl::GetFlag(FLAGS_token_auth_file);
  if (!token_file.empty() || !absl::GetFlag(FLAGS_client_ca_file).empty()) {
    AccessPolicy policy;
    if (!token_file.empty()) {
      auto tokens = TokenFile::Load(token_file);
      if (!tokens.ok()) return absl::Status(tokens.status().code(), absl::StrCat("--token-auth-file: ", tokens.status().message()));
      policy.tokens = std::shared_ptr<TokenFile>(std::move(*tokens));
    }
    policy.admin_group = absl::GetFlag(FLAGS_admin_group);
    policy.adapter_identity = absl::GetFlag(FLAGS_adapter_identity);
    security.access = std::move(policy);
  } else if (UnixSocketPath(listen).empty()) {
    console.Say(logging::Severity::kWarning,
                absl::StrCat("podium-scheduler: warning: no access control on ", listen,
                             ": whoever reaches it may read the queue and receive binds (give "
                             "--token-auth-file or --client-ca-file; Admin calls that change the "
                             "scheduler are refused without them)"),
                {{"address", listen}});
  }
  return ServerCredentialsFor(listen, security);
}

// `podium-scheduler --help`: the flags this file defines, spelled as typed
// (dashes; underscores work too), with their defaults. Built from the flag
// registry, so a new flag is listed without a second place to edit.
std::string Usage() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    // absl reports the file without its leading "/".
    if (absl::EndsWith(__FILE__, flag->Filename())) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(), [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string out =
      "usage: podium-scheduler [flags]\n\n"
      "Schedules the pods an adapter (podium-sim, podium-k8s-adapter) sends over Cluster.Sync,\n"
      "with the plugins of its --config; serves Cluster, Admin and health on --listen.\n\n";
  for (const absl::CommandLineFlag* flag : flags) {
    std::string name(flag->Name());
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string value = flag->DefaultValue();
    const bool quoted = flag->IsOfType<std::string>();
    absl::StrAppend(&out, "  --", name, " (default ", quoted ? absl::StrCat("\"", value, "\"") : value, ")\n");
    // The help text, wrapped at 80 columns under the flag.
    std::string line = "      ";
    for (absl::string_view word : absl::StrSplit(flag->Help(), ' ', absl::SkipEmpty())) {
      if (line.size() > 6 && line.size() + 1 + word.size() > 80) {
        absl::StrAppend(&out, line, "\n");
        line = "      ";
      }
      absl::StrAppend(&line, line.size() > 6 ? " " : "", word);
    }
    absl::StrAppend(&out, line, "\n");
  }
  absl::StrAppend(&out, "\n  -h, --help (this text); --helpfull lists the libraries' flags as well.\n");
  return out;
}

// Whether absl takes `name` (underscores) as a flag: a registered one,
// --noNAME of a registered bool, or a usage flag (not in the registry).
bool IsKnownFlag(const std::string& name) {
  static const auto* const kUsageFlags = new absl::flat_hash_set<std::string>{
      "help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch", "version", "only_check_args"};
  if (kUsageFlags->contains(name) || absl::FindCommandLineFlag(name) != nullptr) return true;
  if (name.rfind("no", 0) != 0) return false;
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name.substr(2));
  return flag != nullptr && flag->IsOfType<bool>();
}

int Run(std::vector<std::string> overrides) {
  // The logger first: everything after may log.
  logging::Format log_format = logging::Format::kText;
  const bool format_known = logging::ParseFormat(absl::GetFlag(FLAGS_logging_format), &log_format);
  logging::SetLineFormat(log_format);  // Text when the flag is not known.
  const Console console;
  if (!format_known) {
    return console.Fail(absl::StrCat("--logging-format: \"", absl::GetFlag(FLAGS_logging_format),
                             "\" is neither text nor json"));
  }
  const int verbosity = absl::GetFlag(FLAGS_v);
  const bool verbosity_known = verbosity >= 0 && verbosity <= AdminService::kMaxLogVerbosity;
  static logging::StreamSink log_sink(stderr, log_format);
  static logging::Logger logger("podium-scheduler", &log_sink, verbosity_known ? verbosity : 0);
  logging::SetDefault(&logger);
  if (!verbosity_known) {
    return console.Fail(absl::StrCat("--v: ", verbosity, " is not in [0, ", AdminService::kMaxLogVerbosity, "]"));
  }
  const int max_binds_in_flight = absl::GetFlag(FLAGS_max_binds_in_flight);
  if (max_binds_in_flight < 0) {
    return console.Fail(
        absl::StrCat("--max-binds-in-flight: ", max_binds_in_flight, " is negative (0 means unbounded)"));
  }

  // Before any thread starts (grpc_support/cpu_policy.h), so that every thread has it.
  const std::optional<grpc_support::CpuPolicy> cpu_policy = grpc_support::ParseCpuPolicy(absl::GetFlag(FLAGS_cpu_policy));
  if (!cpu_policy.has_value()) {
    return console.Fail(grpc_support::UnknownCpuPolicy(absl::GetFlag(FLAGS_cpu_policy)));
  }
  if (std::string failed = grpc_support::SetCpuPolicy(*cpu_policy); !failed.empty()) {
    PODIUM_LOG(Warning, "--cpu-policy not applied", {"policy", grpc_support::CpuPolicyName(*cpu_policy)},
               {"err", failed});
  }

  const int later_lookaheads = absl::GetFlag(FLAGS_later_lookaheads);
  if (later_lookaheads < 0 || later_lookaheads > 16) {
    return console.Fail(absl::StrCat("--later-lookaheads: ", later_lookaheads, " is not in [0, 16]"));
  }

  const int preemption_what_ifs = absl::GetFlag(FLAGS_preemption_what_ifs);
  if (preemption_what_ifs < 0 || preemption_what_ifs > 64) {
    return console.Fail(absl::StrCat("--preemption-what-ifs: ", preemption_what_ifs, " is not in [0, 64]"));
  }
  const int action_coalesce_us = absl::GetFlag(FLAGS_action_coalesce_us);
  if (action_coalesce_us < 0 || action_coalesce_us > 100000) {
    return console.Fail(absl::StrCat("--action-coalesce-us: ", action_coalesce_us, " is not in [0, 100000]"));
  }
  const int gated_status_delay_ms = absl::GetFlag(FLAGS_gated_status_delay_ms);
  if (gated_status_delay_ms < 0 || gated_status_delay_ms > 600000) {
    return console.Fail(absl::StrCat("--gated-status-delay-ms: ", gated_status_delay_ms, " is not in [0, 600000]"));
  }

  // Configuration: everything read here, nothing read later.
  absl::StatusOr<SchedulerConfig> config = absl::GetFlag(FLAGS_config).empty()
                                               ? absl::StatusOr<SchedulerConfig>(DefaultConfig())
                                               : LoadConfigFile(absl::GetFlag(FLAGS_config));
  if (!config.ok()) return console.Fail(std::string(config.status().message()));
  for (const auto& o : overrides) {
    if (absl::Status s = ApplyEndpointOverride(*config, o); !s.ok()) {
      return console.Fail(absl::StrCat(kHostFlagHint, " ", o, ": ", s.message()));
    }
  }

  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry);
  std::unique_ptr<prometheus::Exposer> exposer;
  if (const std::string address = absl::GetFlag(FLAGS_metrics_address); !address.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(address);
      exposer->RegisterCollectable(registry);
    } catch (const std::exception& e) {
      console.Say(logging::Severity::kWarning,
                  absl::StrCat("podium-scheduler: metrics disabled: cannot listen on ", address, ": ", e.what()),
                  {{"address", address}});
    }
  }

  Cache cache(Cache::Options{});
  Snapshot snapshot;
  CacheStateSource state(cache, snapshot);
  // Set below, once the scheduler exists; read by gRPC reader threads that
  // deliver permit decisions, hence atomic.
  std::atomic<Scheduler*> scheduler_ptr{nullptr};

  // Re-resolves the profiles when an endpoint connects after start (set once
  // the profiles exist, cleared before they go).
  absl::Mutex rewire_mu;
  std::function<void()> rewire;  // Guarded by rewire_mu.

  std::optional<TlsFiles> plugin_tls;
  if (!absl::GetFlag(FLAGS_plugin_tls_ca_file).empty() || !absl::GetFlag(FLAGS_plugin_tls_cert_file).empty()) {
    plugin_tls = TlsFiles{.cert_file = absl::GetFlag(FLAGS_plugin_tls_cert_file),
                          .key_file = absl::GetFlag(FLAGS_plugin_tls_key_file),
                          .ca_file = absl::GetFlag(FLAGS_plugin_tls_ca_file),
                          .reload_interval_seconds = absl::GetFlag(FLAGS_tls_reload_seconds)};
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> plugin_credentials = ChannelCredentialsFor(plugin_tls);
  if (!plugin_credentials.ok()) return console.Fail(absl::StrCat("--plugin-tls-*: ", plugin_credentials.status().message()));

  // The server's builder and the one thread that drives its completion
  // queue, first: the queue is polled from here on (before the server is
  // built), so client streams on it (the plugin endpoints' handshakes)
  // progress while main waits for them.
  // gRPC's default health service is not used (it would bring back the
  // callback API's polling threads): `health` serves grpc.health.v1.Health on
  // the driver's queue.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc_support::HealthService health("podium-scheduler");  // Outlives the driver.
  grpc::ServerBuilder builder;
  health.Register(builder);
  grpc_support::AsyncDriver driver(builder.AddCompletionQueue(/*is_frequently_polled=*/true));
  driver.Start();

  // Plugin endpoints: dial each and wait for its handshake.
  std::vector<std::unique_ptr<GrpcPluginProcess>> endpoints;
  absl::flat_hash_map<std::string, ServedPlugin> served;
  for (const PluginEndpointConfig& ep : config->endpoints) {
    PluginEndpointOptions options;
    options.name = ep.name;
    options.address = ep.address;
    // TLS for host:port endpoints; a unix socket is protected by its file mode.
    if (plugin_tls && UnixSocketPath(ep.address).empty()) options.channel_credentials = *plugin_credentials;
    options.failure_policy = ep.failure_policy;
    options.timeout = ep.timeout;
    options.handshake_timeout = absl::Seconds(absl::GetFlag(FLAGS_plugin_wait_seconds));
    // The plugin streams share the server's queue and its one thread.
    options.driver = &driver;
    metrics.AddPluginEndpoint(ep.name);
    options.on_answered = [&metrics, name = ep.name](std::string_view request, absl::Duration round_trip) {
      metrics.ObservePluginRequest(name, request, round_trip);
    };
    options.on_reconnected = [&rewire_mu, &rewire] {
      absl::MutexLock lock(&rewire_mu);
      if (rewire) rewire();
    };
    for (const std::string& plugin : ep.plugins) {
      // One entry per distinct args; the profiles are named only when they differ.
      const auto by_profile = config->ArgsByProfile(plugin);
      if (by_profile.empty()) options.plugins.emplace_back().set_name(plugin);
      for (const auto& group : by_profile) {
        v1::PluginArgs& args = options.plugins.emplace_back();
        args.set_name(plugin);
        if (group.args != nullptr) args.set_args_json(boost::json::serialize(*group.args));
        if (by_profile.size() > 1) {
          for (const std::string& name : group.scheduler_names) args.add_scheduler_names(name);
        }
      }
    }
    auto process = std::make_unique<GrpcPluginProcess>(
        options, state, [&scheduler_ptr](const v1::PermitDecision& d) {
          if (Scheduler* s = scheduler_ptr.load(std::memory_order_acquire)) s->OnPermitDecision(d);
        });
    absl::Status started = process->Start();
    if (!started.ok()) {
      // A process that answers without a plugin the config lists is a
      // configuration error, whatever the policy; one not reachable yet is
      // waited for under Ignore.
      if (options.failure_policy == FailurePolicy::kFail || absl::IsNotFound(started)) {
        return console.Fail(std::string(started.message()));
      }
      console.Say(logging::Severity::kWarning,
                  absl::StrCat("podium-scheduler: ", started.message(), "; its plugins are ignored until it connects"),
                  {{"endpoint", ep.name}, {"address", ep.address}});
    }
    // Start refused a process missing any of ep.plugins (NotFound above); one
    // not connected yet has no registration, and nothing is served from it.
    const v1::Registration registration = process->registration();
    for (const std::string& plugin : ep.plugins) {
      auto it = std::find_if(registration.plugins().begin(), registration.plugins().end(),
                             [&](const auto& p) { return p.name() == plugin; });
      if (it != registration.plugins().end()) served[plugin] = ServedPlugin{process.get(), *it};
    }
    console.Say(logging::Severity::kInfo,
                absl::StrCat("podium-scheduler: plugin endpoint ", ep.name, " (", ep.address, "): ",
                             registration.plugins_size(), " plugins"),
                {{"endpoint", ep.name}, {"address", ep.address}, {"plugins", registration.plugins_size()}});
    endpoints.push_back(std::move(process));
  }

  // Preemption: nominations counted in every cycle, DefaultPreemption per
  // profile, and the controller in front of the scheduler's event handler.
  preemption::Nominator nominator(&cache);
  preemption::PreemptionController preemption_controller(nominator);
  std::vector<FrameworkPtr> profiles;
  std::vector<std::unique_ptr<ExtensionPointMetrics>> extension_point_metrics;
  std::vector<std::string> scheduler_names;
  EventRegistry events;
  absl::flat_hash_map<std::string, PluginProcess*> by_plugin;
  for (size_t i = 0; i < config->profiles.size(); ++i) {
    absl::StatusOr<ProfileSpec> spec =
        ResolveProfile(config->profiles[i], i, config->percentage_of_nodes_to_score, served);
    if (!spec.ok()) return console.Fail(std::string(spec.status().message()));
    // multiPoint may bring a remote plugin that registered PostFilter: nothing
    // calls it yet, so refuse rather than ignore it.
    if (auto it = spec->plugins.find(v1::POST_FILTER); it != spec->plugins.end() && !it->second.empty()) {
      return console.Fail(absl::StrCat("profiles[", i, "].plugins.postFilter: plugin \"", it->second.front().name,
                               "\" registered PostFilter, and out-of-process PostFilter plugins are "
                               "not called yet; disable it at postFilter"));
    }
    for (const auto& [plugin, process] : spec->processes) {
      by_plugin[plugin] = process;
      const ServedPlugin& s = served[plugin];
      for (auto& e : RegisteredEvents(s.registration, s.process->RegistersPendingPodUpdates())) {
        events[plugin].push_back(std::move(e));
      }
    }
    spec->recorder = extension_point_metrics
                         .emplace_back(std::make_unique<ExtensionPointMetrics>(metrics, spec->scheduler_name))
                         .get();
    scheduler_names.push_back(spec->scheduler_name);
    spec->nominated_pods = [&nominator](const v1::Pod& pod, const sdk::Snapshot& snap,
                                        google::protobuf::RepeatedPtrField<v1::MirroredPod>* out) {
      nominator.AddToRequest(pod, snap, out);
    };
    spec->nominated_pod_keys = [&nominator](const v1::Pod& pod, const sdk::Snapshot& snap, const auto& visit) {
      nominator.ForEachKey(pod, snap, visit);
    };
    spec->nominated_key_on = [&nominator](const v1::Pod& pod, std::string_view node) {
      return nominator.KeySumOn(pod, node);
    };
    spec->nominations_generation = [&nominator] { return nominator.generation(); };
    spec->nomination_changes = [&nominator](uint64_t since, int32_t priority, const auto& visit) {
      return nominator.ChangedNodesSince(since, priority, visit);
    };
    spec->nominated_node_of = [&nominator](std::string_view uid) { return nominator.NominatedNode(uid); };
    spec->nominations_count = [&nominator] { return nominator.size(); };
    auto preemption_options = preemption::PreemptionOptionsFor(config->profiles[i], i);
    if (!preemption_options.ok()) return console.Fail(std::string(preemption_options.status().message()));
    profiles.push_back(std::make_unique<Framework>(std::move(*spec)));
    if (*preemption_options) {
      profiles.back()->AddPostFilterPlugin(std::make_unique<preemption::DefaultPreemption>(
          **preemption_options, *profiles.back(), snapshot, cache, preemption_controller));
    }
  }

  std::vector<Framework*> frameworks;
  for (const auto& fw : profiles) frameworks.push_back(fw.get());

  RemoteQueueingHintEvaluator hints(
      by_plugin, [&metrics](std::string_view plugin, const v1::ClusterEvent& event, std::string_view hint,
                            absl::Duration per_hint, size_t count) {
        const std::string label = ClusterEventLabel(event);
        for (size_t i = 0; i < count; ++i) metrics.ObserveQueueingHint(plugin, label, hint, per_hint);
      });
  SchedulingQueue::Options queue_options;
  queue_options.initial_backoff = config->initial_backoff;
  queue_options.max_backoff = config->max_backoff;
  queue_options.max_in_unschedulable = config->max_in_unschedulable;
  // The queue only adds pods once the adapter streams them, which starts after
  // the scheduler below exists.
  queue_options.pre_enqueue = [&scheduler_ptr](const sdk::PodInfo& pod) {
    return scheduler_ptr.load(std::memory_order_acquire)->PreEnqueue(pod);
  };
  queue_options.hint_evaluator = &hints;
  queue_options.on_incoming_pod = [&metrics](std::string_view queue, std::string_view event) {
    metrics.CountIncomingPod(queue, event);
  };
  SchedulingQueue queue(queue_options);
  queue.SetEventRegistry(events);

  Scheduler::Options scheduler_options;
  scheduler_options.max_binds_in_flight = static_cast<size_t>(max_binds_in_flight);
  scheduler_options.gated_status_delay = absl::Milliseconds(gated_status_delay_ms);
  scheduler_options.batching.later_lookaheads = static_cast<size_t>(later_lookaheads);
  scheduler_options.batching.preemption_what_if_nodes = static_cast<uint32_t>(preemption_what_ifs);
  Scheduler scheduler(scheduler_options, cache, snapshot, queue, std::move(profiles), metrics,
                      Clock::Real());
  scheduler_ptr.store(&scheduler, std::memory_order_release);
  preemption_controller.SetScheduler(scheduler);
  scheduler.SetEventFront(&preemption_controller);
  preemption_controller.SetActivator([&queue](const std::vector<std::string>& uids) { queue.Activate(uids); });
  preemption_controller.SetQueueControl(preemption::PreemptionController::QueueControl{
      [&queue](const std::string& uid, const std::string& message) {
        (void)queue.Hold(uid, preemption::kDefaultPreemption, message);
      },
      [&queue](const std::string& uid, bool to_active) { return queue.Release(uid, to_active); },
      [&queue](const std::string& uid) { (void)queue.Unhold(uid); }});
  preemption_controller.SetApiCallsObserver(
      [&metrics](std::string_view result, absl::Duration took) { metrics.ObservePreemptionApiCalls(result, took); });
  preemption_controller.SetPodLookup([&cache](std::string_view uid) { return cache.GetPod(uid) != nullptr; });
  preemption_controller.SetWaitingPods(preemption::PreemptionController::WaitingPods{
      [&scheduler](std::string_view uid) { return scheduler.WaitingAtPermit(uid); },
      [&scheduler](std::string_view uid, const std::string& plugin, const std::string& message,
                   std::function<void()> released) {
        return scheduler.RejectWaitingPod(uid, plugin, message, std::move(released));
      }});
  ClusterService::Options cluster_options{scheduler_names};
  cluster_options.action_coalesce_delay = absl::Microseconds(action_coalesce_us);
  ClusterService cluster(cluster_options, preemption_controller, &metrics);
  scheduler.SetActionSink(&cluster);
  preemption_controller.SetActionSink(&cluster);
  std::vector<GrpcPluginProcess*> endpoint_ptrs;
  for (auto& e : endpoints) endpoint_ptrs.push_back(e.get());
  // An endpoint that connects after start (an Ignore endpoint that was down,
  // or one that re-registered) is used from then on: the profiles are
  // resolved again from every endpoint's latest registration. (Queueing hints
  // of plugins that were not there at start are not registered: pods they
  // reject come back with the periodic flush.)
  {
    absl::MutexLock lock(&rewire_mu);
    rewire = [&] {
      absl::flat_hash_map<std::string, ServedPlugin> now;
      for (size_t k = 0; k < endpoints.size(); ++k) {
        const v1::Registration registration = endpoints[k]->registration();
        for (const std::string& plugin : config->endpoints[k].plugins) {
          for (const auto& p : registration.plugins()) {
            if (p.name() == plugin) now[plugin] = ServedPlugin{endpoints[k].get(), p};
          }
        }
      }
      for (size_t i = 0; i < frameworks.size(); ++i) {
        absl::StatusOr<ProfileSpec> spec =
            ResolveProfile(config->profiles[i], i, config->percentage_of_nodes_to_score, now);
        if (!spec.ok()) {
          console.Say(logging::Severity::kWarning,
                      absl::StrCat("podium-scheduler: profile ", frameworks[i]->name(),
                                   " keeps its plugins: ", spec.status().message()),
                      {{"profile", frameworks[i]->name()}});
          continue;
        }
        frameworks[i]->Reconfigure(std::move(*spec));
      }
    };
    rewire();  // For an endpoint that connected while the others were started.
  }
  struct ClearRewire {
    absl::Mutex& mu;
    std::function<void()>& fn;
    ~ClearRewire() {
      absl::MutexLock lock(&mu);
      fn = nullptr;
    }
  } clear_rewire{rewire_mu, rewire};
  AdminService admin(scheduler, queue, cache, endpoint_ptrs, &cluster);
  admin.RequireIdentityForChanges(true);  // Without access control configured: refused.
  admin.SetNominations([&nominator] { return nominator.ByNode(); },
                       [&nominator](std::string_view uid) { return nominator.NominatedNode(uid); });
  absl::Time last_pool_gauges = absl::InfinitePast();  // Housekeeping thread only.
  // kube-scheduler's assume drops the pod's nomination: it counts on its node
  // as assumed from now on, and must not count there twice until its bind
  // event arrives (on preempt-500 the last preemptors, sharing a node, saw
  // it full and were left unschedulable).
  scheduler.SetClearNominationHook([&nominator](const std::string& uid) { (void)nominator.Clear(uid); });
  scheduler.SetHousekeepingHook([&] {
    // Gauges that list the pool or count the cache: once a second, not on
    // every 100 ms pass.
    if (const absl::Time now = absl::Now(); now - last_pool_gauges >= absl::Seconds(1)) {
      last_pool_gauges = now;
      metrics.SetCacheSize("nodes", static_cast<double>(cache.NumNodes()));
      metrics.SetCacheSize("pods", static_cast<double>(cache.NumPods()));
      metrics.SetCacheSize("assumed_pods", static_cast<double>(cache.NumAssumedPods()));
      QueueListFilter pool;
      pool.queue = QueueKind::kUnschedulable;
      absl::flat_hash_map<std::pair<std::string, std::string>, int> unschedulable;
      for (const QueuedPodSummary& p : queue.ListPage(pool, 0, std::numeric_limits<size_t>::max()).pods) {
        const std::string& scheduler_name = p.pod_info->pod->scheduler_name();
        const std::string profile = scheduler_name.empty() ? "default-scheduler" : scheduler_name;
        for (const std::string& plugin : p.unschedulable_plugins) ++unschedulable[{plugin, profile}];
      }
      metrics.SetUnschedulablePods(unschedulable);
    }
    const PendingPodCounts counts = queue.PendingPods();
    metrics.SetPendingPods("active", counts.active);
    metrics.SetPendingPods("backoff", counts.backoff);
    metrics.SetPendingPods("unschedulable", counts.unschedulable);
    metrics.SetPendingPods("gated", counts.gated);
    metrics.SetInFlightEvents(queue.InFlightEventsByLabel());
    std::optional<uint64_t> min_seq;
    for (auto* e : endpoint_ptrs) {
      const PluginProcessStats s = e->stats();
      metrics.SetPluginConnected(e->name(), e->ready());
      metrics.SetPluginCounter(e->name(), "requests", s.requests);
      metrics.SetPluginCounter(e->name(), "errors", s.errors);
      metrics.SetPluginCounter(e->name(), "timeouts", s.timeouts);
      metrics.SetPluginCounter(e->name(), "invalid_answers", s.invalid_answers);
      metrics.SetPluginCounter(e->name(), "ignored_failures", s.ignored_failures);
      metrics.SetPluginCounter(e->name(), "refused_permit_decisions", s.refused_permit_decisions);
      metrics.SetPluginCounter(e->name(), "spurious_answers", s.spurious_answers);
      metrics.SetPluginCounter(e->name(), "circuit_opens", s.circuit_opens);
      if (auto seq = e->mirror_seq()) min_seq = std::min(min_seq.value_or(*seq), *seq);
    }
    // Mirrors that are not current get a full state anyway.
    if (min_seq) cache.TrimDeltaLog(*min_seq);
  });

  int port = 0;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  builder.SetMaxReceiveMessageSize(64 << 20);
  // A dead adapter's TCP stream is noticed within a minute, so a restarted
  // adapter is not refused as a second stream for long.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.RegisterService(cluster.service());
  builder.RegisterService(admin.service());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> listen_credentials = ListenCredentials(listen, console);
  if (!listen_credentials.ok()) return console.Fail(std::string(listen_credentials.status().message()));
  absl::StatusOr<std::unique_ptr<grpc::Server>> started = StartServer(builder, listen, &port, *listen_credentials);
  if (!started.ok()) return console.Fail(std::string(started.status().message()));
  std::unique_ptr<grpc::Server> server = std::move(*started);
  cluster.Start(driver);
  admin.Start(driver.server_queue());
  health.Start(driver.server_queue());
  std::string bound = listen;
  if (listen.rfind("unix:", 0) != 0 && listen.size() > 2 && listen.substr(listen.size() - 2) == ":0") {
    bound = absl::StrCat(listen.substr(0, listen.size() - 1), port);
  }
  scheduler.Start();
  const std::string profile_names = absl::StrJoin(scheduler_names, ", ");
  console.Say(logging::Severity::kInfo,
              absl::StrCat("podium-scheduler listening on ", bound, " (profiles: ", profile_names, ")"),
              {{"address", bound}, {"profiles", profile_names}});

  // Wait for SIGINT/SIGTERM (blocked in every thread, taken here).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  int sig = 0;
  sigwait(&signals, &sig);
  console.Say(logging::Severity::kInfo, absl::StrCat("podium-scheduler: shutting down (signal ", sig, ")"),
              {{"signal", sig}});
  scheduler.Stop();
  cluster.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // Every call is cancelled: the services start no more operations, so the
  // driver can shut the queue down once the endpoints have ended theirs.
  cluster.StopCalls();
  admin.Stop();
  health.Stop();
  for (auto& e : endpoints) {
    const PluginProcessStats s = e->stats();
    console.Say(logging::Severity::kInfo,
                absl::StrCat("podium-scheduler: plugin endpoint ", e->name(), ": ", s.requests, " requests, ",
                             s.errors, " errors, ", s.timeouts, " timeouts, ", s.invalid_answers,
                             " invalid answers, ", s.reconnects, " reconnects, latency p50 ",
                             absl::StrFormat("%.3f", s.latency_p50_ms), " ms p99 ",
                             absl::StrFormat("%.3f", s.latency_p99_ms), " ms"),
                {{"endpoint", e->name()},
                 {"requests", s.requests},
                 {"errors", s.errors},
                 {"timeouts", s.timeouts},
                 {"invalid_answers", s.invalid_answers},
                 {"reconnects", s.reconnects}});
    e->Shutdown();
  }
  // Every call on the queue has ended: its last completions run, then the
  // driver returns.
  driver.Stop();
  if (listen.rfind("unix://", 0) == 0) std::remove(listen.substr(7).c_str());
  return 0;
}

}  // namespace
}  // namespace podium::scheduler

int main(int argc, char** argv) {
  // Debian's Abseil is built with mutex deadlock detection on: a lock-order
  // graph update on every lock, which the profile shows on the hot path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Block the stop signals before any thread starts so that sigwait gets them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  absl::SetProgramUsageMessage("podium-scheduler [flags] (podium-scheduler --help lists them)");
  // Flags are spelled --plugin-endpoint as well as --plugin_endpoint, and
  // --plugin-endpoint may repeat (absl keeps only the last), so collect it
  // here. An unknown flag is reported here too, as typed (absl would name
  // it with underscores).
  std::vector<std::string> overrides;
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (; i < argc; ++i) args.push_back(argv[i]);
      break;
    }
    if (i > 0 && arg.size() > 1 && arg[0] == '-') {
      if (arg == "--help" || arg == "-help" || arg == "-h") {
        std::fputs(podium::scheduler::Usage().c_str(), stdout);
        return 0;
      }
      const size_t dashes = arg.rfind("--", 0) == 0 ? 2 : 1;
      const size_t end = std::min(arg.find('='), arg.size());
      const std::string typed = arg.substr(0, end);
      std::replace(arg.begin() + dashes, arg.begin() + end, '-', '_');
      const std::string name = arg.substr(dashes, end - dashes);
      if (name == "plugin_endpoint") {
        if (end < arg.size()) {
          overrides.push_back(arg.substr(end + 1));
        } else if (i + 1 < argc) {
          overrides.push_back(argv[++i]);
        }
        continue;
      }
      if (!podium::scheduler::IsKnownFlag(name)) {
        std::fprintf(stderr, "podium-scheduler: unknown flag %s (podium-scheduler --help lists the flags)\n",
                     typed.c_str());
        return 1;
      }
      // `--flag VALUE`: the value is not a flag, whatever it starts with.
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (flag != nullptr && end == arg.size() && !flag->IsOfType<bool>() && i + 1 < argc) {
        args.push_back(std::move(arg));
        args.push_back(argv[++i]);
        continue;
      }
    }
    args.push_back(std::move(arg));
  }
  std::vector<char*> argv2;
  for (auto& a : args) argv2.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(argv2.size()), argv2.data());
  return podium::scheduler::Run(std::move(overrides));
}
