"""Web archives (WARC and WET, ISO 28500): records cut out exactly, read as pages, HTTP bodies
decoded, and a crawl written back as WARC."""
