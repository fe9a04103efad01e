"""clusterdef: one typed definition of a GPU cluster, compiled into everything that builds it."""

__version__ = "0.1.0"
