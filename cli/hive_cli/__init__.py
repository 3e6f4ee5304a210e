"""hive: the command-line client of GPU Hive."""
