"""Finds Abseil, Protocol Buffers (with protoc), GoogleTest and Gloo.

Each comes from the system (Debian's libabsl-dev, libprotobuf-dev and protobuf-compiler,
libgtest-dev, libgloo-dev: tools/setup.sh installs them) unless a variable names another
installation: ABSL_DIR, PROTOBUF_DIR, GTEST_DIR, GLOO_DIR (each a prefix holding include/
and lib/). System headers need no include path; a prefix's headers get one.
"""

load("//third_party:common.bzl", "exists", "getenv", "system_lib_dirs")

def _prefix(rctx, var, probe_header):
    """Returns (include dir or None for the system's, library dirs, where it was looked for)."""
    env = getenv(rctx, var)
    if env:
        return (env + "/include", [env + "/lib", env + "/lib64"], "${}={}".format(var, env))
    for inc in ["/usr/include", "/usr/local/include"]:
        if exists(rctx, inc + "/" + probe_header):
            return (None if inc == "/usr/include" else inc, system_lib_dirs(rctx), "the system")
    return (None, system_lib_dirs(rctx), "the system")

def _find_libs(rctx, lib_dirs, prefix):
    for d in lib_dirs:
        if not exists(rctx, d):
            continue
        names = sorted([e.basename for e in rctx.path(d).readdir() if e.basename.startswith(prefix)])
        if names:
            return (d, names)
    return (None, [])

def _system_lib_impl(rctx):
    name = rctx.attr.display_name
    (include, lib_dirs, where) = _prefix(rctx, rctx.attr.env_var, rctx.attr.probe_header)
    probe = (include or "/usr/include") + "/" + rctx.attr.probe_header
    if not exists(rctx, probe):
        fail("\n\n{} not found in {} (no {}). {}, or set {} to its installation prefix.\n".format(
            name, where, probe, rctx.attr.install_hint, rctx.attr.env_var))
    lib_dir = None
    if rctx.attr.lib_prefix:
        (lib_dir, names) = _find_libs(rctx, lib_dirs, rctx.attr.lib_prefix)
        if not lib_dir:
            fail("\n\n{} headers found, but no {}* library in {}. {}, or set {}.\n".format(
                name, rctx.attr.lib_prefix, ", ".join(lib_dirs), rctx.attr.install_hint, rctx.attr.env_var))
    system = include == None
    hdrs = "[]"
    includes = "[]"
    if not system:
        rctx.symlink(include, "include")
        hdrs = 'glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.inc"])'
        includes = '["include"]'
    link_dir = [] if (system or not lib_dir) else ["-L" + lib_dir, "-Wl,-rpath," + lib_dir]
    targets = []
    for (target, libs) in rctx.attr.targets.items():
        linkopts = link_dir + ["-l" + l for l in libs.split(" ") if l] if libs else []
        targets.append("""
cc_library(
    name = "{target}",
    hdrs = {hdrs},
    includes = {includes},
    linkopts = {linkopts},
)
""".format(target = target, hdrs = hdrs, includes = includes, linkopts = repr(linkopts)))
    if rctx.attr.tool:
        tool = rctx.which(rctx.attr.tool) if system else rctx.path(getenv(rctx, rctx.attr.env_var) + "/bin/" + rctx.attr.tool)
        if not tool or not tool.exists:
            fail("\n\n{} not found (no {} on PATH). {}, or set {}.\n".format(name, rctx.attr.tool, rctx.attr.install_hint, rctx.attr.env_var))
        rctx.symlink(tool, rctx.attr.tool)
        targets.append('exports_files(["{}"])\n'.format(rctx.attr.tool))
    if rctx.attr.lib_prefix == "libabsl_":
        # Abseil is many small libraries; link them all, keeping only those used.
        (_, names) = _find_libs(rctx, [lib_dir], "libabsl_")
        libs = [n[3:-3] for n in names if n.endswith(".so")]
        targets.append("""
cc_library(
    name = "absl",
    hdrs = {hdrs},
    includes = {includes},
    linkopts = {link_dir} + ["-Wl,--as-needed"] + {libs} + ["-Wl,--no-as-needed"],
)
""".format(hdrs = hdrs, includes = includes, link_dir = repr(link_dir), libs = repr(["-l" + l for l in libs])))
    rctx.file("BUILD.bazel", "# Written by ddplab's system_configure: {} from {}.\npackage(default_visibility = [\"//visibility:public\"])\n".format(name, where) + "".join(targets))

system_lib = repository_rule(
    implementation = _system_lib_impl,
    attrs = {
        "display_name": attr.string(mandatory = True),
        "env_var": attr.string(mandatory = True),
        "probe_header": attr.string(mandatory = True),
        "lib_prefix": attr.string(),
        "install_hint": attr.string(mandatory = True),
        # target name -> space-separated libraries it links ("" for headers only)
        "targets": attr.string_dict(),
        "tool": attr.string(),
    },
    environ = ["ABSL_DIR", "PROTOBUF_DIR", "GTEST_DIR", "GLOO_DIR", "PATH"],
    local = True,
)
