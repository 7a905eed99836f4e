#include "suite/study.h"

#include <algorithm>
#include <iostream>
#include <mutex>
#include <utility>

namespace ddplab {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Study>> studies;  // sorted by name once asked
};

// Built on first use: registrations run from other files' static initializers.
Registry& TheRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

// The studies by name.
std::vector<const Study*> Sorted() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<const Study*> out;
  for (const std::unique_ptr<Study>& s : r.studies) out.push_back(s.get());
  std::sort(out.begin(), out.end(), [](const Study* a, const Study* b) { return a->Name() < b->Name(); });
  return out;
}

}  // namespace

void RegisterStudy(std::unique_ptr<Study> study) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const std::unique_ptr<Study>& s : r.studies) {
    if (s->Name() != study->Name()) continue;
    std::cerr << "vit_ddp: two studies are named \"" << study->Name() << "\"; the one registered later is left out\n";
    return;
  }
  r.studies.push_back(std::move(study));
}

std::vector<const ReportContribution*> RegisteredStudies() {
  const std::vector<const Study*> sorted = Sorted();
  return {sorted.begin(), sorted.end()};
}

std::vector<std::string> RegisteredStudyNames() {
  std::vector<std::string> names;
  for (const Study* s : Sorted()) names.push_back(s->Name());
  return names;
}

}  // namespace ddplab
