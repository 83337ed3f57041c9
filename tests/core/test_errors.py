"""Errors that name what the user must fix come back from executors as themselves."""

from __future__ import annotations

import pytest

from sparkfield.core.errors import ConfigError, DeviceError, InputError, UserError
from sparkfield.core.failures import executor_error, raises_input_errors, spark_input_error


def _raise_on_executor(spark, error: type[UserError], message: str) -> None:
    def fail(batches):
        for _ in batches:
            raise error(message)
        yield from ()

    spark.range(2, numPartitions=1).mapInPandas(fail, "id long").collect()


@pytest.mark.parametrize("error", [DeviceError, InputError, ConfigError])
def test_an_error_raised_on_an_executor_comes_back_as_one_line(spark, error):
    message = f"no CUDA device for this task ({error.__name__})"
    with pytest.raises(Exception) as caught:
        _raise_on_executor(spark, error, message)
    assert not isinstance(caught.value, UserError)  # Spark wraps it ...
    rebuilt = executor_error(caught.value)
    assert type(rebuilt) is error and str(rebuilt) == message  # ... and it is rebuilt
    assert spark_input_error(caught.value) == message


def test_a_wrapped_step_raises_the_executor_error_itself(spark):
    @raises_input_errors
    def step():
        _raise_on_executor(spark, DeviceError, "--device cuda but torch sees no CUDA device")

    with pytest.raises(DeviceError, match="sees no CUDA device"):
        step()


def test_user_errors_share_one_base_and_keep_their_builtin_kinds():
    assert issubclass(ConfigError, ValueError) and issubclass(InputError, ValueError)
    assert issubclass(DeviceError, RuntimeError)
    assert all(issubclass(e, UserError) for e in (ConfigError, InputError, DeviceError))
