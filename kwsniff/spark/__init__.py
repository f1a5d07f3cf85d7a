"""PySpark jobs: analysis of exports and distributed decoding of captures."""
