// podiumctl queue: the scheduling queue, per pod.
#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "format.h"

namespace podium::ctl {
namespace {

// Queue order in the table: where a pod is closest to being scheduled first.
int QueueRank(v1::QueueName q) {
  switch (q) {
    case v1::ACTIVE: return 0;
    case v1::BACKOFF: return 1;
    case v1::UNSCHEDULABLE: return 2;
    case v1::GATED: return 3;
    case v1::IN_FLIGHT: return 4;
    case v1::WAITING_ON_PERMIT: return 5;
    default: return 6;
  }
}

const char* const kQueueNames[] = {"active", "backoff", "unschedulable", "gated", "in-flight", "waiting-on-permit"};

v1::QueueName QueueFromString(const std::string& q) {
  if (q == "active") return v1::ACTIVE;
  if (q == "backoff") return v1::BACKOFF;
  if (q == "unschedulable") return v1::UNSCHEDULABLE;
  if (q == "gated") return v1::GATED;
  if (q == "in-flight") return v1::IN_FLIGHT;
  if (q == "waiting-on-permit") return v1::WAITING_ON_PERMIT;
  return v1::QUEUE_UNSPECIFIED;
}

boost::json::array Strings(const google::protobuf::RepeatedPtrField<std::string>& in) {
  boost::json::array a;
  for (const auto& s : in) a.emplace_back(s);
  return a;
}

std::string Str(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_null()) return "";
  if (v.is_int64()) return absl::StrCat(v.as_int64());
  if (v.is_uint64()) return absl::StrCat(v.as_uint64());
  return "";
}

}  // namespace

std::string QueueNameString(v1::QueueName q) {
  switch (q) {
    case v1::ACTIVE: return "active";
    case v1::BACKOFF: return "backoff";
    case v1::UNSCHEDULABLE: return "unschedulable";
    case v1::GATED: return "gated";
    case v1::IN_FLIGHT: return "in-flight";
    case v1::WAITING_ON_PERMIT: return "waiting-on-permit";
    default: return "unknown";
  }
}

boost::json::object QueuedPodJson(const v1::QueuedPod& pod, absl::Time now) {
  boost::json::object o;
  o["namespace"] = pod.pod().namespace_();
  o["name"] = pod.pod().name();
  o["uid"] = pod.pod().uid();
  o["queue"] = QueueNameString(pod.queue());
  o["priority"] = pod.priority();
  o["attempts"] = pod.attempts();
  o["enqueued"] = JsonTimestamp(pod.enqueued_us());
  o["age_seconds"] =
      pod.enqueued_us() == 0 ? boost::json::value(nullptr)
                             : boost::json::value(absl::ToInt64Seconds(now - absl::FromUnixMicros(pod.enqueued_us())));
  // The expiry matters only while it is ahead (a pod in backoffQ).
  const bool backing_off = pod.backoff_expiry_us() != 0 && absl::FromUnixMicros(pod.backoff_expiry_us()) > now;
  o["backoff_expiry"] = JsonTimestamp(pod.backoff_expiry_us());
  o["backoff_remaining_seconds"] =
      backing_off ? boost::json::value(absl::ToDoubleSeconds(absl::FromUnixMicros(pod.backoff_expiry_us()) - now))
                  : boost::json::value(nullptr);
  o["unschedulable_plugins"] = Strings(pod.unschedulable_plugins());
  o["pending_plugins"] = Strings(pod.pending_plugins());
  o["message"] = pod.message();
  o["gated_by"] = pod.gated_by();
  o["permit_wait"] = pod.has_permit_wait() ? boost::json::value(PermitWaitJson(pod.permit_wait(), now))
                                           : boost::json::value(nullptr);
  return o;
}

boost::json::object PermitWaitJson(const v1::PermitWait& wait, absl::Time now) {
  boost::json::object o;
  o["node"] = wait.node_name();
  o["waiting_since"] = JsonTimestamp(wait.waiting_since_us());
  o["waited_seconds"] =
      wait.waiting_since_us() == 0
          ? boost::json::value(nullptr)
          : boost::json::value(absl::ToDoubleSeconds(now - absl::FromUnixMicros(wait.waiting_since_us())));
  boost::json::array plugins;
  for (const auto& p : wait.plugins()) {
    plugins.push_back({{"name", p.name()},
                       {"deadline", JsonTimestamp(p.deadline_us())},
                       {"remaining_seconds", absl::ToDoubleSeconds(absl::FromUnixMicros(p.deadline_us()) - now)}});
  }
  o["plugins"] = std::move(plugins);
  return o;
}

std::string PermitPluginsCell(const boost::json::value& permit_wait) {
  if (!permit_wait.is_object()) return "";
  std::vector<std::string> names;
  for (const auto& p : permit_wait.at("plugins").as_array()) names.push_back(Str(p.at("name")));
  return absl::StrJoin(names, ",");
}

// The earliest Permit deadline, as "in 25s" (the pod is rejected then).
std::string PermitDeadlineCell(const boost::json::value& permit_wait) {
  if (!permit_wait.is_object()) return "-";
  std::optional<double> earliest;
  for (const auto& p : permit_wait.at("plugins").as_array()) {
    const double r = p.at("remaining_seconds").as_double();
    if (!earliest || r < *earliest) earliest = r;
  }
  if (!earliest) return "-";
  if (*earliest <= 0) return "due";
  return absl::StrCat("in ", FormatAge(absl::Ceil(absl::Seconds(*earliest), absl::Seconds(1))));
}

boost::json::value QueueDocument(const std::vector<v1::QueuedPod>& pods, int server_total, absl::Time now,
                                 const std::string& continue_token, bool server_order) {
  std::vector<const v1::QueuedPod*> sorted;
  for (const auto& p : pods) sorted.push_back(&p);
  if (!server_order) {
    std::stable_sort(sorted.begin(), sorted.end(), [](const v1::QueuedPod* a, const v1::QueuedPod* b) {
      return std::make_tuple(QueueRank(a->queue()), a->pod().namespace_(), a->pod().name()) <
             std::make_tuple(QueueRank(b->queue()), b->pod().namespace_(), b->pod().name());
    });
  }
  boost::json::object counts;
  for (const char* q : kQueueNames) counts[q] = 0;
  boost::json::array items;
  for (const v1::QueuedPod* p : sorted) {
    items.push_back(QueuedPodJson(*p, now));
    const std::string q = QueueNameString(p->queue());
    if (counts.contains(q)) counts[q] = counts[q].as_int64() + 1;
  }
  boost::json::object doc;
  doc["pods"] = std::move(items);
  doc["counts"] = std::move(counts);
  doc["total"] = server_total;
  // kubectl's metadata.continue: empty when this is the end of the listing.
  doc["continue"] = continue_token;
  return doc;
}

std::string QueueTable(const boost::json::value& doc, bool wide) {
  std::vector<std::string> headers = {"NAMESPACE", "NAME",        "QUEUE",     "ATTEMPTS",
                                      "AGE",       "BACKOFF",     "REJECTED BY", "WAITING ON"};
  if (wide) {
    for (const char* h : {"NODE", "PERMIT DEADLINE", "PRIORITY", "PENDING PLUGINS", "UID", "MESSAGE"}) {
      headers.push_back(h);
    }
  }
  Table table(headers);
  const auto& pods = doc.at("pods").as_array();
  for (const auto& v : pods) {
    const auto& p = v.as_object();
    const auto& remaining = p.at("backoff_remaining_seconds");
    std::vector<std::string> row = {
        Str(p.at("namespace")),
        Str(p.at("name")),
        Str(p.at("queue")),
        Str(p.at("attempts")),
        p.at("age_seconds").is_null() ? "-" : FormatAge(absl::Seconds(p.at("age_seconds").as_int64())),
        // Rounded up, so a pod still in backoff never shows "0s".
        remaining.is_null() ? "-"
                            : FormatAge(absl::Ceil(absl::Seconds(remaining.as_double()), absl::Seconds(1))),
        JoinCell(p.at("unschedulable_plugins")),
        // What holds it: the Permit plugins it waits on, or the PreEnqueue
        // plugin that gates it.
        p.at("permit_wait").is_object() ? PermitPluginsCell(p.at("permit_wait")) : Str(p.at("gated_by")),
    };
    if (wide) {
      const auto& wait = p.at("permit_wait");
      row.push_back(wait.is_object() ? Str(wait.at("node")) : "");
      row.push_back(PermitDeadlineCell(wait));
      row.push_back(Str(p.at("priority")));
      row.push_back(JoinCell(p.at("pending_plugins")));
      row.push_back(Str(p.at("uid")));
      row.push_back(Str(p.at("message")));
    }
    table.AddRow(std::move(row));
  }
  const auto& counts = doc.at("counts").as_object();
  std::string summary = absl::StrCat(pods.size(), pods.size() == 1 ? " pod" : " pods");
  const char* sep = ": ";
  for (const char* q : kQueueNames) {
    absl::StrAppend(&summary, sep, counts.at(q).as_int64(), " ", q);
    sep = ", ";
  }
  const int64_t total = doc.at("total").as_int64();
  if (total > static_cast<int64_t>(pods.size())) absl::StrAppend(&summary, " (", total, " in the scheduler's answer)");
  return absl::StrCat(table.Render(), "\n", summary, "\n");
}

absl::StatusOr<QueueListing> ListQueue(AdminClient& client, const Invocation& inv) {
  v1::ListQueuedPodsRequest request;
  request.set_namespace_(inv.namespace_);
  if (inv.queue) request.set_queue(QueueFromString(*inv.queue));
  request.set_plugin(inv.plugin);
  request.set_page_token(inv.continue_token);
  QueueListing listing;
  bool first = true;
  for (;;) {
    int32_t page_size = inv.chunk_size;
    if (inv.limit > 0) {
      page_size = static_cast<int32_t>(
          std::min<int64_t>(page_size, inv.limit - static_cast<int64_t>(listing.pods.size())));
    }
    request.set_page_size(page_size);
    auto response = client.ListQueuedPods(request);
    if (!response.ok()) {
      // The scheduler names its field; the operator typed --continue.
      if (absl::IsInvalidArgument(response.status()) && first && !inv.continue_token.empty() &&
          absl::StrContains(response.status().message(), "page_token")) {
        return absl::InvalidArgumentError(absl::StrCat("--continue: \"", inv.continue_token,
                                                       "\" is not a page token of this scheduler (give the one a "
                                                       "--limit run printed, with the same filters)"));
      }
      return response.status();
    }
    // The total of the first page: later pages see the live queue, which moves.
    if (first) listing.total = response->total();
    first = false;
    for (const auto& p : response->pods()) listing.pods.push_back(p);
    const std::string& next = response->next_page_token();
    if (next.empty()) break;
    if (inv.limit > 0 && static_cast<int64_t>(listing.pods.size()) >= inv.limit) {
      listing.continue_token = next;
      break;
    }
    // A server that hands out tokens without moving on cannot keep podiumctl looping.
    if (next == request.page_token() || response->pods().empty()) {
      return absl::InternalError(absl::StrCat("podium.v1.Admin/ListQueuedPods: the scheduler at ", client.address(),
                                              " keeps answering with page token \"", next,
                                              "\" without reaching the end"));
    }
    request.set_page_token(next);
  }
  return listing;
}

std::string NextPageCommand(const Invocation& inv, const std::string& token) {
  std::string command = "podiumctl queue";
  auto flag = [&](const std::string& name, const std::string& value) {
    absl::StrAppend(&command, " ", name, " ", ShellWord(value));
  };
  if (!inv.namespace_.empty()) flag("-n", inv.namespace_);
  if (inv.queue) flag("--queue", *inv.queue);
  if (!inv.plugin.empty()) flag("--plugin", inv.plugin);
  flag("--limit", absl::StrCat(inv.limit));
  if (inv.chunk_size != Invocation().chunk_size) flag("--chunk-size", absl::StrCat(inv.chunk_size));
  flag("--continue", token);
  return command;
}

absl::Status RunQueue(CommandContext& ctx) {
  const Invocation& inv = ctx.invocation;
  auto listing = ListQueue(ctx.client, inv);
  if (!listing.ok()) return listing.status();
  std::vector<v1::QueuedPod>& pods = listing->pods;
  const int total = listing->total;
  // A page keeps the scheduler's order: sorted on its own, it would not join
  // up with the pages before and after it.
  const bool paged = inv.limit > 0 || !inv.continue_token.empty();
  boost::json::value doc = QueueDocument(pods, total, ctx.now, listing->continue_token, paged);
  const bool table = inv.output == OutputFormat::kTable || inv.output == OutputFormat::kWide;
  if (!listing->continue_token.empty() && inv.output != OutputFormat::kJson && inv.output != OutputFormat::kYaml) {
    // As kubectl does with --limit: where the next page starts, on stderr so
    // that -o name stays a plain list.
    ctx.err << "More pods: " << Printable(NextPageCommand(inv, listing->continue_token)) << "\n";
  }
  if (pods.empty() && table) {
    ctx.err << "No pods in the scheduling queue"
            << (inv.namespace_.empty() ? "" : " of namespace " + Printable(inv.namespace_)) << ".\n";
    return absl::OkStatus();
  }
  PrintDocument(
      ctx, doc, [&](bool wide) { return QueueTable(doc, wide); },
      [&] {
        std::string out;
        for (const auto& p : doc.at("pods").as_array()) {
          absl::StrAppend(&out, Str(p.at("namespace")), "/", Str(p.at("name")), "\n");
        }
        return out;
      });
  return absl::OkStatus();
}

}  // namespace podium::ctl
