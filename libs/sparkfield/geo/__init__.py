"""Coffee-shop location search: where to open near a rapid-transit station with no competitor
nearby and little crime, on an exact metric lattice computed in Spark tiles."""

from sparkfield.geo.job import CoffeeShopParams, CoffeeShopResult, run

__all__ = ["CoffeeShopParams", "CoffeeShopResult", "run"]
