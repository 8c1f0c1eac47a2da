// podium-plugin-host: serves the default plugin set on one Plugin endpoint.
//
//   podium-plugin-host --listen unix:///run/podium/host.sock [--name NAME]
//   podium-plugin-host --listen 127.0.0.1:7070
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "default_plugins.h"
#include "grpc_support/cpu_policy.h"
#include "podium/sdk/serve.h"
#include "absl/synchronization/mutex.h"
#include "logging/logger.h"

namespace {

constexpr std::string_view kUsage =
    "usage: podium-plugin-host --listen ADDR [--name NAME] [--parallelism N] [TLS flags]\n"
    "  --listen ADDR  unix:///abs/path or HOST:PORT (port 0 picks a free port)\n"
    "  --name NAME    process name sent in the registration (default podium-plugin-host)\n"
    "  --parallelism N  threads filtering and scoring one pod's nodes when there are many\n"
    "                 (0 = the cores it may run on, at most 16, serial below 4; 1 = serial;\n"
    "                 default 0)\n"
    "  --tls-cert-file PATH, --tls-private-key-file PATH\n"
    "                 serve TLS on a HOST:PORT --listen (PEM; re-read when they change)\n"
    "  --client-ca-file PATH  mTLS: clients must present a certificate this CA signed\n"
    "                 (the scheduler's --plugin-tls-cert-file)\n"
    "  --tls-reload-seconds N  how often the TLS files are checked (default 60)\n"
    "  --logging-format text|json  text: plain lines; json: one JSON record per line\n"
    "                 (component podium-plugin-host; default text)\n"
    "  --cpu-policy batch|normal  Linux scheduling policy of every thread: batch\n"
    "                 (SCHED_BATCH: a thread that wakes does not preempt a running one;\n"
    "                 fewer context switches per request) or normal (SCHED_OTHER); default batch\n";

struct HostOptions {
  std::string listen;
  std::string name = "podium-plugin-host";
  int parallelism = 0;
  std::string tls_cert_file, tls_key_file, client_ca_file;
  int tls_reload_seconds = 60;
  podium::logging::Format log_format = podium::logging::Format::kText;
  podium::grpc_support::CpuPolicy cpu_policy = podium::grpc_support::CpuPolicy::kBatch;
};

// Accepts "--flag value" and "--flag=value". Returns nullopt after printing
// the problem.
std::optional<HostOptions> ParseFlags(int argc, char** argv) {
  HostOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    std::string_view flag = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    }
    std::string parallelism, reload, log_format, cpu_policy;
    std::string* target = flag == "--listen"                 ? &options.listen
                          : flag == "--name"                 ? &options.name
                          : flag == "--parallelism"          ? &parallelism
                          : flag == "--tls-cert-file"        ? &options.tls_cert_file
                          : flag == "--tls-private-key-file" ? &options.tls_key_file
                          : flag == "--client-ca-file"       ? &options.client_ca_file
                          : flag == "--tls-reload-seconds"   ? &reload
                          : flag == "--logging-format"       ? &log_format
                          : flag == "--cpu-policy"           ? &cpu_policy
                                                             : nullptr;
    if (target == nullptr) {
      std::cerr << "podium-plugin-host: unknown flag " << arg << "\n" << kUsage;
      return std::nullopt;
    }
    if (!value.has_value()) {
      if (i + 1 >= argc) {
        std::cerr << "podium-plugin-host: " << flag << " needs a value\n" << kUsage;
        return std::nullopt;
      }
      value = argv[++i];
    }
    *target = *value;
    if (target == &parallelism) {
      char* end = nullptr;
      const long n = std::strtol(parallelism.c_str(), &end, 10);
      if (parallelism.empty() || *end != '\0' || n < 0 || n > 1024) {
        std::cerr << "podium-plugin-host: --parallelism: want a number 0..1024, got \""
                  << parallelism << "\"\n" << kUsage;
        return std::nullopt;
      }
      options.parallelism = static_cast<int>(n);
    }
    if (target == &reload) {
      char* end = nullptr;
      const long n = std::strtol(reload.c_str(), &end, 10);
      if (reload.empty() || *end != '\0' || n < 1 || n > 86400) {
        std::cerr << "podium-plugin-host: --tls-reload-seconds: want 1..86400, got \"" << reload << "\"\n"
                  << kUsage;
        return std::nullopt;
      }
      options.tls_reload_seconds = static_cast<int>(n);
    }
    if (target == &cpu_policy) {
      std::optional<podium::grpc_support::CpuPolicy> policy = podium::grpc_support::ParseCpuPolicy(cpu_policy);
      if (!policy.has_value()) {
        std::cerr << "podium-plugin-host: " << podium::grpc_support::UnknownCpuPolicy(cpu_policy) << "\n" << kUsage;
        return std::nullopt;
      }
      options.cpu_policy = *policy;
    }
    if (flag == "--logging-format" && !podium::logging::ParseFormat(log_format, &options.log_format)) {
      std::cerr << "podium-plugin-host: --logging-format: \"" << log_format << "\" is neither text nor json\n"
                << kUsage;
      return std::nullopt;
    }
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    std::cerr << "podium-plugin-host: --tls-cert-file and --tls-private-key-file go together\n" << kUsage;
    return std::nullopt;
  }
  if (!options.client_ca_file.empty() && options.tls_cert_file.empty()) {
    std::cerr << "podium-plugin-host: --client-ca-file needs TLS (--tls-cert-file, --tls-private-key-file)\n"
              << kUsage;
    return std::nullopt;
  }
  if (options.listen.empty()) {
    std::cerr << "podium-plugin-host: --listen is required\n" << kUsage;
    return std::nullopt;
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with mutex deadlock detection on: a lock-order
  // graph update on every lock, which the profile shows on the hot path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::optional<HostOptions> options = ParseFlags(argc, argv);
  if (!options.has_value()) return 2;
  // Flag errors above are plain text (the format is not known yet); every
  // line from here on follows --logging-format.
  static podium::logging::StreamSink log_sink(stderr, options->log_format);
  static podium::logging::Logger logger("podium-plugin-host", &log_sink);
  podium::logging::SetDefault(&logger);
  podium::logging::SetLineFormat(options->log_format);

  // Before any thread starts, so that every thread has it.
  if (std::string failed = podium::grpc_support::SetCpuPolicy(options->cpu_policy); !failed.empty()) {
    podium::logging::Line(podium::logging::Severity::kWarning)
        << "podium-plugin-host: --cpu-policy " << podium::grpc_support::CpuPolicyName(options->cpu_policy)
        << " not applied: " << failed << "\n";
  }

  // Block the shutdown signals before any thread starts so that every gRPC
  // thread inherits the mask and only sigwait below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::optional<podium::sdk::ServeTls> tls;
  if (!options->tls_cert_file.empty()) {
    tls = podium::sdk::ServeTls{.cert_file = options->tls_cert_file,
                                .key_file = options->tls_key_file,
                                .client_ca_file = options->client_ca_file,
                                .reload_interval_seconds = options->tls_reload_seconds};
  }
  podium::sdk::PluginServer server(podium::sdk::ServeOptions{
      .address = options->listen,
      .process_name = options->name,
      .plugins = podium::plugins::DefaultPlugins(),
      .parallelism = options->parallelism,
      .tls = tls,
  });
  if (absl::Status started = server.Start(); !started.ok()) {
    podium::logging::Line(podium::logging::Severity::kError) << "podium-plugin-host: " << started.message() << "\n";
    return 1;
  }
  podium::logging::Line() << "podium-plugin-host listening on " << server.address() << std::endl;

  int signal = 0;
  sigwait(&signals, &signal);
  podium::logging::Line() << "podium-plugin-host: " << (signal == SIGINT ? "SIGINT" : "SIGTERM")
            << ", shutting down" << std::endl;
  server.Shutdown();  // Ends the streams and removes the unix socket file.
  return 0;
}
