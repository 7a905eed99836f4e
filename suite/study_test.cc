// The registry: studies run by name whatever order they registered in, one per name, and
// each decides on the rows before the recommendations are made.
#include "suite/study.h"

#include <string>
#include <vector>

#include "core/report/report_testing.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

// Marks the first row's experiment with its name, and the recommendations with what it
// saw of the rows then.
class Marker : public Study {
 public:
  explicit Marker(std::string name) : name_(std::move(name)) {}
  std::string Name() const override { return name_; }
  void DecideRows(const std::vector<v1::RunResult>& runs, v1::SuiteReport& report) const override {
    v1::ReportSection* s = report.add_sections();
    s->set_study(name_);
    s->set_heading(name_ + " heading");
    s->add_lines(std::to_string(runs.size()) + " runs");
  }
  void AddToRecommendations(v1::SuiteReport& report) const override {
    for (v1::Recommendation& rec : *report.mutable_recommendations()) rec.mutable_text()->append(" [" + name_ + "]");
  }

 private:
  std::string name_;
};

class Zeta : public Marker {
 public:
  Zeta() : Marker("zeta") {}
};
class Alpha : public Marker {
 public:
  Alpha() : Marker("alpha") {}
};
class AlphaAgain : public Marker {
 public:
  AlphaAgain() : Marker("alpha") {}
};

DDPLAB_REGISTER_STUDY(Zeta)
DDPLAB_REGISTER_STUDY(Alpha)
DDPLAB_REGISTER_STUDY(AlphaAgain)

TEST(StudyTest, ByNameOncePerName) {
  EXPECT_EQ(RegisteredStudyNames(), (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_EQ(RegisteredStudies().size(), 2u);
}

TEST(StudyTest, EachDecidesThenAddsToTheRecommendations) {
  const std::vector<v1::RunResult> runs{testing::RunOf("single_gpu", 1, 12.5, false), testing::RunOf("naive_ddp", 2, 11.0, true),
                                        testing::RunOf("cap25", 2, 11.8, true)};
  const v1::SuiteReport report = MakeReport(runs, {}, RegisteredStudies());
  ASSERT_EQ(report.sections_size(), 2);
  EXPECT_EQ(report.sections(0).study(), "alpha");
  EXPECT_EQ(report.sections(1).study(), "zeta");
  EXPECT_EQ(report.sections(0).lines(0), "3 runs");
  ASSERT_EQ(report.recommendations_size(), 1);
  const std::string& text = report.recommendations(0).text();
  const std::string tail = " [alpha] [zeta]";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail) << text;
  const std::string md = FormatMarkdown(report);
  EXPECT_NE(md.find("\nalpha heading:\n- 3 runs\n"), std::string::npos) << md;
  EXPECT_LT(md.find("alpha heading"), md.find("zeta heading"));
}

}  // namespace
}  // namespace ddplab
