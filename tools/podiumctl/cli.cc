#include "cli.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace podium::ctl {
namespace {

struct CommandInfo {
  const char* name;
  Command command;
  const char* synopsis;
  const char* summary;  // One line, for the overview.
  const char* help;
};

const CommandInfo kCommands[] = {
    {"queue", Command::kQueue, "queue [-n NS] [--queue Q] [--plugin P] [--limit N [--continue TOKEN]]",
     "pods in the scheduling queue, with attempts, backoff and rejecting plugins",
     "Pods waiting in the scheduling queue: active, backoff, unschedulable, gated;\n"
     "then the pods being scheduled: in-flight, waiting-on-permit (with the Permit\n"
     "plugins each still waits on and their deadlines); with attempts, age, backoff\n"
     "expiry and the plugins that rejected them.\n"
     "  -n, --namespace NS  only pods of namespace NS\n"
     "  --queue Q           only queue Q: active, backoff, unschedulable, gated,\n"
     "                      in-flight, waiting-on-permit\n"
     "  --plugin P          only pods that plugin P rejected (or left pending, or\n"
     "                      holds at Permit)\n"
     "  --limit N           at most N pods (the scheduler still reports the total); when\n"
     "                      more remain, the token of the next page is printed (stderr,\n"
     "                      or \"continue\" in -o json|yaml)\n"
     "  --continue TOKEN    start where an earlier --limit run stopped (repeat its\n"
     "                      filters: the token is an offset into their listing)\n"
     "  --chunk-size N      pods per call to the scheduler (default 500, at most 5000);\n"
     "                      every page is read, up to --limit\n"
     "Pods are sorted by queue, then namespace/name; with --limit or --continue they\n"
     "come in the scheduler's order (activeQ in pop order, backoffQ by expiry, the\n"
     "pool by time, then in-flight, waiting-on-permit), so that the pages join up.\n"},
    {"explain", Command::kExplain, "explain NAMESPACE/POD",
     "why a pod is not scheduled: its last attempt, per reason with sample nodes",
     "Why a pod is not scheduled: its last failed attempt, the per-node verdicts\n"
     "grouped by reason with sample nodes, and the FailedScheduling message; for a\n"
     "pod waiting at Permit, the plugins it waits on, the node, since when and the\n"
     "deadlines.\n"
     "Exit code 3 when the scheduler has no failed attempt for the pod.\n"
     "  -n, --namespace NS  namespace of a pod given without one (default \"default\")\n"},
    {"nodes", Command::kNodes, "nodes",
     "the scheduler's cache: requested vs allocatable, bound and assumed pods",
     "The scheduler's cluster cache: allocatable vs requested per node, bound,\n"
     "assumed and nominated pods.\n"},
    {"plugins", Command::kPlugins, "plugins",
     "plugin endpoints: state, counters, latency; each plugin's extension points",
     "Plugin endpoints: state, failure policy, requests, errors, timeouts,\n"
     "invalid answers, latency p50/p99; then each plugin's extension points.\n"},
    {"status", Command::kStatus, "status",
     "whether the scheduler is scheduling (if not, why), its adapter, batching counters",
     "Whether the scheduler starts scheduling cycles and, when it does not, why\n"
     "(paused by an operator, no adapter connected, waiting for the adapter's\n"
     "complete list); the connected adapter; actions sent to it without a result\n"
     "yet; refused adapter streams and actions; the log verbosity; and what\n"
     "opportunistic batching did: hits, misses and unsignable pods, by result and\n"
     "by reason. -o wide adds the counters of requests saved (what-if verdicts,\n"
     "lookaheads, nominated-node checks, preemption what-ifs).\n"},
    {"pause", Command::kPause, "pause",
     "stop starting scheduling cycles",
     "Stop starting scheduling cycles (pods keep queueing; binds in flight finish).\n"},
    {"resume", Command::kResume, "resume", "start scheduling cycles again", "Start scheduling cycles again.\n"},
    {"activate", Command::kActivate, "activate NAMESPACE/POD... | --all-unschedulable",
     "move pods to the active queue",
     "Move pods from backoff or the unschedulable pool to the active queue.\n"
     "Exit code 3 when a named pod is not in the scheduling queue.\n"
     "  --all-unschedulable  every pod in the unschedulable pool\n"
     "  -n, --namespace NS   namespace of pods given without one\n"},
    {"watch", Command::kWatch, "watch [--count N] [-n NS]",
     "one line per scheduling decision, as they happen",
     "One line per scheduling decision as it happens, until interrupted (Ctrl-C)\n"
     "or N decisions were printed. -o json prints one JSON object per line.\n"
     "  --count N           stop after N decisions\n"
     "  -n, --namespace NS  only pods of namespace NS\n"},
    {"log-level", Command::kLogLevel, "log-level [N]",
     "print or set the scheduler's log verbosity",
     "Print the scheduler's log verbosity, or set it to N (0-10) while it runs:\n"
     "V(n) lines with n <= N are written (kube-scheduler's -v). Setting it is a\n"
     "mutating call: it needs admin credentials when access control is on.\n"},
    {"completion", Command::kCompletion, "completion bash",
     "print a bash completion script",
     "Print a bash completion script:  source <(podiumctl completion bash)\n"},
};

const CommandInfo* FindCommand(const std::string& name) {
  for (const auto& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

// Which command accepts which flag.
enum FlagBit : unsigned {
  kFQueue = 1u << 0,
  kFExplain = 1u << 1,
  kFNodes = 1u << 2,
  kFPlugins = 1u << 3,
  kFPause = 1u << 4,
  kFResume = 1u << 5,
  kFActivate = 1u << 6,
  kFWatch = 1u << 7,
  kFCompletion = 1u << 8,
  kFHelp = 1u << 9,
  kFLogLevel = 1u << 10,
  kFStatus = 1u << 11,
  kFAll = 0xffffu,
};

unsigned BitOf(Command c) {
  switch (c) {
    case Command::kQueue: return kFQueue;
    case Command::kExplain: return kFExplain;
    case Command::kNodes: return kFNodes;
    case Command::kPlugins: return kFPlugins;
    case Command::kPause: return kFPause;
    case Command::kResume: return kFResume;
    case Command::kActivate: return kFActivate;
    case Command::kWatch: return kFWatch;
    case Command::kCompletion: return kFCompletion;
    case Command::kHelp: return kFHelp;
    case Command::kLogLevel: return kFLogLevel;
    case Command::kStatus: return kFStatus;
  }
  return 0;
}

struct FlagSpec {
  const char* name;  // Long form, without "--".
  char short_name;   // 0 = none.
  bool takes_value;
  unsigned commands;
};

const FlagSpec kFlags[] = {
    {"address", 0, true, kFAll},
    {"timeout", 0, true, kFAll},
    {"token-file", 0, true, kFAll},
    {"tls-ca-file", 0, true, kFAll},
    {"tls-cert-file", 0, true, kFAll},
    {"tls-key-file", 0, true, kFAll},
    {"tls-server-name", 0, true, kFAll},
    {"output", 'o', true, kFAll},
    {"help", 'h', false, kFAll},
    {"namespace", 'n', true, kFQueue | kFExplain | kFActivate | kFWatch},
    {"queue", 0, true, kFQueue},
    {"plugin", 0, true, kFQueue},
    {"limit", 0, true, kFQueue},
    {"continue", 0, true, kFQueue},
    {"chunk-size", 0, true, kFQueue},
    {"all-unschedulable", 0, false, kFActivate},
    {"count", 0, true, kFWatch},
};

const FlagSpec* FindFlag(const std::string& name, char short_name) {
  for (const auto& f : kFlags) {
    if ((!name.empty() && name == f.name) || (short_name != 0 && short_name == f.short_name)) return &f;
  }
  return nullptr;
}

absl::StatusOr<OutputFormat> ParseOutput(const std::string& v) {
  static const std::map<std::string, OutputFormat> kFormats = {
      {"table", OutputFormat::kTable}, {"wide", OutputFormat::kWide}, {"json", OutputFormat::kJson},
      {"yaml", OutputFormat::kYaml},   {"name", OutputFormat::kName}};
  auto it = kFormats.find(v);
  if (it == kFormats.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("-o/--output: unknown format \"", v, "\" (table, wide, json, yaml, name)"));
  }
  return it->second;
}

absl::StatusOr<int> ParseCount(const std::string& flag, const std::string& v) {
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": want a number >= 0, got \"", v, "\""));
  }
  return n;
}

absl::StatusOr<absl::Duration> ParseTimeout(const std::string& v) {
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(v, &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(v, &d)) {
    return absl::InvalidArgumentError(absl::StrCat("--timeout: invalid duration \"", v, "\" (e.g. 5s, 500ms)"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--timeout: must be positive, got \"", v, "\""));
  }
  return d;
}

}  // namespace

const std::vector<std::string>& CommandNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& c : kCommands) v->push_back(c.name);
    return v;
  }();
  return *names;
}

absl::StatusOr<PodName> ParsePodName(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  PodName pod;
  if (parts.size() == 1) {
    pod.name = parts[0];
  } else if (parts.size() == 2) {
    pod.namespace_ = parts[0];
    pod.name = parts[1];
    if (pod.namespace_.empty()) return absl::InvalidArgumentError(absl::StrCat("pod \"", text, "\": empty namespace"));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("pod \"", text, "\": want NAMESPACE/POD"));
  }
  if (pod.name.empty()) return absl::InvalidArgumentError(absl::StrCat("pod \"", text, "\": empty name"));
  // Kubernetes' limits (a DNS subdomain, a DNS label): a longer name names no pod.
  if (pod.name.size() > kMaxPodNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("pod name \"", pod.name.substr(0, 20), "...\" is ", pod.name.size(),
                                                   " characters; a pod name has at most ", kMaxPodNameLength));
  }
  if (pod.namespace_.size() > kMaxNamespaceLength) {
    return absl::InvalidArgumentError(absl::StrCat("namespace \"", pod.namespace_.substr(0, 20), "...\" is ",
                                                   pod.namespace_.size(), " characters; a namespace has at most ",
                                                   kMaxNamespaceLength));
  }
  return pod;
}

std::string NormalizeAddress(const std::string& address) {
  if (!address.empty() && address[0] == '/') return absl::StrCat("unix://", address);
  // A '/' before any ':' is a relative socket path (./scheduler.sock), not a
  // host: gRPC's unix:PATH takes it relative to the working directory.
  const size_t slash = address.find('/');
  if (slash != std::string::npos && address.find(':') > slash) return absl::StrCat("unix:", address);
  return address;
}

absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args,
                                            std::optional<std::string> env_address,
                                            std::optional<std::string> env_token_file) {
  Invocation inv;
  if (env_address && !env_address->empty()) inv.address = *env_address;
  if (env_token_file && !env_token_file->empty()) inv.token_file = *env_token_file;
  std::optional<std::string> command_name;
  std::vector<std::string> positional;
  struct SeenFlag {
    const FlagSpec* spec;
    std::string value;
  };
  std::vector<SeenFlag> seen;
  bool flags_done = false;

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done || a.empty() || a[0] != '-' || a == "-") {
      if (!command_name) command_name = a;
      else positional.push_back(a);
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    std::string name, value;
    char short_name = 0;
    bool has_value = false;
    if (a.rfind("--", 0) == 0) {
      name = a.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
    } else {
      short_name = a[1];
      if (a.size() > 2) {  // -ojson, -o=json
        value = a.substr(a[2] == '=' ? 3 : 2);
        has_value = true;
      }
    }
    const FlagSpec* spec = FindFlag(name, short_name);
    if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    if (spec->takes_value && !has_value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
      value = args[++i];
    } else if (!spec->takes_value && has_value) {
      return absl::InvalidArgumentError(absl::StrCat("--", spec->name, " takes no value"));
    }
    seen.push_back({spec, value});
  }

  // The command.
  const CommandInfo* info = nullptr;
  if (command_name) {
    if (*command_name == "help") {
      inv.command = Command::kHelp;
      if (!positional.empty()) inv.help_topic = positional[0];
      if (!inv.help_topic.empty() && FindCommand(inv.help_topic) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("help: unknown command \"", inv.help_topic, "\""));
      }
      return inv;
    }
    info = FindCommand(*command_name);
    if (info == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown command \"", *command_name, "\""));
    inv.command = info->command;
  }

  // Flags, now that the command is known.
  for (const auto& [spec, value] : seen) {
    const std::string flag = spec->name;
    if (flag == "help") {
      inv.help_topic = info ? info->name : "";
      inv.command = Command::kHelp;
      return inv;
    }
    if (info != nullptr && (spec->commands & BitOf(info->command)) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " does not apply to \"", info->name, "\""));
    }
    if (flag == "address") {
      if (value.empty()) return absl::InvalidArgumentError("--address: empty address");
      inv.address = value;
    } else if (flag == "timeout") {
      auto d = ParseTimeout(value);
      if (!d.ok()) return d.status();
      inv.timeout = *d;
    } else if (flag == "output") {
      auto f = ParseOutput(value);
      if (!f.ok()) return f.status();
      inv.output = *f;
    } else if (flag == "token-file" || flag == "tls-ca-file" || flag == "tls-cert-file" || flag == "tls-key-file" ||
               flag == "tls-server-name") {
      if (value.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": empty value"));
      std::string* field = flag == "token-file"      ? &inv.token_file
                           : flag == "tls-ca-file"   ? &inv.tls_ca_file
                           : flag == "tls-cert-file" ? &inv.tls_cert_file
                           : flag == "tls-key-file"  ? &inv.tls_key_file
                                                     : &inv.tls_server_name;
      *field = value;
    } else if (flag == "namespace") {
      if (value.empty()) return absl::InvalidArgumentError("-n/--namespace: empty namespace");
      if (value.size() > kMaxNamespaceLength) {
        return absl::InvalidArgumentError(absl::StrCat("-n/--namespace: ", value.size(),
                                                       " characters; a namespace has at most ", kMaxNamespaceLength));
      }
      inv.namespace_ = value;
    } else if (flag == "queue") {
      static const std::vector<std::string> kQueues = {"active",   "backoff",   "unschedulable",
                                                       "gated",    "in-flight", "waiting-on-permit"};
      if (std::find(kQueues.begin(), kQueues.end(), value) == kQueues.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--queue: unknown queue \"", value, "\" (", absl::StrJoin(kQueues, ", "), ")"));
      }
      inv.queue = value;
    } else if (flag == "plugin") {
      if (value.empty()) return absl::InvalidArgumentError("--plugin: empty plugin name");
      inv.plugin = value;
    } else if (flag == "limit") {
      auto n = ParseCount(flag, value);
      if (!n.ok()) return n.status();
      inv.limit = *n;
    } else if (flag == "continue") {
      if (value.empty()) return absl::InvalidArgumentError("--continue: empty token");
      inv.continue_token = value;
    } else if (flag == "chunk-size") {
      auto n = ParseCount(flag, value);
      if (!n.ok()) return n.status();
      if (*n < 1 || *n > 5000) {
        return absl::InvalidArgumentError(absl::StrCat("--chunk-size: want 1 to 5000, got \"", value, "\""));
      }
      inv.chunk_size = *n;
    } else if (flag == "count") {
      auto n = ParseCount(flag, value);
      if (!n.ok()) return n.status();
      inv.count = *n;
    } else if (flag == "all-unschedulable") {
      inv.all_unschedulable = true;
    }
  }
  inv.address = NormalizeAddress(inv.address);
  if (inv.tls_cert_file.empty() != inv.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert-file and --tls-key-file go together");
  }
  if (info == nullptr) return absl::InvalidArgumentError("no command given (podiumctl --help lists them)");

  // Arguments.
  auto no_args = [&]() -> absl::Status {
    if (!positional.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", info->name, "\" takes no arguments, got \"", positional[0], "\""));
    }
    return absl::OkStatus();
  };
  auto pods = [&]() -> absl::Status {
    for (const auto& p : positional) {
      auto pod = ParsePodName(p);
      if (!pod.ok()) return pod.status();
      if (pod->namespace_.empty()) pod->namespace_ = inv.namespace_.empty() ? "default" : inv.namespace_;
      inv.pods.push_back(*pod);
    }
    return absl::OkStatus();
  };
  absl::Status s;
  switch (inv.command) {
    case Command::kExplain:
      if (positional.size() != 1) return absl::InvalidArgumentError("explain: give exactly one NAMESPACE/POD");
      s = pods();
      break;
    case Command::kActivate:
      if (positional.empty() == !inv.all_unschedulable) {
        return absl::InvalidArgumentError("activate: give NAMESPACE/POD... or --all-unschedulable (not both)");
      }
      s = pods();
      break;
    case Command::kLogLevel: {
      if (positional.size() > 1) return absl::InvalidArgumentError("log-level: give at most one verbosity N");
      if (positional.empty()) break;
      int level = 0;
      if (!absl::SimpleAtoi(positional[0], &level) || level < 0 || level > 10) {
        return absl::InvalidArgumentError(
            absl::StrCat("log-level: \"", positional[0], "\" is not a verbosity from 0 to 10"));
      }
      inv.log_level = level;
      break;
    }
    case Command::kCompletion:
      if (positional.size() != 1 || positional[0] != "bash") {
        return absl::InvalidArgumentError("completion: the supported shell is bash (podiumctl completion bash)");
      }
      inv.shell = positional[0];
      break;
    default:
      s = no_args();
  }
  if (!s.ok()) return s;

  const bool name_ok = inv.command == Command::kQueue || inv.command == Command::kNodes ||
                       inv.command == Command::kPlugins;
  if (inv.output == OutputFormat::kName && !name_ok) {
    return absl::InvalidArgumentError(absl::StrCat("-o name does not apply to \"", info->name, "\""));
  }
  return inv;
}

std::string Usage(const std::string& topic) {
  if (const CommandInfo* c = FindCommand(topic)) {
    return absl::StrCat("usage: podiumctl ", c->synopsis, " [flags]\n\n", c->help,
                        "\nGlobal flags: --address, --timeout, -o/--output, --token-file, --tls-* (podiumctl --help).\n");
  }
  std::string commands;
  for (const auto& c : kCommands) {
    absl::StrAppend(&commands, "  ", c.name, std::string(12 - std::string_view(c.name).size(), ' '), c.summary,
                    "\n");
  }
  return absl::StrCat(
      "usage: podiumctl [flags] COMMAND [args] [flags]\n\n"
      "Ask the running podium-scheduler what it is doing (its Admin API).\n\n"
      "Commands:\n",
      commands,
      "  help        help COMMAND shows a command's flags\n\n"
      "Flags:\n"
      "  --address ADDR      the scheduler's Admin address: unix:///path, host:port, or a\n"
      "                      socket path (/abs or ./rel: anything with '/' before any ':')\n"
      "                      (default $",
      kAddressEnv, ", else ", kDefaultAddress,
      ")\n"
      "  --timeout DUR       deadline of each call, e.g. 5s, 500ms (default 5s)\n"
      "  --token-file PATH   send the bearer token in PATH (default $",
      kTokenFileEnv,
      ");\n"
      "                      mutating commands (pause, resume, activate, log-level N) need\n"
      "                      it or a client certificate when the scheduler has access control\n"
      "  --tls-ca-file PATH  dial with TLS, trusting the CA in PATH\n"
      "  --tls-cert-file PATH, --tls-key-file PATH\n"
      "                      a client certificate and its key (mTLS)\n"
      "  --tls-server-name N the name the server certificate must carry (default: the host)\n"
      "  -o, --output FMT    table (default), wide, json, yaml, name (queue, nodes, plugins)\n"
      "  -h, --help          this help, or a command's: podiumctl COMMAND --help\n\n"
      "Exit codes:\n"
      "  0  success\n"
      "  1  usage error (bad command, flag or argument)\n"
      "  2  the scheduler is unreachable, or a call failed\n"
      "  3  not found (explain: no failed attempt for the pod; activate: pod not queued)\n"
      "  4  refused: no or invalid credentials, or not allowed (UNAUTHENTICATED, PERMISSION_DENIED)\n");
}

}  // namespace podium::ctl
