"""The MuJoCo simulated arm: the plant (ROS-free) and its ROS 2 node."""
