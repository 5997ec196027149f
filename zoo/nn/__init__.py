"""Building blocks shared by the model families."""
from zoo.nn.attention_stack import AttentionStack
from zoo.nn.base import DeepGNN
from zoo.nn.model import AttentionOptions, GraphModel, LayerOptions, LeakyScoreOptions
from zoo.nn.validation import ACTIVATIONS, RESIDUALS
from zoo.ops.segment import segment_softmax, segment_sum

__all__ = ["AttentionStack", "AttentionOptions", "DeepGNN", "GraphModel", "LayerOptions", "LeakyScoreOptions", "ACTIVATIONS", "RESIDUALS", "segment_softmax", "segment_sum"]
