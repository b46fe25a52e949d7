"""Domain exceptions. The CLI catches ProtolabError in one place and prints its message."""


class ProtolabError(Exception):
    """Base of every error protolab reports to a user without a traceback."""


class LabError(ProtolabError):
    """The emulator could not build, run, control or tear down a lab."""


class ToolError(ProtolabError):
    """An external tool (irtt, iperf3, ping, ip, ...) failed or produced unusable output."""


class ValidationFailed(ProtolabError):
    """The emulator validation ran to the end but some checks failed."""
