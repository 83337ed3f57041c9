import pyproj
import pytest
from chispa import assert_approx_df_equality

from sparkfield.core.errors import InputError
from sparkfield.geo.inputs import StudyArea, read_competitors, read_crimes, read_stations

CATS = {"theft": ["Theft from Vehicle", "Other Theft"], "mischief": ["Mischief"]}
IGNORED = ["Vehicle Collision or Pedestrian Struck (with Injury)"]
AREA = StudyArea(480000, 5445000, 502000, 5466000)

CRIMES = """TYPE,YEAR,X,Y,Latitude,Longitude
Theft from Vehicle,2016,492323.48,5458662.46,,
Mischief,2016,,,49.2658,-123.0789
Other Theft,2016,0,0,49.2658,-123.0789
Mischief,2016,0,0,,
Mischief,2016,abc,5458662.46,,
Alien Abduction,2016,492323.48,5458662.46,,
Vehicle Collision or Pedestrian Struck (with Injury),2016,492323.48,5458662.46,,
,2016,492323.48,5458662.46,,
Theft from Vehicle,2016,100000,5458662.46,,
Mischief,2016,1,2,3,4,5,6
,,,,,
"""


@pytest.fixture()
def crimes_file(tmp_path):
    p = tmp_path / "crimes.csv"
    p.write_text(CRIMES)
    return str(p)


def test_every_crime_row_is_used_ignored_or_rejected_with_a_reason(spark, crimes_file):
    got = read_crimes(spark, crimes_file, CATS, IGNORED, AREA)
    px, py = pyproj.Transformer.from_crs(4269, 26910, always_xy=True).transform(-123.0789, 49.2658)
    expected = spark.createDataFrame(
        [(492323.48, 5458662.46, "theft"), (px, py, "mischief"), (px, py, "theft")],
        "x double, y double, category string",
    )
    assert_approx_df_equality(got.crimes, expected, precision=1e-3, ignore_row_order=True,
                              ignore_nullable=True)
    reasons = sorted(r["reason"] for r in got.rejects.collect())
    assert reasons == sorted([
        "missing or zero coordinates", "non-numeric coordinates", "unknown crime type",
        "missing crime type", "outside study area", "malformed row", "missing crime type",
    ])
    assert got.ignored.count() == 1
    # each reject keeps its raw row: the fields as read, or the unparsed line
    records = {r["reason"] + "|" + r["record"] for r in got.rejects.collect()}
    assert ('non-numeric coordinates|{"TYPE":"Mischief","YEAR":"2016","X":"abc",'
            '"Y":"5458662.46"}') in records
    assert "malformed row|Mischief,2016,1,2,3,4,5,6" in records
    assert ('outside study area|{"TYPE":"Theft from Vehicle","YEAR":"2016","X":"100000",'
            '"Y":"5458662.46"}') in records
    counts = got.outcome_counts()
    assert sum(counts.values()) == got.classified.count() == 11  # nothing lost
    assert counts["theft"] == 2 and counts["mischief"] == 1


def test_crimes_without_coordinate_columns_are_a_clear_error(spark, tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("TYPE,WHERE\nMischief,here\n")
    with pytest.raises(InputError, match="X/Y or Latitude/Longitude"):
        read_crimes(spark, str(p), CATS, IGNORED, AREA)
    with pytest.raises(InputError, match="not found"):
        read_crimes(spark, str(tmp_path / "missing.csv"), CATS, IGNORED, AREA)


def test_stations_from_csv_and_geojson_agree(spark, shared_data):
    van = shared_data / "vancouver"
    a = read_stations(spark, str(van / "rapid_transit_stations.csv"), AREA)
    b = read_stations(spark, str(van / "rapid-transit-stations.geojson"), AREA)
    assert len(a.points) == len(b.points) == 22 and a.rejects.empty
    assert (a.points["name"].tolist() == b.points["name"].tolist())
    assert (a.points["x"] - b.points["x"]).abs().max() < 1e-6


def test_competitors_from_the_full_directory_are_filtered_to_the_city(spark, shared_data):
    van = shared_data / "vancouver"
    full = read_competitors(spark, str(van / "starbucks_directory.csv.gz"), AREA,
                            {"City": "Vancouver", "State/Province": "BC", "Country": "CA"})
    subset = read_competitors(spark, str(van / "starbucks_vancouver_bc.csv"), AREA,
                              {"City": "Vancouver", "State/Province": "BC", "Country": "CA"})
    assert full.out_of_scope == 25600 - 110
    assert len(full.points) + len(full.rejects) == 110
    assert full.points.equals(subset.points)
    # two-decimal coordinates north of the city (North Vancouver) fall outside the study area
    assert set(full.rejects["reason"]) == {"outside study area"}


def test_plain_lon_lat_competitors_with_bad_rows(spark, tmp_path):
    p = tmp_path / "comp.csv"
    p.write_text("name,longitude,latitude\nA,-123.1,49.26\nB,,\nC,x,49.2\nD,-120.0,49.2\n")
    got = read_competitors(spark, str(p), AREA, {"City": "Vancouver"})
    assert got.points["name"].tolist() == ["A"]
    assert got.rejects["reason"].tolist() == [
        "missing or zero coordinates", "non-numeric coordinates", "outside study area"]
