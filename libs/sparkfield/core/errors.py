"""The errors a user sees as one ``error:`` line and exit code 2: something to fix in the conf,
the flags, the inputs or the machine, never an internal failure.

They are defined here, below every other module, so that any layer can raise them and the
entry point (and :mod:`sparkfield.core.failures`, for errors raised on executors) can recognise
them by their common base.
"""

from __future__ import annotations


class UserError(Exception):
    """Base of the errors that name what the user has to fix."""


class ConfigError(UserError, ValueError):
    """A configuration file or flag is missing or invalid."""


class InputError(UserError, ValueError):
    """An input is missing or unusable as a whole (not a bad row: those become rejects)."""


class ColumnError(InputError):
    """A column a function or stage was told to read is missing or of the wrong type; the
    message names the column and what the frame holds instead."""


class DeviceError(UserError, RuntimeError):
    """The requested accelerator (or the engine's support for it) is not there."""


class SavedStageError(InputError):
    """A saved stage, Pipeline or model that cannot be loaded: the message names its folder
    and what is wrong with it."""
