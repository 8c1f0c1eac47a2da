// podiumctl: a kubectl-shaped command line over podium-scheduler's Admin API.
// `podiumctl --help` lists the commands, flags and exit codes.
#include <signal.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "admin_client.h"
#include "cli.h"
#include "commands.h"
#include "format.h"

namespace podium::ctl {
namespace {

int ExitCodeFor(const absl::Status& s) {
  if (s.ok()) return kExitOk;
  if (absl::IsInvalidArgument(s)) return kExitUsage;
  if (absl::IsNotFound(s)) return kExitNotFound;
  if (absl::IsUnauthenticated(s) || absl::IsPermissionDenied(s)) return kExitRefused;
  return kExitUnavailable;
}

// SIGINT/SIGTERM go to one thread (blocked in all others): it runs what the
// command registered (watch cancels its stream), or ends the process.
class InterruptHandler {
 public:
  InterruptHandler() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    std::thread([this] {
      int sig = 0;
      sigwait(&signals_, &sig);
      absl::MutexLock lock(&mu_);
      if (action_) action_();
      else std::_Exit(128 + sig);
    }).detach();
  }

  void Set(std::function<void()> action) {
    absl::MutexLock lock(&mu_);
    action_ = std::move(action);
  }

 private:
  sigset_t signals_;
  absl::Mutex mu_;
  std::function<void()> action_ ABSL_GUARDED_BY(mu_);
};

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto inv = ParseCommandLine(args, env(kAddressEnv), env(kTokenFileEnv));
  if (!inv.ok()) {
    std::cerr << "podiumctl: " << Printable(inv.status().message()) << "\nSee 'podiumctl --help'.\n";
    return kExitUsage;
  }
  if (inv->command == Command::kHelp) {
    std::cout << Usage(inv->help_topic);
    return kExitOk;
  }
  if (inv->command == Command::kCompletion) {
    std::cout << BashCompletion();
    return kExitOk;
  }
  // Never deleted: its thread may wake on a signal until the process exits.
  // Held by a static so that it stays reachable (LeakSanitizer reports it
  // otherwise).
  static InterruptHandler* const interrupts = new InterruptHandler();
  auto options = AdminClient::OptionsFrom(*inv);
  if (!options.ok()) {
    std::cerr << "podiumctl: " << Printable(options.status().message()) << "\n";
    return kExitUsage;
  }
  AdminClient client(std::move(*options));
  CommandContext ctx{*inv, client, std::cout, std::cerr, absl::Now(),
                     [](std::function<void()> action) { interrupts->Set(std::move(action)); }};
  absl::Status s = RunCommand(ctx);
  if (!s.ok()) std::cerr << "podiumctl: " << Printable(s.message()) << "\n";
  return ExitCodeFor(s);
}

}  // namespace
}  // namespace podium::ctl

int main(int argc, char** argv) { return podium::ctl::Main(argc, argv); }
