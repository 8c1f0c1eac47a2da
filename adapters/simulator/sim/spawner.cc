#include "sim/spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace podium::sim {
namespace {

std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) absl::StrAppend(&out, "  | ", all[i], "\n");
  return out.empty() ? "  | (no output)\n" : out;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status));
  return "stopped";
}

}  // namespace

absl::Status CheckHealth(const std::string& target, absl::Duration timeout) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  grpc::CompletionQueue cq;
  grpc::Slice empty;  // HealthCheckRequest{service: ""} encodes to zero bytes.
  grpc::ByteBuffer request(&empty, 1);
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return absl::OkStatus();
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse{status: SERVING (1)} is field 1, varint 1.
  if (bytes != std::string("\x08\x01", 2)) return absl::UnavailableError("not SERVING");
  return absl::OkStatus();
}

std::optional<double> PeakRssMb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    double kb = 0;
    if (fields >> kb) return kb / 1024.0;
  }
  return std::nullopt;
}

std::optional<ProcessCost> CostOf(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // Fields after the command name (which may hold spaces): state is field 3,
  // utime and stime fields 14 and 15, in clock ticks.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::strtod(field.c_str(), nullptr);
    if (i == 15) stime = std::strtod(field.c_str(), nullptr);
  }
  ProcessCost cost;
  cost.cpu_seconds = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream status(task.path() / "status");
    for (std::string l; std::getline(status, l);) {
      if (l.rfind("voluntary_ctxt_switches:", 0) == 0 || l.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
        cost.context_switches += std::strtoull(l.substr(l.find(':') + 1).c_str(), nullptr, 10);
      }
    }
  }
  return cost;
}

ProcessCost OwnCost() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  ProcessCost cost;
  cost.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  cost.context_switches = static_cast<uint64_t>(usage.ru_nvcsw + usage.ru_nivcsw);
  return cost;
}

std::string BuildTreeBinary(const std::string& relative) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return relative;
  // <build>/adapters/simulator/podium-sim -> <build>.
  return (self.parent_path().parent_path().parent_path() / relative).string();
}

Spawner::~Spawner() { Stop(); }

absl::Status Spawner::Launch(Child& child, const std::vector<std::string>& argv) {
  child.log = absl::StrCat(dir_, "/", child.name, ".log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, child.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  // Own process group: a terminal's Ctrl-C reaches podium-sim only, which then
  // records peak RSS and stops the children in order.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int rc = posix_spawn(&child.pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    child.pid = -1;
    return absl::FailedPreconditionError(absl::StrCat("cannot start ", child.name, " (", argv[0], "): ", strerror(rc)));
  }
  return absl::OkStatus();
}

absl::Status Spawner::WaitHealthy(Child& child, const std::string& target, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  std::string last = "no answer";
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
      child.pid = -1;
      return absl::FailedPreconditionError(absl::StrCat(child.name, " ", DescribeExit(status),
                                                        " before becoming healthy; its output ends with:\n",
                                                        Tail(child.log, 20)));
    }
    absl::Status s = CheckHealth(target, absl::Milliseconds(500));
    if (s.ok()) return s;
    last = std::string(s.message());
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(child.name, " did not become healthy on ", target, " within ",
                                                  absl::FormatDuration(timeout), " (", last,
                                                  "); its output ends with:\n", Tail(child.log, 20)));
}

// A random token in a static token file (for --token-auth-file) and the token
// alone in admin.token (for podiumctl --token-file), both 0600 in dir_.
absl::StatusOr<std::string> Spawner::WriteAdminToken() {
  std::random_device random;
  std::string token;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&token, absl::Hex(random(), absl::kZeroPad8));
  const std::string tokens_path = absl::StrCat(dir_, "/tokens.csv");
  const std::string token_path = absl::StrCat(dir_, "/admin.token");
  for (const auto& [path, content] :
       {std::pair{tokens_path, absl::StrCat(token, ",podium-sim-operator,podium-sim-operator,\"podium:admins\"\n")},
        std::pair{token_path, absl::StrCat(token, "\n")}}) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return absl::InternalError(absl::StrCat(path, ": ", strerror(errno)));
    const bool written = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
    close(fd);
    if (!written) return absl::InternalError(absl::StrCat(path, ": short write"));
  }
  admin_token_file_ = token_path;
  return tokens_path;
}

absl::StatusOr<std::string> Spawner::Start(const SpawnOptions& options) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "podium-sim-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError(absl::StrCat("mkdtemp: ", strerror(errno)));
  dir_ = tmpl;
  const std::string host_addr = absl::StrCat("unix://", dir_, "/host.sock");
  const std::string sched_addr = absl::StrCat("unix://", dir_, "/scheduler.sock");

  absl::Status s = Launch(host_, {options.plugin_host_bin, "--listen", host_addr});
  if (s.ok()) s = WaitHealthy(host_, host_addr, options.ready_timeout);
  std::vector<std::string> argv = {options.scheduler_bin};
  if (!options.config.empty()) argv.insert(argv.end(), {"--config", options.config});
  if (s.ok() && options.admin_token) {
    absl::StatusOr<std::string> tokens = WriteAdminToken();
    if (tokens.ok()) {
      argv.insert(argv.end(), {"--token-auth-file", *tokens});
    } else {
      s = tokens.status();
    }
  }
  if (s.ok()) {
    argv.insert(argv.end(), {"--listen", sched_addr, "--plugin-endpoint", absl::StrCat(options.plugin_host_endpoint, "=", host_addr)});
    for (const auto& e : options.plugin_endpoints) argv.insert(argv.end(), {"--plugin-endpoint", e});
    s = Launch(scheduler_, argv);
  }
  if (s.ok()) s = WaitHealthy(scheduler_, sched_addr, options.ready_timeout);
  if (!s.ok()) {
    Stop();
    return s;
  }
  return sched_addr;
}

void Spawner::StopChild(Child& child) {
  if (child.pid <= 0) return;
  child.peak_rss_mb = PeakRssMb(child.pid);
  child.cost = CostOf(child.pid);
  kill(child.pid, SIGTERM);
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  int status;
  while (waitpid(child.pid, &status, WNOHANG) == 0) {
    if (absl::Now() >= deadline) {
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  child.pid = -1;
}

void Spawner::Stop() {
  // The scheduler first: it holds streams to the plugin host.
  StopChild(scheduler_);
  StopChild(host_);
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

}  // namespace podium::sim
