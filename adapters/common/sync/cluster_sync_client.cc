#include "common/sync/cluster_sync_client.h"

#include "absl/strings/str_cat.h"

namespace podium::adapter {

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

ClusterSyncClient::ClusterSyncClient(std::shared_ptr<grpc::Channel> channel, Options options, ActionHandler on_action)
    : options_(std::move(options)), on_action_(std::move(on_action)), stub_(v1::Cluster::NewStub(channel)) {}

ClusterSyncClient::~ClusterSyncClient() { Close(absl::ZeroDuration()).IgnoreError(); }

void ClusterSyncClient::Start(std::vector<v1::ObjectEvent> initial_list, bool end_list) {
  v1::AdapterHello hello;
  hello.set_protocol_version(1);
  // Version 2: events ride with results and DeletePod.disruption_target is
  // carried out (the executor's part), once the scheduler's hello says 2.
  hello.set_max_protocol_version(2);
  hello.set_adapter(options_.adapter_name);
  for (const auto& n : options_.scheduler_names) hello.add_scheduler_names(n);
  {
    absl::MutexLock lock(&mu_);
    queue_.emplace_back(std::move(hello));
    queue_.emplace_back(v1::ListBegin());
    // The initial list may exceed the queue's bound: it is queued whole, as
    // the list is finite and the writer is not running yet.
    for (auto& e : initial_list) queue_.emplace_back(std::move(e));
    if (end_list) queue_.emplace_back(v1::ListEnd());
  }
  stream_ = stub_->Sync(&context_);
  reader_ = std::thread([this] { ReadLoop(); });
  writer_ = std::thread([this] { WriteLoop(); });
}

bool ClusterSyncClient::HasRoomOrEnded() const {
  return ended_ || read_done_ || closing_ || queue_.size() < options_.queue_capacity;
}

bool ClusterSyncClient::WriterHasWork() const {
  if (read_done_ || write_failed_) return true;
  // The other thread's write goes first, and what actions queue is written by
  // the reader after them (but a full queue now: the handler may wait for room).
  if (writing_ || (dispatching_ && queue_.size() < options_.queue_capacity)) return false;
  return !queue_.empty() || !results_.empty() || closing_;
}

bool ClusterSyncClient::Enqueue(Outbound item) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &ClusterSyncClient::HasRoomOrEnded));
  if (ended_ || read_done_ || closing_) return false;
  queue_.push_back(std::move(item));
  if (dispatching_) ++dispatch_queued_;
  return true;
}

bool ClusterSyncClient::EndList() { return Enqueue(v1::ListEnd()); }

bool ClusterSyncClient::SendEvents(std::vector<v1::ObjectEvent> events) {
  for (auto& e : events) {
    if (!Enqueue(std::move(e))) return false;
  }
  return true;
}

bool ClusterSyncClient::SendResult(v1::ActionResult result) {
  // Bounded by the actions in flight; never waits behind events.
  absl::MutexLock lock(&mu_);
  if (ended_ || read_done_ || closing_) return false;
  results_.push_back(std::move(result));
  return true;
}

void ClusterSyncClient::ReadLoop() {
  v1::SchedulerMessage msg;
  while (stream_->Read(&msg)) {
    if (msg.has_hello()) {
      absl::MutexLock lock(&mu_);
      hello_ = msg.hello();
    } else if (msg.has_actions()) {
      if (options_.write_after_actions) {
        absl::MutexLock lock(&mu_);
        dispatching_ = true;
        dispatch_queued_ = 0;
      }
      for (auto& a : *msg.mutable_actions()->mutable_actions()) on_action_(std::move(a));
      if (options_.write_after_actions) {
        absl::MutexLock lock(&mu_);
        dispatching_ = false;
        WriteQueuedOnReader();
      }
    }
  }
  absl::MutexLock lock(&mu_);
  read_done_ = true;
}

void ClusterSyncClient::TakeEvents(v1::ObjectEvents* events, size_t items, size_t bytes) {
  // By count and by bytes: 500 objects with large annotations exceed
  // the scheduler's message size limit (RESOURCE_EXHAUSTED).
  while (!queue_.empty() && std::holds_alternative<v1::ObjectEvent>(queue_.front()) && items < options_.batch_size) {
    const size_t size = std::get<v1::ObjectEvent>(queue_.front()).ByteSizeLong();
    if (items > 0 && bytes + size > options_.batch_bytes) break;
    bytes += size;
    ++items;
    *events->add_events() = std::move(std::get<v1::ObjectEvent>(queue_.front()));
    queue_.pop_front();
  }
}

void ClusterSyncClient::TakeNext(v1::ClusterMessage* msg, bool events_with_results) {
  if (!results_.empty()) {
    auto* results = msg->mutable_results();
    size_t bytes = 0;
    while (!results_.empty() && static_cast<size_t>(results->results_size()) < options_.batch_size) {
      const size_t size = results_.front().ByteSizeLong();
      if (results->results_size() > 0 && bytes + size > options_.batch_bytes) break;
      bytes += size;
      *results->add_results() = std::move(results_.front());
      results_.pop_front();
    }
    // The events queued behind them would be the next message: on a stream
    // of protocol 2 (the scheduler's hello) they ride in this one, after
    // the results.
    if (events_with_results && hello_.has_value() && hello_->protocol_version() >= 2) {
      TakeEvents(results->mutable_events(), results->results_size(), bytes);
    }
  } else if (std::holds_alternative<v1::ObjectEvent>(queue_.front())) {
    TakeEvents(msg->mutable_events(), 0, 0);
  } else {
    const Outbound& front = queue_.front();
    if (auto* h = std::get_if<v1::AdapterHello>(&front)) *msg->mutable_hello() = *h;
    if (std::holds_alternative<v1::ListBegin>(front)) msg->mutable_list_begin();
    if (std::holds_alternative<v1::ListEnd>(front)) msg->mutable_list_end();
    queue_.pop_front();
  }
}

void ClusterSyncClient::WriteQueuedOnReader() {
  // The actions' results, then their events if nothing queued before them is
  // still waiting: a burst queued by another thread (podium-sim creating
  // 10 000 pods) is the writer thread's, woken when this unlocks, so that the
  // reader goes back to the actions instead of waiting for flow control.
  // Closing: the writer thread sends the rest, then half-closes.
  for (int written = 0; written < 2; ++written) {
    if (writing_ || closing_ || read_done_ || write_failed_) return;
    const bool own_events = !queue_.empty() && queue_.size() <= dispatch_queued_;
    if (results_.empty() && !own_events) return;
    v1::ClusterMessage msg;
    TakeNext(&msg, own_events);
    writing_ = true;
    mu_.Unlock();
    const bool ok = stream_->Write(msg);
    mu_.Lock();
    writing_ = false;
    if (!ok) write_failed_ = true;  // The stream is broken; Read will fail too.
  }
}

void ClusterSyncClient::WriteLoop() {
  for (;;) {
    v1::ClusterMessage msg;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ClusterSyncClient::WriterHasWork));
      if (read_done_ || write_failed_) break;
      if (queue_.empty() && results_.empty()) {  // Closing, and everything was sent.
        writing_ = true;  // The reader does not write once closing_ is set either.
        mu_.Unlock();
        stream_->WritesDone();
        mu_.Lock();
        writing_ = false;
        break;
      }
      TakeNext(&msg, /*events_with_results=*/true);
      writing_ = true;
    }
    bool ok = stream_->Write(msg);
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {  // The stream is broken; Read will fail too.
      write_failed_ = true;
      break;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ClusterSyncClient::ReadIsDone));
  }
  grpc::Status s = stream_->Finish();
  absl::MutexLock lock(&mu_);
  status_ = FromGrpc(s);
  ended_ = true;
  queue_.clear();
}

std::optional<v1::SchedulerHello> ClusterSyncClient::hello() const {
  absl::MutexLock lock(&mu_);
  return hello_;
}

bool ClusterSyncClient::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_ || read_done_;
}

absl::Status ClusterSyncClient::status() const {
  absl::MutexLock lock(&mu_);
  if (!ended_ && read_done_) return absl::UnavailableError("the scheduler ended the Sync stream");
  return status_;
}

bool ClusterSyncClient::idle() const {
  absl::MutexLock lock(&mu_);
  return queue_.empty() && !writing_;
}

absl::Status ClusterSyncClient::Close(absl::Duration grace) {
  if (!stream_) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!mu_.AwaitWithTimeout(absl::Condition(this, &ClusterSyncClient::IsEnded), grace)) {
      context_.TryCancel();
    }
  }
  if (reader_.joinable()) reader_.join();
  if (writer_.joinable()) writer_.join();
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace podium::adapter
