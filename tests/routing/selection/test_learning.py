"""Routing learns which backend serves which intent best, and follows when that changes:
bench/learning.py's simulator, driving routing's own code in virtual time."""

from __future__ import annotations

from bench.learning import Simulation, _followed, report
from bench.learning_scenarios import TUNING, with_questions
from routing.selection.scoring import PolicyValues


def test_the_issue_scenario_is_learned_and_its_swap_followed() -> None:
    """Three backends with hidden profiles per intent; half-way two swap profiles."""
    run = Simulation(TUNING["issue"], PolicyValues(), seed=1).simulate()
    verdict = report(run, verbose=False)
    assert verdict.share_after_300 >= 0.93  # first choice = the best backend for the intent
    drift_at, drift_time, _ = run.drift_times[0]
    followed = _followed(run, drift_at, drift_time)
    assert all(found is not None for found in followed.values()), followed
    assert max(found[1] for found in followed.values() if found is not None) < 60
    assert verdict.kept_out == 0  # no backend benched for an intent it did not fail


def test_a_hanging_backend_loses_first_place_to_its_attempts_in_flight() -> None:
    run = Simulation(with_questions(TUNING["hang"], 1300), PolicyValues(), seed=1).simulate()
    drift_at = run.drift_times[0][0]
    after = [q for q in run.questions if q.n >= drift_at + 20]
    assert sum(q.first == "B2" for q in after) / len(after) > 0.97


def test_without_exploration_a_backend_that_improves_is_never_found() -> None:
    """What exploration is for: a backend routing passes by gets better, and the
    incumbent never fails, so fallback never measures it; with exploration off, it is
    never tried again."""
    scenario = TUNING["improving"]
    explored = Simulation(scenario, PolicyValues(), seed=1).simulate()
    greedy = Simulation(scenario, PolicyValues(exploration=0.0), seed=1).simulate()

    def found_new(run: object) -> float:
        late = [q for q in run.questions if q.n >= 2000]  # type: ignore[attr-defined]
        return sum(q.first == "B2" for q in late) / len(late)

    assert found_new(explored) > 0.9
    assert found_new(greedy) == 0


def test_hedging_answers_sooner_when_the_first_backend_hangs() -> None:
    """The simulator hedges as routing.answering.execution does: past the first
    candidate's usual latency the next one starts too, and the first answer wins."""
    scenario = with_questions(TUNING["hang"], 1300)

    def after_the_hang(hedging: bool) -> tuple[int, float]:
        run = Simulation(scenario, PolicyValues(hedging=hedging), seed=1).simulate()
        drift_at = run.drift_times[0][0]
        after = [q for q in run.questions if q.n >= drift_at and q.answered]
        waited = sum(q.end - q.start for q in after) / len(after)
        return sum(q.hedged for q in run.questions), waited

    hedged, waited = after_the_hang(True)
    not_hedged, waited_alone = after_the_hang(False)
    assert not_hedged == 0
    assert hedged > 100
    assert waited < 0.8 * waited_alone
