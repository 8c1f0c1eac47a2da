#include "client/rest_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/token_source.h"

namespace podium::kube {
namespace {

const char kKubeconfig[] = R"(
apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod-cluster
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: certs/ca.crt
- name: fake
  cluster:
    server: http://127.0.0.1:8080
contexts:
- name: prod
  context: {cluster: prod-cluster, user: admin, namespace: team}
- name: test
  context: {cluster: fake, user: robot}
users:
- name: admin
  user:
    client-certificate-data: )" "Q0VSVA=="  R"(
    client-key-data: )" "S0VZ" R"(
- name: robot
  user:
    token: abc123
)";

TEST(KubeconfigTest, CurrentContextWithClientCertificate) {
  auto c = ParseKubeconfig({{"/home/u/.kube/config", kKubeconfig}}, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->scheme, "https");
  EXPECT_EQ(c->host, "10.0.0.1");
  EXPECT_EQ(c->port, "6443");
  EXPECT_EQ(c->base_path, "");
  EXPECT_EQ(c->ca_file, "/home/u/.kube/certs/ca.crt");  // Relative to the kubeconfig.
  EXPECT_EQ(c->client_cert_data, "CERT");
  EXPECT_EQ(c->client_key_data, "KEY");
  EXPECT_EQ(c->default_namespace, "team");
}

TEST(KubeconfigTest, ContextFlagPicksAnotherContext) {
  auto c = ParseKubeconfig({{"/k", kKubeconfig}}, "test");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->scheme, "http");
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->port, "8080");
  EXPECT_EQ(c->bearer_token, "abc123");
}

TEST(KubeconfigTest, FirstFileWinsWhenMerging) {
  const char override_file[] = R"(
current-context: test
clusters:
- name: fake
  cluster: {server: "http://localhost:9999"}
)";
  auto c = ParseKubeconfig({{"/a", override_file}, {"/b", kKubeconfig}}, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->port, "9999");
  EXPECT_EQ(c->bearer_token, "abc123");
}

TEST(KubeconfigTest, ErrorsNameWhatIsWrong) {
  EXPECT_TRUE(absl::StrContains(ParseKubeconfig({{"/k", kKubeconfig}}, "nope").status().message(), "no context named \"nope\""));
  auto bad = ParseKubeconfig({{"/k", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: ftp://x}\n"}}, "");
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "clusters[c].cluster.server")) << bad.status();
  auto exec = ParseKubeconfig({{"/k", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: https://x}\nusers:\n- name: u\n  user: {exec: {command: aws}}\n"}}, "");
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kUnimplemented);
  auto b64 = ParseKubeconfig({{"/k", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: https://x, certificate-authority-data: '%%%'}\n"}}, "");
  EXPECT_TRUE(absl::StrContains(b64.status().message(), "certificate-authority-data: not valid base64")) << b64.status();
  EXPECT_FALSE(ParseKubeconfig({{"/k", "[unclosed"}}, "").ok());
}

TEST(KubeconfigTest, ServerUrls) {
  RestConfig c;
  ASSERT_TRUE(ParseServerUrl("https://[::1]:6443/prefix/", &c).ok());
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, "6443");
  EXPECT_EQ(c.base_path, "/prefix");
  ASSERT_TRUE(ParseServerUrl("https://kubernetes.default.svc", &c).ok());
  EXPECT_EQ(c.port, "443");
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/podium-kube-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(InClusterTest, ServiceAccountFilesAndEnvironment) {
  TempDir dir;
  InClusterPaths paths{.token_file = dir.Write("token", "t1\n"), .ca_file = dir.path() + "/ca.crt",
                       .namespace_file = dir.Write("namespace", "kube-system")};
  auto c = InClusterConfig({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}, paths);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host, "10.96.0.1");
  EXPECT_EQ(c->bearer_token_file, paths.token_file);
  EXPECT_EQ(c->ca_file, paths.ca_file);
  EXPECT_EQ(c->default_namespace, "kube-system");
  EXPECT_FALSE(InClusterConfig({}, paths).ok());
}

TEST(InClusterTest, RotatedTokenIsReadAgain) {
  TempDir dir;
  std::string file = dir.Write("token", "first\n");
  absl::Time now = absl::FromUnixSeconds(100);
  TokenSource tokens("", file, [&now] { return now; });
  EXPECT_EQ(tokens.Token(), "first");
  dir.Write("token", "second-and-longer\n");  // Size (and mtime) change.
  EXPECT_EQ(tokens.Token(), "first");          // Checked at most once a second.
  now += absl::Seconds(2);
  EXPECT_EQ(tokens.Token(), "second-and-longer");
}

TEST(ResolveTest, FlagThenKubeconfigEnvThenInCluster) {
  TempDir dir;
  std::string path = dir.Write("config", kKubeconfig);
  auto c = ResolveRestConfig("", "test", {{"KUBECONFIG", "/nonexistent:" + path}, {"KUBERNETES_SERVICE_HOST", "x"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->port, "8080");
  EXPECT_FALSE(ResolveRestConfig("/nonexistent", "", {}).ok());
}

}  // namespace
}  // namespace podium::kube
