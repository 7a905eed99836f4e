"""Finds LibTorch: $LIBTORCH_DIR, else python3's torch, else the system's.

Writes @libtorch with:
  //:torch       headers and libraries (CPU and, when present, CUDA parts)
  //:c10d        the same plus the defines that expose c10d's process groups
  build_info.bzl VERSION, HAS_CUDA, CXX11_ABI, SOURCE and ROOT, for BUILD files
"""

load("//third_party:common.bzl", "exists", "getenv", "link_opts_for", "python3_eval", "system_lib_dirs")

_HINT = ("ddplab needs LibTorch. Set LIBTORCH_DIR to an unpacked LibTorch (the directory " +
         "holding include/ and lib/), install PyTorch for python3, or install the system's " +
         "package (tools/setup.sh installs libtorch-dev).")

# Directories under a LibTorch include/ that must not shadow the system's own copies.
_SHADOWING = ["google"]

def _layout(rctx, root, source):
    """A LibTorch directory with include/, lib/ and share/cmake (zip or pip layout)."""
    api = root + "/include/torch/csrc/api/include"
    if not exists(rctx, api + "/torch/torch.h"):
        return None
    return struct(
        source = source,
        root = root,
        include = root + "/include",
        api_include = api,
        lib = root + "/lib",
        cmake = root + "/share/cmake/Torch/TorchConfig.cmake",
        system = False,
    )

def _find(rctx):
    env = getenv(rctx, "LIBTORCH_DIR")
    if env:
        found = _layout(rctx, env, "$LIBTORCH_DIR")
        if not found:
            fail("\n\nLIBTORCH_DIR={} holds no LibTorch: {}/include/torch/csrc/api/include/torch/torch.h is missing.\n".format(env, env))
        return found
    py = python3_eval(rctx, "import os, torch; print(os.path.dirname(torch.__file__))")
    if py:
        found = _layout(rctx, py, "python3's torch")
        if found:
            return found
    api = "/usr/include/torch/csrc/api/include"
    if exists(rctx, api + "/torch/torch.h"):
        for d in system_lib_dirs(rctx):
            if exists(rctx, d + "/libtorch.so"):
                return struct(
                    source = "system",
                    root = "/usr",
                    include = None,
                    api_include = api,
                    lib = d,
                    cmake = d + "/cmake/Torch/TorchConfig.cmake",
                    system = True,
                )
    return None

def _version(rctx, api_include, include):
    # LibTorch 2.9 and later define the version in torch/headeronly/version.h.
    candidates = [api_include + "/torch/version.h"]
    if include:
        candidates.insert(0, include + "/torch/headeronly/version.h")
    text = "".join([rctx.read(c) for c in candidates if exists(rctx, c)])
    parts = {}
    for line in text.splitlines():
        words = [w for w in line.replace("\t", " ").split(" ") if w]
        if len(words) == 3 and words[0] == "#define" and words[1].startswith("TORCH_VERSION_"):
            parts[words[1][len("TORCH_VERSION_"):]] = words[2]
    return "{}.{}.{}".format(parts.get("MAJOR", "?"), parts.get("MINOR", "?"), parts.get("PATCH", "?"))

def _cxx11_abi(rctx, cmake):
    if exists(rctx, cmake):
        text = rctx.read(cmake)
        for abi in ["0", "1"]:
            if "_GLIBCXX_USE_CXX11_ABI=" + abi in text:
                return int(abi)
    return 1  # LibTorch builds since 2.7 use only the C++11 ABI.

def _torch_configure_impl(rctx):
    t = _find(rctx)
    if not t:
        fail("\n\nLibTorch not found. " + _HINT + "\n")
    version = _version(rctx, t.api_include, t.include)
    has_cuda = exists(rctx, t.lib + "/libtorch_cuda.so")
    abi = _cxx11_abi(rctx, t.cmake)

    includes = ["api_include"]
    rctx.symlink(t.api_include, "api_include")
    if t.include:
        # Link each top-level include directory on its own, leaving out copies of other
        # projects' headers that would shadow the system's (protobuf in older wheels).
        for entry in rctx.path(t.include).readdir():
            if entry.basename not in _SHADOWING:
                rctx.symlink(entry, "include/" + entry.basename)
        includes = ["include"] + includes
    rctx.symlink(t.lib, "lib")

    cpu_libs = link_opts_for(t.lib, ["torch", "torch_cpu", "c10"], system = t.system)
    cuda_libs = link_opts_for(t.lib, ["torch_cuda", "c10_cuda"], system = t.system, no_as_needed = True)
    defines = [] if abi == 1 else ["_GLIBCXX_USE_CXX11_ABI=0"]
    # c10d's Gloo header needs Gloo's headers: LibTorch's own (zip builds), or the
    # system's (libgloo-dev). Wheels ship neither; such builds have NCCL only.
    has_gloo = exists(rctx, (t.include or "/usr/include") + "/gloo/config.h") or exists(rctx, "/usr/include/gloo/config.h")

    rctx.file("build_info.bzl", """\
# Written by ddplab's torch_configure: what LibTorch this build uses.
VERSION = {version}
HAS_CUDA = {has_cuda}
CXX11_ABI = {abi}
HAS_GLOO = {has_gloo}
SOURCE = {source}
ROOT = {root}
""".format(version = repr(version), has_cuda = has_cuda, abi = abi, has_gloo = has_gloo, source = repr(t.source), root = repr(t.root)))

    cuda_target = """
cc_library(
    name = "torch_cuda",
    linkopts = {cuda_libs},
    deps = [":torch"],
)
""".format(cuda_libs = repr(cuda_libs)) if has_cuda else """
missing_dependency(
    name = "torch_cuda",
    message = "LibTorch {version} at {root} ({source}) has no CUDA (no libtorch_cuda.so), " +
              "so it cannot make a CUDA build: drop --//:cuda=true, or point LIBTORCH_DIR " +
              "at a CUDA LibTorch.",
)
""".format(version = version, root = t.root, source = t.source)

    rctx.file("BUILD.bazel", """\
# Written by ddplab's torch_configure from LibTorch {version} ({source}: {root}).
load("@ddplab//third_party:common_rules.bzl", "missing_dependency")

package(default_visibility = ["//visibility:public"])

cc_library(
    name = "torch",
    hdrs = glob(["include/**", "api_include/**"]),
    includes = {includes},
    defines = {defines},
    linkopts = {cpu_libs} + ["-lpthread"],
)

# c10d's process groups and stores: Gloo where its headers are, NCCL in CUDA builds.
cc_library(
    name = "c10d",
    defines = ["USE_DISTRIBUTED"] + {c10d_defines},
    deps = [":torch"],
)
{cuda_target}
""".format(
        version = version,
        source = t.source,
        root = t.root,
        includes = repr(includes),
        defines = repr(defines),
        cpu_libs = repr(cpu_libs),
        c10d_defines = repr((["USE_C10D_GLOO"] if has_gloo else []) + (["USE_C10D_NCCL"] if has_cuda else [])),
        cuda_target = cuda_target,
    ))

torch_configure = repository_rule(
    implementation = _torch_configure_impl,
    environ = ["LIBTORCH_DIR", "DDPLAB_PYTHON", "PATH"],
    local = True,
)
