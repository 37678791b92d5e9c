"""Rigid-body dynamics, ROS-free: spatial algebra, the robot model (from URDF or DH) and RNEA."""
