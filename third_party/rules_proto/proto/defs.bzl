"""Stand-in for rules_proto: forwards to Bazel 4.2.3's native proto rules."""

def proto_library(**kwargs):
    native.proto_library(**kwargs)

def proto_lang_toolchain(**kwargs):
    native.proto_lang_toolchain(**kwargs)
