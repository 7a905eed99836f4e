// A shared library whose entry symbol is data, not a function: calling it would jump into
// data. The host refuses it before calling.
extern "C" __attribute__((visibility("default"))) const char ddplabGetPluginInfo[64] = "not code";
