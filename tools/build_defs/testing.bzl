"""For tests of vit_ddp: several CPU processes (Gloo), and CI's sanitizer pass."""

load("@libtorch//:build_info.bzl", "HAS_GLOO")

# Whether this build's LibTorch has Gloo, which the device report's "c10d Gloo" line says:
# known here, where asking vit_ddp costs a LibTorch start. A test skips its cases of
# several CPU processes where DDPLAB_GLOO is 0.
GLOO_ENV = {"DDPLAB_GLOO": "1" if HAS_GLOO else "0"}

# Tags of a test that CI's sanitizer pass leaves out because its other tests reach every
# line of ddplab this one reaches (it still runs in `bazel test //...`).
# bench/sanitizer_coverage.sh checks the claim, and names the lines where it fails.
COVERED_ELSEWHERE = ["covered_elsewhere"]
