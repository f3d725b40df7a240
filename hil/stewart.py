"""Deprecated alias of :mod:`dynamics.stewart` (rig kinematics moved there: they are pure float kernels).

Importing it warns (:class:`DeprecationWarning`); it goes with dynamics 0.3.0 (``CHANGELOG.md``).
"""

from __future__ import annotations

import warnings

from dynamics.stewart import *  # noqa: F403 - the alias re-exports the module's public names
from dynamics.stewart import __all__  # noqa: F401

warnings.warn("hil.stewart is deprecated: use dynamics.stewart (the alias goes with dynamics 0.3.0)",
              DeprecationWarning, stacklevel=2)
