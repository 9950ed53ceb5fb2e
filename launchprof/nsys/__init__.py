"""Running Nsight Systems: locate nsys, export .nsys-rep to SQLite, profile workloads.

The only package that starts external programs.
"""
