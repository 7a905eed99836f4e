// Note [Errors that name a field] (text_location.h): a check's error names its field as
// the status's payload, and the loader reports it at that field's file:line:column.
#include <string>

#include "absl/status/status.h"
#include "core/config/experiment.h"
#include "core/config/text_location.h"
#include "gtest/gtest.h"
#include "plugins/testing/shipped_schema.h"

namespace ddplab {
namespace {

TEST(FieldError, CarriesItsFieldBesideItsMessage) {
  const absl::Status s = FieldError(absl::StatusCode::kInvalidArgument, "data.batch_size", "too big: 3: 4");
  EXPECT_EQ(s.message(), "data.batch_size: too big: 3: 4");
  EXPECT_EQ(FieldOf(s), "data.batch_size");
  EXPECT_EQ(WhatOf(s), "too big: 3: 4");
  const absl::Status plain = absl::InvalidArgumentError("data.batch_size: looks like a field");
  EXPECT_EQ(FieldOf(plain), "");  // never read from the message
  EXPECT_EQ(WhatOf(plain), "data.batch_size: looks like a field");
}

TEST(FieldError, TheLoaderLocatesACheckErrorAtItsField) {
  const char* text =
      "name: \"x\"\n"
      "model { preset: VIT_TINY_TEST }\n"
      "data { batch_size: 4 image_size: 32 }\n"
      "steps { warmup: 1 measured: 1 }\n"
      "optimizer { sgd { learning_rate: 0.01 } }\n";
  absl::StatusOr<v1::Suite> suite =
      ParseExperimentText(text, "x.textproto", testing::ShippedSchema(), [](const v1::Experiment&) {
        return FieldError(absl::StatusCode::kInvalidArgument, "data.image_size", "refused by the check");
      });
  ASSERT_FALSE(suite.ok());
  EXPECT_EQ(suite.status().message(), "x.textproto:3:22: data.image_size: refused by the check");
  // A check's error that names no field is reported at the experiment's plugins.
  suite = ParseExperimentText(text, "x.textproto", testing::ShippedSchema(), [](const v1::Experiment&) {
    return absl::InvalidArgumentError("data.image_size: not a field error");
  });
  ASSERT_FALSE(suite.ok());
  EXPECT_NE(std::string(suite.status().message()).find("plugin: data.image_size: not a field error"),
            std::string::npos)
      << suite.status();
}

}  // namespace
}  // namespace ddplab
