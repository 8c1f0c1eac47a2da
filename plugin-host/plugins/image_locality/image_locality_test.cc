#include "plugins/image_locality/image_locality.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAreArray;
using testing::FakeHandle;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;

constexpr int64_t kMB = 1024 * 1024;

struct Image {
  std::vector<std::string> names;
  int64_t size;
};
using NodeImages = std::vector<Image>;

v1::Pod PodWithImages(const std::vector<std::string>& images) {
  PodBuilder b;
  for (const std::string& image : images) b.Image(image);
  return b.Build();
}

TEST(ImageLocalityTest, Score) {
  const NodeImages node403002000 = {{{"gcr.io/40:latest", "gcr.io/40:v1"}, 40 * kMB},
                                    {{"gcr.io/300:latest", "gcr.io/300:v1"}, 300 * kMB},
                                    {{"gcr.io/2000:latest"}, 2000 * kMB}};
  const NodeImages node25010 = {{{"gcr.io/250:latest"}, 250 * kMB},
                                {{"gcr.io/10:latest", "gcr.io/10:v1"}, 10 * kMB}};
  const NodeImages node400030 = {{{"gcr.io/4000:latest"}, 4000 * kMB},
                                 {{"gcr.io/30:latest"}, 30 * kMB}};
  const NodeImages node203040 = {{{"gcr.io/20:latest"}, 20 * kMB},
                                 {{"gcr.io/30:latest"}, 30 * kMB},
                                 {{"gcr.io/40:latest"}, 40 * kMB}};
  struct Case {
    std::string name;
    v1::Pod pod;
    std::vector<NodeImages> nodes;
    std::vector<int64_t> want;
  };
  const std::vector<Case> cases = {
      {"two images spread on two nodes, prefer the larger image",
       PodWithImages({"gcr.io/40", "gcr.io/250"}),
       {node403002000, node25010},
       {0, 5}},
      {"two images on one node, prefer that node",
       PodWithImages({"gcr.io/40", "gcr.io/300"}),
       {node403002000, node25010},
       {7, 0}},
      {"above the limit, use the limit",
       PodWithImages({"gcr.io/10", "gcr.io/4000"}),
       {node400030, node25010},
       {100, 0}},
      {"a node without images lowers the spread",
       PodWithImages({"gcr.io/10", "gcr.io/4000"}),
       {node400030, node25010, {}},
       {66, 0, 0}},
      {"several small images",
       PodWithImages({"gcr.io/30", "gcr.io/40"}),
       {node203040, node400030},
       {1, 0}},
      // One container: 150MB of 1000MB -> 100 * (150 - 23) / (1000 - 23).
      {"tagged images match by tag",
       PodWithImages({"gcr.io/300:v1"}),
       {node403002000, node25010},
       {12, 0}},
      {"no images", PodWithImages({}), {node403002000}, {0}},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    FakeHandle handle;
    // What the mirror does: every name of an image, with how many nodes have it.
    absl::flat_hash_map<std::string, int32_t> num_nodes;
    for (const NodeImages& images : tc.nodes) {
      for (const Image& image : images) {
        for (const std::string& name : image.names) ++num_nodes[name];
      }
    }
    for (size_t i = 0; i < tc.nodes.size(); ++i) {
      sdk::NodeInfo& info = handle.fake_snapshot().Add(
          MakeNodeInfo(NodeBuilder("n" + std::to_string(i)).Build(), {}, i + 1));
      for (const Image& image : tc.nodes[i]) {
        for (const std::string& name : image.names) {
          info.mutable_images()[name] = sdk::ImageState{image.size, num_nodes[name]};
        }
      }
    }
    auto plugin = ImageLocality::New({}, handle);
    ASSERT_TRUE(plugin.ok());
    auto& p = dynamic_cast<ImageLocality&>(**plugin);
    sdk::PodInfoPtr pod = sdk::PodInfo::Create(tc.pod);
    sdk::CycleState state;
    const auto& nodes = handle.snapshot().Nodes();
    ASSERT_TRUE(p.PreScore(state, *pod, nodes).IsSuccess());
    EXPECT_THAT(testing::ScoreAndNormalize(p, state, *pod, nodes), ElementsAreArray(tc.want));
  }
}

TEST(ImageLocalityTest, NormalizedImageName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nginx", "nginx:latest"},
      {"nginx:1.25", "nginx:1.25"},
      {"gcr.io/40", "gcr.io/40:latest"},
      {"localhost:5000/img", "localhost:5000/img:latest"},
      {"localhost:5000/img:v2", "localhost:5000/img:v2"},
      {"img@sha256:abcd", "img@sha256:abcd"},
  };
  for (const auto& [in, want] : cases)
    EXPECT_EQ(ImageLocality::NormalizedImageName(in), want) << in;
}

}  // namespace
}  // namespace podium::plugins
