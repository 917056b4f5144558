"""The fleet at run time: the collector that lands vitals, and the simulator."""
