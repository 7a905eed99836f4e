"""CUDA kernels of ddplab's own, compiled by nvcc in the CUDA build.

    load("//tools/build_defs:cuda.bzl", "ddplab_cuda_kernels")

    ddplab_cuda_kernels(
        name = "sum_kernel",
        srcs = ["sum_kernel.cu"],
        hdrs = ["sum_kernel.h"],
    )

gives a cc_library :sum_kernel with the header, and in the CUDA build (//:cuda_build)
nvcc's object of each .cu beside it; in the CPU build the library is the header alone, and
the code that calls the kernels compiles them out.
"""

# The GPUs ddplab's own CUDA kernels are compiled for: machine code for Hopper (H100,
# H200), and PTX from Ampere on, which the driver compiles for newer GPUs when loaded.
CUDA_GENCODE = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_80,code=compute_80",
]

def ddplab_cuda_kernels(name, srcs, hdrs, nvcc_flags = [], visibility = None):
    """A cc_library `name` of `hdrs` and, in the CUDA build, each of `srcs` (.cu files)
    compiled by nvcc (C++20, -O3, position independent, hidden symbols, every warning an
    error, for CUDA_GENCODE's GPUs) with `nvcc_flags` after those."""
    objects = []
    for src in srcs:
        stem = src[:-len(".cu")]
        objects.append(":%s_object" % stem)
        native.genrule(
            name = stem + "_object",
            srcs = [src] + hdrs,
            outs = [stem + ".pic.o"],
            cmd = " ".join([
                "$(location @cuda//:nvcc)",
                "-std=c++20",
                "-O3",
            ] + nvcc_flags + [
                "-c",
                "-I.",
                "-Xcompiler=-fPIC,-fvisibility=hidden",
                "-Werror=all-warnings",
            ] + CUDA_GENCODE + [
                "$(location %s)" % src,
                "-o $@",
            ]),
            # Built through `name` in the CUDA build only, not by //... in the CPU one.
            tags = ["manual"],
            tools = ["@cuda//:nvcc"],
        )
    native.cc_library(
        name = name,
        srcs = select({
            "//:cuda_build": objects,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        deps = ["//:cuda_deps"],
        visibility = visibility,
    )
