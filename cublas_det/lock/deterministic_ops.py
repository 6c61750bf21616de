"""The aten ops PyTorch makes repeat their bits under ``torch.use_deterministic_algorithms(True)``, so that the
audit can name the setting with an op that did not repeat; plain data, read without PyTorch."""

from __future__ import annotations

SETTING = "torch.use_deterministic_algorithms(True)"
# From PyTorch 2.13's documentation of the setting, its list of "normally-nondeterministic operations [that]
# will act deterministically when mode=True", by the aten op each reaches (the ops of its other list raise
# under the setting instead, so it makes them refuse, not repeat). An op name, or (name, overloads). The
# backward ops named were read under a TorchDispatchMode (PyTorch 2.13): index_select's and repeat_interleave's
# backward run index_add, gather's scatter_add, indexing's index_put.
MADE_DETERMINISTIC = {
    "convolution": "torch.nn.Conv1d/2d/3d and ConvTranspose1d/2d/3d on CUDA tensors",
    "convolution_backward": "torch.nn.Conv1d/2d/3d and ConvTranspose1d/2d/3d on CUDA tensors",
    "replication_pad1d_backward": "torch.nn.ReplicationPad1d differentiated on CUDA",
    "replication_pad2d_backward": "torch.nn.ReplicationPad2d differentiated on CUDA",
    "replication_pad3d_backward": "torch.nn.ReplicationPad3d differentiated on CUDA",
    "index_put": "Tensor.index_put with accumulate=False (with accumulate=True, as indexing's backward: on the CPU)",
    "_index_put_impl": "Tensor.index_put with accumulate=False (with accumulate=True: on the CPU)",
    "put": "Tensor.put_ with accumulate=True on the CPU",
    "scatter_add": "Tensor.scatter_add_, and gather's backward, on CUDA",
    "index_add": "torch.index_add, and index_select's and repeat_interleave's backward, on CUDA",
    "index_copy": "Tensor.index_copy on the CPU or CUDA",
    ("scatter", ("src",)): "Tensor.scatter with a Tensor src on CUDA",
    "scatter_reduce": "Tensor.scatter_reduce with reduce='sum' or 'mean' on CUDA",
    "max_pool3d_with_indices_backward": "torch.nn.MaxPool3d differentiated on CUDA",
}


def repeat_hint(op: str) -> str:
    """The setting that makes ``op`` (``aten.index_add_.default``, as the audit names it) repeat its bits, in
    a sentence; "" where PyTorch documents none."""
    _, _, rest = op.partition(".")
    packet, _, overload = rest.partition(".")
    packet = packet.rstrip("_") or packet  # index_add_, the in-place form, is documented as index_add
    for key, documented in MADE_DETERMINISTIC.items():
        name, overloads = key if isinstance(key, tuple) else (key, None)
        if name == packet and (overloads is None or overload in overloads):
            return f"{SETTING} makes it repeat: PyTorch documents {documented} as deterministic under it"
    return ""
