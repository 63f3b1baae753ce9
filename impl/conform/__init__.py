"""`epochgc conform`: drive a port of the model with generated programs over the port
protocol (spec/VECTORS.md), compare every answer with the model's, shrink the first
disagreement. `client` talks to the port process, `programs` generates steps, `compare`
decides agreement, `driver` runs vectors and programs, `report` prints and writes them."""
