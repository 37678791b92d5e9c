"""Bag validation speed and memory (`./run bench validate`).

Synthetic runs of the bundled arm at 1 kHz, 1, 2.5 and 10 minutes long (the 10-minute bag holds
600k joint states, 600k references and 600k commands: 1.8M messages, MCAP), with a 2 kg payload
the model does not know and a 50 ms gap; generated once (efforts by Pinocchio) and cached under
bench_output/validate/.

Each validation runs in a fresh process (`validate_bag`, plots included), which reports its time
and peak resident memory (getrusage maxrss). Side by side, in the same run:
- peer "rosbags": plain rosbags deserialization of the same three topics, no analysis
  (Reader + Typestore.deserialize_cdr per message): the floor of a straightforward reader;
- peer "load all": the naive approach, every message deserialized and kept until the end
  (1 and 2.5 minutes only: its memory grows linearly, which is the point).
Targets (issue 5): the 10-minute bag validated in ≤ 60 s; memory growing less than linearly.
For the 10-minute bag also `validate_bag(identify=True)` (issue 13: payload and friction fit);
the identification's time is its difference from the plain validation.
"""
import json
from pathlib import Path
import resource
import subprocess
import sys
import time

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / 'bench_output' / 'validate'
MINUTES = (1.0, 2.5, 10.0)
TOPICS = ('/joint_states', '/rnea_controller/reference', '/effort_controller/commands')


def bag_path(minutes):
    return CACHE / f'run_{minutes:g}min'


def generate(minutes):
    """Write (once) the synthetic bag of `minutes` minutes; return its path."""
    path = bag_path(minutes)
    done = path / 'complete'
    if done.exists():
        return path
    sys.path.insert(0, str(ROOT / 'test'))
    from synthetic_bags import make_run, write_run

    from rnea_controller import default_urdf_path, RobotModel
    model = RobotModel.from_urdf_file(default_urdf_path())
    start = time.perf_counter()
    run = make_run(default_urdf_path(), model.joint_names, model.effort_limits,
                   duration=60.0 * minutes, payload=2.0, saturate=(1, 20.0, 0.5))
    write_run(path, run, default_urdf_path().read_text(), gap=(30.0, 0.05))
    done.write_text('ok\n')
    print(f'  generated {path.name} in {time.perf_counter() - start:.1f} s', file=sys.stderr)
    return path


def child_validate(bag, out, identify=False):
    from rnea_controller.analysis.validate import validate_bag
    start = time.perf_counter()
    result = validate_bag(bag, out, progress=False, identify=identify)
    elapsed = time.perf_counter() - start
    payload = result.report.get('identification', {}).get('payload', {})
    return {'seconds': elapsed, 'payload_kg': result.report['residual']['payload_kg'],
            'gaps': result.report['loop']['gap_count'],
            'delay_ms': result.report['delay']['overall']['tau_ms'],
            'identified_kg': payload.get('mass')}


def child_rosbags(bag):
    from rosbags.rosbag2 import Reader

    from rnea_controller.analysis.bagio import default_typestore
    store = default_typestore()
    start = time.perf_counter()
    count = 0
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.topic in TOPICS]
        for conn, _, raw in reader.messages(connections=conns):
            store.deserialize_cdr(raw, conn.msgtype)
            count += 1
    return {'seconds': time.perf_counter() - start, 'messages': count}


def child_load_all(bag):
    import numpy as np
    from rosbags.rosbag2 import Reader

    from rnea_controller.analysis.bagio import default_typestore
    store = default_typestore()
    start = time.perf_counter()
    messages = {t: [] for t in TOPICS}
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.topic in TOPICS]
        for conn, _, raw in reader.messages(connections=conns):
            messages[conn.topic].append(store.deserialize_cdr(raw, conn.msgtype))
    q = np.array([m.position for m in messages['/joint_states']])
    q_d = np.array([m.position for m in messages['/rnea_controller/reference']])
    rms = np.sqrt(np.mean((q_d - q) ** 2, axis=0))
    return {'seconds': time.perf_counter() - start, 'rms': rms.tolist()}


def measure(kind, bag):
    """Run one measurement in a fresh interpreter; add its peak RSS [MB]."""
    out = subprocess.run([sys.executable, __file__, '--child', kind, str(bag)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def peak_rss_mb():
    """This process's peak resident memory [MB]: VmHWM, which (unlike getrusage's maxrss,
    inherited from the parent across fork) starts afresh at exec."""
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_main(kind, bag):
    out = CACHE / f'{Path(bag).name}_report'
    result = {'validate': lambda: child_validate(bag, out),
              'identify': lambda: child_validate(bag, out, identify=True),
              'rosbags': lambda: child_rosbags(bag),
              'load_all': lambda: child_load_all(bag),
              'generate': lambda: {'path': str(generate(float(bag)))}}[kind]()
    result['maxrss_mb'] = peak_rss_mb()
    print(json.dumps(result))


def main():
    CACHE.mkdir(parents=True, exist_ok=True)
    print('bench_validate: rnea-validate on synthetic 1 kHz runs (3 topics at 1 kHz)')
    rows = []
    for minutes in MINUTES:
        bag = Path(measure('generate', minutes)['path'])
        messages = int(minutes * 60_000) * 3
        ours = measure('validate', bag)
        peer = measure('rosbags', bag)
        naive = measure('load_all', bag) if minutes < 5 else None
        rows.append((minutes, messages, ours, peer, naive))
        print(f'  {minutes:>4g} min, {messages:>9,} messages: validate {ours["seconds"]:6.2f} s '
              f'({messages / ours["seconds"]:>9,.0f} msg/s, peak RSS {ours["maxrss_mb"]:6.0f} MB)'
              f' | rosbags deserialize only {peer["seconds"]:6.2f} s '
              f'(peak {peer["maxrss_mb"]:5.0f} MB) | ratio '
              f'{peer["seconds"] / ours["seconds"]:4.2f}x'
              + (f' | load-all peak {naive["maxrss_mb"]:6.0f} MB' if naive else ''))
        print(f'       estimated payload {ours["payload_kg"]:.3f} kg (true 2.000), '
              f'{ours["gaps"]} gap(s) found (1 set), effective delay {ours["delay_ms"]:.2f} ms '
              '(true 0)')
    identified = measure('identify', bag_path(MINUTES[-1]))
    print(f'  {MINUTES[-1]:>4g} min with --identify: {identified["seconds"]:6.2f} s, '
          f'identification {identified["seconds"] - rows[-1][2]["seconds"]:+.2f} s '
          f'(peak RSS {identified["maxrss_mb"]:.0f} MB); payload {identified["identified_kg"]:.3f}'
          ' kg (true 2.000)')
    return _verdict(rows)


def _verdict(rows):
    (m1, n1, o1, _, l1), *_, (m10, n10, o10, _, _) = rows
    growth = (o10['maxrss_mb'] - o1['maxrss_mb']) / o1['maxrss_mb']
    print(f'  memory: {o1["maxrss_mb"]:.0f} MB at {m1:g} min -> {o10["maxrss_mb"]:.0f} MB at '
          f'{m10:g} min (x{m10 / m1:g} length, {growth * 100:+.1f} % memory); load-all grows '
          f'{l1["maxrss_mb"]:.0f} MB -> {rows[1][4]["maxrss_mb"]:.0f} MB over x2.5')
    ok_time = o10['seconds'] <= 60.0
    ok_memory = o10['maxrss_mb'] < 1.5 * o1['maxrss_mb']
    print(f'  target 10 min <= 60 s: {"PASS" if ok_time else "FAIL"} '
          f'({o10["seconds"]:.1f} s); sub-linear memory: {"PASS" if ok_memory else "FAIL"}')
    return ok_time and ok_memory


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == '--child':
        child_main(sys.argv[2], sys.argv[3])
    else:
        sys.exit(0 if main() else 1)
