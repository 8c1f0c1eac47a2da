#include "client/token_source.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"

namespace podium::kube {

TokenSource::TokenSource(std::string token, std::string file, Clock now)
    : fixed_(std::move(token)), file_(std::move(file)), now_(std::move(now)) {}

std::string TokenSource::Token() {
  if (file_.empty()) return fixed_;
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  if (now - checked_ < absl::Seconds(1) && stamp_ >= 0) return cached_;
  checked_ = now;
  struct stat st;
  if (stat(file_.c_str(), &st) != 0) return cached_.empty() ? fixed_ : cached_;
  const int64_t stamp = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec + st.st_size;
  if (stamp != stamp_) {
    std::ifstream in(file_);
    std::ostringstream s;
    s << in.rdbuf();
    if (in || in.eof()) {
      cached_ = std::string(absl::StripAsciiWhitespace(s.str()));
      stamp_ = stamp;
    }
  }
  return cached_;
}

}  // namespace podium::kube
