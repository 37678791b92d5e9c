"""The validator's report as text: the terminal table and report.md (same figures).

`format_table(report, failures)` and `format_markdown(report, failures)` read the report dict
that `validate.validate_bag` builds (as in report.json): per-joint tracking error, effective
delay, saturation and model residual; loop and joint-state timing with each gap; diagnostics;
the effective delay; the payload; the identification, if any; the verdict.
"""
import math

from rnea_controller.analysis.identify import EXTRAPOLATED_SHARE, MASS_RANGE, NOT_SEEN


def _fmt(value, scale=1.0, digits=3):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '-'
    return f'{value * scale:.{digits}f}'


def _joint_rows(report):
    """(header, units, rows) of the per-joint table."""
    header = ['joint', 'err rms', 'err max', 'err p99', 'delay', 'shifted rms', 'at limit',
              'max |tau|', 'limit', 'resid rms', 'resid mean']
    units = ['', '[mrad]', '[mrad]', '[mrad]', '[ms]', '[mrad]', '[%]', '[N·m]', '[N·m]',
             '[N·m]', '[N·m]']
    rows = []
    residual = report['residual']['joints']
    for name, t in report['tracking']['joints'].items():
        s = report['saturation']['joints'][name]
        r = residual.get(name, {})
        d = report['delay']['joints'][name]
        rows.append([name, _fmt(t['rms'], 1e3), _fmt(t['max'], 1e3), _fmt(t['p99'], 1e3),
                     _fmt(d['tau_ms'], 1, 2), _fmt(d['rms_shifted'], 1e3),
                     _fmt(s['share'], 100, 2), _fmt(s['max_abs'], 1, 2), _fmt(s['limit'], 1, 1),
                     _fmt(r.get('rms')), _fmt(r.get('mean'))])
    for name, r in residual.items():
        if name not in report['tracking']['joints']:
            rows.append([name] + ['-'] * 8 + [_fmt(r['rms']), _fmt(r['mean'])])
    return header, units, rows


def _timing_lines(label, timing, what, max_listed=20):
    j = timing['jitter_us']
    lines = [f"{label}: {timing['count']} messages over {timing['duration_s']:.3f} s, rate "
             f"{_fmt(timing['rate_hz'], 1, 1)} Hz, period {_fmt(timing['period_ms'])} ms, "
             f"jitter p50 {_fmt(j.get('p50'), 1, 1)} p99 {_fmt(j.get('p99'), 1, 1)} "
             f"max {_fmt(j.get('max'), 1, 1)} us, {timing['gap_count']} {what}s, "
             f"{timing['missed_ticks']} missed ticks"]
    longest = sorted(timing['gaps'], key=lambda g: -g['duration_ms'])[:max_listed]
    for gap in sorted(longest, key=lambda g: g['start_ms']):
        lines.append(f"  {what} at {gap['start_ms']:.1f} ms lasting {gap['duration_ms']:.1f} ms "
                     f"({gap['missed_ticks']} missed ticks)")
    if timing['gap_count'] > len(longest):
        lines.append(f"  ... and {timing['gap_count'] - len(longest)} shorter ones "
                     f"(report.json lists the first {len(timing['gaps'])})")
    return lines


def _delay_line(delay):
    d = delay['overall']
    if d['tau_ms'] is None:
        return 'effective delay: - (no joint state inside the reference)'
    edge = ' (at the edge of the -5..+10 ms search: the true lag may lie beyond)' if d[
        'at_edge'] else ''
    return (f"effective delay: {d['tau_ms']:.2f} ms over all joints{edge}; tracking error RMS "
            f"{d['rms_unshifted'] * 1e3:.3f} mrad, {d['rms_shifted'] * 1e3:.3f} mrad once "
            'shifted by it')


def _beyond(speeds):
    """'; N % of the held-out rows faster than ...' where the held-out rows go beyond the fit's
    speeds (`identify._coverage`), else ''."""
    if not speeds or speeds['beyond'] is None or speeds['beyond'] < EXTRAPOLATED_SHARE:
        return ''
    return (f"; {100 * speeds['beyond']:.0f} % of these rows faster than 99 % of the fit's "
            f"(|qd| > {speeds['fit_speed_p99']:.3g} rad/s): its friction there is extrapolated")


def _payload_line(residual):
    if residual['payload_kg'] is None:
        return 'estimated payload: - (no measured effort in the joint states)'
    line = (f"estimated payload: {residual['payload_kg']:.3f} kg "
            f"(± {residual['payload_std_kg']:.3f}, at {residual['payload_link']})")
    if residual['payload_kg'] < -max(3 * residual['payload_std_kg'], 0.01):
        line += (f" (negative: the model puts {-residual['payload_kg']:.3g} kg more at "
                 f"{residual['payload_link']} than the torques show; this one number cannot "
                 'tell apart a hand or tool in the URDF that was not on the arm, inertias in '
                 "the URDF that are not this arm's, and unmodelled friction or offsets: "
                 '--identify fits each body and says which to trust)')
    return line


def _identification_lines(result):
    """What the identification found and how well it predicts held-out torques."""
    lines = [f"identification ({result['samples']} samples, {result['rows']} joint rows; "
             f"regressor rank {result['rank']} of {result['parameters_count']}, condition "
             f"number {result['condition_number']:.3g}; solved in "
             f"{result['solve_time_s']:.2f} s):"]
    held = result['holdout']
    lines.append(f"  held-out relative torque RMS ({held['source']}), URDF -> identified, on "
                 f"every row; on the slow rows (|qd| < {held['slow_speed']:g} rad/s) apart:")
    for joint, h in held['joints'].items():
        slow = h['slow']
        lines.append(f"    {joint}: {_fmt(h['urdf'], 100, 2)} % -> "
                     f"{_fmt(h['identified'], 100, 2)} % ({h['rows']} rows); slow "
                     f"{_fmt(slow['urdf'], 100, 2)} % -> {_fmt(slow['identified'], 100, 2)} % "
                     f"({slow['rows']} rows)" + _beyond(h.get('speeds')))
    smoothing = result.get('smoothing')
    if smoothing:
        chosen = smoothing['chosen_by']
        lines.append(f"  smoothing window {1e3 * smoothing['window_s']:.0f} ms (chosen by "
                     f"{chosen['window']}), friction width {result['friction_velocity_width']:g}"
                     f" rad/s (by {chosen['width']}), Stribeck velocity "
                     f"{result['friction_stribeck_velocity']:g} rad/s (by {chosen['stribeck']})"
                     + ('; ' + result['selection']['method'] if result.get('selection') else ''))
        if result.get('selection') and len(result['selection']['window_s']) > 1:
            errors = result['selection']['window_s'].items()
            lines.append('  cross-validated relative squared torque error per window: '
                         + ', '.join(f'{1e3 * float(w):.0f} ms {e:.3g}' for w, e in errors))
    lines.append('  fit residual RMS [N·m], URDF -> identified: ' + ', '.join(
        f"{j} {_fmt(b)} -> {_fmt(result['residual_rms_after'][j])}"
        for j, b in result['residual_rms_before'].items()))
    base = sorted(result['base_parameters'], key=lambda b: b['std_percent'])
    if base:
        worst = base[-1]
        lines.append(f"  base parameters: {len(base)}, standard error median "
                     f"{base[len(base) // 2]['std_percent']:.3g} %, largest "
                     f"{worst['std_percent']:.3g} % ({worst['name']} = {worst['estimate']:.3g}"
                     '; report.json lists each)')
    stayed, unseen = result['stayed_at_urdf'], [
        name for name, p in result['parameters'].items() if p['status'] == NOT_SEEN]
    lines.append(f'  not seen by this motion ({len(unseen)}): {_names(unseen)}')
    lines.append(f'  stayed at the URDF value ({len(stayed)}): {_names(stayed)}')
    lines += _body_lines(result)
    models = result.get('friction_models', {})
    for joint, friction in result['friction'].items():
        extra = ''.join(f', {kind} {friction[kind]:.4g} N·m' for kind in ('offset', 'stribeck')
                        if friction.get(kind))
        lines.append(f"  {joint}: armature {result['armature'][joint]:.4g} kg·m², viscous "
                     f"{friction['viscous']:.4g} N·m·s/rad, coulomb {friction['coulomb']:.4g} N·m"
                     + extra + (f' (friction model {models[joint]})' if joint in models else ''))
    payload = result.get('payload')
    if payload:
        lines.append(f"  a payload on {payload['link']} is part of the body of "
                     f"{payload['body_link']}: its mass {payload['mass_change']:+.4g} kg from "
                     f"the URDF's (that mass {payload['mass_status']})")
    return lines + _plausibility_lines(result) + _prior_lines(result) + _file_lines(result)


PRIOR_FLAG = (0.8, 1.25)  # a body's identified mass outside these multiples of the prior's


def _prior_lines(result):
    """Where the prior comes from, and each body far from it (beyond PRIOR_FLAG): whether the
    data or the prior is to be trusted for it."""
    plausible = result.get('plausibility')
    lines = [f"  prior (masses, bounds, what the motion does not see): "
             f"{result.get('prior_source') or 'URDF'}"]
    if not plausible:
        return lines
    held = result['holdout']['joints'].values()
    better = all(h['identified'] is not None and h['identified'] < h['urdf'] for h in held)
    for link, body in plausible['bodies'].items():
        prior, status = (result['parameters'][f'{link}.m'][k] for k in ('urdf', 'status'))
        ratio = body['mass'] / prior if prior > 0 else math.inf
        if PRIOR_FLAG[0] <= ratio <= PRIOR_FLAG[1]:
            continue
        text = (f"  {link}: {body['mass']:.4g} kg, {100 * (ratio - 1):+.0f} % from the prior's "
                f'{prior:.4g} kg: ')
        if body['at_bound']:
            text += ("at its bound: the torques want it beyond the prior's range, so the prior "
                     "(bounds around the URDF's body) may be another arm's; trust neither "
                     "figure, give the vendor's masses (--masses FILE)")
        elif status == 'identified' and better:
            text += ('the motion sees this mass and the held-out torques favour the identified '
                     'model: trust it over the prior')
        else:
            text += ("the motion sees this mass only with its neighbours' (the torques are "
                     "right, this body's share is not): trust the prior's mass, or the "
                     "vendor's (--masses FILE)")
        lines.append(text)
    return lines


def _body_lines(result):
    """Per body: its mass (URDF -> identified) against its bounds, its com and whether it
    and the whole mass are inside the bounding ellipsoid; a body that stayed is said so."""
    parameters, plausible = result['parameters'], result.get('plausibility')
    bodies = plausible['bodies'] if plausible else {
        link: {'mass': body['mass'], 'com': body['com']} for link, body in result['links'].items()}
    lines = []
    for link, body in bodies.items():
        urdf = parameters[f'{link}.m']['urdf']
        if plausible and link not in result['links']:
            lines.append(f"  {link}: stayed at the URDF's (mass {urdf:.4g} kg)")
            continue
        text = (f"  {link}: mass {urdf:.4g} -> {body['mass']:.4g} kg, com "
                f"[{', '.join(f'{c:.4g}' for c in body['com'])}] m")
        if plausible:
            low, high = body['mass_bounds']
            text += (f' (mass bounds {low:.4g}-{high:.4g} kg'
                     + (f", at its {body['at_bound']} bound" if body['at_bound'] else '')
                     + '; com ' + ('inside' if body['com_inside'] else 'OUTSIDE')
                     + ', mass ' + ('inside' if body['inside'] else 'OUTSIDE')
                     + f" its bounding ellipsoid ({body['ellipsoid']}))")
        lines.append(text)
    return lines


def _plausibility_lines(result):
    plausible = result.get('plausibility')
    if not plausible:
        return []
    bounds = plausible['total_bounds']
    total, total0 = plausible['total_mass'], plausible['total_mass_urdf']
    bodies = plausible['bodies'].values()
    outside = [link for link, b in plausible['bodies'].items()
               if not (b['inside'] and b['com_inside'])]
    lines = [f'  total mass {total:.4g} kg (URDF {total0:.4g} kg, '
             f'{100 * (total / total0 - 1):+.1f} %, '
             + ('unbounded' if bounds is None else f'bounds {bounds[0]:.4g}-{bounds[1]:.4g}')
             + '); ' + (f"{sum(b['inside'] and b['com_inside'] for b in bodies)} of "
                        f"{len(bodies)} bodies" if outside else 'each body')
             + ' inside its bounding ellipsoid ('
             + ', '.join(sorted({b['ellipsoid'] for b in bodies}))
             + f"), masses within {MASS_RANGE[0]:g}-{MASS_RANGE[1]:g}x the URDF's (a payload "
             "link's body: no upper bound, a lower one of half its link's own mass)"]
    if plausible['note']:
        lines.append(f"  {plausible['note']}")
    lines.append(f"  share of the change no prediction of this motion tests: "
                 f"{100 * result['unseen_change']:.3g} % (set by the prior's divergence)")
    return lines


def _file_lines(result):
    file, lacking = result.get('file'), result.get('lacking') or {}
    lines = []
    if result.get('failures'):
        lines.append(f"  regressor rank {result['rank']}, reachable {result['reachable_rank']}"
                     f" of {result['parameters_count']} columns; the motion lacked: joints "
                     f"{', '.join(lacking.get('joints') or []) or 'none'} (sliding), ranges "
                     + ', '.join(f'{j} {r:.2g} rad' for j, r in lacking['ranges'].items()))
        lines.append(f"  to record a better one: {lacking['advice']}")
    if file is not None:
        if file['written']:
            lines.append(f"  parameters file written: {file['written']}")
        else:
            lines.append('  no parameters file written (the fit failed its checks)'
                         + (f"; the earlier one renamed to {file['renamed']}"
                            if file['renamed'] else ''))
    return lines


def _names(names, shown=12):
    if not names:
        return 'none'
    more = f' and {len(names) - shown} more' if len(names) > shown else ''
    return ', '.join(names[:shown]) + more


def _diagnostics_lines(diagnostics, keys=('overruns', 'rejected messages',
                                           'tick compute p99 [us]')):
    """One line per diagnostic status: counts by level and a few of its last values."""
    lines = []
    for name, levels in diagnostics['levels'].items():
        last = diagnostics['last'][name]
        values = ', '.join(f'{k} {last[k]}' for k in keys if k in last)
        counts = ', '.join(f'{k} {v}' for k, v in levels.items() if v)
        lines.append(f"diagnostics '{name}': {counts}" + (f'; last: {values}' if values else ''))
    return lines


def _summary_lines(report, failures):
    if 'skipped' in report:
        return _states_only_lines(report, failures)
    sat = report['saturation']
    bad = sum(s['non_finite'] for s in sat['joints'].values())
    over = sum(s['over_limit'] for s in sat['joints'].values())
    lines = _timing_lines('loop (reference stamps)', report['loop'], 'gap')
    lines += _timing_lines('joint states', report['joint_states'], 'stale period')
    if report['joint_states'].get('before_run'):
        lines.append(f"  {report['joint_states']['before_run']} joint states recorded before "
                     "the controller's first reference: left out of the state timing, the ranges, "
                     'the residual and the identification')
    malformed = ', '.join(f'{k} {v}' for k, v in report['malformed'].items() if v) or 'none'
    lines.append(f"commands: {sat['commands']}, non-finite {bad}, beyond a limit {over}; "
                 f'malformed messages: {malformed}')
    lines += _diagnostics_lines(report['diagnostics'])
    lines.append(_delay_line(report['delay']))
    return lines + _closing_lines(report, failures)


def _closing_lines(report, failures):
    """The efforts' meaning, the payload, the identification and the verdict."""
    lines = []
    if 'effort' in report:
        lines.append(f"efforts: {report['effort']['kind']} ({report['effort']['meaning']})")
    lines.append(_payload_line(report['residual']))
    if 'identification' in report:
        lines += _identification_lines(report['identification'])
    lines.append('result: PASS' if not failures else 'result: FAIL')
    lines += [f'  FAIL {f}' for f in failures]
    return lines


def _states_only_lines(report, failures):
    """A bag of joint states alone: their timing, the ranges, what was skipped and why."""
    lines = _timing_lines('joint states (the loop of whatever drove the arm)',
                          report['joint_states'], 'gap')
    lines.append('measured range [mrad]: ' + ', '.join(
        f'{joint} {_fmt(r, 1e3, 0)}' for joint, r in report['measured_range'].items()))
    lines += _diagnostics_lines(report['diagnostics'])
    skipped = report['skipped']
    lines.append(f"skipped ({skipped['reason']}):")
    lines += [f'  {what}' for what in skipped['checks'].values()]
    return lines + _closing_lines(report, failures)


def format_table(report, failures):
    """Plain-text summary for the terminal."""
    header, units, rows = _joint_rows(report)
    widths = [max(len(str(c)) for c in col) for col in zip(header, units, *rows)]
    line = lambda cells: '  '.join(  # noqa: E731
        str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(
            zip(cells, widths)))
    model = report['model']
    out = [f"bag {report['bag']['path']}: model '{model['name']}' from {model['source']}", '',
           line(header), line(units), line(['-' * w for w in widths])]
    out += [line(r) for r in rows]
    return '\n'.join(out + [''] + _summary_lines(report, failures)) + '\n'


def format_markdown(report, failures):
    """report.md: the same figures as the terminal table, as Markdown."""
    header, units, rows = _joint_rows(report)
    header = [f'{h} {u}'.strip().replace('|', '\\|') for h, u in zip(header, units)]
    out = [f"# Validation of `{report['bag']['path']}`", '',
           f"Model `{report['model']['name']}` from `{report['model']['source']}`.", '',
           '| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    out += ['| ' + ' | '.join(r) + ' |' for r in rows]
    out += ['', '```', *_summary_lines(report, failures), '```', '']
    return '\n'.join(out)
