"""Online EWC and SI penalties against hand computations."""

import pytest
import torch

from bimu.regularizers import OnlineEWC, SynapticIntelligence


def test_ewc_fisher_folds_with_gamma_over_tasks():
    p = torch.nn.Parameter(torch.tensor([0.0, 1.0]))
    ewc = OnlineEWC([p], importance=3.0, gamma=0.5)
    ewc.accumulate([torch.tensor([2.0, 0.0])])
    ewc.task_end([p])                             # F = [4, 0]
    ewc.accumulate([torch.tensor([1.0, 1.0])])
    ewc.accumulate([torch.tensor([3.0, -1.0])])
    with torch.no_grad():
        p.copy_(torch.tensor([1.0, 2.0]))
    ewc.task_end([p])                             # F = 0.5*[4, 0] + [(1+9)/2, (1+1)/2] = [7, 1]
    assert ewc.fisher[0].tolist() == [7.0, 1.0]
    assert ewc.anchor[0].tolist() == [1.0, 2.0] and ewc.n_accumulated == 0
    assert ewc.fisher_accumulator[0].abs().sum().item() == 0.0
    with torch.no_grad():
        p.copy_(torch.tensor([2.0, 0.0]))
    # 3/2 * (7 * 1 + 1 * 4)
    assert ewc.penalty([p]).item() == pytest.approx(16.5)


def test_ewc_penalty_gradient_matches_autograd_and_empty_task():
    p = torch.nn.Parameter(torch.tensor([0.5, -1.0, 2.0]))
    ewc = OnlineEWC([p], importance=2.0, gamma=1.0)
    ewc.task_end([p])  # no examples: F stays 0
    assert ewc.fisher[0].abs().sum().item() == 0.0
    ewc.fisher[0].copy_(torch.tensor([1.0, 2.0, 3.0]))
    with torch.no_grad():
        p.add_(torch.tensor([0.1, -0.2, 0.3]))
    (auto,) = torch.autograd.grad(ewc.penalty([p]), [p])
    assert torch.allclose(ewc.penalty_gradient([p])[0], auto)


def test_si_path_integral_and_importance_by_hand():
    p = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
    si = SynapticIntelligence([p], coefficient=0.5, damping=0.1)
    # two steps: g = [1, 2] then [3, -1]; deltas [-0.1, -0.2] then [-0.3, 0.1]
    si.accumulate([torch.tensor([1.0, 2.0])], [torch.tensor([-0.1, -0.2])])
    si.accumulate([torch.tensor([3.0, -1.0])], [torch.tensor([-0.3, 0.1])])
    assert si.path_integral[0].tolist() == pytest.approx([0.1 + 0.9, 0.4 + 0.1])
    with torch.no_grad():
        p.copy_(torch.tensor([-0.4, -0.1]))
    si.task_end([p])
    expected = [1.0 / (0.16 + 0.1), 0.5 / (0.01 + 0.1)]
    assert si.omega[0].tolist() == pytest.approx(expected, rel=1e-6)
    assert si.path_integral[0].abs().sum().item() == 0.0 and si.anchor[0].tolist() == pytest.approx([-0.4, -0.1])
    with torch.no_grad():
        p.add_(torch.tensor([1.0, 2.0]))
    assert si.penalty([p]).item() == pytest.approx(0.5 * (expected[0] * 1.0 + expected[1] * 4.0), rel=1e-6)
    (auto,) = torch.autograd.grad(si.penalty([p]), [p])
    assert torch.allclose(si.penalty_gradient([p])[0], auto)


def test_si_relu_option_clips_negative_increments():
    for relu, expected in ((False, [-1.0, 1.0]), (True, [0.0, 1.0])):
        p = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
        si = SynapticIntelligence([p], coefficient=1.0, damping=1.0, omega_relu=relu)
        si.accumulate([torch.tensor([1.0, 1.0])], [torch.tensor([1.0, -1.0])])  # omega = [-1, 1]
        si.task_end([p])
        assert si.omega[0].tolist() == expected


def test_state_round_trip_and_validation():
    p = torch.nn.Parameter(torch.tensor([1.0]))
    ewc = OnlineEWC([p], importance=1.0, gamma=0.3)
    ewc.accumulate([torch.tensor([2.0])])
    other = OnlineEWC([p], importance=1.0, gamma=0.3)
    other.load_state_dict(ewc.state_dict())
    assert other.fisher_accumulator[0].item() == 4.0 and other.n_accumulated == 1
    si = SynapticIntelligence([p], coefficient=1.0, damping=1.0)
    si.accumulate([torch.tensor([2.0])], [torch.tensor([-1.0])])
    other_si = SynapticIntelligence([p], coefficient=1.0, damping=1.0)
    other_si.load_state_dict(si.state_dict())
    assert other_si.path_integral[0].item() == 2.0
    for kwargs, name in [(dict(importance=-1.0, gamma=0.5), "importance"), (dict(importance=1.0, gamma=1.5), "gamma")]:
        with pytest.raises(ValueError, match=name):
            OnlineEWC([p], **kwargs)
    for kwargs, name in [(dict(coefficient=-1.0, damping=1.0), "coefficient"), (dict(coefficient=1.0, damping=0.0), "damping")]:
        with pytest.raises(ValueError, match=name):
            SynapticIntelligence([p], **kwargs)
    with pytest.raises(ValueError, match="shapes"):
        ewc.accumulate([torch.zeros(2)])
