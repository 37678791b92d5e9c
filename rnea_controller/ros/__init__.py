"""ROS 2 glue of the controller: the lifecycle node, its inputs, parameters and diagnostics."""
