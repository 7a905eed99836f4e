// The plugins a file names, from its tokens (Note [Only the plugins named], plugin_names.h).
#include "core/config/plugin_names.h"

#include <vector>

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace ddplab {
namespace {

using google::protobuf::io::Tokenizer;

// The parser reports what does not tokenize; the scan only stops.
class Quiet : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

bool Opens(const std::string& token) { return token == "{" || token == "<"; }
bool Closes(const std::string& token) { return token == "}" || token == ">"; }

}  // namespace

std::set<std::string> PluginNamesIn(absl::string_view text) {
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  Quiet quiet;
  Tokenizer tokens(&input, &quiet);
  tokens.set_comment_style(Tokenizer::SH_COMMENT_STYLE);  // the text format's # comments
  std::vector<bool> in_plugin;  // per open block: whether it is a plugin block
  std::set<std::string> names;
  std::string previous, before_previous;
  bool plugin_next = false;  // `plugin` [:] seen, its block not yet opened
  while (tokens.Next()) {
    const std::string& token = tokens.current().text;
    const bool identifier = tokens.current().type == Tokenizer::TYPE_IDENTIFIER;
    if (Opens(token)) {
      // A field opening inside a plugin block names its plugin: `bf16 {` or `bf16: {`.
      const std::string& field = previous == ":" ? before_previous : previous;
      if (!in_plugin.empty() && in_plugin.back() && !field.empty() && field != ":") names.insert(field);
      in_plugin.push_back(plugin_next);
      plugin_next = false;
    } else if (Closes(token)) {
      if (!in_plugin.empty()) in_plugin.pop_back();
    } else if (tokens.current().type == Tokenizer::TYPE_STRING && previous == ":" && before_previous == "name" &&
               !in_plugin.empty() && in_plugin.back()) {
      std::string name;  // plugin { name: "bf16" ... }
      Tokenizer::ParseString(token, &name);
      names.insert(name);
    } else if (identifier && token == "plugin") {
      plugin_next = true;
    } else if (token != ":") {
      plugin_next = false;
    }
    before_previous = previous;
    previous = identifier || token == ":" ? token : "";
  }
  return names;
}

}  // namespace ddplab
