#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/rate_limiter.h"
#include "client/rest_config.h"
#include "client/token_source.h"
#include "client/transport.h"
#include "metrics/adapter_metrics.h"

namespace podium::kube {

class Connection;

// The Kubernetes API over HTTP/1.1 (Boost.Beast), HTTPS with OpenSSL or plain
// HTTP. Connections are kept alive and pooled; every request, watches
// included, first takes a token from the client-side rate limiter.
// Thread-safe; each call uses its own connection.
class ApiClient : public Transport {
 public:
  struct Options {
    RestConfig config;
    double qps = 50;   // kube-scheduler's default; <= 0 = no limit.
    int burst = 100;
    absl::Duration request_timeout = absl::Seconds(30);
    // A watch with no byte for this long ends with DEADLINE_EXCEEDED, so a
    // half-open connection is noticed within about a minute (client-go's
    // HTTP/2 health check: about 45 s). A watch that was only quiet is
    // watched again from its last resourceVersion, which is cheap (the API
    // server also sends a bookmark about once a minute).
    absl::Duration stream_idle_timeout = absl::Seconds(60);
    size_t max_idle_connections = 32;
    std::string user_agent = "podium-k8s-adapter";
    AdapterMetrics* metrics = nullptr;  // Requests, latency, rate-limiter waits.
  };

  // Loads the TLS material; errors name the file.
  static absl::StatusOr<std::unique_ptr<ApiClient>> Create(Options options);
  ~ApiClient() override;

  ApiAnswer Do(const HttpRequest& request) override;
  StreamAnswer Stream(const HttpRequest& request) override;

  // Closes every connection, idle or busy (watches end with an error), and
  // refuses new requests. For shutdown.
  void Shutdown();

  uint64_t requests() const;

 private:
  friend class Connection;
  struct Tls;
  explicit ApiClient(Options options);

  void Throttle(const HttpRequest& r);
  ApiAnswer Send(const HttpRequest& r);
  StreamAnswer OpenStream(const HttpRequest& r);
  std::unique_ptr<Connection> Acquire();
  void Release(std::unique_ptr<Connection> connection);
  void Register(Connection* c);
  void Unregister(Connection* c);
  std::string Authorization();

  const Options options_;
  std::unique_ptr<Tls> tls_;
  RateLimiter limiter_;
  TokenSource token_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  std::set<Connection*> live_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podium::kube
