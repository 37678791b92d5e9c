"""How the programs take Ctrl-C: once, as KeyboardInterrupt, and never again during clean-up.

Under `ros2 launch` a terminal's Ctrl-C reaches each process twice (the terminal signals the
whole process group, and launch forwards it), and launch escalates to SIGTERM. A second signal
must not interrupt a clean-up half-way (a traceback, exit code -2, a node left half
destroyed). The controller itself uses flags seen between callbacks (ros/realtime.py).
"""
import signal


def _interrupt(signum, frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def interrupt_once():
    """SIGINT or SIGTERM raise KeyboardInterrupt in the main thread once; later ones are
    ignored (SIGKILL still ends a clean-up that hangs)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
