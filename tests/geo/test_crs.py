import numpy as np
import pyproj
from pyspark.sql import functions as F

from sparkfield.geo.crs import UTM10N


def test_forward_and_inverse_match_proj_to_a_millimetre(spark):
    rng = np.random.default_rng(1)
    lon = rng.uniform(-123.3, -122.9, 500)
    lat = rng.uniform(49.15, 49.35, 500)
    proj = pyproj.Transformer.from_crs(4269, 26910, always_xy=True)
    px, py = proj.transform(lon, lat)
    x, y = UTM10N.to_xy(lon, lat)
    assert np.abs(x - px).max() < 1e-3 and np.abs(y - py).max() < 1e-3
    back_lon, back_lat = UTM10N.to_lonlat(px, py)
    assert np.abs(back_lon - lon).max() < 1e-8 and np.abs(back_lat - lat).max() < 1e-8
    # the same formulas as Spark column expressions
    df = spark.createDataFrame([(float(a), float(b)) for a, b in zip(lon, lat, strict=True)],
                               "lon double, lat double")
    cx, cy = UTM10N.to_xy_cols(F.col("lon"), F.col("lat"))
    got = np.array(df.select(cx.alias("x"), cy.alias("y")).collect())
    assert np.abs(got[:, 0] - px).max() < 1e-3 and np.abs(got[:, 1] - py).max() < 1e-3
    assert UTM10N.epsg == 26910
