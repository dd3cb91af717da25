"""HMM language models trained with the parameterisations of Chiu, Deng, Rush, "Scaling
Hidden Markov Language Models".

- ``parameters``: the full softmax and the kernel (feature-map) transitions, with
  or without a band, and the gradient of the log evidence in each;
- ``evidence``: the batched scaled forward-backward recursion and the statistics the
  gradient needs, in the transition format's own cost (O(n F) per step for a kernel);
- ``train``: Adam on the evidence, held-out perplexity, seconds per epoch;
- ``data``: a corpus (the standard library's English by default) as chunks of word ids.

The gradients are derived by hand from the forward-backward statistics (checked
against finite differences in ``tests/hmmlm``): no autodiff library, and a kernel
step's gradient costs what its forward step costs.

>>> from pipeline.hmmlm.parameters import initial, transition_matrix
>>> transition_matrix(initial("kernel", 8, 5, n_features=2).transition).rank
2
"""
