#include "common/tls/pem_file.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace podium::tls {

absl::Status CheckPemFile(absl::string_view flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is not PEM (no -----BEGIN line)"));
  }
  return absl::OkStatus();
}

}  // namespace podium::tls
