"""cc_precompiled_headers(): headers parsed once per configuration, not once per file.

    cc_precompiled_headers(
        name = "torch_pch",
        includes = ["<ATen/ATen.h>"],
        deps = ["@libtorch//:torch"],
    )
    cc_library(
        name = "user",
        srcs = ["user.cc"],
        copts = ["-include", "$(BINDIR)/tools/build_defs/torch_pch.h",
                 "-include", "tools/build_defs/torch_pch_stamp.h"],
        deps = [":torch_pch"],
    )

Writes <name>.h (one #include line for each of `includes`) and compiles it, with the
toolchain's compiler and the very flags of the configuration's C++ compiles, into the
compiler's saved state beside it (GCC: the directory <name>.h.gch; clang: <name>.h.pch),
and <name>_stamp.h, the state's digest. A file compiled with `-include
$(BINDIR)/<package>/<name>.h -include <package>/<name>_stamp.h` reads the saved state
instead of parsing the headers again (Note [Precompiled headers]), and is recompiled when
that state changes. The target passes its `deps` on, so a user needs no other dependency
for those headers.

Note [Precompiled headers]
LibTorch's headers cost a file that includes them 7 to 10 s of GCC's time on a 2-core
machine before a line of its own is compiled (<ATen/ATen.h> and c10d's ProcessGroup.hpp,
parsed), and some 90 of ddplab's files include them. GCC's saved state removes the parse
but not the templates each file instantiates at its end, which are most of a file that
includes <torch/torch.h>: with it a file compiles in about half the time alone, 0.8 of it
when two compile at once (loading the 350 MB state costs the kernel's time). Clang's state
also holds those instantiations (-fpch-instantiate-templates): a plugin's hook compiles in
2.4 s against 9.7 s without it and GCC's 6.5-7.7 s with its own, which is why clang is the
default compiler (.bazelrc; bench/NOTES.md, "clang and its precompiled headers").
Each compiler uses the state only where the flags that matter to it match the ones it was
made with; TORCH_COPTS (//tools/build_defs:cc.bzl) adds -Winvalid-pch, so that a GCC
compile which cannot use it fails instead of quietly costing the build its speed, and
clang refuses a mismatched state itself. The header is generated and lives only in the
output tree, named by its path there ($(BINDIR)): GCC looks for the state beside the
header it finds, clang's driver beside the path as given. Clang records its sources'
paths in the state and a user's dependency file names them, so compiles run outside
Bazel's sandbox (.bazelrc), where those paths are the execution root's. A file that
includes no LibTorch header is better without LibTorch's state (loading it and
instantiating what it needs costs about 2 s under GCC); those files have one of their own,
the standard library's, Abseil's and protobuf's headers (//core:base_pch, and
//core:test_pch for tests, with GoogleTest's), which takes about a third off each
(bench/NOTES.md, "Headers precompiled for the files without LibTorch").
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _cc_precompiled_headers_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    deps = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    context = deps.compilation_context

    header = ctx.actions.declare_file(ctx.label.name + ".h")
    ctx.actions.write(header, "".join(["#include %s\n" % i for i in ctx.attr.includes]))
    # GCC: a directory of that name, which GCC searches for a state it can use (as a
    # directory, Bazel passes it to the users' compiles). Clang: the file <name>.h.pch,
    # which its driver looks for beside a header given to -include.
    clang = cc_toolchain.compiler == "clang"
    if clang:
        pch = ctx.actions.declare_file(ctx.label.name + ".h.pch")
    else:
        pch = ctx.actions.declare_directory(ctx.label.name + ".h.gch")

    variables = cc_common.create_compile_variables(
        feature_configuration = features,
        cc_toolchain = cc_toolchain,
        user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts + ctx.attr.copts,
        source_file = header.path,
        output_file = pch.path if clang else pch.path + "/" + ctx.label.name,
        include_directories = context.includes,
        quote_include_directories = context.quote_includes,
        system_include_directories = context.system_includes,
        framework_include_directories = context.framework_includes,
        # What the users see of their deps' defines (a dep's local_defines are its own).
        preprocessor_defines = context.defines,
        use_pic = True,
    )
    action = "c++-compile"
    arguments = cc_common.get_memory_inefficient_command_line(
        feature_configuration = features,
        action_name = action,
        variables = variables,
    )
    ctx.actions.run(
        executable = cc_common.get_tool_for_action(feature_configuration = features, action_name = action),
        # -x applies to the files named after it: the header, compiled as one. Clang also
        # instantiates the headers' templates once, in the state, where GCC leaves them to
        # every user, and records no file times (Bazel's copies of sources need not keep
        # them).
        arguments = ["-x", "c++-header"] + arguments +
                    (["-fpch-instantiate-templates", "-Xclang", "-fno-pch-timestamp"] if clang else []),
        env = cc_common.get_environment_variables(
            feature_configuration = features,
            action_name = action,
            variables = variables,
        ),
        inputs = depset([header], transitive = [context.headers, cc_toolchain.all_files]),
        outputs = [pch],
        mnemonic = "CppPrecompileHeaders",
        progress_message = "Precompiling %s" % header.short_path,
    )
    # The compiler's dependency file names neither the precompiled header nor what it
    # holds, so Bazel would not recompile a user when the state changes; a user also
    # includes this header, whose content is the state's digest, and that it does name.
    stamp = ctx.actions.declare_file(ctx.label.name + "_stamp.h")
    ctx.actions.run_shell(
        inputs = [pch],
        outputs = [stamp],
        command = 'echo "// $(if [ -d "$1" ]; then cat "$1"/*; else cat "$1"; fi | sha256sum)" > "$2"',
        arguments = [pch.path, stamp.path],
        mnemonic = "CppPrecompiledHeadersStamp",
    )
    own = cc_common.create_compilation_context(headers = depset([header, pch, stamp]))
    return [
        DefaultInfo(files = depset([header, pch, stamp])),
        cc_common.merge_cc_infos(
            direct_cc_infos = [CcInfo(compilation_context = own)],
            cc_infos = [deps],
        ),
    ]

cc_precompiled_headers = rule(
    implementation = _cc_precompiled_headers_impl,
    attrs = {
        "includes": attr.string_list(mandatory = True, doc = "Each as in #include: <a/b.h> or \"a/b.h\"."),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(doc = "The users' own copts, which the saved state must share."),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
