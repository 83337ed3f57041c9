"""Fetch-side pieces of a crawl that stays fresh: conditional request headers from a stored
page's validators, and the ``Crawl-delay`` a robots.txt asks of our user agent.

The standard library's ``RobotFileParser.crawl_delay`` only reads whole seconds (``0.5`` is
dropped), so the delay is read here with the same group rules: the first group naming a token of
our user agent, else the ``*`` group.
"""

from __future__ import annotations

import math


def conditional_headers(etag: str | None, last_modified: str | None) -> dict[str, str]:
    """``If-None-Match`` / ``If-Modified-Since`` for a stored page (none when it has none)."""
    headers = {}
    if isinstance(etag, str) and etag:
        headers["If-None-Match"] = etag
    if isinstance(last_modified, str) and last_modified:
        headers["If-Modified-Since"] = last_modified
    return headers


def _groups(lines: list[str]) -> list[tuple[list[str], float | None]]:
    groups: list[tuple[list[str], float | None]] = []
    agents: list[str] = []
    delay: float | None = None
    in_rules = False
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if ":" not in line:
            continue
        key, value = (s.strip() for s in line.split(":", 1))
        key = key.lower()
        if key == "user-agent":
            if in_rules:  # a new group starts
                groups.append((agents, delay))
                agents, delay, in_rules = [], None, False
            agents.append(value.lower())
        elif agents:
            in_rules = True
            if key == "crawl-delay":
                try:
                    d = float(value)
                except ValueError:
                    continue
                if math.isfinite(d) and d >= 0:
                    delay = d
    if agents:
        groups.append((agents, delay))
    return groups


def crawl_delay(robots_txt: str, user_agent: str) -> float | None:
    """Seconds between requests that ``robots_txt`` asks of ``user_agent`` (None: no ask)."""
    product = user_agent.split("/", 1)[0].strip().lower()
    groups = _groups(robots_txt.splitlines())
    for agents, delay in groups:
        if any(a != "*" and a in product for a in agents):
            return delay
    for agents, delay in groups:
        if "*" in agents:
            return delay
    return None
