#include "parallelizer.h"

#include <sched.h>

#include <algorithm>
#include <cmath>

namespace podium::sdk::internal {

constexpr int kMaxParallelism = 16;
constexpr int kMinCoresForAuto = 4;

Parallelizer::Parallelizer(int parallelism) {
  if (parallelism <= 0) {
    // The cores this process may run on (taskset, cgroup cpusets), not the machine's.
    cpu_set_t cpus;
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) cores = CPU_COUNT(&cpus);
    // On fewer than 4 cores the pool's wake-ups cost more than it saves: the
    // scheduler and the other processes want those cores too (measured on 2:
    // 6 more futex calls per pod in the plugin host, no throughput gained).
    parallelism = cores < kMinCoresForAuto ? 1 : std::clamp(cores, 1, kMaxParallelism);
  }
  for (int i = 1; i < parallelism; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

Parallelizer::~Parallelizer() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

int Parallelizer::ChunkSize(int num_items) const {
  const int by_threads = num_items / parallelism() + 1;
  const int root = static_cast<int>(std::sqrt(static_cast<double>(num_items)));
  return std::max(1, std::min(root, by_threads));
}

void Parallelizer::Work(Job& job) {
  while (!job.stopped.load(std::memory_order_relaxed)) {
    const int chunk = job.next.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.num_chunks) return;
    if (!job.fn(chunk)) job.stopped.store(true, std::memory_order_relaxed);
  }
}

void Parallelizer::ParallelFor(int num_chunks, absl::FunctionRef<bool(int chunk)> fn) {
  if (num_chunks <= 0) return;
  Job job(num_chunks, fn);
  if (workers_.empty() || num_chunks == 1) {
    Work(job);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    jobs_.push_back(&job);
  }
  Work(job);
  absl::MutexLock lock(&mu_);
  // No pool thread picks the job up once it is out of the queue; wait for the
  // ones inside it.
  if (auto it = std::find(jobs_.begin(), jobs_.end(), &job); it != jobs_.end()) jobs_.erase(it);
  mu_.Await(absl::Condition(
      +[](Job* j) { return j->helpers == 0; }, &job));
}

void Parallelizer::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](Parallelizer* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return p->shutdown_ || !p->jobs_.empty();
        },
        this));
    if (shutdown_) return;
    Job* job = jobs_.front();
    ++job->helpers;
    mu_.Unlock();
    Work(*job);
    mu_.Lock();
    --job->helpers;
    // Every chunk is claimed: no one else needs to find it in the queue.
    if (!jobs_.empty() && jobs_.front() == job) jobs_.pop_front();
  }
}

}  // namespace podium::sdk::internal
