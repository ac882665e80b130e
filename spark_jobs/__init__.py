"""spark-submit entry points: one module per job with ``main(argv)``; they call the library."""
