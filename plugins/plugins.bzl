"""The one list of ddplab's plugins: it drives the build, the schema and the tests.

A plugin named N lives in plugins/N/: its library libN.so (ddplab_plugin()), its
configuration message ddplab.plugins.N.v1.Config in plugins/N/N.proto (whose option
ddplab.v1.plugin_field is its field in ddplab.v1.Plugin, `plugin { N { ... } }`), its
README and its tests. Adding a plugin adds one line here.
"""

PLUGINS = [
    "bf16",
    "bf16_fp32_sum",
    "bucket_sizing",
    "bucket_view",
    "no_communication",
    "optimizer_overlap",
    "powersgd",
    "static_graph",
    "zero_copy",
]

# Field numbers of removed plugins, never to be reused (launch_thread, tail_communicator,
# forward_overlap: measured no gain, bench/NOTES.md).
RETIRED_FIELDS = [17, 19, 20]

def plugin_libraries():
    """Labels of every plugin's shared library."""
    return ["//plugins/{0}:lib{0}.so".format(p) for p in PLUGINS]

def plugin_protos():
    """Labels of every plugin's configuration .proto."""
    return ["//plugins/{0}:{0}.proto".format(p) for p in PLUGINS]
