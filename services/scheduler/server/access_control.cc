#include "server/access_control.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpc/grpc_security_constants.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/echo.h"

namespace podium::scheduler {
namespace {

constexpr size_t kMaxTokenFileBytes = 1 << 20;
constexpr char kAuthorization[] = "authorization";

// One CSV line: fields separated by commas, a field may be "quoted" (and
// then holds commas; "" is a quote), as Go's encoding/csv reads the file.
absl::StatusOr<std::vector<std::string>> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return absl::InvalidArgumentError("unterminated quote");
  return fields;
}

bool IsLocalSecurity(const grpc::AuthContext& context) {
  for (const auto& v : context.FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
    if (v == "local") return true;
  }
  return false;
}

// RFC 2253 "CN=alice,O=podium:admins,O=ops" -> the values of `attr`.
std::vector<std::string> SubjectAttribute(absl::string_view subject, absl::string_view attr) {
  std::vector<std::string> out;
  std::string current;
  auto flush = [&] {
    absl::string_view rdn = absl::StripAsciiWhitespace(current);
    if (absl::ConsumePrefix(&rdn, attr) && absl::ConsumePrefix(&rdn, "=")) out.emplace_back(rdn);
    current.clear();
  };
  for (size_t i = 0; i < subject.size(); ++i) {
    if (subject[i] == '\\' && i + 1 < subject.size()) {
      current += subject[++i];
    } else if (subject[i] == ',' || subject[i] == '+') {
      flush();
    } else {
      current += subject[i];
    }
  }
  flush();
  return out;
}

// The verified client certificate's identity, if the connection has one.
std::optional<CallerIdentity> CertificateIdentity(const grpc::AuthContext& context) {
  if (!context.IsPeerAuthenticated()) return std::nullopt;
  CallerIdentity id;
  for (const auto& v : context.FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
    id.user.assign(v.data(), v.size());
    break;
  }
  if (id.user.empty()) return std::nullopt;
  for (const auto& v : context.FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
    id.groups = SubjectAttribute(absl::string_view(v.data(), v.size()), "O");
    break;
  }
  return id;
}

std::string Describe(const CallerIdentity& id) { return absl::StrCat("user \"", Echo(id.user), "\""); }

}  // namespace

// --- TokenFile ---------------------------------------------------------------

absl::StatusOr<absl::flat_hash_map<std::string, CallerIdentity>> TokenFile::Parse(const std::string& content,
                                                                                  const std::string& path) {
  absl::flat_hash_map<std::string, CallerIdentity> tokens;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(content, '\n')) {
    ++line_no;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = absl::StrCat(path, ":", line_no);
    auto fields = SplitCsvLine(line);
    if (!fields.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", fields.status().message()));
    if (fields->size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": want token,user,uid[,\"group1,group2\"], got ",
                                                     fields->size(), " field(s)"));
    }
    const std::string& token = (*fields)[0];
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": token: empty"));
    for (char c : token) {
      if (absl::ascii_isspace(static_cast<unsigned char>(c)) || !absl::ascii_isprint(static_cast<unsigned char>(c))) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": token: only printable characters, no spaces"));
      }
    }
    CallerIdentity id;
    id.user = (*fields)[1];
    if (id.user.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": user: empty"));
    if (fields->size() >= 4) {
      for (absl::string_view g : absl::StrSplit((*fields)[3], ',', absl::SkipWhitespace())) {
        id.groups.emplace_back(absl::StripAsciiWhitespace(g));
      }
    }
    if (!tokens.emplace(token, std::move(id)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": token: listed twice"));
    }
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Load(const std::string& path) {
  std::unique_ptr<TokenFile> file(new TokenFile(path));
  absl::MutexLock lock(&file->mu_);
  if (absl::Status s = file->Reload(); !s.ok()) return s;
  return file;
}

absl::Status TokenFile::Reload() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("token file ", path_, ": ", std::strerror(errno)));
  }
  const FileVersion version{st.st_ino, st.st_size, st.st_mtim};
  if (version == version_ && last_error_.ok()) return absl::OkStatus();
  if (static_cast<size_t>(st.st_size) > kMaxTokenFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path_, ": larger than 1 MiB"));
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("token file ", path_, ": cannot open"));
  std::ostringstream content;
  content << in.rdbuf();
  auto tokens = Parse(content.str(), path_);
  version_ = version;
  if (!tokens.ok()) return tokens.status();
  tokens_ = std::move(*tokens);
  return absl::OkStatus();
}

std::optional<CallerIdentity> TokenFile::Lookup(const std::string& token) {
  absl::MutexLock lock(&mu_);
  // A file being rewritten may not parse for a moment: keep the last tokens.
  last_error_ = Reload();
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return std::nullopt;
  return it->second;
}

absl::Status TokenFile::last_reload_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

// --- the policy --------------------------------------------------------------

MethodAccess ClassifyMethod(const std::string& path) {
  static const char* const kReadOnly[] = {
      "/podium.v1.Admin/ListQueuedPods", "/podium.v1.Admin/ExplainPod", "/podium.v1.Admin/DumpCache",
      "/podium.v1.Admin/ListPlugins",    "/podium.v1.Admin/WatchDecisions", "/podium.v1.Admin/GetStatus",
      "/podium.v1.Admin/WatchDecisionBatches",
  };
  for (const char* m : kReadOnly) {
    if (path == m) return MethodAccess::kRead;
  }
  if (absl::StartsWith(path, "/grpc.health.v1.Health/") ||
      absl::StartsWith(path, "/grpc.reflection.v1alpha.ServerReflection/") ||
      absl::StartsWith(path, "/grpc.reflection.v1.ServerReflection/")) {
    return MethodAccess::kRead;
  }
  if (path == "/podium.v1.Cluster/Sync") return MethodAccess::kClusterSync;
  // An Admin RPC not listed above changes something until shown otherwise.
  if (absl::StartsWith(path, "/podium.v1.Admin/")) return MethodAccess::kMutate;
  return MethodAccess::kUnknown;
}

absl::Status Authorize(const AccessPolicy& policy, const std::string& method,
                       const std::optional<CallerIdentity>& identity, bool local) {
  const std::string name = Echo(absl::StripPrefix(method, "/"));
  switch (ClassifyMethod(method)) {
    case MethodAccess::kRead:
      if (identity || local) return absl::OkStatus();
      return absl::UnauthenticatedError(
          absl::StrCat(name, " needs credentials here (a bearer token or a client certificate)"));
    case MethodAccess::kMutate: {
      if (!identity) {
        return absl::UnauthenticatedError(
            absl::StrCat(name, " changes the scheduler: it needs a bearer token or a client certificate"));
      }
      for (const auto& g : identity->groups) {
        if (g == policy.admin_group) return absl::OkStatus();
      }
      return absl::PermissionDeniedError(absl::StrCat(Describe(*identity), " may not call ", name,
                                                      ": not in group \"", policy.admin_group, "\""));
    }
    case MethodAccess::kClusterSync:
      if (!identity) {
        if (local && policy.adapter_identity.empty()) return absl::OkStatus();
        return absl::UnauthenticatedError(
            absl::StrCat(name, " needs the adapter's credentials (a bearer token or a client certificate)"));
      }
      if (!policy.adapter_identity.empty() && identity->user == policy.adapter_identity) return absl::OkStatus();
      return absl::PermissionDeniedError(
          absl::StrCat(Describe(*identity), " is not the adapter this scheduler accepts",
                       policy.adapter_identity.empty() ? " (none is configured)" : ""));
    case MethodAccess::kUnknown:
      break;
  }
  return absl::PermissionDeniedError(absl::StrCat(name, ": not a method this scheduler serves to anyone"));
}

grpc::Status AccessControl::Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                                    OutputMetadata* consumed_auth_metadata, OutputMetadata*) {
  std::string method;
  std::optional<std::string> authorization;
  for (const auto& [key, value] : auth_metadata) {
    if (key == ":path") method.assign(value.data(), value.size());
    if (key == kAuthorization) authorization.emplace(value.data(), value.size());
  }
  std::optional<CallerIdentity> identity;
  if (authorization) {
    // A token that is given must be good, even when a certificate would do.
    absl::string_view v = *authorization;
    if (!absl::ConsumePrefix(&v, "Bearer ") || v.empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "authorization: want \"Bearer TOKEN\" (podiumctl --token-file)");
    }
    if (policy_.tokens == nullptr) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "bearer tokens are not accepted here (the scheduler has no --token-auth-file)");
    }
    identity = policy_.tokens->Lookup(std::string(v));
    if (!identity) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid bearer token");
    consumed_auth_metadata->insert({kAuthorization, *authorization});
  } else {
    identity = CertificateIdentity(*context);
  }
  const bool local = local_ && IsLocalSecurity(*context);
  absl::Status s = Authorize(policy_, method, identity, local);
  if (!s.ok()) return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
  if (identity) context->AddProperty(kCallerUserProperty, identity->user);
  return grpc::Status::OK;
}

}  // namespace podium::scheduler
