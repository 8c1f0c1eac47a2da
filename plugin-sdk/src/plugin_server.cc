// The Plugin.Run transport: a callback-API reactor per stream that handles a
// message on the gRPC thread that read it when nothing else is pending, a
// worker thread per stream for the backlog and for messages that may block,
// and a bounded write queue with one write in flight.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpc_support/reaction_order.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "podium/sdk/serve.h"
#include "podium/v1/plugin.grpc.pb.h"
#include "session.h"

namespace podium::sdk {
namespace internal {
namespace {

using Reactor = grpc::ServerBidiReactor<v1::SchedulerToPlugin, v1::PluginToScheduler>;

// Messages received but not yet handled (the backlog of the worker).
constexpr size_t kMaxInbox = 4096;
// Answers (and plugin-initiated messages) waiting for the one write in flight.
constexpr size_t kMaxWriteQueue = 4096;
constexpr int kMaxMessageBytes = 512 * 1024 * 1024;
// Written answers kept for reuse (their arenas keep their first block).
constexpr size_t kMaxFreeResponses = 4;
// Handled requests kept for reuse as read buffers; big ones are freed instead,
// so that one large delta does not pin its memory for the life of the stream.
constexpr size_t kMaxFreeRequests = 4;
constexpr int kMaxPooledRequestObjects = 64;

using RequestPtr = std::unique_ptr<v1::SchedulerToPlugin>;

// Whether a message may be handled on the gRPC thread that read it. Plugins in
// the scheduling cycle are CPU-bound and short, and the scheduler waits for the
// answer, so a hop to another thread would only add wake-up latency. Open
// (plugin factories), a reset delta (the whole mirror) and the binding cycle
// (which may call the API server) can take long, so they go to the worker and
// never hold up a gRPC thread.
bool HandleInline(const v1::SchedulerToPlugin& message) {
  switch (message.kind_case()) {
    case v1::SchedulerToPlugin::kOpen:
    case v1::SchedulerToPlugin::kPreBind:
    case v1::SchedulerToPlugin::kBind:
    case v1::SchedulerToPlugin::kPostBind:
      return false;
    default:
      return !message.delta().reset();
  }
}

// Elements a request still holds after it was handled (moved-from ones too).
int PooledObjects(const v1::SchedulerToPlugin& message) {
  if (!message.has_delta()) return 0;
  const v1::StateDelta& delta = message.delta();
  return delta.node_upserts_size() + delta.pod_upserts_size() + delta.pdb_upserts_size() +
         delta.pod_group_upserts_size() + delta.pod_removals_size() + delta.pdb_removals_size() +
         delta.pod_group_removals_size() + delta.namespace_upserts_size() +
         delta.namespace_removals_size();
}

// The state of one stream, shared by the reactor (gRPC threads), the worker
// thread and plugin threads that speak first. Every reactor operation is
// started under mu_ after checking that Finish has not been called and OnDone
// has not run, so none can race with the end of the stream.
//
// Messages are handled by whoever holds the `busy_` baton: the gRPC thread
// that read the message when nothing is pending (the common case: no thread
// hop), otherwise the worker, which drains the backlog in order. Only one
// holder at a time, and a message is handled inline only when the backlog is
// empty, so messages are handled one at a time and in stream order.
class StreamState final : public ResponseSink {
 public:
  explicit StreamState(Reactor* reactor) : reactor_(reactor) {}

  // Before the first read; the session outlives every use (see RunWorker).
  void SetSession(Session* session) { session_ = session; }

  // Once the reactor and the session are set up, before gRPC can react.
  void Constructed() { order_.Constructed(); }

  void StartReading() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    StartReadLocked();
  }

  void OnReadDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    const auto reaction = order_.EnterReadDone();
    RequestPtr message;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {  // The scheduler closed its side, or the stream broke.
        input_closed_ = true;
        MaybeFinishLocked();
        return;
      }
      if (finished_ || reactor_ == nullptr) return;
      if (!busy_ && inbox_.empty() && HandleInline(*reading_)) {
        busy_ = true;
        message = std::move(reading_);
      } else {
        if (inbox_.size() >= kMaxInbox) {
          FailLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  absl::StrCat("plugin process backlog: ", inbox_.size(),
                                               " messages not yet handled; the plugins are too "
                                               "slow for the request rate")));
          return;
        }
        inbox_.push_back(std::move(reading_));
        if (!busy_) work_.Signal();
      }
      // The next message is read while this one is handled.
      StartReadLocked();
    }
    if (message == nullptr) return;
    session_->Handle(*message);
    Recycle(std::move(message));
    absl::MutexLock lock(&mu_);
    busy_ = false;
    // What arrived meanwhile is the worker's, which also waits for the baton
    // before it stops.
    if (!inbox_.empty() || stop_worker_) work_.Signal();
    MaybeFinishLocked();
  }

  void OnWriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    const auto reaction = order_.EnterWriteDone();
    ResponsePtr written;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      written = std::move(in_flight_);
      if (!ok) {
        FailLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write to the scheduler failed"));
        return;
      }
      StartNextWriteLocked();
      MaybeFinishLocked();
    }
    // Emptied outside the lock, then kept for the next answer.
    written->Reset();
    absl::MutexLock lock(&mu_);
    if (free_responses_.size() < kMaxFreeResponses) free_responses_.push_back(std::move(written));
  }

  ResponsePtr NewResponse() override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (!free_responses_.empty()) {
        ResponsePtr response = std::move(free_responses_.back());
        free_responses_.pop_back();
        return response;
      }
    }
    return std::make_unique<Response>();
  }

  void OnCancel() ABSL_LOCKS_EXCLUDED(mu_) {
    const auto reaction = order_.EnterCancel();
    absl::MutexLock lock(&mu_);
    FailLocked(grpc::Status::CANCELLED);
  }

  void OnDone() ABSL_LOCKS_EXCLUDED(mu_) {
    order_.EnterDone();
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    stop_worker_ = true;
    work_.Signal();
  }

  bool Send(ResponsePtr message) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (finished_ || reactor_ == nullptr) return false;
    if (writes_.size() >= kMaxWriteQueue) {
      FailLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              absl::StrCat("plugin process write queue full (", writes_.size(),
                                           " messages): the scheduler is not reading")));
      return false;
    }
    writes_.push_back(std::move(message));
    StartNextWriteLocked();
    return true;
  }

  // The worker thread's loop: handles the backlog until the stream ends.
  // Returns only once no gRPC thread is handling a message, so the caller may
  // destroy the session.
  void RunWorker() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (true) {
      while (busy_ || (!stop_worker_ && inbox_.empty())) work_.Wait(&mu_);
      if (stop_worker_) return;
      RequestPtr message = std::move(inbox_.front());
      inbox_.pop_front();
      busy_ = true;
      mu_.Unlock();
      session_->Handle(*message);
      Recycle(std::move(message));
      mu_.Lock();
      busy_ = false;
      MaybeFinishLocked();
    }
  }

 private:
  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (free_requests_.empty()) {
      reading_ = std::make_unique<v1::SchedulerToPlugin>();
    } else {
      reading_ = std::move(free_requests_.back());
      free_requests_.pop_back();
    }
    order_.BeforeStart(Op::kRead);
    reactor_->StartRead(reading_.get());
  }

  // Keeps a handled request as a read buffer: its sub-objects are reused by
  // the next parse instead of being allocated again.
  void Recycle(RequestPtr message) ABSL_LOCKS_EXCLUDED(mu_) {
    if (PooledObjects(*message) > kMaxPooledRequestObjects) return;
    message->Clear();
    absl::MutexLock lock(&mu_);
    if (free_requests_.size() < kMaxFreeRequests) free_requests_.push_back(std::move(message));
  }

  void StartNextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || writes_.empty() || finished_ || reactor_ == nullptr) return;
    in_flight_ = std::move(writes_.front());
    writes_.pop_front();
    writing_ = true;
    order_.BeforeStart(Op::kWrite);
    reactor_->StartWrite(&in_flight_->message());
  }

  // Finishes once the scheduler has closed its side and everything it sent
  // has been answered and written.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || reactor_ == nullptr) return;
    if (!input_closed_ || busy_ || !inbox_.empty() || !writes_.empty() || writing_) return;
    finished_ = true;
    stop_worker_ = true;
    work_.Signal();
    order_.BeforeStart(Op::kFinish);
    reactor_->Finish(grpc::Status::OK);
  }

  void FailLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || reactor_ == nullptr) return;
    finished_ = true;
    stop_worker_ = true;
    inbox_.clear();
    writes_.clear();
    work_.Signal();
    order_.BeforeStart(Op::kFinish);
    reactor_->Finish(status);
  }

  using Op = grpc_support::ReactionOrder::Op;

  // Used only by the holder of the busy_ baton.
  Session* session_ = nullptr;
  grpc_support::ReactionOrder order_;
  absl::Mutex mu_;
  absl::CondVar work_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);  // Null once OnDone ran.
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called.
  bool input_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_worker_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // A thread is handling a message.
  RequestPtr reading_ ABSL_GUARDED_BY(mu_);
  std::deque<RequestPtr> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestPtr> free_requests_ ABSL_GUARDED_BY(mu_);
  std::deque<ResponsePtr> writes_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  ResponsePtr in_flight_ ABSL_GUARDED_BY(mu_);  // Kept alive until OnWriteDone.
  std::vector<ResponsePtr> free_responses_ ABSL_GUARDED_BY(mu_);
};

class RunReactor;

class PluginService final : public v1::Plugin::CallbackService {
 public:
  PluginService(const std::vector<PluginDefinition>& definitions, std::string process_name,
                int parallelism)
      : definitions_(definitions),
        process_name_(std::move(process_name)),
        parallelizer_(parallelism) {}

  ~PluginService() override { JoinWorkers(/*all=*/true); }

  Reactor* Run(grpc::CallbackServerContext* context) override;

  // Starts the stream's worker. It owns the Session and destroys it (and so
  // the plugins) once the stream is over, off the gRPC threads.
  void StartWorker(std::shared_ptr<StreamState> stream) ABSL_LOCKS_EXCLUDED(mu_) {
    JoinWorkers(/*all=*/false);
    auto session = std::make_unique<Session>(definitions_, process_name_, stream, SessionLimits(),
                                             &parallelizer_);
    stream->SetSession(session.get());
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread thread(
        [stream = std::move(stream), session = std::move(session), done]() mutable {
          stream->RunWorker();
          session.reset();
          stream.reset();
          done->store(true, std::memory_order_release);
        });
    absl::MutexLock lock(&mu_);
    workers_.push_back({std::move(thread), std::move(done)});
  }

  // Joins finished workers, or every worker when `all` (after the server's
  // Shutdown has ended every stream).
  void JoinWorkers(bool all) ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::thread> to_join;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = workers_.begin(); it != workers_.end();) {
        if (all || it->done->load(std::memory_order_acquire)) {
          to_join.push_back(std::move(it->thread));
          it = workers_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (std::thread& thread : to_join) thread.join();
  }

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  const std::vector<PluginDefinition>& definitions_;
  const std::string process_name_;
  // Shared by every stream's session; outlives them (the destructor joins
  // the stream workers first).
  Parallelizer parallelizer_;
  absl::Mutex mu_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
};

// Forwards the stream's reactions to its StreamState; deleted only in OnDone.
class RunReactor final : public Reactor {
 public:
  explicit RunReactor(PluginService& service) : stream_(std::make_shared<StreamState>(this)) {
    service.StartWorker(stream_);
    stream_->Constructed();
    stream_->StartReading();
  }

  void OnReadDone(bool ok) override { stream_->OnReadDone(ok); }
  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->OnCancel(); }
  void OnDone() override {
    stream_->OnDone();
    delete this;
  }

 private:
  const std::shared_ptr<StreamState> stream_;
};

Reactor* PluginService::Run(grpc::CallbackServerContext* context) {
  return new RunReactor(*this);
}

// "unix:///abs/path" or "unix:path" -> the path; empty for TCP addresses.
std::string UnixSocketPath(const std::string& address) {
  if (absl::StartsWith(address, "unix://")) return address.substr(7);
  if (absl::StartsWith(address, "unix:")) return address.substr(5);
  return "";
}

// A wrong path or a file that is not PEM, caught at start (the file watcher
// would only log it and serve no certificate).
absl::Status CheckPemFile(const char* field, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("tls.", field, ": empty"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("tls.", field, ": cannot read ", path));
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("tls.", field, ": ", path, " is not PEM (no -----BEGIN line)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(const ServeOptions& options,
                                                                              bool unix_socket) {
  if (!options.tls) return grpc::InsecureServerCredentials();
  const ServeTls& tls = *options.tls;
  if (unix_socket) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tls: ", options.address, " is a unix socket; TLS is served on host:port addresses only"));
  }
  if (tls.reload_interval_seconds < 1) {
    return absl::InvalidArgumentError("tls.reload_interval_seconds: at least 1");
  }
  if (absl::Status s = CheckPemFile("cert_file", tls.cert_file); !s.ok()) return s;
  if (absl::Status s = CheckPemFile("key_file", tls.key_file); !s.ok()) return s;
  if (!tls.client_ca_file.empty()) {
    if (absl::Status s = CheckPemFile("client_ca_file", tls.client_ca_file); !s.ok()) return s;
  }
  const auto interval = static_cast<unsigned int>(tls.reload_interval_seconds);
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (tls.client_ca_file.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.key_file, tls.cert_file,
                                                                                    interval);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls.key_file, tls.cert_file, tls.client_ca_file, interval);
  }
  grpc::experimental::TlsServerCredentialsOptions tls_options(provider);
  tls_options.watch_identity_key_cert_pairs();
  if (tls.client_ca_file.empty()) {
    tls_options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    // Plugins see the scheduler's cluster state: only a client the CA signed.
    tls_options.watch_root_certs();
    tls_options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  auto creds = grpc::experimental::TlsServerCredentials(tls_options);
  if (creds == nullptr) return absl::InternalError("tls: gRPC refused the server credentials");
  return creds;
}

}  // namespace
}  // namespace internal

class PluginServer::Impl {
 public:
  explicit Impl(ServeOptions options) : options_(std::move(options)) {}

  ~Impl() { Shutdown(); }

  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("plugin server already started");
    if (options_.address.empty()) return absl::InvalidArgumentError("address: empty");
    if (options_.plugins.empty()) return absl::InvalidArgumentError("plugins: none to serve");
    for (size_t i = 0; i < options_.plugins.size(); ++i) {
      if (options_.plugins[i].name.empty() || !options_.plugins[i].factory) {
        return absl::InvalidArgumentError(
            absl::StrCat("plugins[", i, "]: a plugin needs a name and a factory"));
      }
    }
    socket_path_ = internal::UnixSocketPath(options_.address);
    if (!socket_path_.empty()) {
      // A socket left behind by a process that died; gRPC cannot bind over it.
      struct stat st;
      if (::lstat(socket_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
        ::unlink(socket_path_.c_str());
      }
    }
    if (options_.parallelism < 0) return absl::InvalidArgumentError("parallelism: negative");
    service_ = std::make_unique<internal::PluginService>(options_.plugins, options_.process_name,
                                                         options_.parallelism);
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
        internal::ServerCredentialsFor(options_, !socket_path_.empty());
    if (!creds.ok()) return creds.status();
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.address, *creds, &port_);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(internal::kMaxMessageBytes);
    builder.SetMaxSendMessageSize(internal::kMaxMessageBytes);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || (socket_path_.empty() && port_ == 0)) {
      server_.reset();
      service_.reset();
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.address));
    }
    if (!socket_path_.empty()) port_ = 0;
    started_ = true;
    return absl::OkStatus();
  }

  int port() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return port_;
  }

  std::string BoundAddress() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (port_ != 0 && absl::EndsWith(options_.address, ":0")) {
      return absl::StrCat(options_.address.substr(0, options_.address.size() - 1), port_);
    }
    return options_.address;
  }

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_) {
    bool already = false;
    {
      absl::MutexLock lock(&mu_);
      if (!started_) return;
      already = shutting_down_;
      shutting_down_ = true;
    }
    if (already) {
      done_.WaitForNotification();
      return;
    }
    // Streams never end on their own: cancel them now. Their reactors finish
    // on cancel, so this returns once every stream's OnDone has run.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    service_->JoinWorkers(/*all=*/true);
    if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
    done_.Notify();
  }

  void Wait() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (!started_) return;
    }
    done_.WaitForNotification();
  }

 private:
  const ServeOptions options_;
  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  std::string socket_path_;
  std::unique_ptr<internal::PluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  absl::Notification done_;
};

PluginServer::PluginServer(ServeOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
PluginServer::~PluginServer() = default;
absl::Status PluginServer::Start() { return impl_->Start(); }
int PluginServer::port() const { return impl_->port(); }
std::string PluginServer::address() const { return impl_->BoundAddress(); }
void PluginServer::Shutdown() { impl_->Shutdown(); }
void PluginServer::Wait() { impl_->Wait(); }

absl::Status Serve(ServeOptions options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  const std::string name = options.process_name.empty() ? "podium plugin process"
                                                        : options.process_name;
  PluginServer server(std::move(options));
  if (absl::Status started = server.Start(); !started.ok()) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return started;
  }
  std::cerr << name << " listening on " << server.address() << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  server.Shutdown();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return absl::OkStatus();
}

}  // namespace podium::sdk
