// A small fixed pool of threads that evaluates one request's nodes in chunks,
// as kube-scheduler's parallelizer does with its 16 goroutines: the caller
// works on its own job too, and the pool's threads help. No thread per
// request; several sessions may share one pool (each job waits only for its
// own chunks).
#pragma once

#include <atomic>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace podium::sdk::internal {

class Parallelizer {
 public:
  // `parallelism` threads work on a job, the caller included: parallelism - 1
  // threads are started. 0 means the cores the process may run on, at most 16,
  // and 1 (serial) when that is fewer than 4.
  explicit Parallelizer(int parallelism);
  ~Parallelizer();
  Parallelizer(const Parallelizer&) = delete;
  Parallelizer& operator=(const Parallelizer&) = delete;

  int parallelism() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(chunk) for the chunks [0, num_chunks), claimed in increasing
  // order, on the caller and the pool; returns when every claimed chunk ran.
  // When fn returns false no further chunk is claimed, so the chunks that ran
  // are always a prefix [0, k) of the range: what a serial early stop would
  // have evaluated, or more.
  void ParallelFor(int num_chunks, absl::FunctionRef<bool(int chunk)> fn)
      ABSL_LOCKS_EXCLUDED(mu_);

  // kube-scheduler's chunk size: sqrt(n), or fewer when that leaves threads idle.
  int ChunkSize(int num_items) const;

 private:
  struct Job {
    explicit Job(int n, absl::FunctionRef<bool(int)> f) : num_chunks(n), fn(f) {}
    const int num_chunks;
    absl::FunctionRef<bool(int)> fn;
    std::atomic<int> next{0};
    std::atomic<bool> stopped{false};
    int helpers = 0;  // Pool threads inside Work(); guarded by the pool's mu_.
  };
  static void Work(Job& job);
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<Job*> jobs_ ABSL_GUARDED_BY(mu_);  // Jobs with chunks left to claim.
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace podium::sdk::internal
