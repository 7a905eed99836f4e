"""C++ code generated from .proto files by the protoc found on this machine.

Bazel 4's native cc_proto_library wants a protobuf source repository to build protoc from;
ddplab builds offline against the system's protoc and libprotobuf instead.
"""

load("//tools/build_defs:cc.bzl", "BASE_PCH_COPTS")

def _proto_path(src):
    """The import path of a .proto label: proto/ddplab/v1/x.proto is "ddplab/v1/x.proto",
    //plugins/N:N.proto is "plugins/N/N.proto"."""
    if src.startswith("//"):
        package, _, name = src[2:].partition(":")
        return package + "/" + name
    return src

def ddplab_cc_proto(name, srcs, imports = [], deps = [], visibility = None):
    """Generates <name> (the messages, for binaries) and <name>_headers (headers only).

    srcs are .proto files of this package (imported relative to it, so
    proto/ddplab/v1/x.proto is "ddplab/v1/x.proto" and its header "ddplab/v1/x.pb.h"),
    files this package generates, or other packages' .proto labels (imported relative to
    the workspace: //plugins/N:N.proto is "plugins/N/N.proto", header
    "plugins/N/N.pb.h"). Plugins use <name>_headers: the host binary holds the code.
    imports are .proto files that srcs import and another ddplab_cc_proto generates: `deps`
    names those (their <name>).
    """
    outs = []
    for s in srcs:
        base = _proto_path(s)[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
    # This package's path from the execution root: external/<repo>/ when ddplab is
    # another workspace's dependency (a plugin built outside it, examples/).
    repo = native.repository_name()
    pkg = ("" if repo == "@" else "external/" + repo[1:] + "/") + native.package_name()
    native.genrule(
        name = name + "_generate",
        srcs = srcs + imports,
        outs = outs,
        tools = ["@protobuf//:protoc"],
        cmd = "$(location @protobuf//:protoc) --proto_path=" + pkg +
              " --proto_path=$(GENDIR)/" + pkg + " --proto_path=. --cpp_out=$(RULEDIR) " +
              " ".join(["$(location {})".format(s) for s in srcs]),
    )
    hdrs = [o for o in outs if o.endswith(".h")]
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = hdrs,
        copts = BASE_PCH_COPTS,
        includes = ["."],
        deps = ["//core:base_pch", "@protobuf"] + deps,
        alwayslink = True,
        visibility = visibility,
    )
    native.cc_library(
        name = name + "_headers",
        hdrs = hdrs,
        includes = ["."],
        deps = ["@protobuf"] + [d + "_headers" for d in deps],
        visibility = visibility,
    )
