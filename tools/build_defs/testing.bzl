"""For tests of vit_ddp that need several CPU processes (Gloo)."""

load("@libtorch//:build_info.bzl", "HAS_GLOO")

# Whether this build's LibTorch has Gloo, which the device report's "c10d Gloo" line says:
# known here, where asking vit_ddp costs a LibTorch start. A test skips its cases of
# several CPU processes where DDPLAB_GLOO is 0.
GLOO_ENV = {"DDPLAB_GLOO": "1" if HAS_GLOO else "0"}
