#include "server/validation.h"

#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

v1::ObjectEvent GoodPod() {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* p = e.mutable_pod();
  p->mutable_meta()->set_uid("u1");
  p->mutable_meta()->set_namespace_("shop");
  p->mutable_meta()->set_name("web-1");
  p->add_containers()->mutable_requests()->set_milli_cpu(100);
  return e;
}

TEST(ValidateObjectEvent, AcceptsAWellFormedPod) {
  EXPECT_TRUE(ValidateObjectEvent(GoodPod()).ok());
  EXPECT_EQ(DescribeObject(GoodPod()), "Pod shop/web-1");
}

TEST(ValidateObjectEvent, NamesTheFieldThatIsWrong) {
  struct Case {
    const char* name;
    std::function<void(v1::ObjectEvent&)> breakit;
    const char* field;
  } cases[] = {
      {"no uid", [](auto& e) { e.mutable_pod()->mutable_meta()->clear_uid(); }, "metadata.uid"},
      {"negative cpu",
       [](auto& e) { e.mutable_pod()->mutable_containers(0)->mutable_requests()->set_milli_cpu(-1); },
       "spec.containers[0].resources.requests.cpu"},
      {"negative extended resource",
       [](auto& e) {
         (*e.mutable_pod()->mutable_containers(0)->mutable_requests()->mutable_scalar())["nvidia.com/gpu"] = -2;
       },
       "spec.containers[0].resources.requests.nvidia.com/gpu"},
      {"host port out of range",
       [](auto& e) { e.mutable_pod()->mutable_containers(0)->add_ports()->set_host_port(70000); },
       "spec.containers[0].ports[0].hostPort"},
      {"no type", [](auto& e) { e.clear_type(); }, "type"},
      {"taint without effect",
       [](auto& e) {
         auto* n = e.mutable_node();
         n->mutable_meta()->set_uid("n1");
         n->mutable_meta()->set_name("edge-1");
         n->add_taints()->set_key("edge");
       },
       "spec.taints[0].effect"},
  };
  for (const auto& c : cases) {
    v1::ObjectEvent e = GoodPod();
    c.breakit(e);
    absl::Status s = ValidateObjectEvent(e);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(s.message().substr(0, std::string(c.field).size()), c.field) << c.name << ": " << s;
  }
}

}  // namespace
}  // namespace podium::scheduler
