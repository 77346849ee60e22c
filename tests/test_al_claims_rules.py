"""The al-claims rules (:mod:`bimu.reproduce.al_rules`) on hand-made curves, verdicts computed by hand.

Each case is one a careful reviewer would decide otherwise than a rule on raw seed means does: a venue at
ceiling, a collapsed seed, curves with no informative overlap, a clear win at matched budget. Every run
here is three seeds (sample sds 0.01 or 0.02, so a difference of two seed means has sd
sqrt(sd_a^2 / 3 + sd_b^2 / 3): 0.82 points for 0.01 and 0.01, 1.29 for 0.02 and 0.01, 1.63 for 0.02 and 0.02);
the OpenLORIS side has 18 classes (chance 5.56%, "at chance" below 11.11%).
"""

import pytest

from bimu.reproduce import active_learning as al
from bimu.reproduce import al_claims, al_methods
from bimu.reproduce.spec import Options


def seeds(q, accs, rare=None, labels=None):
    """Three runs at queried fraction ``q`` with accuracies ``accs`` (rare classes ``rare``, default the same)."""
    rare = accs if rare is None else rare if isinstance(rare, (list, tuple)) else [rare] * len(accs)
    return [{"seed": s, "query_fraction": q, "accuracy": a, "rare_accuracy": r, "frequent_accuracy": a,
             "labels_queried": max(int(q * 60000), 11) if labels is None else labels}
            for s, (a, r) in enumerate(zip(accs, rare))]


@pytest.fixture
def rows(tmp_path):
    return al_methods.rows_for(Options(scale="full", out=str(tmp_path)), "openloris")


@pytest.fixture
def k_rows(tmp_path):
    return al.rows_vr_samples(Options(scale="full", out=str(tmp_path)))


BASE = seeds(1.0, [0.80, 0.82, 0.84], rare=0.5)  # 82.00 ± 2.00%, rare classes far below: not at ceiling


# ------------------------------------------------------------------------------------ claim 1
def test_claim_one_at_a_ceiling_is_not_decidable(rows):
    # baseline 98.00 ± 1.00 (within 5 points of 100%); VR's best 91.00 ± 1.00: -7.00 ± 0.82, beyond 2 sd.
    # On raw means this read "does not hold"; at a ceiling nothing can exceed the baseline.
    res = {"bimu-all": seeds(1.0, [0.97, 0.98, 0.99], rare=0.9), "bimu-vr-0.1": seeds(0.02, [0.90, 0.91, 0.92]),
           "bimu-vr-0.2": seeds(0.01, [0.80, 0.81, 0.82])}
    assert al_claims.claim_savings(rows, res, "openloris") == (
        "not decidable here: no informative VR row comes within 2 sd of the 100% baseline's 98.00 ± 1.00%; closest "
        "BiMU VR 0.1 at 2.00% queried, 91.00 ± 1.00% (difference -7.00 ± 0.82); at ceiling: the 100% baseline's "
        "98.00% is within 5 points of 100%")


def test_claim_one_matches_the_baseline_within_seed_noise(rows):
    # VR 81.00 ± 2.00 at 3% against 82.00 ± 2.00: -1.00 ± 1.63, within 2 sd: matched at 3% (33.3x <= 2 x 3.1%).
    # Raw means read "never reaches".
    res = {"bimu-all": BASE, "bimu-vr-0.1": seeds(0.03, [0.79, 0.81, 0.83])}
    assert al_claims.claim_savings(rows, res, "openloris") == (
        "holds: VR matches the 100% baseline's 82.00 ± 2.00% at 3.00% queried (33.3x; paper 32.3x at 3.1%): BiMU "
        "VR 0.1 at 3.00%, 81.00 ± 2.00% (difference -1.00 ± 1.63)")


def test_claim_one_leaves_out_a_row_with_a_collapsed_seed(rows):
    # VR 0.2: two seeds at 4% / 99%, one stopped after 2 labels (0.003%, 50%): its mean, 2.67% / 82.67%,
    # crosses the baseline at 2.67% (37.5x, "holds") only because the collapsed seed pulls the fraction down.
    # Without it VR first matches at 10% (VR 0.1: +3.00 ± 1.29): 10.0x, short of half the paper's 32.3x.
    collapsed = seeds(0.04, [0.99, 0.99, 0.50])
    collapsed[2].update(query_fraction=0.00003, labels_queried=2)
    res = {"bimu-all": BASE, "bimu-vr-0.2": collapsed, "bimu-vr-0.1": seeds(0.10, [0.84, 0.85, 0.86])}
    assert al_claims.claim_savings(rows, res, "openloris") == (
        "does not hold: VR matches the 100% baseline's 82.00 ± 2.00% at 10.00% queried (10.0x; paper 32.3x at "
        "3.1%): BiMU VR 0.1 at 10.00%, 85.00 ± 1.00% (difference +3.00 ± 1.29)")


# ------------------------------------------------------------------------------------ claim 2
RANDOM = {"bimu-random-0.01": seeds(0.01, [0.49, 0.50, 0.51], rare=[0.19, 0.20, 0.21]),
          "bimu-random-0.05": seeds(0.05, [0.69, 0.70, 0.71], rare=[0.39, 0.40, 0.41])}
VR = seeds(0.03, [0.80, 0.82, 0.84], rare=[0.60, 0.62, 0.64])


def test_claim_two_is_not_diluted_by_collapsed_rows(rows):
    # Raw means: VR 0.3 and 0.4 at chance (-44.44 each), VR 0.2 with a collapsed seed (-9.82), VR 0.1 +22.00:
    # mean -19.18, "does not hold". Informative points only: VR 0.1 against random at 3% (60.00 ± 1.00, rare
    # 30.00 ± 1.00): +22.00 ± 1.29 overall, +32.00 ± 1.29 on rare classes.
    collapsed = seeds(0.02, [0.60, 0.60, 0.0556], rare=[0.3, 0.3, 0.0])
    collapsed[2].update(query_fraction=0.00003, labels_queried=2)
    chance = seeds(0.01, [0.0556] * 3, rare=0.0, labels=2)
    res = {**RANDOM, "bimu-vr-0.1": VR, "bimu-vr-0.2": collapsed, "bimu-vr-0.3": chance, "bimu-vr-0.4": chance}
    assert al_claims.claim_random(rows, res) == (
        "holds: BiMU VR minus BiMU random at matched queried fractions (1 of 1 informative VR points matched): "
        "overall 3.00%: +22.00 ± 1.29 (mean +22.00 ± 1.29: holds); rare classes 3.00%: +32.00 ± 1.29 (mean "
        "+32.00 ± 1.29: holds)")


def test_claim_two_without_informative_overlap_is_not_decided(rows):
    # random querying's rows at 1% and 5% are at chance (5%): raw means compare VR at 3% with them (+77.00,
    # "holds"); its informative rows, 20% and 40%, are nowhere near 3%
    res = {"bimu-vr-0.1": VR, "bimu-random-0.01": seeds(0.01, [0.05] * 3), "bimu-random-0.05": seeds(0.05, [0.05] * 3),
           "bimu-random-0.2": seeds(0.20, [0.70, 0.71, 0.72]), "bimu-random-0.4": seeds(0.40, [0.80, 0.81, 0.82])}
    assert al_claims.claim_random(rows, res) == (
        "not decided: no informative VR point is matched by random querying; not matched (no random point within "
        "10%; its informative curve 20.00%-40.00%): BiMU VR 0.1 at 3.00%")


# ------------------------------------------------------------------------------------ claim 3
def test_claim_three_clear_win_at_the_end_of_a_curve(rows):
    # BiMU VR at 2.09%; MESU's curve ends at 2.08% (within 10%): its end row stands in, 97.00 - 89.00 = +8.00
    # ± 0.82 (raw means leave MESU out: "not decided"). BayesBiNN at 2.09%: 31 + 20 x 10.9 / 20 = 41.90%,
    # +55.10; STE: 41 + 10.90 = 51.90%, +45.10; both ± 0.82.
    res = {"bimu-vr-0.2": seeds(0.0209, [0.96, 0.97, 0.98]),
           "mesu-vr-0.1": seeds(0.0208, [0.88, 0.89, 0.90]), "mesu-vr-0.2": seeds(0.015, [0.80, 0.81, 0.82]),
           "bayesbinn-vr-0.1": seeds(0.03, [0.50, 0.51, 0.52]), "bayesbinn-vr-0.2": seeds(0.01, [0.30, 0.31, 0.32]),
           "ste-aleatoric-0.01": seeds(0.03, [0.60, 0.61, 0.62]), "ste-aleatoric-0.05": seeds(0.01, [0.40, 0.41, 0.42])}
    assert al_claims.claim_methods(rows, res) == (
        "holds: BiMU VR minus each at matched queried fractions: MESU VR 2.09%: +8.00 ± 0.82 (against its end, MESU "
        "VR 0.1 at 2.08%) (mean +8.00 ± 0.82: holds); BayesBiNN VR 2.09%: +55.10 ± 0.82 (mean +55.10 ± 0.82: holds); STE Aleatoric 2.09%: +45.10 ± 0.82 "
        "(mean +45.10 ± 0.82: holds)")


def test_claim_three_names_a_method_without_informative_overlap(rows):
    # STE's rows at 2% and 4% are at chance (raw means: +76.44 at 3%, "holds"); its informative rows lie at
    # 10-12%. MESU at 3%: 66.00 (+16.00 ± 1.29), BayesBiNN 36.00 (+46.00 ± 1.29).
    res = {"bimu-vr-0.1": seeds(0.03, [0.80, 0.82, 0.84]),
           "mesu-vr-0.1": seeds(0.02, [0.60, 0.61, 0.62]), "mesu-vr-0.2": seeds(0.04, [0.70, 0.71, 0.72]),
           "bayesbinn-vr-0.1": seeds(0.02, [0.30, 0.31, 0.32]), "bayesbinn-vr-0.2": seeds(0.04, [0.40, 0.41, 0.42]),
           "ste-aleatoric-0.01": seeds(0.02, [0.0556] * 3), "ste-aleatoric-0.05": seeds(0.04, [0.0556] * 3),
           "ste-aleatoric-0.1": seeds(0.10, [0.50, 0.51, 0.52]), "ste-aleatoric-0.25": seeds(0.12, [0.55, 0.56, 0.57])}
    assert al_claims.claim_methods(rows, res) == (
        "not decided (holds against MESU VR and BayesBiNN VR, not against all three): BiMU VR minus each at matched "
        "queried fractions: MESU VR 3.00%: +16.00 ± 1.29 (mean +16.00 ± 1.29: holds); BayesBiNN VR 3.00%: +46.00 ± "
        "1.29 (mean +46.00 ± 1.29: holds); not compared: STE Aleatoric (its informative curve 10.00%-12.00% "
        "queried, no point within 10% of BiMU's 3.00%-3.00%)")


def test_claim_three_context_sets_each_rule_beside_its_own_baseline(rows):
    # BiMU: baseline 82.00 ± 2.00; VR 0.1 (3%) 90.00 ± 1.00 is its best informative point (VR 0.2, 85.00 at
    # 1%, is lower): +8.00 ± sqrt(1/3 + 4/3) = 1.29. MESU: 90.00 ± 1.00 against 89.00 ± 1.00, +1.00 ± 0.82,
    # so MESU leads at matched budget while BiMU's rule gains more. BayesBiNN's baseline diverged on every
    # seed; STE's only rule row is at chance.
    diverged = [dict(r, diverged=True) for r in seeds(1.0, [0.05] * 3)]
    res = {"bimu-all": BASE, "bimu-vr-0.1": seeds(0.03, [0.89, 0.90, 0.91]),
           "bimu-vr-0.2": seeds(0.01, [0.84, 0.85, 0.86]),
           "mesu-all": seeds(1.0, [0.88, 0.89, 0.90]), "mesu-vr-0.1": seeds(0.03, [0.89, 0.90, 0.91]),
           "bayesbinn-all": diverged, "ste-all": seeds(1.0, [0.49, 0.50, 0.51]),
           "ste-aleatoric-0.01": seeds(0.03, [0.0556] * 3)}
    assert al_claims.methods_in_context(rows, res) == (
        "BiMU: 100% updates 82.00 ± 2.00%, BiMU VR 0.1 (3.00% queried) 90.00 ± 1.00%, +8.00 ± 1.29; "
        "MESU: 100% updates 89.00 ± 1.00%, MESU VR 0.1 (3.00% queried) 90.00 ± 1.00%, +1.00 ± 0.82; "
        "BayesBiNN: 100% updates, every seed diverged; STE: 100% updates 50.00 ± 1.00%, no informative Aleatoric point")
    assert al_claims.methods_in_context(rows, {}) is None


# ------------------------------------------------------------------------------------ claim 6
def test_claim_six_at_a_ceiling_is_not_decidable(k_rows):
    # baseline 98.00 ± 1.00 (at ceiling); K = 10 matches at 2% (98.50 ± 0.50: 50.0x); K = 2 and 3 never come
    # within 2 sd (71.00 and 81.00): raw means read "does not hold"
    res = {"all": seeds(1.0, [0.97, 0.98, 0.99], rare=0.9), "vr-K10-n1": seeds(0.02, [0.98, 0.985, 0.99]),
           "vr-K3-n1": seeds(0.02, [0.80, 0.81, 0.82]), "vr-K2-n1": seeds(0.02, [0.70, 0.71, 0.72])}
    assert al_claims.claim_small_k(k_rows, {**{r.slug: [] for r in k_rows}, **res}) == (
        "not decidable here: saving where informative VR first matches the 100% baseline's 98.00 ± 1.00%: K = 2: "
        "never matches it, K = 3: never matches it, K = 10: 50.0x (2.00%; 0.10: 98.50 ± 0.50%); at ceiling: the "
        "100% baseline's 98.00% is within 5 points of 100%")


def test_claim_six_clear_win_within_seed_noise(k_rows):
    # K = 3 at 2.5%: 81.00 ± 2.00 against 82.00 ± 2.00, -1.00 ± 1.63: matched, 40.0x >= half of K = 10's 50.0x
    # (83.00 at 2%); raw means: K = 3 never reaches 82.00, "does not hold"
    res = {"all": BASE, "vr-K10-n1": seeds(0.02, [0.82, 0.83, 0.84]), "vr-K3-n1": seeds(0.025, [0.79, 0.81, 0.83])}
    assert al_claims.claim_small_k(k_rows, {**{r.slug: [] for r in k_rows}, **res}) == (
        "holds: saving where informative VR first matches the 100% baseline's 82.00 ± 2.00%: K = 3: 40.0x (2.50%; "
        "0.33: 81.00 ± 2.00%), K = 10: 50.0x (2.00%; 0.10: 83.00 ± 1.00%)")


def test_a_claim_waits_for_its_unfinished_rows():
    from bimu.reproduce import al_claims

    rows = [al.ALRow([], slug, {}) for slug in ("all", "vr-0.1", "vr-0.2")]
    done = {"all": [{"seed": 0}, {"seed": 1}, {"seed": 2}], "vr-0.1": [{"seed": 0}, {"seed": 1}, {"seed": 2}]}
    cell = al_claims.unfinished(rows, done)
    assert cell == "not decided: 2 of its 3 rows have runs of seeds 0, 1, 2; unfinished: vr-0.2"
    assert al_claims.unfinished(rows, {**done, "vr-0.2": [{"seed": 0}]}).endswith("unfinished: vr-0.2")
    assert al_claims.unfinished(rows, {**done, "vr-0.2": done["all"]}) is None
    # a row the claim reads is measured against the seeds of its whole entry
    assert al_claims.unfinished(rows[:1], {"all": [{"seed": 0}], "x": [{"seed": 1}]},
                                rows + [al.ALRow([], "x", {})]).endswith("unfinished: all")
    assert al_claims.unfinished(rows, {}) is None  # no runs at all: the claim's own rule says what is missing
