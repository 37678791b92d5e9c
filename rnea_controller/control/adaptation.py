"""The law's adaptation (issues 29, 35): what the arm shows beyond its model, learnt online.

The model is never the arm. Per controlled joint the law (control/law.py) adds four estimates
and an integral, all in its `LawWork`, updated by `adapt` once per tick after the limits (in the
law's one compiled call). Each rule below says what it does, why (the measurement that made
it; docs/controller.md has the tables), and the constant that tunes it. Measured on
test_robustness's rows (the xArm7 in MuJoCo: exact, friction true, geared, wrong links) and
test_geared's untold geared UR5. On by default: `estimation.forgetting_time` 1 s and
`integral_gain` 4000 1/s³; 0 turns each off (the law of issue 23).

1. The residual, over a window (`window`; WINDOW = 10 new states). r = mean tau_applied -
   RNEA(q_m, qd_m, qdd_m)_i - told friction: the window's mean command (with the robot's g(q)
   if it compensates gravity) against the model at the MEASURED state of the window's middle,
   qdd_m the change of qd over the window over its duration by the states' stamps (a repeated
   state is not counted). Why a window: per tick, a one-tick pairing error made the estimate's
   loop run away on a wrong-link arm. Why the middle: the mean command and acceleration
   belong there; at the window's end the exact UR5 tracked 3.5x worse than without the
   estimate, at the middle 1.15x.
2. The regression (`_estimate_joint`). r = a^ qdd_m + b^ qd + d^ + c^ tanh(qd / w) by
   recursive least squares with forgetting (`estimation.forgetting_time`), per joint: a^ the
   missing rotor inertia, b^ viscous friction, d^ a slow torque (wrong links' gravity,
   friction at rest), c^ Coulomb friction. Each is
   projected on [low, ceiling]: a^ on [0, min(`estimation.max_armature`, ROTOR_PER_TORQUE x
   the effort limit)]; b^ and c^ from minus the
   told friction (a told friction too high is corrected down, to none at most: on the xArm7
   told its MuJoCo friction, whose light wrists' dry friction creeps at 0.07-0.21 rad/s under
   0.5-1.4 N·m of its 1.5, the excess the told friction predicted in each slow deceleration
   read as a^ = 0.41 kg·m² on the 4.3e-3 kg·m² joint5, and its excitation braked, RMS 0.4 rad;
   now 7.7e-3); d^ on ±; b^ at the velocity
   limit <= FRICTION_CEILING x the effort limit (a joint with more could not reach its
   velocity limit; 0.25x left the friction row 2.2e-2 / 1.6e-3 rad RMS / final, 1x
   1.6e-2 / 8.7e-4); d^ and c^ <= `integral_clamp` x the effort limit. w is
   `friction_velocity_width`; c^ is learnt only from windows in which the joint slid one way
   (`_sliding`: its velocity beyond SLIDING w at the window's first, middle and last state),
   its covariance at most COULOMB_GAIN (a tenth) so that d^ takes a one-way bias first; a
   reversal separates the two. Why: without it the friction's constant torque, which b^ qd
   takes at speed, read as -a^ qdd_m in each deceleration, where qdd_m is nearly constant:
   on the geared xArm7 the wrists' a^ fell from 0.13 to 0 kg·m² (rotor 0.1), d^ held half
   the friction at rest, and the demo ended 2-5e-3 rad off (now a^ 0.08-0.25, 3.5-5.5e-4
   rad; test_timing_matrix).
3. A slow loop (`_estimate_joint`). The estimates act on the arm whose response they are
   learnt from, so each step is bounded: the residual in units of TORQUE_UNIT x the joint's
   effort limit (issue 43: it was 1 N·m on every arm, so a UR5's shoulder learnt as fast as a
   Panda's wrist), regressors scaled to about one unit at the velocity limit and at that limit
   reached in REACH, a^ at most ROTOR_PER_TORQUE x the effort limit (real rotors reflect
   1-6e-3 kg·m² per N·m); the covariance's diagonal at most GAIN (no estimate
   takes more than about half a window's residual: per tick, a gain of 1 reached 4.6-7x the
   velocity limit); M_ii + a^ grows at most by e per ARMATURE_GROWTH (a spurious a^ on the
   1.4e-4 kg·m² wrist destabilises its feedback within ticks; a 0.1 kg·m² rotor is learnt in
   ~0.3 s), and by e per BRAKING_GROWTH x that in a window where the joint decelerates: there
   its friction acts with its inertia, and friction the model puts too high reads as missing
   inertia (the xArm7 told its MuJoCo friction: joint6's a^ from 0.05 to 0.19 kg·m², M_66
   0.012, in 0.1 s of a slow deceleration, then 4.56 rad/s and the brake with commands 5 ms
   late; 4x left the geared demo 1e-3 rad off, 2x 2-5e-4). The 0.2 s command blackout
   (test_timing_matrix) no longer swings after: 1 brake, 1.03x the velocity limit (before, 3
   brakes and 1.89x; a^ of joint3 learnt 0.035 -> 0.19 kg·m² there). A joint that falls
   before a^ was measured once (`_falls`: its error beyond STUCK_ERROR and growing, its
   measured acceleration away from its reference; issue 43) shows a residual against its
   acceleration, r = Δg M_ii / m, which reads as negative inertia: where the step would take
   a^ below 0 it is held at 0 and the step is taken by the others (an active set), d^ first.
   Why: an untold payload on a light wrist fell under feedback of Kp M_ii while the step's
   gain went to a^, clamped at 0 (UR10 wrist_2, commands late: d^ 0.8 of 4.7 N·m within
   0.11 s, 1.09x its velocity limit, the brake, 1.9 rad off; now d^ 6.6 N·m on its shoulder
   by 0.06 s, no brake, 1e-7 rad; the corpus's Jaco2 likewise). Why only then: held at every
   bound, d^ took what a command delay leaves (delta x the command's rate) as a fast
   disturbance observer, the delay measurement read 0 ms (test_timing_matrix), and the 0.2 s
   blackout's mismatch (commands that never acted) swung the hold after it to 1.77x; once a^
   is measured the step is shared as before. A fall's window (rule 3's, or one in which the
   joint's error grew while it moved and accelerated away from its reference, at any error)
   whose step a^'s floor cut (it would have taken a^ below 0) measures no a^: `settled`
   waits for another (stop 71).
   Why: a fall's first window, its error still under STUCK_ERROR, asked a^ below 0 against
   a large acceleration, and the variance that acceleration shrank marked a^ measured, which
   ended the fall's active set from its second window on (the UR10's links off, an untold
   payload, commands 6.4 ms late: d^ of wrist_2 +0.9 N·m while it fell the other way, the
   brake within 0.12 s, 0.55 rad off; now no brake, 0.63x, 2e-6 rad). Any window so cut
   instead: the UR10's friction-true wrist_3 (5e-4 kg·m², 1.7 N·m of Coulomb friction)
   broke away at 3.8x its velocity limit (stop 71).
4. What is not learnt from (`_estimate`, `_consistent`). A joint whose reference rests while
   its integral may run (no excitation; d^ and the integral, two integrators of one error,
   hunted ±1 N·m on Coulomb friction: friction row final 1.8e-3 -> 8.7e-4 rad); a joint its
   friction holds at rest (rule 7's `_held`: its residual is the friction's reaction to
   whatever is pushed; the SO-100's wrist_roll took a^ from 0.07 to its 0.35 kg·m² ceiling in
   0.3 s as its integral grew, and broke away through that inertia's feedback at 16.9x its
   velocity limit); a window whose positions contradict its velocities beyond a quarter plus
   CONSISTENT, or did not change at all (a broken publisher, a feeder's repeated state); a
   window in which the joint's velocity changed sign (`_reverses`: its Coulomb friction turned
   over, which no smooth model pairs with the window's mean command; on the xArm7 told its
   friction exactly, such a window took 0.19 kg·m² as a^ on the 4.3e-3 kg·m² joint5 and the
   excitation braked at 1.22x its velocity limit; skipped, 0.85x and 8.4e-4 rad). Once a^ was
   measured, a window in which the joint crept in its friction's band (within SLIDING w at its
   first, middle and last state) while its reference moved on at over twice that (`_creeps`)
   teaches no a^ or b^, only d^: its friction at rest holds it, anything up to its breakaway,
   and the creep's acceleration, paired with that torque, read as inertia (stop 67: the
   Kinova's joint_4, 8.5e-3 kg·m², stuck at a reversal of its reference, took a^ to its 0.2
   kg·m² ceiling in 0.1 s and broke away through that feedback at 1.17x its velocity limit
   into a brake; corpus seeds 1-16, friction under Pinocchio with commands late: cases with a
   brake 31 -> 15). Before a^ is measured such a window still teaches a^: an untold rotor
   lags its reference in the same band at the start of a motion. The
   Controller also pauses rules 2, 6 and 7 until the measured positions change after a reset (a
   constant state is not an arm answering: d^ would take the feedback's torque) and until it
   has commanded for ANSWER_TIME (a command acts after the actuation delay, unknown until
   measured: with commands 10 ms late the first window took the arm's fall under no command as
   d^ = 6.0 N·m on the wrong-link xArm7's joint4, its gravity error 1.8, and flung the wrist
   past its velocity limit on 3 draws of 7 of the links' errors; none since), and in `holding:
   contact` (an arm held by an obstacle; an integral pushed the bundled arm's sphere 10 -> 28
   N).
5. Where the estimates act (`armature`, `damped`; the law adds them). a^ in the RNEA rows as
   armature: computed torque's feedback acts through M + a^, so an untold geared joint
   regains its stiffness as far as its response shows. b^ in the friction feedforward
   b^ qd_d and as a stiffness Kp (b^ / Kd) e: a joint its own friction damps closes an error
   at stiffness / damping; with it about Kp / Kd (friction row 2.9e-2 -> 1.6e-2 rad RMS).
   d^ in the command. c^ in the friction feedforward (`coulomb`) as c^ tanh(v_r / w) on the
   sliding reference v_r = qd_d + (Kp / Kd) e (Slotine and Li's): the way the joint must move
   to follow, so that at the end of a motion it pushes a lagging joint on through its friction
   and none once it is there (on qd_d alone the geared wrists lagged 17 mrad where the
   reference stopped and crept; with d^ holding friction instead, they overshot). At most
   (M_ii(q0) + a^) / COULOMB_REACH + KICK (b + b^) times the velocity limit: a c^ learnt
   from a hold on a light joint flips at each reversal of its reference (held joint7 of
   1.4e-4 kg·m², released: 1.77x its velocity limit unbounded, 1.29x so); with COULOMB_REACH
   alone the friction-true row's wrists lost their friction's feedforward (RMS 2.1e-2 rad
   against 1.6e-2). The told Coulomb friction too (the arm told its friction exactly ended
   1.3-1.4e-3 rad off with commands 5-10 ms late, on the sliding reference 0.9-3.4e-4). The
   slope in e at most COULOMB_STIFFNESS x the joint's own stiffness: at w alone, 1.5 N·m on
   the 1.4e-4 kg·m² wrist is 1500 N·m/rad (a 3000 rad/s mode: the told friction fed forward
   so set that arm swinging to its brake with commands 10 ms late); 1x left the geared demo
   1.1-1.4e-3 rad off, 4x 3.5-5.5e-4.
6. A stuck joint grows a^ (`_unstick`). Its reference moves, it lags more than STUCK_ERROR
   in the direction of motion and more each tick, it stands still (slower than INTEGRAL_GATE
   and half its reference); its command is not limited and its feedback torque Kp (M_ii +
   a^) |e| is under UNSTICK_TORQUE x the effort limit: M_ii + a^ grows by e per
   ARMATURE_GROWTH, or slower on a late loop: by e per |tau| d / A at most, A = ((M_ii + a^
   measured) / d + b + b^) qd_max the step bound's torque (law.py), d the loop's lateness, so
   that what the command gains while the loop cannot yet see the joint break away is at most
   what its measured inertia and damping absorb below its velocity limit (the guess itself
   is not counted: it is what the breakaway tests). a^'s variance is reset to GAIN. Why the
   late rate: with commands 9 ms late the xArm7's joint7 (1.4e-4 kg·m², 0.8 N·m of Coulomb
   friction) broke away under a command growing 0.05 N·m per tick, 1.6 N·m committed against
   0.9 that moved it: 3.3 rad/s within 3 ms, the brake; corpus seeds 1-3, 444 -> 446 at the
   bar, cases beyond 1.5x a velocity limit 9 -> 8. Why: an untold rotor its friction holds
   never accelerates, so no residual shows its inertia (the geared row 7.6e-3 -> 2.1e-3 rad;
   the real `--geared` demo 64-70 mrad FAIL -> 5.6). Why not at rest (stops 60-63): grown
   for a joint whose reference rests and that stood off its goal, a^ stiffened light joints
   their friction held into a loop their delay cannot carry once they broke away: the
   xArm7's joint7 (1.4e-4 kg·m²) took a^ to 670-800x its inertia and ran to 2.9x and 10.6x
   its velocity limit in its hold (corpus seeds 2 and 7, commands prompt); without it, 0.42x
   and 0.45x, finals 2.0e-2 and 1.1e-2 rad (the peer's 9.6e-3 and 3.6e-2); over seeds 1-8
   1,225 -> 1,222 at the bar (three late friction finals of 1.1-6.0e-3 rad), runaways 10 ->
   8. At rest the integral (rule 7) alone pushes such a joint, at its inertia's pace.
   Why bounded: a joint held by an obstacle
   and let go is back at its true inertia; a held xArm7 wrist, released, peaked at 2.0-3.3x
   its velocity limit unbounded, 1.1-1.4x so. What it grew is a guess (`probe`), and the
   breakaway measures it (`_broke_away`): in the first 2 d after the joint moves faster than
   its reference, its way (d the loop's lateness, at least a period), each new state's
   acceleration bounds its inertia by (|tau| + |T0|) / |qdd_m| (the command and the model's
   torque drive it, friction only holds it back), and a^ is cut to that times the loop's
   reach max(1, 1 / (Kd d)) (the feedback's damping through M_ii + a^ on the true inertia,
   Kd (M_ii + a^) / m, loses at most a radian of phase to the lateness), never below the a^
   before the guess: a true rotor accelerates slowly and is never cut. Why: on the UR3's
   wrist (about 3e-3 kg·m², 2.6 N·m of Coulomb friction, commands 7 ms late) the guess grew
   a^ to 0.15 kg·m² before it broke away, then the feedback 50x too stiff swung its command
   ±9 N·m and the joint to 2.3x its velocity limit: the brake (issue 43's corpus; now 0.65x,
   no brake). Over the corpus's three seeds (480 cases), with the next two rules below and
   the step bound's damping (law.py): 426 -> 439 at the bar; cases with a runaway or a
   brake 35 -> 24.
7. The integral at rest (`_integrate`). Each joint's acceleration dt Ki e, while the reference
   rests, the command is not limited, the joint is slower than INTEGRAL_GATE and than its PD's
   pace Kp/Kd |e| (`_pace`), or than FAR x that pace, or moves away from its goal, and a^ has
   been measured once (its scaled variance <= SETTLED), acts through M(q) at the law's q, a^
   in it (`_through`: every joint's integral torque gains its row of M(q) times the steps; the
   joint itself also b^ / Kd + s), each clamped to ±`integral_clamp` x the effort limit. Why
   through M(q): through M_ii alone a joint's integral reached it through (M⁻¹)_ii, Ki M_ii
   (M⁻¹)_ii, 17x Ki on the SO-100's elbow, beyond the PD's Kp Kd: its holds after a push swung
   into repeated brakes; through M_cc(q0) fixed at the zero pose (stops 54-57) a mode of the
   arm at q got M(q)⁻¹ M(q0) times Ki, up to 13.5x on the Kinova at the corpus's start pose:
   its hold, links 30 % off and commands 10 ms late, swung at 4.5 Hz into 14 brakes
   (docs/controller.md, stability item 4). Why each gate: without the 0.02 rad/s gate the
   geared row oscillated at rest; the pace (2, 5, 10 1/s gave final 8.5e-4, 3.1e-4, 1.1e-4
   rad on the friction row) stops it carrying a
   joint across the friction band and back; away from the goal it unwinds an overshoot (it froze
   at 0.3 N·m; with b^'s ceiling raised at once, friction row 4.0e-2 -> 2.9e-2 rad RMS); before
   a^ is known the integral through M_ii alone is unstable on an untold geared joint ((M_ii +
   a^) Kp Kd < J Ki). Ki (`integral_gain`) 1000 left the links row 3e-3 rad off after 1 s; 4000
   is the default. FAR: a joint 0.15 rad off that crept towards its goal at 0.02-0.06 rad/s
   under a wrong d^ (a hold's, learnt before its release) froze the integral at the 0.02 rad/s
   gate and ended 2-8e-2 rad off; now 3e-4-1.4e-3. s (`_stuck`, issue 43): the measured Coulomb
   friction's slope at rest c^ / (w Kd), as b^ / Kd the viscous one: where a joint stands its
   impedance is its friction, not its inertia (through inertia alone a UR10 wrist of 0.01 kg·m²
   under 1.7 N·m of friction gathered 0.08 N·m in 1.5 s and ended 3.9 mrad off), at most what
   crosses that band in BAND_DELAYS x the loop's lateness (the corpus's quick draw: 13 of 20 at
   the bar before, 17 so, 15 uncapped: stick-slip). A crossing of the goal at rest
   (`_side_changed`, beyond HUNT_AMPLITUDE; `_crossed`) takes out of the integral the friction
   it was overcoming, the estimated friction at the crossing's velocity (b^ qd + c^ tanh(qd /
   w)), never past 0 (a reset integrator, Clegg's, to the torque that holds the joint rather
   than to 0). Why: the integral that carried a joint through its friction band is, at the goal,
   a torque that keeps it sliding: a joint in its friction band is a damper of slope c / w, and
   an integral on a damper is an undamped oscillator; the UR10's wrist_3 under a smooth friction
   crossed its goal at 16 mrad/s with 1.4 N·m stored and slid 5.8 mrad past it (PD stiffness 4
   N·m/rad), the xArm7's joint7 stick-slipped ±4.3 mrad (issue 43's corpus: 146 of 160 cases at
   the bar before, 150 so). To 0 instead, a joint whose integral held a bias (a gravity error)
   fell back at each crossing (the SO-100's elbow: a ±2.5 mrad cycle). A breakaway at rest
   (`_stands`) is the same moment earlier: a joint that stood longer than its PD's own time Kd /
   Kp (in which the PD alone would have moved it were it free) while the integral gathered, then
   moves towards its goal, slides on more than its friction; the integral loses the same
   estimated friction, at most what it gathered while the joint stood. Why: the reset at the
   crossing came after the slide, and a Stribeck friction (static above kinetic) carried the
   UR10's and the xArm7's wrists 2-4 mrad past their goals, stick-slipping to the end of the
   hold (corpus seed 1: 151 -> 154 of 160). Why the stand's length: a frictionless z1 wrist
   ringing ±0.07 mrad at 20 Hz about its goal passed the gate every cycle and lost its integral
   each time, ending 1.1 mrad off; a ring never stands for Kd / Kp. Or a stand in which the
   integral gathered the band it knows (c^, `_band`; stop 70): the integral crosses it in
   BAND_DELAYS x d (`_stuck`), 10 ms with commands prompt, well under Kd / Kp (0.1 s at the
   default gains), and the breakaway that followed kept all of it (a geared UR3's wrist_1
   slid ±6.4 mrad about its goal to the end of the hold; corpus seeds 1-16: 2,446 -> 2,452 of
   2,560, brakes and runaways unchanged). A ring gathers no band. That wrist itself still ends
   5.7 mrad off: after the first reset its integral reached its clamp (4.3 N·m) before it
   had gathered its band again.
   A joint its friction holds (`_held`, stop 66): s needs c^, which a light joint that
   stick-slips never shows (no window slides one way): at the end of a motion the xArm7's
   joint7 (1.4e-4 kg·m², 0.8 N·m of Coulomb friction) stood 20 mrad off its goal while the
   integral, through its inertia alone, gathered 0.01 N·m a second; the SO-100's wrist_roll,
   its a^ never measured, had no integral at all (the corpus's friction truths under
   Pinocchio's smooth Stribeck friction). A joint that has stood off its goal for over
   HELD_TIME x Kd / Kp integrates before a^ is measured (the Routh bound against an untold
   rotor is a moving joint's); if it yielded less than HELD_YIELD of what its stiffness gives
   to the slow torques added since (the integral and d^), it is held by what the model lacks:
   where no band is known, or the torques added since the stand already exceed the band
   known (`_outgrown`; `_band`: c^ or a band a slip measured; stop 67: a c^
   of 2e-5 N·m learnt in motion held the xArm7's joint7's integral to 0.06 N·m a second
   against 0.56 of friction, 25 mrad off), its integral e-folds towards the goal per
   BAND_DELAYS x d; where c^ is not measured or was so outgrown, at the breakaway towards the
   goal (or a crossing straight from the stand) it returns to its value when the stand
   began, and what was added measures the band (`_released`); from then on every breakaway
   of that joint from a stand is such a slip (`_slips`; where c^ holds the stand, the
   crossing's reset takes c^ out). Why the return: kept, the Stribeck excess that broke the
   joint free carried it past its goal (xArm7 joint7: ±5-10 mrad stick-slip). Why the yield
   test: a frictionless UR3 wrist under a wrong gravity,
   converging on its integral, was taken for held, its band measured from its gravity error,
   and its hold swung into a brake. Why c^ first: a band measured above a learnt c^ (the
   integral overshoots a breakaway the loop sees 12-30 ms late) set a geared UR3 wrist hunting
   ±1.8 mrad.
8. A command or a velocity that chatters takes the stiffening back (`_calm`). a^ acts on a joint
   through the arm's (M⁻¹)_ii, so an a^ learnt too large multiplies its feedback's gain by 1 + a^ /
   m_eff, m_eff = 1 / (M⁻¹)_ii, which can be a tenth of M_ii. Why: the excitation starts at a
   nearly constant acceleration, where qdd_m and 1 are collinear; on the friction-true xArm7 joint3
   took its Coulomb friction as a^ = 0.73 kg·m² (M_33 0.61, m_eff 0.06: 13x the gain) and after a
   26 ms pause of the loop its command swung ±30 N·m every 4 ms until the brake (RMS 0.37 rad).
   Measured over CHATTER_TIME, a command whose mean change per tick exceeds CHATTER x the effort
   limit while its signed mean stays under a quarter of it chatters: a^ and b^ are halved (a^'s
   variance reset to GAIN); the loop logs it. There it acted twice within 15 ms: RMS 1.5e-2
   rad, no brake (test_timing_matrix's excitation). c^ is kept: its feedforward and its slope
   in e are bounded by M_ii + a^ and b + b^ (rule 5), so they shrink with them, and halving
   the friction itself at each stick-slip of a light joint left its hold without it (the
   UR3's wrist_3, 1.65 N·m of Coulomb friction: c^ 0.78 -> 0.02 N·m by the end of the motion,
   5.1 mrad off after the hold; kept, 0.1 mrad; corpus, stop 55). A tracked command changes
   by at most ~0.05 N·m per tick, a pause's catch-up once: the demo rows of the matrix never
   trigger it. The measured velocity too, swinging by over VIBRATION x the velocity limit per
   tick: a light joint's command is small against its limit (joint5 of the xArm7 told its
   friction exactly, M_55 4.3e-3 kg·m², a^ 0.11, commands 5 ms late: its velocity swung to 3.4x
   the limit within 40 ms of a reversal, its command a few N·m of 30: the brake; now calmed,
   final 9.6e-4 rad). A tracked velocity changes by
   qdd·dt, ~0.01 rad/s per tick, a real arm's noise by ~0.01. And a joint that hunts at rest
   (`_hunts`: its reference at rest, it crosses its goal by over ±HUNT_AMPLITUDE more than
   HUNT_CROSSINGS times, counted over HUNT_CROSSINGS / (2 HUNT_RATIO f_n), f_n = sqrt(Kp) /
   2π its PD's natural frequency: a leaky count, which a steady swing about the goal passes
   from about 1.7 f_n on, 5.5 Hz at the default gains; from 8.7 Hz whatever the gains until
   stop 58 (a fixed 0.2 s), when the xArm7's 8.8 Hz hunt, not a steady swing, went uncounted
   for 1.2 s) has c^ halved, and a^ and b^ as at a chatter (stop 58: one response to an
   oscillation faster than the loop makes; the z1 with its links off swung at 20 Hz in its
   hold and braked at 1.09x with c^ alone halved, 0.32x so):
   c^'s slope in e (rule 5, up to COULOMB_STIFFNESS x the joint's stiffness) is a stiff spring
   at the goal, which only friction keeps still; on the xArm7 with its links 30 % off and no
   friction, a c^ of 0.17-0.24 N·m taken from the wrong gravity in motion set joints 1 and 3
   hunting in antiphase at 20 Hz, ±1-3 mrad, with commands 10 ms late (final 1.2-2.2e-3 rad
   under 5 of 8 seeds of test_timing_matrix's timing; 2e-5 once halved). An arm held by its
   friction does not cross its goal at 10 Hz, and 2e-4 rad is above an encoder's noise.

The schedule (issue 35, for the timing policy): `LawWork.schedule` (3,), read every tick,
set between ticks by `Controller.set_schedule` without rebuilding the config: [ESTIMATE] in
[0, 1] scales the estimator's step (the innovation; 0 pauses it, estimates and covariances
kept), [INTEGRAL] in [0, 1] scales Ki (0 pauses the integral, its value kept), [UNSTICK] 0/1
the stuck-joint growth. Ones are the law as measured above, bit for bit.

`reset` clears it all (activation, stale stop, contact); `clear_integral` clears the
integral and restarts the window (a gravity hold is not the law's command).
"""
import math

from numba import njit
import numpy as np

from rnea_controller.control.friction import friction_torque
from rnea_controller.control.records import ADAPTATION_FIELDS, LawModel, LawWork
from rnea_controller.dynamics import rnea_kernel
from rnea_controller.dynamics.model import RobotModel

GAIN = 1.0  # the estimator's largest covariance (scaled units): its gain per window
TORQUE_UNIT = 0.05  # x the effort limit: the residual's unit (its noise, the estimates' prior)
LEAST_UNIT = 1e-9  # [N·m] a numeric floor of that unit (an effort limit of 5e-324 made it 0)
ROTOR_PER_TORQUE = 0.01  # [kg·m²/(N·m)] a^ at most this x the effort limit: real rotors 1-6e-3
REACH = 1.0  # [s] the reference acceleration is the velocity limit reached in this time
ARMATURE_GROWTH = 0.05  # [s] M_ii + a^ grows at most by e in this time
BRAKING_GROWTH = 2.0  # x ARMATURE_GROWTH: M_ii + a^'s slowest e-fold in a deceleration (rule 3)
WINDOW = 10  # new states over which the residual's acceleration and mean command are taken
CONSISTENT = 1e-4  # [rad] positions may miss the velocities' path by this (plus a quarter)
FRICTION_CEILING = 1.0  # b^'s torque at the velocity limit at most this x the effort limit
STUCK_ERROR = 0.005  # [rad] a lag beyond this may be a stuck joint
UNSTICK_TORQUE = 0.05  # a^ grows while the feedback torque is under this x the effort limit
INTEGRAL_GATE = 0.02  # [rad/s] slower than this, a joint stands still (integral, stuck rule)
SETTLED = 0.2 * GAIN  # the integral waits until a^'s scaled variance was at most this
NATURAL_PACE = 10.0  # [1/s] the pace Kp / Kd if Kd is 0: the default gains' (law's ω / 2)
ESTIMATED = 4  # a [kg·m²], b [N·m·s/rad], d [N·m], c [N·m] per joint
ESTIMATE, INTEGRAL, UNSTICK = 0, 1, 2  # the schedule's entries
ANSWER_TIME = 0.04  # [s] the adaptation starts this long after the first command (Controller);
# also the longest actuation delay the estimate pairs (ros/loop.py pauses it beyond)
COULOMB_GAIN = 0.1 * GAIN  # c^'s largest covariance: d^ takes a one-way bias first (rule 2)
PRIOR = np.array([GAIN, GAIN, GAIN, COULOMB_GAIN])  # the covariances' largest diagonal
SLIDING = 3.0  # x friction_velocity_width: slower, a joint is in its friction's band (rule 2)
COULOMB_REACH = 0.1  # [s] c^ fed forward turns M_ii + a^ to the velocity limit in this (rule 5)
KICK = 1.0  # ... plus this x its damping's torque at that limit (rule 5)
COULOMB_STIFFNESS = 4.0  # x the joint's stiffness: c^'s slope in the error at most (rule 5)
FAR = 0.25  # x the pace: a joint at rest approaching slower than this has its integral run (7)
CHATTER_TIME = 0.02  # [s] the command's swing is measured over about this time (rule 8)
CHATTER = 0.05  # x the effort limit per tick: a command swinging more, back and forth, chatters
VIBRATION = 0.03  # x the velocity limit per tick: a velocity swinging more chatters too
HUNT_AMPLITUDE = 2e-4  # [rad] a joint at rest crossing its goal by more than this hunts ...
HUNT_RATIO = 2.0  # ... at about this x its PD's natural frequency sqrt(Kp) / 2π (rule 8)
HUNT_CROSSINGS = 4.0  # crossings counted over HUNT_CROSSINGS / (2 HUNT_RATIO f_n) (`_hunt_decay`)
BAND_DELAYS = 10.0  # lateness d: the integral crosses the friction band in no less (rule 7)
HELD_TIME = 2.0  # x Kd / Kp: a joint at rest standing longer may be held by its friction (7)
HELD_YIELD = 0.25  # ... if it yielded less than this x what its stiffness gives the torque added

WORK_FIELDS = ADAPTATION_FIELDS
INTEGER_FIELDS = ('count',)


def work_shapes(n: int, m: int) -> dict:
    """{LawWork field: shape} of the adaptation's state for n model joints, m controlled:
    theta (4, m) a^ [kg·m²], b^ [N·m·s/rad], d^ [N·m], c^ [N·m]; P (m, 4, 4) their covariances;
    applied (2, m): row 0 the window's sum of commands [N·m]; qd_last, q_first (n,) the
    window's first state; count [commands in `applied`, state intervals, 1 once the window
    has its first state]; elapsed [s] the window's duration; integral (m,) [N·m]; settled (m,)
    1 once a^ was measured; q_mid, qd_mid (n,) the window's middle state; schedule (3,);
    swing (8, m) rule 8's measures of the command [N·m], the velocity [rad/s] and the hunt;
    calmed (m,) how often rule 8 acted; probe (11, m): rule 6's guess, the a^ [kg·m²] it added
    that no acceleration has measured yet, the newest state's velocity [rad/s], the
    acceleration [rad/s²] from the state before (0 while no new state arrives), the time [s]
    since the joint broke away (0: not); rule 7's integral [N·m] when the joint last came to
    a stand at rest, how long [s] it has stood, the friction band a held stand's breakaway
    measured [N·m], the error [rad] and d^ [N·m] when the stand began, 1 while the stand is
    held (`_held`); rule 3's 1 where the last window was a fall's whose step took a^ below
    its floor (it measured no a^); step (m,) rule 7's integral step of the
    tick [rad/s²]; inertial (4, n) the RNEA row that takes it through M(q) (q, 0, the step ->
    its torque [N·m]) and quiet (1, n, 6) that row's zero wrenches (preallocated: the tick
    allocates nothing)."""
    return dict(theta=(ESTIMATED, m), P=(m, ESTIMATED, ESTIMATED), applied=(2, m),
                qd_last=(n,), count=(3,), elapsed=(1,), integral=(m,), settled=(m,),
                q_mid=(n,), qd_mid=(n,), q_first=(n,), schedule=(3,), swing=(8, m),
                calmed=(m,), probe=(11, m), step=(m,), inertial=(4, n), quiet=(1, n, 6))


def initial(arrays: dict) -> None:
    """Fill a new workspace's adaptation arrays (by field name): the schedule at ones."""
    arrays['schedule'][:] = 1.0


def velocity_scale(model: RobotModel, index: np.ndarray) -> np.ndarray:
    """The controlled joints' velocity limits [rad/s or m/s], 1 where a joint has none."""
    velocity = np.asarray(model.velocity_limits, dtype=float)[index]
    return np.where(np.isfinite(velocity) & (velocity > 0.0), velocity, 1.0)


def config_entries(values: dict, model: RobotModel, index: np.ndarray, limits: np.ndarray,
                   inertia: np.ndarray, viscous: np.ndarray, coulomb: np.ndarray) -> dict:
    """The config's adaptation entries (rules 2, 3, 7): forgetting factor per window (1: off);
    floors, ceilings and regressor scales (4, m) of a [kg·m²], b [N·m·s/rad], d [N·m], c
    [N·m] (floors: 0, minus the told friction `viscous` and `coulomb`, minus d's ceiling;
    reference velocity: the velocity limit, else 1 rad/s; reference acceleration: it over
    REACH); integral gain [1/s³] and clamp [N·m]; inertia M_ii(q0) [kg·m²] (given)."""
    velocity = velocity_scale(model, index)
    bias = float(values['integral_clamp']) * limits
    rotor = np.minimum(float(values['estimation.max_armature']), ROTOR_PER_TORQUE * limits)
    ceilings = np.vstack((rotor, FRICTION_CEILING * limits / velocity, bias, bias))
    # a told friction too high is corrected down, to none at most (rule 2); no rotor takes
    # inertia away
    floors = np.vstack((np.zeros(len(index)), -np.asarray(viscous, dtype=float), -bias,
                        -np.asarray(coulomb, dtype=float)))
    time_constant = float(values['estimation.forgetting_time'])
    period = 1.0 / values['update_rate']
    window = WINDOW * period
    # a forgetting time under two windows acts as two (a factor of 0 at one window divided
    # the covariance by 0: test_configurations)
    forget = 1.0 if time_constant == 0.0 else 1.0 - window / max(time_constant, 2.0 * window)
    unit = np.maximum(TORQUE_UNIT * limits, LEAST_UNIT)  # [N·m]
    scales = np.vstack((unit * REACH / velocity, unit / velocity, unit, unit))
    return dict(forget=forget, floors=floors, ceilings=ceilings, scales=scales,
                integral_gain=float(values['integral_gain']),
                integral_clamp=bias, inertia=inertia)


def reset(arrays: dict) -> None:
    """Forget the estimates, their covariances (PRIOR), the integral and the window (the
    schedule is kept: it is the caller's policy, not the arm's)."""
    arrays['theta'][:] = 0.0
    arrays['integral'][:] = 0.0
    arrays['settled'][:] = 0.0
    arrays['swing'][:] = 0.0
    arrays['probe'][:] = 0.0
    arrays['count'][:] = 0
    arrays['applied'][:] = 0.0
    for k in range(arrays['P'].shape[0]):
        arrays['P'][k] = np.diag(PRIOR)


def clear_integral(arrays: dict) -> None:
    """Forget the integral and restart the window at the next new state (estimates kept)."""
    arrays['integral'][:] = 0.0
    arrays['count'][:] = 0
    arrays['applied'][:] = 0.0


@njit(cache=True)
def window(model: LawModel, work: LawWork, state_dt: float, qm: np.ndarray,
           qdm: np.ndarray) -> bool:
    """Rule 1: count this tick's state into the window and set RNEA row 2 to (q_mid, qd_mid,
    qdd_m), the window's middle state as measured (qm [rad], qdm [rad/s]) and, when the
    window closes, qdd_m = the change of qdm from its first state to now over `elapsed`
    (else 0). state_dt [s]: the time since the previous new state, 0 if this one is not new
    (the window waits), < 0 a new state one period on (lockstep). True if it closes now."""
    Q, QD, QDD, count = work.Q, work.QD, work.QDD, work.count
    new = state_dt != 0.0
    starting = new and count[2] == 0
    if new and not starting:
        count[1] += 1
        work.elapsed[0] += model.dt if state_dt < 0.0 else state_dt
    middle = new and not starting and count[1] == WINDOW // 2
    closing = new and count[1] >= WINDOW and work.elapsed[0] > 0.0
    if starting:
        count[0] = count[1] = 0  # a window starts at this state
        count[2] = 1
        work.elapsed[0] = 0.0
        work.applied[0, :] = 0.0
    for i in range(qm.shape[0]):
        if middle:
            work.q_mid[i], work.qd_mid[i] = qm[i], qdm[i]
        Q[2, i], QD[2, i] = work.q_mid[i], work.qd_mid[i]
        if starting:
            work.qd_last[i] = qdm[i]
            work.q_first[i] = qm[i]
        QDD[2, i] = (qdm[i] - work.qd_last[i]) / work.elapsed[0] if closing else 0.0
    probe = work.probe
    for k in range(model.index.shape[0]):
        if new:
            v = qdm[model.index[k]]
            probe[2, k] = (v - probe[1, k]) / (model.dt if state_dt < 0.0 else state_dt)
            probe[1, k] = v
        else:
            probe[2, k] = 0.0
    return closing


@njit(cache=True)
def armature(model: LawModel, work: LawWork) -> None:
    """Rule 5: work.armature = the model's armature plus a^ on the controlled joints [kg·m²]."""
    work.armature[:] = model.armature
    for k in range(model.index.shape[0]):
        work.armature[model.index[k]] += work.theta[0, k]


@njit(cache=True)
def damped(model: LawModel, theta: np.ndarray, k: int) -> float:
    """Rule 5: (b + b^) / Kd [kg·m²] of controlled joint k (computed_torque with Kd > 0, else
    0), the inertia through which Kd's damping equals the joint's viscous friction, told (b)
    and measured (b^); the law adds the stiffness Kp·((b + b^) / Kd)·e and the integral's gain
    scales by it. The told friction too (issue 35): its feedforward b·qd_d leaves b·ed on the
    error, a damping that made a wrist told its friction exactly (0.8 N·m·s/rad on 1.4e-4
    kg·m²) close its errors at Kp·M/b = 0.07 1/s: RMS 6.1e-2 rad, overspeed and brake with
    commands 5 ms late; with it 3.1e-2, none (test_timing_matrix). Off with the estimate
    (`estimation.forgetting_time` 0: the law of issue 23, exactly computed torque)."""
    if model.pd or model.kd[k] <= 0.0 or model.forget == 1.0:
        return 0.0  # feedforward_pd, or the estimate off: the law of issue 23, exactly
    return (theta[1, k] + model.viscous[k]) / model.kd[k]


@njit(cache=True)
def lateness(model: LawModel, work: LawWork) -> float:
    """d = max(the loop's lateness `LawWork.delay`, a period) [s]: how late the loop sees the
    arm answer a command (`Controller.lateness`)."""
    return max(work.delay[0], model.dt)


@njit(cache=True)
def reach_torque(model: LawModel, work: LawWork, k: int, inertia: float, d: float) -> float:
    """(inertia / d + b + b^) qd_max [N·m]: the torque that takes controlled joint k, of
    `inertia` [kg·m²] and its viscous friction told and measured (at least 0), from rest to
    its velocity limit within d [s]. The step bound's (law._bounded) and rule 6's late rate."""
    damping = max(model.viscous[k] + work.theta[1, k], 0.0)
    return (inertia / d + damping) * model.velocity[k]


@njit(cache=True)
def adapt(model: LawModel, work: LawWork, qm: np.ndarray, qdm: np.ndarray, closing: bool,
          ref: np.ndarray) -> None:
    """This tick's adaptation, after the law's limits: the estimate when the window closes
    (rules 2-4) and this command into the window, the stuck rule (6), the integral (7)."""
    _estimate(model, work, qm, qdm, closing, ref)
    _unstick(model, work, ref)
    _integrate(model, work, ref)
    _calm(model, work, qdm, ref)


@njit(cache=True)
def _resting(ref, k):
    """Controlled joint k's reference rests: qd_d = qdd_d = 0."""
    return ref[1, k] == 0.0 and ref[2, k] == 0.0


@njit(cache=True)
def _estimate(model, work, q, qd, closing, ref):
    """Rules 2-4: when the window closes, each joint's residual updates its estimates
    (`_estimate_joint`) unless it is not to be learnt from; the window restarts at this state.
    Then this tick's command enters the window."""
    T, applied, count = work.T, work.applied, work.count
    lam, scales = model.forget, model.scales
    phi, Pphi, x = np.empty(ESTIMATED), np.empty(ESTIMATED), np.empty(ESTIMATED)
    if closing:
        if lam < 1.0 and count[0] > 0 and work.schedule[ESTIMATE] > 0.0:
            growth_factor = 1.0 + work.elapsed[0] / ARMATURE_GROWTH
            band = SLIDING * model.width  # [rad/s] slower, a joint is in its friction's band
            for k in range(model.index.shape[0]):
                i = model.index[k]
                if _resting(ref, k) and work.settled[k] > 0.0:
                    continue  # at rest, the integral's: no excitation, one integrator
                if work.probe[9, k] > 0.0:
                    continue  # held by its friction: its residual is the friction's reaction
                if not _consistent(work, i, q, qd):
                    continue  # velocities the positions contradict: not the arm's motion
                if _reverses(work, i, qd):
                    continue  # its friction turned over within the window: no model's
                # once a^ was measured, a joint its friction holds behind its reference
                # teaches no inertia or damping (its regressors 0: d^ takes the hold)
                creeps = work.settled[k] > 0.0 and _creeps(work, i, qd, band, ref[1, k])
                _estimate_joint(model, work, work.qd_mid, k, lam, scales, phi, Pphi, x,
                                growth_factor, _sliding(work, i, qd, band), creeps)
        for k in range(model.index.shape[0]):
            applied[0, k] = 0.0
        for i in range(qd.shape[0]):
            work.qd_last[i] = qd[i]
            work.q_first[i] = q[i]
        count[0] = count[1] = 0
        work.elapsed[0] = 0.0
    if count[2] == 0:
        return  # no state yet to start a window at
    for k in range(model.index.shape[0]):
        applied[0, k] += work.tau[k] + (T[3, model.index[k]] if model.compensate else 0.0)
    count[0] += 1


@njit(cache=True)
def _sliding(work, i, qd, band):
    """Rule 4: joint i slid one way through the window, its velocity at the window's first,
    middle and last state beyond `band` [rad/s] and of one sign: its Coulomb friction was
    constant, which c^ can take."""
    first, middle, last = work.qd_last[i], work.qd_mid[i], qd[i]
    return (min(abs(first), abs(middle), abs(last)) > band
            and first * middle > 0.0 and middle * last > 0.0)


@njit(cache=True)
def _creeps(work, i, qd, band, qd_d):
    """Rule 4: joint i stayed in its friction's band through the window, its velocity at the
    window's first, middle and last state within `band` [rad/s], while its reference qd_d
    moved on at over twice that (rule 6's `still`): its friction at rest holds it, anything
    up to its breakaway, which no inertia or damping explains."""
    v = max(abs(work.qd_last[i]), abs(work.qd_mid[i]), abs(qd[i]))
    return v <= band and v < 0.5 * abs(qd_d)


@njit(cache=True)
def _reverses(work, i, qd):
    """Rule 4: joint i's velocity changed sign within the window (at its first, middle or
    last state): its Coulomb friction turned over, which no smooth model pairs with the
    window's mean command."""
    first, middle, last = work.qd_last[i], work.qd_mid[i], qd[i]
    return first * middle < 0.0 or middle * last < 0.0 or first * last < 0.0


@njit(cache=True)
def coulomb(model: LawModel, theta: np.ndarray, k: int, qd_d: float, e: float,
            damped_k: float) -> float:
    """Rule 5: the Coulomb friction fed forward at controlled joint k on the sliding reference
    qd_d + (Kp / Kd) e, the way the joint must move to follow (qd_d alone once the reference
    rests: none while the joint lags), beyond what the told model gives at qd_d [N·m]: (c^ +
    c) tanh(qd_d / w + (Kp / Kd) e / w_e) - c tanh(qd_d / w), c the told Coulomb friction. c^
    at most what turns the joint's inertia M_ii(q0) + a^ to its velocity limit in
    COULOMB_REACH, plus KICK x what its damping b + b^ takes at that limit (an estimate on a
    light joint that took a hold's torque flips at each reversal); the slope in e, (c^ + c)
    (Kp / Kd) / w_e, at most COULOMB_STIFFNESS x the joint's own stiffness Kp (M_ii + a^ + (b
    + b^) / Kd) (w_e >= w: at w, 1.5 N·m on the xArm7's 1.4e-4 kg·m² wrist is 1500 N·m/rad,
    a natural frequency of 3000 rad/s); damped_k: `damped`'s (the law's). Off (0) for
    feedforward_pd and without Kd."""
    if model.pd or model.kd[k] <= 0.0:
        return 0.0
    inertia = model.inertia[k] + theta[0, k]
    damping = model.viscous[k] + theta[1, k]
    c = min(theta[3, k], (inertia / COULOMB_REACH + KICK * damping) * model.velocity[k])
    told = model.coulomb[k]
    total = c + told
    slope = total * _pace(model, k) / model.width  # [N·m/rad] of the sliding reference's e term
    stiffness = COULOMB_STIFFNESS * model.kp[k] * (inertia + damped_k)
    if slope > stiffness:  # also where the joint has no stiffness: Kp or its inertia 0
        slope = stiffness
    toward = slope * e / total if total > 0.0 else 0.0
    return total * np.tanh(qd_d / model.width + toward) - told * np.tanh(qd_d / model.width)


@njit(cache=True)
def _consistent(work, i, q, qd):
    """Rule 4: the window's positions agree with its velocities at joint i: the change of q
    is their trapezoid mean times the window's duration, within a quarter of that plus
    CONSISTENT [rad] (stamp jitter, a velocity filter's lag), and not exactly 0 (a repeated
    state: a resting arm's readings still move)."""
    moved = q[i] - work.q_first[i]
    expected = 0.5 * (work.qd_last[i] + qd[i]) * work.elapsed[0]
    return moved != 0.0 and abs(moved - expected) <= 0.25 * abs(expected) + CONSISTENT


@njit(cache=True)
def _estimate_joint(model, work, qd, k, lam, scales, phi, Pphi, x, growth_factor, sliding,
                    creeps):
    """Rules 2-3 for controlled joint k: one recursive least-squares step with forgetting
    `lam` in scaled units (x = theta / scales), its innovation times the schedule's
    estimate gain; the covariance's diagonal kept at most PRIOR; the estimates projected on
    [floors, ceilings]; M_ii + a^ grown at most by `growth_factor`; c^'s regressor 0 unless the
    joint slid one way through the window (`sliding`), a^'s and b^'s 0 where it crept in its
    friction's band behind its reference (`creeps`)."""
    T, theta = work.T, work.theta
    i = model.index[k]
    v, qdd_m = qd[i], work.QDD[2, i]
    told = friction_torque(model.viscous[k], model.coulomb[k], model.offset[k],
                           model.stribeck[k], model.width, model.stribeck_velocity, v)
    unit = scales[2, k]  # the residual in units of its joint's torque (config_entries)
    err = (work.applied[0, k] / work.count[0] - T[2, i] + theta[0, k] * qdd_m - told) / unit
    phi[0], phi[1], phi[2] = qdd_m * scales[0, k] / unit, v * scales[1, k] / unit, 1.0
    if creeps:  # its friction at rest holds it: only d^ takes that
        phi[0] = phi[1] = 0.0
    phi[3] = np.tanh(v / model.width) * scales[3, k] / unit if sliding else 0.0
    for a in range(ESTIMATED):
        x[a] = theta[a, k] / scales[a, k]
        err -= phi[a] * x[a]
    P, a_old, step = work.P[k], theta[0, k], work.schedule[ESTIMATE]
    den = _gain(P, phi, Pphi, lam)
    held = _falls(work, k, qdd_m) and x[0] + Pphi[0] / den * err * step < 0.0
    if held:  # a^ held at 0 (no rotor takes inertia away): the others, d^ first, take the step
        err += phi[0] * x[0]
        x[0] = phi[0] = 0.0
        den = _gain(P, phi, Pphi, lam)
    for a in range(ESTIMATED):
        x[a] += Pphi[a] / den * err * step
        for b in range(ESTIMATED):
            P[a, b] = (P[a, b] - Pphi[a] * Pphi[b] / den) / lam
    for a in range(ESTIMATED):
        if P[a, a] > PRIOR[a]:
            shrink = np.sqrt(PRIOR[a] / P[a, a])
            for b in range(ESTIMATED):
                P[a, b] *= shrink
                P[b, a] *= shrink
        theta[a, k] = min(max(x[a] * scales[a, k], model.floors[a, k]), model.ceilings[a, k])
    # a fall's window whose step a^'s floor cut measures no a^ (`settled`, `_integrate`)
    cut = held or (_away(work, k, qdd_m) and work.e[0, k] * v < 0.0
                   and x[0] * scales[0, k] < model.floors[0, k])
    work.probe[10, k] = 1.0 if cut else 0.0
    if v * qdd_m < 0.0:  # a deceleration: friction told too high reads as inertia there
        growth_factor = 1.0 + (growth_factor - 1.0) / BRAKING_GROWTH
    growth = (model.inertia[k] + a_old) * growth_factor
    theta[0, k] = min(theta[0, k], growth - model.inertia[k])


@njit(cache=True)
def _falls(work, k, qdd_m):
    """Rule 3: controlled joint k falls, before a^ was measured once: its error beyond
    STUCK_ERROR [rad] and growing, its measured acceleration qdd_m [rad/s²] away from its
    reference. Its residual then reads as negative inertia (r = Δg M_ii / m against qdd_m),
    which a^ >= 0 cannot take."""
    return (work.settled[k] == 0.0 and _away(work, k, qdd_m)
            and abs(work.e[0, k]) > STUCK_ERROR)


@njit(cache=True)
def _away(work, k, qdd_m):
    """Rule 3: controlled joint k's error grows and its measured acceleration qdd_m [rad/s²]
    is away from its reference."""
    e = work.e[0, k]
    return e * work.e[1, k] > 0.0 and e * qdd_m < 0.0


@njit(cache=True)
def _gain(P, phi, Pphi, lam):
    """Rule 3's RLS gain: Pphi = P phi in place; returns lam + phi' P phi."""
    den = lam
    for a in range(ESTIMATED):
        Pphi[a] = 0.0
        for b in range(ESTIMATED):
            Pphi[a] += P[a, b] * phi[b]
        den += phi[a] * Pphi[a]
    return den


@njit(cache=True)
def _unstick(model, work, ref):
    """Rule 6: a joint that does not follow its moving reference grows a^, M_ii + a^ by e per
    ARMATURE_GROWTH (at
    most max_armature), and a^'s variance is reset to GAIN (a guess, not a measurement: once
    the joint moves, the residual corrects it at once), kept in probe[0] until the breakaway
    measures it (`_broke_away`). Off with the estimate off, for feedforward_pd (its gains do
    not act through M) and with the schedule's UNSTICK 0."""
    if model.forget == 1.0 or model.pd or work.schedule[UNSTICK] == 0.0:
        return
    growth = model.dt / ARMATURE_GROWTH
    probe = work.probe
    for k in range(model.index.shape[0]):
        e, ed, qd_d = work.e[0, k], work.e[1, k], ref[1, k]
        qd_m = qd_d - ed
        still = abs(qd_m) < min(0.5 * abs(qd_d), INTEGRAL_GATE)
        probe[0, k] = min(probe[0, k], work.theta[0, k])  # rule 2 measured the rest
        if probe[0, k] > 0.0 and (probe[3, k] > 0.0 or abs(qd_m) > abs(qd_d)):
            _broke_away(model, work, k, qd_m * e > 0.0)
        inertia = model.inertia[k] + work.theta[0, k]
        lags = e * qd_d > 0.0 and e * ed > 0.0 and still
        if (lags and abs(e) > STUCK_ERROR
                and work.tau[k] == work.raw[k]
                and model.kp[k] * inertia * abs(e) < UNSTICK_TORQUE * model.limits[k]):
            # what the command gains within the loop's lateness d, at most what takes the
            # joint to its velocity limit through its measured inertia and damping (rule 6)
            d = lateness(model, work)
            absorbed = reach_torque(model, work, k, model.inertia[k]
                                    + max(work.theta[0, k] - probe[0, k], 0.0), d)
            late = abs(work.tau[k]) * d / absorbed if absorbed > 0.0 else 0.0
            rate = growth if late <= ARMATURE_GROWTH else model.dt / late
            grown = min(work.theta[0, k] + inertia * rate, model.ceilings[0, k])
            probe[0, k] += grown - work.theta[0, k]
            work.theta[0, k] = grown
            P = work.P[k]
            for b in range(1, ESTIMATED):
                P[0, b] = P[b, 0] = 0.0
            P[0, 0] = GAIN  # a^ grown without evidence: the first acceleration corrects it


@njit(cache=True)
def _broke_away(model, work, k, forward):
    """Rule 6's check of joint k, whose a^ it grew by probe[0, k], in the first 2 d (the loop's
    lateness, at least a period) after it broke away: its acceleration from rest measures its
    inertia at most (|tau| + |T0|) / |qdd_m|, tau the command, T0 the model's torque (gravity,
    Coriolis) that may have helped it, friction only holding it back. a^ is cut to that, never
    below what it was before the probe: a true rotor is never cut. probe[0, k] keeps what is
    left of the guess (rule 2's estimate takes it over as it measures a^)."""
    probe = work.probe
    probe[3, k] += model.dt
    acceleration = abs(probe[2, k])
    if forward and acceleration > 0.0:
        drive = (max(abs(work.tau[k]), abs(work.previous[k]))
                 + abs(work.T[0, model.index[k]]))
        # the feedback's damping through M_ii + a^ on a joint of inertia m, Kd (M_ii + a^) / m,
        # stays within the loop's reach 1 / d (its phase lost to the lateness at most a radian)
        damping = model.kd[k] * lateness(model, work)  # Kd d (0: no damping feedback)
        reach = max(1.0, 1.0 / damping) if damping > 0.0 else 1.0
        cut = work.theta[0, k] - max(reach * drive / acceleration - model.inertia[k],
                                     work.theta[0, k] - probe[0, k], 0.0)
        if cut > 0.0:
            work.theta[0, k] -= cut
            probe[0, k] -= cut
    if not forward or probe[3, k] > 2.0 * lateness(model, work):
        probe[3, k] = 0.0


@njit(cache=True)
def _pace(model, k):
    """Kp / Kd [1/s] of controlled joint k: the rate at which its PD alone closes an error
    (ω / 2 = 10 1/s with the default gains of either law); NATURAL_PACE if Kd is 0."""
    return model.kp[k] / model.kd[k] if model.kd[k] > 0.0 else NATURAL_PACE


@njit(cache=True)
def _gate(model, k, e):
    """Rule 7: slower than this [rad/s], controlled joint k, e [rad] off its goal, stands:
    INTEGRAL_GATE, or its PD's pace Kp / Kd times |e| where that is slower."""
    return min(INTEGRAL_GATE, _pace(model, k) * abs(e))


@njit(cache=True)
def _stuck(model, work, k, e):
    """Rule 7: the measured Coulomb friction's slope at rest, as `damped` takes the viscous
    one: c^ / (w Kd) [kg·m²], so that the integral crosses the friction band at Ki c^ e /
    (w Kd) (the told friction rule 5 feeds forward whole); at most what crosses it in
    BAND_DELAYS x the loop's lateness d (`LawWork.delay`, at least a period): what it adds
    while the loop cannot yet see the joint slip is at most 1 / BAND_DELAYS of it. Where c^
    is not measured, the band a held stand's breakaway measured (`_band`)."""
    if model.pd or model.kd[k] <= 0.0 or model.forget == 1.0:
        return 0.0
    c = _band(work, k)
    late = BAND_DELAYS * lateness(model, work)
    return c / max(model.width * model.kd[k], model.ki * abs(e) * late)


@njit(cache=True)
def _integrate(model, work, ref):
    """Rule 7: the integral's acceleration dt·Ki·s·e_k of each joint k under its gates, s the
    schedule's integral gain (0: the integral is kept as it is), acts through the arm's
    inertia at its measured configuration, M(q) with a^ (`_through`), as the feedback does:
    joint j's integral torque gains (M(q) step)_j (unless j is limited), plus (b^/Kd + s_k)
    times its own step; each clamped to ±i_clamp. feedforward_pd acts per joint through its
    M_ii(q0) (`inertia`), as its gains do.
    Why M(q): through M_ii alone a joint's integral reached it through (M⁻¹)_ii, M_ii (M⁻¹)_ii
    times Ki: 17x on the SO-100's elbow, beyond the PD's Kp Kd (s³ + Kd s² + Kp s + Ki is
    stable only while Ki < Kp Kd), and its holds swung into repeated brakes; through M_cc(q0)
    fixed at the zero pose, a mode of the arm at q got M(q)⁻¹ M(q0) times Ki, up to 13.5x on
    the Kinova at the corpus's start pose (0.02-8x on the others): with its links 30 % off and
    commands 10 ms late its wrist's hold swung at 4.5 Hz into 14 brakes.
    `settled` records once that a^'s scaled variance was at most SETTLED after a window that
    was not a fall's cut by a^'s floor (rule 3: such a window measured no a^; it grows back at
    rest, which no longer holds the integral). A joint that stood off its goal (`_stood`)
    integrates before that (the Routh bound against an untold rotor is a moving joint's); one
    its friction holds (`_held`), its band unknown (`_band`), e-folds its integral towards the
    goal per BAND_DELAYS x the lateness d, the pace at which the friction term crosses a
    known band."""
    scale = work.schedule[INTEGRAL]
    m = model.index.shape[0]
    step = work.step
    step[:] = 0.0
    stepping = False
    for k in range(m):
        resting = _resting(ref, k)
        stood = resting and _stood(model, work, k)
        if stood and _held(model, work, k):
            work.probe[9, k] = 1.0  # until it moves again (`_stands`, `_released`)
        e, ed = work.e[0, k], work.e[1, k]
        if work.P[k, 0, 0] <= SETTLED and work.probe[10, k] == 0.0:
            work.settled[k] = 1.0
        slow = abs(ed) < max(_gate(model, k, e), FAR * _pace(model, k) * abs(e))
        if (resting and (slow or e * ed > 0.0) and scale > 0.0
                and work.tau[k] == work.raw[k]
                and (model.forget == 1.0 or work.settled[k] > 0.0 or stood)):
            step[k] = model.dt * model.ki * e * scale
            stepping = True
    if not stepping:
        return  # no joint integrates this tick (while moving: every tick), none changes
    if not model.pd:
        _through(model, work, step)
    for j in range(m):
        if work.tau[j] != work.raw[j]:
            continue  # limited: its integral is frozen (no windup)
        extra = 0.0
        if step[j] != 0.0:
            extra = (damped(model, work.theta, j) + _stuck(model, work, j, work.e[0, j])
                     + (work.theta[0, j] if model.pd else 0.0)) * step[j]
        value = work.integral[j] + extra
        if step[j] != 0.0 and work.probe[9, j] > 0.0 and _outgrown(work, j):
            # held past the band it knows: e-fold towards the goal per BAND_DELAYS x d
            grow = model.dt / (BAND_DELAYS * lateness(model, work))
            value += math.copysign(grow * abs(work.integral[j]), work.e[0, j])
        if model.pd:
            value += model.inertia[j] * step[j]
        else:
            value += work.inertial[3, model.index[j]]
        if value != work.integral[j]:
            work.integral[j] = min(max(value, -model.i_clamp[j]), model.i_clamp[j])


@njit(cache=True)
def _band(work, k):
    """Rule 7's friction band of controlled joint k [N·m]: the larger of c^ and what a held
    stand's breakaway measured (probe[6], `_released`), at least 0."""
    return max(work.theta[3, k], work.probe[6, k], 0.0)


@njit(cache=True)
def _slips(work, k):
    """Rule 7: joint k's Coulomb friction is not measured (c^ <= 0) or its stand outgrew
    c^ (added more, `_added`), and its stand is held by its friction (`_held`) or its band was
    measured so: a breakaway from it is a slip past the static friction (`_released`). Where
    c^ holds the stand the crossing's reset takes it out (`_crossed`)."""
    return ((work.theta[3, k] <= 0.0 or abs(_added(work, k)) > work.theta[3, k])
            and (work.probe[9, k] > 0.0 or work.probe[6, k] > 0.0))


@njit(cache=True)
def _outgrown(work, k):
    """Rule 7: the slow torques added to joint k since it came to a stand (`_added`) exceed
    the friction band it knows (`_band`; none known: any torque added): the friction that
    holds it is not the band known."""
    return abs(_added(work, k)) > _band(work, k)


@njit(cache=True)
def _added(work, k):
    """The slow torques (the integral and d^) added to joint k since it came to a stand
    [N·m] (their values then: probe[4], probe[8])."""
    return work.integral[k] + work.theta[2, k] - work.probe[4, k] - work.probe[8, k]


@njit(cache=True)
def _stood(model, work, k):
    """Rule 7: controlled joint k stands off its goal (beyond HUNT_AMPLITUDE, slower than the
    integral's gate) and has for over HELD_TIME x its PD's own time Kd / Kp."""
    e, ed = work.e[0, k], work.e[1, k]
    return (abs(e) > HUNT_AMPLITUDE and abs(ed) < _gate(model, k, e)
            and work.probe[5, k] * _pace(model, k) > HELD_TIME)


@njit(cache=True)
def _held(model, work, k):
    """Rule 7: controlled joint k at rest, which stood (`_stood`, the caller's), is held by
    its friction: it has yielded less than HELD_YIELD x what its stiffness Kp (M_ii + a^ + (b +
    b^) / Kd) gives to the slow torques added since it came to a stand (`_added`; the error
    then: probe[7]), HUNT_AMPLITUDE counted as yielded (the sensor's: less added is no
    evidence). A free joint under a ramp of those torques lags it by about Kd / Kp, then
    follows at that stiffness: at 2 Kd / Kp it has yielded about half."""
    e = work.e[0, k]
    stiffness = model.kp[k] * (model.inertia[k] + work.theta[0, k]
                               + damped(model, work.theta, k))
    return (stiffness * (abs(e - work.probe[7, k]) + HUNT_AMPLITUDE)
            < HELD_YIELD * abs(_added(work, k)))


@njit(cache=True)
def _through(model, work, step):
    """inertial[3] = M(q) x (step at the controlled joints, 0 elsewhere) [N·m]: one RNEA row
    at the law's q (row 0's), at rest and without gravity, the model's armature plus a^ in
    it (`work.armature`), as the law's feedback reaches the arm."""
    row = work.inertial
    for i in range(row.shape[1]):
        row[0, i] = work.Q[0, i]
        row[1, i] = row[2, i] = 0.0
    for k in range(model.index.shape[0]):
        row[2, model.index[k]] = step[k]
    rnea_kernel.rnea_batch(model.parents, model.prismatic, model.axes, model.R_tree,
                           model.p_tree, model.I, work.armature, row[0:1], row[1:2], row[2:3],
                           model.v0, model.v0, work.quiet, row[3:4])


@njit(cache=True)
def _calm(model, work, qd, ref):
    """Rule 8: per joint, swing[0] the mean |change| of the command per tick over about
    CHATTER_TIME [N·m], swing[1] its mean signed change, swing[2] the last command; swing[3:6]
    the same of the measured velocity qd [rad/s]. A command that swings by over CHATTER x
    the effort limit per tick, or a velocity by over VIBRATION x the velocity limit, while
    going nowhere (the signed mean under a quarter of it) chatters: the feedback is stiffer
    than the arm, and the estimates that stiffen it, a^ and b^, are halved (a^'s variance
    reset: it learns again), counted in `calmed`; so are they at a hunt (`_hunts`), which
    also halves c^. Off with the estimate off and for
    feedforward_pd (its gains are the user's, not the estimate's)."""
    if model.forget == 1.0 or model.pd:
        return
    beta = model.dt / CHATTER_TIME
    swing = work.swing
    for k in range(model.index.shape[0]):
        side = swing[7, k]
        hunts = _hunts(swing, k, work.e[0, k], _resting(ref, k), _hunt_decay(model, k))
        if hunts:
            work.theta[3, k] *= 0.5  # c^'s slope in e is the spring it hunts on
        v = qd[model.index[k]]
        if _resting(ref, k):
            if side != 0.0 and swing[7, k] != side:
                if abs(swing[5, k]) < _gate(model, k, work.e[0, k]) and _slips(work, k):
                    _released(model, work, k, v)
                else:
                    _crossed(model, work, k, v, work.integral[k])
                work.probe[9, k] = 0.0
            else:
                _stands(model, work, k, v)
        else:
            work.probe[5, k] = 0.0  # a moving reference ends a stand at rest
        chatters = _swings(swing, 0, k, work.tau[k], beta, 1.0, CHATTER * model.limits[k])
        vibrates = _swings(swing, 3, k, qd[model.index[k]], beta, 1.0 / model.velocity[k],
                           VIBRATION)
        if chatters or vibrates or hunts:
            work.theta[0, k] *= 0.5
            work.theta[1, k] *= 0.5
            work.P[k, 0, 0] = GAIN
            swing[0, k] = swing[1, k] = swing[3, k] = swing[4, k] = 0.0
            work.calmed[k] += 1.0


@njit(cache=True)
def _stands(model, work, k, v):
    """Rule 7's breakaway at rest: probe[4, k] keeps the integral when joint k came to a stand
    (slower than the integral's gate; swing[5, k] its velocity at the last tick), probe[5, k]
    how long it has stood; when it moves again towards its goal at velocity v [rad/s] after
    standing longer than its PD's own time Kd / Kp (which would have moved a free joint), or
    after the integral gathered the friction band it knows (`_band`) while it stood, what the
    integral gathered is what carried it through that band, and is taken out as at a
    crossing. A joint that rings about its goal never stands that long, nor gathers a band.
    probe[7, k], probe[8, k] keep the error and d^ when the stand began (`_held`); a held
    stand's breakaway is `_released`."""
    e = work.e[0, k]
    gate = _gate(model, k, e)
    was = abs(work.swing[5, k]) < gate
    if abs(v) < gate:
        if not was or work.probe[5, k] == 0.0:  # a stand begins (or the reference came to rest)
            work.probe[4, k] = work.integral[k]
            work.probe[5, k] = 0.0
            work.probe[7, k] = e
            work.probe[8, k] = work.theta[2, k]
            work.probe[9, k] = 0.0
        work.probe[5, k] += model.dt
        return
    if was and v * e > 0.0:
        gathered = work.integral[k] - work.probe[4, k]
        if _slips(work, k):
            _released(model, work, k, v)
        elif (work.probe[5, k] * _pace(model, k) > 1.0
              or 0.0 < _band(work, k) <= abs(gathered)):
            _crossed(model, work, k, v, gathered)
    work.probe[9, k] = 0.0  # it moves: no longer held


@njit(cache=True)
def _released(model, work, k, v):
    """Rule 7: joint k, held by its friction (`_held`), broke away towards its goal or crossed
    it at velocity v [rad/s]: if the integral gathered that way while it stood, it returns to
    its value when the stand began (kept, what broke the static friction is a Stribeck excess
    that carries the joint past its goal), and what was added, less the last lateness's
    growth (1 - e^(-1 / BAND_DELAYS) of it at most), measures the band where c^ does not
    (`_band`). The stand is no longer held."""
    gathered = work.integral[k] - work.probe[4, k]
    if gathered * v > 0.0 and work.schedule[INTEGRAL] > 0.0:
        if work.probe[9, k] > 0.0:
            work.probe[6, k] = abs(_added(work, k)) * math.exp(-1.0 / BAND_DELAYS)
        work.integral[k] = work.probe[4, k]
    work.probe[9, k] = 0.0


@njit(cache=True)
def _crossed(model, work, k, v, gathered):
    """Rule 7's reset: joint k crossed its goal at rest, or broke away towards it, at velocity
    v [rad/s]; the integral, if it drove that way, loses the estimated friction at v (b^ v +
    c tanh(v / w), c the band: c^, else the measured one, `_band`), at most what it
    `gathered` [N·m] (all of it at a crossing; at a breakaway, since the joint came to a
    stand), never past 0; kept while the schedule pauses the integral (its value is the
    caller's to keep)."""
    integral = work.integral[k]
    if integral * v > 0.0 and gathered * v > 0.0 and work.schedule[INTEGRAL] > 0.0:
        f = work.theta[1, k] * v + _band(work, k) * math.tanh(v / model.width)
        f = min(abs(f), abs(gathered))
        work.integral[k] = math.copysign(max(abs(integral) - f, 0.0), integral)


@njit(cache=True)
def _hunt_decay(model, k):
    """Rule 8's leak per tick of joint k's count of crossings, dt / T, T = HUNT_CROSSINGS /
    (2 HUNT_RATIO f_n), f_n = sqrt(Kp) / 2π the joint's PD natural frequency (computed
    torque's Kp [1/s²]): 0.31 s at the default ω = 20 rad/s. An oscillation at f crosses its
    goal 2 f T times in T; the count, leaking between crossings, peaks at 1 / (1 - exp(-1 /
    (2 f T))), past HUNT_CROSSINGS from f = 1.74 / T on: 0.87 HUNT_RATIO f_n, 5.5 Hz."""
    f_n = math.sqrt(max(model.kp[k], 0.0)) / (2.0 * math.pi)
    return model.dt * 2.0 * HUNT_RATIO * f_n / HUNT_CROSSINGS


@njit(cache=True)
def _hunts(swing, k, e, resting, decay):
    """Rule 8's hunt of joint k at rest: swing[6, k] its crossings of the goal beyond
    ±HUNT_AMPLITUDE [rad], leaking by `decay` per tick (`_hunt_decay`), swing[7, k] the
    side it was last on (±1, 0 before). True (the count restarted) beyond HUNT_CROSSINGS."""
    side = 1.0 if e > HUNT_AMPLITUDE else (-1.0 if e < -HUNT_AMPLITUDE else swing[7, k])
    swing[6, k] *= 1.0 - decay
    if resting and swing[7, k] != 0.0 and side != swing[7, k]:
        swing[6, k] += 1.0
    swing[7, k] = side
    if swing[6, k] > HUNT_CROSSINGS:
        swing[6, k] = 0.0
        return True
    return False


@njit(cache=True)
def _swings(swing, row, k, value, beta, scale, bound):
    """Rule 8's measure of one signal of joint k in swing[row:row + 3, k] (mean |change|,
    mean change, last value), updated with this tick's `value`: True if its mean |change|
    times `scale` exceeds `bound` while its signed mean stays under a quarter of it."""
    d = value - swing[row + 2, k]
    swing[row + 2, k] = value
    swing[row, k] += beta * (abs(d) - swing[row, k])
    swing[row + 1, k] += beta * (d - swing[row + 1, k])
    return (swing[row, k] * scale > bound
            and abs(swing[row + 1, k]) < 0.25 * swing[row, k])
