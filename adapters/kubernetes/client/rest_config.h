#pragma once

// Where the Kubernetes API is and how to authenticate to it: a kubeconfig
// (file(s) and a context), or the in-cluster service account, resolved in
// client-go's order.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace podium::kube {

struct RestConfig {
  std::string scheme = "https";  // "https", or "http" (the fake apiserver, a proxy).
  std::string host;
  std::string port;              // Defaults from the scheme.
  std::string base_path;         // Server URL path prefix, without a trailing '/'.
  std::string ca_file;           // PEM; empty = system roots.
  std::string ca_data;           // PEM (already base64-decoded).
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;   // SNI and hostname check; empty = host.
  std::string client_cert_file, client_cert_data;
  std::string client_key_file, client_key_data;
  std::string bearer_token;
  std::string bearer_token_file;  // Re-read when it changes (rotated tokens).
  std::string default_namespace;
  std::string source;             // For logs: "kubeconfig PATH, context NAME" / "in-cluster".
};

// "https://host:port/prefix" -> scheme, host, port, base_path.
absl::Status ParseServerUrl(const std::string& url, RestConfig* config);

// One kubeconfig document; `dir` resolves its relative file paths.
struct KubeconfigFile {
  std::string path;
  std::string text;
};

// Merges the files as kubectl does (the first file that names a context,
// cluster or user wins; current-context from the first file that sets it)
// and resolves `context` (empty = current-context). Errors name the file and
// field. exec and auth-provider users are refused (not supported).
absl::StatusOr<RestConfig> ParseKubeconfig(const std::vector<KubeconfigFile>& files,
                                           const std::string& context);

// Reads the files (a KUBECONFIG-style list) then ParseKubeconfig.
absl::StatusOr<RestConfig> LoadKubeconfig(const std::vector<std::string>& paths, const std::string& context);

// In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account's token file
// and CA bundle. `env` is the environment (injected for tests).
struct InClusterPaths {
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};
absl::StatusOr<RestConfig> InClusterConfig(const std::map<std::string, std::string>& env,
                                           const InClusterPaths& paths = {});

// client-go's order: --kubeconfig, then $KUBECONFIG (':'-separated), then
// in-cluster when KUBERNETES_SERVICE_HOST is set, then ~/.kube/config.
absl::StatusOr<RestConfig> ResolveRestConfig(const std::string& kubeconfig_flag, const std::string& context,
                                             const std::map<std::string, std::string>& env);

// The process environment as a map.
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace podium::kube
