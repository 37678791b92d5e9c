"""The controller's logic, ROS-free: trajectories, the control law and its limits, parameters,
loop statistics. Imports `dynamics`, never rclpy."""
