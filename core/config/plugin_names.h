// The plugins an experiment file names, read from its text before any plugin is loaded,
// so that the host loads those and no other (Note [Only the plugins named]).
//
// Note [Only the plugins named]
// A plugin's configuration is parsed with the message its own library brings, so the
// host must load a plugin before it can read a file that configures it. Loading every
// library in the plugin directories first ran each one's constructors, named or not: a
// stray library could end the run, or abort it on a .proto registered twice (a backup
// copy of a plugin beside it). So the file's text is scanned first for the names inside
// its `plugin { ... }` blocks (protobuf's own tokenizer: comments and strings are
// skipped as the parser skips them), and the host loads only those that exist
// (PluginHost::Want). A name the scan takes that is no plugin is never loaded; a plugin
// the file does not name is listed by name only, for errors and suggestions.
//
//   std::set<std::string> names = ddplab::PluginNamesIn(text);   // {"bf16", "bucket_sizing"}
//   host.Want(names);
#ifndef DDPLAB_CORE_CONFIG_PLUGIN_NAMES_H_
#define DDPLAB_CORE_CONFIG_PLUGIN_NAMES_H_

#include <set>
#include <string>

#include "absl/strings/string_view.h"

namespace ddplab {

// Every field name directly inside a `plugin { ... }` (or `plugin: { ... }`, `plugin <
// ... >`) block of `text`, at any depth of the file; text that does not tokenize ends the
// scan where it stops (the parser then reports it).
std::set<std::string> PluginNamesIn(absl::string_view text);

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_PLUGIN_NAMES_H_
