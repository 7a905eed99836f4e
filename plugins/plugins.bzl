"""The one list of ddplab's plugins: it drives the build, the schema and the tests.

A plugin named N lives in plugins/N/: its library libN.so (ddplab_plugin()), which
carries its configuration message (plugins/N/N.proto), its README and its tests. This list
only says which plugins are built beside vit_ddp; a plugin built elsewhere is found
through --plugin_dir (examples/fp16_plugin).
"""

PLUGINS = [
    "bf16",
    "bf16_exact",
    "bf16_fp32_sum",
    "bucket_sizing",
    "bucket_view",
    "cuda_graph",
    "fp8",
    "no_communication",
    "optimizer_overlap",
    "powersgd",
    "registered_buckets",
    "sharded_optimizer",
    "static_graph",
    "zero_copy",
]

def plugin_libraries():
    """Labels of every plugin's shared library."""
    return ["//plugins/{0}:lib{0}.so".format(p) for p in PLUGINS]

def plugin_digests():
    """Labels of the digest each plugin's build writes beside its library (Note [A
    plugin's recorded digest], core/plugin/library_digest.h)."""
    return ["//plugins/{0}:lib{0}.so.digest".format(p) for p in PLUGINS]
