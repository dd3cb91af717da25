"""HMM language models trained with the parameterisations of Chiu, Deng, Rush, "Scaling
Hidden Markov Language Models".

- ``parameters``: the full softmax, the neural (``neural``: embeddings through a residual
  MLP) and the kernel (feature-map) transitions, with or without a band, and the gradient
  of the log evidence in each;
- ``evidence``: the batched scaled forward-backward recursion and the statistics the
  gradient needs, in the transition format's own cost (O(n F) per step for a kernel);
- ``clusters``, ``blocks``, ``blocked``, ``blocked_kernel``: blocked emissions (word
  clusters owning blocks of states), the compiled recursion over one k x k block per
  token, state dropout;
- ``train``: Adam on the evidence over streams in segments with the state carried,
  gradient clipping, the rate's decay, held-out perplexity, seconds per epoch;
- ``split``: a model of 2n states from one of n with the same evidence (growing);
- ``ngram``: the Kneser-Ney baselines, interpolated and modified;
- ``data``: a corpus (``pipeline.corpus``) split by document, as streams of word ids.

The gradients are derived by hand from the forward-backward statistics (checked
against finite differences in ``tests/hmmlm``): no autodiff library, and a kernel
step's gradient costs what its forward step costs.

>>> from pipeline.hmmlm.parameters import initial, transition_matrix
>>> transition_matrix(initial("kernel", 8, 5, n_features=2).transition).rank
2
"""
