"""Helpers shared by ddplab's repository rules."""

def getenv(rctx, name):
    """Returns the environment variable `name`, or None when unset or empty."""
    value = rctx.os.environ.get(name, "")
    return value if value else None

def python3_eval(rctx, code):
    """Runs `code` in the first python3 on PATH; returns its stripped stdout or None."""
    python = getenv(rctx, "DDPLAB_PYTHON") or rctx.which("python3")
    if not python:
        return None
    result = rctx.execute([python, "-c", code], timeout = 120)
    if result.return_code != 0:
        return None
    out = result.stdout.strip()
    return out if out else None

def exists(rctx, path):
    return rctx.path(path).exists

def first_existing(rctx, paths):
    for p in paths:
        if p and exists(rctx, p):
            return p
    return None

def system_lib_dirs(rctx):
    """The system's library directories, multiarch first."""
    dirs = []
    for arch in ["x86_64-linux-gnu", "aarch64-linux-gnu"]:
        for prefix in ["/usr/lib/", "/lib/"]:
            if exists(rctx, prefix + arch):
                dirs.append(prefix + arch)
    return dirs + ["/usr/lib64", "/usr/lib", "/usr/local/lib"]

def find_lib(rctx, dirs, names):
    """Returns (dir, file name) of the first library in `names` found in `dirs`."""
    for d in dirs:
        for n in names:
            if exists(rctx, d + "/" + n):
                return (d, n)
    return (None, None)

def missing_repo(rctx, message, targets):
    """Writes a repository whose targets fail at analysis time with `message`.

    Used where a dependency is only needed by some builds (CUDA, NCCL): a build that does
    not need it never analyzes these targets; one that does fails with the message.
    """
    build = [
        "# Written by ddplab: this dependency was not found on this machine.",
        'load("@ddplab//third_party:common_rules.bzl", "missing_dependency")',
        'package(default_visibility = ["//visibility:public"])',
        "",
    ]
    for t in targets:
        build.append("missing_dependency(name = {}, message = {})".format(repr(t), repr(message)))
    rctx.file("BUILD.bazel", "\n".join(build) + "\n")
    rctx.file("build_info.bzl", "FOUND = False\nROOT = None\n")

def link_opts_for(lib_dir, libs, system = False, no_as_needed = False):
    """Linker options for shared libraries in lib_dir, with an rpath unless system."""
    opts = []
    if lib_dir and not system:
        opts += ["-L" + lib_dir, "-Wl,-rpath," + lib_dir]
    if no_as_needed:
        opts.append("-Wl,--no-as-needed")
    for l in libs:
        if l.startswith("lib") and ".so" in l:
            opts.append("-l:" + l)
        else:
            opts.append("-l" + l)
    if no_as_needed:
        opts.append("-Wl,--as-needed")
    return opts
