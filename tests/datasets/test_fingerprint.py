"""The data's fingerprint: a hash over the tensors' bytes, kept per tensor version; the seal of a loaded task."""
from __future__ import annotations

import pickle

import torch

from zoo.datasets import load
from zoo.datasets.fingerprint import _DIGESTS, tensor_digest, weights_fingerprint


def test_a_digest_follows_in_place_changes_and_is_kept_while_unchanged():
    t = torch.arange(12.0).view(3, 4)
    first = tensor_digest(t)
    assert tensor_digest(t) == first and id(t) in _DIGESTS
    t[0, 0] = 5.0  # in place: the version moves
    assert tensor_digest(t) != first
    t[0, 0] = 0.0
    assert tensor_digest(t) == first  # the same bytes, the same digest
    assert tensor_digest(t.t()) != first  # another shape
    assert tensor_digest(t.to(torch.float64)) != first  # another dtype
    view = t[1]
    view += 1  # through a view: the base's version moves too
    assert tensor_digest(t) != first


def test_sparse_bool_and_empty_tensors_have_digests():
    dense = torch.eye(3)
    assert tensor_digest(dense.to_sparse()) == tensor_digest(dense.to_sparse().coalesce())
    assert tensor_digest(torch.tensor([True, False])) != tensor_digest(torch.tensor([False, True]))
    assert tensor_digest(torch.zeros(0, 2)) != tensor_digest(torch.zeros(2, 0))


def test_the_weights_fingerprint_sees_every_parameter():
    net = torch.nn.Linear(3, 2)
    before = weights_fingerprint(net)
    with torch.no_grad():
        net.bias += 1
    assert weights_fingerprint(net) != before


def test_a_loaded_task_is_as_made_until_its_data_changes():
    task = load("cornell")
    assert task.as_made()
    task.data.x = task.data.x.clone()  # replaced, by equal data: still the recipe's
    assert task.as_made()
    task.data.x[0, 0] += 1
    assert not task.as_made()
    copy = pickle.loads(pickle.dumps(load("cornell")))  # a copy is compared by content
    assert copy.as_made()


def test_a_task_with_a_callable_transform_still_pickles():
    task = load("cornell", transforms=[lambda d: d])
    copy = pickle.loads(pickle.dumps(task))
    assert copy.seal.reload is None and not copy.as_made()
