"""The law on arms it was not tuned on (issue 43): a seeded draw of the closed-loop corpus
(test/corpus.py: every 6-7-joint arm of example-robot-data and Drake's iiwa14, truths drawn
from real arms' figures, two simulators whose friction differs, prompt and late commands),
the node's tick with its defaults beside PD + gravity tuned on the true arm under the same
timing. `./run bench corpus` runs the whole cross product and prints its table.

What every case must show (issue 43): no runaway (at most 1.5x a velocity limit), no false
contact, no brake of the node's own making, the goal within 1e-3 rad, RMS no worse than the
peer's. Each case is its own seeded, deterministic run; two at a time on the host's two cores.
"""
from functools import cache
import math

from conftest import parallel_map
import corpus
import numpy as np
import pytest

DRAWN = 20  # cases: every arm twice, every (arm, truth) pair of the cyclic cover once
CASES = corpus.drawn_cases(DRAWN)
# What the law does not yet meet, measured here (strict: a case that starts to pass says so).
# None in this draw since stop 58: so100-links-late-mujoco-438 (1.76x a velocity limit, a
# brake) was its fall under no torque before the first command acted; the corpus's arm now
# stands on its brakes until then (test/corpus.py). The goal under a smooth Stribeck friction
# (so100-friction-prompt-pinocchio-7518, 9.6e-3 rad) is met since rule 8 keeps c^ (stop 55).
MISSES = {
    'ur3-geared-late-pinocchio-2766': 'stop 67: the wrist crossed its goal and stood on a push '
    'the other way; turning it round read as outgrowing c^ (rule 7), and its e-folding integral '
    'broke the friction inside the 25 ms stall, whose frozen command carried it 2.2 mrad past '
    'its goal (2,428 -> 2,446 of 2,560 for the rule; docs/controller.md, stop 67)'}
AT_THE_BAR = {}  # within a host's last digits of the bar: not strict either way


def _marked(case):
    if case.arm not in corpus.available_arms():
        return pytest.param(case, marks=pytest.mark.skip(
            reason=f'{case.arm}: its URDF is not here ({corpus.ARMS[case.arm]})'))
    if case.name in MISSES:
        return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=MISSES[case.name]))
    if case.name in AT_THE_BAR:
        return pytest.param(case, marks=pytest.mark.xfail(strict=False,
                                                          reason=AT_THE_BAR[case.name]))
    return case


def _case(case):
    return corpus.run_case(case)


@cache
def _all():
    """{case: (node's Figures, the peer's)} of the draw, on two processes where this one may
    use two cores (conftest.parallel_map)."""
    here = [case for case in CASES if case.arm in corpus.available_arms()]
    return dict(zip(here, parallel_map(_case, here)))


def test_the_draw_covers_every_arm_truth_timing_and_simulator():
    assert {c.arm for c in CASES} == set(corpus.ARMS)
    assert {c.truth for c in CASES} == set(corpus.TRUTHS)
    assert {c.timing for c in CASES} == set(corpus.TIMINGS)
    assert {c.simulator for c in CASES} == set(corpus.SIMULATORS)
    assert {(c.timing, c.simulator) for c in CASES} == {
        (t, s) for t in corpus.TIMINGS for s in corpus.SIMULATORS}
    assert len({(c.arm, c.truth) for c in CASES}) == DRAWN


def test_the_iiwa14_is_in_the_corpus_where_shared_data_is_here():
    if not corpus.SHARED.exists():
        pytest.skip(f"../shared/data is absent here ({corpus.SHARED}): Drake's iiwa14 left out")
    assert 'iiwa14' in corpus.available_arms()


@pytest.mark.parametrize('case', [_marked(c) for c in CASES], ids=[c.name for c in CASES])
def test_never_worse_than_pd_gravity_tuned_on_the_true_arm(case):
    node, peer = _all()[case]
    assert not corpus.failures(node, peer), (corpus.failures(node, peer), node, peer)


def test_no_false_contact_and_the_commands_never_jump_in_any_drawn_case():
    """Whatever else a case misses: no contact on a free arm, and no command step beyond a
    fifth of an effort limit in one tick (the step bound and the law, outside the brake)."""
    bad = {case.name: node for case, (node, _) in _all().items()
           if node.contacts or node.step > 0.2}
    assert not bad, bad


def test_the_peer_is_a_real_reference_it_misses_the_goal_where_friction_holds_it():
    """The bar is not trivially met by the peer: on most drawn friction truths PD + gravity
    ends farther than 1e-3 rad from its goal (its stiffness balances the friction)."""
    finals = sorted(peer.final for case, (_, peer) in _all().items()
                    if case.truth in ('friction', 'geared'))
    assert finals and finals[len(finals) // 2] > corpus.FINAL, finals


def test_an_untold_payload_s_brake_ends_in_a_hold_that_holds():
    """The Kinova with its links off and a payload it is not told, commands 10 ms late (the
    corpus's kinova-links-late-mujoco-3): it falls before its first commands act and a wrist
    trips the brake at once. The brake's g(q) lacked the payload: its wrists sank at 1.5x
    their velocity limit to the end of the brake, then the hold's stiffness alone let them sink
    again (RMS 0.34 rad, 0.84 rad off, against the peer's 0.067 and 0.11). The brake's
    observer now holds the payload where the model's brake fails to slow a joint and hands it
    to the law as d^, said in a warning that names the joints: one brake and RMS within the
    peer's. Measured: RMS 0.045 rad, final 0.067 rad (the goal is dropped at the brake)."""
    a = corpus.arm('kinova')
    truth, timing = corpus.draw_truth(a, 'links', 3), corpus.draw_timing('late', 3)
    ref = corpus.reference(a)

    def figures(make):
        plant = corpus.make_plant(a, truth, 'mujoco')
        controller = make(plant)
        result = corpus.run(plant, controller, corpus.MOVE + corpus.HOLD, timing, a.start, ref)
        return corpus.figures(a, result), controller

    (ours, node), (peer, _) = (figures(lambda plant: corpus.Node(a.model, {}, ref)),
                               figures(lambda plant: corpus.PdGravity(plant, ref, a.start)))
    assert ours.brakes == 1, ours
    assert ours.rms <= peer.rms, (ours, peer)
    handed = [text for level, text in node.log if text.startswith('after the brake')]
    assert len(handed) == 1 and 'N·m' in handed[0], node.log


FELL = (corpus.Case('ur10', 'links', 'late', 'pinocchio', 13),
        corpus.Case('ur10', 'links', 'late', 'mujoco', 13))


def test_an_untold_payload_s_fall_is_not_taken_for_a_measured_inertia():
    """Rule 3 (stop 71): the UR10 with its links off and a payload it is not told, commands
    6.4 ms late, under both simulators. Its wrists fall from the first command. The fall's
    first window, its error still under STUCK_ERROR, asked a^ to go below 0 (the residual
    against the fall's acceleration reads as negative inertia); the clamp held a^ at 0, and
    its variance, shrunk by that large acceleration, marked a^ measured, which ended rule 3's
    fall (its active set is for a^ not yet measured): from then on the step was shared
    through the covariance, d^ went the wrong way (wrist_2 +0.9 N·m as it fell the other
    way), the wrist reached its velocity limit in 0.12 s: the brake, 0.55-0.57 rad off, RMS
    3.4-3.7x the peer's. A fall's window whose step a^'s floor cut measures no a^: the fall
    stays rule 3's, d^ takes it. Measured: no brake, 0.63x the velocity limit, finals under
    1e-5 rad, RMS a third of the peer's."""
    for case, (ours, peer) in zip(FELL, parallel_map(_case, FELL)):
        assert ours.brakes == 0 and ours.fastest < 1.0, (case.name, ours)
        assert ours.final <= corpus.FINAL, (case.name, ours)
        assert ours.rms <= peer.rms, (case.name, ours, peer)


HELD = (corpus.Case('xarm7', 'friction', 'prompt', 'pinocchio', 2),
        corpus.Case('so100', 'friction', 'prompt', 'pinocchio', 7),
        corpus.Case('xarm7', 'links', 'prompt', 'pinocchio', 10))


def _held_case(case):
    a = corpus.arm(case.arm)
    truth, timing = corpus.draw_truth(a, case.truth, case.seed), corpus.draw_timing(case.timing,
                                                                                  case.seed)
    plant, ref = corpus.make_plant(a, truth, case.simulator), corpus.reference(a)
    result = corpus.run(plant, corpus.Node(a.model, {}, ref), corpus.MOVE + corpus.HOLD, timing,
                        a.start, ref, braked=True)
    return corpus.figures(a, result)


def test_a_light_joint_its_friction_holds_off_its_goal_reaches_it():
    """Rule 7 (stop 66): the xArm7's joint7 (1.4e-4 kg·m², 0.8 N·m of Coulomb friction and
    a Stribeck excess, Pinocchio's smooth friction) and the SO-100's wrists (wrist_flex 1.8
    and wrist_roll 0.9 N·m of Coulomb friction on joints of 1e-4 to 1e-3 kg·m²) stick-slip
    through the motion, so their Coulomb friction is never measured, and stood at its end 20
    mrad (the xArm7) and 8 and 16 mrad (the SO-100) off their goals: their integral ran
    through their inertia alone (0.01 N·m a second), or, a^ never measured, not at all. Held
    at rest, the integral now finds the friction's band, breaks it and lets go: both end
    within the bar, without a brake or a runaway (the peer, its stiffness under their
    friction, ends 9.6 mrad off on the xArm7). And a joint no friction holds is not taken for
    held: the xArm7 with its links off and no friction, whose joint7 converges on its
    integral from 1.7 mrad as its reference comes to rest (taken for held on the record of an
    earlier stand, it hunted ±8 mrad and ended 1.1e-2 rad off)."""
    if not {case.arm for case in HELD} <= set(corpus.available_arms()):
        pytest.skip('an arm of this test is not here')
    for case, ours in zip(HELD, parallel_map(_held_case, HELD)):
        assert ours.final <= corpus.FINAL, (case.name, ours)
        assert ours.brakes == 0 and ours.fastest <= corpus.FASTEST, (case.name, ours)


CREPT = (corpus.Case('ur3', 'friction', 'late', 'pinocchio', 11),
         corpus.Case('kinova', 'friction', 'late', 'pinocchio', 10),
         corpus.Case('iiwa14', 'friction', 'late', 'pinocchio', 2))


def test_a_joint_its_friction_holds_behind_its_reference_breaks_away_under_its_limit():
    """Rules 4 and 7 (stop 67): light joints that stick behind their reference under
    Pinocchio's smooth Stribeck friction, commands late. Creeping in their friction's band,
    they read the creep's acceleration against the torque the friction held as inertia: a^
    went to its ceiling (the Kinova's joint_4, 8.5e-3 kg·m², to 0.2 kg·m² in 0.1 s), and the
    breakaway through that feedback, which the loop sees 10-25 ms late, ran the UR3's wrist to
    3.1x its velocity limit, the Kinova's to 1.17x and the iiwa14's joint7 to 1.18x, each into
    a brake, 0.02-0.1 rad off at the end. Once a^ is measured such a window teaches no a^ or
    b^: no brake, no runaway, and each ends within the bar."""
    if not {case.arm for case in CREPT} <= set(corpus.available_arms()):
        pytest.skip('an arm of this test is not here')
    for case, ours in zip(CREPT, parallel_map(_held_case, CREPT)):
        assert ours.brakes == 0 and ours.fastest < 1.0, (case.name, ours)
        assert ours.final <= corpus.FINAL, (case.name, ours)


PUSHES = (('so100', 'delay', 14), ('so100', 'delay', 19), ('so100', 'delay', 21),
           ('so100', 'late', 12), ('so100', 'late', 16), ('z1', 'late', 4), ('z1', 'late', 15))


def _pushed(push):
    return corpus.pushed_hold(*push)


def test_a_hold_pushed_on_a_coupled_arm_brakes_once_and_stays_under_its_limits():
    """The exact SO-100 and z1 holding their start, commands 5-10 ms late, one joint pushed
    to 2x its velocity limit within the first second (corpus.pushed_hold): one brake for the
    push (and on the SO-100 one at the start, where its joints fall before the first command
    acts), then a hold that stays under the velocity limits. Their elbows feel 1 / (M⁻¹)_ii,
    a seventeenth and a twelfth of M_ii: while the integral at rest acted through M_ii alone
    (Ki M_ii (M⁻¹)_ii, 3-4x the PD's Kp Kd) these holds swung into 7-22 brakes (the SO-100's
    five with the brake's observer and without it); through M_cc(q0), the SO-100 brakes
    twice in 47 of 48 draws (24 of each timing; the one left swings 1.6 s after its push,
    from the estimate's chatter on the wrist), the z1 at most twice in 16 of 16 (3 of 16
    swung before)."""
    for push, (brakes, fastest, start) in zip(PUSHES, parallel_map(_pushed, PUSHES)):
        assert brakes <= 2, (push, brakes, start)
        assert fastest < 1.0, (push, fastest, start)


def test_the_stribeck_slip_is_one_the_true_arm_makes():
    """`corpus.stribeck_slips` against Pinocchio's ABA on the true arm (the oracle: its smooth
    Stribeck friction integrated, not the formula): ur10-friction-late-pinocchio-4's wrist_2,
    which stick-slipped about its goal to the end of its hold (±5 mrad, final 3.1e-3 rad),
    commanded just past its static level c + s for the loop's lateness d (a whole number of
    plant steps, at least d), then back to its gravity, the other joints at theirs, slips as
    far within 30 % (measured: 3.6 mrad, the formula 3.5; without its viscous term it would
    be 6.1)."""
    case = corpus.Case('ur10', 'friction', 'late', 'pinocchio', 4)
    slips = corpus.stribeck_slips(case)
    k = int(np.argmax(slips))
    a = corpus.arm(case.arm)
    truth = corpus.draw_truth(a, case.truth, case.seed)
    plant = corpus.AbaPlant(a, truth)
    plant.reset(a.start)
    hold = plant.gravity(a.start)  # the URDF's: the friction truth's links are exact
    push = hold.copy()
    push[k] += 1.02 * (truth.coulomb[k] + truth.stribeck[k])
    for _ in range(math.ceil(corpus.lateness(case) / plant.model.opt.timestep)):
        plant.step(push)
    for _ in range(300):  # it stops: friction and the hold
        plant.step(hold)
    slip = abs(plant.q[k] - a.start[k])
    assert slips[k] > corpus.FINAL and abs(plant.qd[k]) < 1e-3
    assert 0.7 * slip <= slips[k] <= 1.3 * slip, (a.model.joint_names[k], slip, slips[k])
