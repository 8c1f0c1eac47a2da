// Which shape of Plugin.Run server answers a request fastest, without any
// plugin work: one request in flight, as the scheduler sends a pod's cycle and
// waits. Every variant echoes the request id; only the threading differs.
//   WorkerHandoff: callback reactor -> per-stream worker thread -> StartWrite
//                  (the SDK's shape before it processed messages inline).
//   Inline:        callback reactor answers in OnReadDone, next read started
//                  before the answer is built.
//   Sync:          sync API, one thread per stream doing Read(); Write().
//   Async:         async API, one completion queue driven by one thread of
//                  its own: no callback threads handing the poller role back
//                  and forth (async+health: the same with gRPC's default
//                  health service, whose callback methods start them again).
//   Sdk:           the SDK's PluginServer (requests without a kind: answered
//                  with an error by the Session, no plugin runs).
// To count the server's syscalls per request: run
//   strace -f -c podium_sdk_transport_bench --serve=sync --address=unix:/tmp/t.sock
// and in another shell the client against it with a fixed number of requests:
//   podium_sdk_transport_bench --connect=unix:/tmp/t.sock --benchmark_filter='sync/iterations'
// and divide by the 10000 requests.
// BM_ClientShape compares the client's side against the SDK's server: the
// callback API against one thread of our own on an async completion queue
// (an AsyncDriver, as GrpcPluginProcess), each with and without a callback
// service in the client's process (the scheduler serves Admin so, and served
// Cluster.Sync so), and the async client sharing its driver with an async
// service (the scheduler once nothing in it uses the callback API). Its
// counters are the client process's context switches and CPU per round trip.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "grpc_support/async_driver.h"
#include "grpcpp/grpcpp.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"
#include "podium/v1/plugin.grpc.pb.h"

namespace podium::sdk {
namespace {

using Reactor = grpc::ServerBidiReactor<v1::SchedulerToPlugin, v1::PluginToScheduler>;

void Answer(const v1::SchedulerToPlugin& request, v1::PluginToScheduler& answer) {
  answer.set_id(request.id());
  answer.mutable_cycle()->set_nodes_evaluated(1);
}

class WorkerHandoffService final : public v1::Plugin::CallbackService {
  class Stream final : public Reactor {
   public:
    Stream() : worker_([this] { Work(); }) { StartRead(&reading_); }
    void OnReadDone(bool ok) override {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      inbox_.push_back(reading_);
      work_.Signal();
      StartRead(&reading_);
    }
    void OnWriteDone(bool ok) override {
      absl::MutexLock lock(&mu_);
      writes_.pop_front();
      if (!writes_.empty()) StartWrite(&writes_.front());
    }
    void OnDone() override {
      {
        absl::MutexLock lock(&mu_);
        stop_ = true;
        work_.Signal();
      }
      worker_.join();
      delete this;
    }

   private:
    void Work() {
      absl::MutexLock lock(&mu_);
      while (true) {
        while (!stop_ && inbox_.empty()) work_.Wait(&mu_);
        if (stop_) return;
        v1::SchedulerToPlugin request = std::move(inbox_.front());
        inbox_.pop_front();
        mu_.Unlock();
        v1::PluginToScheduler answer;
        Answer(request, answer);
        mu_.Lock();
        writes_.push_back(std::move(answer));
        if (writes_.size() == 1) StartWrite(&writes_.front());
      }
    }
    absl::Mutex mu_;
    absl::CondVar work_;
    bool stop_ = false;
    v1::SchedulerToPlugin reading_;
    std::deque<v1::SchedulerToPlugin> inbox_;
    std::deque<v1::PluginToScheduler> writes_;  // Front is in flight.
    std::thread worker_;
  };

 public:
  Reactor* Run(grpc::CallbackServerContext*) override { return new Stream(); }
};

class InlineService final : public v1::Plugin::CallbackService {
  class Stream final : public Reactor {
   public:
    Stream() { StartRead(&requests_[0]); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      v1::SchedulerToPlugin& request = requests_[current_];
      current_ ^= 1;
      StartRead(&requests_[current_]);  // Read the next one while answering.
      v1::PluginToScheduler answer;
      Answer(request, answer);
      // The answer can reach the client before OnWriteDone of the previous
      // one has run: still one write in flight, behind a queue.
      absl::MutexLock lock(&mu_);
      writes_.push_back(std::move(answer));
      if (writes_.size() == 1) StartWrite(&writes_.front());
    }
    void OnWriteDone(bool) override {
      absl::MutexLock lock(&mu_);
      writes_.pop_front();
      if (!writes_.empty()) StartWrite(&writes_.front());
    }
    void OnDone() override { delete this; }

   private:
    v1::SchedulerToPlugin requests_[2];
    int current_ = 0;
    absl::Mutex mu_;
    std::deque<v1::PluginToScheduler> writes_;  // Front is in flight.
  };

 public:
  Reactor* Run(grpc::CallbackServerContext*) override { return new Stream(); }
};

class SyncService final : public v1::Plugin::Service {
 public:
  grpc::Status Run(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::PluginToScheduler, v1::SchedulerToPlugin>* stream) override {
    v1::SchedulerToPlugin request;
    v1::PluginToScheduler answer;
    while (stream->Read(&request)) {
      answer.Clear();
      Answer(request, answer);
      if (!stream->Write(answer)) break;
    }
    return grpc::Status::OK;
  }
};

class AsyncServer {
 public:
  explicit AsyncServer(bool health) : health_(health) {}
  int Serve(const std::string& address) {
    grpc::EnableDefaultHealthCheckService(health_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    cq_ = builder.AddCompletionQueue();
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (server == nullptr) return 1;
    Accept();
    void* tag;
    bool ok;
    while (cq_->Next(&tag, &ok)) {
      auto* stream = static_cast<Stream*>(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(tag) & ~uintptr_t{3}));
      switch (reinterpret_cast<uintptr_t>(tag) & 3) {
        case 0:  // Accepted.
          Accept();
          if (!ok) { delete stream; break; }
          stream->rw.Read(&stream->requests[0], Tag(stream, 1));
          break;
        case 1: {  // Read.
          if (!ok) {
            stream->closing = true;
            if (stream->writes.empty()) stream->rw.Finish(grpc::Status::OK, Tag(stream, 3));
            break;
          }
          v1::SchedulerToPlugin& request = stream->requests[stream->current];
          stream->current ^= 1;
          stream->rw.Read(&stream->requests[stream->current], Tag(stream, 1));
          v1::PluginToScheduler answer;
          Answer(request, answer);
          stream->writes.push_back(std::move(answer));
          if (stream->writes.size() == 1) stream->rw.Write(stream->writes.front(), Tag(stream, 2));
          break;
        }
        case 2:  // Written.
          stream->writes.pop_front();
          if (!stream->writes.empty()) {
            stream->rw.Write(stream->writes.front(), Tag(stream, 2));
          } else if (stream->closing) {
            stream->rw.Finish(grpc::Status::OK, Tag(stream, 3));
          }
          break;
        case 3:  // Finished.
          delete stream;
          break;
      }
    }
    return 0;
  }

 private:
  struct Stream {
    grpc::ServerContext context;
    grpc::ServerAsyncReaderWriter<v1::PluginToScheduler, v1::SchedulerToPlugin> rw{&context};
    v1::SchedulerToPlugin requests[2];
    int current = 0;
    bool closing = false;
    std::deque<v1::PluginToScheduler> writes;  // Front is in flight.
  };
  static void* Tag(Stream* stream, uintptr_t op) {
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(stream) | op);
  }
  void Accept() {
    auto* stream = new Stream;
    service_.RequestRun(&stream->context, &stream->rw, cq_.get(), cq_.get(), Tag(stream, 0));
  }
  const bool health_;
  v1::Plugin::AsyncService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
};

// The server runs in a child process, as the plugin host does, so that client
// and server do not share gRPC's threads.
//   podium_sdk_transport_bench --serve=<variant> --address=unix:/tmp/x.sock
// serves one variant until killed (for strace -f -c on the server alone).
template <typename Service>
int ServeVariant(const std::string& address) {
  Service service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  server->Wait();
  return 0;
}

class NoopFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "Noop"; }
  Status Filter(CycleState&, const PodInfo&, const NodeInfo&) override { return Status::Success(); }
};

int ServeSdk(const std::string& address) {
  PluginServer server(ServeOptions{
      .address = address,
      .process_name = "transport-bench",
      .plugins = {{"Noop", [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
                     return std::make_unique<NoopFilter>();
                   }}}});
  if (!server.Start().ok()) return 1;
  server.Wait();
  return 0;
}

std::string self_path;     // argv[0].
std::string external;      // --connect=ADDRESS: an already running server.

void BM_EchoRoundtrip(benchmark::State& state, const char* variant) {
  std::string address = external;
  pid_t child = -1;
  if (address.empty()) {
    address = absl::StrCat("unix:/tmp/podium_transport_bench.", getpid(), ".sock");
    child = fork();
    if (child == 0) {
      execl(self_path.c_str(), self_path.c_str(), absl::StrCat("--serve=", variant).c_str(),
            absl::StrCat("--address=", address).c_str(), nullptr);
      _exit(127);
    }
  }
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    std::abort();
  }
  auto stub = v1::Plugin::NewStub(channel);
  {
    grpc::ClientContext context;
    auto stream = stub->Run(&context);
    v1::SchedulerToPlugin request;
    v1::PluginToScheduler answer;
    uint64_t id = 0;
    for (auto _ : state) {
      request.set_id(++id);
      if (!stream->Write(request) || !stream->Read(&answer) || answer.id() != id) std::abort();
    }
    stream->WritesDone();
    stream->Finish();
  }
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    unlink(address.substr(std::string_view("unix:").size()).c_str());
  }
}
// The client's side, as the scheduler's plugin client would be shaped: the
// benchmark thread writes a request and waits for its answer, which a gRPC
// thread reads (callback API) or a thread of our own driving one completion
// queue reads (async API). With `callback_server`, the client process also
// serves a callback service, as the scheduler serves Cluster.Sync: its
// callback threads then poll the same epoll set as the client's.
// client_cs_per_req and client_cpu_us_per_req are the client process's
// context switches and CPU per round trip (every thread).
class RoundTripper {
 public:
  virtual ~RoundTripper() = default;
  virtual uint64_t RoundTrip(uint64_t id) = 0;
};

class CallbackClient final : public RoundTripper,
                             public grpc::ClientBidiReactor<v1::SchedulerToPlugin, v1::PluginToScheduler> {
 public:
  explicit CallbackClient(v1::Plugin::Stub& stub) {
    stub.async()->Run(&context_, this);
    StartRead(&answer_);
    StartCall();
  }
  ~CallbackClient() override {
    context_.TryCancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }
  uint64_t RoundTrip(uint64_t id) override {
    request_.set_id(id);
    absl::MutexLock lock(&mu_);
    answered_ = false;
    write_done_ = false;
    StartWrite(&request_);
    mu_.Await(absl::Condition(+[](CallbackClient* c) { return c->answered_ && c->write_done_; }, this));
    return answer_id_;
  }
  void OnWriteDone(bool) override {
    absl::MutexLock lock(&mu_);
    write_done_ = true;
  }
  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (!ok) return;
    answer_id_ = answer_.id();
    answered_ = true;
    StartRead(&answer_);
  }
  void OnDone(const grpc::Status&) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

 private:
  grpc::ClientContext context_;
  v1::SchedulerToPlugin request_;
  v1::PluginToScheduler answer_;
  absl::Mutex mu_;
  bool answered_ = false, write_done_ = false, done_ = false;
  uint64_t answer_id_ = 0;
};

// The async client as GrpcPluginProcess is shaped: its completions run on an
// AsyncDriver, either one of its own or one it shares with the process's
// server (podium-scheduler's shape once Cluster.Sync, health and Admin are on
// the driver too).
class AsyncClient final : public RoundTripper {
 public:
  // `spin`: how long the waiting thread polls for the answer before it
  // sleeps (0: it sleeps at once, as a future's get() does).
  AsyncClient(v1::Plugin::Stub& stub, grpc_support::AsyncDriver* shared,
              absl::Duration spin = absl::ZeroDuration())
      : spin_(spin) {
    if (shared == nullptr) own_driver_ = std::make_unique<grpc_support::AsyncDriver>();
    grpc_support::AsyncDriver* driver = shared != nullptr ? shared : own_driver_.get();
    stream_ = stub.PrepareAsyncRun(&context_, driver->queue());
    stream_->StartCall(&started_tag_);
    driver->Start();
  }
  ~AsyncClient() override {
    context_.TryCancel();
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&finished_));
    }
    if (own_driver_ != nullptr) own_driver_->Stop();
  }
  uint64_t RoundTrip(uint64_t id) override {
    request_.set_id(id);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&started_));
    answered_ = false;
    write_done_ = false;
    answered_flag_.store(false, std::memory_order_relaxed);
    stream_->Write(request_, &write_tag_);
    if (spin_ > absl::ZeroDuration()) {
      // Not waiting on mu_ while the driver reads the answer: it finds no
      // waiter to wake.
      mu_.Unlock();
      const absl::Time until = absl::Now() + spin_;
      while (!answered_flag_.load(std::memory_order_acquire) && absl::Now() < until) {
      }
      mu_.Lock();
    }
    mu_.Await(absl::Condition(+[](AsyncClient* c) { return c->answered_ && c->write_done_; }, this));
    return answer_id_;
  }

 private:
  void OnStarted(bool) {
    absl::MutexLock lock(&mu_);
    started_ = true;
    stream_->Read(&answer_, &read_tag_);
  }
  void OnRead(bool ok) {
    absl::MutexLock lock(&mu_);
    if (!ok) {
      stream_->Finish(&status_, &finish_tag_);
      return;
    }
    answer_id_ = answer_.id();
    answered_ = true;
    answered_flag_.store(true, std::memory_order_release);
    stream_->Read(&answer_, &read_tag_);
  }
  void OnWritten(bool) {
    absl::MutexLock lock(&mu_);
    write_done_ = true;
  }
  void OnFinished(bool) {
    absl::MutexLock lock(&mu_);
    finished_ = true;
  }

  using Tag = grpc_support::CompletionOf<AsyncClient>;
  std::unique_ptr<grpc_support::AsyncDriver> own_driver_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::SchedulerToPlugin, v1::PluginToScheduler>> stream_;
  Tag started_tag_{this, &AsyncClient::OnStarted};
  Tag read_tag_{this, &AsyncClient::OnRead};
  Tag write_tag_{this, &AsyncClient::OnWritten};
  Tag finish_tag_{this, &AsyncClient::OnFinished};
  v1::SchedulerToPlugin request_;
  v1::PluginToScheduler answer_;
  grpc::Status status_;
  absl::Mutex mu_;
  bool started_ = false, answered_ = false, write_done_ = false, finished_ = false;
  uint64_t answer_id_ = 0;
  const absl::Duration spin_;
  std::atomic<bool> answered_flag_{false};
};

struct ProcessCost {
  double cs, cpu_us;
  static ProcessCost Now() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return {static_cast<double>(r.ru_nvcsw + r.ru_nivcsw),
            (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec};
  }
};

// What else the client's process serves: nothing; a callback service (the
// callback API's polling threads then poll the same epoll set as the
// client's); an async service on the client's own driver queue (one thread
// polls for both).
enum class ClientProcessServer { kNone, kCallback, kAsyncSharedDriver };

void BM_ClientShape(benchmark::State& state, bool async, ClientProcessServer server,
                    absl::Duration spin) {
  std::string address = absl::StrCat("unix:/tmp/podium_transport_bench.", getpid(), ".client.sock");
  pid_t child = fork();
  if (child == 0) {
    execl(self_path.c_str(), self_path.c_str(), "--serve=sdk", absl::StrCat("--address=", address).c_str(),
          nullptr);
    _exit(127);
  }
  std::unique_ptr<InlineService> own_service;
  std::unique_ptr<v1::Plugin::AsyncService> own_async_service;
  std::unique_ptr<grpc_support::AsyncDriver> shared_driver;
  std::unique_ptr<grpc::Server> own_server;
  if (server != ClientProcessServer::kNone) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat(address, ".own"), grpc::InsecureServerCredentials());
    if (server == ClientProcessServer::kCallback) {
      own_service = std::make_unique<InlineService>();
      builder.RegisterService(own_service.get());
    } else {
      own_async_service = std::make_unique<v1::Plugin::AsyncService>();
      builder.RegisterService(own_async_service.get());
      shared_driver = std::make_unique<grpc_support::AsyncDriver>(builder.AddCompletionQueue());
    }
    own_server = builder.BuildAndStart();
    if (shared_driver != nullptr) shared_driver->Start();
  }
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) std::abort();
  auto stub = v1::Plugin::NewStub(channel);
  {
    std::unique_ptr<RoundTripper> client;
    if (async) {
      client = std::make_unique<AsyncClient>(*stub, shared_driver.get(), spin);
    } else {
      client = std::make_unique<CallbackClient>(*stub);
    }
    uint64_t id = 0;
    client->RoundTrip(++id);  // Connected and started.
    const ProcessCost before = ProcessCost::Now();
    for (auto _ : state) {
      ++id;
      if (client->RoundTrip(id) != id) std::abort();
    }
    const ProcessCost after = ProcessCost::Now();
    const double n = static_cast<double>(state.iterations());
    state.counters["client_cs_per_req"] = (after.cs - before.cs) / n;
    state.counters["client_cpu_us_per_req"] = (after.cpu_us - before.cpu_us) / n;
  }
  if (own_server) own_server->Shutdown(std::chrono::system_clock::now());
  if (shared_driver) shared_driver->Stop();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  unlink(address.substr(std::string_view("unix:").size()).c_str());
  unlink(absl::StrCat(address.substr(std::string_view("unix:").size()), ".own").c_str());
}

void Register(const char* variant) {
  // The fixed-iteration run makes syscall counts per request easy to read.
  for (int iterations : {0, 10000}) {
    auto* b = benchmark::RegisterBenchmark(absl::StrCat("BM_EchoRoundtrip/", variant).c_str(),
                                           BM_EchoRoundtrip, variant);
    b->UseRealTime();
    if (iterations > 0) b->Iterations(iterations);
  }
}

}  // namespace
}  // namespace podium::sdk

int main(int argc, char** argv) {
  podium::sdk::self_path = argv[0];
  std::string serve, address;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--serve=")) serve = std::string(arg);
    if (absl::ConsumePrefix(&arg, "--address=")) address = std::string(arg);
    if (absl::ConsumePrefix(&arg, "--connect=")) podium::sdk::external = std::string(arg);
  }
  if (serve == "handoff") return podium::sdk::ServeVariant<podium::sdk::WorkerHandoffService>(address);
  if (serve == "inline") return podium::sdk::ServeVariant<podium::sdk::InlineService>(address);
  if (serve == "sdk") return podium::sdk::ServeSdk(address);
  if (serve == "async") return podium::sdk::AsyncServer(false).Serve(address);
  if (serve == "async+health") return podium::sdk::AsyncServer(true).Serve(address);
  if (serve == "sync") return podium::sdk::ServeVariant<podium::sdk::SyncService>(address);
  for (const char* variant : {"handoff", "inline", "sync", "async", "async+health", "sdk"}) podium::sdk::Register(variant);
  using podium::sdk::ClientProcessServer;
  for (bool async : {false, true}) {
    for (ClientProcessServer server : {ClientProcessServer::kNone, ClientProcessServer::kCallback,
                                       ClientProcessServer::kAsyncSharedDriver}) {
      // The callback client cannot share a driver.
      if (!async && server == ClientProcessServer::kAsyncSharedDriver) continue;
      const char* suffix = server == ClientProcessServer::kNone       ? ""
                           : server == ClientProcessServer::kCallback ? "+callback_server"
                                                                      : "+async_server_same_driver";
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_ClientShape/", async ? "async" : "callback", suffix).c_str(),
          podium::sdk::BM_ClientShape, async, server, absl::ZeroDuration())
          ->UseRealTime()
          ->Iterations(10000);
    }
  }
  // Whether the waiting thread could skip its wake-up by polling for the
  // answer a while before it sleeps (the end-state shape).
  for (int spin_us : {100, 300}) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_ClientShape/async+async_server_same_driver+spin", spin_us, "us").c_str(),
        podium::sdk::BM_ClientShape, true, ClientProcessServer::kAsyncSharedDriver,
        absl::Microseconds(spin_us))
        ->UseRealTime()
        ->Iterations(10000);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
