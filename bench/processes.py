"""The benches' subprocesses: started in their own session, stopped with Ctrl-C (then killed)."""
import os
import signal
import subprocess


def start(args, log, cwd=None, env=None):
    """Run `args` with stdout and stderr to the open file `log`, in `cwd`, with this
    environment plus `env`."""
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            cwd=cwd, env=dict(os.environ, PYTHONUNBUFFERED='1', **(env or {})))


def stop(proc):
    """Ctrl-C to its process group, SIGKILL after 10 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
