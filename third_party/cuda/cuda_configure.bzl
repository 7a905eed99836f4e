"""Finds the CUDA toolkit, NCCL and the NVTX v3 headers.

  @cuda  $CUDA_HOME, else /usr/local/cuda: //:cudart (runtime headers and library), //:nvcc
  @nccl  $NCCL_HOME, else python3's nvidia.nccl package, else the CUDA directory: //:nccl
  @nvtx  $NVTX_HOME, else the CUDA directory, else python3's nvidia.nvtx package: //:nvtx

Each is needed only by the CUDA build. Where one is missing its targets fail when a build
needs them, with a message that names the dependency and the variable that points to it.
"""

load("//third_party:common.bzl", "exists", "find_lib", "getenv", "link_opts_for", "missing_repo", "python3_eval")

def _write(rctx, root, include, lib_dir, libs, target, what, include_dest = "include", extra = ""):
    rctx.symlink(include, include_dest)
    includes = ["include"]
    if not exists(rctx, include + "/nv/target") and exists(rctx, include + "/cccl/nv/target"):
        # Some CUDA 13 installations keep CCCL (nv/target, cub, thrust) in include/cccl only.
        includes.append("include/cccl")
    rctx.file("build_info.bzl", "FOUND = True\nROOT = {}\n".format(repr(root)))
    rctx.file("BUILD.bazel", """\
# Written by ddplab's cuda_configure: {what} from {root}.
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "{target}",
    # All files: some headers have no extension (nv/target).
    hdrs = glob(["include/**"]),
    includes = {includes},
    linkopts = {linkopts},
)
""".format(what = what, root = root, target = target, includes = repr(includes), linkopts = repr(
        link_opts_for(lib_dir, libs) if libs else [],
    )) + extra)

def _cuda_configure_impl(rctx):
    env = getenv(rctx, "CUDA_HOME")
    root = env or "/usr/local/cuda"
    (lib_dir, lib) = find_lib(rctx, [root + "/lib64", root + "/lib", root + "/targets/x86_64-linux/lib"], ["libcudart.so"])
    if not exists(rctx, root + "/include/cuda_runtime.h") or not lib_dir:
        missing_repo(rctx, "CUDA toolkit not found at {} (no include/cuda_runtime.h or lib64/libcudart.so). ".format(root) +
                           "Set CUDA_HOME to the toolkit's directory, or build with --config=cpu.", ["cudart"])
        return
    # nvcc, for ddplab's own kernels: a wrapper that runs the toolkit's, which finds its
    # tools (cicc, ptxas, fatbinary) beside itself.
    nvcc = root + "/bin/nvcc"
    if exists(rctx, nvcc):
        rctx.file("nvcc", "#!/bin/sh\nexec {} \"$@\"\n".format(nvcc), executable = True)
    else:
        rctx.file("nvcc", "#!/bin/sh\necho 'nvcc not found at {}: set CUDA_HOME to a CUDA toolkit with nvcc' >&2\nexit 1\n".format(nvcc), executable = True)
    _write(rctx, root, root + "/include", lib_dir, [lib], "cudart", "CUDA runtime", extra = """
# The CUDA compiler (a wrapper around the toolkit's).
exports_files(["nvcc"])
""")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME"],
    local = True,
)

def _nccl_candidates(rctx):
    env = getenv(rctx, "NCCL_HOME")
    if env:
        return [(env, "$NCCL_HOME")]
    out = []
    py = python3_eval(rctx, "import nvidia.nccl as m; print(list(m.__path__)[0])")
    if py:
        out.append((py, "python3's nvidia.nccl"))
    out.append((getenv(rctx, "CUDA_HOME") or "/usr/local/cuda", "the CUDA directory"))
    return out

def _nccl_configure_impl(rctx):
    tried = []
    for (root, source) in _nccl_candidates(rctx):
        tried.append("{} ({})".format(root, source))
        (lib_dir, lib) = find_lib(rctx, [root + "/lib", root + "/lib64"], ["libnccl.so", "libnccl.so.2"])
        if exists(rctx, root + "/include/nccl.h") and lib_dir:
            _write(rctx, root, root + "/include", lib_dir, [lib], "nccl", "NCCL ({})".format(source))
            return
    missing_repo(rctx, "NCCL not found (looked in " + ", ".join(tried) + " for include/nccl.h and lib/libnccl.so). " +
                       "Set NCCL_HOME to NCCL's directory, or build with --config=cpu.", ["nccl"])

nccl_configure = repository_rule(
    implementation = _nccl_configure_impl,
    environ = ["NCCL_HOME", "CUDA_HOME", "DDPLAB_PYTHON", "PATH"],
    local = True,
)

def _nvtx_configure_impl(rctx):
    env = getenv(rctx, "NVTX_HOME")
    candidates = [env] if env else [getenv(rctx, "CUDA_HOME") or "/usr/local/cuda"]
    if not env:
        py = python3_eval(rctx, "import nvidia.nvtx as m; print(list(m.__path__)[0])")
        if py:
            candidates.append(py)
    for root in candidates:
        if exists(rctx, root + "/include/nvtx3/nvToolsExt.h"):
            # NVTX v3 is header-only: it loads the profiler's library itself when one runs.
            _write(rctx, root, root + "/include/nvtx3", None, ["dl"], "nvtx", "NVTX v3 headers", "include/nvtx3")
            return
    missing_repo(rctx, "NVTX v3 headers not found (looked for include/nvtx3/nvToolsExt.h in " + ", ".join(candidates) + "). " +
                       "Set NVTX_HOME to the directory holding include/nvtx3, or build with --config=cpu.", ["nvtx"])

nvtx_configure = repository_rule(
    implementation = _nvtx_configure_impl,
    environ = ["NVTX_HOME", "CUDA_HOME", "DDPLAB_PYTHON", "PATH"],
    local = True,
)
