// podium-sim: an in-memory Kubernetes cluster speaking Cluster.Sync to
// podium-scheduler. `podium-sim --help` lists the flags.
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "sim/sim_run.h"
#include "absl/synchronization/mutex.h"

int main(int argc, char** argv) {
  // Debian's Abseil is built with mutex deadlock detection on: a lock-order
  // graph update on every lock, which the profile shows on the hot path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << podium::sim::kSimUsage << podium::adapter::kSchedulerDialUsage;
      return 0;
    }
  }
  auto options = podium::sim::ParseSimArgs(argc, argv);
  if (!options.ok()) {
    std::cerr << "podium-sim: " << options.status().message() << "\n\n" << podium::sim::kSimUsage << podium::adapter::kSchedulerDialUsage;
    return podium::sim::kExitUsage;
  }

  // SIGINT/SIGTERM are taken by a thread with sigwait (blocked everywhere else,
  // so every thread created later inherits the mask); the run polls the flag.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::atomic<bool> stop{false};
  std::thread([&signals, &stop] {
    int sig;
    sigwait(&signals, &sig);
    stop.store(true);
  }).detach();

  return podium::sim::RunSim(*options, stop);
}
