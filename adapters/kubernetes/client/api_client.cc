#include "client/api_client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <iostream>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/str_cat.h"

namespace podium::kube {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

struct ApiClient::Tls {
  ssl::context ctx{ssl::context::tls_client};
};

namespace {

// TCP keepalive as client-go's dialer sets it (30 s): a peer that vanished
// without a FIN or RST (a half-open connection) ends the connection instead
// of holding it for hours.
void EnableKeepAlive(tcp::socket& socket) {
  error_code ignored;
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  const int seconds = 30;
  ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &seconds, sizeof(seconds));
  ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &seconds, sizeof(seconds));
}

}  // namespace

// One kept-alive connection. Its operations are asynchronous on a private
// io_context that the calling thread drives, so every step has a deadline
// (tcp_stream's timer) and Abort() can end a blocked read from any thread.
class Connection {
 public:
  explicit Connection(ApiClient& client) : client_(client) { client_.Register(this); }
  ~Connection() { client_.Unregister(this); }

  // Thread-safe: closes the socket at the next step of the owning thread.
  void Abort() {
    aborted_ = true;
    asio::post(ioc_, [this] { CloseNow(); });
  }
  bool connected() const { return connected_; }
  bool received_bytes() const { return received_; }

  error_code Connect(absl::Duration timeout) {
    if (connected_) return {};
    if (aborted_) return asio::error::operation_aborted;
    const RestConfig& c = client_.options_.config;
    CloseNow();
    if (client_.tls_) {
      tls_.emplace(ioc_, client_.tls_->ctx);
    } else {
      tcp_.emplace(ioc_);
    }
    tcp::resolver resolver(ioc_);
    tcp::resolver::results_type endpoints;
    error_code ec = asio::error::would_block;
    resolver.async_resolve(c.host, c.port, [&](error_code e, tcp::resolver::results_type r) {
      ec = e;
      endpoints = std::move(r);
    });
    Drive();
    if (ec) return ec;
    ec = asio::error::would_block;
    Lowest().expires_after(ToChrono(timeout));
    Lowest().async_connect(endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
    Drive();
    if (ec) return ec;
    EnableKeepAlive(Lowest().socket());
    if (tls_) {
      const std::string name = c.tls_server_name.empty() ? c.host : c.tls_server_name;
      if (!SSL_set_tlsext_host_name(tls_->native_handle(), name.c_str())) {
        return error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
      }
      if (c.insecure_skip_tls_verify) {
        tls_->set_verify_mode(ssl::verify_none);
      } else {
        tls_->set_verify_mode(ssl::verify_peer);
        tls_->set_verify_callback(ssl::host_name_verification(name));
      }
      ec = asio::error::would_block;
      Lowest().expires_after(ToChrono(timeout));
      tls_->async_handshake(ssl::stream_base::client, [&](error_code e) { ec = e; });
      Drive();
      if (ec) return ec;
    }
    connected_ = true;
    received_ = false;
    return {};
  }

  error_code Write(http::request<http::string_body>& req, absl::Duration timeout) {
    error_code ec = asio::error::would_block;
    Lowest().expires_after(ToChrono(timeout));
    WithStream([&](auto& s) { http::async_write(s, req, [&](error_code e, size_t) { ec = e; }); });
    Drive();
    if (ec) connected_ = false;
    return ec;
  }

  // The request written and the whole answer read in one run of the
  // io_context under one deadline: one timer and one reactor run per call
  // instead of one per step (a bind is a short request and a short answer).
  error_code Exchange(http::request<http::string_body>& req, http::response_parser<http::string_body>& parser,
                      absl::Duration timeout) {
    error_code ec = asio::error::would_block;
    Lowest().expires_after(ToChrono(timeout));
    WithStream([&](auto& s) {
      http::async_write(s, req, [&](error_code e, size_t) {
        if (e) {
          ec = e;
          return;
        }
        http::async_read(s, buffer_, parser, [&](error_code e2, size_t n) {
          ec = e2;
          received_ |= n > 0;
        });
      });
    });
    Drive();
    if (ec) connected_ = false;
    return ec;
  }

  template <class Parser>
  error_code ReadHeader(Parser& parser, absl::Duration timeout) {
    error_code ec = asio::error::would_block;
    Lowest().expires_after(ToChrono(timeout));
    WithStream([&](auto& s) { http::async_read_header(s, buffer_, parser, [&](error_code e, size_t n) { ec = e; received_ |= n > 0; }); });
    Drive();
    if (ec) connected_ = false;
    return ec;
  }

  template <class Parser>
  error_code ReadRest(Parser& parser, absl::Duration timeout) {
    error_code ec = asio::error::would_block;
    Lowest().expires_after(ToChrono(timeout));
    WithStream([&](auto& s) { http::async_read(s, buffer_, parser, [&](error_code e, size_t) { ec = e; }); });
    Drive();
    if (ec) connected_ = false;
    return ec;
  }

  template <class Parser>
  error_code ReadSome(Parser& parser, absl::Duration timeout) {
    error_code ec = asio::error::would_block;
    Lowest().expires_after(ToChrono(timeout));
    WithStream([&](auto& s) { http::async_read_some(s, buffer_, parser, [&](error_code e, size_t) { ec = e; }); });
    Drive();
    if (ec == http::error::need_buffer) ec = {};
    if (ec) connected_ = false;
    return ec;
  }

  void MarkClosed() { connected_ = false; }

 private:
  static std::chrono::steady_clock::duration ToChrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

  void Drive() {
    ioc_.restart();
    ioc_.run();
  }
  beast::tcp_stream& Lowest() { return tls_ ? beast::get_lowest_layer(*tls_) : *tcp_; }
  template <class F>
  void WithStream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(*tcp_);
    }
  }
  void CloseNow() {
    error_code ignored;
    if (tls_) beast::get_lowest_layer(*tls_).socket().close(ignored);
    if (tcp_) tcp_->socket().close(ignored);
    connected_ = false;
  }

  ApiClient& client_;
  asio::io_context ioc_{1};
  std::optional<beast::tcp_stream> tcp_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
  bool received_ = false;
  std::atomic<bool> aborted_{false};
};

namespace {

std::string Describe(const error_code& ec, const char* step) { return absl::StrCat(step, ": ", ec.message()); }

template <class Body>
ApiAnswer ToAnswer(http::response<Body>& res) {
  ApiAnswer a;
  a.status = static_cast<int>(res.result_int());
  a.body = std::move(res.body());
  if (auto it = res.find(http::field::retry_after); it != res.end()) a.retry_after = std::string(it->value());
  return a;
}

// client-go's limit on one watch event (its streaming decoder's maxBytes).
constexpr size_t kMaxWatchLine = 16 << 20;

// A watch body as lines; owns its connection.
class WatchLines : public LineStream {
 public:
  WatchLines(std::unique_ptr<Connection> connection, std::unique_ptr<http::response_parser<http::buffer_body>> parser,
             absl::Duration idle_timeout)
      : connection_(std::move(connection)), parser_(std::move(parser)), idle_timeout_(idle_timeout) {}
  ~WatchLines() override { connection_->MarkClosed(); }

  absl::StatusOr<bool> NextLine(std::string* line) override {
    for (;;) {
      size_t nl = pending_.find('\n', scanned_);
      if (nl != std::string::npos) {
        line->assign(pending_, 0, nl);
        pending_.erase(0, nl + 1);
        scanned_ = 0;
        return true;
      }
      scanned_ = pending_.size();
      if (parser_->is_done()) {
        if (pending_.empty()) return false;
        line->swap(pending_);
        pending_.clear();
        scanned_ = 0;
        return true;
      }
      char chunk[16384];
      parser_->get().body().data = chunk;
      parser_->get().body().size = sizeof(chunk);
      error_code ec = connection_->ReadSome(*parser_, idle_timeout_);
      if (ec == beast::error::timeout) {
        return absl::DeadlineExceededError(absl::StrCat("watch stream: no data for ", absl::FormatDuration(idle_timeout_)));
      }
      if (ec) return absl::UnavailableError(Describe(ec, "watch stream"));
      pending_.append(chunk, sizeof(chunk) - parser_->get().body().size);
      if (pending_.size() > kMaxWatchLine && pending_.find('\n', scanned_) == std::string::npos) {
        return absl::ResourceExhaustedError(
            absl::StrCat("watch stream: an event longer than ", kMaxWatchLine >> 20, " MiB"));
      }
    }
  }

 private:
  std::unique_ptr<Connection> connection_;
  std::unique_ptr<http::response_parser<http::buffer_body>> parser_;
  const absl::Duration idle_timeout_;
  std::string pending_;
  size_t scanned_ = 0;
};

}  // namespace

ApiClient::ApiClient(Options options)
    : options_(std::move(options)),
      limiter_(options_.qps, options_.burst),
      token_(options_.config.bearer_token, options_.config.bearer_token_file) {}

ApiClient::~ApiClient() {
  absl::MutexLock lock(&mu_);
  idle_.clear();
}

absl::StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(Options options) {
  std::unique_ptr<ApiClient> client(new ApiClient(std::move(options)));
  const RestConfig& c = client->options_.config;
  if (c.scheme == "https") {
    client->tls_ = std::make_unique<Tls>();
    ssl::context& ctx = client->tls_->ctx;
    error_code ec;
    auto fail = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", ec.message()));
    };
    if (!c.ca_data.empty()) {
      ctx.add_certificate_authority(asio::buffer(c.ca_data), ec);
      if (ec) return fail("certificate-authority-data");
    } else if (!c.ca_file.empty()) {
      ctx.load_verify_file(c.ca_file, ec);
      if (ec) return fail(c.ca_file);
    } else {
      ctx.set_default_verify_paths(ec);
      if (ec) return fail("system CA certificates");
    }
    if (!c.client_cert_data.empty()) {
      ctx.use_certificate_chain(asio::buffer(c.client_cert_data), ec);
      if (ec) return fail("client-certificate-data");
    } else if (!c.client_cert_file.empty()) {
      ctx.use_certificate_chain_file(c.client_cert_file, ec);
      if (ec) return fail(c.client_cert_file);
    }
    if (!c.client_key_data.empty()) {
      ctx.use_private_key(asio::buffer(c.client_key_data), ssl::context::pem, ec);
      if (ec) return fail("client-key-data");
    } else if (!c.client_key_file.empty()) {
      ctx.use_private_key_file(c.client_key_file, ssl::context::pem, ec);
      if (ec) return fail(c.client_key_file);
    }
  } else if (c.scheme != "http") {
    return absl::InvalidArgumentError(absl::StrCat("scheme \"", c.scheme, "\": expected http or https"));
  }
  return client;
}

void ApiClient::Register(Connection* c) {
  absl::MutexLock lock(&mu_);
  live_.insert(c);
}

void ApiClient::Unregister(Connection* c) {
  absl::MutexLock lock(&mu_);
  live_.erase(c);
}

std::unique_ptr<Connection> ApiClient::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return nullptr;
    ++requests_;
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return std::make_unique<Connection>(*this);
}

void ApiClient::Release(std::unique_ptr<Connection> connection) {
  absl::MutexLock lock(&mu_);
  if (shutdown_ || idle_.size() >= options_.max_idle_connections || !connection->connected()) return;
  idle_.push_back(std::move(connection));
}

void ApiClient::Shutdown() {
  std::vector<std::unique_ptr<Connection>> idle;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    for (Connection* c : live_) c->Abort();
    idle.swap(idle_);
  }
}

uint64_t ApiClient::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::string ApiClient::Authorization() {
  std::string token = token_.Token();
  return token.empty() ? std::string() : absl::StrCat("Bearer ", token);
}

namespace {

http::request<http::string_body> BuildRequest(const HttpRequest& r, const RestConfig& c, const std::string& auth,
                                              const std::string& user_agent) {
  http::request<http::string_body> req{http::string_to_verb(r.method), c.base_path + r.target, 11};
  req.set(http::field::host, c.host);
  req.set(http::field::user_agent, user_agent);
  req.set(http::field::accept, "application/json");
  if (!auth.empty()) req.set(http::field::authorization, auth);
  if (!r.body.empty()) {
    req.set(http::field::content_type, r.content_type);
    req.body() = r.body;
  }
  req.keep_alive(true);
  req.prepare_payload();
  return req;
}

}  // namespace

void ApiClient::Throttle(const HttpRequest& r) {
  if (!options_.metrics) return limiter_.Wait();
  const absl::Time start = absl::Now();
  limiter_.Wait();
  options_.metrics->ObserveRateLimiterWait(r.method, absl::Now() - start);
}

ApiAnswer ApiClient::Do(const HttpRequest& r) {
  Throttle(r);
  const absl::Time start = absl::Now();
  ApiAnswer answer = Send(r);
  if (options_.metrics) options_.metrics->ObserveRequest(r.method, r.target, answer.status, absl::Now() - start);
  return answer;
}

StreamAnswer ApiClient::Stream(const HttpRequest& r) {
  Throttle(r);
  const absl::Time start = absl::Now();
  StreamAnswer answer = OpenStream(r);
  if (options_.metrics) options_.metrics->ObserveRequest(r.method, r.target, answer.head.status, absl::Now() - start);
  return answer;
}

ApiAnswer ApiClient::Send(const HttpRequest& r) {
  for (int attempt = 0;; ++attempt) {
    auto conn = Acquire();
    if (!conn) return ApiAnswer{.status = 0, .error = "the API client is shut down"};
    const bool reused = conn->connected();
    auto req = BuildRequest(r, options_.config, Authorization(), options_.user_agent);
    error_code ec = conn->Connect(options_.request_timeout);
    if (ec) return ApiAnswer{.status = 0, .error = Describe(ec, "connect")};
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    ec = conn->Exchange(req, parser, options_.request_timeout);
    if (ec) {
      // A kept-alive connection the server closed while idle: try once on a
      // fresh one, since the request was never answered.
      if (reused && !conn->received_bytes() && attempt == 0) continue;
      return ApiAnswer{.status = 0, .error = Describe(ec, parser.is_header_done() ? "response body" : "request")};
    }
    auto res = parser.release();
    const bool keep = res.keep_alive();
    ApiAnswer answer = ToAnswer(res);
    if (keep) {
      Release(std::move(conn));
    } else {
      conn->MarkClosed();
    }
    return answer;
  }
}

StreamAnswer ApiClient::OpenStream(const HttpRequest& r) {
  StreamAnswer out;
  auto conn = Acquire();
  if (!conn) {
    out.head.error = "the API client is shut down";
    return out;
  }
  auto req = BuildRequest(r, options_.config, Authorization(), options_.user_agent);
  error_code ec = conn->Connect(options_.request_timeout);
  if (!ec) ec = conn->Write(req, options_.request_timeout);
  auto parser = std::make_unique<http::response_parser<http::buffer_body>>();
  parser->body_limit(boost::none);
  if (!ec) ec = conn->ReadHeader(*parser, options_.request_timeout);
  if (ec) {
    out.head.error = Describe(ec, "watch");
    return out;
  }
  if (parser->get().result_int() != 200) {
    http::response_parser<http::string_body> rest(std::move(*parser));
    rest.body_limit(boost::none);
    ec = conn->ReadRest(rest, options_.request_timeout);
    if (ec) {
      out.head.error = Describe(ec, "watch error body");
      return out;
    }
    auto res = rest.release();
    out.head = ToAnswer(res);
    if (res.keep_alive()) Release(std::move(conn));
    return out;
  }
  out.head.status = 200;
  out.lines = std::make_unique<WatchLines>(std::move(conn), std::move(parser), options_.stream_idle_timeout);
  return out;
}

}  // namespace podium::kube
