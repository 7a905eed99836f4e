"""ddplab_plugin_library(): a plugin's shared library, in this repository or outside it.

    load("@ddplab//sdk:plugin.bzl", "ddplab_plugin_library")

    ddplab_plugin_library(
        name = "hello",          # libhello.so and libhello.so.digest (bazel build //:hello);
                                 # the plugin's name in experiment files
        srcs = ["hello.cc"],     # DDPLAB_PLUGIN(..., my::v1::Config, ...) in one of them
    )                            # hello.proto: the plugin's configuration message

<name>.proto (package of the plugin's choosing, e.g. ddplab.plugins.hello.v1) holds the
plugin's configuration message, which the plugin's library carries: its code is compiled
into lib<name>.so and its schema joins the experiment schema when the plugin is loaded, so
the host is never rebuilt for a plugin. The proto may import "ddplab/v1/options.proto" for
field rules and sweeps. Include its header as "<package path>/<name>.pb.h". Its path in
its workspace names it in the process (protobuf's registry), and so does its package: two
plugins loaded together must not share either (a plugin's own package path and proto
package, e.g. ddplab.plugins.<name>.v1, are safe).
"""

def ddplab_plugin_library(name, srcs, deps = [], copts = [], config_copts = [], config_deps = [], **kwargs):
    """lib<name>.so: `srcs` and <name>.proto, exporting only ddplabGetPluginInfo.
    `config_copts` and `config_deps` go to the compile of the proto's generated code."""
    proto = name + ".proto"
    options = Label("//proto:ddplab/v1/options.proto")
    native.genrule(
        name = name + "_config_generate",
        srcs = [proto, options],
        outs = [name + ".pb.h", name + ".pb.cc"],
        tools = ["@protobuf//:protoc"],
        # The plugin's .proto by its path in its workspace; ddplab's options by theirs.
        cmd = "options=$(location {}); ".format(options) +
              "$(location @protobuf//:protoc) --proto_path=. --proto_path=$${options%ddplab/v1/options.proto} " +
              "--cpp_out=$(GENDIR) $(location {})".format(proto),
        testonly = kwargs.get("testonly", False),
    )
    native.cc_library(
        name = name + "_config",
        srcs = [name + ".pb.cc"],
        hdrs = [name + ".pb.h"],
        copts = config_copts,
        deps = [Label("//proto:options_cc_proto_headers"), "@protobuf"] + config_deps,
        # Registers the message with the protobuf runtime when the library is loaded.
        alwayslink = True,
        testonly = kwargs.get("testonly", False),
    )
    exports = Label("//sdk:plugin_exports.lds")
    native.cc_binary(
        name = "lib" + name + ".so",
        srcs = srcs,
        linkshared = True,
        copts = copts,
        additional_linker_inputs = [exports],
        linkopts = ["-Wl,--version-script=$(location {})".format(exports)],
        deps = [Label("//sdk:plugin_sdk"), ":" + name + "_config"] + deps,
        **kwargs
    )

    # lib<name>.so.digest: what the host checks the library's bytes against before it
    # loads them (Note [A plugin's recorded digest], core/plugin/library_digest.h). Copy
    # it along with the library; a library without it loads unchecked.
    digest_tool = Label("//core/plugin:plugin_digest")
    native.genrule(
        name = "lib" + name + "_digest",
        srcs = [":lib" + name + ".so"],
        outs = ["lib" + name + ".so.digest"],
        tools = [digest_tool],
        cmd = "$(location {}) $< > $@".format(digest_tool),
        testonly = kwargs.get("testonly", False),
        visibility = kwargs.get("visibility"),
        tags = kwargs.get("tags"),
    )

    # <name>: the library and its digest, one build of both (`bazel build //:<name>`).
    native.filegroup(
        name = name,
        srcs = [":lib" + name + ".so", ":lib" + name + ".so.digest"],
        testonly = kwargs.get("testonly", False),
        visibility = kwargs.get("visibility"),
        tags = kwargs.get("tags"),
    )
