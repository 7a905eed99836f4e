"""The one list of ddplab's plugins: it drives the binary's data deps and the tests.

A plugin named N lives in plugins/N/ and builds lib N .so with ddplab_plugin(); its
configuration is the field N of ddplab.v1.Plugin (proto/ddplab/v1/plugins.proto).
"""

PLUGINS = [
    "bf16",
    "bucket_sizing",
    "bucket_view",
    "forward_overlap",
    "launch_thread",
    "no_communication",
    "optimizer_overlap",
    "powersgd",
    "static_graph",
    "tail_communicator",
    "zero_copy",
]

def plugin_libraries():
    """Labels of every plugin's shared library."""
    return ["//plugins/{0}:lib{0}.so".format(p) for p in PLUGINS]
