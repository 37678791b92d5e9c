"""Programs on top of the layers: the demo, the trajectory sender and the bag recorder."""
