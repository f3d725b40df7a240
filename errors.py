"""The one exception hierarchy of berthsim.

A leaf module: it imports nothing of the project, so ``dynamics`` and ``protocol``
(which import nothing else of the project) may both use it.

Every error derives from :class:`BerthsimError` and also from the builtin it most
resembles, so callers may catch either. Messages name the offending field and value.
"""

from __future__ import annotations


class BerthsimError(Exception):
    """Root of every error raised by berthsim."""


class ConfigError(BerthsimError, ValueError):
    """A configuration (TOML scenario, model parameters) is invalid.

    ``problems`` lists every problem found, one human-readable line each.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems: list[str] = list(problems) if problems else [message]
        super().__init__(message)


class ShapeError(BerthsimError, ValueError):
    """An array argument has the wrong shape, or is not finite."""


class ModelError(BerthsimError, ValueError):
    """Physical model data are inadmissible (non-positive mass, indefinite inertia, ...)."""


class SingularityError(BerthsimError, ArithmeticError):
    """A configuration is singular where a regular one is required."""


class NoSolutionError(BerthsimError, ArithmeticError):
    """Model parameters admit no real solution (e.g. an impact law's quadratic)."""


class MessageError(BerthsimError, ValueError):
    """A bus message failed to decode or validate (topic, field and value are named)."""


class DivergenceError(MessageError):
    """A model's output to publish is not finite: its simulation diverged (topic and field named).

    Raised when a body is encoded (:mod:`protocol.codec`); a received non-finite message is a
    plain :class:`MessageError` (counted and dropped by its consumer)."""


class BusError(BerthsimError, OSError):
    """A transport failure on the bus."""


class BusTimeout(BusError, TimeoutError):
    """A bus operation did not complete in time."""


class LifecycleError(BerthsimError, RuntimeError):
    """A lifecycle transition that is not allowed, or a service that failed."""


class FrameError(BerthsimError, ValueError):
    """A serial frame failed to decode (COBS, length, CRC, version, type)."""


class RigFault(BerthsimError, RuntimeError):
    """The rig link or the rig itself reported a fault."""


class LogError(BerthsimError, OSError):
    """A log file is missing, truncated or not MCAP."""
