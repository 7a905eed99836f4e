"""A boolean command-line build setting (Bazel 4 has no built-in one without Skylib)."""

BoolFlagInfo = provider(fields = ["value"])

def _bool_flag_impl(ctx):
    return [BoolFlagInfo(value = ctx.build_setting_value)]

bool_flag = rule(
    implementation = _bool_flag_impl,
    build_setting = config.bool(flag = True),
)
