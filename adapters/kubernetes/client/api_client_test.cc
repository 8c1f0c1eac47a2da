#include "client/api_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"

namespace podium::kube {
namespace {

// A watch endpoint on loopback (port 0) that sends the answer's head and then
// nothing, without closing: a quiet watch, or a half-open connection.
class SilentWatchServer {
 public:
  SilentWatchServer() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listener_, 1);
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      sockaddr_in peer{};
      socklen_t peer_len = sizeof(peer);
      const int c = accept(listener_, reinterpret_cast<sockaddr*>(&peer), &peer_len);
      if (c < 0) return;
      client_port_ = ntohs(peer.sin_port);
      char buf[4096];
      std::string request;
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, n);
      }
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
      write(c, head.data(), head.size());
      answered_.Notify();
      done_.WaitForNotification();
      close(c);
    });
  }
  ~SilentWatchServer() {
    done_.Notify();
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  int port() const { return port_; }
  // The client's end of the connection (after the answer's head went out).
  int client_port() {
    answered_.WaitForNotification();
    return client_port_;
  }

 private:
  int listener_ = -1;
  int port_ = 0;
  int client_port_ = 0;
  absl::Notification answered_, done_;
  std::thread thread_;
};

ApiClient::Options Options(int port) {
  ApiClient::Options o;
  o.config.scheme = "http";
  o.config.host = "127.0.0.1";
  o.config.port = std::to_string(port);
  o.qps = 0;
  return o;
}

TEST(ApiClientTest, AQuietWatchEndsAfterTheIdleTimeout) {
  SilentWatchServer server;
  ApiClient::Options options = Options(server.port());
  options.stream_idle_timeout = absl::Milliseconds(200);
  auto client = ApiClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  StreamAnswer answer = (*client)->Stream({.target = "/api/v1/pods?watch=1"});
  ASSERT_EQ(answer.head.status, 200) << answer.head.error;
  std::string line;
  const absl::Time start = absl::Now();
  absl::StatusOr<bool> more = answer.lines->NextLine(&line);
  EXPECT_TRUE(absl::IsDeadlineExceeded(more.status())) << more.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ApiClientTest, AWatchIsNoticedQuietWithinAboutAMinuteByDefault) {
  // client-go notices a dead HTTP/2 connection in about 45 s.
  EXPECT_LE(ApiClient::Options{}.stream_idle_timeout, absl::Seconds(90));
}

// The keepalive timer of the loopback connection from `local_port`, as
// /proc/net/tcp shows it: its "tr" (2: the keepalive timer is armed) and
// "tm->when" in clock ticks; nullopt when the connection is not listed.
std::optional<std::pair<int, int64_t>> TcpTimer(int local_port, int remote_port) {
  std::ifstream f("/proc/net/tcp");
  std::string row;
  std::getline(f, row);  // The header.
  while (std::getline(f, row)) {
    std::vector<std::string> cols = absl::StrSplit(row, ' ', absl::SkipEmpty());
    if (cols.size() < 6) continue;
    std::vector<std::string> local = absl::StrSplit(cols[1], ':'), remote = absl::StrSplit(cols[2], ':');
    int lp = 0, rp = 0;
    if (local.size() != 2 || remote.size() != 2 || !absl::SimpleHexAtoi(local[1], &lp) ||
        !absl::SimpleHexAtoi(remote[1], &rp) || lp != local_port || rp != remote_port) {
      continue;
    }
    std::vector<std::string> timer = absl::StrSplit(cols[5], ':');
    int tr = 0;
    int64_t when = 0;
    if (timer.size() != 2 || !absl::SimpleHexAtoi(timer[0], &tr) || !absl::SimpleHexAtoi(timer[1], &when)) continue;
    return std::make_pair(tr, when);
  }
  return std::nullopt;
}

TEST(ApiClientTest, ConnectionsKeepTcpAliveEvery30Seconds) {
  ASSERT_TRUE(std::ifstream("/proc/net/tcp")) << "/proc/net/tcp is where this test reads the timer";
  SilentWatchServer server;
  auto client = ApiClient::Create(Options(server.port()));
  ASSERT_TRUE(client.ok()) << client.status();
  StreamAnswer answer = (*client)->Stream({.target = "/api/v1/pods?watch=1"});
  ASSERT_EQ(answer.head.status, 200) << answer.head.error;
  auto timer = TcpTimer(server.client_port(), server.port());
  ASSERT_TRUE(timer.has_value());
  EXPECT_EQ(timer->first, 2) << "no keepalive timer on the idle connection";
  EXPECT_LE(timer->second, 30 * sysconf(_SC_CLK_TCK));
}

}  // namespace
}  // namespace podium::kube
