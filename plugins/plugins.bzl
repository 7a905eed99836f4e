"""The one list of ddplab's plugins: it drives the build, the schema and the tests.

A plugin named N lives in plugins/N/: its library libN.so (ddplab_plugin()), its
configuration message ddplab.plugins.N.v1.Config in plugins/N/N.proto, its README and its
tests. The number is the field of ddplab.v1.Plugin that configures it
(`plugin { N { ... } }`): never reuse one (RETIRED lists those of removed plugins).
"""

PLUGINS = {
    "bf16": 13,
    "bucket_sizing": 12,
    "bucket_view": 11,
    "no_communication": 15,
    "optimizer_overlap": 18,
    "powersgd": 14,
    "static_graph": 10,
    "zero_copy": 16,
}

# Fields of removed plugins (launch_thread, tail_communicator, forward_overlap: measured
# no gain, bench/NOTES.md).
RETIRED = [17, 19, 20]

def plugin_libraries():
    """Labels of every plugin's shared library."""
    return ["//plugins/{0}:lib{0}.so".format(p) for p in PLUGINS]

def plugin_protos():
    """Labels of every plugin's configuration .proto."""
    return ["//plugins/{0}:{0}.proto".format(p) for p in PLUGINS]

def plugin_oneof_fields():
    """`name=number` for every plugin, for the generated ddplab.v1.Plugin."""
    return ["{}={}".format(p, n) for p, n in PLUGINS.items()]
