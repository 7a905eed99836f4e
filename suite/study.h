// A study: one question the suite answers from its runs, in a package of its own that
// owns its settings, its decision and its part of the report. The suite knows no study
// by name: a study registers itself, and the report asks every registered one.
//
//   // studies/bound/bound_study.cc
//   class BoundStudy : public ddplab::Study {
//    public:
//     std::string Name() const override { return "bound"; }
//     void DecideRows(const std::vector<v1::RunResult>& runs, v1::SuiteReport& report) const override;
//   };
//   DDPLAB_REGISTER_STUDY(BoundStudy);
//
//   // studies/BUILD.bazel, the one line that adds it to vit_ddp:
//   #     "//studies/bound",
//
// Note [A study in one package]
// Adding a study is its package (a ddplab_cc_library with alwayslink = True, whose .cc
// ends in DDPLAB_REGISTER_STUDY) and one line in studies/BUILD.bazel's `registered`. A
// study decides on the report's rows before the recommendations are made, so that they
// may read its fields; it writes its lines as a section (SuiteReport.sections), which
// report.md prints after the table and report.json carries. Studies run in the order
// of their names, so that a report is the same whatever order the linker gave their
// registrations. A study registered here adds to the report only: the runs it needs are
// the suite's (the bound reads the rows and the single-process run). The studies that
// decide which runs train decide it in their packages, and the suite's loop
// (experiments/suite_runner.cc) asks them batch by batch: the repetitions' rounds
// (studies/repetitions, RepetitionRounds), the convergence check's walk down the list
// (studies/convergence, CheckWalk); the tuner (tune/) asks for its runs through
// tune::Runner. That loop still names those three.
#ifndef DDPLAB_SUITE_STUDY_H_
#define DDPLAB_SUITE_STUDY_H_

#include <memory>
#include <string>
#include <vector>

#include "core/report/report.h"

namespace ddplab {

class Study : public ReportContribution {
 public:
  // Unique among the registered studies, e.g. "bound"; names the section it writes.
  virtual std::string Name() const = 0;
};

// Adds `study` to those every report asks (at static initialization: DDPLAB_REGISTER_STUDY).
// Names are unique: a second study of a name is left out and said on stderr then (which
// of two is second depends on the link order).
void RegisterStudy(std::unique_ptr<Study> study);

// Every registered study, by name; what MakeReport takes.
std::vector<const ReportContribution*> RegisteredStudies();

// The names of the registered studies, in the order they run.
std::vector<std::string> RegisteredStudyNames();

}  // namespace ddplab

// Registers a default-constructed `Type` when the program starts.
#define DDPLAB_REGISTER_STUDY(Type)                                          \
  namespace {                                                                \
  [[maybe_unused]] const bool ddplab_study_registered_##Type = [] {          \
    ::ddplab::RegisterStudy(std::make_unique<Type>());                       \
    return true;                                                             \
  }();                                                                       \
  }

#endif  // DDPLAB_SUITE_STUDY_H_
