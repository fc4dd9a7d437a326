"""``assertDataFrameEqual`` whatever pandas is installed.

PySpark 4.3's ``assertDataFrameEqual`` imports pandas-on-Spark whenever pandas
is importable, only to recognise pandas-on-Spark frames; pandas-on-Spark itself
does not import under pandas 3 (``DateOffset`` moved). These tests compare
Spark DataFrames only, so when the real modules cannot load, stand-ins that no
frame is an instance of are registered for that check.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _register_stand_ins() -> None:
    try:
        import pyspark.pandas  # noqa: F401
        import pyspark.testing.pandasutils  # noqa: F401
    except ImportError:
        for name in [m for m in sys.modules if m.startswith("pyspark.pandas")]:
            del sys.modules[name]
        pandas_on_spark = types.ModuleType("pyspark.pandas")
        pandas_on_spark.DataFrame = type("DataFrame", (), {})  # type: ignore[attr-defined]
        utils = types.ModuleType("pyspark.testing.pandasutils")
        utils.PandasOnSparkTestUtils = object  # type: ignore[attr-defined]
        sys.modules["pyspark.pandas"] = pandas_on_spark
        sys.modules["pyspark.testing.pandasutils"] = utils


def assert_frames_equal(actual: DataFrame, expected: DataFrame, **options: Any) -> None:
    """:func:`pyspark.testing.assertDataFrameEqual` (schema and rows, any row order)."""
    _register_stand_ins()
    from pyspark.testing import assertDataFrameEqual

    assertDataFrameEqual(actual, expected, **options)
