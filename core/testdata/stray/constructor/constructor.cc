// A library that is no plugin, whose constructor leaves a mark when it is loaded: for
// //core/plugin:plugin_host_test, which checks that a host loads only the plugins it is
// asked for (Note [Only the plugins named], core/config/plugin_names.h).
#include <cstdlib>

namespace {

__attribute__((constructor)) void Mark() { setenv("DDPLAB_TESTDATA_CONSTRUCTOR_RAN", "1", 1); }

}  // namespace
