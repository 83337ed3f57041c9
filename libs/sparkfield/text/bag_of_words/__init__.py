"""The bag of words itself: HTML to text, Punkt sentences and the token rule, near-duplicates, the
pinned vocabulary and vectors, as DataFrame functions and Spark ML stages."""
