#include "common/translate/quantity.h"

#include <gtest/gtest.h>

namespace podium::k8s {
namespace {

struct Case {
  const char* text;
  int64_t milli;
  int64_t value;
};

TEST(QuantityTest, ParsesKubernetesGrammar) {
  const Case cases[] = {
      {"0", 0, 0},
      {"1", 1000, 1},
      {"500m", 500, 1},  // Value() rounds up, as Kubernetes does.
      {"0.5", 500, 1},
      {".5", 500, 1},
      {"5.", 5000, 5},
      {"0.0001", 1, 1},  // CPU rounds up to the next milli.
      {"1.0005", 1001, 2},
      {"100m", 100, 1},
      {"2k", 2000000, 2000},
      {"1M", 1000000000, 1000000},
      {"1G", 1000000000000, 1000000000},
      {"1T", 1000000000000000, 1000000000000},
      {"1P", 1000000000000000000, 1000000000000000},
      {"1Ki", 1024000, 1024},
      {"1Mi", 1048576000, 1048576},
      {"500Mi", 524288000000, 524288000},
      {"1.5Gi", 1610612736000, 1610612736},
      {"32Gi", 34359738368000, 34359738368},
      {"1Ti", 1099511627776000, 1099511627776},
      {"1e3", 1000000, 1000},
      {"1E3", 1000000, 1000},
      {"1.5e3", 1500000, 1500},
      {"2e-3", 2, 1},
      {"1e+2", 100000, 100},
      {"+3", 3000, 3},
      {"1n", 1, 1},
      {"1500u", 2, 1},
      {"-0", 0, 0},
  };
  for (const Case& c : cases) {
    auto q = Quantity::Parse(c.text);
    ASSERT_TRUE(q.ok()) << c.text << ": " << q.status();
    EXPECT_EQ(*q->MilliValue(), c.milli) << c.text;
    EXPECT_EQ(*q->Value(), c.value) << c.text;
  }
}

TEST(QuantityTest, ExaAndNegative) {
  auto e = Quantity::Parse("2E");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e->Value(), 2000000000000000000);
  EXPECT_FALSE(e->MilliValue().ok());  // Overflows int64.
  auto ei = Quantity::Parse("1Pi");
  ASSERT_TRUE(ei.ok());
  EXPECT_EQ(*ei->Value(), 1125899906842624);
  auto neg = Quantity::Parse("-100m");
  ASSERT_TRUE(neg.ok());
  EXPECT_TRUE(neg->negative());
  EXPECT_EQ(*neg->MilliValue(), -100);
}

TEST(QuantityTest, RefusesInvalid) {
  for (const char* text : {"", "12x", "x", "1.2.3", "1KiB", "1ki", "1mi", "m", ".", "1e", "1e+", "1 Gi", " 1",
                           "1Gi ", "--1", "1,5", "0x10", "1Mm", "e3", "9223372036854775808999999999999999999999999999"}) {
    EXPECT_FALSE(Quantity::Parse(text).ok()) << "\"" << text << "\"";
  }
  auto err = Quantity::Parse("12x");
  EXPECT_EQ(err.status().message(), "invalid quantity \"12x\"");
}

TEST(QuantityTest, RefusesOverflow) {
  auto q = Quantity::Parse("100Ei");
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(q->Value().ok());
}

}  // namespace
}  // namespace podium::k8s
