"""Bag analysis, ROS-free (rosbags): reading, metrics, plots and the validator."""
