"""All of ddplab's external dependencies, found on the machine (nothing is downloaded)."""

load("//third_party/torch:torch_configure.bzl", "torch_configure")
load("//third_party/cuda:cuda_configure.bzl", "cuda_configure", "nccl_configure", "nvtx_configure")
load("//third_party/system:system_configure.bzl", "system_lib")

_SETUP = "Install it with tools/setup.sh"

def ddplab_dependencies():
    torch_configure(name = "libtorch")
    cuda_configure(name = "cuda")
    nccl_configure(name = "nccl")
    nvtx_configure(name = "nvtx")
    system_lib(
        name = "abseil",
        display_name = "Abseil",
        env_var = "ABSL_DIR",
        probe_header = "absl/base/config.h",
        lib_prefix = "libabsl_",
        install_hint = _SETUP + " (Debian: libabsl-dev)",
    )
    system_lib(
        name = "protobuf",
        display_name = "Protocol Buffers",
        env_var = "PROTOBUF_DIR",
        probe_header = "google/protobuf/message.h",
        lib_prefix = "libprotobuf",
        install_hint = _SETUP + " (Debian: libprotobuf-dev, protobuf-compiler)",
        targets = {"protobuf": "protobuf"},
        tool = "protoc",
    )
    system_lib(
        name = "googletest",
        display_name = "GoogleTest",
        env_var = "GTEST_DIR",
        probe_header = "gtest/gtest.h",
        lib_prefix = "libgtest",
        install_hint = _SETUP + " (Debian: libgtest-dev)",
        targets = {"gtest": "gtest pthread", "gtest_main": "gtest_main gtest pthread"},
    )
    system_lib(
        name = "gloo",
        display_name = "Gloo",
        env_var = "GLOO_DIR",
        probe_header = "gloo/config.h",
        install_hint = _SETUP + " (Debian: libgloo-dev)",
        targets = {"gloo": ""},
    )
