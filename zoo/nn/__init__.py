"""Building blocks shared by the model families."""
from zoo.nn.base import DeepGNN, ACTIVATIONS, RESIDUALS
from zoo.ops.segment import segment_softmax, segment_sum

__all__ = ["DeepGNN", "ACTIVATIONS", "RESIDUALS", "segment_softmax", "segment_sum"]
