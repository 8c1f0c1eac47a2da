// The Plugin.Run transport on gRPC's async API: one completion queue, driven
// by one thread of the server's own (the "driver"), which handles a message
// where it read it when nothing else is pending; a worker thread per stream
// for the backlog and for messages that may block; and a bounded write queue
// with one write in flight. gRPC's callback API is not used: its two polling
// threads hand the poller role to each other for every event (a wake-up and
// a context switch per message); the driver polls alone. The health service
// is served on the same queue for the same reason (gRPC's default one uses
// the callback API, whose threads would poll the same sockets).
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
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpc_support/async_driver.h"
#include "grpc_support/health_service.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "podium/sdk/serve.h"
#include "podium/v1/plugin.grpc.pb.h"
#include "session.h"

namespace podium::sdk {
namespace internal {
namespace {

using ServerStream = grpc::ServerAsyncReaderWriter<v1::PluginToScheduler, v1::SchedulerToPlugin>;

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

// Whether a message may be handled on the driver thread that read it. Plugins
// in the scheduling cycle are CPU-bound and short, and the scheduler waits for
// the answer, so a hop to another thread would only add wake-up latency. Open
// (plugin factories), a reset delta (the whole mirror) and the binding cycle
// (which may call the API server) can take long, so they go to the worker and
// never hold up the driver.
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

using grpc_support::Completion;
using grpc_support::CompletionOf;

class PluginService;

// The state of one stream, shared by the driver thread (which completes its
// gRPC operations), the worker thread and plugin threads that speak first.
// Every gRPC operation is started under mu_ after checking that the stream may
// still start one (not finished, not stopped by the server's shutdown, not
// done), so none can race with the end of the stream; the gRPC objects live
// until every started operation has completed ("done").
//
// Messages are handled by whoever holds the `busy_` baton: the driver when
// nothing is pending (the common case: no thread hop), otherwise the worker,
// which drains the backlog in order. Only one holder at a time, and a message
// is handled inline only when the backlog is empty, so messages are handled
// one at a time and in stream order.
class StreamState final : public ResponseSink {
 public:
  explicit StreamState(PluginService* service) : service_(service) {
    // Before the call is requested, as gRPC requires.
    context_.AsyncNotifyWhenDone(&call_done_);
  }

  grpc::ServerContext* context() { return &context_; }
  ServerStream* stream() { return &stream_; }
  Completion* accepted_tag() { return &accepted_; }

  // Before the first read; the session outlives every use (see RunWorker).
  void SetSession(Session* session) { session_ = session; }

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

  bool Send(ResponsePtr message) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (finished_ || stopped_ || done_) return false;
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
  // Returns only once the driver is not handling a message, so the caller may
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

  // The server is shutting down and its queue is about to be: start no more
  // operations. Those in flight complete (failed) while the driver drains.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    stop_worker_ = true;
    work_.Signal();
  }

 private:
  // Completion handlers, on the driver thread.
  void OnAccepted(bool ok);
  void OnCallDone(bool ok);

  void OnReadDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    RequestPtr message;
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      reading_pending_ = false;
      if (!ok) {  // The scheduler closed its side, or the stream broke.
        input_closed_ = true;
        MaybeFinishLocked();
      } else if (finished_ || stopped_) {
        // Nothing more is handled or read.
      } else if (!busy_ && inbox_.empty() && HandleInline(*reading_)) {
        busy_ = true;
        message = std::move(reading_);
        // The next message is read while this one is handled.
        StartReadLocked();
      } else if (inbox_.size() >= kMaxInbox) {
        FailLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                absl::StrCat("plugin process backlog: ", inbox_.size(),
                                             " messages not yet handled; the plugins are too "
                                             "slow for the request rate")));
      } else {
        inbox_.push_back(std::move(reading_));
        if (!busy_) work_.Signal();
        StartReadLocked();
      }
      done = CheckDoneLocked();
    }
    if (done) return Forget();
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
    ResponsePtr written;
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      written = std::move(in_flight_);
      if (!ok) {
        FailLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write to the scheduler failed"));
      } else {
        StartNextWriteLocked();
        MaybeFinishLocked();
      }
      StartFinishLocked();  // A failure waited for this write.
      done = CheckDoneLocked();
    }
    if (done) return Forget();
    // Emptied outside the lock, then kept for the next answer.
    written->Reset();
    absl::MutexLock lock(&mu_);
    if (free_responses_.size() < kMaxFreeResponses) free_responses_.push_back(std::move(written));
  }

  void OnFinishDone(bool /*ok*/) ABSL_LOCKS_EXCLUDED(mu_) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      finish_pending_ = false;
      finish_done_ = true;
      done = CheckDoneLocked();
    }
    if (done) Forget();
  }

  // Removes the stream from the server's list; last thing a handler does.
  void Forget();

  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (free_requests_.empty()) {
      reading_ = std::make_unique<v1::SchedulerToPlugin>();
    } else {
      reading_ = std::move(free_requests_.back());
      free_requests_.pop_back();
    }
    reading_pending_ = true;
    stream_.Read(reading_.get(), &read_done_);
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
    if (writing_ || writes_.empty() || finished_ || stopped_ || done_) return;
    in_flight_ = std::move(writes_.front());
    writes_.pop_front();
    writing_ = true;
    stream_.Write(in_flight_->message(), &write_done_);
  }

  // Finishes once the scheduler has closed its side and everything it sent
  // has been answered and written.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || stopped_ || done_) return;
    if (!input_closed_ || busy_ || !inbox_.empty() || !writes_.empty() || writing_) return;
    finished_ = true;
    status_ = grpc::Status::OK;
    stop_worker_ = true;
    work_.Signal();
    StartFinishLocked();
  }

  void FailLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || stopped_ || done_) return;
    finished_ = true;
    status_ = status;
    stop_worker_ = true;
    inbox_.clear();
    writes_.clear();
    work_.Signal();
    StartFinishLocked();
  }

  // Sends the status decided by MaybeFinishLocked or FailLocked, once no
  // write is in flight (the async API allows one operation of each kind).
  void StartFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finished_ || finish_pending_ || finish_done_ || writing_ || stopped_) return;
    finish_pending_ = true;
    stream_.Finish(status_, &finish_done_tag_);
  }

  // Whether every operation has completed and none will start: the gRPC
  // objects are no longer used, the worker stops.
  bool CheckDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_) return false;
    if (reading_pending_ || writing_ || finish_pending_ || call_pending_) return false;
    if (!finish_done_ && !stopped_) return false;
    done_ = true;
    stop_worker_ = true;
    work_.Signal();
    return true;
  }

  PluginService* const service_;
  grpc::ServerContext context_;
  ServerStream stream_{&context_};
  CompletionOf<StreamState> accepted_{this, &StreamState::OnAccepted};
  CompletionOf<StreamState> read_done_{this, &StreamState::OnReadDone};
  CompletionOf<StreamState> write_done_{this, &StreamState::OnWriteDone};
  CompletionOf<StreamState> finish_done_tag_{this, &StreamState::OnFinishDone};
  CompletionOf<StreamState> call_done_{this, &StreamState::OnCallDone};

  // Used only by the holder of the busy_ baton.
  Session* session_ = nullptr;
  absl::Mutex mu_;
  absl::CondVar work_;
  bool call_pending_ ABSL_GUARDED_BY(mu_) = false;  // The call-done tag will come.
  bool reading_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // A status was decided.
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // The server's shutdown.
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // Every operation completed.
  bool input_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_worker_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // A thread is handling a message.
  RequestPtr reading_ ABSL_GUARDED_BY(mu_);
  std::deque<RequestPtr> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestPtr> free_requests_ ABSL_GUARDED_BY(mu_);
  std::deque<ResponsePtr> writes_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  ResponsePtr in_flight_ ABSL_GUARDED_BY(mu_);  // Kept alive until its write completes.
  std::vector<ResponsePtr> free_responses_ ABSL_GUARDED_BY(mu_);
};

// Owns the streams, their workers and the driver thread.
class PluginService final {
 public:
  PluginService(const std::vector<PluginDefinition>& definitions, std::string process_name,
                int parallelism)
      : definitions_(definitions),
        process_name_(std::move(process_name)),
        parallelizer_(parallelism),
        health_("this plugin process") {}

  ~PluginService() { JoinWorkers(/*all=*/true); }

  void Register(grpc::ServerBuilder& builder) {
    builder.RegisterService(&plugin_);
    health_.Register(builder);
    driver_ = std::make_unique<grpc_support::AsyncDriver>(builder.AddCompletionQueue(/*is_frequently_polled=*/true));
  }

  // After the server started: asks for the first calls and starts the driver.
  void Start() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      AcceptStreamLocked();
    }
    health_.Start(driver_->server_queue());
    driver_->Start();
  }

  // After the server's Shutdown (which cancelled every call): lets the calls
  // drain, then stops the driver and joins every worker.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::shared_ptr<StreamState>> streams;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      for (auto& [raw, stream] : streams_) streams.push_back(stream);
    }
    health_.Stop();
    for (auto& stream : streams) stream->Stop();
    driver_->Stop();
    JoinWorkers(/*all=*/true);
  }

  // A stream the server accepted: its worker owns the Session and destroys it
  // (and so the plugins) once the stream is over, off the driver.
  void OnStreamAccepted(StreamState* raw) ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<StreamState> stream;
    {
      absl::MutexLock lock(&mu_);
      AcceptStreamLocked();
      stream = streams_.at(raw);
    }
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

  // The stream's last operation completed. The worker may still hold it.
  void Forget(StreamState* stream) ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<StreamState> last;  // Destroyed after the lock is released.
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream);
    last = std::move(it->second);
    streams_.erase(it);
  }

  // Joins finished workers, or every worker when `all`.
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

  void AcceptStreamLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopped_) return;
    auto stream = std::make_shared<StreamState>(this);
    StreamState* raw = stream.get();
    streams_.emplace(raw, std::move(stream));
    grpc::ServerCompletionQueue* queue = driver_->server_queue();
    plugin_.RequestRun(raw->context(), raw->stream(), queue, queue, raw->accepted_tag());
  }

  const std::vector<PluginDefinition>& definitions_;
  const std::string process_name_;
  // Shared by every stream's session; outlives them (the destructor joins
  // the stream workers first).
  Parallelizer parallelizer_;
  v1::Plugin::AsyncService plugin_;
  // grpc.health.v1.Health (and UNIMPLEMENTED for unknown methods) on the
  // driver's queue.
  grpc_support::HealthService health_;
  // The one thread that drains the server's queue (made in Register).
  std::unique_ptr<grpc_support::AsyncDriver> driver_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Every call requested or open, until all its operations have completed.
  absl::flat_hash_map<StreamState*, std::shared_ptr<StreamState>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
};

void StreamState::OnAccepted(bool ok) {
  // The server is shutting down; the call never started (and gRPC sends no
  // call-done tag for it).
  if (!ok) return Forget();
  {
    absl::MutexLock lock(&mu_);
    call_pending_ = true;
  }
  service_->OnStreamAccepted(this);
  bool done = false;
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_) {
      StartReadLocked();
    } else {
      done = CheckDoneLocked();
    }
  }
  if (done) Forget();
}

void StreamState::OnCallDone(bool /*ok*/) {
  bool done = false;
  {
    absl::MutexLock lock(&mu_);
    call_pending_ = false;
    // Cancelled by the scheduler, a deadline or the server's shutdown.
    if (context_.IsCancelled()) FailLocked(grpc::Status::CANCELLED);
    done = CheckDoneLocked();
  }
  if (done) Forget();
}

void StreamState::Forget() { service_->Forget(this); }

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
    grpc::ServerBuilder builder;
    // No default health service: it would bring back the callback API's
    // polling threads. PluginService serves grpc.health.v1.Health itself.
    builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
    builder.AddListeningPort(options_.address, *creds, &port_);
    service_->Register(builder);
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
    service_->Start();
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
    // Streams never end on their own: cancel them now, then let the driver
    // drain their operations and join the workers.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    service_->Shutdown();
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
