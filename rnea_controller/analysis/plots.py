"""PNG plots of a validated run (matplotlib, Agg backend: no display needed).

Series come as min/max envelopes (`metrics.Envelope`): each plotted band covers every sample,
so a one-tick spike stays visible however long the run.
"""
import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402


def _stacked(names, title):
    fig, axes = plt.subplots(len(names), 1, sharex=True, squeeze=False,
                             figsize=(9, 1.6 + 1.5 * len(names)))
    fig.suptitle(title)
    return fig, axes[:, 0]


def _band(ax, t, lo, hi, color='C0', label=None):
    ax.fill_between(t, lo, hi, color=color, alpha=0.5, linewidth=0.6, step='post', label=label)
    ax.plot(t, lo, color=color, linewidth=0.5, drawstyle='steps-post')
    ax.plot(t, hi, color=color, linewidth=0.5, drawstyle='steps-post')


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def envelope_plot(path, envelope, names, title, ylabel, scale=1.0, limits=None):
    """One subplot per joint: the min/max band of `envelope` × scale, ±limits as red lines."""
    t, lo, hi = envelope.series()
    fig, axes = _stacked(names, title)
    for j, (ax, name) in enumerate(zip(axes, names)):
        _band(ax, t, lo[:, j] * scale, hi[:, j] * scale)
        if limits is not None and np.isfinite(limits[j]):
            ax.axhline(limits[j], color='C3', linewidth=0.8, linestyle='--')
            ax.axhline(-limits[j], color='C3', linewidth=0.8, linestyle='--')
        ax.set_ylabel(f'{name}\n{ylabel}', fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel('time [s]')
    return _save(fig, path)


def position_plot(path, desired, measured, names, limits=None):
    """Desired (q_d) against measured (q) position per joint [rad], limits as red lines."""
    t, d_lo, d_hi = desired.series()
    t_m, m_lo, m_hi = measured.series()
    fig, axes = _stacked(names, 'Position: desired q_d (blue) and measured q (orange)')
    for j, (ax, name) in enumerate(zip(axes, names)):
        _band(ax, t, d_lo[:, j], d_hi[:, j], color='C0', label='desired' if j == 0 else None)
        _band(ax, t_m, m_lo[:, j], m_hi[:, j], color='C1', label='measured' if j == 0 else None)
        for bound in () if limits is None else limits[j]:
            if np.isfinite(bound) and d_lo[:, j].min() - 0.2 < bound < d_hi[:, j].max() + 0.2:
                ax.axhline(bound, color='C3', linewidth=0.8, linestyle='--')
        ax.set_ylabel(f'{name}\n[rad]', fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc='upper right', fontsize=8)
    axes[-1].set_xlabel('time [s]')
    return _save(fig, path)


def tracking_plot(path, envelope, names):
    """Tracking error q_d - q per joint [mrad]."""
    return envelope_plot(path, envelope, names, 'Tracking error q_d - q', '[mrad]', 1e3)


def torque_plot(path, envelope, names, limits):
    """Commanded torque per joint [N·m] against its effort limit."""
    return envelope_plot(path, envelope, names, 'Commanded torque and effort limits (dashed)',
                         '[N·m]', limits=limits)


def residual_plot(path, envelope, names, payload_kg=None):
    """Model residual tau_meas - RNEA(q, qd, qdd) per joint [N·m]."""
    title = 'Model residual: measured effort - RNEA(measured motion)'
    if payload_kg is not None:
        title += f'  (estimated payload {payload_kg:.3f} kg)'
    return envelope_plot(path, envelope, names, title, '[N·m]')


def period_plot(path, histograms, bins=200):
    """Histogram of loop periods [ms] (log counts) from {label: metrics.LogHistogram}."""
    fig, ax = plt.subplots(figsize=(9, 4))
    for color, (label, hist) in zip(('C0', 'C1', 'C2'), histograms.items()):
        counts = hist.counts[0]
        if not counts.sum():
            continue
        centers = hist.centers() * 1e3
        used = counts > 0
        lo, hi = centers[used].min(), centers[used].max()
        logarithmic = lo > 0 and hi > 10 * lo  # a zero period (two stamps alike) is linear
        edges = (np.geomspace(lo * 0.999, hi * 1.001, bins + 1) if logarithmic
                 else np.linspace(lo - 1e-6, hi + 1e-6, bins + 1))
        values, edges = np.histogram(centers[used], bins=edges, weights=counts[used])
        ax.stairs(values, edges, label=label, color=color)
        if logarithmic:
            ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('period [ms]')
    ax.set_ylabel('count')
    ax.set_title('Loop period histogram')
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path)


def delay_plot(path, delay):
    """Tracking error RMS against the shift τ of the reference [ms], the minima marked.

    delay: `DelayStats.result()`: RMS of q(t) - q_ref(t - τ) per joint and overall.
    """
    fig, ax = plt.subplots(figsize=(9, 4.5))
    taus = np.asarray(delay['taus_ms'])
    for k, (name, curve) in enumerate(delay['rms_curve'].items()):
        best = delay['joints'][name]
        ax.plot(taus, np.asarray(curve) * 1e3, color=f'C{k % 10}', linewidth=1,
                label=f"{name}: {best['tau_ms']:.2f} ms")
        ax.plot(best['tau_ms'], best['rms_shifted'] * 1e3, 'o', color=f'C{k % 10}')
    overall = delay['overall']
    ax.plot(taus, np.asarray(delay['rms_curve_overall']) * 1e3, 'k--', linewidth=1.5,
            label=f"all joints: {overall['tau_ms']:.2f} ms")
    ax.axvline(overall['tau_ms'], color='k', linewidth=0.8, linestyle=':')
    ax.set_xlabel('shift τ of the reference [ms] (τ > 0: the arm lags)')
    ax.set_ylabel('RMS of q(t) - q_ref(t - τ) [mrad]')
    ax.set_title('Effective delay: the τ that minimises the tracking error')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
