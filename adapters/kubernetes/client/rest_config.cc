#include "client/rest_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace podium::kube {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Resolve(const std::string& dir, const std::string& file) {
  if (file.empty() || std::filesystem::path(file).is_absolute() || dir.empty()) return file;
  return (std::filesystem::path(dir) / file).string();
}

std::string ScalarOr(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap() || !n[key] || !n[key].IsScalar()) return "";
  return n[key].Scalar();
}

absl::StatusOr<std::string> Base64Field(const YAML::Node& n, const char* key, const std::string& where) {
  std::string text = ScalarOr(n, key);
  if (text.empty()) return std::string();
  std::string out;
  if (!absl::Base64Unescape(text, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": not valid base64"));
  }
  return out;
}

// A named entry (cluster, user or context) and the file it came from.
struct Entry {
  YAML::Node body;
  std::string file;
  std::string dir;
};

}  // namespace

absl::Status ParseServerUrl(const std::string& url, RestConfig* config) {
  absl::string_view rest = url;
  if (absl::StartsWith(rest, "https://")) {
    config->scheme = "https";
    rest.remove_prefix(8);
  } else if (absl::StartsWith(rest, "http://")) {
    config->scheme = "http";
    rest.remove_prefix(7);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("server \"", url, "\": expected http:// or https://"));
  }
  absl::string_view authority = rest.substr(0, rest.find('/'));
  absl::string_view path = authority.size() < rest.size() ? rest.substr(authority.size()) : "";
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  config->base_path = std::string(path);
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError(absl::StrCat("server \"", url, "\": bad IPv6 host"));
    config->host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    config->port = absl::StartsWith(authority, ":") ? std::string(authority.substr(1)) : "";
  } else {
    size_t colon = authority.rfind(':');
    config->host = std::string(authority.substr(0, colon));
    config->port = colon == absl::string_view::npos ? "" : std::string(authority.substr(colon + 1));
  }
  if (config->host.empty()) return absl::InvalidArgumentError(absl::StrCat("server \"", url, "\": no host"));
  if (config->port.empty()) config->port = config->scheme == "https" ? "443" : "80";
  return absl::OkStatus();
}

absl::StatusOr<RestConfig> ParseKubeconfig(const std::vector<KubeconfigFile>& files, const std::string& context) {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current;
  for (const auto& f : files) {
    YAML::Node doc;
    try {
      doc = YAML::Load(f.text);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(f.path, ": not YAML: ", e.what()));
    }
    if (!doc || doc.IsNull()) continue;
    if (!doc.IsMap()) return absl::InvalidArgumentError(absl::StrCat(f.path, ": expected a mapping"));
    std::string dir = std::filesystem::path(f.path).parent_path().string();
    if (current.empty()) current = ScalarOr(doc, "current-context");
    auto collect = [&](const char* list, const char* inner, std::map<std::string, Entry>* out) -> absl::Status {
      YAML::Node items = doc[list];
      if (!items || items.IsNull()) return absl::OkStatus();
      if (!items.IsSequence()) return absl::InvalidArgumentError(absl::StrCat(f.path, ": ", list, ": expected a list"));
      for (size_t i = 0; i < items.size(); ++i) {
        std::string name = ScalarOr(items[i], "name");
        if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(f.path, ": ", list, "[", i, "].name: missing"));
        out->emplace(name, Entry{items[i][inner], f.path, dir});  // The first file wins.
      }
      return absl::OkStatus();
    };
    try {
      if (auto s = collect("clusters", "cluster", &clusters); !s.ok()) return s;
      if (auto s = collect("users", "user", &users); !s.ok()) return s;
      if (auto s = collect("contexts", "context", &contexts); !s.ok()) return s;
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(f.path, ": ", e.what()));
    }
  }
  const std::string name = context.empty() ? current : context;
  if (name.empty()) return absl::InvalidArgumentError("kubeconfig: no context given and no current-context");
  auto ctx = contexts.find(name);
  if (ctx == contexts.end()) return absl::NotFoundError(absl::StrCat("kubeconfig: no context named \"", name, "\""));
  const std::string cluster_name = ScalarOr(ctx->second.body, "cluster");
  const std::string user_name = ScalarOr(ctx->second.body, "user");
  auto cl = clusters.find(cluster_name);
  if (cl == clusters.end()) {
    return absl::NotFoundError(absl::StrCat(ctx->second.file, ": context \"", name, "\": no cluster named \"", cluster_name, "\""));
  }

  RestConfig config;
  config.source = absl::StrCat("kubeconfig ", ctx->second.file, ", context ", name);
  config.default_namespace = ScalarOr(ctx->second.body, "namespace");
  const YAML::Node& c = cl->second.body;
  const std::string where = absl::StrCat(cl->second.file, ": clusters[", cluster_name, "].cluster");
  const std::string server = ScalarOr(c, "server");
  if (server.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ".server: missing"));
  if (auto s = ParseServerUrl(server, &config); !s.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".server: ", s.message()));
  config.ca_file = Resolve(cl->second.dir, ScalarOr(c, "certificate-authority"));
  auto ca = Base64Field(c, "certificate-authority-data", where);
  if (!ca.ok()) return ca.status();
  config.ca_data = *ca;
  config.insecure_skip_tls_verify = ScalarOr(c, "insecure-skip-tls-verify") == "true";
  config.tls_server_name = ScalarOr(c, "tls-server-name");

  if (!user_name.empty()) {
    auto us = users.find(user_name);
    if (us == users.end()) {
      return absl::NotFoundError(absl::StrCat(ctx->second.file, ": context \"", name, "\": no user named \"", user_name, "\""));
    }
    const YAML::Node& u = us->second.body;
    const std::string uwhere = absl::StrCat(us->second.file, ": users[", user_name, "].user");
    if (u && u.IsMap() && (u["exec"] || u["auth-provider"])) {
      return absl::UnimplementedError(absl::StrCat(uwhere, ": exec and auth-provider credentials are not supported; use a token or client certificate"));
    }
    config.bearer_token = ScalarOr(u, "token");
    config.bearer_token_file = Resolve(us->second.dir, ScalarOr(u, "tokenFile"));
    config.client_cert_file = Resolve(us->second.dir, ScalarOr(u, "client-certificate"));
    config.client_key_file = Resolve(us->second.dir, ScalarOr(u, "client-key"));
    auto cert = Base64Field(u, "client-certificate-data", uwhere);
    if (!cert.ok()) return cert.status();
    auto key = Base64Field(u, "client-key-data", uwhere);
    if (!key.ok()) return key.status();
    config.client_cert_data = *cert;
    config.client_key_data = *key;
    const bool has_cert = !config.client_cert_file.empty() || !config.client_cert_data.empty();
    const bool has_key = !config.client_key_file.empty() || !config.client_key_data.empty();
    if (has_cert != has_key) {
      return absl::InvalidArgumentError(absl::StrCat(uwhere, ": a client certificate needs its key (and the key its certificate)"));
    }
  }
  return config;
}

absl::StatusOr<RestConfig> LoadKubeconfig(const std::vector<std::string>& paths, const std::string& context) {
  std::vector<KubeconfigFile> files;
  for (const auto& p : paths) {
    if (p.empty()) continue;
    auto text = ReadFile(p);
    if (!text.ok()) {
      if (paths.size() > 1) continue;  // KUBECONFIG lists may name missing files.
      return text.status();
    }
    files.push_back({p, *std::move(text)});
  }
  if (files.empty()) return absl::NotFoundError("kubeconfig: none of the files could be read");
  return ParseKubeconfig(files, context);
}

absl::StatusOr<RestConfig> InClusterConfig(const std::map<std::string, std::string>& env, const InClusterPaths& paths) {
  auto host = env.find("KUBERNETES_SERVICE_HOST");
  auto port = env.find("KUBERNETES_SERVICE_PORT");
  if (host == env.end() || host->second.empty() || port == env.end() || port->second.empty()) {
    return absl::FailedPreconditionError("in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  if (!std::filesystem::exists(paths.token_file)) {
    return absl::FailedPreconditionError(absl::StrCat("in-cluster: no service account token at ", paths.token_file));
  }
  RestConfig config;
  config.scheme = "https";
  config.host = host->second;
  config.port = port->second;
  config.bearer_token_file = paths.token_file;
  config.ca_file = paths.ca_file;
  if (auto ns = ReadFile(paths.namespace_file); ns.ok()) config.default_namespace = *ns;
  config.source = "in-cluster";
  return config;
}

absl::StatusOr<RestConfig> ResolveRestConfig(const std::string& kubeconfig_flag, const std::string& context,
                                             const std::map<std::string, std::string>& env) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfig({kubeconfig_flag}, context);
  if (auto it = env.find("KUBECONFIG"); it != env.end() && !it->second.empty()) {
    return LoadKubeconfig(absl::StrSplit(it->second, ':', absl::SkipEmpty()), context);
  }
  if (auto it = env.find("KUBERNETES_SERVICE_HOST"); it != env.end() && !it->second.empty()) {
    return InClusterConfig(env);
  }
  if (auto it = env.find("HOME"); it != env.end()) {
    std::string path = absl::StrCat(it->second, "/.kube/config");
    if (std::filesystem::exists(path)) return LoadKubeconfig({path}, context);
  }
  return absl::NotFoundError("no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a cluster");
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq != absl::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

}  // namespace podium::kube
