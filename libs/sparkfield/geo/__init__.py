"""Coffee-shop location search: where to open near a rapid-transit station with no competitor
nearby and little crime, on an exact metric lattice computed in Spark tiles.

On DataFrames already at hand: :func:`best_locations` (ranked distinct sites, a Spark
DataFrame; :func:`best_locations_pandas` the same rows as pandas) and :func:`search_lattice`
(every passing lattice point, a Spark DataFrame); they run over Spark Connect too. The job:
:func:`run`, whose parameters are the job section parsed by the job's schema
(``sparkfield.geo.params``), an instance of :data:`CoffeeShopsParams`."""

from sparkfield.geo.job import CoffeeShopResult, run
from sparkfield.geo.locations import (
    SearchContext,
    best_locations,
    best_locations_pandas,
    search_lattice,
)
from sparkfield.geo.params import CoffeeShopsParams

__all__ = ["CoffeeShopResult", "CoffeeShopsParams", "SearchContext", "best_locations",
           "best_locations_pandas", "run", "search_lattice"]
