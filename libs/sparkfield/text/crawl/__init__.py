"""Polite fetching: requests with deadlines and size caps, robots.txt and Crawl-delay, conditional
revalidation, and the state a crawl keeps between runs."""
