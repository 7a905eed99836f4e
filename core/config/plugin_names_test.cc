// The plugin names a file's text gives before any plugin is loaded (plugin_names.h).
#include "core/config/plugin_names.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

using Names = std::set<std::string>;

TEST(PluginNamesIn, TakesTheNamesInsidePluginBlocksAtAnyDepth) {
  EXPECT_EQ(PluginNamesIn(R"(
    name: "suite"
    experiment {
      name: "a"
      plugin { bucket_sizing { bucket_cap_mb: 25 } }
      plugin: { bf16 {} }
      plugin < static_graph: {} >
      model { preset: VIT_TINY_TEST }
    }
    experiment { name: "b" plugin { powersgd { matrix_approximation_rank: 4 } } }
  )"),
            (Names{"bf16", "bucket_sizing", "powersgd", "static_graph"}));
}

TEST(PluginNamesIn, SkipsCommentsStringsAndOtherBlocks) {
  EXPECT_EQ(PluginNamesIn(R"(
    # plugin { fp8 {} }
    description: "plugin { zero_copy {} }"
    model { preset: VIT_TINY_TEST }
    plugin { optimizer_overlap {} }  # and no_communication { }
  )"),
            (Names{"optimizer_overlap"}));
}

TEST(PluginNamesIn, TakesANameWrittenAsAField) {
  EXPECT_EQ(PluginNamesIn(R"(plugin { name: "fp8" })"), (Names{"fp8"}));
}

TEST(PluginNamesIn, StopsWhereTheTextStopsTokenizing) {
  EXPECT_EQ(PluginNamesIn("plugin { bf16 {} } plugin { \"unterminated"), (Names{"bf16"}));
  EXPECT_EQ(PluginNamesIn(""), Names{});
  EXPECT_EQ(PluginNamesIn("plugin { bf16"), Names{});  // no block opened after its name
}

}  // namespace
}  // namespace ddplab
