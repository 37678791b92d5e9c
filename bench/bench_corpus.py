"""./run bench corpus: the closed-loop corpus's whole cross product (issue 43; test/corpus.py):
every arm here x 4 truths x 2 timings x 2 simulators, the node's defaults beside PD + gravity
tuned on the true arm under the same timing, one seed. Prints per case ours and the peer's RMS
[rad], final [rad], peak speed / velocity limit, largest command step / effort limit, contacts
and brakes, what breaks issue 43's bar, and the Stribeck slip past a breakaway that a loop
as late as the case's must allow (`corpus.stribeck_slip`) where it is over the final bar; then
how many final misses are among those, and per arm and truth the worst. Two processes
(the host's two cores); each case is its own seeded run, so the figures are those of one by one.

    python bench/bench_corpus.py [--arms panda,ur5] [--chains] [--seed N] [--processes K]
"""
import argparse
import multiprocessing
from pathlib import Path
import sys
import time

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'test'))


def _one(case):
    import corpus
    start = time.perf_counter()
    node, peer = corpus.run_case(case)
    return case, node, peer, time.perf_counter() - start, corpus.stribeck_slip(case)


def main(argv=None):
    import corpus
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--arms', help='comma-separated arm names (default: every one here)')
    parser.add_argument('--chains', action='store_true',
                        help="also the 7-joint arms of bigger robots (corpus.CHAINS: Baxter's, "
                             "PR2's, TIAGo's, Romeo's), never used to set the law")
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--processes', type=int, default=2)
    args = parser.parse_args(argv)
    here = corpus.available_arms(chains=args.chains)
    missing = sorted(set(corpus.ARMS) - set(here))
    if missing:
        print(f'left out (description absent): {", ".join(missing)} (iiwa14: ../shared/data)')
    arms = args.arms.split(',') if args.arms else sorted(here)
    cases = corpus.every_case(args.seed, arms)
    print(f'{len(cases)} cases: {len(arms)} arms x {len(corpus.TRUTHS)} truths x '
          f'{len(corpus.TIMINGS)} timings x {len(corpus.SIMULATORS)} simulators, seed '
          f'{args.seed}')
    header = (f'{"case":44s} {"RMS ours/peer":>19s} {"final ours/peer":>19s} '
              f'{"speed":>11s} {"step":>11s} c b  verdict [corpus.stribeck_slip where over '
              f'the final bar]')
    print(header)
    bad = 0
    rows = {}
    slips = [0, 0, 0]  # cases whose Stribeck slip is over the bar; of them, final misses; all
    with multiprocessing.get_context('spawn').Pool(args.processes) as pool:
        for case, node, peer, _wall, slip in pool.imap(_one, cases):
            why = corpus.failures(node, peer)
            bad += bool(why)
            missed = node.final > corpus.FINAL
            slips[2] += missed
            if slip >= corpus.FINAL:
                slips[0] += 1
                slips[1] += missed
            rows.setdefault((case.arm, case.truth), []).append((node, peer, not why))
            print(f'{case.name:44s} {node.rms:9.2e}/{peer.rms:9.2e} '
                  f'{node.final:9.2e}/{peer.final:9.2e} {node.fastest:5.2f}/{peer.fastest:5.2f} '
                  f'{node.step:5.2f}/{peer.step:5.2f} {node.contacts} {node.brakes}  '
                  f'{"; ".join(why) or "ok"}'
                  f'{f" [slip {slip:.1e} rad]" if slip >= corpus.FINAL else ""}', flush=True)
    print(f'{len(cases) - bad} of {len(cases)} cases meet the bar')
    print(f'final bar missed in {slips[2]} cases; {slips[1]} of them among the {slips[0]} whose '
          f'Stribeck slip (corpus.stribeck_slip) is over it')
    print_worst(rows)
    return 0


def _worst(cases, field):
    """(ours, the peer's) largest `field` of Figures over cases [(node, peer, ok)]."""
    return (max(getattr(node, field) for node, _, _ in cases),
            max(getattr(peer, field) for _, peer, _ in cases))


def print_worst(rows):
    """Per arm and truth, the worst over its timings and simulators of ours and the peer's
    figures, as a markdown table; rows {(arm, truth): [(node, peer, at the bar)]}."""
    print('\nper arm and truth, the worst over timings and simulators (ours / the peer):')
    print('| arm | truth | RMS [rad] | final [rad] | peak speed [x limit] | contacts | brakes '
          '| at the bar |')
    print('|---|---|---|---|---|---|---|---|')
    for (arm, truth), cases in sorted(rows.items()):
        rms, final, fastest = (_worst(cases, field) for field in ('rms', 'final', 'fastest'))
        print(f'| {arm} | {truth} | {rms[0]:.1e} / {rms[1]:.1e} | {final[0]:.1e} / '
              f'{final[1]:.1e} | {fastest[0]:.2f} / {fastest[1]:.2f} | '
              f'{sum(node.contacts for node, _, _ in cases)} | '
              f'{sum(node.brakes for node, _, _ in cases)} | '
              f'{sum(ok for _, _, ok in cases)} of {len(cases)} |')


if __name__ == '__main__':
    sys.exit(main())
