// Checks that a file is a whole ELF shared library before dlopen maps it, and that a
// symbol is code before it is called: a truncated library would fault (SIGBUS) when its
// pages are touched, and an entry symbol that is data would be jumped into (SIGSEGV).
// Plugins are trusted code (docs/writing_a_plugin.md), but a file that is not a
// well-formed plugin gets an error, not a crash.
//
//   if (absl::Status s = ddplab::CheckElfWhole(path); !s.ok()) return s;
//   void* entry = dlsym(handle, "ddplabGetPluginInfo");
//   if (!ddplab::IsFunction(entry)) return error;
#ifndef DDPLAB_CORE_PLUGIN_ELF_CHECK_H_
#define DDPLAB_CORE_PLUGIN_ELF_CHECK_H_

#include <string>

#include "absl/status/status.h"

namespace ddplab {

// OK when `path` is a 64-bit ELF shared object whose headers and loaded segments lie
// within the file; else what is wrong ("truncated: ...").
absl::Status CheckElfWhole(const std::string& path);

// Whether `address` (from dlsym) is a function symbol of a loaded library.
bool IsFunction(void* address);

}  // namespace ddplab

#endif  // DDPLAB_CORE_PLUGIN_ELF_CHECK_H_
