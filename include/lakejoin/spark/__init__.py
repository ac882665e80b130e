"""The Spark side of every build. Only this package imports pyspark."""
