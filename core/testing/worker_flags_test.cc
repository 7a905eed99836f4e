#include "core/testing/worker_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

TEST(WorkerFlagsTest, RoundTripsFlagsWithTabsNewlinesQuotesAndBackslashes) {
  const std::vector<std::string> flags{"--plugins=plugin { bf16 {} }\nplugin {\tstatic_graph {} }",
                                       "--name=\"a\\b\"", "", "--steps=2"};
  const std::string line = EncodeWorkerFlags(flags);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  absl::StatusOr<std::vector<std::string>> back = DecodeWorkerFlags(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, flags);
}

TEST(WorkerFlagsTest, NoFlagsIsAnEmptyLine) {
  EXPECT_EQ(EncodeWorkerFlags({}), "");
  absl::StatusOr<std::vector<std::string>> back = DecodeWorkerFlags("");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
}

TEST(WorkerFlagsTest, ABrokenEscapeSaysWhichFlag) {
  absl::StatusOr<std::vector<std::string>> back = DecodeWorkerFlags("--a=1\t--b=\\x");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("flag 2 of the task"), std::string::npos) << back.status();
}

}  // namespace
}  // namespace ddplab
