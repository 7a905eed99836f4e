// The plugins a report's rows ran with: each build once, and where it came from, so that
// a reader knows an out-of-tree plugin from a shipped one, and its status.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/report/report.h"

namespace ddplab {
namespace internal_report {

void AddPluginBuilds(const std::vector<v1::RunResult>& runs, v1::SuiteReport& report) {
  std::map<std::string, v1::PluginBuild> by_key;  // name and digest: two builds of one plugin are two
  for (const v1::RunResult& r : runs) {
    for (const v1::PluginBuild& b : r.plugin_builds()) by_key.emplace(absl::StrCat(b.name(), " ", b.digest()), b);
  }
  for (const auto& [key, build] : by_key) *report.add_plugins() = build;
}

std::string FormatPlugins(const v1::SuiteReport& report) {
  if (report.plugins_size() == 0) return "";
  // By the directory each library is in: "<name> <version> (<status>)", a directory a line.
  std::map<std::string, std::vector<std::string>> by_dir;
  for (const v1::PluginBuild& b : report.plugins()) {
    const size_t slash = b.path().rfind('/');
    std::string dir = slash == std::string::npos ? "." : b.path().substr(0, slash);
    // <dir>/<name>/lib<name>.so: the directory searched is the one above.
    const std::string own = absl::StrCat("/", b.name());
    if (dir.size() > own.size() && dir.compare(dir.size() - own.size(), own.size(), own) == 0) {
      dir.resize(dir.size() - own.size());
    }
    by_dir[dir].push_back(absl::StrCat(b.name(), " ", b.version(), " (", b.status(), ")"));
  }
  std::string out = "Plugins:";
  for (const auto& [dir, plugins] : by_dir) absl::StrAppend(&out, "\n- from ", dir, ": ", absl::StrJoin(plugins, ", "));
  return absl::StrCat(out, "\n");
}

}  // namespace internal_report
}  // namespace ddplab
