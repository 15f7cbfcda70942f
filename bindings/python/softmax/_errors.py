# SPDX-License-Identifier: Apache-2.0
"""Turns a failed softmax_status into a Python exception carrying softmax_last_error()."""
from . import _library

# Statuses that say the caller passed something wrong: these also derive from ValueError, so
# `except ValueError` catches bad arguments whether this package or the library spotted them.
_ARGUMENT_STATUSES = frozenset(range(1, 9)) | {10}  # NULL_POINTER .. OVERLAPPING_BUFFERS, WRONG_MEMORY_SPACE


class SoftmaxError(RuntimeError):
    """A libsoftmax call failed.

    Attributes: status (the int code), status_name ("SOFTMAX_STATUS_INVALID_SIZE"), message
    (softmax_last_error(): "cols must be > 0, got 0").
    """

    def __init__(self, status, status_name, message):
        super().__init__("%s: %s" % (status_name, message))
        self.status = status
        self.status_name = status_name
        self.message = message


class SoftmaxArgumentError(SoftmaxError, ValueError):
    """A libsoftmax call rejected its arguments (bad size, p, options, overlap, memory space)."""


def status_name(status):
    return _library.lib.softmax_status_string(status).decode()


def check(status):
    """Raises for a failed status; reads the thread's last error right after the call."""
    if status == _library.STATUS_SUCCESS:
        return
    message = _library.lib.softmax_last_error().decode(errors="replace")
    cls = SoftmaxArgumentError if status in _ARGUMENT_STATUSES else SoftmaxError
    raise cls(status, status_name(status), message)
