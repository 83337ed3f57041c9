"""Coffee-shop location search: where to open near a rapid-transit station with no competitor
nearby and little crime, on an exact metric lattice computed in Spark tiles.

Parameters are the job section parsed by ``sparkfield.geo.params.SCHEMA``
(``SCHEMA.parse({"search": {"top": 3}})``), an instance of :data:`CoffeeShopsParams`."""

from sparkfield.geo.job import CoffeeShopResult, run
from sparkfield.geo.params import CoffeeShopsParams

__all__ = ["CoffeeShopResult", "CoffeeShopsParams", "run"]
