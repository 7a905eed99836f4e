// A shared library that is not a plugin: it exports no ddplabGetPluginInfo.
extern "C" __attribute__((visibility("default"))) int not_a_plugin() { return 42; }
