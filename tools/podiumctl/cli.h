// podiumctl's command line: one Invocation from argv and the environment.
// Parsing only; nothing here dials the scheduler.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/validation/object_validation.h"

namespace podium::ctl {

// Exit codes scripts can rely on (documented in --help and README.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;        // Bad command line.
inline constexpr int kExitUnavailable = 2;  // Scheduler unreachable, or an RPC failed.
inline constexpr int kExitNotFound = 3;     // The pod (or what was named) is not known.
inline constexpr int kExitRefused = 4;      // The scheduler refused the credentials (or their lack).

inline constexpr char kDefaultAddress[] = "unix:///run/podium/scheduler.sock";
inline constexpr char kAddressEnv[] = "PODIUM_ADDRESS";
inline constexpr char kTokenFileEnv[] = "PODIUM_TOKEN_FILE";

// Kubernetes' limits: a pod name is a DNS subdomain, a namespace a DNS label.
inline constexpr size_t kMaxPodNameLength = validation::kMaxNameLength;
using validation::kMaxNamespaceLength;

enum class Command {
  kHelp,
  kQueue,
  kExplain,
  kNodes,
  kPlugins,
  kPause,
  kResume,
  kActivate,
  kWatch,
  kLogLevel,
  kStatus,
  kCompletion,
};

enum class OutputFormat { kTable, kWide, kJson, kYaml, kName };

struct PodName {
  std::string namespace_;
  std::string name;
  bool operator==(const PodName&) const = default;
};

struct Invocation {
  Command command = Command::kHelp;
  std::string help_topic;  // `podiumctl help queue`, `podiumctl queue --help`.
  std::string address = kDefaultAddress;
  absl::Duration timeout = absl::Seconds(5);
  OutputFormat output = OutputFormat::kTable;
  // Credentials: a bearer token read from a file; TLS (server CA, client
  // certificate for mTLS, the name the server certificate must carry).
  std::string token_file;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;

  // queue
  std::string namespace_;
  std::optional<std::string> queue;  // active|backoff|unschedulable|gated.
  std::string plugin;
  int limit = 0;                 // 0 = every pod.
  std::string continue_token;    // --continue: a page token from an earlier --limit run.
  int chunk_size = 500;          // Pods per ListQueuedPods call.
  // explain, activate
  std::vector<PodName> pods;
  bool all_unschedulable = false;
  // watch
  int count = 0;  // 0 = until interrupted.
  // log-level: the verbosity to set; unset prints the current one.
  std::optional<int> log_level;
  // completion
  std::string shell;
};

// Parses `podiumctl [flags] COMMAND [args] [flags]`. `env_address` is
// $PODIUM_ADDRESS (nullopt when unset); --address wins over it, as
// --token-file wins over `env_token_file` ($PODIUM_TOKEN_FILE). An error is a
// usage error (exit kExitUsage) and its message names the flag or argument.
absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args,
                                            std::optional<std::string> env_address,
                                            std::optional<std::string> env_token_file = std::nullopt);

// "NAMESPACE/POD" (or "POD", meaning namespace "default").
absl::StatusOr<PodName> ParsePodName(const std::string& text);

// unix:///path, unix:path, host:port, or a bare socket path: absolute, or
// relative when a '/' comes before any ':' (./scheduler.sock -> unix:./scheduler.sock).
std::string NormalizeAddress(const std::string& address);

// `podiumctl --help`, or the help of one command ("" for the overview).
std::string Usage(const std::string& topic = "");

// The names of the commands, in help order (for completion and help).
const std::vector<std::string>& CommandNames();

}  // namespace podium::ctl
