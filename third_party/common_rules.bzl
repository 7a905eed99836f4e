"""Build rules shared by the repositories that ddplab's repository rules write."""

def _missing_dependency_impl(ctx):
    fail("\n\n" + ctx.attr.message + "\n")

# A target that stands in for a dependency this build cannot have. Analysis fails with
# `message` only when a build actually needs it.
missing_dependency = rule(
    implementation = _missing_dependency_impl,
    attrs = {"message": attr.string(mandatory = True)},
)
