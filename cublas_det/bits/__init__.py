"""The bit level, shared by the checks and the training-run diff: ULP distances, mismatches and their
location (:mod:`.compare`, on the GPU through :mod:`.gpu`), digests (:mod:`.digest`), and streamed
comparisons of stored tensors (:mod:`.streams`)."""
