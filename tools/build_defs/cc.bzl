"""C++ build settings and macros for ddplab's own code."""

load("//sdk:plugin.bzl", "ddplab_plugin_library")

# Warnings for ddplab's own code. Dependencies come in through -isystem and are exempt.
DDPLAB_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
]

def _read_pch(name):
    """The copts that read //core:<name>'s precompiled state first, and fail to compile
    where they cannot (Note [Precompiled headers], pch.bzl)."""
    return [
        # Its path in the output tree: clang's driver looks for the state beside the path given.
        "-include",
        "$(BINDIR)/core/%s.h" % name,
        "-include",
        "core/%s_stamp.h" % name,
        "-Winvalid-pch",
    ]

# For targets whose files include LibTorch's headers. Such a target also has
# "//core:torch_pch" in its deps: ddplab_cc_library(torch = True) and its kin below make
# the pair (Note [A target says what it is]).
TORCH_COPTS = DDPLAB_COPTS + _read_pch("torch_pch")

# For targets whose files include no LibTorch header: the standard library's, Abseil's and
# protobuf's headers precompiled (//core:base_pch, Note [Precompiled headers]). Such a
# target also has "//core:base_pch" in its deps; a test, TEST_COPTS and "//core:test_pch"
# (GoogleTest's headers too). Generated protobuf code takes BASE_PCH_COPTS (protoc's code,
# not held to ddplab's warnings).
BASE_PCH_COPTS = _read_pch("base_pch")

BASE_COPTS = DDPLAB_COPTS + BASE_PCH_COPTS

# Note [Tests unoptimized]
# A test's own file (its cases, the expectations) compiles at -O0: what it tests, and the
# workers it starts, are libraries and binaries built as users run them (-O2), while the
# optimizer's time on a test's file was a third to a half of its compile, on code that
# runs once. The precompiled headers they read are made at -O0 as well (clang refuses a
# state made with other optimization): //core:test_pch, //core:torch_test_pch.
TEST_COPTS = DDPLAB_COPTS + ["-O0"] + _read_pch("test_pch")

# For tests whose files include LibTorch's headers (Note [Tests unoptimized]); such a test
# has "//core:torch_test_pch" in its deps.
TORCH_TEST_COPTS = DDPLAB_COPTS + ["-O0"] + _read_pch("torch_test_pch")

# For binaries that load plugins: a plugin resolves the symbols it shares with the host
# from the executable, as LLVM's pass plugins do; none of them is ddplab's own code,
# which reaches a plugin as services the host passes in (tools/check_tree.sh checks).
HOST_LINKOPTS = ["-rdynamic", "-ldl"]

def ddplab_plugin(name, srcs, deps = [], test_srcs = [], test_size = "medium", torch = True, worker = None,
                  worker_deps = [], **kwargs):
    """One of ddplab's plugins: ddplab_plugin_library() (//sdk:plugin.bzl) with ddplab's
    warnings, and `test_srcs` as <name>_test, which loads the plugins through the real host
    and may train with them over several processes (//plugins/testing:plugin_testutil).
    `torch = False` for a plugin whose sources include no LibTorch header (they then skip
    its precompiled headers, Note [Precompiled headers]).

    `worker`: the name of a binary, from <worker>.cc, of one rank of checks on the hook
    itself over several processes (//plugins/testing:each_world), with `worker_deps`
    besides the engine's; the test has it beside the plugins.
    """
    native.exports_files([name + ".proto", "README.md"])
    if worker:
        ddplab_cc_binary(
            name = worker,
            torch = True,
            testonly = True,
            srcs = [worker + ".cc"],
            data = ["//plugins:all"],
            linkopts = HOST_LINKOPTS,
            deps = [
                "//plugins/testing:each_world",
                "//core/config:experiment",
                "//core/engine",
                "//core/plugin:plugin_host",
                "@abseil//:absl",
                "@libtorch//:torch",
            ] + worker_deps,
        )
    if test_srcs:
        native.cc_test(
            name = name + "_test",
            size = test_size,
            srcs = test_srcs,
            copts = TORCH_TEST_COPTS,
            data = ["//plugins:all", "//core/testing:engine_worker"] + ([":" + worker] if worker else []),
            linkopts = HOST_LINKOPTS,
            deps = [
                "//core:torch_test_pch",
                "//plugins/testing:plugin_testutil",
                "@abseil//:absl",
                "@googletest//:gtest_main",
                "@libtorch//:c10d",
            ],
        )
    if torch:
        deps = ["//core:torch_pch"] + deps
    copts = TORCH_COPTS if torch else DDPLAB_COPTS
    ddplab_plugin_library(
        name = name,
        srcs = srcs,
        deps = deps,
        copts = copts,
        config_copts = BASE_PCH_COPTS,
        config_deps = ["//core:base_pch"],
        **kwargs
    )

# Note [A target says what it is]
# Each of ddplab's own C++ targets pairs its compiler options with the precompiled
# headers its files read (Note [Precompiled headers]): LibTorch's, or the standard
# library's, Abseil's and protobuf's; and at -O0 for tests (Note [Tests unoptimized]).
# The macros below make the pair, so that a BUILD file says what a target is (`torch =
# True` where its files include LibTorch's headers) rather than how it compiles.

def _pch(torch, testing):
    """(the precompiled headers' target, the copts that read them)."""
    if testing:
        return ("//core:torch_test_pch", TORCH_TEST_COPTS) if torch else ("//core:test_pch", TEST_COPTS)
    return ("//core:torch_pch", TORCH_COPTS) if torch else ("//core:base_pch", BASE_COPTS)

def ddplab_cc_library(name, torch = False, testing = False, deps = [], copts = [], **kwargs):
    """A library of ddplab's own (Note [A target says what it is]); `testing` for one
    that only tests link, compiled as tests are."""
    pch, pch_copts = _pch(torch, testing)
    native.cc_library(name = name, copts = pch_copts + copts, deps = [pch] + deps, **kwargs)

def ddplab_cc_binary(name, torch = False, deps = [], copts = [], **kwargs):
    """A binary of ddplab's own (Note [A target says what it is])."""
    pch, pch_copts = _pch(torch, False)
    native.cc_binary(name = name, copts = pch_copts + copts, deps = [pch] + deps, **kwargs)

def ddplab_cc_test(name, torch = False, deps = [], copts = [], **kwargs):
    """A test of ddplab's own, its file at -O0 (Note [A target says what it is])."""
    pch, pch_copts = _pch(torch, True)
    native.cc_test(name = name, copts = pch_copts + copts, deps = [pch] + deps, **kwargs)
